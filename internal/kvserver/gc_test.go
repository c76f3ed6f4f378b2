package kvserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/kvpb"
)

// writeRecords counts the engine's write records of key.
func writeRecords(t *testing.T, s *Server, key string) int {
	t.Helper()
	span := mvcc.EngineSpans([]byte(key), []byte(key+"\x00"))[2] // data, lock, write
	it, err := s.engine.NewIter(&pebble.IterOptions{LowerBound: span[0], UpperBound: span[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	return n
}

func mustGet(t *testing.T, s *Server, key string, ts uint64) *kvpb.GetResponse {
	t.Helper()
	g, err := s.KvGet(context.Background(), &kvpb.GetRequest{Context: rctx(), Key: []byte(key), Version: ts})
	if err != nil || g.RegionError != nil {
		t.Fatalf("get %s@%d: %v %+v", key, ts, err, g)
	}
	return g
}

// One key written 1000 times: GC at a safe point after the writes leaves
// one version; reads at and after the safe point are unchanged, reads below
// it fail with the GC-life-time error (also after a restart, which replays
// the GC from the Raft log), and so does a prewrite of a transaction that
// started at or below it.
func TestGCHotKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startServer(t, dir, true)
	var lastCommit uint64
	for i := 1; i <= 1000; i++ {
		pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: uint64(i * 10), PrimaryLock: []byte("hot"), TryOnePc: true,
			Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("hot"), Value: fmt.Appendf(nil, "v%d", i)}}})
		if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
			t.Fatalf("write %d: %v %+v", i, err, pw)
		}
		lastCommit = pw.OnePcCommitTs
	}
	// A second key with a value too large to inline, overwritten once.
	for i, v := range []string{strings.Repeat("x", 5000), strings.Repeat("y", 5000)} {
		pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: lastCommit + 1 + uint64(i)*2, PrimaryLock: []byte("big"), TryOnePc: true,
			Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("big"), Value: []byte(v)}}})
		if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
			t.Fatalf("write big: %v %+v", err, pw)
		}
		lastCommit = pw.OnePcCommitTs
	}
	// A one-phase commit is acknowledged before it is applied; a read at
	// its commit ts waits for the apply, and then the engine holds it.
	mustGet(t, s, "big", lastCommit)
	if n := writeRecords(t, s, "hot"); n != 1000 {
		t.Fatalf("%d write records before GC", n)
	}
	safePoint := lastCommit + 5
	before := mustGet(t, s, "hot", safePoint)
	if string(before.Value) != "v1000" {
		t.Fatalf("read before GC: %+v", before)
	}
	st, err := s.GC(ctx, 2, safePoint, 100)
	if err != nil {
		t.Fatal(err)
	}
	if st.Versions != 1000 || st.Values != 1 || st.Chunks < 10 {
		t.Fatalf("GC stats %+v: want 999+1 versions, 1 value, in chunks of at most 100", st)
	}

	check := func(s *Server) {
		t.Helper()
		if n := writeRecords(t, s, "hot"); n != 1 {
			t.Fatalf("%d write records after GC, want 1", n)
		}
		for _, ts := range []uint64{safePoint, safePoint + 100} {
			if g := mustGet(t, s, "hot", ts); g.Error != nil || string(g.Value) != "v1000" {
				t.Fatalf("read at %d after GC: %+v", ts, g)
			}
			if g := mustGet(t, s, "big", ts); g.Error != nil || string(g.Value) != strings.Repeat("y", 5000) {
				t.Fatalf("read of big at %d after GC: %v", ts, g.Error)
			}
		}
		g := mustGet(t, s, "hot", safePoint-1)
		if g.Error == nil || !strings.Contains(g.Error.Abort, "GC life time is shorter than transaction duration") {
			t.Fatalf("read below the safe point: %+v", g)
		}
		bg, err := s.KvBatchGet(ctx, &kvpb.BatchGetRequest{Context: rctx(), Keys: [][]byte{[]byte("hot")}, Version: 500})
		if err != nil || bg.Error == nil || len(bg.Pairs) != 0 {
			t.Fatalf("batch get below the safe point: %v %+v", err, bg)
		}
		sc, err := s.KvScan(ctx, &kvpb.ScanRequest{Context: rctx(), Version: 500})
		if err != nil || sc.Error == nil || len(sc.Pairs) != 0 {
			t.Fatalf("scan below the safe point: %v %+v", err, sc)
		}
		sc, err = s.KvScan(ctx, &kvpb.ScanRequest{Context: rctx(), Version: safePoint})
		if err != nil || sc.Error != nil || len(sc.Pairs) != 2 {
			t.Fatalf("scan at the safe point: %v %+v", err, sc)
		}
		pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: safePoint, PrimaryLock: []byte("hot"),
			Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("hot"), Value: []byte("late")}}})
		if err != nil || len(pw.Errors) != 1 || pw.Errors[0].Abort == "" {
			t.Fatalf("prewrite at the safe point: %v %+v", err, pw)
		}
	}
	check(s)
	if _, err := s.GC(ctx, 2, safePoint-1, 100); err == nil {
		t.Fatal("GC accepted a safe point below the store's")
	}
	// Restart without a flush: the KV engine (no WAL) comes back as of
	// its last flush and the GC chunks are replayed from the Raft log.
	stop()
	s, stop = startServer(t, dir, false)
	defer stop()
	check(s)
	if g := mustGet(t, s, "hot", safePoint+1000); string(g.Value) != "v1000" {
		t.Fatalf("read after restart: %+v", g)
	}
}

// A region with nothing to collect proposes nothing: its Raft log does not
// grow (an idle region's GC pass neither writes nor wakes it), and reads
// below the safe point still fail.
func TestGCWithoutGarbageProposesNothing(t *testing.T) {
	ctx := context.Background()
	s, stop := startServer(t, t.TempDir(), true)
	defer stop()
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 10, PrimaryLock: []byte("k"), TryOnePc: true,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k"), Value: []byte("v")}}})
	if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
		t.Fatalf("write: %v %+v", err, pw)
	}
	safePoint := pw.OnePcCommitTs + 5
	mustGet(t, s, "k", safePoint) // applied
	p, _ := s.store.Peer(2)
	before := p.Status().Commit
	st, err := s.GC(ctx, 2, safePoint, 100)
	if err != nil {
		t.Fatal(err)
	}
	if st != (GCStats{}) {
		t.Fatalf("GC of a region without garbage: %+v", st)
	}
	if after := p.Status().Commit; after != before {
		t.Fatalf("GC without garbage grew the Raft log from %d to %d", before, after)
	}
	if g := mustGet(t, s, "k", safePoint); g.Error != nil || string(g.Value) != "v" {
		t.Fatalf("read at the safe point: %+v", g)
	}
	if g := mustGet(t, s, "k", safePoint-1); g.Error == nil || !strings.Contains(g.Error.Abort, "GC life time is shorter than transaction duration") {
		t.Fatalf("read below the safe point: %+v", g)
	}
}
