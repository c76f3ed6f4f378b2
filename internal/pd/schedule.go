package pd

import (
	"fmt"
	"sort"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// The schedulers. Each is a pure function from a Cluster (what PD knows:
// stores, regions with their traffic, operators in flight) to operators;
// the server (scheduler.go) and the simulator (cmd/strata-sim) run the
// same code. In order of priority:
//
//	Repair       a region's next membership step: leave a joint state,
//	             promote or remove learners, replace replicas on stores
//	             down longer than DownAfter or being drained, finish a
//	             move (RegionStep)
//	BalanceLeaders  leader counts
//	BalanceHot   read bytes of leaders, written bytes of replicas
//	BalanceReplicas  replica counts and sizes
//
// A replica moves as TiKV moves one: a learner is added on the target,
// promoted once it caught up (the region has one voter too many for a
// moment), then the source is demoted through joint consensus and
// removed; a leader on the source hands its leadership over first.
// Every operator counts against the limits of the stores it involves
// until it is done (ScheduleConfig.StoreLimit, LeaderLimit), and so does a
// learner still waiting for its snapshot, so that balancing never takes
// more than a bounded share of a store's disk and network from the
// foreground traffic. Repair has its own, larger budget.

// ScheduleConfig holds the schedulers' parameters.
type ScheduleConfig struct {
	Replicas int
	// DownAfter: a store without a heartbeat for this long has its
	// replicas replaced elsewhere.
	DownAfter time.Duration
	// StoreLimit: balancing operators (replica moves) in flight per store.
	StoreLimit int
	// RepairLimit: repair operators in flight per target store.
	RepairLimit int
	// LeaderLimit: leader transfers in flight per store.
	LeaderLimit int
	// Tolerance: a store within this fraction of the mean is balanced.
	Tolerance float64
	// HotMinBytes: stores whose flow (bytes/s) is below this are never hot.
	HotMinBytes float64
}

// DefaultScheduleConfig returns the defaults of a server.
func DefaultScheduleConfig() ScheduleConfig {
	return ScheduleConfig{Replicas: DefaultReplicas, DownAfter: 5 * time.Minute, StoreLimit: 4, RepairLimit: 8,
		LeaderLimit: 4, Tolerance: 0.05, HotMinBytes: 1 << 20}
}

// StoreInfo is what the schedulers know of one store. The counts and
// flows are derived from the regions by Cluster.Prepare.
type StoreInfo struct {
	ID      uint64
	Up      bool          // heartbeat within the liveness window
	DownFor time.Duration // since its last heartbeat
	State   kvpb.StoreState

	Replicas, Leaders int
	Size              uint64
	ReadRate          float64 // bytes/s read from the regions it leads
	WriteRate         float64 // bytes/s written to the regions it holds
	Ops, LeaderOps    int     // in flight, including pending snapshots
}

// dead: its replicas are replaced.
func (s *StoreInfo) dead(c *Cluster) bool { return !s.Up && s.DownFor >= c.DownAfter }

// serving: may take new replicas and leaders.
func (s *StoreInfo) serving() bool { return s.Up && s.State == kvpb.StoreState_Serving }

// Cluster is the state the schedulers decide from.
type Cluster struct {
	ScheduleConfig
	Stores  map[uint64]*StoreInfo
	Regions []*kvpb.RegionStat // every region, by id
	// Busy: regions with an operator in flight.
	Busy map[uint64]bool
	// Moves: the source store of each replica move in progress.
	Moves map[uint64]uint64

	byID   map[uint64]*kvpb.RegionStat
	sorted []*StoreInfo
	// meanReplicas etc. are set by Prepare.
	meanReplicas, meanSize float64
}

// Decision is an operator and, for a replica move, the store it moves
// from (the server remembers it until the move is complete).
type Decision struct {
	Op       *kvpb.Operator
	MoveFrom uint64
}

// RegionRate returns a region's read and written bytes per second.
func RegionRate(r *kvpb.RegionStat) (read, write float64) {
	if r.IntervalMs == 0 {
		return 0, 0
	}
	s := float64(r.IntervalMs) / 1000
	return float64(r.ReadBytes) / s, float64(r.WrittenBytes) / s
}

// Prepare derives the stores' counts, sizes and flows from the regions
// and the operators in flight (ops: region id -> operator).
func (c *Cluster) Prepare(ops map[uint64]*kvpb.Operator) {
	if c.Busy == nil {
		c.Busy = map[uint64]bool{}
	}
	if c.Moves == nil {
		c.Moves = map[uint64]uint64{}
	}
	c.byID = make(map[uint64]*kvpb.RegionStat, len(c.Regions))
	c.sorted = nil
	for _, s := range c.Stores {
		s.Replicas, s.Leaders, s.Size, s.ReadRate, s.WriteRate, s.Ops, s.LeaderOps = 0, 0, 0, 0, 0, 0, 0
	}
	for _, r := range c.Regions {
		c.byID[r.Region.Id] = r
		rd, wr := RegionRate(r)
		match := map[uint64]uint64{}
		for _, pr := range r.Progress {
			match[pr.PeerId] = pr.Match
		}
		for _, p := range r.Region.Peers {
			s := c.Stores[p.StoreId]
			if s == nil || c.Moves[r.Region.Id] == p.StoreId {
				continue // a replica moving off counts as gone
			}
			s.Replicas++
			s.Size += r.ApproximateSize
			s.WriteRate += wr
			if r.Leader != nil && r.Leader.Id == p.Id {
				s.Leaders++
				s.ReadRate += rd
			}
			if p.Role == kvpb.PeerRole_Learner && match[p.Id]+caughtUpLag < r.CommitIndex {
				s.Ops++ // waiting for its snapshot
			}
		}
	}
	for id, op := range ops {
		c.Busy[id] = true
		c.countOp(op, 1)
	}
	n, replicas, size := 0, 0, uint64(0)
	for _, s := range c.Stores {
		if s.serving() {
			n++
			replicas += s.Replicas
			size += s.Size
		}
	}
	if n > 0 {
		c.meanReplicas, c.meanSize = float64(replicas)/float64(n), float64(size)/float64(n)
	}
}

// countOp charges an operator to the stores it involves.
func (c *Cluster) countOp(op *kvpb.Operator, d int) {
	r := c.byID[op.RegionId]
	if op.Kind == kvpb.OperatorKind_TransferLeader {
		if s := c.Stores[op.Peer.GetStoreId()]; s != nil {
			s.LeaderOps += d
		}
		if r != nil && r.Leader != nil {
			if s := c.Stores[r.Leader.StoreId]; s != nil {
				s.LeaderOps += d
			}
		}
		return
	}
	if op.Kind == kvpb.OperatorKind_AddLearner {
		if s := c.Stores[op.Peer.GetStoreId()]; s != nil {
			s.Ops += d
		}
	}
}

// Schedule runs every scheduler over the candidate regions (those whose
// leaders can be told now) in priority order and returns the decisions,
// keeping the cluster's counts up to date as it decides.
func (c *Cluster) Schedule(candidates []*kvpb.RegionStat) []Decision {
	var out []Decision
	for _, r := range candidates {
		if c.Busy[r.Region.Id] {
			continue
		}
		if op := RegionStep(c, r); op != nil {
			if op.Kind == kvpb.OperatorKind_AddLearner && c.Stores[op.Peer.StoreId].Ops >= c.RepairLimit {
				continue
			}
			out = append(out, c.commit(Decision{Op: op}))
		}
	}
	out = append(out, BalanceLeaders(c, candidates)...)
	out = append(out, BalanceHot(c, candidates)...)
	out = append(out, BalanceReplicas(c, candidates)...)
	return out
}

// commit records a decision in the cluster: the region is busy, the
// operator counts against its stores' limits, and the counts and flows
// are updated as if it were done, so later decisions see its effect.
func (c *Cluster) commit(d Decision) Decision {
	c.Busy[d.Op.RegionId] = true
	c.countOp(d.Op, 1)
	if d.MoveFrom != 0 {
		c.Moves[d.Op.RegionId] = d.MoveFrom
	}
	c.account(d)
	return d
}

// canTake: some serving store below the mean score has room for another
// operator.
func (c *Cluster) canTake() bool {
	ms := c.meanScore()
	for _, s := range c.sortedStores() {
		if s.serving() && s.Ops < c.StoreLimit && c.score(s) < ms {
			return true
		}
	}
	return false
}

// meanScore is the score of a store at the mean.
func (c *Cluster) meanScore() float64 {
	x := 0.0
	if c.meanReplicas > 0 {
		x++
	}
	if c.meanSize > 0 {
		x++
	}
	return x
}

// account updates the stores' counts and flows for a decision.
func (c *Cluster) account(d Decision) {
	r := c.byID[d.Op.RegionId]
	if r == nil {
		return
	}
	rd, wr := RegionRate(r)
	switch d.Op.Kind {
	case kvpb.OperatorKind_TransferLeader:
		if r.Leader != nil {
			if s := c.Stores[r.Leader.StoreId]; s != nil {
				s.Leaders--
				s.ReadRate -= rd
			}
		}
		if s := c.Stores[d.Op.Peer.StoreId]; s != nil {
			s.Leaders++
			s.ReadRate += rd
		}
	case kvpb.OperatorKind_AddLearner:
		if s := c.Stores[d.Op.Peer.StoreId]; s != nil {
			s.Replicas++
			s.Size += r.ApproximateSize
			s.WriteRate += wr
		}
		if s := c.Stores[d.MoveFrom]; s != nil && d.MoveFrom != 0 {
			s.Replicas--
			s.Size -= min(s.Size, r.ApproximateSize)
			s.WriteRate -= wr
		}
	}
}

// caughtUpLag is how far behind its leader's commit index a learner may
// be and still count as caught up.
const caughtUpLag = 64

func op(r *kvpb.Region, kind kvpb.OperatorKind, peer *kvpb.Peer, reason string) *kvpb.Operator {
	return &kvpb.Operator{RegionId: r.Id, Epoch: r.Epoch, Kind: kind, Peer: peer, Reason: reason}
}

// RegionStep returns the next membership change region r needs, or nil,
// in TiKV's order:
//
//  1. a region left in a joint configuration leaves it;
//  2. a learner on a dead or draining store, or on the source of a move,
//     is removed;
//  3. a learner that has caught up with its leader's log is promoted
//     while the region has fewer healthy voters than the replication
//     factor, and removed otherwise;
//  4. a region with fewer healthy replicas than the replication factor
//     gets a learner on the up, serving store with the lowest score that
//     holds no replica of it;
//  5. a region with a voter too many, or an unhealthy voter it can do
//     without, demotes it (joint consensus; the learner it becomes is
//     removed by rule 2 or 3); a leader to be demoted hands its
//     leadership to a healthy voter first.
//
// A replica is unhealthy on a store down longer than DownAfter, on a
// store being drained or decommissioned, and on the source store of a
// move. An AddLearner operator's peer has no id yet (the caller
// allocates one).
func RegionStep(c *Cluster, r *kvpb.RegionStat) *kvpb.Operator {
	region := r.Region
	bad := func(p *kvpb.Peer) bool {
		s := c.Stores[p.StoreId]
		if s == nil {
			return true // a store PD does not know (removed)
		}
		return s.dead(c) || s.State != kvpb.StoreState_Serving || c.Moves[region.Id] == p.StoreId
	}
	voters, learners, healthyVoters, healthy := 0, 0, 0, 0
	for _, p := range region.Peers {
		switch p.Role {
		case kvpb.PeerRole_IncomingVoter, kvpb.PeerRole_DemotingVoter:
			return op(region, kvpb.OperatorKind_LeaveJoint, nil, "the membership is in a joint configuration")
		case kvpb.PeerRole_Voter:
			voters++
			if !bad(p) {
				healthyVoters++
				healthy++
			}
		case kvpb.PeerRole_Learner:
			learners++
		}
	}
	match := map[uint64]uint64{}
	for _, pr := range r.Progress {
		match[pr.PeerId] = pr.Match
	}
	for _, p := range region.Peers {
		if p.Role == kvpb.PeerRole_Learner && bad(p) {
			return op(region, kvpb.OperatorKind_RemovePeer, p, fmt.Sprintf("learner on %s", c.why(region, p)))
		}
	}
	for _, p := range region.Peers {
		if p.Role != kvpb.PeerRole_Learner {
			continue
		}
		healthy++
		m := match[p.Id]
		if m == 0 || m+caughtUpLag < r.CommitIndex || !c.Stores[p.StoreId].Up {
			continue
		}
		if healthyVoters < c.Replicas {
			return op(region, kvpb.OperatorKind_PromoteLearner, p,
				fmt.Sprintf("%d of %d healthy voters and the learner caught up", healthyVoters, c.Replicas))
		}
		return op(region, kvpb.OperatorKind_RemovePeer, p, fmt.Sprintf("already %d voters", voters))
	}
	if healthy < c.Replicas {
		if t := c.target(region, nil); t != 0 {
			return op(region, kvpb.OperatorKind_AddLearner, &kvpb.Peer{StoreId: t, Role: kvpb.PeerRole_Learner},
				fmt.Sprintf("%d of %d healthy replicas", healthy, c.Replicas))
		}
	}
	// A voter to demote: an unhealthy one once enough healthy voters
	// remain, else the one on the fullest store when there are too many.
	var victim *kvpb.Peer
	var reason string
	if healthyVoters >= c.Replicas || (voters > c.Replicas) {
		for _, p := range region.Peers {
			if p.Role == kvpb.PeerRole_Voter && bad(p) {
				victim, reason = p, "voter on "+c.why(region, p)
				break
			}
		}
		if victim == nil && voters > c.Replicas {
			for _, p := range region.Peers {
				if p.Role != kvpb.PeerRole_Voter || (r.Leader != nil && p.Id == r.Leader.Id) {
					continue
				}
				if victim == nil || c.Stores[p.StoreId].Replicas > c.Stores[victim.StoreId].Replicas {
					victim = p
				}
			}
			reason = fmt.Sprintf("%d voters of %d", voters, c.Replicas)
		}
	}
	if victim != nil && r.Leader != nil && victim.Id == r.Leader.Id {
		if to := c.leaderTarget(r, func(p *kvpb.Peer) bool { return !bad(p) }); to != nil {
			return op(region, kvpb.OperatorKind_TransferLeader, to, "leader on "+c.why(region, victim))
		}
		return nil
	}
	if victim != nil {
		return op(region, kvpb.OperatorKind_DemoteVoter, victim, reason)
	}
	// A leader on a draining store whose replica stays (not enough
	// healthy stores to move it) still hands its leadership over.
	if r.Leader != nil {
		if s := c.Stores[r.Leader.StoreId]; s != nil && s.State != kvpb.StoreState_Serving {
			if to := c.leaderTarget(r, func(p *kvpb.Peer) bool { return !bad(p) }); to != nil {
				return op(region, kvpb.OperatorKind_TransferLeader, to, "leader on "+c.why(region, r.Leader))
			}
		}
	}
	return nil
}

func (c *Cluster) why(r *kvpb.Region, p *kvpb.Peer) string {
	s := c.Stores[p.StoreId]
	switch {
	case s == nil:
		return fmt.Sprintf("unknown store %d", p.StoreId)
	case s.dead(c):
		return fmt.Sprintf("store %d, down for %v", p.StoreId, s.DownFor.Round(time.Second))
	case s.State != kvpb.StoreState_Serving:
		return fmt.Sprintf("store %d, %s", p.StoreId, s.State)
	default:
		return fmt.Sprintf("store %d, moving off", p.StoreId)
	}
}

// score is a store's replica load: its count and its size, each relative
// to the mean.
func (c *Cluster) score(s *StoreInfo) float64 {
	x := 0.0
	if c.meanReplicas > 0 {
		x += float64(s.Replicas) / c.meanReplicas
	}
	if c.meanSize > 0 {
		x += float64(s.Size) / c.meanSize
	}
	return x
}

// delta is how much one region moves a store's score.
func (c *Cluster) delta(r *kvpb.RegionStat) float64 {
	x := 0.0
	if c.meanReplicas > 0 {
		x += 1 / c.meanReplicas
	}
	if c.meanSize > 0 {
		x += float64(r.ApproximateSize) / c.meanSize
	}
	return x
}

// target picks the serving store with the lowest score that holds no
// replica of r (ok, when given, must accept it); 0 if none.
func (c *Cluster) target(r *kvpb.Region, ok func(*StoreInfo) bool) uint64 {
	holds := map[uint64]bool{}
	for _, p := range r.Peers {
		holds[p.StoreId] = true
	}
	var best *StoreInfo
	for _, s := range c.sortedStores() {
		if !s.serving() || holds[s.ID] || (ok != nil && !ok(s)) {
			continue
		}
		if best == nil || c.score(s) < c.score(best) {
			best = s
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}

// leaderTarget picks a voter of r, other than its leader, that is up,
// serving, active and caught up, and passes ok, with the fewest leaders.
func (c *Cluster) leaderTarget(r *kvpb.RegionStat, ok func(*kvpb.Peer) bool) *kvpb.Peer {
	prog := map[uint64]*kvpb.PeerProgress{}
	for _, pr := range r.Progress {
		prog[pr.PeerId] = pr
	}
	var best *kvpb.Peer
	for _, p := range r.Region.Peers {
		s := c.Stores[p.StoreId]
		if p.Role != kvpb.PeerRole_Voter || (r.Leader != nil && p.Id == r.Leader.Id) || s == nil || !s.serving() || !ok(p) {
			continue
		}
		if pr := prog[p.Id]; pr == nil || !pr.Active || pr.Match+caughtUpLag < r.CommitIndex {
			continue
		}
		if best == nil || s.Leaders < c.Stores[best.StoreId].Leaders {
			best = p
		}
	}
	return best
}

func (c *Cluster) sortedStores() []*StoreInfo {
	if c.sorted != nil && len(c.sorted) == len(c.Stores) {
		return c.sorted
	}
	out := make([]*StoreInfo, 0, len(c.Stores))
	for _, s := range c.Stores {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	c.sorted = out
	return out
}

// stable: a region the balancers may touch: nothing in flight, no
// membership step pending, not PD's own region.
func (c *Cluster) stable(r *kvpb.RegionStat) bool {
	return !c.Busy[r.Region.Id] && r.Region.Id != SystemRegionID && r.Leader != nil && RegionStep(c, r) == nil
}

// BalanceLeaders moves leaders from the stores with the most to those
// with the fewest, one transfer per store pair at a time, while the
// difference is at least two (and above the tolerance).
func BalanceLeaders(c *Cluster, candidates []*kvpb.RegionStat) []Decision {
	var out []Decision
	for _, r := range candidates {
		if !c.stable(r) {
			continue
		}
		src := c.Stores[r.Leader.StoreId]
		if src == nil || src.LeaderOps >= c.LeaderLimit {
			continue
		}
		to := c.leaderTarget(r, func(p *kvpb.Peer) bool {
			t := c.Stores[p.StoreId]
			return t.LeaderOps < c.LeaderLimit && src.Leaders-t.Leaders >= 2 &&
				float64(src.Leaders-t.Leaders) > c.Tolerance*float64(src.Leaders)
		})
		if to == nil {
			continue
		}
		// Leave the hot regions to the hot scheduler.
		if rd, _ := RegionRate(r); rd > c.HotMinBytes/4 && c.Stores[to.StoreId].ReadRate+rd > src.ReadRate-rd {
			continue
		}
		d := Decision{Op: op(r.Region, kvpb.OperatorKind_TransferLeader, to,
			fmt.Sprintf("balance leaders: store %d has %d, store %d has %d", src.ID, src.Leaders, to.StoreId, c.Stores[to.StoreId].Leaders))}
		out = append(out, c.commit(d))
	}
	return out
}

// BalanceReplicas moves replicas from the store with the highest score
// to the one with the lowest, while the move leaves the source no lower
// than the target and the source is above the mean by the tolerance.
func BalanceReplicas(c *Cluster, candidates []*kvpb.RegionStat) []Decision {
	var out []Decision
	for _, r := range candidates {
		if !c.canTake() {
			break
		}
		if !c.stable(r) {
			continue
		}
		// The region's fullest store is the source.
		var src *StoreInfo
		for _, p := range r.Region.Peers {
			s := c.Stores[p.StoreId]
			if s == nil || s.Ops >= c.StoreLimit {
				continue
			}
			if src == nil || c.score(s) > c.score(src) {
				src = s
			}
		}
		if src == nil || c.score(src) <= c.meanScore()*(1+c.Tolerance) {
			continue
		}
		d := c.delta(r)
		t := c.target(r.Region, func(t *StoreInfo) bool {
			return t.Ops < c.StoreLimit && c.score(src)-c.score(t) >= 2*d
		})
		if t == 0 {
			continue
		}
		dec := Decision{Op: op(r.Region, kvpb.OperatorKind_AddLearner, &kvpb.Peer{StoreId: t, Role: kvpb.PeerRole_Learner},
			fmt.Sprintf("balance replicas: store %d has %d, store %d has %d", src.ID, src.Replicas, t, c.Stores[t].Replicas)),
			MoveFrom: src.ID}
		out = append(out, c.commit(dec))
	}
	return out
}

// BalanceHot spreads traffic: a store reading more than the mean by the
// tolerance (and more than HotMinBytes) hands the leadership of its
// hottest region to a follower whose store reads less, even after the
// move; a store written more than that moves a replica of its hottest
// written region to the least written store.
func BalanceHot(c *Cluster, candidates []*kvpb.RegionStat) []Decision {
	var out []Decision
	meanRead, meanWrite, n := 0.0, 0.0, 0
	for _, s := range c.Stores {
		if s.serving() {
			meanRead += s.ReadRate
			meanWrite += s.WriteRate
			n++
		}
	}
	if n == 0 {
		return nil
	}
	meanRead /= float64(n)
	meanWrite /= float64(n)
	hot := append([]*kvpb.RegionStat(nil), candidates...)
	sort.SliceStable(hot, func(i, j int) bool {
		ri, wi := RegionRate(hot[i])
		rj, wj := RegionRate(hot[j])
		return ri+wi > rj+wj
	})
	for _, r := range hot {
		if !c.stable(r) {
			continue
		}
		rd, wr := RegionRate(r)
		src := c.Stores[r.Leader.StoreId]
		if src != nil && rd > 0 && src.ReadRate > c.HotMinBytes && src.ReadRate > meanRead*(1+c.Tolerance) && src.LeaderOps < c.LeaderLimit {
			to := c.leaderTarget(r, func(p *kvpb.Peer) bool {
				t := c.Stores[p.StoreId]
				return t.LeaderOps < c.LeaderLimit && t.ReadRate+rd < src.ReadRate && t.Leaders < src.Leaders+2
			})
			if to != nil {
				d := Decision{Op: op(r.Region, kvpb.OperatorKind_TransferLeader, to,
					fmt.Sprintf("hot read: store %d reads %.0f B/s, store %d %.0f B/s", src.ID, src.ReadRate, to.StoreId, c.Stores[to.StoreId].ReadRate))}
				out = append(out, c.commit(d))
				continue
			}
		}
		if wr <= 0 {
			continue
		}
		var wsrc *StoreInfo
		for _, p := range r.Region.Peers {
			s := c.Stores[p.StoreId]
			if s != nil && s.Ops < c.StoreLimit && (wsrc == nil || s.WriteRate > wsrc.WriteRate) {
				wsrc = s
			}
		}
		if wsrc == nil || wsrc.WriteRate <= c.HotMinBytes || wsrc.WriteRate <= meanWrite*(1+c.Tolerance) {
			continue
		}
		var best *StoreInfo
		holds := map[uint64]bool{}
		for _, p := range r.Region.Peers {
			holds[p.StoreId] = true
		}
		for _, s := range c.sortedStores() {
			if !s.serving() || holds[s.ID] || s.Ops >= c.StoreLimit || s.WriteRate+wr >= wsrc.WriteRate {
				continue
			}
			// Do not unbalance replica counts for it.
			if c.score(s)+c.delta(r) > c.score(wsrc)+2*c.delta(r) {
				continue
			}
			if best == nil || s.WriteRate < best.WriteRate {
				best = s
			}
		}
		if best == nil {
			continue
		}
		d := Decision{Op: op(r.Region, kvpb.OperatorKind_AddLearner, &kvpb.Peer{StoreId: best.ID, Role: kvpb.PeerRole_Learner},
			fmt.Sprintf("hot write: store %d writes %.0f B/s, store %d %.0f B/s", wsrc.ID, wsrc.WriteRate, best.ID, best.WriteRate)),
			MoveFrom: wsrc.ID}
		out = append(out, c.commit(d))
	}
	return out
}
