package node

import (
	"testing"

	"github.com/strata-db/strata/kvpb"
)

// mergedAway destroys a replica of a region PD no longer knows only when
// PD's region at its start key is another, newer one and no replica on the
// store may still take it in by applying a merge.
func TestMergedAway(t *testing.T) {
	region := func(id, version uint64, start, end string) *kvpb.Region {
		return &kvpb.Region{Id: id, StartKey: []byte(start), EndKey: []byte(end), Epoch: &kvpb.RegionEpoch{Version: version, ConfVer: 1}}
	}
	// The orphan: region 2 [m, t) at version 3, frozen by a merge into
	// region 1 [a, m).
	local := region(2, 3, "m", "t")
	merged := region(1, 4, "a", "t")
	pd := map[uint64]*kvpb.Region{1: merged, 3: region(3, 2, "t", "")}
	lookup := func(id uint64) *kvpb.Region { return pd[id] }
	for _, tc := range []struct {
		name     string
		covering *kvpb.Region
		replicas []*kvpb.Region
		want     bool
	}{
		{"the target's replica here was removed", merged, nil, true},
		{"an up-to-date right neighbour here", merged, []*kvpb.Region{region(3, 2, "t", "")}, true},
		{"an unrelated replica here", merged, []*kvpb.Region{region(9, 7, "x", "z")}, true},
		{"the target's replica here is behind its merge", merged, []*kvpb.Region{region(1, 2, "a", "m")}, false},
		{"a replica of the covering region here", merged, []*kvpb.Region{region(1, 4, "a", "t")}, false},
		{"a neighbour here behind PD's descriptor of it", merged, []*kvpb.Region{region(3, 1, "t", "")}, false},
		{"a neighbour PD does not know", merged, []*kvpb.Region{region(8, 2, "t", "")}, false},
		{"PD's region at the start key is the replica's own", region(2, 5, "m", "t"), nil, false},
		{"PD's region at the start key is older (PD still learning)", region(1, 3, "a", "t"), nil, false},
		{"no region at the start key", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergedAway(local, tc.covering, tc.replicas, lookup); got != tc.want {
				t.Fatalf("mergedAway = %v, want %v", got, tc.want)
			}
		})
	}
}
