package e2e_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-db/strata/client"
	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// DestroyRange over a range split between two regions, sent by a client
// whose region cache predates the split (so the first request is refused
// with EpochNotMatch): committed keys and live transactions' locks on both
// sides are gone, readers neither see them nor wait for the locks, the
// keys around the range are intact, and a transaction that began before
// the safe point the destroy carried fails instead of seeing the range
// empty.
func TestEndToEndDestroyRangeAcrossTwoRegions(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	const p = "e2e/destroy/"
	w := mustBegin(t, tn.remote, kv.TxnOptions{})
	for _, k := range []string{"a", "t/b", "t/c", "t/m", "t/x", "u"} {
		_ = w.Set([]byte(p+k), []byte("v-"+k))
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	lock := func(key string) {
		t.Helper()
		ts, err := tn.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		reg := regionOf(t, tn, key)
		resp, err := tn.kv.KvPrewrite(ctx, &kvpb.PrewriteRequest{
			Context:     &kvpb.Context{RegionId: reg.Id, RegionEpoch: reg.Epoch, Peer: reg.Peers[0]},
			Mutations:   []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte("locked")}},
			PrimaryLock: []byte(key), StartVersion: ts.Timestamp, LockTtl: 60000, TxnSize: 1,
		})
		if err != nil || resp.RegionError != nil || len(resp.Errors) > 0 {
			t.Fatalf("prewrite %s: %v %v %v", key, err, resp.GetRegionError(), resp.GetErrors())
		}
	}
	split(t, tn, p+"t/k")
	lock(p + "t/d") // live transactions, one lock on each side of the split
	lock(p + "t/y")
	lock(p + "u/z") // and one outside the range

	old := mustBegin(t, tn.remote, kv.TxnOptions{})
	time.Sleep(2 * time.Millisecond)
	sp := mustBegin(t, tn.remote, kv.TxnOptions{}).StartTS()
	if err := tn.remote.DestroyRange(ctx, []byte(p+"t/"), []byte(p+"t0"), sp); err != nil {
		t.Fatal(err)
	}

	r := mustBegin(t, tn.remote, kv.TxnOptions{})
	rows, err := r.Scan(ctx, []byte(p), []byte(p+"t0"), 0, false)
	if err != nil {
		t.Fatalf("scan after destroy: %v", err)
	}
	if got := show(rows); got != p+"a=v-a" {
		t.Fatalf("scan up to the range's end after destroy: %s", got)
	}
	for _, k := range []string{"t/b", "t/d", "t/m", "t/y"} {
		if got := mustGet(t, r, p+k); got != "<none>" {
			t.Fatalf("%s after destroy: %s", k, got)
		}
	}
	if got := mustGet(t, r, p+"u"); got != "v-u" {
		t.Fatalf("key above the range: %s", got)
	}
	shortCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := r.Get(shortCtx, []byte(p+"u/z")); err == nil {
		t.Fatal("the live lock above the range no longer blocks its reader")
	}
	if _, err := old.Get(ctx, []byte(p+"t/b")); !errors.Is(err, kv.ErrTxnTooOld) {
		t.Fatalf("read of a transaction older than the destroy's safe point: %v", err)
	}
}
