package mvcc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// A range deletion removes from the lock index exactly the locks whose
// engine keys it covers, wherever its bounds fall: inside the lock family,
// across it from a neighbouring family, or outside it.
func TestLockSetForgetsLocksOfRangeDeletions(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		name       string
		start, end []byte
		want       string
	}{
		{"inside the family", lockKey([]byte("b")), lockKey([]byte("d")), "a d e"},
		{"from the data family", []byte{Prefix, dataCF}, lockKey([]byte("c")), "c d e"},
		{"into the write family", lockKey([]byte("b\x00")), []byte{Prefix, writeCF, 'x'}, "a b"},
		{"the whole MVCC keyspace", []byte{Prefix}, []byte{Prefix + 1}, "(empty)"},
		{"the data family only", []byte{Prefix, dataCF}, []byte{Prefix, lockCF}, "a b c d e"},
		{"the write family only", []byte{Prefix, writeCF}, []byte{Prefix, writeCF + 1}, "a b c d e"},
		{"DestroyRange with no end", []byte("c"), nil, "a b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := LoadLockSet(db)
			if err != nil {
				t.Fatal(err)
			}
			b := db.NewBatch()
			for _, k := range []string{"a", "b", "c", "d", "e"} {
				if err := b.Set(lockKey([]byte(k)), []byte("lock"), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := ls.AfterApply(b.Repr()); err != nil {
				t.Fatal(err)
			}
			b.Close()
			b = db.NewBatch()
			defer b.Close()
			if tc.end == nil {
				err = DestroyRange(b, tc.start, tc.end)
			} else {
				err = b.DeleteRange(tc.start, tc.end, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := ls.AfterApply(b.Repr()); err != nil {
				t.Fatal(err)
			}
			if got := dumpLockSet(ls); got != tc.want {
				t.Fatalf("lock index after deleting [%q, %q): %s, want %s", tc.start, tc.end, got, tc.want)
			}
			if tc.want == "(empty)" && ls.n.Load() != 0 {
				t.Fatalf("empty index counts %d locks", ls.n.Load())
			}
		})
	}
}

// iterCounter counts the iterators a read opens.
type iterCounter struct {
	pebble.Reader
	iters int
}

func (r *iterCounter) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	r.iters++
	return r.Reader.NewIter(o)
}

// openLockSetEngine opens an empty in-memory engine, closed with the test,
// and its lock set.
func openLockSetEngine(t testing.TB) (*pebble.DB, *LockSet) {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ls, err := LoadLockSet(db)
	if err != nil {
		t.Fatal(err)
	}
	return db, ls
}

// A scan through LockSet.Reader opens no lock iterator when the set holds
// no lock in the scanned range, and still meets every lock in it.
func TestScanSkipsTheLockIteratorWhenTheLockSetHasNoneInRange(t *testing.T) {
	db, ls := openLockSetEngine(t)
	apply := func(fn func(b *pebble.Batch) error) {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		if err := fn(b); err != nil {
			t.Fatal(err)
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := ls.AfterApply(b.Repr()); err != nil {
			t.Fatal(err)
		}
	}
	prewrite := func(startTS uint64, keys ...string) {
		t.Helper()
		var ms []*kvpb.Mutation
		for _, k := range keys {
			ms = append(ms, &kvpb.Mutation{Op: kvpb.Op_Put, Key: []byte(k), Value: []byte("v" + k)})
		}
		apply(func(b *pebble.Batch) error {
			errs, err := Prewrite(db, b, &kvpb.PrewriteRequest{PrimaryLock: []byte(keys[0]), StartVersion: startTS, LockTtl: 3000, Mutations: ms})
			if err == nil {
				err = errors.Join(errs...)
			}
			return err
		})
	}
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	prewrite(10, keys...)
	apply(func(b *pebble.Batch) error {
		var ks [][]byte
		for _, k := range keys {
			ks = append(ks, []byte(k))
		}
		return Commit(db, b, ks, 10, 11)
	})

	scan := func(start, end string) (pairs int, iters int, err error) {
		r := &iterCounter{Reader: db}
		ps, err := Scan(ls.Reader(r), []byte(start), []byte(end), 0, 30, false)
		return len(ps), r.iters, err
	}
	check := func(start, end string, wantPairs, wantIters int, wantLocked bool) {
		t.Helper()
		n, iters, err := scan(start, end)
		var le *LockedError
		if locked := errors.As(err, &le); locked != wantLocked || (err != nil && !locked) {
			t.Fatalf("scan [%s, %s): %v, want locked=%v", start, end, err, wantLocked)
		}
		if !wantLocked && n != wantPairs {
			t.Errorf("scan [%s, %s): %d pairs, want %d", start, end, n, wantPairs)
		}
		if iters != wantIters {
			t.Errorf("scan [%s, %s) opened %d iterators, want %d", start, end, iters, wantIters)
		}
	}
	check("k1", "", 5, 1, false) // no lock anywhere: the write iterator only

	prewrite(20, "k3") // a lock that blocks a read at 30
	check("k1", "k3", 2, 1, false)
	check("k4", "", 2, 1, false)
	check("k3", "k4", 0, 2, true)
	check("k1", "", 0, 2, true)

	// With more locks than the set looks at one by one, it cannot tell.
	var many []string
	for i := range maxLockSetScan {
		many = append(many, fmt.Sprintf("x%03d", i))
	}
	prewrite(21, many...)
	check("k1", "k3", 2, 2, false)
}

// Scan through a LockSet reader counts the keys with committed versions it
// read (the store's early-flush rule watches the count); scans of other
// readers are not counted.
func TestLockSetCountsScannedKeys(t *testing.T) {
	db, ls := openLockSetEngine(t)
	b := db.NewBatch()
	req := &kvpb.PrewriteRequest{PrimaryLock: []byte("a"), StartVersion: 10, LockTtl: 1000}
	for _, k := range []string{"a", "b", "c", "d"} {
		req.Mutations = append(req.Mutations, &kvpb.Mutation{Op: kvpb.Op_Put, Key: []byte(k), Value: []byte("v" + k)})
	}
	errs, err := OnePC(db, b, req, 11)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Scan(db, []byte("a"), nil, 0, 20, false); err != nil {
		t.Fatal(err)
	}
	if got := ls.ScannedKeys(); got != 0 {
		t.Fatalf("a scan of the engine itself counted %d keys", got)
	}
	pairs, err := Scan(ls.Reader(db), []byte("b"), []byte("zz"), 2, 20, false)
	if err != nil || len(pairs) != 2 {
		t.Fatal(pairs, err)
	}
	if got := ls.ScannedKeys(); got != 2 {
		t.Fatalf("ScannedKeys = %d after reading 2 keys, want 2", got)
	}
	if _, err := Scan(ls.Reader(db), []byte("a"), nil, 0, 20, true); err != nil {
		t.Fatal(err)
	}
	if got := ls.ScannedKeys(); got != 6 {
		t.Fatalf("ScannedKeys = %d after reading 2 + 4 keys, want 6", got)
	}
}

// RangeScan reads each of several ranges as ScanFunc and ScanValues do,
// forward and backward, over several versions, deletions and a lock,
// through one write iterator (and one lock iterator only when the lock set
// may hold a lock in some range).
func TestRangeScanReadsEachRangeAsScanFunc(t *testing.T) {
	db, ls := openLockSetEngine(t)
	apply := func(fn func(b *pebble.Batch) error) {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		if err := fn(b); err != nil {
			t.Fatal(err)
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := ls.AfterApply(b.Repr()); err != nil {
			t.Fatal(err)
		}
	}
	write := func(startTS, commitTS uint64, op kvpb.Op, keys ...string) {
		t.Helper()
		var ms []*kvpb.Mutation
		var ks [][]byte
		for _, k := range keys {
			ms = append(ms, &kvpb.Mutation{Op: op, Key: []byte(k), Value: []byte(fmt.Sprintf("%s@%d", k, startTS))})
			ks = append(ks, []byte(k))
		}
		apply(func(b *pebble.Batch) error {
			errs, err := Prewrite(db, b, &kvpb.PrewriteRequest{PrimaryLock: ks[0], StartVersion: startTS, LockTtl: 3000, Mutations: ms})
			if err == nil {
				err = errors.Join(errs...)
			}
			return err
		})
		if commitTS > 0 {
			apply(func(b *pebble.Batch) error { return Commit(db, b, ks, startTS, commitTS) })
		}
	}
	var all, odd, tens []string
	for i := range 60 {
		k := fmt.Sprintf("k%02d", i)
		all = append(all, k)
		if i%2 == 1 {
			odd = append(odd, k)
		}
		if i%10 == 0 {
			tens = append(tens, k)
		}
	}
	write(10, 11, kvpb.Op_Put, all...)
	write(12, 13, kvpb.Op_Put, odd...)  // a newer version
	write(14, 15, kvpb.Op_Del, tens...) // deleted
	write(40, 41, kvpb.Op_Put, "k05")   // after the read
	ranges := [][2][]byte{{[]byte("k00"), []byte("k03")}, {[]byte("k05"), []byte("k05\x00")}, {[]byte("k09"), []byte("k22")},
		{[]byte("k30"), []byte("k31")}, {[]byte("k40"), nil}}
	const readTS = 30

	read := func(r pebble.Reader, reverse, values bool) (string, int) {
		t.Helper()
		c := &iterCounter{Reader: r}
		m, err := OpenRanges(ls.Reader(c), ranges)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		var sb strings.Builder
		for i := range ranges {
			if reverse {
				i = len(ranges) - 1 - i
			}
			var err error
			if values {
				err = m.ScanValues(i, readTS, reverse, func(k *ScanKey, v []byte) error {
					key, err := k.Key()
					fmt.Fprintf(&sb, "%s=%s ", key, v)
					return err
				})
			} else {
				err = m.ScanFunc(i, readTS, reverse, func(k, v []byte) error {
					fmt.Fprintf(&sb, "%s=%s ", k, v)
					return nil
				})
			}
			var le *LockedError
			if errors.As(err, &le) {
				fmt.Fprintf(&sb, "locked(%s) ", le.Lock.Key)
			} else if err != nil {
				t.Fatal(err)
			}
			sb.WriteString("| ")
		}
		return sb.String(), c.iters
	}
	want := func(reverse bool) string {
		var sb strings.Builder
		for i := range ranges {
			if reverse {
				i = len(ranges) - 1 - i
			}
			err := ScanFunc(ls.Reader(db), ranges[i][0], ranges[i][1], 0, readTS, reverse, func(k, v []byte) error {
				fmt.Fprintf(&sb, "%s=%s ", k, v)
				return nil
			})
			var le *LockedError
			if errors.As(err, &le) {
				fmt.Fprintf(&sb, "locked(%s) ", le.Lock.Key)
			} else if err != nil {
				t.Fatal(err)
			}
			sb.WriteString("| ")
		}
		return sb.String()
	}
	check := func(wantIters int) {
		t.Helper()
		for _, reverse := range []bool{false, true} {
			w := want(reverse)
			for _, values := range []bool{false, true} {
				got, iters := read(db, reverse, values)
				if got != w {
					t.Errorf("reverse %v, values %v:\ngot  %s\nwant %s", reverse, values, got, w)
				}
				if iters != wantIters {
					t.Errorf("reverse %v, values %v: %d iterators, want %d", reverse, values, iters, wantIters)
				}
			}
		}
	}
	check(1)
	if got := want(false); !strings.Contains(got, "k01=k01@12 k02=k02@10 |") || strings.Contains(got, "k10=") || !strings.Contains(got, "k05=k05@12 |") {
		t.Fatalf("unexpected reference read: %s", got)
	}
	write(20, 0, kvpb.Op_Put, "k15") // a lock that blocks the read
	check(2)
	if got, _ := read(db, false, false); !strings.Contains(got, "locked(k15)") || !strings.Contains(got, "| | k41=") {
		t.Fatalf("the lock is not met in its range only: %s", got)
	}
}
