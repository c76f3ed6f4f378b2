package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/kvpb"
)

// TestPDFailoverKeepsTimestampsAndIDsIncreasing kills PD's leader twice
// while a client asks the cluster for timestamps and ids one after
// another (through whichever node answers): every timestamp and every id
// it gets is above all it got before, across both failovers.
func TestPDFailoverKeepsTimestampsAndIDsIncreasing(t *testing.T) {
	c := StartCluster(t, 3)
	var clients []kvpb.PDClient
	for _, n := range c.Nodes {
		conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		clients = append(clients, kvpb.NewPDClient(conn))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var got atomic.Int64
	var failure atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		var lastTS, lastID uint64
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cl := clients[i%len(clients)]
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			ts, err := cl.Tso(ctx, &kvpb.TsoRequest{Count: 1})
			cancel()
			if err == nil && ts.Error == nil {
				if ts.Timestamp <= lastTS {
					failure.Store("timestamp went back")
					return
				}
				lastTS = ts.Timestamp
				got.Add(1)
			}
			ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
			id, err := cl.AllocID(ctx, &kvpb.AllocIDRequest{Count: 1})
			cancel()
			if err == nil && id.Error == nil {
				if id.Id <= lastID {
					failure.Store("id went back or repeated")
					return
				}
				lastID = id.Id
			}
		}
	}()
	for round := 0; round < 2; round++ {
		before := got.Load()
		time.Sleep(500 * time.Millisecond)
		leader := c.PDLeader(20 * time.Second)
		leader.Kill()
		deadline := time.Now().Add(20 * time.Second)
		for got.Load() < before+50 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no timestamps after PD's leader was killed", round)
			}
			time.Sleep(20 * time.Millisecond)
		}
		leader.Start()
		c.WaitReplicated(60 * time.Second)
	}
	close(stop)
	wg.Wait()
	if f := failure.Load(); f != nil {
		t.Fatal(f)
	}
	t.Logf("%d timestamps across two PD failovers", got.Load())
}
