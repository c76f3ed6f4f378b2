package sql

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/kv/kvtest"
	"github.com/strata-db/strata/internal/sql/catalog"
)

// manualClock is a clock the test moves.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// schemaChangeHarness runs several SQL engines over one storage, each with
// its own schema cache and lease, nothing in the background: the script
// says when an engine looks for a new version (tick) and when the DDL
// owner takes a step.
type schemaChangeHarness struct {
	t        *testing.T
	ctx      context.Context // canceled at the end: statements still running stop
	store    kv.Storage
	clock    *manualClock
	engines  map[string]*Engine
	sessions map[string]*Session
	pending  map[string]chan error // sessions running a statement in the background
}

const harnessLease = 10 * time.Second

// TestSchemaChange drives F1's online schema change protocol step by step
// with several engines over one storage (testdata/schema_change):
//
//	engines [names=a,b] [batch=N] [workers=N]
//	                          start engines (manual mode; one backfill worker unless
//	                          told); the first is the DDL owner
//	exec S / query S          run statements on session S (engine = S's first letter);
//	                          exec prints ok or the error, query the rows
//	ddl S                     exec while every engine not held ticks and takes owner steps
//	submit S                  run a statement on S in the background
//	wait S [timeout=D]        wait for it: ok, the error, or "still running"
//	tick E                    engine E's background round: load a new version, floor, lease, ownership
//	step E                    one DDL owner step on engine E
//	advance D                 move the clock
//	hold E / release E        E cannot / can reach the storage for its lease and schema
//	leases                    the stored leases; owner
//	jobs                      ADMIN SHOW DDL JOBS without the times
func TestSchemaChange(t *testing.T) {
	datadriven.Walk(t, "testdata/schema_change", func(t *testing.T, path string) {
		h := &schemaChangeHarness{t: t, store: kvtest.NewMemStorage(),
			clock:   &manualClock{t: time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
			engines: map[string]*Engine{}, sessions: map[string]*Session{}, pending: map[string]chan error{}}
		// Always the in-memory double: a real node's own SQL engine would
		// take part in the protocol, on the wall clock.
		ctx, cancel := context.WithCancel(context.Background())
		h.ctx = ctx
		t.Cleanup(func() {
			cancel()
			for _, ch := range h.pending {
				<-ch
			}
			for _, e := range h.engines {
				e.Close()
			}
		})
		datadriven.RunTest(t, path, h.run)
	})
}

func (h *schemaChangeHarness) engine(name string) *Engine {
	e := h.engines[name]
	if e == nil {
		h.t.Fatalf("no engine %q", name)
	}
	return e
}

func (h *schemaChangeHarness) names() []string {
	var out []string
	for n := range h.engines {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (h *schemaChangeHarness) session(name string) *Session {
	s := h.sessions[name]
	if s == nil {
		s = h.engine(name[:1]).NewSession("root", "localhost")
		h.sessions[name] = s
	}
	return s
}

// jobCount counts the jobs ever submitted.
func (h *schemaChangeHarness) jobCount() int {
	n := 0
	err := h.engines[h.names()[0]].readOnly(h.ctx, func(txn kv.Txn) error {
		q, err := catalog.Jobs(h.ctx, txn)
		if err != nil {
			return err
		}
		hist, err := catalog.RecentHistory(h.ctx, txn, 0)
		n = len(q) + len(hist)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *schemaChangeHarness) busy(name string) bool {
	_, ok := h.pending[name]
	return ok
}

func (h *schemaChangeHarness) state(e *Engine) string {
	l := e.selfLease()
	out := fmt.Sprintf("%s: version %d, floor %d", e.id, l.Loaded, l.Floor)
	if e.isOwner() {
		out += ", DDL owner"
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return "error: " + err.Error()
}

func (h *schemaChangeHarness) run(t *testing.T, d *datadriven.TestData) string {
	ctx := h.ctx
	arg := func(i int) string {
		if i >= len(d.CmdArgs) {
			t.Fatalf("%s: missing argument", d.Cmd)
		}
		return d.CmdArgs[i].Key
	}
	switch d.Cmd {
	case "engines":
		names := []string{"a", "b"}
		batch, workers := 0, 1
		for _, a := range d.CmdArgs {
			switch a.Key {
			case "names":
				names = a.Vals
			case "batch":
				batch, _ = strconv.Atoi(a.Vals[0])
			case "workers":
				workers, _ = strconv.Atoi(a.Vals[0])
			}
		}
		var out []string
		for _, n := range names {
			e, err := NewEngine(ctx, h.store, Options{ID: n, Manual: true, Clock: h.clock, SchemaLease: harnessLease,
				SchemaPoll: time.Millisecond, BackfillBatch: batch, BackfillWorkers: workers, ImportRunBatches: 1})
			if err != nil {
				t.Fatal(err)
			}
			h.engines[n] = e
			out = append(out, h.state(e))
		}
		return strings.Join(out, "\n") + "\n"
	case "exec", "query":
		if h.busy(arg(0)) {
			return "error: session " + arg(0) + " is still running a statement\n"
		}
		rs, err := h.session(arg(0)).Execute(ctx, d.Input)
		if err != nil || d.Cmd == "exec" {
			return errText(err) + "\n"
		}
		out := rowsText(rs[len(rs)-1].Rows)
		if out == "" {
			return "(no rows)\n"
		}
		return out + "\n"
	case "ddl":
		// Runs the statement while every engine that is not held ticks and
		// takes owner steps, as their background loops would.
		s := h.session(arg(0))
		ch := make(chan error, 1)
		input := d.Input // d is reused for the next directive
		go func() {
			_, err := s.Execute(ctx, input)
			ch <- err
		}()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case err := <-ch:
				for _, n := range h.names() {
					_ = h.engines[n].Tick(ctx) // leases up to date: the output does not depend on timing
				}
				return errText(err) + "\n"
			case <-deadline:
				t.Fatalf("ddl %s did not finish", d.Input)
			case <-time.After(time.Millisecond):
			}
			for _, n := range h.names() {
				e := h.engines[n]
				_ = e.Tick(ctx)
				_, _ = e.RunDDLStep(ctx)
			}
		}
	case "submit":
		name := arg(0)
		s := h.session(name)
		before := h.jobCount()
		ch := make(chan error, 1)
		input := d.Input // d is reused for the next directive
		go func() {
			_, err := s.Execute(ctx, input)
			ch <- err
		}()
		// A DDL statement is submitted once its job is queued (or it ended).
		ddl := true
		switch w := strings.ToUpper(strings.Fields(d.Input)[0]); w {
		case "INSERT", "UPDATE", "DELETE", "REPLACE", "SELECT", "BEGIN", "COMMIT":
			ddl = false
		}
		for deadline := time.Now().Add(5 * time.Second); ddl && h.jobCount() == before && time.Now().Before(deadline); {
			select {
			case err := <-ch:
				return errText(err) + "\n"
			case <-time.After(time.Millisecond):
			}
		}
		h.pending[name] = ch
		return "submitted\n"
	case "wait":
		name := arg(0)
		ch, ok := h.pending[name]
		if !ok {
			t.Fatalf("session %s runs nothing", name)
		}
		timeout := 5 * time.Second
		if d.HasArg("timeout") {
			var v string
			d.ScanArgs(t, "timeout", &v)
			timeout, _ = time.ParseDuration(v)
		}
		select {
		case err := <-ch:
			delete(h.pending, name)
			return errText(err) + "\n"
		case <-time.After(timeout):
			return "still running\n"
		}
	case "tick":
		e := h.engine(arg(0))
		if err := e.Tick(ctx); err != nil {
			return errText(err) + "\n"
		}
		return h.state(e) + "\n"
	case "step":
		r, err := h.engine(arg(0)).RunDDLStep(ctx)
		if err != nil {
			return errText(err) + "\n"
		}
		return r.String() + "\n"
	case "advance":
		dur, err := time.ParseDuration(arg(0))
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(dur)
		return "ok\n"
	case "hold", "release":
		e := h.engine(arg(0))
		e.sl.mu.Lock()
		e.sl.held = d.Cmd == "hold"
		e.sl.mu.Unlock()
		return "ok\n"
	case "leases":
		var out []string
		err := h.engine("a").readOnly(ctx, func(txn kv.Txn) error {
			ls, err := catalog.EngineLeases(ctx, txn)
			if err != nil {
				return err
			}
			now := h.clock.Now().UnixNano()
			for _, l := range ls {
				out = append(out, fmt.Sprintf("%s: loaded %d, floor %d, expires in %s", l.ID, l.Loaded, l.Floor,
					time.Duration(l.Expires-now)))
			}
			o, err := catalog.GetOwner(ctx, txn)
			if o != nil {
				out = append(out, fmt.Sprintf("owner %s, expires in %s", o.ID, time.Duration(o.Expires-now)))
			}
			return err
		})
		if err != nil {
			return errText(err) + "\n"
		}
		sort.Strings(out)
		return strings.Join(out, "\n") + "\n"
	case "jobs":
		rs, err := h.session("a0").Execute(ctx, "ADMIN SHOW DDL JOBS")
		if err != nil {
			return errText(err) + "\n"
		}
		var out []string
		for _, r := range rs[0].Rows {
			// JOB_ID TABLE_NAME JOB_TYPE SCHEMA_STATE ROW_COUNT STATE
			out = append(out, fmt.Sprintf("%s %s %s | %s | rows %s | %s", r[0].AppendText(nil), r[2].AppendText(nil),
				r[3].AppendText(nil), r[4].AppendText(nil), r[7].AppendText(nil), r[11].AppendText(nil)))
		}
		return strings.Join(out, "\n") + "\n"
	}
	t.Fatalf("unknown command %s", d.Cmd)
	return ""
}
