package kvserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/kvpb"
)

// engineRecords counts the engine records (data, lock and write families)
// of the user keys in [start, end).
func engineRecords(t *testing.T, s *Server, start, end string) int {
	t.Helper()
	n := 0
	for _, span := range mvcc.EngineSpans([]byte(start), []byte(end)) {
		it, err := s.engine.NewIter(&pebble.IterOptions{LowerBound: span[0], UpperBound: span[1]})
		if err != nil {
			t.Fatal(err)
		}
		for valid := it.First(); valid; valid = it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func onePC(t *testing.T, s *Server, key, value string, startTS uint64) uint64 {
	t.Helper()
	pw, err := s.KvPrewrite(context.Background(), &kvpb.PrewriteRequest{Context: rctx(), StartVersion: startTS, PrimaryLock: []byte(key), TryOnePc: true,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte(value)}}})
	if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
		t.Fatalf("write %s: %v %+v", key, err, pw)
	}
	return pw.OnePcCommitTs
}

func prewrite(t *testing.T, s *Server, key, value string, startTS uint64) {
	t.Helper()
	pw, err := s.KvPrewrite(context.Background(), &kvpb.PrewriteRequest{Context: rctx(), StartVersion: startTS, PrimaryLock: []byte(key), LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte(value)}}})
	if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
		t.Fatalf("prewrite %s: %v %+v", key, err, pw)
	}
}

// KvDestroyRange deletes every record of the keys in range (versions,
// large values in the data family, locks) and nothing outside; the lock
// index forgets the destroyed locks, the store's safe point rises to the
// request's, and all of it holds after a restart that replays the Raft
// log. A stale epoch and a request without a safe point are refused.
func TestDestroyRange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startServer(t, dir, true)
	ts := uint64(100)
	for _, k := range []string{"a", "t1/a", "t1/b", "t1/b\x00", "t1/c", "t2", "t2/a"} {
		for i := range 3 {
			ts = onePC(t, s, k, fmt.Sprintf("%s-%d", k, i), ts+10)
		}
	}
	ts = onePC(t, s, "t1/big", strings.Repeat("x", 5000), ts+10) // value in the data family
	prewrite(t, s, "t1/locked", strings.Repeat("y", 5000), ts+10)
	prewrite(t, s, "t2/locked", "v", ts+10)
	safePoint := ts + 20
	outside := engineRecords(t, s, "", "t1/") + engineRecords(t, s, "t10", "")
	if n := engineRecords(t, s, "t1/", "t10"); n != 12+2+2 { // 4 keys x 3 versions, big (write + data), locked (lock + data)
		t.Fatalf("%d records in range before destroy", n)
	}
	if !s.locks.MayBeLocked([]byte("t1/locked")) {
		t.Fatal("the lock index misses the lock in range")
	}

	for _, bad := range []*kvpb.DestroyRangeRequest{
		{Context: &kvpb.Context{RegionId: 2, RegionEpoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 7}}, StartKey: []byte("t1/"), EndKey: []byte("t10"), SafePoint: safePoint},
		{Context: rctx(), StartKey: []byte("t1/"), EndKey: []byte("t10")},
	} {
		resp, err := s.KvDestroyRange(ctx, bad)
		if err != nil || (resp.RegionError == nil && resp.Error == "") {
			t.Fatalf("destroy %+v was not refused: %v %+v", bad, err, resp)
		}
	}
	if n := engineRecords(t, s, "t1/", "t10"); n != 16 {
		t.Fatalf("a refused destroy deleted records: %d left", n)
	}

	resp, err := s.KvDestroyRange(ctx, &kvpb.DestroyRangeRequest{Context: rctx(), StartKey: []byte("t1/"), EndKey: []byte("t10"), SafePoint: safePoint})
	if err != nil || resp.RegionError != nil || resp.Error != "" {
		t.Fatalf("destroy: %v %+v", err, resp)
	}

	check := func(s *Server) {
		t.Helper()
		if n := engineRecords(t, s, "t1/", "t10"); n != 0 {
			t.Fatalf("%d records left in the destroyed range", n)
		}
		if n := engineRecords(t, s, "", "t1/") + engineRecords(t, s, "t10", ""); n != outside {
			t.Fatalf("records outside the range: %d, were %d", n, outside)
		}
		if s.locks.MayBeLocked([]byte("t1/locked")) {
			t.Fatal("the lock index still lists a destroyed lock")
		}
		if !s.locks.MayBeLocked([]byte("t2/locked")) {
			t.Fatal("the lock index lost a lock outside the range")
		}
		if sp := s.locks.GCSafePoint(); sp != safePoint {
			t.Fatalf("store safe point %d, want %d", sp, safePoint)
		}
		for _, k := range []string{"t1/a", "t1/big", "t1/locked"} {
			if g := mustGet(t, s, k, safePoint+1); g.Error != nil || !g.NotFound {
				t.Fatalf("read of destroyed %s: %+v", k, g)
			}
		}
		if g := mustGet(t, s, "t1/a", safePoint-1); g.Error == nil || !strings.Contains(g.Error.Abort, "GC life time") {
			t.Fatalf("read below the safe point: %+v", g)
		}
		for _, k := range []string{"a", "t2", "t2/a"} {
			want := k + "-2"
			if g := mustGet(t, s, k, safePoint+1); g.Error != nil || string(g.Value) != want {
				t.Fatalf("read of %s outside the range: %+v", k, g)
			}
		}
		if g := mustGet(t, s, "t2/locked", safePoint+1); g.Error == nil || g.Error.Locked == nil {
			t.Fatalf("the lock outside the range is gone: %+v", g)
		}
	}
	check(s)
	// Restart without a flush: the destroy is replayed from the Raft log,
	// and the lock index is rebuilt from the engine.
	stop()
	s, stop = startServer(t, dir, false)
	defer stop()
	check(s)
}

// A range that spans a split is clamped to each region: a request to the
// left region leaves the right one's keys alone, and the right region's
// own request deletes them.
func TestDestroyRangeClampedToRegion(t *testing.T) {
	ctx := context.Background()
	s, stop := startServer(t, t.TempDir(), true)
	defer stop()
	ts := uint64(100)
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		ts = onePC(t, s, k, k, ts+10)
	}
	p, _ := s.store.Peer(2)
	left, right, err := s.store.Split(ctx, p, p.Region().Epoch, []byte("c"), 3, []uint64{3})
	if err != nil {
		t.Fatal(err)
	}
	rp, _ := s.store.Peer(right.Id)
	for deadline := time.Now().Add(10 * time.Second); rp.CheckRequest(nil) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new region elected no leader")
		}
	}
	ctxOf := func(r *kvpb.Region) *kvpb.Context { return &kvpb.Context{RegionId: r.Id, RegionEpoch: r.Epoch} }
	destroy := func(r *kvpb.Region) {
		t.Helper()
		resp, err := s.KvDestroyRange(ctx, &kvpb.DestroyRangeRequest{Context: ctxOf(r), StartKey: []byte("b"), EndKey: []byte("e"), SafePoint: ts + 1})
		if err != nil || resp.RegionError != nil || resp.Error != "" {
			t.Fatalf("destroy in region %d: %v %+v", r.Id, err, resp)
		}
	}
	destroy(left)
	if got := []int{engineRecords(t, s, "a", "b"), engineRecords(t, s, "b", "c"), engineRecords(t, s, "c", "e"), engineRecords(t, s, "e", "")}; fmt.Sprint(got) != "[1 0 2 1]" {
		t.Fatalf("records per range after destroying in the left region: %v", got)
	}
	destroy(right)
	if got := []int{engineRecords(t, s, "a", "b"), engineRecords(t, s, "b", "e"), engineRecords(t, s, "e", "")}; fmt.Sprint(got) != "[1 0 1]" {
		t.Fatalf("records per range after destroying in the right region: %v", got)
	}
}
