package client

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// pointGetKv is a TEST DOUBLE of a store that answers every KvGet with the
// same value and nothing else, so that the allocations counted are the
// client's own.
type pointGetKv struct {
	kvpb.KvClient
	resp *kvpb.GetResponse
}

func (p pointGetKv) KvGet(context.Context, *kvpb.GetRequest, ...grpc.CallOption) (*kvpb.GetResponse, error) {
	return p.resp, nil
}

type singleStoreRouter struct{ kv kvpb.KvClient }

func (r singleStoreRouter) KvClient(uint64) (kvpb.KvClient, error) { return r.kv, nil }

// TestPointSelectPathAllocations guards the sysbench point-select path:
// Begin (one batched TSO call) plus one Get (one region cache lookup, one
// KvGet). Expected today: the Txn, the GetRequest, the TSO RPC's deadline
// context (3, per batch: amortized across concurrent callers) and the test
// PD's response (1). The test fails if unnoticed per-call garbage appears.
func TestPointSelectPathAllocations(t *testing.T) {
	fc := newFakeCluster()
	kvc := pointGetKv{resp: &kvpb.GetResponse{Value: []byte("v")}}
	c := New(fakePD{fc}, singleStoreRouter{kv: kvc}, Options{})
	defer c.Close()
	ctx := context.Background()
	key := []byte("k")
	run := func() {
		txn, err := c.Begin(ctx, kv.TxnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := txn.Get(ctx, key); err != nil || string(v) != "v" {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	run() // warm the region cache
	allocs := testing.AllocsPerRun(200, run)
	t.Logf("allocations per Begin+Get: %.1f", allocs)
	if allocs > 7 {
		t.Fatalf("Begin+Get allocates %.1f times, budget is 7", allocs)
	}
}
