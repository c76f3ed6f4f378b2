package pd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/kvpb"
)

// Stores. The store directory (id -> addresses) is durable in the system
// region: a node gets its store id when it joins (Join), and its entry is
// rewritten when its addresses change. Liveness is soft state on the
// leader: a store is down once it has sent no heartbeat for downAfter.

// downAfter is how long a store may go without a heartbeat before PD
// counts it down (status, scheduling).
var downAfter = 10 * time.Second

// silentAfter: a store up (not yet down) but without a heartbeat for this
// long, or without one to this leader yet, takes no new replicas or
// leaders. A node heartbeats every second; a store killed a moment ago
// counts as up for downAfter, and a leader moved to it would stall its
// region for an election timeout.
const silentAfter = 3 * time.Second

type storeState struct {
	info          *kvpb.Store
	lastHeartbeat time.Time
	up            bool
	since         time.Time // when it last went up or down
	replicaCount  uint32
	leaderCount   uint32
	// complete: this leader has had a report of every region the store
	// leads (a heartbeat with regions_complete); until then it asks for
	// one. Its later heartbeats carry only the regions whose report
	// changed.
	complete bool
	// lastPatrol: when the schedulers last ran over every region the
	// store leads (scheduler.go); patrolShape, the stores' states then.
	lastPatrol  time.Time
	patrolShape string
}

func storeKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), storePrefix...), id)
}

func marshalStore(st *kvpb.Store) ([]byte, error) { return proto.Marshal(st) }

// readStores reads the store directory from applied state.
func readStores(db pebble.Reader) ([]*kvpb.Store, error) {
	upper := append(append([]byte(nil), storePrefix...), 0xff)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: storePrefix, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	var out []*kvpb.Store
	for it.First(); it.Valid(); it.Next() {
		st := &kvpb.Store{}
		if err := proto.Unmarshal(it.Value(), st); err != nil {
			it.Close()
			return nil, fmt.Errorf("pd: corrupt store record: %w", err)
		}
		out = append(out, st)
	}
	return out, it.Close()
}

// refreshStoresFromEngine caches the store directory this node's replica
// of the system region holds (possibly a little stale on a follower,
// which only matters for addresses that just changed).
func (s *Server) refreshStoresFromEngine() {
	if p, ok := s.store.Peer(SystemRegionID); !ok || !p.Initialized() {
		return
	}
	stores, err := readStores(s.store.Engine())
	if err == nil && len(stores) > 0 {
		s.setStores(stores)
	}
}

func (s *Server) setStores(stores []*kvpb.Store) {
	s.storesMu.Lock()
	defer s.storesMu.Unlock()
	for _, st := range stores {
		s.stores[st.Id] = st
	}
}

func (s *Server) storeAddr(id uint64) string {
	s.storesMu.RLock()
	defer s.storesMu.RUnlock()
	if st, ok := s.stores[id]; ok {
		return st.Address
	}
	return ""
}

// StoreAddress resolves a store's gRPC address (transport.Resolver): from
// the cached directory, else from PD's leader.
func (s *Server) StoreAddress(ctx context.Context, id uint64) (string, error) {
	if a := s.storeAddr(id); a != "" {
		return a, nil
	}
	s.refreshStoresFromEngine()
	if a := s.storeAddr(id); a != "" {
		return a, nil
	}
	resp, err := s.GetStore(ctx, &kvpb.GetStoreRequest{StoreId: id})
	if err != nil {
		return "", err
	}
	if resp.Error != nil {
		return "", errors.New(resp.Error.Message)
	}
	s.setStores([]*kvpb.Store{resp.Store})
	return resp.Store.Address, nil
}

// Stores returns the cached store directory, ordered by id.
func (s *Server) Stores() []*kvpb.Store {
	s.storesMu.RLock()
	defer s.storesMu.RUnlock()
	out := make([]*kvpb.Store, 0, len(s.stores))
	for _, st := range s.stores {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out
}

// GetStore implements kvpb.PDServer.
func (s *Server) GetStore(ctx context.Context, req *kvpb.GetStoreRequest) (*kvpb.GetStoreResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.GetStoreResponse, error) {
			return c.GetStore(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		// Not the leader and no leader reachable: the local copy of the
		// directory still resolves addresses.
		s.refreshStoresFromEngine()
		if a := s.Stores(); len(a) > 0 {
			for _, info := range a {
				if info.Id == req.StoreId {
					return &kvpb.GetStoreResponse{Store: info}, nil
				}
			}
		}
		return &kvpb.GetStoreResponse{Error: pdErr(err)}, nil
	}
	st.storesMu.Lock()
	defer st.storesMu.Unlock()
	if ss, ok := st.stores[req.StoreId]; ok {
		return &kvpb.GetStoreResponse{Store: ss.info}, nil
	}
	return &kvpb.GetStoreResponse{Error: &kvpb.PDError{Message: fmt.Sprintf("store %d not found", req.StoreId)}}, nil
}

// ErrOtherCluster is returned to a node that joins with the identity of
// another cluster (its data directory, or a join address of the wrong
// cluster).
var ErrOtherCluster = errors.New("pd: node belongs to another cluster")

// Join implements kvpb.PDServer.
func (s *Server) Join(ctx context.Context, req *kvpb.JoinRequest) (*kvpb.JoinResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.JoinResponse, error) {
			return c.Join(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.JoinResponse{Error: pdErr(err)}, nil
	}
	if req.Store == nil || req.Store.Address == "" {
		return &kvpb.JoinResponse{Error: &kvpb.PDError{Message: "pd: a joining node must give its address"}}, nil
	}
	if req.ClusterId != 0 && req.ClusterId != st.clusterID {
		return &kvpb.JoinResponse{ClusterId: st.clusterID, Error: &kvpb.PDError{Message: fmt.Sprintf(
			"%v: this cluster's id is %x, the node's is %x", ErrOtherCluster, st.clusterID, req.ClusterId)}}, nil
	}
	info := proto.Clone(req.Store).(*kvpb.Store)
	if info.Id == 0 {
		if info.Id, err = st.allocIDs(ctx, s, 1); err != nil {
			return &kvpb.JoinResponse{Error: pdErr(err)}, nil
		}
	}
	if err := s.putStore(ctx, st, info); err != nil {
		return &kvpb.JoinResponse{Error: pdErr(err)}, nil
	}
	return &kvpb.JoinResponse{ClusterId: st.clusterID, StoreId: info.Id}, nil
}

// putStore persists a store's entry when it is new or its addresses
// changed, and records it in the leader's state.
func (s *Server) putStore(ctx context.Context, st *leaderState, info *kvpb.Store) error {
	st.storesMu.Lock()
	ss, ok := st.stores[info.Id]
	same := ok && sameAddresses(ss.info, info)
	if ok {
		info.State = ss.info.State // PD's, not the node's
	}
	st.storesMu.Unlock()
	if !same {
		data, err := marshalStore(info)
		if err != nil {
			return err
		}
		if err := s.persist(ctx, storeKey(info.Id), data); err != nil {
			return err
		}
	}
	now := time.Now()
	st.storesMu.Lock()
	if ss, ok := st.stores[info.Id]; ok {
		info.State = ss.info.State
		ss.lastHeartbeat = now
		ss.info = info
		if !ss.up {
			ss.up, ss.since = true, now
		}
	} else {
		st.stores[info.Id] = &storeState{info: info, up: true, since: now, lastHeartbeat: now}
	}
	st.storesMu.Unlock()
	s.setStores([]*kvpb.Store{info})
	return nil
}

func sameAddresses(a, b *kvpb.Store) bool {
	return a.Address == b.Address && a.SqlAddress == b.SqlAddress && a.RespAddress == b.RespAddress &&
		a.HttpAddress == b.HttpAddress && a.Version == b.Version && a.StartUnixMs == b.StartUnixMs
}

// liveness is how long a store may miss heartbeats and count as up: the
// shorter of downAfter and the schedulers' DownAfter.
func (s *Server) liveness() time.Duration { return min(downAfter, s.sched.DownAfter) }

// refreshLiveness marks stores down that missed heartbeats. storesMu held.
func (st *leaderState) refreshLivenessLocked(now time.Time, liveness time.Duration) {
	for _, ss := range st.stores {
		up := now.Sub(ss.lastHeartbeat) < liveness
		if up != ss.up {
			ss.up, ss.since = up, now
		}
	}
}

// StoreHeartbeat implements kvpb.PDServer: a store's report of itself
// and of the regions it leads whose report changed (the directory keeps
// the others' last report); the response carries the operators for the
// regions it leads and the store directory, and asks for a report of
// every region the store leads while this leader has none.
func (s *Server) StoreHeartbeat(ctx context.Context, req *kvpb.StoreHeartbeatRequest) (*kvpb.StoreHeartbeatResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.StoreHeartbeatResponse, error) {
			return c.StoreHeartbeat(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.StoreHeartbeatResponse{Error: pdErr(err)}, nil
	}
	if req.ClusterId != st.clusterID {
		return &kvpb.StoreHeartbeatResponse{Error: &kvpb.PDError{Message: fmt.Sprintf(
			"%v: this cluster's id is %x, the store's is %x", ErrOtherCluster, st.clusterID, req.ClusterId)}}, nil
	}
	if req.Store == nil || req.Store.Id == 0 {
		return &kvpb.StoreHeartbeatResponse{Error: &kvpb.PDError{Message: "pd: heartbeat without a store"}}, nil
	}
	if err := s.putStore(ctx, st, req.Store); err != nil {
		return &kvpb.StoreHeartbeatResponse{Error: pdErr(err)}, nil
	}
	now := time.Now()
	st.storesMu.Lock()
	ss := st.stores[req.Store.Id]
	ss.replicaCount = req.ReplicaCount
	ss.leaderCount = max(req.LeaderCount, uint32(len(req.Regions)))
	if req.RegionsComplete {
		ss.complete = true
	}
	reportAll := !ss.complete
	st.refreshLivenessLocked(now, s.liveness())
	st.storesMu.Unlock()
	// The schedulers look at the reports that say something new; a
	// region's once-a-minute report of nothing changed (node/report.go)
	// only refreshes the directory (patrols cover its region).
	changed := req.Regions[:0:0]
	for _, r := range req.Regions {
		if !st.dir.sameAsKnown(r) {
			changed = append(changed, r)
		}
		st.dir.update(r)
	}
	s.retireEmpty(ctx, st)
	resp := &kvpb.StoreHeartbeatResponse{PdLeaderStore: s.store.StoreID(), Stores: s.Stores(), ReportAllRegions: reportAll}
	st.storesMu.Lock()
	for id, ss := range st.stores {
		if !ss.up {
			resp.DownStores = append(resp.DownStores, id)
		}
	}
	st.storesMu.Unlock()
	resp.Operators = s.schedule(ctx, st, req.Store.Id, changed, now)
	return resp, nil
}

// ClusterStatus implements kvpb.PDServer: every store with its liveness,
// state, counts and traffic, every region with its leader, its replicas'
// progress and its traffic, and the operator log.
func (s *Server) ClusterStatus(ctx context.Context, req *kvpb.ClusterStatusRequest) (*kvpb.ClusterStatusResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.ClusterStatusResponse, error) {
			return c.ClusterStatus(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.ClusterStatusResponse{Error: pdErr(err)}, nil
	}
	resp := &kvpb.ClusterStatusResponse{ClusterId: st.clusterID, Replicas: st.replicas, PdLeaderStore: s.store.StoreID()}
	st.gcMu.Lock()
	resp.GcSafePoint = st.gcSafePoint
	st.gcMu.Unlock()
	now := time.Now()
	st.storesMu.Lock()
	st.refreshLivenessLocked(now, s.liveness())
	c := s.clusterLocked(st, now)
	for id, ss := range st.stores {
		resp.Stores = append(resp.Stores, storeStatus(ss, c.Stores[id]))
	}
	resp.Operators = append(resp.Operators, st.opLog...)
	st.storesMu.Unlock()
	sort.Slice(resp.Stores, func(i, j int) bool { return resp.Stores[i].Store.Id < resp.Stores[j].Store.Id })
	for _, e := range c.Regions {
		rs := &kvpb.RegionStatus{Region: e.Region, Leader: e.Leader, Progress: e.Progress, CommitIndex: e.CommitIndex,
			ApproximateSize: e.ApproximateSize, ApproximateKeys: e.ApproximateKeys, ReadBytes: e.ReadBytes, WrittenBytes: e.WrittenBytes}
		rd, wr := RegionRate(e)
		rs.ReadBytesPerSec, rs.WriteBytesPerSec = uint64(rd), uint64(wr)
		rq, wq := regionQPS(e)
		rs.ReadQps, rs.WriteQps = uint64(rq), uint64(wq)
		rs.UnderReplicated = voters(e.Region) < int(st.replicas) && voters(e.Region) < len(resp.Stores)
		resp.Regions = append(resp.Regions, rs)
		for _, ss := range resp.Stores {
			if ss.Store.Id == e.Leader.GetStoreId() {
				ss.ReadQps += rs.ReadQps
				ss.WriteQps += rs.WriteQps
			}
		}
	}
	return resp, nil
}

func voters(r *kvpb.Region) int {
	n := 0
	for _, p := range r.Peers {
		if p.Role == kvpb.PeerRole_Voter {
			n++
		}
	}
	return n
}

// ClusterID reads the cluster id from the local engine (any node holding
// a replica of the system region, or the first node after bootstrap).
func ClusterID(db pebble.Reader) (uint64, error) { return readUint(db, clusterIDKey) }
