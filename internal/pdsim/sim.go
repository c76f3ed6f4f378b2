// Package pdsim is a deterministic simulator of a Strata cluster's
// placement: simulated stores and regions, virtual time, no network, and
// the placement driver's real schedulers (pd.Cluster.Schedule, the code a
// PD leader runs on every heartbeat) deciding every operator. Operators
// take simulated time (a learner waits for its snapshot, proportional to
// the region's size), stores fail and join, load is skewed (Zipf) and its
// hot set moves, and regions serving too much are split (the node's
// load-based split). It reports how far from even the stores are, by
// replica count, leader count, read and write load, over time, and how
// long the cluster took to settle after each event.
package pdsim

import (
	"fmt"
	"io"
	"math"
	"math/rand"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/kvpb"
)

// Event changes the cluster at a simulated time.
type Event struct {
	At   time.Duration
	Kind string // "add" (Count stores), "fail" (Count stores), "drain" (Count stores), "shift" (the hot set moves)
	// Count is how many stores an add, fail or drain concerns.
	Count int
}

// Scenario is a simulation's setup.
type Scenario struct {
	Seed       int64
	Stores     int // at the start
	Regions    int
	RegionSize uint64 // mean bytes
	// Skew is the Zipf exponent of the regions' load (0: uniform).
	Skew float64
	// ReadBytes and WriteBytes are the cluster's total load per second.
	ReadBytes, WriteBytes float64
	// SplitBytes: a region serving more than this (read+write bytes/s)
	// is split in two (0: never).
	SplitBytes float64
	// InitialStores: the replicas start on the first this many stores
	// only (0: all), placed with a skew, as after a bulk load.
	InitialStores int
	Events        []Event
	Duration      time.Duration
	Config        pd.ScheduleConfig
	// Tolerance: balanced means within this fraction of the mean (0.1).
	Tolerance float64
	// SnapshotRate is bytes/s a learner's snapshot moves at.
	SnapshotRate float64
}

// Default100 is the scenario: 100 stores, 10,000 regions, skewed
// and shifting load, stores added, failing and drained.
func Default100() Scenario {
	cfg := pd.DefaultScheduleConfig()
	return Scenario{
		Seed: 1, Stores: 90, Regions: 10000, RegionSize: 64 << 20, Skew: 1.0,
		ReadBytes: 2 << 30, WriteBytes: 256 << 20, SplitBytes: 1 << 20, InitialStores: 60,
		Events: []Event{
			{At: 0, Kind: "add", Count: 10},
			{At: 30 * time.Minute, Kind: "shift"},
			{At: 45 * time.Minute, Kind: "fail", Count: 1},
			{At: 55 * time.Minute, Kind: "fail", Count: 1},
			{At: 70 * time.Minute, Kind: "add", Count: 3},
			{At: 90 * time.Minute, Kind: "drain", Count: 2},
			{At: 105 * time.Minute, Kind: "shift"},
		},
		Duration: 150 * time.Minute, Config: cfg, Tolerance: 0.1, SnapshotRate: 64 << 20,
	}
}

type region struct {
	stat   *kvpb.RegionStat
	weight float64 // share of the load; the read and write hot sets differ
	wshare float64
	// snapshotDone: when each learner's snapshot completes.
	snapshotDone map[uint64]time.Duration
}

type store struct {
	id     uint64
	failed bool
	failAt time.Duration
	state  kvpb.StoreState
}

type inflight struct {
	op     *kvpb.Operator
	doneAt time.Duration
	from   uint64
}

// Sim is a running simulation.
type Sim struct {
	sc      Scenario
	rng     *rand.Rand
	now     time.Duration
	stores  []*store
	byID    map[uint64]*store
	regions map[uint64]*region
	ids     []uint64 // region ids, sorted
	nextID  uint64
	ops     map[uint64]*inflight
	moves   map[uint64]uint64
	// balanced: when a balancer last moved each region (as PD keeps it).
	balanced map[uint64]time.Duration
	// Operators counts the operators handed out, by kind.
	Operators map[string]int
	// Splits counts the load-based splits.
	Splits int
}

// New builds the initial cluster.
func New(sc Scenario) *Sim {
	if sc.Tolerance == 0 {
		sc.Tolerance = 0.1
	}
	s := &Sim{sc: sc, rng: rand.New(rand.NewSource(sc.Seed)), regions: map[uint64]*region{}, ops: map[uint64]*inflight{},
		moves: map[uint64]uint64{}, balanced: map[uint64]time.Duration{}, Operators: map[string]int{}, nextID: 1_000_000, byID: map[uint64]*store{}}
	for i := 0; i < sc.Stores; i++ {
		s.addStore()
	}
	initial := sc.InitialStores
	if initial == 0 || initial > sc.Stores {
		initial = sc.Stores
	}
	weights := s.zipf(sc.Regions)
	wweights := s.zipf(sc.Regions)
	for i := 0; i < sc.Regions; i++ {
		id := uint64(i + 2)
		// Skewed placement: the first store gets about twice as many as
		// the last of the initial ones.
		picked := map[uint64]bool{}
		var peers []*kvpb.Peer
		for len(peers) < sc.Config.Replicas {
			x := s.rng.Float64()
			x = 2 - math.Sqrt(4-3*x) // density falling linearly from 2/3 to 1/3 over [0, 1)
			st := uint64(x*float64(initial)) + 1
			if picked[st] {
				continue
			}
			picked[st] = true
			peers = append(peers, &kvpb.Peer{Id: s.newID(), StoreId: st})
		}
		size := uint64(float64(sc.RegionSize) * (0.5 + s.rng.Float64()))
		r := &region{stat: &kvpb.RegionStat{Region: &kvpb.Region{Id: id, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}, Peers: peers},
			Leader: peers[0], CommitIndex: 1000, ApproximateSize: size, IntervalMs: 1000},
			weight: weights[i], wshare: wweights[i], snapshotDone: map[uint64]time.Duration{}}
		for _, p := range peers {
			r.stat.Progress = append(r.stat.Progress, &kvpb.PeerProgress{PeerId: p.Id, Match: 1000, Active: true})
		}
		s.regions[id] = r
		s.ids = append(s.ids, id)
	}
	s.applyLoad()
	return s
}

func (s *Sim) addStore() {
	st := &store{id: uint64(len(s.stores) + 1)}
	s.stores = append(s.stores, st)
	s.byID[st.id] = st
}

func (s *Sim) newID() uint64 { s.nextID++; return s.nextID }

// zipf returns n shares summing to 1, Zipf-distributed, in random order.
func (s *Sim) zipf(n int) []float64 {
	w := make([]float64, n)
	total := 0.0
	for i := range w {
		w[i] = 1 / math.Pow(float64(i+1), s.sc.Skew)
		total += w[i]
	}
	for i := range w {
		w[i] /= total
	}
	s.rng.Shuffle(n, func(i, j int) { w[i], w[j] = w[j], w[i] })
	return w
}

// applyLoad sets each region's traffic from its shares.
func (s *Sim) applyLoad() {
	for _, r := range s.regions {
		r.stat.ReadBytes = uint64(r.weight * s.sc.ReadBytes)
		r.stat.WrittenBytes = uint64(r.wshare * s.sc.WriteBytes)
	}
}

func (s *Sim) store(id uint64) *store { return s.byID[id] }

// cluster builds the schedulers' view, as PD's leader does.
func (s *Sim) cluster() *pd.Cluster {
	c := &pd.Cluster{ScheduleConfig: s.sc.Config, Stores: map[uint64]*pd.StoreInfo{}, Busy: map[uint64]bool{}, Moves: map[uint64]uint64{},
		Cooling: map[uint64]bool{}}
	for id, at := range s.balanced {
		if s.now-at >= s.sc.Config.BalanceCooldown {
			delete(s.balanced, id)
		} else {
			c.Cooling[id] = true
		}
	}
	for _, st := range s.stores {
		si := &pd.StoreInfo{ID: st.id, Up: !st.failed, State: st.state}
		if st.failed {
			si.DownFor = s.now - st.failAt
		}
		c.Stores[st.id] = si
	}
	for _, id := range s.ids {
		c.Regions = append(c.Regions, s.regions[id].stat)
	}
	for id, m := range s.moves {
		if r := s.regions[id]; r != nil && onStore(r.stat.Region, m) {
			c.Moves[id] = m
		} else {
			delete(s.moves, id)
		}
	}
	ops := map[uint64]*kvpb.Operator{}
	for id, f := range s.ops {
		ops[id] = f.op
	}
	c.Prepare(ops)
	return c
}

func onStore(r *kvpb.Region, st uint64) bool {
	for _, p := range r.Peers {
		if p.StoreId == st {
			return true
		}
	}
	return false
}

// step advances one simulated second: events, elections, operators
// finishing, snapshots, splits, and a round of scheduling.
func (s *Sim) step() {
	for _, ev := range s.sc.Events {
		if ev.At == s.now {
			s.event(ev)
		}
	}
	// Regions whose leader's store failed elect a live voter.
	for _, id := range s.ids {
		r := s.regions[id]
		if st := s.store(r.stat.Leader.StoreId); st != nil && st.failed {
			for _, p := range r.stat.Region.Peers {
				if p.Role == kvpb.PeerRole_Voter && !s.store(p.StoreId).failed {
					r.stat.Leader = p
					break
				}
			}
		}
	}
	// Operators in flight finish.
	ids := make([]uint64, 0, len(s.ops))
	for id := range s.ops {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		f := s.ops[id]
		if f.doneAt > s.now {
			continue
		}
		delete(s.ops, id)
		r := s.regions[id]
		if r == nil || r.stat.Region.Epoch.Version != f.op.Epoch.Version {
			continue
		}
		if st := s.store(r.stat.Leader.StoreId); st.failed {
			continue // the leader died with the operator
		}
		r.stat = pd.ApplyOperator(r.stat, f.op)
		if f.op.Kind == kvpb.OperatorKind_AddLearner {
			d := time.Duration(float64(r.stat.ApproximateSize)/s.sc.SnapshotRate*float64(time.Second)) + time.Second
			r.snapshotDone[f.op.Peer.Id] = s.now + d
			r.stat.Progress = append(r.stat.Progress, &kvpb.PeerProgress{PeerId: f.op.Peer.Id, Active: true})
		}
	}
	// Snapshots complete.
	for _, id := range s.ids {
		r := s.regions[id]
		for pid, at := range r.snapshotDone {
			if at <= s.now {
				for _, pr := range r.stat.Progress {
					if pr.PeerId == pid {
						pr.Match = r.stat.CommitIndex
					}
				}
				delete(r.snapshotDone, pid)
			}
		}
	}
	if s.sc.SplitBytes > 0 && s.now%time.Minute == 0 {
		s.loadSplits()
	}
	c := s.cluster()
	// Only live leaders report (and can carry operators out): a region
	// that lost a majority of its voters has none, and PD cannot help it.
	var live []*kvpb.RegionStat
	for _, r := range c.Regions {
		if !s.store(r.Leader.StoreId).failed {
			live = append(live, r)
		}
	}
	for _, d := range c.Schedule(live) {
		op := d.Op
		if op.Kind == kvpb.OperatorKind_AddLearner {
			op.Peer.Id = s.newID()
		}
		lat := time.Second
		s.ops[op.RegionId] = &inflight{op: op, doneAt: s.now + lat, from: d.MoveFrom}
		if d.MoveFrom != 0 {
			s.moves[op.RegionId] = d.MoveFrom
		}
		if d.Balance {
			s.balanced[op.RegionId] = s.now
		}
		s.Operators[op.Kind.String()]++
	}
	s.now += time.Second
}

func (s *Sim) event(ev Event) {
	switch ev.Kind {
	case "add":
		for i := 0; i < ev.Count; i++ {
			s.addStore()
		}
	case "fail", "drain":
		n := 0
		for _, i := range s.rng.Perm(len(s.stores)) {
			st := s.stores[i]
			if st.failed || st.state != kvpb.StoreState_Serving {
				continue
			}
			if ev.Kind == "fail" {
				st.failed, st.failAt = true, s.now
			} else {
				st.state = kvpb.StoreState_Decommissioning
			}
			if n++; n == ev.Count {
				break
			}
		}
	case "shift":
		w := s.zipf(len(s.ids))
		ww := s.zipf(len(s.ids))
		for i, id := range s.ids {
			s.regions[id].weight, s.regions[id].wshare = w[i], ww[i]
		}
		s.applyLoad()
	}
}

// loadSplits splits the regions serving more than SplitBytes in two,
// each half with half the load and size (the node's load-based split).
func (s *Sim) loadSplits() {
	var add []uint64
	for _, id := range s.ids {
		r := s.regions[id]
		if s.ops[id] != nil || float64(r.stat.ReadBytes+r.stat.WrittenBytes) <= s.sc.SplitBytes {
			continue
		}
		nr := &region{stat: cloneStat(r.stat), weight: r.weight / 2, wshare: r.wshare / 2, snapshotDone: map[uint64]time.Duration{}}
		r.weight, r.wshare = r.weight/2, r.wshare/2
		nid := s.newID()
		nr.stat.Region.Id = nid
		for _, p := range nr.stat.Region.Peers {
			old := p.Id
			p.Id = s.newID()
			for _, pr := range nr.stat.Progress {
				if pr.PeerId == old {
					pr.PeerId = p.Id
				}
			}
			if r.stat.Leader.Id == old {
				nr.stat.Leader = p
			}
			if at, ok := r.snapshotDone[old]; ok {
				nr.snapshotDone[p.Id] = at
			}
		}
		r.stat.Region.Epoch.Version++
		nr.stat.Region.Epoch.Version = r.stat.Region.Epoch.Version
		r.stat.ApproximateSize /= 2
		nr.stat.ApproximateSize = r.stat.ApproximateSize
		s.regions[nid] = nr
		add = append(add, nid)
		delete(s.moves, id)
		s.Splits++
	}
	s.ids = append(s.ids, add...)
	sort.Slice(s.ids, func(i, j int) bool { return s.ids[i] < s.ids[j] })
	s.applyLoad()
}

func cloneStat(r *kvpb.RegionStat) *kvpb.RegionStat { return proto.Clone(r).(*kvpb.RegionStat) }

// Balance is how far from even the serving stores are: the largest
// deviation from the mean, as a fraction of the mean.
type Balance struct {
	Replicas, Leaders, Read, Write float64
	// MinReplicas and MaxReplicas etc. are the extremes.
	MinReplicas, MaxReplicas, MinLeaders, MaxLeaders int
	// Dead: replicas left on failed or decommissioned stores (of regions
	// that still have a live leader).
	Dead int
	// LostQuorum: regions with a majority of their voters on failed
	// stores (unavailable; no scheduler can repair them).
	LostQuorum int
}

// Within reports whether every measure is within tol.
func (b Balance) Within(tol float64) bool {
	return b.Replicas <= tol && b.Leaders <= tol && b.Read <= tol && b.Write <= tol && b.Dead == 0
}

// Measure computes the balance now.
func (s *Sim) Measure() Balance {
	c := s.cluster()
	var b Balance
	var reps, leads, reads, writes []float64
	b.MinReplicas, b.MinLeaders = math.MaxInt, math.MaxInt
	for _, r := range c.Regions {
		voters, failed := 0, 0
		for _, p := range r.Region.Peers {
			if p.Role == kvpb.PeerRole_Voter {
				voters++
				if s.store(p.StoreId).failed {
					failed++
				}
			}
		}
		if 2*failed >= voters+1 || s.store(r.Leader.StoreId).failed {
			b.LostQuorum++
			continue
		}
		for _, p := range r.Region.Peers {
			if st := s.store(p.StoreId); st.failed || st.state != kvpb.StoreState_Serving {
				b.Dead++
			}
		}
	}
	for _, st := range s.stores {
		si := c.Stores[st.id]
		if st.failed || st.state != kvpb.StoreState_Serving {
			continue
		}
		reps = append(reps, float64(si.Replicas))
		leads = append(leads, float64(si.Leaders))
		reads = append(reads, si.ReadRate)
		writes = append(writes, si.WriteRate)
		b.MinReplicas, b.MaxReplicas = min(b.MinReplicas, si.Replicas), max(b.MaxReplicas, si.Replicas)
		b.MinLeaders, b.MaxLeaders = min(b.MinLeaders, si.Leaders), max(b.MaxLeaders, si.Leaders)
	}
	b.Replicas, b.Leaders, b.Read, b.Write = deviation(reps), deviation(leads), deviation(reads), deviation(writes)
	return b
}

func deviation(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if mean == 0 {
		return 0
	}
	d := 0.0
	for _, x := range xs {
		d = max(d, math.Abs(x-mean)/mean)
	}
	return d
}

// Settle is how long the cluster took to come within the tolerance after
// an event (or the start), and stay there until the next one.
type Settle struct {
	Event   string
	At      time.Duration
	Settled time.Duration // -1: not within the tolerance before the next event
}

// Report is a simulation's outcome.
type Report struct {
	Settles   []Settle
	Final     Balance
	Operators map[string]int
	Splits    int
	Regions   int
	Elapsed   time.Duration // wall time the simulation took
}

// Run runs the scenario to its end, writing a line per simulated minute
// to log (nil: none), and returns the report.
func Run(sc Scenario, log io.Writer) Report {
	start := time.Now()
	s := New(sc)
	var rep Report
	marks := []Settle{{Event: "start", At: 0, Settled: -1}}
	for _, ev := range sc.Events {
		name := ev.Kind
		if ev.Count > 0 {
			name = fmt.Sprintf("%s %d", ev.Kind, ev.Count)
		}
		if ev.At == 0 {
			marks[0].Event += ", " + name
			continue
		}
		marks = append(marks, Settle{Event: name, At: ev.At, Settled: -1})
	}
	cur := 0
	for s.now < sc.Duration {
		for cur+1 < len(marks) && marks[cur+1].At <= s.now {
			cur++
		}
		s.step()
		if s.now%(10*time.Second) == 0 || (log != nil && s.now%time.Minute == 0) {
			b := s.Measure()
			within := b.Within(sc.Tolerance) && len(s.ops) == 0
			if !within {
				marks[cur].Settled = -1
			} else if marks[cur].Settled < 0 {
				marks[cur].Settled = s.now - marks[cur].At
			}
			if log != nil && s.now%time.Minute == 0 {
				fmt.Fprintf(log, "%6s  regions %5d  replicas %4d..%-4d (%4.1f%%)  leaders %3d..%-3d (%4.1f%%)  read %5.1f%%  write %5.1f%%  dead %d  ops in flight %d\n",
					fmtMin(s.now), len(s.ids), b.MinReplicas, b.MaxReplicas, 100*b.Replicas, b.MinLeaders, b.MaxLeaders, 100*b.Leaders,
					100*b.Read, 100*b.Write, b.Dead, len(s.ops))
				if b.LostQuorum > 0 {
					fmt.Fprintf(log, "        %d regions lost a majority of their voters\n", b.LostQuorum)
				}
			}
		}
	}
	rep.Settles = marks
	rep.Final = s.Measure()
	rep.Operators = s.Operators
	rep.Splits = s.Splits
	rep.Regions = len(s.ids)
	rep.Elapsed = time.Since(start)
	return rep
}

func fmtMin(d time.Duration) string {
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// Print writes a report.
func (r Report) Print(w io.Writer, tol float64) {
	fmt.Fprintf(w, "\nsettled within %.0f%% of even (replicas, leaders, read and write load; no replica on a dead or drained store):\n", 100*tol)
	for _, s := range r.Settles {
		t := "not settled"
		if s.Settled >= 0 {
			t = "after " + fmtMin(s.Settled)
		}
		fmt.Fprintf(w, "  %-22s at %7s: %s\n", s.Event, fmtMin(s.At), t)
	}
	b := r.Final
	fmt.Fprintf(w, "final: %d regions (%d split by load); deviation from the mean: replicas %.1f%% (%d..%d), leaders %.1f%% (%d..%d), read %.1f%%, write %.1f%%; replicas on dead stores %d; regions that lost a majority %d\n",
		r.Regions, r.Splits, 100*b.Replicas, b.MinReplicas, b.MaxReplicas, 100*b.Leaders, b.MinLeaders, b.MaxLeaders, 100*b.Read, 100*b.Write, b.Dead, b.LostQuorum)
	kinds := make([]string, 0, len(r.Operators))
	for k := range r.Operators {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "operators:")
	for _, k := range kinds {
		fmt.Fprintf(w, " %s %d", k, r.Operators[k])
	}
	fmt.Fprintf(w, "\nwall time %v\n", r.Elapsed.Round(time.Millisecond))
}
