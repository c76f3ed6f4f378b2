package deadlock

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/kvpb"
)

// TestDetector runs the scripts in testdata/ against a Detector with a
// manual clock. Commands:
//
//	detect txn=N wait_for=N key=K        (prints ok, or the cycle it closes)
//	clean_up_wait_for txn=N wait_for=N key=K
//	clean_up txn=N
//	advance D                             (moves the clock by a Go duration)
//	graph                                 (every live edge)
func TestDetector(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		now := time.Unix(1000, 0)
		d := New(10 * time.Second)
		d.now = func() time.Time { return now }
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			entry := func() *kvpb.WaitForEntry {
				e := &kvpb.WaitForEntry{}
				for _, a := range td.CmdArgs {
					switch a.Key {
					case "txn":
						e.Txn = mustUint(t, a.Vals[0])
					case "wait_for":
						e.WaitForTxn = mustUint(t, a.Vals[0])
					case "key":
						e.Key = []byte(a.Vals[0])
						e.KeyHash = KeyHash(e.Key)
					}
				}
				return e
			}
			call := func(tp kvpb.DeadlockRequestType) string {
				resp, err := d.Detect(context.Background(), &kvpb.DeadlockRequest{Tp: tp, Entry: entry()})
				if err != nil {
					return "error: " + err.Error()
				}
				return formatResponse(resp)
			}
			switch td.Cmd {
			case "detect":
				return call(kvpb.DeadlockRequestType_Detect)
			case "clean_up_wait_for":
				return call(kvpb.DeadlockRequestType_CleanUpWaitFor)
			case "clean_up":
				return call(kvpb.DeadlockRequestType_CleanUp)
			case "advance":
				dur, err := time.ParseDuration(td.CmdArgs[0].Key)
				if err != nil {
					t.Fatal(err)
				}
				now = now.Add(dur)
				return "ok"
			case "graph":
				return formatGraph(d)
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return ""
		})
	})
}

func mustUint(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func formatResponse(r *kvpb.DeadlockResponse) string {
	switch {
	case r.Error != "":
		return "error: " + r.Error
	case r.Entry == nil:
		return "ok"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "deadlock: %d waiting for %d on %s closes the cycle\n", r.Entry.Txn, r.Entry.WaitForTxn, r.Entry.Key)
	for _, e := range r.WaitChain {
		fmt.Fprintf(&sb, "  %d waits for %d on %s\n", e.Txn, e.WaitForTxn, e.Key)
	}
	return sb.String()
}

func formatGraph(d *Detector) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var lines []string
	for txn := range d.out {
		for _, e := range d.live(txn, d.now()) {
			lines = append(lines, fmt.Sprintf("%d -> %d on %s", txn, e.to, e.key))
		}
	}
	if len(lines) == 0 {
		return "(empty)"
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// The detector serves other nodes over gRPC: a cycle made of waits reported
// by two clients (two nodes' lock waiters) is found.
func TestDetectorOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	kvpb.RegisterDeadlockDetectorServer(srv, New(0))
	go srv.Serve(ln)
	defer srv.Stop()
	dial := func() Service {
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return Remote(kvpb.NewDeadlockDetectorClient(conn))
	}
	nodeA, nodeB := dial(), dial()
	ctx := context.Background()
	wait := func(s Service, txn, holder uint64, key string) *kvpb.DeadlockResponse {
		t.Helper()
		resp, err := s.Detect(ctx, &kvpb.DeadlockRequest{Tp: kvpb.DeadlockRequestType_Detect,
			Entry: &kvpb.WaitForEntry{Txn: txn, WaitForTxn: holder, Key: []byte(key), KeyHash: KeyHash([]byte(key))}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := wait(nodeA, 10, 20, "a"); r.Entry != nil {
		t.Fatalf("first wait refused: %v", r)
	}
	r := wait(nodeB, 20, 10, "b")
	if r.Entry == nil || len(r.WaitChain) != 1 || r.WaitChain[0].Txn != 10 || string(r.WaitChain[0].Key) != "a" {
		t.Fatalf("cycle across clients not found: %v", r)
	}
}
