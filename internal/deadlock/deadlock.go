// Package deadlock is the cluster's deadlock detector: one wait-for graph
// of transactions waiting for each other's pessimistic locks, as TiKV keeps
// it.
//
// A region leader that makes a pessimistic lock request wait for another
// transaction's lock (kvserver's lock waiters) first asks the detector to
// Detect the edge "txn waits for wait_for_txn". The detector adds the edge
// unless a path already leads from wait_for_txn back to txn; then the wait
// would close a cycle, the edge is refused with the cycle, and the
// requester is the victim (MySQL error 1213), so of the transactions in a
// cycle exactly the one whose wait closed it is aborted, at once. When the
// wait ends (the lock was released, the wait timed out, the request was
// cancelled) the waiter removes its edge (CleanUpWaitFor).
//
// The graph is soft state. Edges also expire after a TTL, so an edge whose
// removal was lost (a node that died while waiting) cannot make a false
// deadlock for long; waiters wait in slices shorter than the TTL and detect
// again before each slice, which renews their edges. A detector that
// restarts, or moves to another node, starts empty and is refilled by the
// next slices within a second.
//
// One detector serves the whole cluster: waits on different nodes form
// cycles too. It runs with PD's leader (TiKV runs it with the leader of
// its first region; either is one node every node can find): pd.Server
// keeps a Detector per leadership term, serves Detect there and forwards
// it from other nodes over the kvpb.DeadlockDetector gRPC service. Service
// is what a lock waiter calls: PD's server in a node, a *Detector of its
// own in a KV service that runs alone (tests), Remote for a detector
// reached over gRPC.
package deadlock

import (
	"context"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-db/strata/kvpb"
)

// Service is the detector as a lock waiter sees it: *Detector in the
// process that runs it, Remote elsewhere.
type Service interface {
	Detect(ctx context.Context, req *kvpb.DeadlockRequest) (*kvpb.DeadlockResponse, error)
}

// DefaultTTL is how long an edge lives without being detected again.
const DefaultTTL = 10 * time.Second

// Detector is a wait-for graph. It is safe for concurrent use; requests are
// serialised, so of two waits that close a cycle together the second is
// refused.
type Detector struct {
	kvpb.UnimplementedDeadlockDetectorServer

	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	// out holds each waiting transaction's edges.
	out map[uint64][]edge
}

type edge struct {
	to      uint64 // the lock owner's start ts
	keyHash uint64
	key     []byte
	added   time.Time
}

var _ Service = (*Detector)(nil)

// New returns an empty detector whose edges expire after ttl (<= 0:
// DefaultTTL).
func New(ttl time.Duration) *Detector {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Detector{ttl: ttl, now: time.Now, out: make(map[uint64][]edge)}
}

// KeyHash is the hash that identifies a key in the graph.
func KeyHash(key []byte) uint64 {
	h := fnv.New64a()
	h.Write(key)
	return h.Sum64()
}

// Detect implements kvpb.DeadlockDetectorServer and Service.
func (d *Detector) Detect(_ context.Context, req *kvpb.DeadlockRequest) (*kvpb.DeadlockResponse, error) {
	e := req.GetEntry()
	if e == nil {
		return &kvpb.DeadlockResponse{Error: "deadlock request without an entry"}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch req.Tp {
	case kvpb.DeadlockRequestType_Detect:
		if chain := d.detect(e); chain != nil {
			return &kvpb.DeadlockResponse{Entry: e, DeadlockKeyHash: e.KeyHash, WaitChain: chain}, nil
		}
	case kvpb.DeadlockRequestType_CleanUpWaitFor:
		d.remove(e.Txn, func(x edge) bool { return x.to == e.WaitForTxn && x.keyHash == e.KeyHash })
	case kvpb.DeadlockRequestType_CleanUp:
		delete(d.out, e.Txn)
	default:
		return &kvpb.DeadlockResponse{Error: "unknown deadlock request type"}, nil
	}
	return &kvpb.DeadlockResponse{}, nil
}

// detect adds e's edge and returns nil, or returns the cycle the edge would
// close without adding it.
func (d *Detector) detect(e *kvpb.WaitForEntry) []*kvpb.WaitForEntry {
	now := d.now()
	if e.Txn == e.WaitForTxn {
		return nil // a transaction never waits for itself
	}
	if chain := d.path(e.WaitForTxn, e.Txn, now); chain != nil {
		return chain
	}
	edges := d.live(e.Txn, now)
	for i := range edges {
		if edges[i].to == e.WaitForTxn && edges[i].keyHash == e.KeyHash {
			edges[i].added = now // renewed
			return nil
		}
	}
	d.out[e.Txn] = append(edges, edge{to: e.WaitForTxn, keyHash: e.KeyHash, key: slices.Clone(e.Key), added: now})
	return nil
}

// path returns the edges of a path from txn from to txn to, or nil.
// Expired edges are dropped on the way.
func (d *Detector) path(from, to uint64, now time.Time) []*kvpb.WaitForEntry {
	type step struct {
		txn  uint64
		prev int // index in visited of the step before; -1 at from
		e    edge
	}
	visited := []step{{txn: from, prev: -1}}
	seen := map[uint64]bool{from: true}
	for i := 0; i < len(visited); i++ {
		for _, x := range d.live(visited[i].txn, now) {
			if x.to == to {
				chain := []*kvpb.WaitForEntry{entryOf(visited[i].txn, x)}
				for j := i; visited[j].prev >= 0; j = visited[j].prev {
					chain = append(chain, entryOf(visited[visited[j].prev].txn, visited[j].e))
				}
				slices.Reverse(chain)
				return chain
			}
			if !seen[x.to] {
				seen[x.to] = true
				visited = append(visited, step{txn: x.to, prev: i, e: x})
			}
		}
	}
	return nil
}

func entryOf(txn uint64, x edge) *kvpb.WaitForEntry {
	return &kvpb.WaitForEntry{Txn: txn, WaitForTxn: x.to, KeyHash: x.keyHash, Key: x.key}
}

// live returns txn's unexpired edges, dropping the expired ones.
func (d *Detector) live(txn uint64, now time.Time) []edge {
	edges, ok := d.out[txn]
	if !ok {
		return nil
	}
	kept := edges[:0]
	for _, x := range edges {
		if now.Sub(x.added) < d.ttl {
			kept = append(kept, x)
		}
	}
	if len(kept) == 0 {
		delete(d.out, txn)
		return nil
	}
	d.out[txn] = kept
	return kept
}

func (d *Detector) remove(txn uint64, match func(edge) bool) {
	edges := slices.DeleteFunc(d.out[txn], match)
	if len(edges) == 0 {
		delete(d.out, txn)
		return
	}
	d.out[txn] = edges
}

// Remote is the detector of another node, reached over gRPC.
func Remote(c kvpb.DeadlockDetectorClient) Service { return remote{c} }

type remote struct{ c kvpb.DeadlockDetectorClient }

func (r remote) Detect(ctx context.Context, req *kvpb.DeadlockRequest) (*kvpb.DeadlockResponse, error) {
	return r.c.Detect(ctx, req, grpc.WaitForReady(false))
}
