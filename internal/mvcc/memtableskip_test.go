package mvcc

import (
	"fmt"
	"math"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// memtableSkipEnv is a KV engine without a WAL with a lock set and a
// recent-write table attached, written the way the store's apply path
// writes it.
type memtableSkipEnv struct {
	t  *testing.T
	db *pebble.DB
	ls *LockSet
	rw *RecentWrites
	mu sync.Mutex // serializes apply and flush, as the store loop does
}

func newMemtableSkipEnv(t *testing.T, withCache bool) *memtableSkipEnv {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer, DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ls, err := LoadLockSet(db)
	if err != nil {
		t.Fatal(err)
	}
	if withCache {
		ls.SetVersionCache(NewVersionCache(1 << 20))
	}
	rw, err := LoadRecentWrites(db)
	if err != nil {
		t.Fatal(err)
	}
	ls.SetRecentWrites(rw)
	return &memtableSkipEnv{t: t, db: db, ls: ls, rw: rw}
}

// apply commits b through the apply path's hooks.
func (e *memtableSkipEnv) apply(b *pebble.Batch) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	defer b.Close()
	if err := e.ls.BeforeApply(b.Repr()); err != nil {
		e.t.Fatal(err)
	}
	if err := e.ls.BeforeCommit(b); err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Apply(b, pebble.NoSync); err != nil {
		e.t.Fatal(err)
	}
	if err := e.ls.Observe(b.Repr()); err != nil {
		e.t.Fatal(err)
	}
}

// put commits key = value at commitTS in one phase.
func (e *memtableSkipEnv) put(key, value string, commitTS uint64) {
	e.t.Helper()
	b := e.db.NewBatch()
	req := &kvpb.PrewriteRequest{PrimaryLock: []byte(key), StartVersion: commitTS - 1,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte(value)}}}
	if errs, err := OnePC(e.ls.Reader(e.db), b, req, commitTS); err != nil || hasError(errs) {
		e.t.Fatal(err, errs)
	}
	e.apply(b)
}

// flush flushes the engine the way the store does, reporting it to the
// table.
func (e *memtableSkipEnv) flush() {
	e.t.Helper()
	e.mu.Lock()
	token := e.rw.FlushStarting()
	done, err := e.db.AsyncFlush()
	e.mu.Unlock()
	if err != nil {
		e.t.Fatal(err)
	}
	<-done
	e.rw.FlushDone(token)
}

func (e *memtableSkipEnv) get(key string) string {
	e.t.Helper()
	v, found, err := Get(e.ls.Reader(e.db), []byte(key), math.MaxUint64>>1, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if !found {
		return "<absent>"
	}
	return string(v)
}

// TestVersionReadsSkipMemtablesOnlyWhenSafe follows one key through
// writes, flushes and a range deletion: a version read goes to the SSTs
// alone exactly when no memtable can hold a record of the key, and always
// returns what the full view holds (under -race or -tags invariants,
// every SST-only read is also compared with the full view).
func TestVersionReadsSkipMemtablesOnlyWhenSafe(t *testing.T) {
	e := newMemtableSkipEnv(t, false)
	stats := func() (skips, full uint64) {
		s := e.rw.Stats()
		return s.MemtableSkips, s.FullReads
	}
	expect := func(key, want string, wantSkip bool) {
		t.Helper()
		s0, f0 := stats()
		if got := e.get(key); got != want {
			t.Fatalf("get(%s) = %q, want %q", key, got, want)
		}
		s1, f1 := stats()
		if skipped := s1 > s0; skipped != wantSkip || s1-s0+f1-f0 != 1 {
			t.Fatalf("get(%s): %d SST-only and %d full reads, want SST-only %v", key, s1-s0, f1-f0, wantSkip)
		}
	}

	expect("a", "<absent>", true) // nothing applied since open
	e.put("a", "v1", 100)
	expect("a", "v1", false) // in the memtable
	e.flush()
	expect("a", "v1", true)
	e.put("a", "v2", 200)
	expect("a", "v2", false) // the SSTs still say v1
	e.put("b", "b1", 210)
	e.flush()
	expect("a", "v2", true)
	expect("b", "b1", true)
	expect("never", "<absent>", true)

	// A range deletion in a memtable hides records the SSTs still hold:
	// until it is flushed, every version read searches the memtables.
	b := e.db.NewBatch()
	lo, hi := cfBounds(writeCF, []byte("a"), []byte("c"))
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		t.Fatal(err)
	}
	e.apply(b)
	expect("a", "<absent>", false)
	expect("never", "<absent>", false)
	e.flush()
	expect("a", "<absent>", true)
	expect("b", "<absent>", true)

	// A flush the engine made on its own, not reported, changes nothing.
	e.put("c", "c1", 300)
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	expect("c", "c1", false)
}

// TestVersionReadsUnderConcurrentAppliesAndFlushes has writers apply new
// versions of a few keys while readers read them and a flusher flushes
// through the table: a read must return a version at least as new as the
// newest one applied before the read began. Under -race every SST-only
// read is also checked against the full view.
func TestVersionReadsUnderConcurrentAppliesAndFlushes(t *testing.T) {
	for _, withCache := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", withCache), func(t *testing.T) {
			e := newMemtableSkipEnv(t, withCache)
			const keys = 16
			var applied [keys]atomic.Uint64 // newest version applied per key
			var ts atomic.Uint64
			ts.Store(1000)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { // writer
				defer wg.Done()
				r := rand.New(rand.NewSource(1))
				for {
					select {
					case <-stop:
						return
					default:
					}
					k := r.Intn(keys)
					v := ts.Add(10)
					e.put(fmt.Sprintf("k%02d", k), fmt.Sprint(v), v)
					applied[k].Store(v)
				}
			}()
			go func() { // flusher
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					e.flush()
				}
			}()
			r := rand.New(rand.NewSource(2))
			for i := 0; i < 3000; i++ {
				k := r.Intn(keys)
				floor := applied[k].Load()
				got := e.get(fmt.Sprintf("k%02d", k))
				var v uint64
				if got != "<absent>" {
					if _, err := fmt.Sscan(got, &v); err != nil {
						t.Fatal(err)
					}
				}
				if v < floor {
					close(stop)
					wg.Wait()
					t.Fatalf("k%02d read version %d after %d was applied", k, v, floor)
				}
			}
			close(stop)
			wg.Wait()
			if s := e.rw.Stats(); s.MemtableSkips == 0 || s.FullReads == 0 {
				t.Fatalf("reads took one path only: %+v", s)
			}
		})
	}
}
