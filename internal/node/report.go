package node

import (
	"sync"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// Which regions a heartbeat reports. The store heartbeat goes to PD once a
// second and stays small: it carries a region's RegionStat only when the
// report differs from the one last sent for it (its descriptor, leader,
// term, Raft indexes or followers' progress, its approximate size or keys),
// when the region had traffic in this interval or the previous report had
// some (PD's rates then drop to zero), or when the last one went out
// regionRefresh ago. PD keeps an unreported region's last report, as TiKV's
// PD keeps the region heartbeats that come only on change or every minute.
// An idle store of thousands of regions sends almost none, and PD's
// leader does not run its checkers over them every second.
//
// PD asks for every region (StoreHeartbeatResponse.report_all_regions)
// when it holds no complete report from the store, after a PD leader
// change; the next heartbeat then carries them all.

// regionRefresh is how long an unchanged region's report stands.
var regionRefresh = time.Minute

// sentReport is the last report sent for a region.
type sentReport struct {
	stat *kvpb.RegionStat
	at   time.Time
}

// regionReports remembers what the store reported (guarded by its mutex:
// the heartbeat loop is its only user, tests call it directly).
type regionReports struct {
	mu   sync.Mutex
	last map[uint64]sentReport
	// all: the next heartbeat reports every region (none sent yet, or PD
	// asked).
	all bool
}

// reportReason says why a region is reported ("" for not), for tests.
func reportReason(prev sentReport, ok bool, cur *kvpb.RegionStat, now time.Time) string {
	switch {
	case !ok:
		return "new"
	case hasTraffic(cur):
		return "traffic"
	case hasTraffic(prev.stat):
		return "traffic ended"
	case now.Sub(prev.at) >= regionRefresh:
		return "refresh"
	}
	p := prev.stat
	if p == cur {
		return "" // a sleeping leader's report, reused (regionStat)
	}
	switch {
	case !sameRegion(p.Region, cur.Region):
		return "descriptor"
	case p.Leader.GetId() != cur.Leader.GetId() || p.Term != cur.Term:
		return "leader"
	case p.CommitIndex != cur.CommitIndex || p.AppliedIndex != cur.AppliedIndex:
		return "raft log"
	case !sameProgress(p.Progress, cur.Progress):
		return "progress"
	case p.ApproximateSize != cur.ApproximateSize || p.ApproximateKeys != cur.ApproximateKeys:
		return "size"
	}
	return ""
}

func hasTraffic(s *kvpb.RegionStat) bool {
	return s.ReadBytes != 0 || s.WrittenBytes != 0 || s.ReadKeys != 0 || s.WrittenKeys != 0 ||
		s.ReadQueries != 0 || s.WriteQueries != 0
}

func sameRegion(a, b *kvpb.Region) bool {
	if a == b {
		return true
	}
	if a.GetId() != b.GetId() || a.GetEpoch().GetVersion() != b.GetEpoch().GetVersion() ||
		a.GetEpoch().GetConfVer() != b.GetEpoch().GetConfVer() || len(a.GetPeers()) != len(b.GetPeers()) ||
		string(a.GetStartKey()) != string(b.GetStartKey()) || string(a.GetEndKey()) != string(b.GetEndKey()) {
		return false
	}
	for i, p := range a.Peers {
		q := b.Peers[i]
		if p.Id != q.Id || p.StoreId != q.StoreId || p.Role != q.Role {
			return false
		}
	}
	return true
}

func sameProgress(a, b []*kvpb.PeerProgress) bool {
	if len(a) != len(b) {
		return false
	}
	for i, p := range a {
		q := b[i]
		if p.PeerId != q.PeerId || p.Match != q.Match || p.Active != q.Active {
			return false
		}
	}
	return true
}

// pick returns the reports of stats (every region the store leads) this
// heartbeat carries, and whether that is all of them.
func (rr *regionReports) pick(stats []*kvpb.RegionStat, now time.Time) (out []*kvpb.RegionStat, complete bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.all || rr.last == nil {
		return stats, true
	}
	for _, s := range stats {
		prev, ok := rr.last[s.Region.Id]
		if reportReason(prev, ok, s, now) != "" {
			out = append(out, s)
		} else if prev.stat != s {
			// The same report: keep this one, so that the next
			// comparison with a sleeping leader's reused report is
			// one of pointers.
			prev.stat = s
			rr.last[s.Region.Id] = prev
		}
	}
	return out, len(out) == len(stats)
}

// sent records what a heartbeat PD answered carried: sent, out of the
// regions the store leads (led). Regions no longer led are forgotten, so a
// leadership that comes back is reported again.
func (rr *regionReports) sent(sent []*kvpb.RegionStat, led []*kvpb.RegionStat, now time.Time) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.last == nil {
		rr.last = make(map[uint64]sentReport, len(sent))
	}
	rr.all = false
	for _, s := range sent {
		rr.last[s.Region.Id] = sentReport{stat: s, at: now}
	}
	present := 0
	for _, s := range led {
		if _, ok := rr.last[s.Region.Id]; ok {
			present++
		}
	}
	if len(rr.last) > present {
		ids := make(map[uint64]bool, len(led))
		for _, s := range led {
			ids[s.Region.Id] = true
		}
		for id := range rr.last {
			if !ids[id] {
				delete(rr.last, id)
			}
		}
	}
}

// reportAll makes the next heartbeat report every region the store leads.
func (rr *regionReports) reportAll() {
	rr.mu.Lock()
	rr.all = true
	rr.mu.Unlock()
}
