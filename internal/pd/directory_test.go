package pd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-db/strata/kvpb"
)

func dirRegion(id uint64, start, end string, version, confVer uint64) *kvpb.RegionStat {
	return &kvpb.RegionStat{Region: &kvpb.Region{Id: id, StartKey: []byte(start), EndKey: []byte(end),
		Epoch: &kvpb.RegionEpoch{Version: version, ConfVer: confVer}}}
}

func dirString(d *directory) string {
	var parts []string
	for _, e := range d.all() {
		parts = append(parts, fmt.Sprintf("r%d[%s,%s)v%dc%d", e.Region.Id, e.Region.StartKey, e.Region.EndKey,
			e.Region.Epoch.GetVersion(), e.Region.Epoch.GetConfVer()))
	}
	return strings.Join(parts, " ")
}

// TestDirectoryUpdate: reports of the same range replace the entry (the
// in-place path), older epochs are ignored, a split's left report drops
// the old range until the right one arrives, and a stale report of the
// parent after the split changes nothing.
func TestDirectoryUpdate(t *testing.T) {
	d := &directory{}
	steps := []struct {
		r    *kvpb.RegionStat
		want string
	}{
		{dirRegion(2, "", "m", 1, 1), "r2[,m)v1c1"},
		{dirRegion(3, "m", "", 1, 1), "r2[,m)v1c1 r3[m,)v1c1"},
		{dirRegion(3, "m", "", 1, 2), "r2[,m)v1c1 r3[m,)v1c2"},
		{dirRegion(3, "m", "", 1, 1), "r2[,m)v1c1 r3[m,)v1c2"}, // stale
		{dirRegion(2, "", "f", 2, 1), "r2[,f)v2c1 r3[m,)v1c2"}, // split: left first
		{dirRegion(2, "", "m", 1, 1), "r2[,f)v2c1 r3[m,)v1c2"}, // the parent's stale report
		{dirRegion(4, "f", "m", 2, 1), "r2[,f)v2c1 r4[f,m)v2c1 r3[m,)v1c2"},
		{dirRegion(4, "f", "m", 2, 3), "r2[,f)v2c1 r4[f,m)v2c3 r3[m,)v1c2"},
	}
	for i, s := range steps {
		d.update(s.r)
		if got := dirString(d); got != s.want {
			t.Fatalf("step %d: %s, want %s", i, got, s.want)
		}
	}
	// The leader of a report without one is kept.
	e := dirRegion(4, "f", "m", 2, 3)
	d.regions[1].Leader = &kvpb.Peer{Id: 41, StoreId: 1}
	d.update(e)
	if d.byID(4).Leader.GetId() != 41 {
		t.Fatalf("leader lost: %v", d.byID(4).Leader)
	}
}

// TestDirectoryIgnoresOlderTerm: of two reports of a region at the same
// epoch, the one from an older Raft term (a leader's report that arrives
// after its successor's) does not replace the newer one; a newer epoch
// always does.
func TestDirectoryIgnoresOlderTerm(t *testing.T) {
	d := &directory{}
	report := func(version, term, leader uint64) *kvpb.RegionStat {
		st := dirRegion(2, "", "m", version, 1)
		st.Term, st.Leader = term, &kvpb.Peer{Id: leader, StoreId: leader}
		return st
	}
	for i, s := range []struct {
		r          *kvpb.RegionStat
		wantLeader uint64
	}{
		{report(1, 5, 1), 1},
		{report(1, 6, 2), 2}, // the new leader
		{report(1, 5, 1), 2}, // the old leader's late report
		{report(2, 7, 3), 3}, // a newer epoch
	} {
		d.update(s.r)
		if got := d.byID(2).Leader.GetId(); got != s.wantLeader {
			t.Fatalf("step %d: leader %d, want %d", i, got, s.wantLeader)
		}
	}
}
