package pd

import (
	"context"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

func openPD(t *testing.T, dir string, bootstrap bool) (*Server, func()) {
	t.Helper()
	return openPDWith(t, dir, bootstrap, Config{})
}

func openPDWith(t *testing.T, dir string, bootstrap bool, cfg Config) (*Server, func()) {
	t.Helper()
	eng, err := engine.OpenEngines(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bootstrap {
		r := &kvpb.Region{Id: SystemRegionID, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}, Peers: []*kvpb.Peer{{Id: 1, StoreId: 1}}}
		if err := raftstore.BootstrapRegion(eng, r); err != nil {
			t.Fatal(err)
		}
	}
	store, err := raftstore.Open(eng, raftstore.Config{StoreID: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := store.Peer(SystemRegionID)
	for deadline := time.Now().Add(10 * time.Second); p.CheckRequest(nil) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
	}
	s := New(store, cfg)
	for deadline := time.Now().Add(10 * time.Second); !s.IsLeader(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("PD did not take the lead")
		}
	}
	return s, func() { s.Close(); store.Close(); eng.Close() }
}

// The GC safe point only moves forward, also across a restart (it is
// replayed from the system region's log, the KV engine having no WAL).
func TestGCSafePointNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := openPD(t, dir, true)
	if sp, _ := s.SafePoint(ctx); sp != 0 {
		t.Fatalf("fresh safe point %d", sp)
	}
	for _, c := range []struct{ set, want uint64 }{{100, 100}, {50, 100}, {100, 100}, {200, 200}} {
		got, err := s.UpdateGCSafePoint(ctx, c.set)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Fatalf("UpdateGCSafePoint(%d) = %d, want %d", c.set, got, c.want)
		}
	}
	stop()
	s, stop = openPD(t, dir, false)
	defer stop()
	if sp, _ := s.SafePoint(ctx); sp != 200 {
		t.Fatalf("safe point after restart %d, want 200", sp)
	}
	if got, _ := s.UpdateGCSafePoint(ctx, 150); got != 200 {
		t.Fatalf("safe point went back to %d", got)
	}
}
