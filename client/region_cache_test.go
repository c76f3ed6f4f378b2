package client

import (
	"context"
	"testing"

	"github.com/strata-db/strata/kvpb"
)

func mustLocate(t *testing.T, c *regionCache, key string) *regionEntry {
	t.Helper()
	e, err := c.locate(context.Background(), []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestRegionCacheLoadsOnceThenServesFromMemory(t *testing.T) {
	fc := newFakeCluster("g", "p")
	c := newRegionCache(fakePD{fc})
	for _, k := range []string{"a", "b", "", "f"} {
		if e := mustLocate(t, c, k); e.region.Id != 10 {
			t.Fatalf("key %q in region %d, want 10", k, e.region.Id)
		}
	}
	if e := mustLocate(t, c, "g"); e.region.Id != 11 {
		t.Fatalf("key g in region %d, want 11", e.region.Id)
	}
	if e := mustLocate(t, c, "zzz"); e.region.Id != 12 {
		t.Fatalf("key zzz in region %d, want 12", e.region.Id)
	}
	if fc.pdCalls != 3 {
		t.Fatalf("PD called %d times, want 3 (one per region)", fc.pdCalls)
	}
}

func TestRegionCacheLookupDoesNotAllocate(t *testing.T) {
	fc := newFakeCluster("g", "p")
	c := newRegionCache(fakePD{fc})
	mustLocate(t, c, "h")
	key := []byte("hello")
	allocs := testing.AllocsPerRun(100, func() {
		if c.lookup(key) == nil {
			t.Fatal("miss")
		}
	})
	if allocs != 0 {
		t.Fatalf("cache hit allocates %.1f times", allocs)
	}
}

func TestRegionCacheNotLeaderWithHintMovesLeader(t *testing.T) {
	fc := newFakeCluster()
	c := newRegionCache(fakePD{fc})
	e := mustLocate(t, c, "k")
	hint := peerOnStore(e.region, 2)
	c.onRegionError(e, &kvpb.RegionError{NotLeader: &kvpb.NotLeader{RegionId: e.region.Id, Leader: hint}})
	got := mustLocate(t, c, "k")
	if got.storeID() != 2 || got.rpcCtx.Peer.StoreId != 2 {
		t.Fatalf("leader store = %d, want 2", got.storeID())
	}
	if fc.pdCalls != 1 {
		t.Fatalf("PD called %d times; the hint should have been enough", fc.pdCalls)
	}
}

func TestRegionCacheNotLeaderWithoutHintAsksPDAgain(t *testing.T) {
	fc := newFakeCluster()
	c := newRegionCache(fakePD{fc})
	e := mustLocate(t, c, "k")
	c.onRegionError(e, &kvpb.RegionError{NotLeader: &kvpb.NotLeader{RegionId: e.region.Id}})
	fc.setLeader("k", 3)
	if got := mustLocate(t, c, "k"); got.storeID() != 3 {
		t.Fatalf("leader store = %d, want 3 from PD", got.storeID())
	}
	if fc.pdCalls != 2 {
		t.Fatalf("PD called %d times, want 2", fc.pdCalls)
	}
}

func TestRegionCacheEpochNotMatchInstallsCurrentRegions(t *testing.T) {
	fc := newFakeCluster()
	c := newRegionCache(fakePD{fc})
	e := mustLocate(t, c, "k")
	fc.split("m")
	var cur []*kvpb.Region
	for _, fr := range fc.regions {
		cur = append(cur, fr.region)
	}
	c.onRegionError(e, &kvpb.RegionError{EpochNotMatch: &kvpb.EpochNotMatch{CurrentRegions: cur}})
	left, right := mustLocate(t, c, "k"), mustLocate(t, c, "x")
	if string(left.endKey()) != "m" || string(right.startKey()) != "m" || left.region.Id == right.region.Id {
		t.Fatalf("after split: left=[%q,%q) right=[%q,%q)", left.startKey(), left.endKey(), right.startKey(), right.endKey())
	}
	if left.storeID() != 1 || right.storeID() != 1 {
		t.Fatal("the old leader's store should be kept for the new regions")
	}
	if fc.pdCalls != 1 {
		t.Fatalf("PD called %d times; current_regions should have been enough", fc.pdCalls)
	}
}

func TestRegionCacheKeyNotInRegionAndRegionNotFoundDropEntry(t *testing.T) {
	for _, re := range []*kvpb.RegionError{
		{KeyNotInRegion: &kvpb.KeyNotInRegion{Key: []byte("k")}},
		{RegionNotFound: &kvpb.RegionNotFound{RegionId: 10}},
	} {
		fc := newFakeCluster()
		c := newRegionCache(fakePD{fc})
		e := mustLocate(t, c, "k")
		kind, _ := c.onRegionError(e, re)
		if kind != boRegionMiss {
			t.Fatalf("backoff kind %d, want region miss", kind)
		}
		if c.lookup([]byte("k")) != nil {
			t.Fatalf("%v: entry still cached", re)
		}
	}
}

func TestRegionCacheServerBusyKeepsEntryAndHonoursHint(t *testing.T) {
	fc := newFakeCluster()
	c := newRegionCache(fakePD{fc})
	e := mustLocate(t, c, "k")
	kind, hint := c.onRegionError(e, &kvpb.RegionError{ServerBusy: &kvpb.ServerBusy{BackoffMs: 40}})
	if kind != boServerBusy || hint.Milliseconds() != 40 {
		t.Fatalf("kind=%d hint=%v", kind, hint)
	}
	if c.lookup([]byte("k")) != e {
		t.Fatal("server busy must not drop the entry")
	}
}

func TestRegionCacheStaleInvalidateDoesNotDropNewerEntry(t *testing.T) {
	fc := newFakeCluster()
	c := newRegionCache(fakePD{fc})
	old := mustLocate(t, c, "k")
	c.onRegionError(old, &kvpb.RegionError{NotLeader: &kvpb.NotLeader{Leader: peerOnStore(old.region, 2)}})
	c.invalidate(old) // a late error for the old entry
	if e := c.lookup([]byte("k")); e == nil || e.storeID() != 2 {
		t.Fatal("invalidating a replaced entry dropped its replacement")
	}
}

func TestRegionCacheLocateEndKey(t *testing.T) {
	fc := newFakeCluster("g", "p")
	c := newRegionCache(fakePD{fc})
	ctx := context.Background()
	cases := []struct {
		key  string
		want uint64
	}{
		{"", 12},  // +infinity: the last region
		{"p", 11}, // a start key: the region ending there
		{"g", 10},
		{"h", 11}, // inside a region
		{"q", 12},
	}
	for _, tc := range cases {
		e, err := c.locateEndKey(ctx, nil, []byte(tc.key))
		if err != nil {
			t.Fatal(err)
		}
		if e.region.Id != tc.want {
			t.Fatalf("locateEndKey(%q) = region %d, want %d", tc.key, e.region.Id, tc.want)
		}
	}
}

func TestRegionCacheInsertEvictsOverlaps(t *testing.T) {
	fc := newFakeCluster("g", "p")
	c := newRegionCache(fakePD{fc})
	mustLocate(t, c, "a")
	mustLocate(t, c, "h")
	mustLocate(t, c, "q")
	merged := &kvpb.Region{Id: 99, StartKey: []byte("c"), EndKey: []byte("r"), Epoch: &kvpb.RegionEpoch{Version: 9},
		Peers: []*kvpb.Peer{{Id: 1, StoreId: 1}}}
	c.insert(newRegionEntry(merged, nil))
	if c.lookup([]byte("a")) != nil || c.lookup([]byte("s")) != nil {
		t.Fatal("overlapping regions were kept")
	}
	if e := c.lookup([]byte("h")); e == nil || e.region.Id != 99 {
		t.Fatal("new region not found")
	}
	if c.tree.Len() != 1 {
		t.Fatalf("cache holds %d regions, want 1", c.tree.Len())
	}
}

func TestGroupSortedKeysByRegion(t *testing.T) {
	fc := newFakeCluster("g", "p")
	c := newRegionCache(fakePD{fc})
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("g"), []byte("h"), []byte("z")}
	groups, err := c.groupSortedKeys(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int{{0, 2}, {2, 4}, {4, 5}}
	if len(groups) != len(want) {
		t.Fatalf("%d groups, want %d", len(groups), len(want))
	}
	for i, g := range groups {
		if g.lo != want[i][0] || g.hi != want[i][1] {
			t.Fatalf("group %d = [%d,%d), want %v", i, g.lo, g.hi, want[i])
		}
	}
}
