package mvcc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Writers holding latches on a shared key never overlap: each key's
// "holders" count stays at one, and the race detector sees the plain
// (unsynchronized) counters only under the latches.
func TestLatchesSerializeWritersOnTheSameKeys(t *testing.T) {
	c := NewConcurrency()
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}
	var holders [4]atomic.Int32
	var counts [4]int // guarded only by the latches
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				// Overlapping sets in different orders: also checks for deadlock.
				x, y := (g+i)%4, (g+2*i+1)%4
				held := []int{x}
				if y != x {
					held = append(held, y)
				}
				guard := c.Acquire([][]byte{keys[x], keys[y], keys[x]})
				for _, k := range held {
					if holders[k].Add(1) != 1 {
						t.Errorf("two writers hold key %s", keys[k])
					}
					counts[k]++
				}
				for _, k := range held {
					holders[k].Add(-1)
				}
				guard.Release()
				guard.Release() // a second release is a no-op
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	if total < 8*300 {
		t.Fatalf("%d key updates, want at least %d", total, 8*300)
	}
}

func TestLatchGuardCanBeReleasedByAnotherGoroutine(t *testing.T) {
	c := NewConcurrency()
	g := c.Acquire([][]byte{[]byte("k")})
	acquired := make(chan struct{})
	go func() {
		c.Acquire([][]byte{[]byte("k")}).Release()
		close(acquired)
	}()
	select {
	case <-acquired:
		t.Fatal("a second writer got the latch while it was held")
	case <-time.After(20 * time.Millisecond):
	}
	go g.Release()
	<-acquired
}

func TestUpdateMaxTSOnlyRaises(t *testing.T) {
	c := NewConcurrency()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				c.UpdateMaxTS(uint64(i*4 + g))
			}
		}()
	}
	wg.Wait()
	if c.MaxTS() != 3999 {
		t.Fatalf("MaxTS = %d, want 3999", c.MaxTS())
	}
	c.UpdateMaxTS(5)
	if c.MaxTS() != 3999 {
		t.Fatal("UpdateMaxTS lowered MaxTS")
	}
}

// returnsWithin runs f and reports whether it returned within d, and its
// error if so.
func returnsWithin(d time.Duration, f func() error) (returned bool, err error, wait func() error) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return true, err, nil
	case <-time.After(d):
		return false, nil, func() error { return <-done }
	}
}

func TestMemoryLockBlocksReadersThatCouldSeeTheCommit(t *testing.T) {
	ctx := context.Background()
	c := NewConcurrency()
	k := []byte("k")
	m := c.LockMemory([][]byte{k}, 10)

	// Below the start ts: the commit is invisible whatever its ts.
	if ok, err, _ := returnsWithin(time.Second, func() error { return c.CheckReadKey(ctx, k, 9) }); !ok || err != nil {
		t.Fatal("reader below the start ts was blocked")
	}
	// Other keys and ranges without the key are free.
	if ok, _, _ := returnsWithin(time.Second, func() error { return c.CheckReadKey(ctx, []byte("j"), 50) }); !ok {
		t.Fatal("reader of another key was blocked")
	}
	if ok, _, _ := returnsWithin(time.Second, func() error { return c.CheckReadRange(ctx, []byte("a"), k, 50) }); !ok {
		t.Fatal("range ending at the key was blocked")
	}
	if ok, _, _ := returnsWithin(time.Second, func() error { return c.CheckReadRange(ctx, []byte("k\x00"), nil, 50) }); !ok {
		t.Fatal("range after the key was blocked")
	}

	// Commit ts not chosen yet: any reader at or above the start ts waits.
	ok, _, waitPoint := returnsWithin(20*time.Millisecond, func() error { return c.CheckReadKey(ctx, k, 10) })
	if ok {
		t.Fatal("point reader at the start ts was not blocked")
	}
	ok, _, waitRange := returnsWithin(20*time.Millisecond, func() error { return c.CheckReadRange(ctx, []byte("a"), nil, 30) })
	if ok {
		t.Fatal("unbounded range reader was not blocked")
	}

	// Commit ts 20: readers below it stop waiting, readers at it still wait.
	m.SetCommitTS(20)
	if ok, _, _ := returnsWithin(time.Second, func() error { return c.CheckReadKey(ctx, k, 19) }); !ok {
		t.Fatal("reader below the commit ts was blocked")
	}
	ok, _, waitAtCommit := returnsWithin(20*time.Millisecond, func() error { return c.CheckReadRange(ctx, k, []byte("l"), 20) })
	if ok {
		t.Fatal("reader at the commit ts was not blocked")
	}

	// A waiting reader honours its context.
	cctx, cancel := context.WithCancel(ctx)
	ok, _, waitCancelled := returnsWithin(20*time.Millisecond, func() error { return c.CheckReadKey(cctx, k, 25) })
	if ok {
		t.Fatal("reader was not blocked")
	}
	cancel()
	if err := waitCancelled(); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reader returned %v", err)
	}

	m.Release()
	m.Release()
	for _, wait := range []func() error{waitPoint, waitRange, waitAtCommit} {
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}
	if c.memLocks.live.Load() != 0 || c.memLocks.tree.Len() != 0 {
		t.Fatal("released memory lock left state behind")
	}
}

// TestOnePhaseCommitIsSnapshotIsolated runs one-phase committers that take
// their commit ts from MaxTS (as the KV service does) against readers, over
// a simulated engine, and checks snapshot isolation: every read at readTS
// sees exactly the commits with commit ts <= readTS, including commits that
// were still in flight when the reader arrived.
func TestOnePhaseCommitIsSnapshotIsolated(t *testing.T) {
	c := NewConcurrency()
	var tso atomic.Uint64 // a timestamp oracle
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}

	var engineMu sync.Mutex
	committed := map[string][]uint64{} // key -> commit timestamps applied

	type read struct {
		key    string
		readTS uint64
		seen   int // number of commits at or below readTS it saw
	}
	var readsMu sync.Mutex
	var reads []read

	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := keys[(w+i)%len(keys)]
				startTS := tso.Add(1)
				g := c.Acquire([][]byte{k})
				m := c.LockMemory([][]byte{k}, startTS)
				commitTS := max(c.MaxTS()+1, startTS+1)
				m.SetCommitTS(commitTS)
				time.Sleep(20 * time.Microsecond) // the Raft round trip: readers arrive meanwhile
				engineMu.Lock()                   // "apply"
				committed[string(k)] = append(committed[string(k)], commitTS)
				engineMu.Unlock()
				m.Release()
				g.Release()
			}
		}()
	}
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k := keys[(r+i)%len(keys)]
				readTS := tso.Add(1)
				c.UpdateMaxTS(readTS)
				var err error
				if i%2 == 0 {
					err = c.CheckReadKey(ctx, k, readTS)
				} else {
					err = c.CheckReadRange(ctx, keys[0], nil, readTS)
				}
				if err != nil {
					t.Error(err)
					return
				}
				engineMu.Lock() // "take a snapshot and read"
				n := 0
				for _, ts := range committed[string(k)] {
					if ts <= readTS {
						n++
					}
				}
				engineMu.Unlock()
				readsMu.Lock()
				reads = append(reads, read{string(k), readTS, n})
				readsMu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, rd := range reads {
		n := 0
		for _, ts := range committed[rd.key] {
			if ts <= rd.readTS {
				n++
			}
		}
		if n != rd.seen {
			t.Fatalf("read of %s at %d saw %d commits at or below its ts; %d exist", rd.key, rd.readTS, rd.seen, n)
		}
	}
	if len(reads) != 900 {
		t.Fatalf("%d reads, want 900", len(reads))
	}
}
