package mvcc

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// memtableSkipEnv is cacheHarness (a KV engine without a WAL written the
// way the apply path writes it) with a recent-write table attached, and
// flushes reported to it as the store reports them.
type memtableSkipEnv struct {
	*cacheHarness
	rw *RecentWrites
	mu sync.Mutex // serializes applies and flush requests, as the store loop does
}

func newMemtableSkipEnv(t *testing.T, withCache bool) *memtableSkipEnv {
	t.Helper()
	capacity := int64(0)
	if withCache {
		capacity = 1 << 20
	}
	h := newCacheHarness(t, capacity)
	rw, err := LoadRecentWrites(h.db)
	if err != nil {
		t.Fatal(err)
	}
	h.locks.SetRecentWrites(rw)
	return &memtableSkipEnv{cacheHarness: h, rw: rw}
}

// put commits key = value at commitTS in one phase.
func (e *memtableSkipEnv) put(key, value string, commitTS uint64) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onePC(key, value, commitTS-1, commitTS)
}

// deleteRange applies a range deletion over the write records of
// [start, end).
func (e *memtableSkipEnv) deleteRange(start, end string) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	lo, hi := cfBounds(writeCF, []byte(start), []byte(end))
	if err := e.apply(func(_ pebble.Reader, b *pebble.Batch) error { return b.DeleteRange(lo, hi, nil) }); err != nil {
		e.t.Fatal(err)
	}
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

func (e *memtableSkipEnv) read(key string) string {
	e.t.Helper()
	if v := e.get(key, math.MaxUint64>>1); v != "<none>" {
		return v
	}
	return "<absent>"
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
		if got := e.read(key); got != want {
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
	e.deleteRange("a", "c")
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
			// Reads start once the writer runs, and go on for at least
			// 3000 reads and 200 more applied versions, until reads have
			// taken both paths (without a cache) or a deadline passes.
			writes := func() uint64 { return ts.Load() / 10 }
			for writes() < 100+50 {
				runtime.Gosched()
			}
			startWrites := writes()
			deadline := time.Now().Add(10 * time.Second)
			done := func(i int) bool {
				if i < 3000 || writes() < startWrites+200 {
					return false
				}
				s := e.rw.Stats()
				return withCache || (s.MemtableSkips > 0 && s.FullReads > 0)
			}
			r := rand.New(rand.NewSource(2))
			for i := 0; !done(i) && time.Now().Before(deadline); i++ {
				if i%16 == 0 {
					runtime.Gosched() // let the writer and the flusher in
				}
				k := r.Intn(keys)
				floor := applied[k].Load()
				got := e.read(fmt.Sprintf("k%02d", k))
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
			if s := e.rw.Stats(); writes() < startWrites+200 || (!withCache && (s.MemtableSkips == 0 || s.FullReads == 0)) {
				t.Fatalf("not concurrent enough: %d versions applied during the reads, %+v", writes()-startWrites, s)
			}
		})
	}
}
