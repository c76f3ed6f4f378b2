package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// Splits between stores. SPLIT TABLE runs on whichever node the client
// is connected to, but only a region's leader can split it: that node
// asks the leader's store over the same authenticated gRPC connection
// the stores use for Raft.

// Splitter splits a region this store leads at key. It returns
// ErrNotLeader when the store does not lead the region holding key and
// ErrAlreadyBoundary when key starts a region.
type Splitter func(ctx context.Context, key []byte) (left, right *kvpb.Region, err error)

var (
	// ErrNotLeader: the store asked to split does not lead the region.
	ErrNotLeader = errors.New("not the region's leader")
	// ErrAlreadyBoundary: the split key already starts a region.
	ErrAlreadyBoundary = errors.New("the key already starts a region")
)

// SetSplitter installs the store's splitter (nil refuses splits).
func (t *Transport) SetSplitter(f Splitter) {
	t.mu.Lock()
	t.splitter = f
	t.mu.Unlock()
}

// SplitRegion implements kvpb.RaftServer.
func (t *Transport) SplitRegion(ctx context.Context, req *kvpb.SplitRegionRequest) (*kvpb.SplitRegionResponse, error) {
	if req.ClusterId != t.clusterID {
		return nil, fmt.Errorf("store %d belongs to cluster %d, not %d", t.storeID, t.clusterID, req.ClusterId)
	}
	t.mu.Lock()
	f := t.splitter
	t.mu.Unlock()
	if f == nil {
		return &kvpb.SplitRegionResponse{Error: "this store does not split regions yet"}, nil
	}
	left, right, err := f(ctx, req.Key)
	switch {
	case errors.Is(err, ErrNotLeader):
		return &kvpb.SplitRegionResponse{NotLeader: true, Error: err.Error()}, nil
	case errors.Is(err, ErrAlreadyBoundary):
		return &kvpb.SplitRegionResponse{AlreadyBoundary: true}, nil
	case err != nil:
		return &kvpb.SplitRegionResponse{Error: err.Error()}, nil
	}
	return &kvpb.SplitRegionResponse{Left: left, Right: right}, nil
}

// SplitAt asks store storeID to split the region it leads at key.
func (t *Transport) SplitAt(ctx context.Context, storeID uint64, key []byte) (*kvpb.SplitRegionResponse, error) {
	conn, err := t.dial(ctx, storeID)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return kvpb.NewRaftClient(conn).SplitRegion(cctx, &kvpb.SplitRegionRequest{ClusterId: t.clusterID, Key: key})
}
