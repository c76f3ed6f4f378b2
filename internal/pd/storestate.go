package pd

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/kvpb"
)

// Draining and decommissioning. A store's state (kvpb.StoreState) is
// PD's, persisted with its directory entry: Draining and Decommissioning
// make every replica on it unhealthy to the schedulers (RegionStep), so
// each region adds a replica elsewhere, then drops the one there, and a
// leader there hands its leadership over first. A decommissioning store
// that holds no replica any more becomes Decommissioned: it never takes
// a replica again and can be stopped. A draining one can be resumed.

// SetStoreState implements kvpb.PDServer.
func (s *Server) SetStoreState(ctx context.Context, req *kvpb.SetStoreStateRequest) (*kvpb.SetStoreStateResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.SetStoreStateResponse, error) {
			return c.SetStoreState(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.SetStoreStateResponse{Error: pdErr(err)}, nil
	}
	fail := func(format string, args ...any) (*kvpb.SetStoreStateResponse, error) {
		return &kvpb.SetStoreStateResponse{Error: &kvpb.PDError{Message: fmt.Sprintf(format, args...)}}, nil
	}
	st.storesMu.Lock()
	ss, ok := st.stores[req.StoreId]
	var info *kvpb.Store
	serving := 0
	for _, o := range st.stores {
		if o.info.State == kvpb.StoreState_Serving && o.info.Id != req.StoreId {
			serving++
		}
	}
	if ok {
		info = proto.Clone(ss.info).(*kvpb.Store)
	}
	st.storesMu.Unlock()
	switch {
	case !ok:
		return fail("node %d is not a member of the cluster", req.StoreId)
	case info.State == req.State:
		return &kvpb.SetStoreStateResponse{Store: info}, nil
	case info.State == kvpb.StoreState_Decommissioned:
		return fail("node %d is decommissioned", req.StoreId)
	case req.State == kvpb.StoreState_Decommissioned:
		return fail("a node is decommissioned once its replicas have moved off: decommission it")
	case req.State == kvpb.StoreState_Decommissioning && serving < int(st.replicas):
		return fail("cannot decommission node %d: %d other nodes serve, and every region needs %d replicas",
			req.StoreId, serving, st.replicas)
	}
	info.State = req.State
	if err := s.setStoreState(ctx, st, info); err != nil {
		return &kvpb.SetStoreStateResponse{Error: pdErr(err)}, nil
	}
	s.log.Info("pd: store state changed", "store", info.Id, "state", info.State.String())
	return &kvpb.SetStoreStateResponse{Store: info}, nil
}

// setStoreState persists a store's entry with its new state.
func (s *Server) setStoreState(ctx context.Context, st *leaderState, info *kvpb.Store) error {
	data, err := marshalStore(info)
	if err != nil {
		return err
	}
	if err := s.persist(ctx, storeKey(info.Id), data); err != nil {
		return err
	}
	st.storesMu.Lock()
	if ss, ok := st.stores[info.Id]; ok {
		c := proto.Clone(ss.info).(*kvpb.Store)
		c.State = info.State
		ss.info = c
	}
	st.storesMu.Unlock()
	s.setStores([]*kvpb.Store{info})
	return nil
}

// retireEmpty marks decommissioning stores that hold no replica any more
// (in the directory, and by their own count when they report)
// Decommissioned.
func (s *Server) retireEmpty(ctx context.Context, st *leaderState) {
	var empty []*kvpb.Store
	st.storesMu.Lock()
	for id, ss := range st.stores {
		if ss.info.State != kvpb.StoreState_Decommissioning || (ss.up && ss.replicaCount > 0) {
			continue
		}
		holds := false
		for _, r := range st.dir.all() {
			if onStore(r.Region, id) {
				holds = true
				break
			}
		}
		if !holds {
			c := proto.Clone(ss.info).(*kvpb.Store)
			c.State = kvpb.StoreState_Decommissioned
			empty = append(empty, c)
		}
	}
	st.storesMu.Unlock()
	for _, info := range empty {
		if err := s.setStoreState(ctx, st, info); err == nil {
			s.log.Info("pd: store decommissioned: it holds no replica", "store", info.Id)
		}
	}
}

// storeStatus fills a store's status with what the schedulers know of it.
func storeStatus(ss *storeState, si *StoreInfo) *kvpb.StoreStatus {
	out := &kvpb.StoreStatus{Store: ss.info, Up: ss.up,
		LastHeartbeatUnixMs: ss.lastHeartbeat.UnixMilli(), StateSinceUnixMs: ss.since.UnixMilli(),
		ReplicaCount: ss.replicaCount, LeaderCount: ss.leaderCount}
	if si != nil {
		out.RegionSize = si.Size
		out.ReadBytesPerSec = uint64(si.ReadRate)
		out.WriteBytesPerSec = uint64(si.WriteRate)
		out.Operators = uint32(si.Ops + si.LeaderOps)
	}
	return out
}

// regionQPS returns a region's read and write queries per second.
func regionQPS(r *kvpb.RegionStat) (read, write float64) {
	if r.IntervalMs == 0 {
		return 0, 0
	}
	s := float64(r.IntervalMs) / 1000
	return float64(r.ReadQueries) / s, float64(r.WriteQueries) / s
}
