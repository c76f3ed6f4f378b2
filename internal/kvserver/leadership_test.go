package kvserver

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// soloLeader is a one-replica region (id 2) led by a real raft store whose
// leader can be made to step down, with the KV service over it and the
// store's in-memory lock table, dropped on each loss of leadership as the
// node does (internal/node/cluster.go onLeaderChange).
type soloLeader struct {
	t       *testing.T
	s       *Server
	store   *raftstore.Store
	p       *raftstore.Peer
	region  *kvpb.Region
	table   *mvcc.PessimisticLocks
	dropped chan struct{}
}

func newSoloLeader(t *testing.T) *soloLeader {
	db, err := engine.OpenEngines(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	region := &kvpb.Region{Id: 2, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}, Peers: []*kvpb.Peer{{Id: 2, StoreId: 1}}}
	if err := raftstore.BootstrapRegion(db, region); err != nil {
		t.Fatal(err)
	}
	locks, err := mvcc.LoadLockSet(db.KV)
	if err != nil {
		t.Fatal(err)
	}
	table := mvcc.NewPessimisticLocks(0)
	locks.SetPessimisticLocks(table)
	dropped := make(chan struct{}, 4)
	store, err := raftstore.Open(db, raftstore.Config{StoreID: 1, Observer: testObserver{locks},
		OnLeaderChange: func(regionID uint64, leader bool) {
			if !leader {
				table.DropRange(nil, nil)
				dropped <- struct{}{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p, _ := store.Peer(2)
	l := &soloLeader{t: t, s: New(store, locks, testTSO), store: store, p: p, region: region, table: table, dropped: dropped}
	l.waitLeader()
	return l
}

// waitLeader waits until the replica leads the region.
func (l *soloLeader) waitLeader() {
	l.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); l.p.CheckRequest(nil) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			l.t.Fatal("no leader")
		}
	}
}

// stepDown makes the leader hear of a newer term, and waits until the store
// dropped the region's in-memory locks.
func (l *soloLeader) stepDown() {
	l.t.Helper()
	msg, err := proto.Marshal(&pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: proto.Uint64(99), To: proto.Uint64(2), Term: proto.Uint64(l.p.ReadyTerm() + 5)})
	if err != nil {
		l.t.Fatal(err)
	}
	if err := l.store.Receive(&kvpb.RaftMessage{RegionId: 2, FromPeer: &kvpb.Peer{Id: 99, StoreId: 9},
		ToPeer: &kvpb.Peer{Id: 2, StoreId: 1}, RegionEpoch: l.region.Epoch, Message: msg}); err != nil {
		l.t.Fatal(err)
	}
	select {
	case <-l.dropped:
	case <-time.After(10 * time.Second):
		l.t.Fatal("the leader did not step down")
	}
}

// A pessimistic lock request that checked leadership and then waited for its
// latches while the leader stepped down must not leave its lock in the
// in-memory table after the step-down dropped the region's locks (chaos
// list-append, mixed, seed 3, 2026-11-27): the stale lock outlived the
// leadership it was taken under, and when the store led the region again,
// the transaction's prewrite found it "held", skipped the check for newer
// commits, and committed an append based on a stale read over 13 later
// acknowledged ones.
func TestPessimisticLockNotLeftAfterLeadershipLoss(t *testing.T) {
	ctx := context.Background()
	l := newSoloLeader(t)
	s, table := l.s, l.table
	k := []byte("k")

	// A command holds k's latches (a proposal in flight) while transaction
	// 10's lock request arrives: it passes the leadership check and waits.
	guard := s.cm.Acquire([][]byte{k})
	type result struct {
		resp *kvpb.PessimisticLockResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := s.KvPessimisticLock(ctx, &kvpb.PessimisticLockRequest{Context: rctx(), StartVersion: 10, ForUpdateTs: 10,
			PrimaryLock: k, LockTtl: 3000, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: k}}})
		done <- result{resp, err}
	}()
	time.Sleep(50 * time.Millisecond) // the request reaches the latches

	// The leader hears of a newer term and steps down; the store drops the
	// region's in-memory locks.
	l.stepDown()
	guard.Release()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.RegionError == nil && len(r.resp.Errors) == 0 {
		t.Errorf("the lock request succeeded on a replica that lost its leadership while it waited")
	}

	// The store leads the region again (a new term). Transaction 20
	// commits k: no stale lock of transaction 10 may stop it.
	l.waitLeader()
	if n := table.Len(); n != 0 {
		t.Errorf("%d in-memory lock(s) outlived the leadership they were taken under", n)
	}
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 20, PrimaryLock: k, LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: k, Value: []byte("v20")}}})
	if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
		t.Fatalf("prewrite of txn 20: %v %v %v", err, pw.GetRegionError(), pw.GetErrors())
	}
	cm, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: 20, Keys: [][]byte{k}, CommitVersion: 21})
	if err != nil || cm.RegionError != nil || cm.Error != nil {
		t.Fatalf("commit of txn 20: %v %v %v", err, cm.GetRegionError(), cm.GetError())
	}

	// Transaction 10 read k at 10: its prewrite must not overwrite the
	// commit at 21 it never saw.
	pw, err = s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 10, PrimaryLock: k, LockTtl: 3000, ForUpdateTs: 10,
		Mutations:         []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: k, Value: []byte("v10")}},
		IsPessimisticLock: []bool{true}, LockForUpdateTs: []uint64{10}})
	if err != nil || pw.RegionError != nil {
		t.Fatalf("prewrite of txn 10: %v %v", err, pw.GetRegionError())
	}
	if len(pw.Errors) == 0 || pw.Errors[0] == nil {
		t.Fatalf("transaction 10's prewrite succeeded over a commit after its for-update ts (a lost update)")
	}
}

// A transaction whose pessimistic lock a real step-down dropped, and which
// locks the key again after another transaction committed it, must not
// commit over that commit: its first statement read the key when it first
// locked it, before the other commit. The second lock request succeeds
// (nothing was committed after its own for-update ts); the prewrite, which
// carries the ts the key was first locked at, refuses with a write
// conflict, which SQL reports as a retryable error.
func TestRelockAfterLeadershipLossRefusesLostUpdate(t *testing.T) {
	ctx := context.Background()
	l := newSoloLeader(t)
	s := l.s
	k := []byte("k")
	lock := func(startTS, forUpdateTS uint64) *kvpb.PessimisticLockResponse {
		t.Helper()
		resp, err := s.KvPessimisticLock(ctx, &kvpb.PessimisticLockRequest{Context: rctx(), StartVersion: startTS, ForUpdateTs: forUpdateTS,
			PrimaryLock: k, LockTtl: 3000, LockWithConflict: true, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: k}}})
		if err != nil || resp.RegionError != nil {
			t.Fatalf("lock of txn %d at %d: %v %v", startTS, forUpdateTS, err, resp.GetRegionError())
		}
		return resp
	}

	// Transaction 10 locks k at 10 (SELECT ... FOR UPDATE), in memory.
	if resp := lock(10, 10); len(resp.Errors) > 0 {
		t.Fatalf("lock of txn 10: %v", resp.Errors)
	}
	if l.table.Len() != 1 {
		t.Fatalf("the lock is not in memory: %d locks", l.table.Len())
	}

	// The leader steps down (its locks go) and leads again in a new term;
	// transaction 20 commits k at 21 meanwhile.
	l.stepDown()
	l.waitLeader()
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 20, PrimaryLock: k, LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: k, Value: []byte("v20")}}})
	if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
		t.Fatalf("prewrite of txn 20: %v %v %v", err, pw.GetRegionError(), pw.GetErrors())
	}
	cm, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: 20, Keys: [][]byte{k}, CommitVersion: 21})
	if err != nil || cm.RegionError != nil || cm.Error != nil {
		t.Fatalf("commit of txn 20: %v %v %v", err, cm.GetRegionError(), cm.GetError())
	}

	// Transaction 10's later statement locks k again at 30: no commit
	// after 30, so it is locked.
	if resp := lock(10, 30); len(resp.Errors) > 0 {
		t.Fatalf("second lock of txn 10: %v", resp.Errors)
	}

	// Its prewrite (k first locked at 10) must not write over the commit
	// at 21.
	pw, err = s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 10, PrimaryLock: k, LockTtl: 3000, ForUpdateTs: 30,
		Mutations:         []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: k, Value: []byte("v10")}},
		IsPessimisticLock: []bool{true}, LockForUpdateTs: []uint64{10}})
	if err != nil || pw.RegionError != nil {
		t.Fatalf("prewrite of txn 10: %v %v", err, pw.GetRegionError())
	}
	if len(pw.Errors) == 0 || pw.Errors[0].GetConflict() == nil {
		t.Fatalf("transaction 10's prewrite succeeded over a commit after it first locked the key (a lost update): %v", pw.Errors)
	}
	if c := pw.Errors[0].Conflict; c.ConflictTs != 20 || c.ConflictCommitTs != 21 {
		t.Errorf("conflict %v, want the commit of txn 20 at 21", c)
	}
}

// A lock request whose answer (locked, with a conflict) was lost and which
// the client sends again must report the conflict again: the lock is the
// transaction's already, but the statement read the key before the
// conflicting commit.
func TestPessimisticLockResentAfterConflictReportsItAgain(t *testing.T) {
	ctx := context.Background()
	l := newSoloLeader(t)
	s := l.s
	k := []byte("k")
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 20, PrimaryLock: k, LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: k, Value: []byte("v20")}}})
	if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
		t.Fatalf("prewrite of txn 20: %v %v %v", err, pw.GetRegionError(), pw.GetErrors())
	}
	cm, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: 20, Keys: [][]byte{k}, CommitVersion: 21})
	if err != nil || cm.RegionError != nil || cm.Error != nil {
		t.Fatalf("commit of txn 20: %v %v %v", err, cm.GetRegionError(), cm.GetError())
	}
	req := &kvpb.PessimisticLockRequest{Context: rctx(), StartVersion: 10, ForUpdateTs: 10, PrimaryLock: k, LockTtl: 3000,
		LockWithConflict: true, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: k}}}
	for attempt := 1; attempt <= 2; attempt++ {
		resp, err := s.KvPessimisticLock(ctx, req)
		if err != nil || resp.RegionError != nil {
			t.Fatalf("attempt %d: %v %v", attempt, err, resp.GetRegionError())
		}
		if !resp.LockedWithConflict || len(resp.Errors) != 1 || resp.Errors[0].GetConflict().GetConflictCommitTs() != 21 {
			t.Fatalf("attempt %d: locked_with_conflict=%v errors=%v, want the conflict with the commit at 21", attempt, resp.LockedWithConflict, resp.Errors)
		}
	}
}

// Locks persisted before a handover of the leadership (a transfer PD asks
// for, a merge into a region led elsewhere) outlive it: the step-down
// drops the in-memory table, but the locks are in the engine, replicated,
// and keep other writers off their keys; their transaction commits as if
// nothing happened.
func TestPersistedPessimisticLocksOutliveLeadershipLoss(t *testing.T) {
	ctx := context.Background()
	l := newSoloLeader(t)
	s := l.s
	k, m := []byte("k"), []byte("m")
	resp, err := s.KvPessimisticLock(ctx, &kvpb.PessimisticLockRequest{Context: rctx(), StartVersion: 10, ForUpdateTs: 10,
		PrimaryLock: k, LockTtl: 3000, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: k}, {Op: kvpb.Op_PessimisticLock, Key: m}}})
	if err != nil || resp.RegionError != nil || len(resp.Errors) > 0 {
		t.Fatalf("lock of txn 10: %v %v %v", err, resp.GetRegionError(), resp.GetErrors())
	}
	moved, err := s.PersistPessimisticLocks(ctx, 2)
	if err != nil || moved != 2 {
		t.Fatalf("persisted %d locks: %v; want 2", moved, err)
	}
	if n := l.table.Len(); n != 0 {
		t.Fatalf("%d locks still in memory after they were persisted", n)
	}
	// Nothing left to move: no proposal.
	if moved, err := s.PersistPessimisticLocks(ctx, 2); err != nil || moved != 0 {
		t.Fatalf("a second persist moved %d: %v", moved, err)
	}

	l.stepDown()
	l.waitLeader()

	// Transaction 20 finds k locked by 10.
	prewriteFindsLock(t, s, k, 20, 10)
	// Transaction 10 commits.
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 10, PrimaryLock: k, LockTtl: 3000, ForUpdateTs: 10,
		Mutations:         []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: k, Value: []byte("v10")}, {Op: kvpb.Op_Lock, Key: m}},
		IsPessimisticLock: []bool{true, true}, LockForUpdateTs: []uint64{10, 10}})
	if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
		t.Fatalf("prewrite of txn 10: %v %v %v", err, pw.GetRegionError(), pw.GetErrors())
	}
	cm, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: 10, Keys: [][]byte{k, m}, CommitVersion: 11})
	if err != nil || cm.RegionError != nil || cm.Error != nil {
		t.Fatalf("commit of txn 10: %v %v %v", err, cm.GetRegionError(), cm.GetError())
	}
}

// A lock taken after the region's locks were persisted but before the
// leadership is handed over goes to the engine as well, and outlives the
// step-down; before, it stayed in memory and was lost with the leadership.
func TestLockTakenDuringHandoverOutlivesLeadershipLoss(t *testing.T) {
	ctx := context.Background()
	l := newSoloLeader(t)
	s := l.s
	k := []byte("k")
	if moved, err := s.PersistPessimisticLocks(ctx, 2); err != nil || moved != 0 {
		t.Fatalf("persist with no locks moved %d: %v", moved, err)
	}
	resp, err := s.KvPessimisticLock(ctx, &kvpb.PessimisticLockRequest{Context: rctx(), StartVersion: 10, ForUpdateTs: 10,
		PrimaryLock: k, LockTtl: 3000, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: k}}})
	if err != nil || resp.RegionError != nil || len(resp.Errors) > 0 {
		t.Fatalf("lock of txn 10: %v %v %v", err, resp.GetRegionError(), resp.GetErrors())
	}
	if n := l.table.Len(); n != 0 {
		t.Fatalf("the lock taken during the handover is in memory (%d locks), want it in the engine", n)
	}

	l.stepDown()
	l.waitLeader()

	prewriteFindsLock(t, s, k, 20, 10)
}

// prewriteFindsLock checks that transaction start's prewrite of key finds
// it locked by transaction holder.
func prewriteFindsLock(t *testing.T, s *Server, key []byte, start, holder uint64) {
	t.Helper()
	pw, err := s.KvPrewrite(context.Background(), &kvpb.PrewriteRequest{Context: rctx(), StartVersion: start, PrimaryLock: key, LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: key, Value: []byte("v")}}})
	if err != nil || pw.RegionError != nil {
		t.Fatalf("prewrite of txn %d: %v %v", start, err, pw.GetRegionError())
	}
	if len(pw.Errors) == 0 || pw.Errors[0].GetLocked().GetLockVersion() != holder {
		t.Fatalf("prewrite of txn %d: %v, want locked by %d", start, pw.Errors, holder)
	}
}
