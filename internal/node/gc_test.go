package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/kvpb"
)

func startGCNode(t *testing.T, interval, lifeTime time.Duration) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := Start(ctx, Config{InMemory: true, GCInterval: interval, GCLifeTime: lifeTime,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func putKey(t *testing.T, c kv.Storage, key, value string) {
	t.Helper()
	ctx := context.Background()
	txn, err := c.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Set([]byte(key), []byte(value)); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// settle waits until every acknowledged write to [start, end) is applied:
// a one-phase commit is acknowledged once durable, and applied after; a
// snapshot read at a fresh timestamp waits for it (its memory lock).
func settle(t *testing.T, n *Node, start, end []byte) {
	t.Helper()
	ctx := context.Background()
	txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Rollback(ctx)
	it, err := txn.Iter(ctx, start, end, false)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for it.Valid() {
		if err := it.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func writeRecordCount(t *testing.T, n *Node, key string) int {
	t.Helper()
	settle(t, n, []byte(key), []byte(key+"\x00"))
	span := mvcc.EngineSpans([]byte(key), []byte(key+"\x00"))[2] // data, lock, write
	it, err := n.eng.KV.NewIter(&pebble.IterOptions{LowerBound: span[0], UpperBound: span[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	c := 0
	for valid := it.First(); valid; valid = it.Next() {
		c++
	}
	return c
}

// A key written 1000 times keeps one version after a GC pass whose safe
// point is past the writes; reads at and after the safe point see the last
// value, and a transaction that began before the safe point gets a
// non-retryable "GC life time" error instead of a partial history.
func TestGCPassCollectsHotKey(t *testing.T) {
	ctx := context.Background()
	n := startGCNode(t, -1, time.Millisecond)
	defer n.Close()
	c := n.Storage()
	putKey(t, c, "hot", "v0")
	old, err := c.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 1000; i++ {
		putKey(t, c, "hot", fmt.Sprintf("v%d", i))
	}
	if got := writeRecordCount(t, n, "hot"); got != 1001 {
		t.Fatalf("%d write records before GC", got)
	}
	time.Sleep(5 * time.Millisecond) // the safe point trails the TSO by 1ms
	deletedBefore := metricValue(t, metricGCVersionsDeleted)
	pass, err := n.RunGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pass.Versions != 1000 || pass.Regions != 1 {
		t.Fatalf("pass %+v: want 1000 versions deleted in 1 region", pass)
	}
	if got := metricValue(t, metricGCVersionsDeleted) - deletedBefore; got != 1000 {
		t.Fatalf("versions_deleted_total grew by %v", got)
	}
	if got := metricValue(t, metricGCSafePoint); got != float64(pass.SafePoint) {
		t.Fatalf("safe_point gauge %v, pass at %d", got, pass.SafePoint)
	}
	if got := writeRecordCount(t, n, "hot"); got != 1 {
		t.Fatalf("%d write records after GC, want 1", got)
	}
	for _, ts := range []uint64{pass.SafePoint, pass.SafePoint + 1} {
		g, err := n.kv.KvGet(ctx, &kvpb.GetRequest{Context: &kvpb.Context{RegionId: dataRegionID}, Key: []byte("hot"), Version: ts})
		if err != nil || g.Error != nil || string(g.Value) != "v1000" {
			t.Fatalf("read at %d (safe point %d): %v %+v", ts, pass.SafePoint, err, g)
		}
	}
	fresh, err := c.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := fresh.Get(ctx, []byte("hot")); err != nil || string(v) != "v1000" {
		t.Fatalf("read after GC: %q %v", v, err)
	}
	_, err = old.Get(ctx, []byte("hot"))
	if err == nil || kv.IsRetryable(err) || !errors.Is(err, kv.ErrTxnTooOld) || !strings.Contains(err.Error(), "GC life time is shorter than transaction duration") {
		t.Fatalf("read of a transaction older than the safe point: %v", err)
	}
	// The safe point does not go back, and a second pass finds nothing.
	pass2, err := n.RunGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pass2.SafePoint < pass.SafePoint || pass2.Versions != 0 {
		t.Fatalf("second pass %+v after %+v", pass2, pass)
	}
}

// The background loop collects on its own and stops when the node closes.
func TestGCLoopRunsInBackground(t *testing.T) {
	n := startGCNode(t, 20*time.Millisecond, time.Millisecond)
	c := n.Storage()
	for i := range 50 {
		putKey(t, c, "k", fmt.Sprint(i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for writeRecordCount(t, n, "k") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("background GC left %d versions", writeRecordCount(t, n, "k"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { n.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the GC loop")
	}
}
