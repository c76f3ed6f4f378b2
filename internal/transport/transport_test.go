package transport

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// addrBook resolves store ids to the listeners of a test.
type addrBook struct {
	mu    sync.Mutex
	addrs map[uint64]string
}

func (b *addrBook) StoreAddress(_ context.Context, id uint64) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.addrs[id]
	if !ok {
		return "", fmt.Errorf("no store %d", id)
	}
	return a, nil
}

type node struct {
	id  uint64
	dir string
	eng engine.Engines
	st  *raftstore.Store
	tr  *Transport
	srv *grpc.Server
	ln  net.Listener
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startNode(t *testing.T, book *addrBook, cluster, id uint64, dir, addr string) *node {
	t.Helper()
	eng, err := engine.OpenEngines(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	book.mu.Lock()
	book.addrs[id] = ln.Addr().String()
	book.mu.Unlock()
	tr := New(cluster, id, book, quiet())
	st, err := raftstore.Open(eng, raftstore.Config{StoreID: id, Transport: tr, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	tr.SetStore(st)
	srv := grpc.NewServer()
	kvpb.RegisterRaftServer(srv, tr)
	go srv.Serve(ln)
	return &node{id: id, dir: dir, eng: eng, st: st, tr: tr, srv: srv, ln: ln}
}

func (n *node) stop() {
	n.srv.Stop()
	n.tr.Close()
	n.st.Close()
	n.eng.KV.Flush()
	n.eng.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leaderOf(nodes []*node, region uint64) (*node, *raftstore.Peer) {
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if p, ok := n.st.Peer(region); ok && p.IsLeaderReady() {
			return n, p
		}
	}
	return nil, nil
}

func put(t *testing.T, n *node, p *raftstore.Peer, k, v string) {
	t.Helper()
	b := n.st.Engine().NewBatch()
	defer b.Close()
	_ = b.Set([]byte(k), []byte(v), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.st.Propose(ctx, p, p.Region().Epoch, b); err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
}

func get(n *node, k string) string {
	v, ok, _ := engine.GetCopy(n.eng.KV, []byte(k))
	if !ok {
		return "<none>"
	}
	return string(v)
}

// Three stores on loopback gRPC: a region bootstrapped on one of them is
// replicated to the others (learner, snapshot over the snapshot stream,
// promotion), writes reach every replica, a replica that was down catches
// up, and a store of another cluster is refused.
func TestReplicationOverGRPC(t *testing.T) {
	book := &addrBook{addrs: map[uint64]string{}}
	const cluster = 7
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	region := &kvpb.Region{Id: 1, StartKey: []byte("a"), Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1},
		Peers: []*kvpb.Peer{{Id: 11, StoreId: 1}}}
	eng, err := engine.OpenEngines(dirs[0], engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := raftstore.BootstrapRegion(eng, region); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = startNode(t, book, cluster, uint64(i+1), dirs[i], "")
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.stop()
			}
		}
	}()
	waitFor(t, "a leader", func() bool { n, _ := leaderOf(nodes, 1); return n != nil })
	n1, p := leaderOf(nodes, 1)
	for i := 0; i < 100; i++ {
		put(t, n1, p, fmt.Sprintf("k%03d", i), "v")
	}
	ctx := context.Background()
	for i, peerID := range []uint64{12, 13} {
		store := uint64(i + 2)
		np := &kvpb.Peer{Id: peerID, StoreId: store}
		if _, err := n1.st.ChangePeers(ctx, p, p.Region().Epoch, []raftstore.PeerChange{{Kind: raftstore.AddLearner, Peer: np}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("store %d to get a snapshot", store), func() bool {
			q, ok := nodes[store-1].st.Peer(1)
			return ok && q.Initialized() && get(nodes[store-1], "k099") == "v"
		})
		if _, err := n1.st.ChangePeers(ctx, p, p.Region().Epoch, []raftstore.PeerChange{{Kind: raftstore.PromoteLearner, Peer: np}}); err != nil {
			t.Fatal(err)
		}
		if _, err := n1.st.ChangePeers(ctx, p, p.Region().Epoch, []raftstore.PeerChange{{Kind: raftstore.LeaveJoint}}); err != nil {
			t.Fatal(err)
		}
	}
	put(t, n1, p, "after", "3way")
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("store %d to apply", n.id), func() bool { return get(n, "after") == "3way" })
	}

	// Store 3 goes down; writes go on with two of three.
	addr3 := book.addrs[3]
	nodes[2].stop()
	nodes[2] = nil
	for i := 0; i < 50; i++ {
		put(t, n1, p, fmt.Sprintf("down%03d", i), "v")
	}
	nodes[2] = startNode(t, book, cluster, 3, dirs[2], addr3)
	waitFor(t, "store 3 to catch up", func() bool { return get(nodes[2], "down049") == "v" })

	// A store of another cluster cannot talk to these.
	other := New(cluster+1, 9, book, quiet())
	defer other.Close()
	conn, err := grpc.NewClient(book.addrs[1], other.dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl, err := kvpb.NewRaftClient(conn).Raft(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = cl.Send(&kvpb.RaftMessageBatch{ClusterId: cluster + 1, FromStore: 9})
	if _, err := cl.CloseAndRecv(); err == nil {
		t.Fatal("a store of another cluster was accepted")
	}
}
