package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

func lockErr(t *testing.T, err error) *kv.RetryableError {
	t.Helper()
	var re *kv.RetryableError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want *kv.RetryableError", err)
	}
	return re
}

func TestLockKeysWaitsThenTimesOut(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{LockWaitTimeout: 150 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	holder := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := holder.LockKeys(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	waiter := begin(t, c, kv.TxnOptions{Pessimistic: true})
	began := time.Now()
	re := lockErr(t, waiter.LockKeys(ctx, []byte("k")))
	if !re.LockWaitTimeout {
		t.Fatalf("%v: want LockWaitTimeout", re)
	}
	if waited := time.Since(began); waited < 140*time.Millisecond || waited > 2*time.Second {
		t.Fatalf("waited %v for a 150ms lock wait timeout", waited)
	}

	// An optimistic transaction does not wait at all.
	nowait := begin(t, c, kv.TxnOptions{})
	began = time.Now()
	if re := lockErr(t, nowait.LockKeys(ctx, []byte("k"))); !re.LockWaitTimeout {
		t.Fatalf("%v: want LockWaitTimeout", re)
	}
	if waited := time.Since(began); waited > 100*time.Millisecond {
		t.Fatalf("optimistic LockKeys waited %v", waited)
	}
	_ = holder.Rollback(ctx)
}

func TestLockKeysAcquiresWhenHolderRollsBack(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	ctx := context.Background()
	holder := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := holder.LockKeys(ctx, []byte("a"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	waiter := begin(t, c, kv.TxnOptions{Pessimistic: true})
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = holder.Rollback(ctx)
	}()
	if err := waiter.LockKeys(ctx, []byte("x"), []byte("a")); err != nil {
		t.Fatalf("LockKeys after the holder rolled back: %v", err)
	}
	_ = waiter.Set([]byte("x"), []byte("mine"))
	if err := waiter.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if locked := fc.lockedKeys(); len(locked) != 0 {
		t.Fatalf("locks left after commit: %v (locked-but-unwritten keys must be released)", locked)
	}
	if get(t, begin(t, c, kv.TxnOptions{}), "x") != "mine" {
		t.Fatal("write not committed")
	}
}

func TestLockKeysFailsOnWriteAfterSnapshot(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{})
	defer c.Close()
	ctx := context.Background()
	load(t, c, "k=0")
	txn := begin(t, c, kv.TxnOptions{Pessimistic: true})
	load(t, c, "k=1") // commits after txn's snapshot
	if re := lockErr(t, txn.LockKeys(ctx, []byte("k"))); re.LockWaitTimeout {
		t.Fatalf("%v: a write conflict is not a lock wait timeout", re)
	}
}

func TestPessimisticCommitPrewritesLockedKeysAsPessimistic(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	ctx := context.Background()
	load(t, c, "a=1", "x=2")
	txn := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := txn.LockKeys(ctx, []byte("x"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if string(txn.primary) != "a" {
		t.Fatalf("primary = %q, want the first locked key in order", txn.primary)
	}
	// Someone commits to x's neighbour but cannot touch the locked keys.
	other := begin(t, c, kv.TxnOptions{})
	_ = other.Set([]byte("x"), []byte("other"))
	if err := other.Commit(ctx); !kv.IsRetryable(err) {
		t.Fatalf("writing a pessimistically locked key: %v, want retryable", err)
	}
	_ = txn.Set([]byte("a"), []byte("10"))
	_ = txn.Set([]byte("x"), []byte("20"))
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	check := begin(t, c, kv.TxnOptions{})
	if get(t, check, "a") != "10" || get(t, check, "x") != "20" {
		t.Fatal("pessimistic commit lost writes")
	}
}

func TestRollbackReleasesPessimisticLocks(t *testing.T) {
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	ctx := context.Background()
	txn := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := txn.LockKeys(ctx, []byte("a"), []byte("b"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := len(fc.lockedKeys()); n != 3 {
		t.Fatalf("%d keys locked, want 3", n)
	}
	if err := txn.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if locked := fc.lockedKeys(); len(locked) != 0 {
		t.Fatalf("locks left after rollback: %v", locked)
	}
	// Locking and committing nothing releases too.
	txn = begin(t, c, kv.TxnOptions{Pessimistic: true})
	_ = txn.LockKeys(ctx, []byte("a"))
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if locked := fc.lockedKeys(); len(locked) != 0 {
		t.Fatalf("locks left after a read-only commit: %v", locked)
	}
}

func TestHeartbeatKeepsPrimaryAliveBeyondTTL(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{LockTTL: 300 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	holder := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := holder.LockKeys(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // more than three TTLs
	if fc.callCount("TxnHeartBeat") == 0 {
		t.Fatal("no heartbeat sent")
	}
	// Without heartbeats the lock would have expired and been rolled back.
	other := begin(t, c, kv.TxnOptions{})
	if re := lockErr(t, other.LockKeys(ctx, []byte("k"))); !re.LockWaitTimeout {
		t.Fatalf("%v", re)
	}
	_ = holder.Set([]byte("k"), []byte("v"))
	if err := holder.Commit(ctx); err != nil {
		t.Fatalf("holder lost its lock despite heartbeats: %v", err)
	}

	// After the coordinator stops (here: rolls back nothing and just
	// abandons the lock by stopping heartbeats), the lock expires and a
	// waiter gets through.
	abandoned := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := abandoned.LockKeys(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	abandoned.stopHeartbeat()
	waiter := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := waiter.LockKeys(ctx, []byte("k")); err != nil {
		t.Fatalf("waiter did not get an abandoned lock: %v", err)
	}
}

func TestBackoffHonoursBudgetAndContext(t *testing.T) {
	cause := errors.New("still failing")
	bo := newBackoffer(context.Background(), 30*time.Millisecond)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		err = bo.backoff(boServerBusy, cause)
	}
	var be *backoffExhaustedError
	if !errors.As(err, &be) || !errors.Is(err, cause) || bo.slept > 30*time.Millisecond {
		t.Fatalf("err = %v after %v of sleep; want exhaustion wrapping the cause within budget", err, bo.slept)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	bo = newBackoffer(ctx, time.Minute)
	if err := bo.backoff(boRegionMiss, cause); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A key locked over another transaction's pending commit (the leader
// released that commit's lock at its proposal) is read from the value the
// lock response carried, at or above the commit ts, without asking the
// leader (whose plain reads wait for the commit's apply); below it, the
// leader is asked. The prewrite carries the commit ts, so the leader can
// fail it if that commit never applied.
func TestLockOverPendingCommitServesReadsAndTellsPrewrite(t *testing.T) {
	fc := newFakeCluster()
	c := fc.newClient(Options{})
	defer c.Close()
	ctx := context.Background()
	load(t, c, "w=old")
	txn := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if err := txn.BeginStatement(ctx, true, false); err != nil {
		t.Fatal(err)
	}
	commitTS := txn.readTS + 1
	var gets int
	var prewrite *kvpb.PrewriteRequest
	fc.mu.Lock()
	fc.intercept = func(_ uint64, method string, req any) (any, error) {
		switch method {
		case "PessimisticLock":
			return &kvpb.PessimisticLockResponse{Pending: []*kvpb.PendingValue{{Key: []byte("w"), CommitTs: commitTS, Value: []byte("pending")}}}, nil
		case "Get", "BatchGet":
			gets++
		case "Prewrite":
			prewrite = req.(*kvpb.PrewriteRequest)
			return &kvpb.PrewriteResponse{Errors: []*kvpb.KeyError{{Abort: "pessimistic lock not found"}}}, nil
		}
		return nil, nil
	}
	fc.mu.Unlock()
	if err := txn.LockKeys(ctx, []byte("w")); err != nil {
		t.Fatal(err)
	}
	// This statement reads below the commit: the leader answers.
	if v := get(t, txn, "w"); v != "old" || gets != 1 {
		t.Fatalf("read below the pending commit: %q after %d reads at the leader", v, gets)
	}
	// The next statement reads above it: the pending value, locally.
	if err := txn.BeginStatement(ctx, true, true); err != nil {
		t.Fatal(err)
	}
	if txn.readTS < commitTS {
		t.Fatalf("fresh statement ts %d below %d", txn.readTS, commitTS)
	}
	if v := get(t, txn, "w"); v != "pending" || gets != 1 {
		t.Fatalf("read above the pending commit: %q after %d reads at the leader", v, gets)
	}
	vals, err := txn.BatchGet(ctx, [][]byte{[]byte("w")})
	if err != nil || string(vals["w"]) != "pending" || gets != 1 {
		t.Fatalf("batch read above the pending commit: %q %v after %d reads at the leader", vals["w"], err, gets)
	}
	_ = txn.Set([]byte("w"), []byte("new"))
	if err := txn.Commit(ctx); err == nil {
		t.Fatal("commit succeeded although its prewrite failed")
	}
	if prewrite == nil || len(prewrite.LockPendingCommitTs) != 1 || prewrite.LockPendingCommitTs[0] != commitTS {
		t.Fatalf("prewrite did not carry the pending commit ts %d: %+v", commitTS, prewrite)
	}
}
