package kvserver

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// gateObserver holds the apply of every write batch that contains marker
// until the gate opens: the entry is proposed (and, with one replica,
// committed) but its effects are not in the engine.
type gateObserver struct {
	testObserver
	marker []byte
	gate   chan struct{}
	held   chan struct{} // closed once an apply is held
	once   sync.Once
	opened sync.Once
}

func (o *gateObserver) open() { o.opened.Do(func() { close(o.gate) }) }

func (o *gateObserver) BeforeApply(repr []byte) error {
	if bytes.Contains(repr, o.marker) {
		o.once.Do(func() { close(o.held) })
		<-o.gate
	}
	return o.testObserver.BeforeApply(repr)
}

func startGatedServer(t *testing.T, marker string) (*Server, *gateObserver) {
	t.Helper()
	db, err := engine.OpenEngines(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	region := &kvpb.Region{Id: 2, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}, Peers: []*kvpb.Peer{{Id: 2, StoreId: 1}}}
	if err := raftstore.BootstrapRegion(db, region); err != nil {
		t.Fatal(err)
	}
	locks, err := mvcc.LoadLockSet(db.KV)
	if err != nil {
		t.Fatal(err)
	}
	o := &gateObserver{testObserver: testObserver{locks}, marker: []byte(marker), gate: make(chan struct{}), held: make(chan struct{})}
	store, err := raftstore.Open(db, raftstore.Config{StoreID: 1, Observer: o})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.open(); store.Close(); db.Close() })
	p, _ := store.Peer(2)
	for deadline := time.Now().Add(10 * time.Second); p.CheckRequest(nil) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
	}
	return New(store, locks, testTSO), o
}

func lockReq(key string, startTS, forUpdateTS uint64, wait time.Duration) *kvpb.PessimisticLockRequest {
	return &kvpb.PessimisticLockRequest{Context: rctx(), StartVersion: startTS, ForUpdateTs: forUpdateTS, PrimaryLock: []byte(key),
		LockTtl: 3000, LockWithConflict: true, WaitTimeoutMs: wait.Milliseconds(),
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: []byte(key)}}}
}

// onePCOverLock is a pessimistic transaction's one-phase commit of
// key = value, the key locked at lockTS (over a pending commit at
// pendingTS, or zero).
func onePCOverLock(key, value string, startTS, forUpdateTS, lockTS, pendingTS uint64) *kvpb.PrewriteRequest {
	req := &kvpb.PrewriteRequest{Context: rctx(), StartVersion: startTS, ForUpdateTs: forUpdateTS, PrimaryLock: []byte(key),
		LockTtl: 3000, TryOnePc: true, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte(value)}},
		IsPessimisticLock: []bool{true}, LockForUpdateTs: []uint64{lockTS}}
	if pendingTS != 0 {
		req.LockPendingCommitTs = []uint64{pendingTS}
	}
	return req
}

// returnsWithin runs fn in the background and reports whether it returned
// within d; the channel yields its result either way.
func returnsWithin[T any](d time.Duration, fn func() T) (bool, chan T) {
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	select {
	case v := <-ch:
		ch <- v
		return true, ch
	case <-time.After(d):
		return false, ch
	}
}

// A one-phase commit with a lock waiter wakes it at its proposal, before
// its entry is applied: the waiter is locked at the commit's ts with a
// conflict (its for-update ts was below it) and gets the committed value
// from the pending write. Plain readers at or above the commit ts, and the
// waiter's own commit, still wait for the apply.
func TestEarlyLockReleaseWakesWaiterAtProposal(t *testing.T) {
	ctx := context.Background()
	s, gate := startGatedServer(t, "v-holder")
	key := "warehouse"

	// Holder H (10) locks the row; W (20) waits for it.
	if resp, err := s.KvPessimisticLock(ctx, lockReq(key, 10, 10, 0)); err != nil || len(resp.Errors) > 0 {
		t.Fatalf("lock of H: %v %v", err, resp.GetErrors())
	}
	wDone := make(chan *kvpb.PessimisticLockResponse, 1)
	go func() {
		resp, err := s.KvPessimisticLock(ctx, lockReq(key, 20, 20, 5*time.Second))
		if err != nil {
			t.Error(err)
		}
		wDone <- resp
	}()
	for deadline := time.Now().Add(5 * time.Second); totalWaiters(s) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("W does not wait")
		}
	}

	// H commits in one phase; its entry's apply is held.
	hDone := make(chan *kvpb.PrewriteResponse, 1)
	go func() {
		resp, err := s.KvPrewrite(ctx, onePCOverLock(key, "v-holder", 10, 10, 10, 0))
		if err != nil {
			t.Error(err)
		}
		hDone <- resp
	}()
	var w *kvpb.PessimisticLockResponse
	select {
	case w = <-wDone:
	case <-time.After(5 * time.Second):
		t.Fatal("W was not woken while H's commit was being applied")
	}
	select {
	case <-gate.held:
	case <-time.After(5 * time.Second):
		t.Fatal("H's entry never reached its apply")
	}
	// The gate is still shut: H's commit is not in the engine.
	if len(w.Pending) != 1 || string(w.Pending[0].Key) != key || string(w.Pending[0].Value) != "v-holder" || w.Pending[0].Deleted {
		t.Fatalf("W's lock response carries no pending value of H: %+v", w)
	}
	commitTS := w.Pending[0].CommitTs
	if !w.LockedWithConflict || len(w.Errors) != 1 || w.Errors[0].GetConflict().GetConflictCommitTs() != commitTS ||
		w.Errors[0].GetConflict().GetConflictTs() != 10 {
		t.Fatalf("W locked at for-update ts 20 below H's commit at %d without a write conflict: %+v", commitTS, w)
	}
	if commitTS <= 20 {
		t.Fatalf("H's commit ts %d not above W's for-update ts", commitTS)
	}

	// Another transaction now meets W's lock, not H's.
	if resp, err := s.KvPessimisticLock(ctx, lockReq(key, 30, 30, 0)); err != nil || len(resp.Errors) != 1 || resp.Errors[0].GetLocked().GetLockVersion() != 20 {
		t.Fatalf("lock of txn 30: %v %+v, want W's lock", err, resp)
	}

	// A plain reader at or above the commit ts waits for the apply.
	readOK, read := returnsWithin(100*time.Millisecond, func() *kvpb.GetResponse {
		resp, err := s.KvGet(ctx, &kvpb.GetRequest{Context: rctx(), Key: []byte(key), Version: commitTS + 5})
		if err != nil {
			t.Error(err)
		}
		return resp
	})
	if readOK {
		t.Fatalf("a plain read at %d returned before H's entry was applied: %+v", commitTS+5, <-read)
	}
	// So does W's commit of the row (it waits for H's entry, then finds
	// H's commit record there).
	commitOK, wCommit := returnsWithin(100*time.Millisecond, func() *kvpb.PrewriteResponse {
		resp, err := s.KvPrewrite(ctx, onePCOverLock(key, "v-waiter", 20, commitTS, commitTS, commitTS))
		if err != nil {
			t.Error(err)
		}
		return resp
	})
	if commitOK {
		t.Fatalf("W's commit returned before H's entry was applied: %+v", <-wCommit)
	}

	gate.open()
	if h := <-hDone; h.GetOnePcCommitTs() != commitTS || len(h.Errors) > 0 {
		t.Fatalf("H's commit: %+v, want committed at %d", h, commitTS)
	}
	if r := <-read; r == nil || string(r.Value) != "v-holder" {
		t.Fatalf("plain read after the apply: %+v, want H's value", r)
	}
	wc := <-wCommit
	if wc == nil || len(wc.Errors) > 0 || wc.OnePcCommitTs <= commitTS {
		t.Fatalf("W's commit: %+v, want committed above %d", wc, commitTS)
	}
	if r := mustGet(t, s, key, wc.OnePcCommitTs); string(r.Value) != "v-waiter" {
		t.Fatalf("after W's commit: %q", r.Value)
	}
	if s.pending.n.Load() != 0 {
		t.Fatalf("pending table not empty: %d", s.pending.n.Load())
	}
}

// A lock granted over a pending commit depends on it. If the commit's
// entry never applies (lost with the leadership, or its proposal failed),
// the waiter's prewrite fails whether its lock was lost with the leader
// or is still held: it read a value that never existed. The entry is
// registered by hand here, as the leader does before it proposes: a
// single-replica group never loses a proposed entry.
func TestLockOverLostCommitFailsPrewrite(t *testing.T) {
	ctx := context.Background()
	l := newSoloLeader(t)
	s := l.s

	lockOver := func(key string, startTS uint64) *pendingEntry {
		t.Helper()
		e := s.pending.add([]mvcc.PendingWrite{{Key: []byte(key), StartTS: 10, CommitTS: 50, Value: []byte("lost")}})
		resp, err := s.KvPessimisticLock(ctx, lockReq(key, startTS, startTS, time.Second))
		if err != nil || resp.RegionError != nil {
			t.Fatalf("lock of %s: %v %v", key, err, resp.GetRegionError())
		}
		if !resp.LockedWithConflict || len(resp.Pending) != 1 || resp.Pending[0].CommitTs != 50 || string(resp.Pending[0].Value) != "lost" {
			t.Fatalf("lock of %s over the pending commit: %+v", key, resp)
		}
		return e
	}
	prewriteFails := func(key string, startTS uint64) {
		t.Helper()
		resp, err := s.KvPrewrite(ctx, onePCOverLock(key, "w", startTS, 50, 50, 50))
		if err != nil || resp.RegionError != nil {
			t.Fatalf("prewrite of %s: %v %v", key, err, resp.GetRegionError())
		}
		if len(resp.Errors) != 1 || !strings.Contains(resp.Errors[0].String(), "pessimistic lock not found") || resp.OnePcCommitTs != 0 {
			t.Fatalf("prewrite of %s over a lock that depends on a lost commit: %+v", key, resp)
		}
	}

	// Lost with the leader: the lock goes with the leadership (a new term).
	e := lockOver("a", 20)
	l.stepDown()
	s.pending.finish(e) // the proposal fails with the leadership
	l.waitLeader()
	if l.table.Len() != 0 {
		t.Fatalf("%d locks survived the step-down", l.table.Len())
	}
	prewriteFails("a", 20)

	// The proposal failed while the store still leads: the lock is held.
	e = lockOver("b", 30)
	s.pending.finish(e)
	if l.table.Len() != 1 {
		t.Fatalf("W's lock is gone: %d locks", l.table.Len())
	}
	prewriteFails("b", 30)

	// The pending commit is a write conflict for a lock at a for-update
	// ts below it, even without lock-with-conflict.
	e = s.pending.add([]mvcc.PendingWrite{{Key: []byte("c"), StartTS: 10, CommitTS: 50, Value: []byte("x")}})
	req := lockReq("c", 40, 40, 0)
	req.LockWithConflict = false
	resp, err := s.KvPessimisticLock(ctx, req)
	if err != nil || len(resp.Errors) != 1 || resp.Errors[0].GetConflict().GetConflictCommitTs() != 50 || len(resp.Pending) != 0 {
		t.Fatalf("lock at 40 below a pending commit at 50: %v %+v", err, resp)
	}
	// At or above it: locked over it, no conflict.
	resp, err = s.KvPessimisticLock(ctx, lockReq("c", 40, 60, 0))
	if err != nil || len(resp.Errors) != 0 || len(resp.Pending) != 1 || resp.Pending[0].CommitTs != 50 {
		t.Fatalf("lock at 60 above a pending commit at 50: %v %+v", err, resp)
	}
	s.pending.finish(e)
}

// The commit of a prewritten key (two-phase) releases it early too: the
// waiter is locked over the pending commit although the prewrite lock is
// still in the engine, and gets the value the prewrite stored in the data
// column (too large to inline).
func TestEarlyLockReleaseOfTwoPhaseCommit(t *testing.T) {
	ctx := context.Background()
	key := "district"
	// Hold the apply of the batch that writes the key's commit record.
	s, gate := startGatedServer(t, "zw"+key+"\x00\x01")
	big := strings.Repeat("v", 10000)
	if resp, err := s.KvPessimisticLock(ctx, lockReq(key, 10, 10, 0)); err != nil || len(resp.Errors) > 0 {
		t.Fatalf("lock of H: %v %v", err, resp.GetErrors())
	}
	pw := onePCOverLock(key, big, 10, 10, 10, 0)
	pw.TryOnePc = false
	if resp, err := s.KvPrewrite(ctx, pw); err != nil || len(resp.Errors) > 0 || resp.RegionError != nil {
		t.Fatalf("prewrite of H: %v %+v", err, resp)
	}
	wDone := make(chan *kvpb.PessimisticLockResponse, 1)
	go func() {
		resp, err := s.KvPessimisticLock(ctx, lockReq(key, 20, 20, 5*time.Second))
		if err != nil {
			t.Error(err)
		}
		wDone <- resp
	}()
	for deadline := time.Now().Add(5 * time.Second); totalWaiters(s) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("W does not wait")
		}
	}
	hDone := make(chan *kvpb.CommitResponse, 1)
	go func() {
		cm, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: 10, Keys: [][]byte{[]byte(key)}, CommitVersion: 25})
		if err != nil {
			t.Error(err)
		}
		hDone <- cm
	}()
	var w *kvpb.PessimisticLockResponse
	select {
	case w = <-wDone:
	case <-time.After(5 * time.Second):
		t.Fatal("W was not woken while H's commit was being applied")
	}
	<-gate.held
	if len(w.Pending) != 1 || w.Pending[0].CommitTs != 25 || string(w.Pending[0].Value) != big || !w.LockedWithConflict {
		t.Fatalf("W's lock over H's pending commit: pending %d, errors %v", len(w.Pending), w.Errors)
	}
	gate.open()
	if cm := <-hDone; cm.RegionError != nil || cm.Error != nil || cm.CommitVersion != 25 {
		t.Fatalf("commit of H: %+v", cm)
	}
	if r := mustGet(t, s, key, 30); string(r.Value) != big {
		t.Fatalf("after H's commit: %d bytes", len(r.Value))
	}
}
