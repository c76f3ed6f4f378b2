package sql_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/kv/kvtest"
	"github.com/strata-db/strata/internal/sql"
)

// countingStorage counts the transactions begun on a storage: each costs a
// timestamp from the TSO and reads of a region in a cluster.
type countingStorage struct {
	kv.Storage
	begun atomic.Int64
}

func (c *countingStorage) Begin(ctx context.Context, opts kv.TxnOptions) (kv.Txn, error) {
	c.begun.Add(1)
	return c.Storage.Begin(ctx, opts)
}

// An engine nobody uses backs off: after its hold it reads the cluster's
// counters at most every SchemaIdlePoll, not every SchemaPoll. A schema
// change made through another engine still reaches it within
// SchemaIdlePoll, and a DDL job queued on the other engine, which this one
// owns, still runs; after that change it looks every SchemaPoll again, so
// the next change shows within a few polls.
func TestIdleEngineBacksOff(t *testing.T) {
	ctx := context.Background()
	store := kvtest.NewMemStorage()
	const (
		poll = 5 * time.Millisecond
		idle = 300 * time.Millisecond
		hold = 200 * time.Millisecond
	)
	opts := sql.Options{SchemaLease: 10 * time.Second, SchemaPoll: poll, SchemaIdlePoll: idle, SchemaHotHold: hold}
	cs := &countingStorage{Storage: store}
	a, err := sql.NewEngine(ctx, cs, opts) // the first: it owns DDL
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := sql.NewEngine(ctx, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)

	time.Sleep(hold + 2*idle) // past the hold, backed off to idle
	before := cs.begun.Load()
	const window = 2 * time.Second
	time.Sleep(window)
	got := cs.begun.Load() - before
	// At most a tick and a job scan (a owns DDL) per idle interval, and a
	// lease renewal and an owner renewal every lease/4 (2.5 s): about
	// 2*window/idle + 2 = 15 (17 seen in a loaded .ci/run: a late timer
	// and the renewals falling in the window). Without backing off:
	// window/poll ticks (400) and as many job scans.
	t.Logf("%d transactions in %s of an idle engine", got, window)
	if got > 3*int64(window/idle)+8 {
		t.Fatalf("an idle engine began %d transactions in %s (SchemaPoll %s, SchemaIdlePoll %s)", got, window, poll, idle)
	}

	// A change through b reaches a within SchemaIdlePoll (a runs the
	// job: it owns DDL and learns of the job from the id counter).
	sb := b.NewSession("root", "localhost")
	sa := a.NewSession("root", "localhost")
	start := time.Now()
	if _, err := sb.Execute(ctx, "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*idle+time.Second {
		t.Fatalf("CREATE TABLE through an engine that does not own DDL took %s", d)
	}
	waitVisible := func(q string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			if _, err := sa.Execute(ctx, q); err == nil {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("%q failed on the other engine for %s", q, within)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitVisible("SELECT * FROM d.t", idle+time.Second)
	// Hot now: the next change shows at once.
	if _, err := sb.Execute(ctx, "ALTER TABLE d.t ADD COLUMN w INT"); err != nil {
		t.Fatal(err)
	}
	if d := waitVisible("SELECT w FROM d.t", idle); d > idle/2 {
		t.Fatalf("a change right after another took %s to show on the other engine", d)
	}
}
