package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/kvpb"
)

// countingKv answers every KvGet (as a store answers a probe) and counts
// them.
type countingKv struct {
	kvpb.UnimplementedKvServer
	gets atomic.Int64
}

func (k *countingKv) KvGet(context.Context, *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	k.gets.Add(1)
	return &kvpb.GetResponse{}, nil
}

// A store nobody sends requests to is not probed once probeIdleAfter has
// passed; the next request starts the probes again at once.
func TestProbesStopWhileIdle(t *testing.T) {
	defer func(d time.Duration) { probeIdleAfter = d }(probeIdleAfter)
	probeIdleAfter = 600 * time.Millisecond

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	kv := &countingKv{}
	kvpb.RegisterKvServer(srv, kv)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	r := NewGRPCRouter(nil)
	h := newStoreHealth()
	r.wg.Add(1)
	go r.probe(conn, h)
	defer r.Close()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// In use: probed every probeInterval.
	waitFor("the first probes", func() bool { return kv.gets.Load() >= 2 })
	// Idle: the probes stop.
	waitFor("the probes to stop", func() bool { return r.probesIdle.Load() == 1 })
	n := kv.gets.Load()
	time.Sleep(4 * probeInterval)
	if got := kv.gets.Load() - n; got != 0 {
		t.Fatalf("%d probes of an idle store", got)
	}
	// A request starts them again at once, not after a probe interval.
	start := time.Now()
	h.use()
	waitFor("a probe after the request", func() bool { return kv.gets.Load() > n })
	if took := time.Since(start); took > probeInterval {
		t.Fatalf("first probe %v after the request, want at once", took)
	}
	if r.probesIdle.Load() != 0 {
		t.Fatal("probes still idle after a request")
	}
	waitFor("probing to go on", func() bool { return kv.gets.Load() > n+2 })
}
