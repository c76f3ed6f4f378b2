package kvserver

import (
	"context"
	"strings"
	"testing"

	"github.com/strata-db/strata/kvpb"
)

// KvImport writes committed versions that reads at and above their
// version see and reads below do not, under newer commits and over a
// cached "no such key"; a transaction that started below an imported
// version conflicts with it; a large value goes to the data family. It
// all holds after a restart that replays the Raft log. Unsorted or
// repeated pairs, a version at or below the GC safe point and a stale
// epoch are refused and write nothing.
func TestImport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startServer(t, dir, true)
	newer := onePC(t, s, "k/b", "b-new", 600)
	if g := mustGet(t, s, "k/a", 1000); !g.NotFound { // caches the absence
		t.Fatalf("k/a before the import: %+v", g)
	}
	big := strings.Repeat("z", 5000)
	pairs := []*kvpb.ImportPair{
		{Key: []byte("k/a"), Value: []byte("a-imported"), Version: 500},
		{Key: []byte("k/b"), Value: []byte("b-imported"), Version: 500},
		{Key: []byte("k/c"), Value: []byte(big), Version: 520},
	}
	s.locks.RaiseGCSafePoint(100)
	for _, bad := range []*kvpb.ImportRequest{
		{Context: rctx(), Pairs: []*kvpb.ImportPair{pairs[1], pairs[0]}},
		{Context: rctx(), Pairs: []*kvpb.ImportPair{pairs[0], pairs[0]}},
		{Context: rctx(), Pairs: []*kvpb.ImportPair{pairs[0], {Key: []byte("k/z"), Value: []byte("v"), Version: 100}}},
		{Context: &kvpb.Context{RegionId: 2, RegionEpoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 7}}, Pairs: pairs},
	} {
		resp, err := s.KvImport(ctx, bad)
		if err != nil || (resp.RegionError == nil && resp.Error == "") {
			t.Fatalf("import %v was not refused: %v %+v", bad.Pairs, err, resp)
		}
	}
	if n := engineRecords(t, s, "k/a", "k/a\x00"); n != 0 {
		t.Fatalf("a refused import wrote %d records", n)
	}
	resp, err := s.KvImport(ctx, &kvpb.ImportRequest{Context: rctx(), Pairs: pairs})
	if err != nil || resp.RegionError != nil || resp.Error != "" {
		t.Fatalf("import: %v %+v", err, resp)
	}

	check := func(s *Server) {
		t.Helper()
		for _, c := range []struct {
			key  string
			ts   uint64
			want string // "" for not found
		}{
			{"k/a", 499, ""}, {"k/a", 500, "a-imported"}, {"k/a", 1000, "a-imported"},
			{"k/b", 550, "b-imported"}, {"k/b", newer, "b-new"}, {"k/b", 1000, "b-new"},
			{"k/c", 519, ""}, {"k/c", 1000, big},
		} {
			g := mustGet(t, s, c.key, c.ts)
			if g.Error != nil || g.NotFound != (c.want == "") || string(g.Value) != c.want {
				t.Fatalf("get %s@%d: %+v, want %.20q", c.key, c.ts, g, c.want)
			}
		}
		// A transaction that started below the imported version must not
		// commit over it unseen.
		pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 450, PrimaryLock: []byte("k/a"), LockTtl: 3000,
			Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k/a"), Value: []byte("late")}}})
		if err != nil || pw.RegionError != nil || len(pw.Errors) != 1 || pw.Errors[0].Conflict == nil {
			t.Fatalf("prewrite below the imported version: %v %+v", err, pw)
		}
	}
	check(s)
	// Again: a retried import writes the same records.
	if resp, err := s.KvImport(ctx, &kvpb.ImportRequest{Context: rctx(), Pairs: pairs}); err != nil || resp.Error != "" {
		t.Fatalf("import again: %v %+v", err, resp)
	}
	check(s)
	stop()
	s, stop = startServer(t, dir, false)
	defer stop()
	check(s)
}
