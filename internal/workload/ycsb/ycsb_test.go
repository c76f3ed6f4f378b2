package ycsb

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/workload"
	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/driver/drivertest"
	"github.com/strata-db/strata/internal/workload/gen"
)

func mustNew(t *testing.T, cfg Config) *Workload {
	t.Helper()
	if cfg.Records == 0 {
		cfg.Records = 1000
	}
	if cfg.Fields == 0 {
		cfg.Fields, cfg.FieldLength = 10, 100
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The operation mix of each core workload, as YCSB's workload files define
// it, drawn by Next without touching a store.
func TestOperationMixProportions(t *testing.T) {
	want := map[string]map[string]float64{
		"a": {"read": 0.5, "update": 0.5},
		"b": {"read": 0.95, "update": 0.05},
		"c": {"read": 1},
		"d": {"read": 0.95, "insert": 0.05},
		"e": {"scan": 0.95, "insert": 0.05},
		"f": {"read": 0.5, "rmw": 0.5},
	}
	const draws = 100_000
	for letter, mix := range want {
		w := mustNew(t, Config{Workload: letter})
		wk := w.newWorker(nil, rand.New(rand.NewPCG(1, 2)), false)
		names := w.OpNames()
		if len(names) != len(mix) {
			t.Errorf("%s: operation types %v, want %v", letter, names, mix)
		}
		counts := map[string]int{}
		for i := 0; i < draws; i++ {
			op := wk.Next()
			counts[names[op]]++
			if wk.op == opInsert {
				w.counter.Acknowledge(wk.keynum)
			}
		}
		for name, p := range mix {
			got := float64(counts[name]) / draws
			if sd := math.Sqrt(p * (1 - p) / draws); math.Abs(got-p) > 5*sd+1e-9 {
				t.Errorf("workload %s: %s is %.4f of the operations, want %.2f", letter, name, got, p)
			}
		}
		if want := Workloads[letter].Distribution; w.Distribution() != want {
			t.Errorf("workload %s distribution %s, want %s", letter, w.Distribution(), want)
		}
	}
}

// Readers never choose a record whose insert is not acknowledged, under
// every distribution.
func TestKeysStayWithinAcknowledgedInserts(t *testing.T) {
	for _, dist := range Distributions {
		w := mustNew(t, Config{Workload: "d", Distribution: dist, Records: 100, Operations: 10_000})
		r := rand.New(rand.NewPCG(3, 4))
		wk := w.newWorker(nil, r, false)
		var pending []uint64
		for i := 0; i < 20_000; i++ {
			wk.Next()
			if wk.op == opInsert {
				pending = append(pending, wk.keynum)
				// Acknowledge out of order, some late.
				if len(pending) > 3 {
					j := r.IntN(len(pending))
					w.counter.Acknowledge(pending[j])
					pending = append(pending[:j], pending[j+1:]...)
				}
				continue
			}
			if int64(wk.keynum) > w.counter.Last() {
				t.Fatalf("%s: read of record %d, but only records up to %d are acknowledged", dist, wk.keynum, w.counter.Last())
			}
		}
		if w.counter.Last() < 500 {
			t.Errorf("%s: only %d records acknowledged", dist, w.counter.Last())
		}
	}
}

// Workload d reads what was inserted last.
func TestWorkloadDReadsLatestInserts(t *testing.T) {
	w := mustNew(t, Config{Workload: "d", Records: 1000})
	wk := w.newWorker(nil, rand.New(rand.NewPCG(5, 6)), false)
	recent, reads := 0, 0
	for i := 0; i < 50_000; i++ {
		wk.Next()
		if wk.op == opInsert {
			w.counter.Acknowledge(wk.keynum)
			continue
		}
		reads++
		if int64(wk.keynum) > w.counter.Last()-10 {
			recent++
		}
	}
	// The ten newest records: Zeta(10)/Zeta(n) of the reads, over 30% here;
	// uniform would give them about 0.3%.
	if share := float64(recent) / float64(reads); share < 0.3 {
		t.Errorf("the ten newest records got %.3f of the reads", share)
	}
}

func TestScanLengthsAndFieldUpdates(t *testing.T) {
	w := mustNew(t, Config{Workload: "e"})
	wk := w.newWorker(nil, rand.New(rand.NewPCG(7, 8)), false)
	seen := map[int]bool{}
	for i := 0; i < 20_000; i++ {
		wk.Next()
		if wk.op == opInsert {
			w.counter.Acknowledge(wk.keynum)
			continue
		}
		if wk.scanLen < 1 || wk.scanLen > 100 {
			t.Fatalf("scan length %d outside 1..100", wk.scanLen)
		}
		seen[wk.scanLen] = true
	}
	if len(seen) != 100 {
		t.Errorf("%d distinct scan lengths, want all 100", len(seen))
	}
	if w2 := mustNew(t, Config{Workload: "e", MaxScanLength: 7}); w2.scanMax != 7 {
		t.Errorf("--max-scan-length ignored")
	}
	if w3 := mustNew(t, Config{Workload: "a"}); w3.scanMax != 1000 {
		t.Errorf("default max scan length %d, want 1000", w3.scanMax)
	}

	// A field-level update fills only the chosen field; a whole-record one
	// fills all.
	for _, whole := range []bool{false, true} {
		w := mustNew(t, Config{Workload: "a"})
		wk := w.newWorker(nil, rand.New(rand.NewPCG(9, 10)), whole)
		for wk.Next(); wk.op != opUpdate; wk.Next() {
		}
		filled := 0
		for _, f := range wk.fields {
			if f[0] != 0 {
				filled++
			}
		}
		if want := map[bool]int{false: 1, true: 10}[whole]; filled != want {
			t.Errorf("whole=%v: %d fields filled, want %d", whole, filled, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Workload: "g", Records: 1, Fields: 1, FieldLength: 1}, `unknown YCSB workload "g"`},
		{Config{Workload: "a", Records: 0, Fields: 1, FieldLength: 1}, "records must be at least 1"},
		{Config{Workload: "a", Records: 1, Fields: 0, FieldLength: 1}, "fields and field length"},
		{Config{Workload: "a", Records: 1, Fields: 1, FieldLength: 1, Distribution: "hotspot"}, `unknown request distribution "hotspot"`},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if w, err := New(Config{Workload: "C", Records: 1, Fields: 1, FieldLength: 1}); err != nil || w.Name() != "ycsb-c" {
		t.Errorf("upper-case workload letter: %v", err)
	}
	w := mustNew(t, Config{Workload: "a", Fields: 3, FieldLength: 5})
	if s := w.Schema(); s.Fields() != 3 || s.Columns[2] != "FIELD2" || s.HashFields[0] != "field0" || s.Table != "usertable" {
		t.Errorf("schema %+v", s)
	}
	fields := [][]byte{make([]byte, 5), make([]byte, 5), make([]byte, 5)}
	if k := w.LoadRecord(42, rand.New(rand.NewPCG(1, 1)), fields); k != gen.Key("user", 42) {
		t.Errorf("record 42 key %s", k)
	}
}

// End to end against real servers: every operation of every workload
// succeeds on freshly loaded data, inserts included (workload d reads its
// own inserts; e scans over them).
func runAgainst(t *testing.T, cfg driver.Config, letters string) {
	ctx := drivertest.Context(t)
	for _, letter := range letters {
		w := mustNew(t, Config{Workload: string(letter), Records: 2000, Fields: 4, FieldLength: 20})
		s, err := driver.Open(ctx, cfg, w.Schema())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Init(ctx, true); err != nil {
			t.Fatal(err)
		}
		var log, out bytes.Buffer
		o := workload.Options{Threads: 4, Duration: 700 * time.Millisecond, DisplayEvery: 200 * time.Millisecond, Seed: 1, Out: &out, Log: &log}
		if err := workload.Load(ctx, w, s, o); err != nil {
			t.Fatal(err)
		}
		res := workload.Run(ctx, w, s, o)
		s.Close()
		if res.Errors != 0 || res.Ops == 0 {
			t.Errorf("%s on %s: %d ops, %d errors\n%s%s", w.Name(), cfg.Driver, res.Ops, res.Errors, out.String(), log.String())
		}
	}
}

func TestWorkloadsAgainstRedis(t *testing.T) {
	srv := drivertest.StartRedis(t)
	runAgainst(t, driver.Config{Driver: "resp", Addr: srv.Addr, Conns: 4, Timeout: 5 * time.Second}, "abcdf")
	runAgainst(t, driver.Config{Driver: "resp", Addr: srv.Addr, Conns: 4, Timeout: 5 * time.Second, RESPRecords: "hash"}, "af")
}

func TestWorkloadsAgainstEtcd(t *testing.T) {
	srv := drivertest.StartEtcd(t)
	runAgainst(t, driver.Config{Driver: "etcd", Endpoints: []string{srv.Addr}, Conns: 1, Timeout: 5 * time.Second}, "ade")
}
