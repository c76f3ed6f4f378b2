package mvcc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// cacheHarness is an engine whose batches are applied the way the store's
// apply path does it: BeforeApply, commit, Observe.
type cacheHarness struct {
	t     *testing.T
	db    *pebble.DB
	locks *LockSet
}

func newCacheHarness(t *testing.T, capacity int64) *cacheHarness {
	t.Helper()
	// No WAL, as the store's KV engine: its memtables hold only applied
	// batches, which RecentWrites relies on.
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer, DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	locks, err := LoadLockSet(db)
	if err != nil {
		t.Fatal(err)
	}
	if capacity > 0 { // 0: no version cache
		locks.SetVersionCache(NewVersionCache(capacity))
		t.Cleanup(func() { locks.VersionCache().Close() })
	}
	return &cacheHarness{t: t, db: db, locks: locks}
}

// apply runs fn against the cached reader and applies its batch; it returns
// fn's error (protocol errors write nothing).
func (h *cacheHarness) apply(fn func(r pebble.Reader, b *pebble.Batch) error) error {
	h.t.Helper()
	b := h.db.NewBatch()
	defer b.Close()
	err := fn(h.locks.Reader(h.db), b)
	if _, ok := err.(keyErrors); err != nil && !ok && !isKeyError(err) {
		h.t.Fatal(err)
	}
	if err := h.locks.BeforeApply(b.Repr()); err != nil {
		h.t.Fatal(err)
	}
	repr := slices.Clone(b.Repr()) // what the store's OnApply sees: no ceiling
	if err := h.locks.BeforeCommit(b); err != nil {
		h.t.Fatal(err)
	}
	if err := h.db.Apply(b, pebble.NoSync); err != nil {
		h.t.Fatal(err)
	}
	if err := h.locks.AfterApply(repr); err != nil {
		h.t.Fatal(err)
	}
	return err
}

func (h *cacheHarness) onePC(key, value string, startTS, commitTS uint64) {
	h.t.Helper()
	req := &kvpb.PrewriteRequest{PrimaryLock: []byte(key), StartVersion: startTS, LockTtl: 100,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte(value)}}}
	if err := h.apply(func(r pebble.Reader, b *pebble.Batch) error {
		errs, err := OnePC(r, b, req, commitTS)
		if err == nil && hasError(errs) {
			return keyErrors(fmt.Sprint(errs))
		}
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
}

// keyErrors are the per-key protocol errors of a prewrite, as text.
type keyErrors string

func (e keyErrors) Error() string { return string(e) }

func hasError(errs []error) bool {
	for _, e := range errs {
		if e != nil {
			return true
		}
	}
	return false
}

func (h *cacheHarness) get(key string, ts uint64) string {
	h.t.Helper()
	v, found, err := Get(h.locks.Reader(h.db), []byte(key), ts, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if !found {
		return "<none>"
	}
	return string(v)
}

func TestVersionCacheServesTheNewestVersion(t *testing.T) {
	h := newCacheHarness(t, 1<<20)
	h.onePC("k", "v1", 10, 11)
	if got := h.get("k", 20); got != "v1" { // a miss, which fills the cache
		t.Fatalf("get@20 = %q", got)
	}
	hits := h.locks.VersionCache().Stats().Hits
	if got := h.get("k", 20); got != "v1" {
		t.Fatalf("get@20 = %q", got)
	}
	if h.locks.VersionCache().Stats().Hits != hits+1 {
		t.Fatal("the second read of an unchanged key was not a cache hit")
	}
	// A write to a cached key updates the entry.
	h.onePC("k", "v2", 30, 31)
	hits = h.locks.VersionCache().Stats().Hits
	if got := h.get("k", 40); got != "v2" {
		t.Fatalf("get@40 = %q", got)
	}
	if h.locks.VersionCache().Stats().Hits != hits+1 {
		t.Fatal("the read after a write to a cached key was not a cache hit")
	}
	// A key without versions is remembered as absent until it is written.
	if got := h.get("new", 40); got != "<none>" {
		t.Fatalf("get new@40 = %q", got)
	}
	hits = h.locks.VersionCache().Stats().Hits
	if got := h.get("new", 40); got != "<none>" {
		t.Fatalf("get new@40 = %q", got)
	}
	if h.locks.VersionCache().Stats().Hits != hits+1 {
		t.Fatal("the second read of an absent key was not a cache hit")
	}
	h.onePC("new", "n1", 50, 51)
	if got := h.get("new", 60); got != "n1" {
		t.Fatalf("get new@60 = %q", got)
	}
	// Reads below the newest version go to the engine and see history.
	if got := h.get("k", 20); got != "v1" {
		t.Fatalf("get@20 = %q", got)
	}
	if got := h.get("k", 5); got != "<none>" {
		t.Fatalf("get@5 = %q", got)
	}
}

// A batch read (a multi-row INSERT's uniqueness check) does not enter
// keys without a record in the cache; it still fills and serves keys that
// have one.
func TestVersionCacheBatchReadsDoNotCacheAbsentKeys(t *testing.T) {
	h := newCacheHarness(t, 1<<20)
	h.onePC("k", "v1", 10, 11)
	batchGet := func(key string, ts uint64) string {
		t.Helper()
		v, found, err := BatchGetKey(h.locks.Reader(h.db), []byte(key), ts, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return "<none>"
		}
		return string(v)
	}
	entries := h.locks.VersionCache().Stats().Entries
	if got := batchGet("new", 20); got != "<none>" {
		t.Fatalf("batch get new@20 = %q", got)
	}
	if n := h.locks.VersionCache().Stats().Entries; n != entries {
		t.Fatalf("a batch read of an absent key left %d entries, want %d", n, entries)
	}
	h.onePC("new", "n1", 30, 31)
	if got := batchGet("new", 40); got != "n1" {
		t.Fatalf("batch get new@40 = %q", got)
	}
	if got := batchGet("k", 40); got != "v1" { // a miss, which fills the cache
		t.Fatalf("batch get k@40 = %q", got)
	}
	hits := h.locks.VersionCache().Stats().Hits
	if got := batchGet("k", 40); got != "v1" {
		t.Fatalf("batch get k@40 = %q", got)
	}
	if h.locks.VersionCache().Stats().Hits != hits+1 {
		t.Fatal("the second batch read of a key with a record was not a cache hit")
	}
}

func TestVersionCacheDoesNotServeKeysBeingApplied(t *testing.T) {
	h := newCacheHarness(t, 1<<20)
	h.onePC("k", "v1", 10, 11)
	h.get("k", 20) // fill
	c := h.locks.VersionCache()

	// Between BeforeApply and Observe the engine may already hold the new
	// version; the cache must not answer with the old one.
	b := h.db.NewBatch()
	req := &kvpb.PrewriteRequest{PrimaryLock: []byte("k"), StartVersion: 30, LockTtl: 100,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k"), Value: []byte("v2")}}}
	if _, err := OnePC(h.locks.Reader(h.db), b, req, 31); err != nil {
		t.Fatal(err)
	}
	if err := h.locks.BeforeApply(b.Repr()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.lookup(versionPrefix(writeCF, []byte("k"))); ok {
		t.Fatal("a key being applied was served from the cache")
	}
	if err := h.db.Apply(b, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if got := h.get("k", 40); got != "v2" {
		t.Fatalf("get@40 during the apply = %q", got)
	}
	if err := h.locks.AfterApply(b.Repr()); err != nil {
		t.Fatal(err)
	}
	e, ok, _ := c.lookup(versionPrefix(writeCF, []byte("k")))
	if !ok || e.commitTS != 31 || string(e.w.value) != "v2" {
		t.Fatalf("after Observe the cache holds %v %d %q", ok, e.commitTS, e.w.value)
	}
}

func TestVersionCacheDropsFillsFromAnOvertakenView(t *testing.T) {
	h := newCacheHarness(t, 1<<20)
	h.onePC("k", "v1", 10, 11)
	// A fresh cache, so that k is not cached.
	h.locks.SetVersionCache(NewVersionCache(1 << 20))
	c := h.locks.VersionCache()
	prefix := versionPrefix(writeCF, []byte("k"))
	_, ok, gen := c.lookup(prefix)
	if ok || gen == noFill {
		t.Fatalf("lookup of an uncached key: ok=%v gen=%d", ok, gen)
	}
	// The reader read v1; meanwhile v2 is applied.
	h.onePC("k", "v2", 20, 21)
	c.fill(prefix, gen, 11, &write{kind: writePut, startTS: 10, hasValue: true, value: []byte("v1")})
	if e, ok, _ := c.lookup(prefix); ok && (e.commitTS != 21 || string(e.w.value) != "v2") {
		t.Fatalf("a fill from a view older than an apply was kept: %d %q", e.commitTS, e.w.value)
	}
	if got := h.get("k", 30); got != "v2" {
		t.Fatalf("get@30 = %q", got)
	}
}

func TestVersionCacheAfterGCAndDestroyRange(t *testing.T) {
	h := newCacheHarness(t, 1<<20)
	h.onePC("a", "v1", 10, 11)
	// A Delete as the newest version, cached, then collected by GC.
	if err := h.apply(func(r pebble.Reader, b *pebble.Batch) error {
		_, err := OnePC(r, b, &kvpb.PrewriteRequest{PrimaryLock: []byte("a"), StartVersion: 20, LockTtl: 100,
			Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Del, Key: []byte("a")}}}, 21)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.get("a", 30); got != "<none>" {
		t.Fatalf("get@30 = %q", got)
	}
	if err := h.apply(func(r pebble.Reader, b *pebble.Batch) error {
		_, err := GC(r, b, nil, nil, 25, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if e, ok, _ := h.locks.VersionCache().lookup(versionPrefix(writeCF, []byte("a"))); ok && !e.absent {
		t.Fatal("the cache kept a record GC deleted")
	}
	if got := h.get("a", 30); got != "<none>" {
		t.Fatalf("get@30 after GC = %q", got)
	}
	h.onePC("b", "v1", 40, 41)
	h.get("b", 50)
	if err := h.apply(func(r pebble.Reader, b *pebble.Batch) error { return DestroyRange(b, nil, nil) }); err != nil {
		t.Fatal(err)
	}
	if st := h.locks.VersionCache().Stats(); st.Entries != 0 {
		t.Fatalf("%d entries survived a range destruction", st.Entries)
	}
	if got := h.get("b", 50); got != "<none>" {
		t.Fatalf("get@50 after DestroyRange = %q", got)
	}
}

// TestVersionCacheAgreesWithTheEngine runs the same random histories
// (one-phase and two-phase commits, rollbacks, pessimistic locks, lock
// resolution, GC) on two engines, one read through the version cache and
// one read from snapshots without it, and requires every command to
// return the same result and both engines to end up identical, with reads
// at every timestamp in between. A small capacity makes the cache evict.
func TestVersionCacheAgreesWithTheEngine(t *testing.T) {
	var sstOnly, bounded uint64 // newer-write checks answered by the SSTs alone, by the bounds
	defer func() {
		if !t.Failed() && (sstOnly == 0 || bounded == 0) {
			t.Errorf("newer-write checks answered by the SSTs alone: %d, by the bounds: %d; want both > 0", sstOnly, bounded)
		}
		t.Logf("newer-write checks answered by the SSTs alone: %d, by the bounds: %d", sstOnly, bounded)
	}()
	seeds := uint64(40)
	if raceEnabled {
		seeds = 12
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, tc := range []struct {
			capacity      int64
			recent, floor bool
		}{{1 << 20, false, false}, {1, false, false}, {1 << 20, true, false}, {1, true, false}, {1 << 20, true, true}, {1, true, true}} {
			capacity := tc.capacity
			t.Run(fmt.Sprintf("seed=%d/capacity=%d/recent_writes=%v/floor=%v", seed, capacity, tc.recent, tc.floor), func(t *testing.T) {
				cached := newCacheHarness(t, capacity)
				addStats := func() {
					st := cached.locks.RecentWrites().Stats()
					sstOnly += st.SSTOnly
					bounded += st.Bounded
				}
				switch {
				case tc.floor:
					// Newer-write checks may also answer from the bounds
					// and the timestamp floor alone; some flushes are
					// followed by a restart, which reloads the floor.
					cached.locks.SetRecentWrites(loadTestRecentWrites(t, cached.db))
					defer addStats()
				case tc.recent:
					// Newer-write checks may read the SSTs alone; flushes
					// at random move records from memtables into SSTs.
					cached.locks.SetRecentWrites(NewRecentWrites())
					defer addStats()
				}
				plain, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer})
				if err != nil {
					t.Fatal(err)
				}
				defer plain.Close()
				rng := rand.New(rand.NewPCG(seed, 7))
				keys := [][]byte{[]byte("a"), []byte("b"), []byte("c\x00d"), []byte("e")}
				var trace []string
				step := func(name string, fn func(r pebble.Reader, b *pebble.Batch) error) {
					t.Helper()
					trace = append(trace, name)
					got := cached.apply(fn)
					snap := plain.NewSnapshot()
					b := plain.NewBatch()
					want := fn(snap, b)
					snap.Close()
					if _, ok := want.(keyErrors); want != nil && !ok && !isKeyError(want) {
						t.Fatal(want)
					}
					if err := plain.Apply(b, pebble.NoSync); err != nil {
						t.Fatal(err)
					}
					b.Close()
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%s: with the cache %v, without %v", name, got, want)
					}
					if tc.recent && rng.IntN(3) == 0 {
						if err := cached.db.Flush(); err != nil {
							t.Fatal(err)
						}
						if tc.floor && rng.IntN(2) == 0 {
							addStats()
							cached.locks.SetRecentWrites(loadTestRecentWrites(t, cached.db))
						}
					}
				}
				ts := uint64(10)
				for range 60 {
					ts += 1 + uint64(rng.IntN(3))
					start := ts
					var ms []*kvpb.Mutation
					for _, k := range keys {
						if rng.IntN(3) != 0 {
							continue
						}
						m := &kvpb.Mutation{Key: k, Op: kvpb.Op_Put, Value: fmt.Appendf(nil, "v%d", ts)}
						switch rng.IntN(8) {
						case 0:
							m.Op, m.Value = kvpb.Op_Del, nil
						case 1:
							m.Op, m.Value = kvpb.Op_Lock, nil
						case 2:
							m.Value = bytes.Repeat([]byte("x"), maxShortValue+1)
						}
						ms = append(ms, m)
					}
					if len(ms) == 0 {
						continue
					}
					keysOf := make([][]byte, len(ms))
					for i, m := range ms {
						keysOf[i] = m.Key
					}
					// Sometimes the transaction read at an older snapshot,
					// so that newer commits conflict with it.
					if rng.IntN(4) == 0 && start > 15 {
						start -= uint64(rng.IntN(5))
					}
					req := &kvpb.PrewriteRequest{PrimaryLock: ms[0].Key, StartVersion: start, Mutations: ms, LockTtl: 100}
					ts++
					commitTS := ts
					errText := func(errs []error, err error) error {
						if err == nil && hasError(errs) {
							return keyErrors(fmt.Sprint(errs))
						}
						return err
					}
					switch rng.IntN(6) {
					case 0:
						step("one_pc", func(r pebble.Reader, b *pebble.Batch) error { return errText(OnePC(r, b, req, commitTS)) })
					case 1:
						step("prewrite", func(r pebble.Reader, b *pebble.Batch) error { return errText(Prewrite(r, b, req)) })
						step("rollback", func(r pebble.Reader, b *pebble.Batch) error { return Rollback(r, b, keysOf, start) })
					case 2:
						// A rollback record at a start ts below newer commits.
						step("rollback_old", func(r pebble.Reader, b *pebble.Batch) error { return Rollback(r, b, keysOf, start-1) })
					case 3:
						safePoint := ts - uint64(rng.IntN(10))
						step("gc", func(r pebble.Reader, b *pebble.Batch) error {
							_, err := GC(r, b, nil, nil, safePoint, 0)
							return err
						})
					default:
						step("prewrite", func(r pebble.Reader, b *pebble.Batch) error { return errText(Prewrite(r, b, req)) })
						step("commit", func(r pebble.Reader, b *pebble.Batch) error { return Commit(r, b, keysOf, start, commitTS) })
						// Prewriting again after the commit must fail the same way.
						step("prewrite_again", func(r pebble.Reader, b *pebble.Batch) error { return errText(Prewrite(r, b, req)) })
					}
					// Reads at every recent timestamp, the newest included.
					for rts := ts - min(ts, 8); rts <= ts+1; rts++ {
						for _, k := range keys {
							gv, gf, gerr := Get(cached.locks.Reader(cached.db), k, rts, nil)
							pv, pf, perr := Get(plain, k, rts, nil)
							if !bytes.Equal(gv, pv) || gf != pf || fmt.Sprint(gerr) != fmt.Sprint(perr) {
								t.Fatalf("get %q@%d: with the cache %q %v %v, without %q %v %v\n%v\n%s\n%s", k, rts, gv, gf, gerr, pv, pf, perr, trace, dump(t, plain), dump(t, cached.db))
							}
						}
					}
				}
				if a, b := dump(t, cached.db), dump(t, plain); a != b {
					t.Fatalf("the engines differ:\n%s", diffLines(b, a))
				}
				if capacity == 1<<20 && cached.locks.VersionCache().Stats().Hits == 0 {
					t.Fatal("no read was answered by the cache")
				}
			})
		}
	}
}

func TestVersionCacheEvictsOldestSegmentsAndChecksKeys(t *testing.T) {
	c := NewVersionCache(1) // the smallest cache: one shard of four minimal segments
	defer c.Close()
	if len(c.shards) != 1 {
		t.Fatalf("%d shards", len(c.shards))
	}
	value := bytes.Repeat([]byte("v"), 1000)
	prefixOf := func(i int) []byte { return versionPrefix(writeCF, fmt.Appendf(nil, "key%04d", i)) }
	const n = 200 // about 1 KB each: several times the cache
	for i := range n {
		_, ok, gen := c.lookup(prefixOf(i))
		if ok {
			t.Fatalf("key %d cached before it was filled", i)
		}
		c.fill(prefixOf(i), gen, uint64(i+1), &write{kind: writePut, startTS: uint64(i), hasValue: true, value: value})
	}
	if e, ok, _ := c.lookup(prefixOf(n - 1)); !ok || e.commitTS != n || !bytes.Equal(e.w.value, value) {
		t.Fatalf("the newest fill is not served: %v %d", ok, e.commitTS)
	}
	if _, ok, _ := c.lookup(prefixOf(0)); ok {
		t.Fatal("the oldest fill survived a cache several times too small")
	}
	st := c.Stats()
	if max := int64(segmentsPerShard * c.segSize); st.Bytes > max || st.Entries*1000 > int(max) {
		t.Fatalf("%d entries in %d bytes exceed the ring of %d bytes", st.Entries, st.Bytes, max)
	}
	// An index slot that points at another key's entry (a hash collision)
	// is a miss, never that key's record.
	s := &c.shards[0]
	h, _ := c.locate(prefixOf(n - 1))
	other, _ := c.locate(prefixOf(12345))
	s.index[other] = s.index[h]
	if _, ok, _ := c.lookup(prefixOf(12345)); ok {
		t.Fatal("a lookup returned the entry of another key with the same index slot")
	}
	// After Close nothing is served and nothing is stored.
	c.Close()
	if _, ok, _ := c.lookup(prefixOf(n - 1)); ok {
		t.Fatal("a closed cache served a lookup")
	}
	_, _, gen := c.lookup(prefixOf(7))
	c.fill(prefixOf(7), gen, 1, &write{kind: writePut, hasValue: true, value: value})
}
