package pd

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/strata-db/strata/kvpb"
)

// TestSchedulerDataDriven pins the schedulers' decisions
// (testdata/scheduler/*):
//
//	config [replicas=n] [down-after=d] [store-limit=n] [repair-limit=n] [leader-limit=n] [hot-min=bytes/s]
//	stores                     one store a line: <id> [down=<d>] [silent] [draining|decommissioning|decommissioned]
//	region id=<id> peers=<id@store[L|+|-],...> [leader=<peer>] [commit=<i>] [match=<peer:index,...>]
//	       [size=<bytes>] [read=<B/s>] [write=<B/s>] [move-from=<store>]
//	       [start=<key>] [end=<key>] [keys=<n>] [age=<d>]
//	                           adds (or replaces) a region
//	regions n=<count> from=<id> stores=<s1,s2,...> [size=..] [read=..] [write=..]
//	                           adds count caught-up regions with voters on the stores, led by the first
//	step id=<id>               RegionStep for one region
//	schedule [busy=<id,...>] [transfers=<region:store,...>] [cooling=<id,...>]
//	                           one round of every scheduler over every region, with
//	                           those regions busy, those leader transfers in flight, or
//	                           those regions moved by a balancer within BalanceCooldown
//	run [max=<rounds>]         rounds of schedule, each decision done at once (learners caught up),
//	                           until a round decides nothing; prints the rounds and the stores
//	merge [max-size=..] [max-keys=..] [max-merged-size=..] [max-merged-keys=..] [max-rate=..]
//	      [min-age=<d>] [boundaries=<key,...>]
//	                           one round of the merge checker (thresholds default to small
//	                           test values: 100 bytes, 10 keys, merged 300 bytes and 30 keys,
//	                           50 B/s, 1h)
//	show                       the stores' counts and flows
//	reset                      forgets every region
func TestSchedulerDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/scheduler", func(t *testing.T, path string) {
		h := &schedHarness{cfg: DefaultScheduleConfig(), stores: map[uint64]*StoreInfo{}, regions: map[uint64]*kvpb.RegionStat{},
			moves: map[uint64]uint64{}, ages: map[uint64]time.Duration{}}
		h.cfg.HotMinBytes = 100
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return h.cmd(t, d) })
	})
}

type schedHarness struct {
	cfg     ScheduleConfig
	stores  map[uint64]*StoreInfo
	regions map[uint64]*kvpb.RegionStat
	moves   map[uint64]uint64
	ages    map[uint64]time.Duration
	nextID  uint64
}

func (h *schedHarness) cluster(busy map[uint64]bool) *Cluster { return h.clusterWith(busy, nil) }

func (h *schedHarness) clusterWith(busy map[uint64]bool, ops map[uint64]*kvpb.Operator) *Cluster {
	c := &Cluster{ScheduleConfig: h.cfg, Stores: map[uint64]*StoreInfo{}, Busy: map[uint64]bool{}, Moves: map[uint64]uint64{}, Cooling: map[uint64]bool{}}
	for id, s := range h.stores {
		cp := *s
		c.Stores[id] = &cp
	}
	for id := range busy {
		c.Busy[id] = true
	}
	for id, m := range h.moves {
		if onStore(h.regions[id].Region, m) {
			c.Moves[id] = m
		}
	}
	ids := make([]uint64, 0, len(h.regions))
	for id := range h.regions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		c.Regions = append(c.Regions, h.regions[id])
	}
	c.Prepare(ops)
	return c
}

func parsePeers(t *testing.T, d *datadriven.TestData, s string) []*kvpb.Peer {
	var out []*kvpb.Peer
	for _, ps := range strings.Split(s, ",") {
		role := kvpb.PeerRole_Voter
		switch {
		case strings.HasSuffix(ps, "L"):
			role = kvpb.PeerRole_Learner
		case strings.HasSuffix(ps, "+"):
			role = kvpb.PeerRole_IncomingVoter
		case strings.HasSuffix(ps, "-"):
			role = kvpb.PeerRole_DemotingVoter
		}
		a, b, ok := strings.Cut(strings.TrimRight(ps, "L+-"), "@")
		id, err1 := strconv.ParseUint(a, 10, 64)
		st, err2 := strconv.ParseUint(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			d.Fatalf(t, "bad peer %q", ps)
		}
		out = append(out, &kvpb.Peer{Id: id, StoreId: st, Role: role})
	}
	return out
}

func (h *schedHarness) cmd(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "config":
		d.MaybeScanArgs(t, "replicas", &h.cfg.Replicas)
		d.MaybeScanArgs(t, "store-limit", &h.cfg.StoreLimit)
		d.MaybeScanArgs(t, "repair-limit", &h.cfg.RepairLimit)
		d.MaybeScanArgs(t, "leader-limit", &h.cfg.LeaderLimit)
		d.MaybeScanArgs(t, "hot-min", &h.cfg.HotMinBytes)
		var da string
		d.MaybeScanArgs(t, "down-after", &da)
		if da != "" {
			h.cfg.DownAfter, _ = time.ParseDuration(da)
		}
		return ""
	case "reset":
		h.regions, h.moves, h.ages = map[uint64]*kvpb.RegionStat{}, map[uint64]uint64{}, map[uint64]time.Duration{}
		return ""
	case "stores":
		h.stores = map[uint64]*StoreInfo{}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			id, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				d.Fatalf(t, "store %q", line)
			}
			s := &StoreInfo{ID: id, Up: true}
			for _, a := range f[1:] {
				switch {
				case strings.HasPrefix(a, "down="):
					s.Up = false
					s.DownFor, _ = time.ParseDuration(strings.TrimPrefix(a, "down="))
				case a == "silent":
					s.Silent = true
				case a == "draining":
					s.State = kvpb.StoreState_Draining
				case a == "decommissioning":
					s.State = kvpb.StoreState_Decommissioning
				case a == "decommissioned":
					s.State = kvpb.StoreState_Decommissioned
				default:
					d.Fatalf(t, "store attribute %q", a)
				}
			}
			h.stores[id] = s
		}
		return ""
	case "region":
		var id, leader, commit, size uint64
		var peers, match string
		var read, write float64
		var moveFrom, keys uint64
		var start, end, age string
		d.MaybeScanArgs(t, "start", &start)
		d.MaybeScanArgs(t, "end", &end)
		d.MaybeScanArgs(t, "keys", &keys)
		d.MaybeScanArgs(t, "age", &age)
		d.ScanArgs(t, "id", &id)
		d.ScanArgs(t, "peers", &peers)
		d.MaybeScanArgs(t, "leader", &leader)
		d.MaybeScanArgs(t, "commit", &commit)
		d.MaybeScanArgs(t, "match", &match)
		d.MaybeScanArgs(t, "size", &size)
		d.MaybeScanArgs(t, "read", &read)
		d.MaybeScanArgs(t, "write", &write)
		d.MaybeScanArgs(t, "move-from", &moveFrom)
		var inactive string // peers raft does not count recently active
		d.MaybeScanArgs(t, "inactive", &inactive)
		r := &kvpb.RegionStat{Region: &kvpb.Region{Id: id, Epoch: &kvpb.RegionEpoch{ConfVer: 4, Version: 1},
			Peers: parsePeers(t, d, peers), StartKey: []byte(start), EndKey: []byte(end)}, CommitIndex: commit,
			ApproximateSize: size, ApproximateKeys: keys,
			ReadBytes: uint64(read), WrittenBytes: uint64(write), IntervalMs: 1000}
		if leader == 0 {
			leader = r.Region.Peers[0].Id
		}
		for _, p := range r.Region.Peers {
			if p.Id == leader {
				r.Leader = p
			}
		}
		if match != "" {
			for _, m := range strings.Split(match, ",") {
				a, b, _ := strings.Cut(m, ":")
				pid, _ := strconv.ParseUint(a, 10, 64)
				idx, _ := strconv.ParseUint(b, 10, 64)
				r.Progress = append(r.Progress, &kvpb.PeerProgress{PeerId: pid, Match: idx, Active: true})
			}
		} else {
			for _, p := range r.Region.Peers {
				r.Progress = append(r.Progress, &kvpb.PeerProgress{PeerId: p.Id, Match: commit, Active: true})
			}
		}
		for _, a := range strings.Split(inactive, ",") {
			pid, _ := strconv.ParseUint(a, 10, 64)
			for _, pr := range r.Progress {
				if pr.PeerId == pid {
					pr.Active = false
				}
			}
		}
		h.regions[id] = r
		delete(h.ages, id)
		if age != "" {
			a, err := time.ParseDuration(age)
			if err != nil {
				d.Fatalf(t, "age: %v", err)
			}
			h.ages[id] = a
		}
		if moveFrom != 0 {
			h.moves[id] = moveFrom
		} else {
			delete(h.moves, id)
		}
		return ""
	case "regions":
		var n, from, size uint64
		var stores string
		var read, write float64
		d.ScanArgs(t, "n", &n)
		d.ScanArgs(t, "from", &from)
		d.ScanArgs(t, "stores", &stores)
		d.MaybeScanArgs(t, "size", &size)
		d.MaybeScanArgs(t, "read", &read)
		d.MaybeScanArgs(t, "write", &write)
		for id := from; id < from+n; id++ {
			r := &kvpb.RegionStat{Region: &kvpb.Region{Id: id, Epoch: &kvpb.RegionEpoch{ConfVer: 4, Version: 1}},
				CommitIndex: 100, ApproximateSize: size, ReadBytes: uint64(read), WrittenBytes: uint64(write), IntervalMs: 1000}
			for i, s := range strings.Split(stores, ",") {
				st, _ := strconv.ParseUint(s, 10, 64)
				p := &kvpb.Peer{Id: id*10 + uint64(i), StoreId: st}
				r.Region.Peers = append(r.Region.Peers, p)
				r.Progress = append(r.Progress, &kvpb.PeerProgress{PeerId: p.Id, Match: 100, Active: true})
			}
			r.Leader = r.Region.Peers[0]
			h.regions[id] = r
		}
		return ""
	case "step":
		var id uint64
		d.ScanArgs(t, "id", &id)
		c := h.cluster(nil)
		if op := RegionStep(c, h.regions[id]); op != nil {
			return fmtOp(op, 0)
		}
		return "none"
	case "schedule":
		busy := map[uint64]bool{}
		var b, transfers string
		d.MaybeScanArgs(t, "busy", &b)
		for _, s := range strings.Split(b, ",") {
			if id, err := strconv.ParseUint(s, 10, 64); err == nil {
				busy[id] = true
			}
		}
		// transfers=<region>:<store>,...: leader transfers in flight.
		d.MaybeScanArgs(t, "transfers", &transfers)
		ops := map[uint64]*kvpb.Operator{}
		for _, tr := range strings.Split(transfers, ",") {
			a, b, ok := strings.Cut(tr, ":")
			if !ok {
				continue
			}
			id, _ := strconv.ParseUint(a, 10, 64)
			st, _ := strconv.ParseUint(b, 10, 64)
			for _, p := range h.regions[id].Region.Peers {
				if p.StoreId == st {
					ops[id] = &kvpb.Operator{RegionId: id, Kind: kvpb.OperatorKind_TransferLeader, Peer: p}
				}
			}
		}
		c := h.clusterWith(busy, ops)
		var cooling string
		d.MaybeScanArgs(t, "cooling", &cooling)
		for _, s := range strings.Split(cooling, ",") {
			if id, err := strconv.ParseUint(s, 10, 64); err == nil {
				c.Cooling[id] = true
			}
		}
		var out []string
		for _, dec := range c.Schedule(c.Regions) {
			out = append(out, fmtOp(dec.Op, dec.MoveFrom))
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	case "run":
		max := 200
		d.MaybeScanArgs(t, "max", &max)
		rounds, ops := 0, 0
		for ; rounds < max; rounds++ {
			c := h.cluster(nil)
			decs := c.Schedule(c.Regions)
			if len(decs) == 0 {
				break
			}
			ops += len(decs)
			for _, dec := range decs {
				h.apply(dec)
			}
		}
		return fmt.Sprintf("rounds=%d operators=%d\n%s", rounds, ops, h.show())
	case "merge":
		cfg := MergeConfig{MaxSize: 100, MaxKeys: 10, MaxMergedSize: 300, MaxMergedKeys: 30, MaxRate: 50, MinAge: time.Hour}
		d.MaybeScanArgs(t, "max-size", &cfg.MaxSize)
		d.MaybeScanArgs(t, "max-keys", &cfg.MaxKeys)
		d.MaybeScanArgs(t, "max-merged-size", &cfg.MaxMergedSize)
		d.MaybeScanArgs(t, "max-merged-keys", &cfg.MaxMergedKeys)
		d.MaybeScanArgs(t, "max-rate", &cfg.MaxRate)
		var minAge, boundaries string
		d.MaybeScanArgs(t, "min-age", &minAge)
		if minAge != "" {
			cfg.MinAge, _ = time.ParseDuration(minAge)
		}
		d.MaybeScanArgs(t, "boundaries", &boundaries)
		if boundaries != "" {
			keys := strings.Split(boundaries, ",")
			cfg.Boundary = func(k []byte) bool { return slices.Contains(keys, string(k)) }
		}
		c := h.cluster(nil)
		var out []string
		for _, md := range MergeCheck(c, cfg, h.ages) {
			if md.Move != nil {
				out = append(out, fmt.Sprintf("r%d into r%d: move %s", md.Source, md.Target, fmtOp(md.Move.Op, md.Move.MoveFrom)))
				continue
			}
			out = append(out, fmt.Sprintf("r%d into r%d: merge (%s)", md.Source, md.Target, md.Reason))
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	case "show":
		return h.show()
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

// apply carries a decision out at once; a new learner is caught up.
func (h *schedHarness) apply(dec Decision) {
	r := h.regions[dec.Op.RegionId]
	op := dec.Op
	if op.Kind == kvpb.OperatorKind_AddLearner {
		h.nextID++
		op.Peer.Id = 10000 + h.nextID
	}
	r = ApplyOperator(r, op)
	if op.Kind == kvpb.OperatorKind_AddLearner {
		r.Progress = append(r.Progress, &kvpb.PeerProgress{PeerId: op.Peer.Id, Match: r.CommitIndex, Active: true})
	}
	h.regions[r.Region.Id] = r
	if dec.MoveFrom != 0 {
		h.moves[r.Region.Id] = dec.MoveFrom
	}
}

func (h *schedHarness) show() string {
	c := h.cluster(nil)
	var b strings.Builder
	for _, s := range c.sortedStores() {
		fmt.Fprintf(&b, "store %d: replicas=%d leaders=%d", s.ID, s.Replicas, s.Leaders)
		if s.Size > 0 {
			fmt.Fprintf(&b, " size=%d", s.Size)
		}
		if s.ReadRate > 0 || s.WriteRate > 0 {
			fmt.Fprintf(&b, " read=%.0f write=%.0f", s.ReadRate, s.WriteRate)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func fmtOp(op *kvpb.Operator, moveFrom uint64) string {
	s := fmt.Sprintf("r%d: %s", op.RegionId, op.Kind)
	if op.Peer != nil {
		if op.Peer.Id != 0 {
			s += fmt.Sprintf(" peer=%d", op.Peer.Id)
		}
		s += fmt.Sprintf(" store=%d", op.Peer.StoreId)
	}
	if moveFrom != 0 {
		s += fmt.Sprintf(" from=%d", moveFrom)
	}
	return s + " (" + op.Reason + ")"
}
