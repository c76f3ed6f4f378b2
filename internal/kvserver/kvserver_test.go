package kvserver

import (
	"context"
	"github.com/cockroachdb/pebble/v2"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

func startServer(t *testing.T, dir string, bootstrap bool) (*Server, func()) {
	t.Helper()
	db, err := engine.OpenEngines(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	region := &kvpb.Region{Id: 2, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}, Peers: []*kvpb.Peer{{Id: 2, StoreId: 1}}}
	if bootstrap {
		if err := raftstore.BootstrapRegion(db, region); err != nil {
			t.Fatal(err)
		}
	}
	locks, err := mvcc.LoadLockSet(db.KV)
	if err != nil {
		t.Fatal(err)
	}
	store, err := raftstore.Open(db, raftstore.Config{StoreID: 1, Observer: testObserver{locks}})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := store.Peer(2)
	for deadline := time.Now().Add(10 * time.Second); p.CheckRequest(nil) != nil; {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(time.Millisecond)
	}
	return New(store, locks, testTSO), func() { store.Close(); db.Close() }
}

func rctx() *kvpb.Context {
	return &kvpb.Context{RegionId: 2, RegionEpoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}}
}

// A prewritten (two-phase) lock blocks readers above its start ts, also
// after a restart (the lock index is rebuilt from the engine), and the
// committed value is visible once the lock is resolved.
func TestLockVisibleToReadersAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startServer(t, dir, true)
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 100, PrimaryLock: []byte("k1"), LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k1"), Value: []byte("v1")}}})
	if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
		t.Fatalf("prewrite: %v %v %v", err, pw.RegionError, pw.Errors)
	}
	check := func(s *Server) {
		g, err := s.KvGet(ctx, &kvpb.GetRequest{Context: rctx(), Key: []byte("k1"), Version: 200})
		if err != nil || g.Error == nil || g.Error.Locked == nil {
			t.Fatalf("read above a lock was not blocked: %v %+v", err, g)
		}
		g, err = s.KvGet(ctx, &kvpb.GetRequest{Context: rctx(), Key: []byte("k1"), Version: 50})
		if err != nil || g.Error != nil || !g.NotFound {
			t.Fatalf("read below the lock: %v %+v", err, g)
		}
	}
	check(s)
	stop()
	s, stop = startServer(t, dir, false)
	defer stop()
	check(s)
	c, err := s.KvCommit(ctx, &kvpb.CommitRequest{Context: rctx(), StartVersion: 100, CommitVersion: 150, Keys: [][]byte{[]byte("k1")}})
	if err != nil || c.Error != nil || c.RegionError != nil {
		t.Fatalf("commit: %v %+v", err, c)
	}
	g, err := s.KvGet(ctx, &kvpb.GetRequest{Context: rctx(), Key: []byte("k1"), Version: 200})
	if err != nil || g.Error != nil || string(g.Value) != "v1" {
		t.Fatalf("committed value: %v %+v", err, g)
	}
	if s.locks.MayBeLocked([]byte("k1")) {
		t.Fatal("lock index still lists a committed key")
	}
}

// One-phase commit: the commit ts is above every ts read so far (max_ts),
// so a reader that already read at ts cannot miss it later.
func TestOnePCCommitTSAboveMaxReadTS(t *testing.T) {
	ctx := context.Background()
	s, stop := startServer(t, t.TempDir(), true)
	defer stop()
	if _, err := s.KvGet(ctx, &kvpb.GetRequest{Context: rctx(), Key: []byte("k"), Version: 1000}); err != nil {
		t.Fatal(err)
	}
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 10, PrimaryLock: []byte("k"), TryOnePc: true,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k"), Value: []byte("v")}}})
	if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
		t.Fatalf("1pc: %v %+v", err, pw)
	}
	if pw.OnePcCommitTs <= 1000 {
		t.Fatalf("1pc commit ts %d not above max read ts 1000", pw.OnePcCommitTs)
	}
	g, _ := s.KvGet(ctx, &kvpb.GetRequest{Context: rctx(), Key: []byte("k"), Version: 1000})
	if !g.NotFound {
		t.Fatalf("read at 1000 sees a commit at %d", pw.OnePcCommitTs)
	}
	// A second writer that started before the first committed conflicts.
	pw2, _ := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 20, PrimaryLock: []byte("k"), TryOnePc: true,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k"), Value: []byte("w")}}})
	if len(pw2.Errors) == 0 || pw2.Errors[0].Conflict == nil {
		t.Fatalf("lost update: second writer was not refused: %+v", pw2)
	}
}

// Requests with a stale epoch or for an unknown region get region errors.
func TestRoutingErrors(t *testing.T) {
	ctx := context.Background()
	s, stop := startServer(t, t.TempDir(), true)
	defer stop()
	g, _ := s.KvGet(ctx, &kvpb.GetRequest{Context: &kvpb.Context{RegionId: 9}, Key: []byte("k"), Version: 1})
	if g.RegionError == nil || g.RegionError.RegionNotFound == nil {
		t.Fatalf("unknown region: %+v", g)
	}
	g, _ = s.KvGet(ctx, &kvpb.GetRequest{Context: &kvpb.Context{RegionId: 2, RegionEpoch: &kvpb.RegionEpoch{Version: 5}}, Key: []byte("k"), Version: 1})
	if g.RegionError == nil || g.RegionError.EpochNotMatch == nil {
		t.Fatalf("stale epoch: %+v", g)
	}
}

// KvScanFunc hands over the pairs KvScan returns, straight from the scan; a
// blocking lock ends it with the lock after the (good) pairs before it,
// where KvScan returns the lock and no pairs.
func TestScanFuncStopsAtLockAfterGoodPairs(t *testing.T) {
	ctx := context.Background()
	s, stop := startServer(t, t.TempDir(), true)
	defer stop()
	for i, k := range []string{"a", "b", "d"} {
		pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: uint64(10 + i), PrimaryLock: []byte(k), TryOnePc: true,
			Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(k), Value: []byte("v" + k)}}})
		if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
			t.Fatalf("1pc %s: %v %+v", k, err, pw)
		}
	}
	pw, err := s.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: rctx(), StartVersion: 100, PrimaryLock: []byte("c"), LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("c"), Value: []byte("vc")}}})
	if err != nil || len(pw.Errors) > 0 || pw.RegionError != nil {
		t.Fatalf("prewrite c: %v %+v", err, pw)
	}
	scanFunc := func(req *kvpb.ScanRequest) (string, *kvpb.ScanResponse) {
		t.Helper()
		var got []string
		resp, err := s.KvScanFunc(ctx, req, func(key, value []byte) error {
			got = append(got, string(key)+"="+string(value))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " "), resp
	}
	req := &kvpb.ScanRequest{Context: rctx(), StartKey: []byte("a"), Version: 200}
	got, resp := scanFunc(req)
	if got != "a=va b=vb" || resp.Error == nil || resp.Error.Locked == nil || string(resp.Error.Locked.Key) != "c" {
		t.Fatalf("scan func above the lock: %q, %+v", got, resp)
	}
	sr, err := s.KvScan(ctx, req)
	if err != nil || len(sr.Pairs) != 0 || sr.Error == nil || sr.Error.Locked == nil {
		t.Fatalf("scan above the lock: %v %+v", err, sr)
	}
	// Below the lock's start ts it does not block.
	if got, resp := scanFunc(&kvpb.ScanRequest{Context: rctx(), StartKey: []byte("a"), Version: 90}); got != "a=va b=vb d=vd" || resp.Error != nil {
		t.Fatalf("scan func below the lock: %q, %+v", got, resp)
	}
	// Limit and key-only.
	if got, resp := scanFunc(&kvpb.ScanRequest{Context: rctx(), StartKey: []byte("a"), Version: 90, Limit: 2, KeyOnly: true}); got != "a= b=" || resp.Error != nil {
		t.Fatalf("key-only scan func of 2: %q, %+v", got, resp)
	}
	// A stale epoch is refused before anything is read.
	stale := &kvpb.Context{RegionId: 2, RegionEpoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 0}}
	if got, resp := scanFunc(&kvpb.ScanRequest{Context: stale, Version: 90}); got != "" || resp.RegionError == nil {
		t.Fatalf("stale epoch: %q, %+v", got, resp)
	}
}

// testObserver makes the store's lock set its observer; the store's
// single region holds every MVCC key.
type testObserver struct{ *mvcc.LockSet }

func (o testObserver) Spans(r *kvpb.Region) []raftstore.Span {
	var out []raftstore.Span
	for _, sp := range mvcc.RegionSpans(r.Id, r.StartKey, r.EndKey) {
		out = append(out, raftstore.Span{Start: sp[0], End: sp[1]})
	}
	return out
}

func (o testObserver) SnapshotApplied([]raftstore.Span, []byte, *pebble.Batch) error { return nil }
func (o testObserver) SpansDestroyed([]raftstore.Span) error                         { return nil }

// testTSO stands in for the oracle, for tests that pick their own small
// timestamps: the max_ts a new leader syncs to is below all of them.
func testTSO(context.Context) (uint64, error) { return 1, nil }
