package node

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/deadlock"
	"github.com/strata-db/strata/kvpb"
)

func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The cluster has one wait-for graph, on PD's leader: waits reported to
// the PD server of a node that is not the leader are forwarded over gRPC,
// so a cycle made of waits reported on two nodes is found.
func TestDeadlockDetectedAcrossNodes(t *testing.T) {
	ctx := context.Background()
	start := func(join []string) *Node {
		n, err := Start(ctx, Config{DataDir: t.TempDir(), InMemory: true, GCInterval: -1,
			GRPCAddr: freeLoopback(t), Join: join, Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a := start(nil)
	b := start([]string{a.cfg.GRPCAddr})
	for deadline := time.Now().Add(10 * time.Second); !a.pd.IsLeader(); {
		if time.Now().After(deadline) {
			t.Fatal("the first node is not PD's leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b.pd.IsLeader() {
		t.Fatal("both nodes lead PD")
	}
	detect := func(n *Node, txn, holder uint64, key string) *kvpb.DeadlockResponse {
		t.Helper()
		resp, err := n.pd.Detect(ctx, &kvpb.DeadlockRequest{Tp: kvpb.DeadlockRequestType_Detect,
			Entry: &kvpb.WaitForEntry{Txn: txn, WaitForTxn: holder, Key: []byte(key), KeyHash: deadlock.KeyHash([]byte(key))}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error != "" {
			t.Fatalf("detect on store %d: %s", n.storeID, resp.Error)
		}
		return resp
	}
	if r := detect(b, 10, 20, "a"); r.Entry != nil {
		t.Fatalf("a single wait refused: %v", r)
	}
	r := detect(a, 20, 10, "b")
	if r.Entry == nil || len(r.WaitChain) != 1 || r.WaitChain[0].Txn != 10 {
		t.Fatalf("the cycle of waits reported on two nodes was not found: %v", r)
	}
	// And the other way round: the edge reported on the leader, the cycle
	// closed by a wait reported on the follower.
	if r := detect(a, 30, 40, "c"); r.Entry != nil {
		t.Fatalf("a single wait refused: %v", r)
	}
	if r := detect(b, 40, 30, "d"); r.Entry == nil {
		t.Fatal("the cycle closed on the follower was not found")
	}
}
