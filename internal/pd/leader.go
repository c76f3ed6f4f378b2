package pd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/strata-db/strata/internal/deadlock"
	"github.com/strata-db/strata/kvpb"
)

// Leadership and forwarding. PD's leader is the node whose replica of the
// system region leads it. LeaderChanged (called from the raft store when
// that replica becomes a ready leader, or stops leading) loads or drops
// the leader's state; every request checks that the replica still leads,
// under its lease, before it is served locally, and is forwarded to the
// leader otherwise.

// leaderState is what PD's leader keeps in memory, loaded from the
// system region's applied state when it took over.
type leaderState struct {
	term      uint64
	since     time.Time
	clusterID uint64
	replicas  uint32
	tso       *TSO

	idMu    sync.Mutex
	nextID  uint64
	idLimit uint64

	gcMu        sync.Mutex
	gcSafePoint uint64

	dir directory

	// stores: the directory with liveness (stores.go).
	storesMu sync.Mutex
	stores   map[uint64]*storeState
	// clusterBuilds counts the schedulers' views built (tests).
	clusterBuilds int
	// ops are the operators handed out and not yet seen done, by region.
	ops map[uint64]*inflightOp
	// moves are the replica moves in progress, by region.
	moves map[uint64]moveState
	// balanced: when a balancer last moved each region (BalanceCooldown).
	balanced map[uint64]time.Time
	// opLog is the most recent operators handed out, oldest first.
	opLog []*kvpb.OperatorRecord
	// ages: since when each region has had its range (the merge
	// checker's split-merge interval); merging: the merges handed out, by
	// source, until the source is seen gone or mergeTimeout passed.
	ages    map[uint64]regionAge
	merging map[uint64]pendingMerge
	// mergeNext: when the next region becomes old enough to merge;
	// mergePassed: the last such time passed. A store that has not
	// patrolled since patrols (scheduler.go).
	mergeNext, mergePassed time.Time
	// lastDecision: when a scheduling round last decided an operator.
	lastDecision time.Time

	// detector is the cluster's deadlock detector (deadlock.go), empty
	// at every new term.
	detector *deadlock.Detector
}

// watchInterval is how often the server checks whether its replica of the
// system region leads (LeaderChanged makes it immediate where the raft
// store calls it).
const watchInterval = 20 * time.Millisecond

// watch follows the leadership of the local replica of the system region.
func (s *Server) watch() {
	defer close(s.stopped)
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		p, ok := s.store.Peer(SystemRegionID)
		leading := ok && p.IsLeaderReady()
		s.leadMu.Lock()
		cur := s.lead
		loading := s.loading
		s.leadMu.Unlock()
		switch {
		case leading && (cur == nil || cur.term != p.ReadyTerm()) && !loading:
			s.LeaderChanged(true)
		case !leading && cur != nil:
			s.LeaderChanged(false)
		}
	}
}

// LeaderChanged tells PD that the local replica of the system region
// became a ready leader (true) or stopped leading (false). The state is
// loaded in the background: the store loop calls this and must not wait.
func (s *Server) LeaderChanged(leader bool) {
	if !leader {
		s.leadMu.Lock()
		s.lead = nil
		s.leadMu.Unlock()
		return
	}
	p, ok := s.store.Peer(SystemRegionID)
	if !ok {
		return
	}
	term := p.ReadyTerm()
	s.leadMu.Lock()
	if s.loading || (s.lead != nil && s.lead.term == term) {
		s.leadMu.Unlock()
		return
	}
	s.loading = true
	s.leadMu.Unlock()
	go func() {
		st, err := s.load(term)
		s.leadMu.Lock()
		defer s.leadMu.Unlock()
		s.loading = false
		if err != nil {
			s.log.Error("pd: cannot load the leader's state", "err", err)
			return
		}
		if p.IsLeaderReady() && p.ReadyTerm() == term {
			s.lead = st
			s.log.Info("pd: this node is PD's leader", "term", term)
		}
	}()
}

// load reads the leader's state from the applied state of the system
// region, which holds every committed entry (the replica is a ready
// leader of term).
func (s *Server) load(term uint64) (*leaderState, error) {
	db := s.store.Engine()
	st := &leaderState{term: term, since: time.Now(), stores: map[uint64]*storeState{}, ops: map[uint64]*inflightOp{}, moves: map[uint64]moveState{},
		balanced: map[uint64]time.Time{},
		ages:     map[uint64]regionAge{}, merging: map[uint64]pendingMerge{},
		detector: deadlock.New(0)}
	limit, err := readUint(db, tsoLimitKey)
	if err != nil {
		return nil, err
	}
	st.tso = newTSO(int64(limit), func(ctx context.Context, l int64) error {
		return s.persistUint(ctx, tsoLimitKey, uint64(l))
	})
	idLimit, err := readUint(db, idLimitKey)
	if err != nil {
		return nil, err
	}
	st.nextID, st.idLimit = max(idLimit, ReservedIDs), idLimit
	if st.gcSafePoint, err = readUint(db, gcSafePointKey); err != nil {
		return nil, err
	}
	if st.clusterID, err = readUint(db, clusterIDKey); err != nil {
		return nil, err
	}
	r, err := readUint(db, replicasKey)
	if err != nil {
		return nil, err
	}
	st.replicas = uint32(r)
	if st.replicas == 0 {
		st.replicas = DefaultReplicas
	}
	stores, err := readStores(db)
	if err != nil {
		return nil, err
	}
	for _, info := range stores {
		// Stores count as up from the leader's start until they miss
		// heartbeats: a new leader knows nothing of their liveness yet.
		st.stores[info.Id] = &storeState{info: info, up: true, since: st.since, lastHeartbeat: st.since}
	}
	s.setStores(stores)
	// The region directory starts from this store's replicas; heartbeats
	// fill in the rest within a second.
	for _, r := range s.store.Regions() {
		var leader *kvpb.Peer
		if p, ok := s.store.Peer(r.Id); ok {
			lid := p.LeaderOf()
			for _, rp := range r.Peers {
				if rp.Id == lid {
					leader = rp
				}
			}
		}
		st.dir.update(&kvpb.RegionStat{Region: r, Leader: leader})
	}
	return st, nil
}

// leading returns the leader's state if this server is PD's leader now:
// its replica of the system region is a ready leader of the term the
// state was loaded for, and holds its lease (or confirmed its leadership
// with a ReadIndex round).
func (s *Server) leading(ctx context.Context) (*leaderState, error) {
	s.leadMu.Lock()
	st := s.lead
	s.leadMu.Unlock()
	if st == nil {
		return nil, ErrNotLeader
	}
	p, ok := s.store.Peer(SystemRegionID)
	if !ok || !p.IsLeaderReady() || p.ReadyTerm() != st.term {
		return nil, ErrNotLeader
	}
	if err := s.store.ReadReady(ctx, p); err != nil {
		return nil, ErrNotLeader
	}
	return st, nil
}

// IsLeader reports whether this server is PD's leader.
func (s *Server) IsLeader() bool {
	_, err := s.leading(context.Background())
	return err == nil
}

func (st *leaderState) allocIDs(ctx context.Context, s *Server, count uint32) (uint64, error) {
	st.idMu.Lock()
	defer st.idMu.Unlock()
	if st.nextID+uint64(count) > st.idLimit {
		newLimit := st.nextID + uint64(count) + idBatch
		if err := s.persistUint(ctx, idLimitKey, newLimit); err != nil {
			return 0, err
		}
		st.idLimit = newLimit
	}
	first := st.nextID + 1
	st.nextID += uint64(count)
	return first, nil
}

func (st *leaderState) updateGCSafePoint(ctx context.Context, s *Server, sp uint64) (uint64, error) {
	st.gcMu.Lock()
	defer st.gcMu.Unlock()
	if sp <= st.gcSafePoint {
		return st.gcSafePoint, nil
	}
	if err := s.persistUint(ctx, gcSafePointKey, sp); err != nil {
		return 0, err
	}
	st.gcSafePoint = sp
	return sp, nil
}

// Forwarding. A request that reaches a server that is not PD's leader is
// sent on to the leader it knows of: from its own replica of the system
// region (leader peer -> store -> address), else the leader named by the
// last heartbeat response, else one of the join addresses. A request is
// forwarded at most twice (a node with no replica of the system region
// may ask one that has), so a stale view cannot make requests loop.

const (
	hopsKey = "strata-pd-hops"
	maxHops = 2
)

func hops(ctx context.Context) int {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return 0
	}
	v := md.Get(hopsKey)
	if len(v) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(v[0])
	return n
}

// forwarded marks an outgoing request as forwarded once more.
func forwarded(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, hopsKey, strconv.Itoa(hops(ctx)+1))
}

type forwarder struct {
	s     *Server
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	hint  string // leader address from the last heartbeat response
}

// forwardTimeout bounds one forwarding attempt: a leader that stopped
// answering (killed, paused, cut off) must not hold a request longer
// than it takes the others to elect a new one.
const forwardTimeout = 2 * time.Second

func (f *forwarder) init(s *Server) { f.s, f.conns = s, map[string]*grpc.ClientConn{} }

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for a, c := range f.conns {
		c.Close()
		delete(f.conns, a)
	}
}

// setHint records the leader a heartbeat response named.
func (f *forwarder) setHint(addr string) {
	f.mu.Lock()
	f.hint = addr
	f.mu.Unlock()
}

func (f *forwarder) conn(addr string) (kvpb.PDClient, error) {
	c, err := f.clientConn(addr)
	if err != nil {
		return nil, err
	}
	return kvpb.NewPDClient(c), nil
}

func (f *forwarder) clientConn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.conns[addr]
	if !ok {
		var err error
		c, err = grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, f.s.dial...)...)
		if err != nil {
			return nil, err
		}
		f.conns[addr] = c
	}
	return c, nil
}

// candidates are the addresses to forward to, most likely leader first:
// the leader this node's replica of the system region follows, the one
// the last heartbeat response named, the join addresses, and every other
// store this node knows of.
func (f *forwarder) candidates() []string {
	s := f.s
	var out []string
	seen := map[string]bool{}
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	self := s.storeAddr(s.store.StoreID())
	seen[self] = true
	if p, ok := s.store.Peer(SystemRegionID); ok && p.Initialized() {
		if lid := p.LeaderOf(); lid != 0 {
			for _, rp := range p.Region().Peers {
				if rp.Id == lid && rp.StoreId != s.store.StoreID() {
					add(s.storeAddr(rp.StoreId))
				}
			}
		}
	}
	f.mu.Lock()
	add(f.hint)
	f.mu.Unlock()
	for _, a := range s.join {
		add(a)
	}
	for _, st := range s.Stores() {
		if st.Id != s.store.StoreID() {
			add(st.Address)
		}
	}
	return out
}

// dropHint forgets a leader hint that turned out wrong.
func (f *forwarder) dropHint() {
	f.mu.Lock()
	f.hint = ""
	f.mu.Unlock()
}

// pdResponse is every PD response: each may carry an error.
type pdResponse interface{ GetError() *kvpb.PDError }

// forward sends a request this node cannot serve to PD's leader, trying
// the candidates in turn, each for at most forwardTimeout, until one
// answers without "not the leader". A request is forwarded at most
// maxHops times, so a stale view cannot make requests loop.
func forward[R pdResponse](s *Server, ctx context.Context, call func(ctx context.Context, c kvpb.PDClient) (R, error)) (R, error) {
	var zero R
	if hops(ctx) >= maxHops {
		return zero, ErrNotLeader
	}
	last := error(ErrNotLeader)
	for _, addr := range s.fwd.candidates() {
		c, err := s.fwd.conn(addr)
		if err != nil {
			last = err
			continue
		}
		fctx, cancel := context.WithTimeout(forwarded(ctx), forwardTimeout)
		resp, err := call(fctx, c)
		cancel()
		if err == nil && (resp.GetError() == nil || !strings.Contains(resp.GetError().Message, ErrNotLeader.Error())) {
			return resp, nil
		}
		if err == nil {
			err = errors.New(resp.GetError().Message)
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	s.fwd.dropHint()
	return zero, last
}
