package client

import (
	"context"
	"errors"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/strata-db/strata/kvpb"
)

// storeDirectoryPD is a TEST DOUBLE of PD's GetStore that counts lookups.
type storeDirectoryPD struct {
	PD
	mu      sync.Mutex
	lookups int
	addrs   map[uint64]string
}

func (p *storeDirectoryPD) GetStore(_ context.Context, in *kvpb.GetStoreRequest, _ ...grpc.CallOption) (*kvpb.GetStoreResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups++
	addr, ok := p.addrs[in.StoreId]
	if !ok {
		return &kvpb.GetStoreResponse{Error: &kvpb.PDError{Message: "no such store"}}, nil
	}
	return &kvpb.GetStoreResponse{Store: &kvpb.Store{Id: in.StoreId, Address: addr}}, nil
}

func TestGRPCRouterCachesStoresAndPrefersLocal(t *testing.T) {
	pd := &storeDirectoryPD{addrs: map[uint64]string{1: "127.0.0.1:1", 2: "127.0.0.1:1", 3: "127.0.0.1:3"}}
	r := NewGRPCRouter(pd)
	defer r.Close()

	a, err := r.KvClient(1)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := r.KvClient(1); b != a {
		t.Fatal("second lookup built a new client")
	}
	if _, err := r.KvClient(2); err != nil { // same address: shares the connection
		t.Fatal(err)
	}
	if len(r.conns) != 1 || pd.lookups != 2 {
		t.Fatalf("%d connections after %d PD lookups, want 1 and 2", len(r.conns), pd.lookups)
	}
	r.InvalidateStore(1)
	if _, err := r.KvClient(1); err != nil || pd.lookups != 3 {
		t.Fatalf("after invalidation: err=%v lookups=%d, want a fresh lookup", err, pd.lookups)
	}
	if _, err := r.KvClient(9); err == nil {
		t.Fatal("unknown store resolved")
	}

	local := LocalKv(fakeStore{fc: newFakeCluster(), id: 3})
	r.SetLocal(3, local)
	if c, _ := r.KvClient(3); c != local {
		t.Fatal("a local store was not served in-process")
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.KvClient(1); !errors.Is(err, errClientClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
