package client

import (
	"context"
	"testing"

	"github.com/strata-db/strata/kvpb"
)

// ResolveLocks (used by GC) rolls forward a secondary whose primary
// committed, rolls back the locks of a crashed transaction, and leaves the
// locks of a live one, counting them.
func TestResolveLocksSettlesFinishedTransactions(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	ctx := context.Background()
	committed, _ := c.getTS(ctx)
	fc.placeLock("a", "a", committed, 60000, "A")
	fc.placeLock("x", "a", committed, 60000, "X")
	commitTS, _ := c.getTS(ctx)
	fc.mu.Lock()
	fc.commitKey([]byte("a"), committed, commitTS)
	fc.mu.Unlock()
	crashed, _ := c.getTS(ctx)
	fc.placeLock("b", "b", crashed, 0, "dead")
	fc.placeLock("y", "b", crashed, 0, "dead")
	live, _ := c.getTS(ctx)
	fc.placeLock("c", "c", live, 60000, "C")
	fc.placeLock("z", "c", live, 60000, "Z")

	lock := func(key, primary string, ts uint64) *kvpb.LockInfo {
		return &kvpb.LockInfo{Key: []byte(key), PrimaryLock: []byte(primary), LockVersion: ts, LockTtl: 60000, LockType: kvpb.Op_Put}
	}
	n, err := c.ResolveLocks(ctx, []*kvpb.LockInfo{lock("x", "a", committed), lock("y", "b", crashed), lock("z", "c", live)})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("live locks = %d, want 1", n)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if k := fc.key([]byte("x")); k.lock != nil || len(k.writes) == 0 || k.writes[0].commitTS != commitTS {
		t.Fatalf("secondary of committed txn: lock %v writes %v", k.lock, k.writes)
	}
	if k := fc.key([]byte("y")); k.lock != nil {
		t.Fatal("lock of crashed txn left in place")
	}
	if k := fc.key([]byte("z")); k.lock == nil {
		t.Fatal("lock of live txn removed")
	}
}
