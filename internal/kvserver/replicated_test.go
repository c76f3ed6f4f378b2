package kvserver

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// links carries Raft messages between the stores of a test in memory, in
// order per destination; a link can be cut in either direction.
type links struct {
	mu     sync.Mutex
	stores map[uint64]*raftstore.Store
	queues map[uint64]chan *kvpb.RaftMessage
	cut    map[[2]uint64]bool
	wg     sync.WaitGroup
}

func newLinks() *links {
	return &links{stores: map[uint64]*raftstore.Store{}, queues: map[uint64]chan *kvpb.RaftMessage{}, cut: map[[2]uint64]bool{}}
}

func (n *links) attach(id uint64, s *raftstore.Store) {
	q := make(chan *kvpb.RaftMessage, 4096)
	n.mu.Lock()
	n.stores[id], n.queues[id] = s, q
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for m := range q {
			_ = s.Receive(m)
		}
	}()
}

func (n *links) close() {
	n.mu.Lock()
	for id, q := range n.queues {
		close(q)
		delete(n.queues, id)
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// isolate cuts (or, with on false, restores) every link of store id.
func (n *links) isolate(id uint64, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for other := range n.stores {
		if other != id {
			n.cut[[2]uint64{id, other}], n.cut[[2]uint64{other, id}] = on, on
		}
	}
}

type linkTransport struct {
	n    *links
	from uint64
}

func (t linkTransport) Send(msgs []*kvpb.RaftMessage) {
	for _, m := range msgs {
		to := m.ToPeer.GetStoreId()
		t.n.mu.Lock()
		q, ok := t.n.queues[to]
		cut := t.n.cut[[2]uint64{t.from, to}]
		t.n.mu.Unlock()
		if !ok || cut {
			continue
		}
		select {
		case q <- m:
		default:
		}
	}
}

// replica is one store of a replicated test region with its KV service.
type replica struct {
	id      uint64
	store   *raftstore.Store
	peer    *raftstore.Peer
	s       *Server
	table   *mvcc.PessimisticLocks
	dropped chan struct{} // a send each time the store stops leading
}

// newReplicatedRegion starts three stores, each with its own engines and
// KV service, holding region 2 with a replica on each, joined by links.
// The stores tick on their own clocks, as in a node: elections, leases and
// CheckQuorum run in real time.
func newReplicatedRegion(t *testing.T) (*links, []*replica) {
	t.Helper()
	n := newLinks()
	region := &kvpb.Region{Id: 2, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1},
		Peers: []*kvpb.Peer{{Id: 2, StoreId: 1}, {Id: 3, StoreId: 2}, {Id: 4, StoreId: 3}}}
	var rs []*replica
	for id := uint64(1); id <= 3; id++ {
		db, err := engine.OpenEngines(t.TempDir(), engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := raftstore.BootstrapRegion(db, region); err != nil {
			t.Fatal(err)
		}
		locks, err := mvcc.LoadLockSet(db.KV)
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{id: id, table: mvcc.NewPessimisticLocks(0), dropped: make(chan struct{}, 16)}
		locks.SetPessimisticLocks(r.table)
		r.store, err = raftstore.Open(db, raftstore.Config{StoreID: id, Transport: linkTransport{n: n, from: id},
			Observer: testObserver{locks}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnLeaderChange: func(regionID uint64, leader bool) {
				if !leader {
					r.table.DropRange(nil, nil)
					select {
					case r.dropped <- struct{}{}:
					default:
					}
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		r.peer, _ = r.store.Peer(2)
		r.s = New(r.store, locks, testTSO)
		n.attach(id, r.store)
		rs = append(rs, r)
		t.Cleanup(func() { db.Close() })
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.store.Close()
		}
		n.close()
	})
	return n, rs
}

// leaderAmong waits until one of rs leads the region and serves requests.
func leaderAmong(t *testing.T, rs ...*replica) *replica {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, r := range rs {
			if r.peer.CheckRequest(nil) == nil {
				return r
			}
		}
	}
	t.Fatal("no leader elected")
	return nil
}

// A commit released early to a lock waiter, then lost with its leader: the
// holder's one-phase commit is proposed on a leader that has just been cut
// off from both followers, so its entry can never commit. The waiter is
// woken at the proposal and locked over the pending commit (it read the
// holder's value). The two followers elect a new leader, the old one
// steps down (CheckQuorum) and fails the proposal. Then:
//
//   - the holder was never told it committed;
//   - the waiter's commit fails: the old leader answers that it does not
//     lead, and the new leader, where the waiter's lock never existed,
//     refuses to take the missing lock for granted (as a prewrite does
//     for a lock lost with its leader when nothing committed since)
//     because the commit it was locked over has no record there
//     (PessimisticLockNotFound): it cannot build on the lost value;
//   - the new leader, and the old one once it has caught up, hold the row
//     as it was before the holder.
func TestEarlyReleasedCommitLostWithLeader(t *testing.T) {
	ctx := context.Background()
	n, rs := newReplicatedRegion(t)
	old := leaderAmong(t, rs...)
	var rest []*replica
	for _, r := range rs {
		if r != old {
			rest = append(rest, r)
		}
	}
	key := "district"

	// The row's value before the holder: committed on all three.
	if resp, err := old.s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 5, PrimaryLock: []byte(key),
		LockTtl: 3000, TryOnePc: true, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte("v0")}}}); err != nil ||
		len(resp.Errors) > 0 || resp.RegionError != nil || resp.OnePcCommitTs == 0 {
		t.Fatalf("initial write: %v %+v", err, resp)
	}

	// Holder H (10) locks the row on the leader; W (20) waits for it.
	if resp, err := old.s.KvPessimisticLock(ctx, lockReq(key, 10, 10, 0)); err != nil || len(resp.Errors) > 0 || resp.RegionError != nil {
		t.Fatalf("lock of H: %v %+v", err, resp)
	}
	wDone := make(chan *kvpb.PessimisticLockResponse, 1)
	go func() {
		resp, err := old.s.KvPessimisticLock(ctx, lockReq(key, 20, 20, 10*time.Second))
		if err != nil {
			t.Error(err)
		}
		wDone <- resp
	}()
	for deadline := time.Now().Add(5 * time.Second); totalWaiters(old.s) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("W does not wait")
		}
	}

	// The leader loses both followers; H commits in one phase on it.
	n.isolate(old.id, true)
	hDone := make(chan *kvpb.PrewriteResponse, 1)
	go func() {
		resp, err := old.s.KvPrewrite(ctx, onePCOverLock(key, "v-holder", 10, 10, 10, 0))
		if err != nil {
			t.Error(err)
		}
		hDone <- resp
	}()
	var w *kvpb.PessimisticLockResponse
	select {
	case w = <-wDone:
	case <-time.After(5 * time.Second):
		t.Fatal("W was not woken at H's proposal")
	}
	if w == nil || len(w.Pending) != 1 || string(w.Pending[0].Value) != "v-holder" {
		t.Fatalf("W's lock response carries no pending value of H: %+v", w)
	}
	commitTS := w.Pending[0].CommitTs

	// The majority elects a new leader; the old one steps down and fails
	// H's proposal, which it could never commit.
	nu := leaderAmong(t, rest...)
	select {
	case h := <-hDone:
		if h == nil || h.RegionError == nil || h.OnePcCommitTs != 0 {
			t.Fatalf("H's commit on the cut-off leader: %+v, want a region error", h)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("H's commit on the cut-off leader never returned")
	}
	select {
	case <-old.dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("the old leader never dropped its locks")
	}
	if old.table.Len() != 0 {
		t.Fatalf("%d pessimistic locks survived on the old leader", old.table.Len())
	}

	// W commits as its client would: the old leader refuses (not leader),
	// the new one finds neither W's lock nor H's commit record.
	if resp, err := old.s.KvPrewrite(ctx, onePCOverLock(key, "v-waiter", 20, commitTS, commitTS, commitTS)); err != nil ||
		resp.RegionError == nil || resp.OnePcCommitTs != 0 {
		t.Fatalf("W's commit on the old leader: %v %+v, want a region error", err, resp)
	}
	resp, err := nu.s.KvPrewrite(ctx, onePCOverLock(key, "v-waiter", 20, commitTS, commitTS, commitTS))
	if err != nil || resp.RegionError != nil {
		t.Fatalf("W's commit on the new leader: %v %+v", err, resp)
	}
	if len(resp.Errors) != 1 || !strings.Contains(resp.Errors[0].String(), "pessimistic lock not found") || resp.OnePcCommitTs != 0 {
		t.Fatalf("W's commit over a lock that depends on a lost commit: %+v", resp)
	}

	// The row is as before H, on the new leader now and on the old one
	// once it has rejoined and caught up.
	if r := mustGet(t, nu.s, key, commitTS+100); string(r.Value) != "v0" {
		t.Fatalf("row on the new leader: %q, want v0", r.Value)
	}
	n.isolate(old.id, false)
	if resp, err := nu.s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: commitTS + 200, PrimaryLock: []byte("marker"),
		LockTtl: 3000, TryOnePc: true, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("marker"), Value: []byte("m")}}}); err != nil ||
		len(resp.Errors) > 0 || resp.RegionError != nil {
		t.Fatalf("write after the heal: %v %+v", err, resp)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if v, ok := committedValue(t, old, "marker", commitTS+300); ok && string(v) == "m" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old leader never caught up with the new term")
		}
	}
	if v, _ := committedValue(t, old, key, commitTS+300); string(v) != "v0" {
		t.Fatalf("row on the old leader after it caught up: %q, want v0", v)
	}
}

// committedValue reads key at ts from r's engine directly (r need not
// lead): the value applied there, and whether the key has one.
func committedValue(t *testing.T, r *replica, key string, ts uint64) ([]byte, bool) {
	t.Helper()
	v, found, err := mvcc.Get(r.store.Engine(), []byte(key), ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v, found
}
