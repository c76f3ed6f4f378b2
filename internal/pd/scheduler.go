package pd

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// Scheduling on the server. Every store heartbeat builds a Cluster from
// PD's state (the stores with their liveness and states, the region
// directory with the traffic each leader reported, the operators in
// flight) and runs the schedulers (schedule.go) over the regions the
// store leads: only their leader can carry an operator out, and it gets
// them in the heartbeat's response. Every region's leader reports once a
// second, so every region is considered once a second.
//
// One operator at a time per region: one handed out is remembered until
// it is seen done (the region's conf version moved past it, or its
// leader is the transfer's target), the region split, or operatorTimeout
// passed (a leader that lost the operator, or a leader change). A replica
// move spans several operators; its source store is remembered until the
// region has no replica there any more (or moveTimeout).

// operatorTimeout: an operator not seen done by then may be handed out
// again.
var operatorTimeout = 10 * time.Second

// moveTimeout: a replica move not finished by then is forgotten.
var moveTimeout = 10 * time.Minute

// opLogSize is how many operators the operator log keeps.
const opLogSize = 200

type inflightOp struct {
	op *kvpb.Operator
	at time.Time
}

type moveState struct {
	from uint64
	at   time.Time
}

// done reports whether the region's current state shows op carried out
// or moot.
func (o *inflightOp) done(r *kvpb.RegionStat, now time.Time) bool {
	if r == nil || now.Sub(o.at) > operatorTimeout {
		return true
	}
	e := r.Region.Epoch
	if e.GetVersion() != o.op.Epoch.GetVersion() || e.GetConfVer() > o.op.Epoch.GetConfVer() {
		return true
	}
	if o.op.Kind == kvpb.OperatorKind_TransferLeader {
		return r.Leader.GetStoreId() == o.op.Peer.GetStoreId()
	}
	return false
}

// cluster builds the schedulers' view (storesMu held).
func (s *Server) clusterLocked(st *leaderState, now time.Time) *Cluster {
	cfg := s.sched
	cfg.Replicas = int(st.replicas)
	c := &Cluster{ScheduleConfig: cfg, Stores: map[uint64]*StoreInfo{}, Regions: st.dir.all(),
		Busy: map[uint64]bool{}, Moves: map[uint64]uint64{}}
	for id, ss := range st.stores {
		si := &StoreInfo{ID: id, Up: ss.up, State: ss.info.State}
		if !ss.up {
			si.DownFor = now.Sub(ss.lastHeartbeat)
		}
		c.Stores[id] = si
	}
	byID := make(map[uint64]*kvpb.RegionStat, len(c.Regions))
	for _, r := range c.Regions {
		byID[r.Region.Id] = r
	}
	ops := map[uint64]*kvpb.Operator{}
	for id, o := range st.ops {
		if o.done(byID[id], now) {
			delete(st.ops, id)
			continue
		}
		ops[id] = o.op
	}
	for id, m := range st.moves {
		r := byID[id]
		if r == nil || now.Sub(m.at) > moveTimeout || !onStore(r.Region, m.from) {
			delete(st.moves, id)
			continue
		}
		c.Moves[id] = m.from
	}
	c.Prepare(ops)
	return c
}

func onStore(r *kvpb.Region, store uint64) bool {
	for _, p := range r.Peers {
		if p.StoreId == store {
			return true
		}
	}
	return false
}

// schedule decides the operators for the regions one store reported.
func (s *Server) schedule(ctx context.Context, st *leaderState, regions []*kvpb.RegionStat, now time.Time) []*kvpb.Operator {
	sort.Slice(regions, func(i, j int) bool { return regions[i].Region.Id < regions[j].Region.Id })
	st.storesMu.Lock()
	c := s.clusterLocked(st, now)
	decisions := c.Schedule(regions)
	if s.merge != nil {
		decisions = append(decisions, st.mergeLocked(c, *s.merge, regions, now)...)
	}
	st.storesMu.Unlock()
	var out []*kvpb.Operator
	for _, d := range decisions {
		op := d.Op
		if op.Kind == kvpb.OperatorKind_AddLearner {
			id, err := st.allocIDs(ctx, s, 1)
			if err != nil {
				s.log.Warn("pd: cannot allocate a peer id", "err", err)
				continue
			}
			op.Peer.Id = id
		}
		st.storesMu.Lock()
		st.ops[op.RegionId] = &inflightOp{op: op, at: now}
		if d.MoveFrom != 0 {
			st.moves[op.RegionId] = moveState{from: d.MoveFrom, at: now}
		}
		st.opLog = append(st.opLog, &kvpb.OperatorRecord{Operator: op, UnixMs: now.UnixMilli(), StoreId: s.leaderStoreOf(regions, op.RegionId)})
		if len(st.opLog) > opLogSize {
			st.opLog = append(st.opLog[:0:0], st.opLog[len(st.opLog)-opLogSize:]...)
		}
		st.storesMu.Unlock()
		s.log.Info("pd: operator", "region", op.RegionId, "kind", op.Kind.String(), "peer", op.Peer.GetId(),
			"store", op.Peer.GetStoreId(), "reason", op.Reason)
		out = append(out, op)
	}
	return out
}

// mergeTimeout: the regions of a merge handed out are left alone for this
// long, or until the source is gone (merged).
var mergeTimeout = 30 * time.Second

type pendingMerge struct {
	target uint64
	at     time.Time
}

type regionAge struct {
	start, end []byte
	since      time.Time
}

// mergeLocked runs the merge checker (merge.go) and returns its decisions
// for the sources among regions (the store that reported them leads
// them): a Merge operator, or the replica move that must come first. The
// regions of a merge handed out are busy until the merge is seen done.
// storesMu held.
func (st *leaderState) mergeLocked(c *Cluster, cfg MergeConfig, regions []*kvpb.RegionStat, now time.Time) []Decision {
	ages := make(map[uint64]time.Duration, len(c.Regions))
	seen := make(map[uint64]*kvpb.RegionStat, len(c.Regions))
	for _, r := range c.Regions {
		id := r.Region.Id
		seen[id] = r
		a, ok := st.ages[id]
		if !ok || !bytes.Equal(a.start, r.Region.StartKey) || !bytes.Equal(a.end, r.Region.EndKey) {
			a = regionAge{start: r.Region.StartKey, end: r.Region.EndKey, since: now}
			st.ages[id] = a
		}
		ages[id] = now.Sub(a.since)
	}
	for id := range st.ages {
		if seen[id] == nil {
			delete(st.ages, id)
		}
	}
	for src, m := range st.merging {
		if seen[src] == nil || now.Sub(m.at) > mergeTimeout {
			delete(st.merging, src) // merged (or given up)
			continue
		}
		c.Busy[src], c.Busy[m.target] = true, true
	}
	led := make(map[uint64]bool, len(regions))
	for _, r := range regions {
		led[r.Region.Id] = true
	}
	var out []Decision
	for _, md := range MergeCheck(c, cfg, ages) {
		if !led[md.Source] {
			continue
		}
		if md.Move != nil {
			out = append(out, *md.Move)
			continue
		}
		src, tgt := seen[md.Source], seen[md.Target]
		out = append(out, Decision{Op: &kvpb.Operator{RegionId: md.Source, Epoch: src.Region.Epoch,
			Kind: kvpb.OperatorKind_Merge, Target: tgt.Region, Reason: "merge into region " + strconv.FormatUint(md.Target, 10) + ": " + md.Reason}})
		st.merging[md.Source] = pendingMerge{target: md.Target, at: now}
	}
	return out
}

func (s *Server) leaderStoreOf(regions []*kvpb.RegionStat, id uint64) uint64 {
	for _, r := range regions {
		if r.Region.Id == id {
			return r.Leader.GetStoreId()
		}
	}
	return 0
}
