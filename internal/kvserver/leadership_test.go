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
	db, err := engine.OpenEngines(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
		// What the node does (internal/node/cluster.go onLeaderChange).
		OnLeaderChange: func(regionID uint64, leader bool) {
			if !leader {
				table.DropRange(nil, nil)
				dropped <- struct{}{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, _ := store.Peer(2)
	waitLeader := func() {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); p.CheckRequest(nil) != nil; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no leader")
			}
		}
	}
	waitLeader()
	s := New(store, locks, testTSO)
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
	msg, err := proto.Marshal(&pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: proto.Uint64(99), To: proto.Uint64(2), Term: proto.Uint64(p.ReadyTerm() + 5)})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Receive(&kvpb.RaftMessage{RegionId: 2, FromPeer: &kvpb.Peer{Id: 99, StoreId: 9},
		ToPeer: &kvpb.Peer{Id: 2, StoreId: 1}, RegionEpoch: region.Epoch, Message: msg}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not step down")
	}
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
	waitLeader()
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
