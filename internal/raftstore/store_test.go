package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) {
	// Small logs truncate quickly in tests.
	raftLogGCCountThreshold = 512
	os.Exit(m.Run())
}

func testRegion(id uint64) *kvpb.Region {
	return &kvpb.Region{Id: id, Epoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1},
		Peers: []*kvpb.Peer{{Id: id * 10, StoreId: 1}}}
}

// testEngines closes both engines when the test's KV engine is closed.
type testEngines struct {
	engine.Engines
}

func (e testEngines) Close() error { return e.Engines.Close() }

func openStore(t *testing.T, dir string, bootstrap bool) (testEngines, *Store) {
	t.Helper()
	eng, err := engine.OpenEngines(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bootstrap {
		for _, id := range []uint64{1, 2} {
			if err := BootstrapRegion(eng, testRegion(id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	db := testEngines{eng}
	s, err := Open(eng, Config{StoreID: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, s, 1)
	waitLeader(t, s, 2)
	return db, s
}

func waitLeader(t *testing.T, s *Store, region uint64) *Peer {
	t.Helper()
	p, ok := s.Peer(region)
	if !ok {
		t.Fatalf("region %d not loaded", region)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.CheckRequest(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("region %d never became a ready leader", region)
		}
		time.Sleep(time.Millisecond)
	}
	return p
}

func put(t *testing.T, s *Store, p *Peer, k, v string) {
	t.Helper()
	b := s.Engine().NewBatch()
	defer b.Close()
	b.Set([]byte(k), []byte(v), nil)
	if err := s.Propose(context.Background(), p, p.Region().Epoch, b); err != nil {
		t.Fatalf("propose %s: %v", k, err)
	}
}

// A proposal returns only once applied, and applied writes survive a
// restart of the store together with the applied index (no re-apply).
func TestProposeApplyAndRestart(t *testing.T) {
	dir := t.TempDir()
	db, s := openStore(t, dir, true)
	p := waitLeader(t, s, 2)
	for i := 0; i < 50; i++ {
		put(t, s, p, fmt.Sprintf("zk%03d", i), fmt.Sprintf("v%d", i))
	}
	if v, ok, _ := engine.GetCopy(db.KV, []byte("zk049")); !ok || string(v) != "v49" {
		t.Fatalf("applied write not visible after Propose returned: %q %v", v, ok)
	}
	applied := p.storage.applyState().AppliedIndex
	s.Close()
	db.Close()

	db, s = openStore(t, dir, false)
	defer db.Close()
	defer s.Close()
	p = waitLeader(t, s, 2)
	if got := p.storage.applyState().AppliedIndex; got < applied {
		t.Fatalf("applied index went back from %d to %d", applied, got)
	}
	for i := 0; i < 50; i++ {
		if v, ok, _ := engine.GetCopy(db.KV, []byte(fmt.Sprintf("zk%03d", i))); !ok || string(v) != fmt.Sprintf("v%d", i) {
			t.Fatalf("key %d lost after restart: %q", i, v)
		}
	}
	put(t, s, p, "zafter", "x")
}

// Concurrent proposers share fsyncs and all complete.
func TestConcurrentProposalsGroupCommit(t *testing.T) {
	db, s := openStore(t, t.TempDir(), true)
	defer db.Close()
	defer s.Close()
	p := waitLeader(t, s, 2)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				put(t, s, p, fmt.Sprintf("zw%02d-%03d", w, i), "v")
			}
		}(w)
	}
	wg.Wait()
	n := 0
	it, _ := db.KV.NewIter(&pebble.IterOptions{LowerBound: []byte("zw"), UpperBound: []byte("zx")})
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	it.Close()
	if n != 16*40 {
		t.Fatalf("got %d keys, want %d", n, 16*40)
	}
	// Applying must not have touched the entries the in-memory log holds
	// (they are the same bytes raft would send to followers).
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	for _, e := range p.storage.ents {
		v, ok, err := engine.GetCopy(db.Raft, engine.RaftLogKey(2, e.GetIndex()))
		if err != nil || !ok {
			t.Fatalf("entry %d not persisted: %v", e.GetIndex(), err)
		}
		persisted := &pb.Entry{}
		if err := proto.Unmarshal(v, persisted); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(persisted.Data, e.Data) {
			t.Fatalf("in-memory entry %d differs from the persisted one", e.GetIndex())
		}
	}
}

// The log is truncated once it passes the threshold, and a restart after
// truncation still works.
func TestLogTruncation(t *testing.T) {
	dir := t.TempDir()
	db, s := openStore(t, dir, true)
	p := waitLeader(t, s, 2)
	for i := 0; i < int(raftLogGCCountThreshold)+100; i++ {
		put(t, s, p, fmt.Sprintf("zt%05d", i), "v")
	}
	// Truncation follows a flush of the KV engine, asynchronously.
	var st engine.ApplyState
	for deadline := time.Now().Add(20 * time.Second); ; {
		put(t, s, p, "ztick", "v")
		if st = p.storage.applyState(); st.TruncatedIndex > raftInitIndex {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log not truncated: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok, _ := engine.GetCopy(db.Raft, engine.RaftLogKey(2, st.TruncatedIndex)); ok {
		t.Fatalf("entry %d still present after truncation", st.TruncatedIndex)
	}
	s.Close()
	db.Close()
	db, s = openStore(t, dir, false)
	defer db.Close()
	defer s.Close()
	p = waitLeader(t, s, 2)
	put(t, s, p, "zpost", "v")
	if _, ok, _ := engine.GetCopy(db.KV, []byte(fmt.Sprintf("zt%05d", int(raftLogGCCountThreshold)+99))); !ok {
		t.Fatal("data lost across truncation and restart")
	}
}

// The KV memtable is flushed once it is older than memtableMaxAge and
// holds at least agedFlushBytes while range scans run, far below the
// log-size thresholds, and the log is truncated with it. Without scans,
// or under the byte floor, it is not flushed however old it gets.
func TestAgedMemtableFlush(t *testing.T) {
	defer func(age time.Duration, floor, scans uint64) {
		memtableMaxAge, agedFlushBytes, agedFlushScannedKeys = age, floor, scans
	}(memtableMaxAge, agedFlushBytes, agedFlushScannedKeys)
	memtableMaxAge, agedFlushBytes, agedFlushScannedKeys = 100*time.Millisecond, 4<<10, 100

	eng, err := engine.OpenEngines(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := BootstrapRegion(eng, testRegion(2)); err != nil {
		t.Fatal(err)
	}
	var scanned atomic.Uint64
	// The flush hooks: each requested flush is announced on the store
	// loop, then reported done once the engine has completed it.
	var (
		hookMu                sync.Mutex
		started, done         int
		startFlushes, lastTok uint64
	)
	s, err := Open(eng, Config{StoreID: 1, Observer: &hookObserver{scanned: scanned.Load,
		flushStarting: func() uint64 {
			hookMu.Lock()
			defer hookMu.Unlock()
			started++
			startFlushes = uint64(eng.KV.Metrics().Flush.Count)
			return uint64(started)
		},
		flushDone: func(tok uint64) {
			hookMu.Lock()
			defer hookMu.Unlock()
			done++
			if tok != uint64(started) || tok <= lastTok {
				t.Errorf("FlushDone(%d) after %d FlushStarting calls (last done %d)", tok, started, lastTok)
			}
			if n := uint64(eng.KV.Metrics().Flush.Count); n <= startFlushes {
				t.Errorf("FlushDone(%d) before the flush completed: %d flushes, %d when it started", tok, n, startFlushes)
			}
			lastTok = tok
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := waitLeader(t, s, 2)
	flushes := func() int64 { return eng.KV.Metrics().Flush.Count }
	big := string(bytes.Repeat([]byte("v"), 200))
	// Each put is one store round, after which the store decides.
	quiet := func(what string, n int, value string) {
		t.Helper()
		base := flushes()
		for i := 0; i < n; i++ {
			put(t, s, p, fmt.Sprintf("z%s%03d", what, i), value)
			time.Sleep(memtableMaxAge / 4)
		}
		if got := flushes(); got != base {
			t.Fatalf("%s: the memtable was flushed (%d -> %d flushes)", what, base, got)
		}
	}

	// flushed puts values until the store has flushed and truncated the
	// log past where it was.
	flushed := func(what, value string) {
		t.Helper()
		base, truncated := flushes(), p.storage.applyState().TruncatedIndex
		deadline := time.Now().Add(10 * time.Second)
		for i := 0; flushes() == base || p.storage.applyState().TruncatedIndex <= truncated; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no early flush: %d flushes, apply state %+v", what, flushes(), p.storage.applyState())
			}
			put(t, s, p, fmt.Sprintf("z%s%03d", what, i), value)
			time.Sleep(10 * time.Millisecond)
		}
	}

	quiet("noscans", 40, big) // past the age and the floor, but nothing scans
	scanned.Add(1000)
	flushed("scans", "v") // now scans run, and the memtable is old and full
	scanned.Add(1000)
	quiet("small", 8, "v") // scans and age, but under the byte floor
	flushed("aged", big)
	hookMu.Lock()
	defer hookMu.Unlock()
	if started < 2 || done < 2 {
		t.Fatalf("flush hooks: %d started, %d done; want each requested flush announced and reported", started, done)
	}
}

func TestRequestChecks(t *testing.T) {
	db, s := openStore(t, t.TempDir(), true)
	defer db.Close()
	defer s.Close()
	p := waitLeader(t, s, 2)
	if e := p.CheckRequest(&kvpb.Context{RegionId: 2, RegionEpoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 7}}); e == nil || e.EpochNotMatch == nil {
		t.Fatalf("stale epoch accepted: %v", e)
	}
	if e := p.CheckRequest(&kvpb.Context{RegionId: 2, RegionEpoch: &kvpb.RegionEpoch{ConfVer: 1, Version: 1}}); e != nil {
		t.Fatalf("current epoch rejected: %v", e)
	}
}

// A crash loses everything not fsynced: the KV engine's unflushed applies
// (it has no WAL) and the Raft engine's unsynced tail. Every proposal that
// returned must still be there after restart, replayed from the Raft log,
// including across log truncations.
func TestAcknowledgedWritesSurviveCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	open := func(bootstrap bool) (engine.Engines, *Store) {
		eng, err := engine.OpenEngines("/data", engine.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if bootstrap {
			for _, id := range []uint64{1, 2} {
				if err := BootstrapRegion(eng, testRegion(id)); err != nil {
					t.Fatal(err)
				}
			}
		}
		s, err := Open(eng, Config{StoreID: 1})
		if err != nil {
			t.Fatal(err)
		}
		waitLeader(t, s, 2)
		return eng, s
	}
	eng, s := open(true)
	p := waitLeader(t, s, 2)
	n := int(raftLogGCCountThreshold)*2 + 300
	for i := 0; i < n; i++ {
		put(t, s, p, fmt.Sprintf("zc%05d", i), fmt.Sprintf("v%d", i))
	}
	// Truncation follows a KV-engine flush, which completes in the
	// background; without the race detector the writes can outrun it.
	deadline := time.Now().Add(10 * time.Second)
	for p.storage.applyState().TruncatedIndex <= raftInitIndex && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	truncated := p.storage.applyState().TruncatedIndex
	if truncated <= raftInitIndex {
		t.Fatalf("the log was never truncated; the test would not cover truncation")
	}
	// A few more writes after the truncation, then crash: the disk keeps
	// only what was synced at this moment.
	for i := n; i < n+20; i++ {
		put(t, s, p, fmt.Sprintf("zc%05d", i), fmt.Sprintf("v%d", i))
	}
	n += 20
	fs = fs.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	eng.Close()

	eng, s = open(false)
	defer eng.Close()
	defer s.Close()
	for i := 0; i < n; i++ {
		v, ok, err := engine.GetCopy(eng.KV, []byte(fmt.Sprintf("zc%05d", i)))
		if err != nil || !ok || string(v) != fmt.Sprintf("v%d", i) {
			t.Fatalf("acknowledged write %d lost in the crash (log truncated to %d before it): %q %v %v", i, truncated, v, ok, err)
		}
	}
}

// hookObserver is the raw observer with the flush hooks and the scan
// counter of the test.
type hookObserver struct {
	rawObserver
	scanned       func() uint64
	flushStarting func() uint64
	flushDone     func(uint64)
}

func (o *hookObserver) ScannedKeys() uint64   { return o.scanned() }
func (o *hookObserver) FlushStarting() uint64 { return o.flushStarting() }
func (o *hookObserver) FlushDone(tok uint64)  { o.flushDone(tok) }
