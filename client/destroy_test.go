package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/strata-db/strata/kvpb"
)

func (fc *fakeCluster) keyNames() string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []string
	for k := range fc.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// DestroyRange sends one request per region the range overlaps, each
// clamped to its region, and follows region errors: a split the client's
// cache has not seen (EpochNotMatch) and a leader change (NotLeader) make
// it re-route the rest of the range, so every key in range goes, committed
// or locked, and nothing outside it.
func TestDestroyRangeAcrossRegions(t *testing.T) {
	ctx := context.Background()
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "c=1", "l=1", "m=1", "o=1", "r=1", "w=1", "x=1", "z=1")
	fc.placeLock("n", "n", 5, 3000, "locked")
	// The client now caches [ , m) and [m, ); the store splits [m, ) at r
	// behind its back and moves [ , m)'s leadership to store 2.
	fc.split("r")
	fc.setLeader("a", 2)
	var mu sync.Mutex
	var sent []string
	fc.intercept = func(store uint64, method string, req any) (any, error) {
		if r, ok := req.(*kvpb.DestroyRangeRequest); ok {
			mu.Lock()
			sent = append(sent, fmt.Sprintf("region %d store %d [%s, %s)", r.Context.RegionId, store, r.StartKey, r.EndKey))
			mu.Unlock()
		}
		return nil, nil
	}
	if err := c.DestroyRange(ctx, []byte("c"), []byte("x"), 42); err != nil {
		t.Fatal(err)
	}
	if got := fc.keyNames(); got != "a x z" {
		t.Fatalf("keys after destroying [c, x): %s", got)
	}
	// The region of "r" is the one split off (id 1001).
	want := "region 10 store 1 [c, m) | region 10 store 2 [c, m) | region 11 store 1 [m, x) | region 11 store 1 [m, r) | region 1001 store 1 [r, x)"
	if got := strings.Join(sent, " | "); got != want {
		t.Fatalf("requests:\n%s\nwant\n%s", got, want)
	}
	// Again: nothing left to delete, and it still succeeds.
	if err := c.DestroyRange(ctx, []byte("c"), []byte("x"), 42); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []struct {
		start, end string
		sp         uint64
	}{{"c", "", 42}, {"x", "c", 42}, {"c", "c", 42}, {"c", "x", 0}} {
		if err := c.DestroyRange(ctx, []byte(bad.start), []byte(bad.end), bad.sp); err == nil {
			t.Errorf("DestroyRange(%q, %q, %d) was accepted", bad.start, bad.end, bad.sp)
		}
	}
	if got := fc.keyNames(); got != "a x z" {
		t.Fatalf("refused requests changed the keys: %s", got)
	}
}
