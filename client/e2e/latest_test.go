package e2e_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-db/strata/client"
	"github.com/strata-db/strata/kv"
)

// TestGetLatestIsLinearizableWithoutATimestamp: GetLatest (the Redis GET
// path) reads a key's newest committed value with no TSO timestamp. It
// sees every committed write, reads past the lock of a transaction that
// has not committed (its write is not acknowledged) without waiting for
// it, and rolls forward the lock of one whose primary committed (its write
// may be acknowledged), however long that lock's TTL.
func TestGetLatestIsLinearizableWithoutATimestamp(t *testing.T) {
	tn := startNode(t, client.Options{})
	ctx := context.Background()
	for _, c := range []*client.Client{tn.node.Storage(), tn.remote} {
		if _, err := c.GetLatest(ctx, []byte("lat/none")); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("missing key: %v, want ErrNotFound", err)
		}
	}
	w := mustBegin(t, tn.remote, kv.TxnOptions{})
	_ = w.Set([]byte("lat/a"), []byte("v1"))
	_ = w.Set([]byte("lat/p"), []byte("old"))
	_ = w.Set([]byte("lat/s"), []byte("old"))
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := tn.remote.GetLatest(ctx, []byte("lat/a")); err != nil || string(v) != "v1" {
		t.Fatalf("committed value: %q %v", v, err)
	}

	// A live transaction (TTL one minute) prewrote both keys and has not
	// committed: GetLatest returns the old values at once.
	prewriteAndCrash(t, tn, 60000, false, "lat/p", "lat/s")
	start := time.Now()
	for _, k := range []string{"lat/p", "lat/s"} {
		if v, err := tn.remote.GetLatest(ctx, []byte(k)); err != nil || string(v) != "old" {
			t.Fatalf("%s under an uncommitted lock: %q %v, want old", k, v, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("GetLatest waited %v for an uncommitted lock", d)
	}

	// Its primary commits (the coordinator then dies): the secondary still
	// carries a lock, and GetLatest must return the committed value.
	prewriteAndCrash(t, tn, 60000, true, "lat/p2", "lat/s2")
	if v, err := tn.remote.GetLatest(ctx, []byte("lat/s2")); err != nil || string(v) != "crashed" {
		t.Fatalf("secondary of a committed transaction: %q %v, want crashed", v, err)
	}
	// A snapshot read agrees.
	txn := mustBegin(t, tn.remote, kv.TxnOptions{})
	if got := mustGet(t, txn, "lat/s2"); got != "crashed" {
		t.Fatalf("snapshot read after GetLatest: %q", got)
	}
}
