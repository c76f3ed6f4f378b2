package pd

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// The schedulers. Each is a pure function from a Cluster (what PD knows:
// stores, regions with their traffic, operators in flight) to operators;
// the server (scheduler.go) and the simulator (internal/pdsim) run the
// same code. In order of priority:
//
//	Repair       a region's next membership step: leave a joint state,
//	             promote or remove learners, replace replicas on stores
//	             down longer than DownAfter or being drained, finish a
//	             move (RegionStep)
//	BalanceLeaders  leader counts and read load
//	BalanceHot   the busiest regions first: read load of leaders,
//	             write load of replicas
//	BalanceReplicas  replica counts, write load and sizes
//
// The balancers share one cost per kind of move (see replicaCost), so
// they never undo each other's moves.
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
	// Tolerance: a region whose flow is above Tolerance/10 of a store's
	// mean is hot: its next leader is the voter's store that reads least
	// (otherwise the one that leads fewest).
	Tolerance float64
	// HotMinBytes: stores whose flow (bytes/s) is below this are never hot.
	HotMinBytes float64
	// BalanceCooldown: a region a balancer moved (its leader or a
	// replica) is left to the other balancers' moves for this long. Its
	// flows as the stores report them right after a move are from
	// different intervals on different stores; without a pause a hot
	// region's leadership went back and forth on the next heartbeats.
	BalanceCooldown time.Duration
}

// DefaultScheduleConfig returns the defaults of a server.
func DefaultScheduleConfig() ScheduleConfig {
	return ScheduleConfig{Replicas: DefaultReplicas, DownAfter: 5 * time.Minute, StoreLimit: 4, RepairLimit: 8,
		LeaderLimit: 4, Tolerance: 0.05, HotMinBytes: 1 << 20, BalanceCooldown: 15 * time.Second}
}

// StoreInfo is what the schedulers know of one store. The counts and
// flows are derived from the regions by Cluster.Prepare.
type StoreInfo struct {
	ID uint64
	Up bool // heartbeat within the liveness window
	// Silent: up, but no heartbeat to this leader in the last few
	// seconds (or none yet): perhaps just killed; no target of moves.
	Silent  bool
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
func (s *StoreInfo) serving() bool { return s.Up && !s.Silent && s.State == kvpb.StoreState_Serving }

// Cluster is the state the schedulers decide from.
type Cluster struct {
	ScheduleConfig
	Stores  map[uint64]*StoreInfo
	Regions []*kvpb.RegionStat // every region, by id
	// Busy: regions with an operator in flight.
	Busy map[uint64]bool
	// Cooling: regions a balancer moved within BalanceCooldown; the
	// balancers leave them alone.
	Cooling map[uint64]bool
	// Moves: the source store of each replica move in progress.
	Moves map[uint64]uint64

	byID   map[uint64]*kvpb.RegionStat
	sorted []*StoreInfo
	light  []*StoreInfo
	// meanReplicas etc. are set by Prepare.
	meanReplicas, meanSize float64
	meanRead, meanWrite    float64
	meanLeaders            float64
}

// Decision is an operator and, for a replica move, the store it moves
// from (the server remembers it until the move is complete).
type Decision struct {
	Op       *kvpb.Operator
	MoveFrom uint64
	// Balance: a balancer's move (the region cools down after it).
	Balance bool
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
	c.sorted, c.light = nil, nil
	for _, s := range c.Stores {
		s.Replicas, s.Leaders, s.Size, s.ReadRate, s.WriteRate, s.Ops, s.LeaderOps = 0, 0, 0, 0, 0, 0, 0
	}
	for _, r := range c.Regions {
		c.byID[r.Region.Id] = r
		rd, wr := RegionRate(r)
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
			if p.Role == kvpb.PeerRole_Learner && matchOf(r, p.Id)+caughtUpLag < r.CommitIndex {
				s.Ops++ // waiting for its snapshot
			}
		}
	}
	for id, op := range ops {
		c.Busy[id] = true
		c.countOp(op, 1)
		// Count it as done: the reports that will show it done may come
		// after the next heartbeats, whose rounds must not decide the
		// same move again.
		switch op.Kind {
		case kvpb.OperatorKind_TransferLeader:
			if r := c.byID[id]; r != nil && r.Leader.GetStoreId() != op.Peer.GetStoreId() {
				c.account(Decision{Op: op})
			}
		case kvpb.OperatorKind_AddLearner:
			if r := c.byID[id]; r != nil && !onStore(r.Region, op.Peer.GetStoreId()) {
				c.account(Decision{Op: op})
			}
		}
	}
	n, replicas, size, read, write, leaders := 0, 0, uint64(0), 0.0, 0.0, 0
	for _, s := range c.Stores {
		if s.serving() {
			n++
			leaders += s.Leaders
			replicas += s.Replicas
			size += s.Size
			read += s.ReadRate
			write += s.WriteRate
		}
	}
	if n > 0 {
		c.meanReplicas, c.meanSize = float64(replicas)/float64(n), float64(size)/float64(n)
		c.meanRead, c.meanWrite = read/float64(n), write/float64(n)
		c.meanLeaders = float64(leaders) / float64(n)
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
		x += sizeWeight
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

// matchOf is how far the leader knows peer's log to match its own.
func matchOf(r *kvpb.RegionStat, peer uint64) uint64 {
	for _, pr := range r.Progress {
		if pr.PeerId == peer {
			return pr.Match
		}
	}
	return 0
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
	// A leader that is not a voter of the configuration to come hands its
	// leadership over first: leaving the joint state (or removing it as a
	// learner) would leave the region led by a learner.
	if r.Leader != nil {
		for _, p := range region.Peers {
			if p.Id != r.Leader.Id || (p.Role != kvpb.PeerRole_DemotingVoter && p.Role != kvpb.PeerRole_Learner) {
				continue
			}
			if to := c.leaderOffTarget(r, func(q *kvpb.Peer) bool { return !bad(q) }); to != nil {
				return op(region, kvpb.OperatorKind_TransferLeader, to, fmt.Sprintf("the leader is a %s", p.Role))
			}
			return nil
		}
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
		m := matchOf(r, p.Id)
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
		if to := c.leaderOffTarget(r, func(p *kvpb.Peer) bool { return !bad(p) }); to != nil {
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

// sizeWeight is the weight of a store's size in its score, against 1 for
// its replica count: counts are what stays even, sizes break ties and
// keep big regions from piling up on one store.
const sizeWeight = 0.25

// score is a store's replica load: its count and its size, each relative
// to the mean.
func (c *Cluster) score(s *StoreInfo) float64 {
	x := 0.0
	if c.meanReplicas > 0 {
		x += float64(s.Replicas) / c.meanReplicas
	}
	if c.meanSize > 0 {
		x += sizeWeight * float64(s.Size) / c.meanSize
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
	return c.leaderTargetOf(r, ok, true)
}

// leaderOffTarget is leaderTarget for a leader that must hand over (on a
// replica being moved or demoted): a caught-up voter raft does not count
// recently active will do when no active one does. A leader whose region
// hibernates stops refreshing raft's activity flags, and such a region
// was left with a voter too many for good (TestScaleOut, 2026-11-27).
func (c *Cluster) leaderOffTarget(r *kvpb.RegionStat, ok func(*kvpb.Peer) bool) *kvpb.Peer {
	if to := c.leaderTargetOf(r, ok, true); to != nil {
		return to
	}
	return c.leaderTargetOf(r, ok, false)
}

func (c *Cluster) leaderTargetOf(r *kvpb.RegionStat, ok func(*kvpb.Peer) bool, active bool) *kvpb.Peer {
	prog := func(id uint64) *kvpb.PeerProgress {
		for _, pr := range r.Progress {
			if pr.PeerId == id {
				return pr
			}
		}
		return nil
	}
	var best *kvpb.Peer
	for _, p := range r.Region.Peers {
		s := c.Stores[p.StoreId]
		if p.Role != kvpb.PeerRole_Voter || (r.Leader != nil && p.Id == r.Leader.Id) || s == nil || !s.serving() || !ok(p) {
			continue
		}
		if pr := prog(p.Id); pr == nil || (active && !pr.Active) || pr.Match+caughtUpLag < r.CommitIndex {
			continue
		}
		if best == nil || c.leaderLoad(r, s) < c.leaderLoad(r, c.Stores[best.StoreId]) {
			best = p
		}
	}
	return best
}

// leaderLoad ranks the candidates to lead r: by read load for a hot
// region, by leader count for the others.
func (c *Cluster) leaderLoad(r *kvpb.RegionStat, s *StoreInfo) float64 {
	if rd, _ := RegionRate(r); c.significant(rd, c.meanRead) {
		return s.ReadRate
	}
	return float64(s.Leaders)
}

// significant: a region's flow that moves a store's balance noticeably.
func (c *Cluster) significant(flow, mean float64) bool {
	return flow > 0 && flow > mean*c.Tolerance/10
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

// stable: a region the balancers may touch: nothing in flight, no move
// under way, voters only, no membership step pending, not PD's own
// region.
// balanceable: a balancer may move r (stable, and not cooling down after
// a balancer's last move).
func (c *Cluster) balanceable(r *kvpb.RegionStat) bool {
	return !c.Cooling[r.Region.Id] && c.stable(r)
}

func (c *Cluster) stable(r *kvpb.RegionStat) bool {
	if c.Busy[r.Region.Id] || r.Region.Id == SystemRegionID || r.Leader == nil || c.Moves[r.Region.Id] != 0 {
		return false
	}
	for _, p := range r.Region.Peers {
		if p.Role != kvpb.PeerRole_Voter {
			return false // a learner waiting for its snapshot, a joint state
		}
	}
	return RegionStep(c, r) == nil
}

// The balancers weigh every move against one cost per kind of move, the
// sum over the serving stores of their squared relative deviations from
// the mean:
//
//	replica moves  (replicas/mean - 1)^2 + (written bytes/mean - 1)^2 + sizeWeight (size/mean - 1)^2
//	leader moves   (leaders/mean - 1)^2 + (read bytes/mean - 1)^2
//
// (a flow's term only while its mean is above HotMinBytes), and make a
// move only when it lowers its cost by at least what moving one
// replica (leader) between stores two apart does. The cost only goes
// down, so the balancers never undo each other's moves and stop once no
// single move helps; and a move that evens one measure at too high a
// price in another is never made.

// replicaCost is a store's part of the replica-move cost with the given
// counts.
func (c *Cluster) replicaCost(replicas float64, write float64, size float64) float64 {
	x := 0.0
	if c.meanReplicas > 0 {
		x += sq(replicas/c.meanReplicas - 1)
	}
	if c.meanWrite > c.HotMinBytes {
		x += sq(write/c.meanWrite - 1)
	}
	if c.meanSize > 0 {
		x += sizeWeight * sq(size/c.meanSize-1)
	}
	return x
}

func (c *Cluster) leaderCost(leaders float64, read float64) float64 {
	x := 0.0
	if c.meanLeaders > 0 {
		x += sq(leaders/c.meanLeaders - 1)
	}
	if c.meanRead > c.HotMinBytes {
		x += sq(read/c.meanRead - 1)
	}
	return x
}

func sq(x float64) float64 { return x * x }

// replicaGain is how much moving r's replica from src to t lowers the
// replica cost (positive: better).
func (c *Cluster) replicaGain(r *kvpb.RegionStat, src, t *StoreInfo) float64 {
	_, wr := RegionRate(r)
	sz := float64(r.ApproximateSize)
	before := c.replicaCost(float64(src.Replicas), src.WriteRate, float64(src.Size)) +
		c.replicaCost(float64(t.Replicas), t.WriteRate, float64(t.Size))
	after := c.replicaCost(float64(src.Replicas-1), src.WriteRate-wr, float64(src.Size)-sz) +
		c.replicaCost(float64(t.Replicas+1), t.WriteRate+wr, float64(t.Size)+sz)
	return before - after
}

func (c *Cluster) leaderGain(r *kvpb.RegionStat, src, t *StoreInfo) float64 {
	rd, _ := RegionRate(r)
	before := c.leaderCost(float64(src.Leaders), src.ReadRate) + c.leaderCost(float64(t.Leaders), t.ReadRate)
	after := c.leaderCost(float64(src.Leaders-1), src.ReadRate-rd) + c.leaderCost(float64(t.Leaders+1), t.ReadRate+rd)
	return before - after
}

// minReplicaGain / minLeaderGain: what moving one replica (leader)
// between stores two apart gains.
func (c *Cluster) minReplicaGain() float64 {
	if c.meanReplicas == 0 {
		return math.Inf(1)
	}
	return 2 / sq(c.meanReplicas) * 0.99
}

func (c *Cluster) minLeaderGain() float64 {
	if c.meanLeaders == 0 {
		return math.Inf(1)
	}
	return 2 / sq(c.meanLeaders) * 0.99
}

// bestLeaderMove returns the follower of r whose store gains most from
// taking r's leadership, if that is worth a transfer.
func (c *Cluster) bestLeaderMove(r *kvpb.RegionStat) (*kvpb.Peer, float64) {
	src := c.Stores[r.Leader.StoreId]
	if src == nil || src.LeaderOps >= c.LeaderLimit {
		return nil, 0
	}
	var best *kvpb.Peer
	gain := c.minLeaderGain()
	c.leaderTarget(r, func(p *kvpb.Peer) bool {
		t := c.Stores[p.StoreId]
		if t.LeaderOps >= c.LeaderLimit {
			return false
		}
		if g := c.leaderGain(r, src, t); g >= gain {
			best, gain = p, g
		}
		return false
	})
	return best, gain
}

// bestReplicaMove returns the move of one of r's replicas, from any of
// its stores to one of the least loaded stores holding none of it, that
// lowers the replica cost most, if any is worth it.
func (c *Cluster) bestReplicaMove(r *kvpb.RegionStat) (src, t *StoreInfo) {
	gain := c.minReplicaGain()
	for _, p := range r.Region.Peers {
		s := c.Stores[p.StoreId]
		if s == nil || s.Ops >= c.StoreLimit {
			continue
		}
		for _, cand := range c.lightStores() {
			if cand.Ops >= c.StoreLimit || onStore(r.Region, cand.ID) {
				continue
			}
			if g := c.replicaGain(r, s, cand); g >= gain {
				src, t, gain = s, cand, g
			}
		}
	}
	return src, t
}

// lightTargets is how many of the least loaded stores a replica move
// considers as targets.
const lightTargets = 12

// lightStores returns the serving stores with the lowest replica load
// (replicas, written bytes and size, each relative to the mean), computed
// once per round.
func (c *Cluster) lightStores() []*StoreInfo {
	if c.light != nil {
		return c.light
	}
	load := func(s *StoreInfo) float64 {
		x := 0.0
		if c.meanReplicas > 0 {
			x += float64(s.Replicas) / c.meanReplicas
		}
		if c.meanWrite > c.HotMinBytes {
			x += s.WriteRate / c.meanWrite
		}
		if c.meanSize > 0 {
			x += sizeWeight * float64(s.Size) / c.meanSize
		}
		return x
	}
	var out []*StoreInfo
	for _, s := range c.sortedStores() {
		if s.serving() {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return load(out[i]) < load(out[j]) })
	if len(out) > lightTargets {
		out = out[:lightTargets]
	}
	c.light = out
	return out
}

func (c *Cluster) leaderDecision(r *kvpb.RegionStat, to *kvpb.Peer, why string) Decision {
	src, t := c.Stores[r.Leader.StoreId], c.Stores[to.StoreId]
	return Decision{Op: op(r.Region, kvpb.OperatorKind_TransferLeader, to,
		fmt.Sprintf("%s: store %d has %d leaders reading %.0f B/s, store %d has %d reading %.0f B/s",
			why, src.ID, src.Leaders, src.ReadRate, t.ID, t.Leaders, t.ReadRate)), Balance: true}
}

func (c *Cluster) replicaDecision(r *kvpb.RegionStat, src, t *StoreInfo, why string) Decision {
	return Decision{Op: op(r.Region, kvpb.OperatorKind_AddLearner, &kvpb.Peer{StoreId: t.ID, Role: kvpb.PeerRole_Learner},
		fmt.Sprintf("%s: store %d has %d replicas written %.0f B/s, store %d has %d written %.0f B/s",
			why, src.ID, src.Replicas, src.WriteRate, t.ID, t.Replicas, t.WriteRate)), MoveFrom: src.ID, Balance: true}
}

// BalanceLeaders transfers leaderships that lower the leader cost
// (leader counts, read load), in region order.
func BalanceLeaders(c *Cluster, candidates []*kvpb.RegionStat) []Decision {
	var out []Decision
	for _, r := range candidates {
		if !c.balanceable(r) {
			continue
		}
		if to, _ := c.bestLeaderMove(r); to != nil {
			out = append(out, c.commit(c.leaderDecision(r, to, "balance leaders")))
		}
	}
	return out
}

// BalanceReplicas moves replicas that lower the replica cost (replica
// counts, written bytes, sizes), in region order.
func BalanceReplicas(c *Cluster, candidates []*kvpb.RegionStat) []Decision {
	var out []Decision
	for _, r := range candidates {
		if !c.canTake() {
			break
		}
		if !c.balanceable(r) {
			continue
		}
		if src, t := c.bestReplicaMove(r); t != nil {
			out = append(out, c.commit(c.replicaDecision(r, src, t, "balance replicas")))
		}
	}
	return out
}

// hotRegions is how many of the busiest candidates BalanceHot considers
// per round.
const hotRegions = 64

// BalanceHot looks at the busiest regions first (read and written bytes):
// a leadership transfer, or failing that a move of the leader's replica,
// that lowers the leader cost for a region read much; a replica move
// that lowers the replica cost for one written much.
func BalanceHot(c *Cluster, candidates []*kvpb.RegionStat) []Decision {
	type hot struct {
		r      *kvpb.RegionStat
		rd, wr float64
	}
	var hs []hot
	for _, r := range candidates {
		rd, wr := RegionRate(r)
		if (rd > 0 && c.meanRead > c.HotMinBytes) || (wr > 0 && c.meanWrite > c.HotMinBytes) {
			hs = append(hs, hot{r, rd, wr})
		}
	}
	slices.SortStableFunc(hs, func(a, b hot) int { return cmp.Compare(b.rd+b.wr, a.rd+a.wr) })
	var out []Decision
	for i, h := range hs {
		if i >= hotRegions {
			break
		}
		r := h.r
		if !c.balanceable(r) {
			continue
		}
		if h.rd > 0 && c.meanRead > c.HotMinBytes {
			if to, _ := c.bestLeaderMove(r); to != nil {
				out = append(out, c.commit(c.leaderDecision(r, to, "hot read")))
				continue
			}
			// No follower gains: move the leader's replica to the store
			// that gains most, if that also suits the replica cost.
			src := c.Stores[r.Leader.StoreId]
			var best *StoreInfo
			gain := c.minLeaderGain()
			for _, t := range c.sortedStores() {
				// A replica may go to a store with one fewer, never to
				// one with as many (the replica balancer would move it
				// back).
				if !t.serving() || onStore(r.Region, t.ID) || t.Ops >= c.StoreLimit || src.Ops >= c.StoreLimit ||
					c.replicaGain(r, src, t) < -c.minReplicaGain()/2 {
					continue
				}
				if g := c.leaderGain(r, src, t); g >= gain {
					best, gain = t, g
				}
			}
			if best != nil {
				out = append(out, c.commit(c.replicaDecision(r, src, best, "hot read")))
				continue
			}
		}
		if h.wr > 0 && c.meanWrite > c.HotMinBytes {
			if src, t := c.bestReplicaMove(r); t != nil {
				out = append(out, c.commit(c.replicaDecision(r, src, t, "hot write")))
			}
		}
	}
	return out
}
