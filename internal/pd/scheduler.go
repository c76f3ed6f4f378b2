package pd

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// Scheduling on the server. A store heartbeat builds a Cluster from PD's
// state (the stores with their liveness and states, the region directory
// with the traffic each leader reported, the operators in flight) and
// runs the schedulers (schedule.go) over regions the store leads: only
// their leader can carry an operator out, and it gets them in the
// heartbeat's response. Which ones:
//
//   - the regions the heartbeat reported (their report changed: a
//     membership step, a new leader, traffic, a new size);
//   - every region the store leads, by the directory, on a patrol: while
//     anything is in flight (operators, replica moves, merges) or any
//     round decided something within settledAfter, when a store went up,
//     down, dead or changed its state since the store's previous patrol,
//     when a region it leads becomes old enough to merge (MinAge), and
//     otherwise every patrolInterval. The merge checker runs on patrols
//     only.
//
// A cluster that is busy balancing, repairing or merging is thus looked
// at as a whole every second, and one that is settled and idle every
// patrolInterval, without a Cluster built for the heartbeats that report
// nothing.
//
// One operator at a time per region: one handed out is remembered until
// it is seen done (the region's conf version moved past it, or its
// leader is the transfer's target), the region split, or operatorTimeout
// passed (a leader that lost the operator, or a leader change). A replica
// move spans several operators; its source store is remembered until the
// region has no replica there any more (or moveTimeout).

// patrolInterval: how often a settled cluster's schedulers and merge
// checker run over every region a store leads.
var patrolInterval = 10 * time.Second

// settledAfter: the cluster counts as settled once no scheduling round
// decided anything for this long; until then every heartbeat patrols. A
// round may decide nothing while balancing is not done (the leaders that
// could move report no follower active yet, the stores are at their
// limits), and the next one must not wait for the timer.
var settledAfter = 30 * time.Second

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
	st.clusterBuilds++
	c := &Cluster{ScheduleConfig: cfg, Stores: map[uint64]*StoreInfo{}, Regions: st.dir.all(),
		Busy: map[uint64]bool{}, Moves: map[uint64]uint64{}, Cooling: map[uint64]bool{}}
	for id, at := range st.balanced {
		if now.Sub(at) >= cfg.BalanceCooldown {
			delete(st.balanced, id)
		} else {
			c.Cooling[id] = true
		}
	}
	for id, ss := range st.stores {
		si := &StoreInfo{ID: id, Up: ss.up, State: ss.info.State,
			// A new leader starts every store's last heartbeat at its
			// start: none is heard until it sends one.
			Silent: !ss.lastHeartbeat.After(st.since) || now.Sub(ss.lastHeartbeat) >= silentAfter}
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

// shapeLocked sums up the stores' states the schedulers react to: up,
// dead (down longer than DownAfter), serving or draining. storesMu held.
func (st *leaderState) shapeLocked(now time.Time, downAfter time.Duration) string {
	ids := make([]uint64, 0, len(st.stores))
	for id := range st.stores {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := make([]byte, 0, 16*len(ids))
	for _, id := range ids {
		ss := st.stores[id]
		b = strconv.AppendUint(b, id, 10)
		switch {
		case ss.up:
			b = append(b, 'u')
		case now.Sub(ss.lastHeartbeat) >= downAfter:
			b = append(b, 'x')
		default:
			b = append(b, 'd')
		}
		b = strconv.AppendInt(b, int64(ss.info.State), 10)
		b = append(b, ' ')
	}
	return string(b)
}

// patrolDueLocked: the heartbeat of store ss runs the schedulers over
// every region it leads (see above). storesMu held.
func (s *Server) patrolDueLocked(st *leaderState, ss *storeState, now time.Time) (bool, string) {
	shape := st.shapeLocked(now, s.sched.DownAfter)
	merge := (!st.mergeNext.IsZero() && !now.Before(st.mergeNext)) || ss.lastPatrol.Before(st.mergePassed)
	return ss.lastPatrol.IsZero() || now.Sub(st.lastDecision) < settledAfter || shape != ss.patrolShape ||
		len(st.ops) > 0 || len(st.moves) > 0 || len(st.merging) > 0 || merge ||
		now.Sub(ss.lastPatrol) >= patrolInterval, shape
}

// schedule decides the operators for the regions store leads: those its
// heartbeat reported, or all of them on a patrol.
func (s *Server) schedule(ctx context.Context, st *leaderState, store uint64, reported []*kvpb.RegionStat, now time.Time) []*kvpb.Operator {
	st.storesMu.Lock()
	ss := st.stores[store]
	patrol, shape := s.patrolDueLocked(st, ss, now)
	if !patrol && len(reported) == 0 {
		st.storesMu.Unlock()
		return nil
	}
	c := s.clusterLocked(st, now)
	var regions []*kvpb.RegionStat
	if patrol {
		for _, r := range c.Regions {
			if r.Leader.GetStoreId() == store {
				regions = append(regions, r)
			}
		}
	} else {
		for _, r := range reported {
			// The directory's entry: the report, unless it was stale.
			if e := c.byID[r.Region.Id]; e != nil && e.Leader.GetStoreId() == store {
				regions = append(regions, e)
			}
		}
	}
	sort.Slice(regions, func(i, j int) bool { return regions[i].Region.Id < regions[j].Region.Id })
	decisions := c.Schedule(regions)
	if s.merge != nil && patrol {
		decisions = append(decisions, st.mergeLocked(c, *s.merge, regions, now)...)
	} else if s.merge != nil {
		// A region reported with a new range starts its merge age now,
		// and the patrol after it comes of age is due then.
		for _, r := range regions {
			st.ageLocked(r, now, s.merge.MinAge)
		}
	}
	if patrol {
		ss.lastPatrol, ss.patrolShape = now, shape
	}
	if len(decisions) > 0 {
		st.lastDecision = now
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
		if d.Balance {
			st.balanced[op.RegionId] = now
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
	var next time.Time // when the next region comes of age
	for _, r := range c.Regions {
		id := r.Region.Id
		seen[id] = r
		ages[id] = st.ageLocked(r, now, 0)
		if at := st.ages[id].since.Add(cfg.MinAge); ages[id] < cfg.MinAge && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	st.passMergeLocked(now)
	st.mergeNext = next
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

// ageLocked returns how long r has had its range, starting the count now
// for a region new or with a new range. With minAge, a region that comes
// of age before the next one known to makes the patrol due then.
// storesMu held.
func (st *leaderState) ageLocked(r *kvpb.RegionStat, now time.Time, minAge time.Duration) time.Duration {
	id := r.Region.Id
	a, ok := st.ages[id]
	if !ok || !bytes.Equal(a.start, r.Region.StartKey) || !bytes.Equal(a.end, r.Region.EndKey) {
		a = regionAge{start: r.Region.StartKey, end: r.Region.EndKey, since: now}
		st.ages[id] = a
		if at := now.Add(minAge); minAge > 0 {
			st.passMergeLocked(now)
			if st.mergeNext.IsZero() || at.Before(st.mergeNext) {
				st.mergeNext = at
			}
		}
	}
	return now.Sub(a.since)
}

// passMergeLocked records that the time a region came of age passed:
// every store patrols once after it (the region may be a merge's source,
// or its neighbour's target), not patrolInterval later. storesMu held.
func (st *leaderState) passMergeLocked(now time.Time) {
	if !st.mergeNext.IsZero() && !now.Before(st.mergeNext) {
		st.mergePassed, st.mergeNext = st.mergeNext, time.Time{}
	}
}

func (s *Server) leaderStoreOf(regions []*kvpb.RegionStat, id uint64) uint64 {
	for _, r := range regions {
		if r.Region.Id == id {
			return r.Leader.GetStoreId()
		}
	}
	return 0
}
