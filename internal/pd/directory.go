package pd

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/strata-db/strata/kvpb"
	"google.golang.org/protobuf/proto"
)

// directory is PD's map of regions, ordered by start key, rebuilt from
// heartbeats. An update at a newer epoch replaces every entry it
// overlaps (split regions, and regions that no longer exist, drop out);
// an update at an older epoch than what the directory holds is ignored.
// The system region is kept apart: it overlaps the data regions' key
// range but holds no user keys, and clients never route to it.
type directory struct {
	mu      sync.RWMutex
	regions []*kvpb.RegionStat // sorted by start key, non-overlapping
	system  *kvpb.RegionStat
}

func epochOlder(a, b *kvpb.RegionEpoch) bool {
	return a.GetVersion() < b.GetVersion() || (a.GetVersion() == b.GetVersion() && a.GetConfVer() < b.GetConfVer())
}

// staleReport: report st of a region is older than the directory's entry
// e for it: an older epoch, or the same epoch from an older Raft term (a
// leader's report that left before its successor's arrived after it).
// Leaders report a region only when its report changed (node/report.go),
// so a stale report would otherwise stand until the next change.
func staleReport(st, e *kvpb.RegionStat) bool {
	r, o := st.Region.Epoch, e.Region.Epoch
	if epochOlder(r, o) {
		return true
	}
	return r.GetVersion() == o.GetVersion() && r.GetConfVer() == o.GetConfVer() && st.Term < e.Term
}

func overlaps(a, b *kvpb.Region) bool {
	return (len(a.EndKey) == 0 || bytes.Compare(b.StartKey, a.EndKey) < 0) &&
		(len(b.EndKey) == 0 || bytes.Compare(a.StartKey, b.EndKey) < 0)
}

// update records what a region's leader reported.
func (d *directory) update(st *kvpb.RegionStat) {
	r := st.Region
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.Id == SystemRegionID {
		if d.system == nil || !epochOlder(r.Epoch, d.system.Region.Epoch) {
			d.system = st
		}
		return
	}
	// The usual report: the region the directory holds for the same
	// range. Entries do not overlap, so it is the only one the report
	// overlaps; it is replaced in place (a scan and a sort per report
	// made the heartbeats of thousands of regions cost O(n^2 log n)).
	i := sort.Search(len(d.regions), func(i int) bool { return bytes.Compare(d.regions[i].Region.StartKey, r.StartKey) >= 0 })
	if i < len(d.regions) {
		if e := d.regions[i]; e.Region.Id == r.Id && bytes.Equal(e.Region.StartKey, r.StartKey) &&
			bytes.Equal(e.Region.EndKey, r.EndKey) {
			if staleReport(st, e) {
				return
			}
			if st.Leader == nil {
				st.Leader = e.Leader
			}
			d.regions[i] = st
			return
		}
	}
	keep := d.regions[:0:0]
	for _, e := range d.regions {
		if !overlaps(e.Region, r) {
			keep = append(keep, e)
			continue
		}
		if e.Region.Id == r.Id && staleReport(st, e) {
			return
		}
		if e.Region.Id != r.Id && e.Region.Epoch.GetVersion() > r.Epoch.GetVersion() {
			// A newer region (split off later) covers part of this
			// report's range: the report is stale.
			return
		}
	}
	if st.Leader == nil {
		for _, e := range d.regions {
			if e.Region.Id == r.Id {
				st.Leader = e.Leader
			}
		}
	}
	keep = append(keep, st)
	sort.Slice(keep, func(i, j int) bool { return bytes.Compare(keep[i].Region.StartKey, keep[j].Region.StartKey) < 0 })
	d.regions = keep
}

// sameAsKnown reports whether st says nothing the directory's entry for its
// region does not: the same descriptor, leader, term, indexes, progress,
// size and traffic (only the report's interval may differ).
func (d *directory) sameAsKnown(st *kvpb.RegionStat) bool {
	var e *kvpb.RegionStat
	if st.Region.GetId() == SystemRegionID {
		d.mu.RLock()
		e = d.system
		d.mu.RUnlock()
	} else {
		e = d.byKey(st.Region.GetStartKey())
	}
	if e == nil || e.Region.GetId() != st.Region.GetId() {
		return false
	}
	if e.Leader.GetId() != st.Leader.GetId() || e.Term != st.Term || e.CommitIndex != st.CommitIndex ||
		e.AppliedIndex != st.AppliedIndex || e.ApproximateKeys != st.ApproximateKeys || e.ApproximateSize != st.ApproximateSize ||
		e.ReadBytes != st.ReadBytes || e.WrittenBytes != st.WrittenBytes || e.ReadKeys != st.ReadKeys ||
		e.WrittenKeys != st.WrittenKeys || e.ReadQueries != st.ReadQueries || e.WriteQueries != st.WriteQueries ||
		len(e.Progress) != len(st.Progress) || !proto.Equal(e.Region, st.Region) {
		return false
	}
	for i := range e.Progress {
		if !proto.Equal(e.Progress[i], st.Progress[i]) {
			return false
		}
	}
	return true
}

func (d *directory) byKey(key []byte) *kvpb.RegionStat {
	d.mu.RLock()
	defer d.mu.RUnlock()
	i := sort.Search(len(d.regions), func(i int) bool {
		return bytes.Compare(d.regions[i].Region.StartKey, key) > 0
	}) - 1
	if i >= 0 {
		e := d.regions[i]
		if len(e.Region.EndKey) == 0 || bytes.Compare(key, e.Region.EndKey) < 0 {
			return e
		}
	}
	return nil
}

func (d *directory) byID(id uint64) *kvpb.RegionStat {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if id == SystemRegionID {
		return d.system
	}
	for _, e := range d.regions {
		if e.Region.Id == id {
			return e
		}
	}
	return nil
}

// all returns every region, the system region first.
func (d *directory) all() []*kvpb.RegionStat {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]*kvpb.RegionStat, 0, len(d.regions)+1)
	if d.system != nil {
		out = append(out, d.system)
	}
	return append(out, d.regions...)
}

// GetRegion implements kvpb.PDServer.
func (s *Server) GetRegion(ctx context.Context, req *kvpb.GetRegionRequest) (*kvpb.GetRegionResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.GetRegionResponse, error) {
			return c.GetRegion(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.GetRegionResponse{Error: pdErr(err)}, nil
	}
	if e := st.dir.byKey(req.Key); e != nil {
		return &kvpb.GetRegionResponse{Region: e.Region, Leader: e.Leader}, nil
	}
	return &kvpb.GetRegionResponse{Error: &kvpb.PDError{Message: fmt.Sprintf("no region for key %q", req.Key)}}, nil
}

// GetRegionByID implements kvpb.PDServer.
func (s *Server) GetRegionByID(ctx context.Context, req *kvpb.GetRegionByIDRequest) (*kvpb.GetRegionResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.GetRegionResponse, error) {
			return c.GetRegionByID(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.GetRegionResponse{Error: pdErr(err)}, nil
	}
	if e := st.dir.byID(req.RegionId); e != nil {
		return &kvpb.GetRegionResponse{Region: e.Region, Leader: e.Leader}, nil
	}
	return &kvpb.GetRegionResponse{Error: &kvpb.PDError{Message: fmt.Sprintf("region %d not found", req.RegionId)}}, nil
}

// ScanRegions implements kvpb.PDServer.
func (s *Server) ScanRegions(ctx context.Context, req *kvpb.ScanRegionsRequest) (*kvpb.ScanRegionsResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.ScanRegionsResponse, error) {
			return c.ScanRegions(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.ScanRegionsResponse{Error: pdErr(err)}, nil
	}
	st.dir.mu.RLock()
	defer st.dir.mu.RUnlock()
	resp := &kvpb.ScanRegionsResponse{}
	for _, e := range st.dir.regions {
		if len(e.Region.EndKey) > 0 && bytes.Compare(e.Region.EndKey, req.StartKey) <= 0 {
			continue
		}
		if len(req.EndKey) > 0 && bytes.Compare(e.Region.StartKey, req.EndKey) >= 0 {
			break
		}
		resp.Regions = append(resp.Regions, e.Region)
		leader := e.Leader
		if leader == nil {
			leader = &kvpb.Peer{} // unknown; a repeated field has no nil element
		}
		resp.Leaders = append(resp.Leaders, leader)
		if req.Limit > 0 && len(resp.Regions) >= int(req.Limit) {
			break
		}
	}
	return resp, nil
}
