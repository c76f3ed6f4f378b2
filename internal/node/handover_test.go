package node

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// A leader transfer PD asks for keeps the region's pessimistic locks: the
// old leader moves them into the engine through Raft first, so a
// transaction that locked a row (SELECT ... FOR UPDATE) still holds it on
// the new leader: another writer waits for it (and times out), and the
// transaction commits. Without the move, the lock would be gone, the other
// writer would commit, and the transaction's COMMIT would fail.
func TestLeaderTransferKeepsPessimisticLocks(t *testing.T) {
	ctx := context.Background()
	start := func(join []string) *Node {
		n, err := Start(ctx, Config{DataDir: t.TempDir(), InMemory: true, GCInterval: -1, GRPCAddr: freeLoopback(t),
			Join: join, Replicas: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a := start(nil)
	nodes := []*Node{a, start([]string{a.cfg.GRPCAddr}), start([]string{a.cfg.GRPCAddr})}

	s := a.SQL().NewSession("root", "localhost")
	sqlExec(t, s, "CREATE DATABASE d", "USE d", "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0)")

	// The row's lock, in the memory of its region's leader.
	sqlExec(t, s, "BEGIN PESSIMISTIC", "SELECT v FROM t WHERE id = 1 FOR UPDATE")
	var leader *Node
	var key []byte
	for _, n := range nodes {
		if keys := n.locks.PessimisticLocks().Keys(nil, nil, 1<<20); len(keys) > 0 {
			leader, key = n, keys[0]
		}
	}
	if leader == nil {
		t.Fatal("no node holds the row's lock in memory")
	}
	var p *raftstore.Peer
	for _, lp := range leader.store.Peers() {
		if lp.CheckKey(key) == nil && lp.IsLeaderReady() {
			p = lp
		}
	}
	if p == nil {
		t.Fatal("the lock's node does not lead the row's region")
	}

	// Wait until the region has three voters, then hand its leadership to
	// one on another node, as PD's operator does.
	var to *kvpb.Peer

	for deadline := time.Now().Add(60 * time.Second); to == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("region %d has no voter on another node: %v", p.Region().Id, p.Region().Peers)
		}
		for _, rp := range p.Region().Peers {
			if rp.StoreId == leader.storeID || !raftstore.IsVoter(rp) {
				continue
			}
			for _, n := range nodes {
				if n.storeID == rp.StoreId {
					if tp, ok := n.store.Peer(p.Region().Id); ok && tp.Initialized() && tp.Status().Applied >= p.Status().Applied {
						to = rp
					}
				}
			}
		}
	}
	// Raft abandons a transfer to a replica that does not catch up within
	// an election timeout: ask again until it moves.
	r := p.Region()
	// Moved: a replica on another node leads (PD's balancer may move it
	// on to the third node meanwhile; the locks go with either transfer).
	moved := func() bool {
		for _, n := range nodes {
			if n == leader {
				continue
			}
			if tp, ok := n.store.Peer(r.Id); ok && tp.IsLeaderReady() {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !moved(); {
		if time.Now().After(deadline) {
			t.Fatal("the leadership did not move")
		}
		if p.IsLeaderReady() {
			if err := leader.applyOperator(ctx, &kvpb.Operator{RegionId: r.Id, Kind: kvpb.OperatorKind_TransferLeader, Peer: to, Epoch: r.Epoch}); err != nil {
				t.Fatal(err)
			}
		}
		for wait := time.Now().Add(3 * time.Second); !moved() && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n := leader.locks.PessimisticLocks().Len(); n != 0 {
		t.Errorf("%d locks left in the old leader's memory", n)
	}

	// Another writer waits for the lock on the new leader, and gives up.
	other := a.SQL().NewSession("root", "localhost")
	sqlExec(t, other, "USE d", "SET innodb_lock_wait_timeout = 1")
	if _, err := other.Execute(ctx, "UPDATE t SET v = 2 WHERE id = 1"); err == nil || !strings.Contains(err.Error(), "1205") && !strings.Contains(strings.ToLower(err.Error()), "lock wait timeout") {
		t.Fatalf("an UPDATE of the row locked before the transfer: %v, want a lock wait timeout", err)
	}

	// The transaction that locked it commits.
	sqlExec(t, s, "UPDATE t SET v = v + 10 WHERE id = 1", "COMMIT")
	if got := sqlRows(t, s, "SELECT v FROM t WHERE id = 1"); got != "10" {
		t.Fatalf("v = %s, want 10", got)
	}
}
