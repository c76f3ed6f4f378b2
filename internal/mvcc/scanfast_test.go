package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// loadTable commits, through one-phase commits of 1000 keys, n keys at
// ts 10 with values of about 190 bytes (a sysbench row), flushed and
// compacted as a loaded table is.
func loadTable(tb testing.TB, db *pebble.DB, n int) {
	tb.Helper()
	val := bytes.Repeat([]byte("x"), 190)
	for lo := 0; lo < n; lo += 1000 {
		var ms []*kvpb.Mutation
		for i := lo; i < min(lo+1000, n); i++ {
			ms = append(ms, &kvpb.Mutation{Op: kvpb.Op_Put, Key: fmt.Appendf(nil, "t%08d", i), Value: val})
		}
		b := db.NewBatch()
		errs, err := OnePC(db, b, &kvpb.PrewriteRequest{PrimaryLock: ms[0].Key, StartVersion: 9, LockTtl: 1000, Mutations: ms}, 10)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err == nil {
			err = b.Commit(pebble.NoSync)
		}
		b.Close()
		if err != nil {
			tb.Fatal(err)
		}
	}
	if err := db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkScanValuesTable is COUNT(*) over a table of 100,000 rows
// without locks: the coprocessor's scan of an aggregation.
func BenchmarkScanValuesTable(b *testing.B) {
	db, ls := openServerEngine(b)
	const n = 100_000
	loadTable(b, db, n)
	r := ls.Reader(db)
	b.ResetTimer()
	for range b.N {
		count := 0
		if err := ScanValues(r, []byte("t"), []byte("u"), 0, 30, false, func(_ *ScanKey, _ []byte) error { count++; return nil }); err != nil || count != n {
			b.Fatal(count, err)
		}
	}
}

// openServerEngine is openLockSetEngine with the store's engine options
// (block size, cache, compression, table format), for benchmarks.
func openServerEngine(tb testing.TB) (*pebble.DB, *LockSet) {
	tb.Helper()
	db, err := engine.Open("", engine.Options{InMemory: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	ls, err := LoadLockSet(db)
	if err != nil {
		tb.Fatal(err)
	}
	return db, ls
}

// scanHistory writes a random history over keys (which include zero bytes
// and keys that are prefixes of others, so that the engine's escaping
// matters): one-phase and two-phase puts and deletes, committed lock
// records, rolled-back transactions, keys with more versions than a scan
// steps over, values stored in the data column family, and locks left
// pending (put, delete, lock and pessimistic, some above the read
// timestamps). Batches pass through the lock set as the store applies
// them. It returns the largest timestamp used.
func scanHistory(t *testing.T, rng *rand.Rand, db *pebble.DB, ls *LockSet, keys [][]byte, base uint64) uint64 {
	t.Helper()
	apply := func(fn func(b *pebble.Batch) error) {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		if err := fn(b); err != nil {
			t.Fatal(err)
		}
		if err := ls.BeforeApply(b.Repr()); err != nil {
			t.Fatal(err)
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := ls.AfterApply(b.Repr()); err != nil {
			t.Fatal(err)
		}
	}
	joined := func(errs []error, err error) error {
		if err == nil {
			err = errors.Join(errs...)
		}
		return err
	}
	pending := map[string]bool{} // keys left locked: no later writes
	value := func(i int) []byte {
		if rng.IntN(10) == 0 {
			return bytes.Repeat([]byte{byte('A' + i%26)}, maxShortValue+1) // in the data CF
		}
		return fmt.Appendf(nil, "v%d", i)
	}
	// Keys whose only record is a lock that blocks no read: a Lock-type
	// lock, and a put whose min commit ts is above every read.
	for i, op := range []kvpb.Op{kvpb.Op_Lock, kvpb.Op_Put} {
		k := keys[rng.IntN(len(keys))]
		if pending[string(k)] {
			continue
		}
		req := &kvpb.PrewriteRequest{PrimaryLock: k, StartVersion: uint64(11 + i), LockTtl: 3000, MinCommitTs: 1 << 40,
			Mutations: []*kvpb.Mutation{{Op: op, Key: k, Value: value(0)}}}
		if op == kvpb.Op_Lock {
			req.Mutations[0].Value = nil
		}
		apply(func(b *pebble.Batch) error { return joined(Prewrite(db, b, req)) })
		pending[string(k)] = true
	}
	ts := base + 10
	for round := 0; round < 60; round++ {
		ts += 10
		var ms []*kvpb.Mutation
		var mkeys [][]byte
		for _, k := range keys {
			if pending[string(k)] || rng.IntN(4) != 0 {
				continue
			}
			op := kvpb.Op_Put
			switch rng.IntN(6) {
			case 0:
				op = kvpb.Op_Del
			case 1:
				op = kvpb.Op_Lock
			}
			m := &kvpb.Mutation{Op: op, Key: k}
			if op == kvpb.Op_Put {
				m.Value = value(round)
			}
			ms = append(ms, m)
			mkeys = append(mkeys, k)
		}
		if len(ms) == 0 {
			continue
		}
		req := &kvpb.PrewriteRequest{PrimaryLock: ms[0].Key, StartVersion: ts, LockTtl: 3000, Mutations: ms}
		switch mode := rng.IntN(10); {
		case mode < 4: // one-phase commit
			apply(func(b *pebble.Batch) error { return joined(OnePC(db, b, req, ts+1)) })
		case mode < 7: // two-phase commit
			apply(func(b *pebble.Batch) error { return joined(Prewrite(db, b, req)) })
			apply(func(b *pebble.Batch) error { return Commit(db, b, mkeys, ts, ts+2) })
		case mode < 9: // rolled back
			apply(func(b *pebble.Batch) error { return joined(Prewrite(db, b, req)) })
			apply(func(b *pebble.Batch) error { return Rollback(db, b, mkeys, ts) })
		default: // left pending, on a few keys
			req.Mutations = ms[:min(len(ms), 3)]
			apply(func(b *pebble.Batch) error { return joined(Prewrite(db, b, req)) })
			for _, m := range req.Mutations {
				pending[string(m.Key)] = true
			}
		}
	}
	// A key with many versions above the later read timestamps.
	hot := keys[rng.IntN(len(keys))]
	if !pending[string(hot)] {
		for i := 0; i < 2*maxVersionSteps+3; i++ {
			ts += 2
			req := &kvpb.PrewriteRequest{PrimaryLock: hot, StartVersion: ts, LockTtl: 3000,
				Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: hot, Value: value(i)}}}
			apply(func(b *pebble.Batch) error { return joined(OnePC(db, b, req, ts+1)) })
		}
	}
	// Pessimistic locks never block readers.
	for _, k := range keys {
		if !pending[string(k)] && rng.IntN(20) == 0 {
			ts += 2
			apply(func(b *pebble.Batch) error {
				errs, _, err := PessimisticLock(db, b, &kvpb.PessimisticLockRequest{PrimaryLock: k, StartVersion: ts, ForUpdateTs: ts, LockTtl: 3000,
					Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: k}}})
				return joined(errs, err)
			})
			pending[string(k)] = true
		}
	}
	return ts
}

// expectScan is what a scan of keys (sorted, in [start, end)) at readTS must
// return, from Get per key: the pairs in scan order up to limit (0: all),
// and the key of the first lock that must stop it (nil: none).
func expectScan(t *testing.T, r pebble.Reader, keys [][]byte, readTS uint64, limit int, reverse bool) (pairs []string, locked []byte) {
	t.Helper()
	n := len(keys)
	for i := range n {
		k := keys[i]
		if reverse {
			k = keys[n-1-i]
		}
		if limit > 0 && len(pairs) == limit {
			break
		}
		v, found, err := Get(r, k, readTS, nil)
		var le *LockedError
		if errors.As(err, &le) {
			return pairs, k
		}
		if err != nil {
			t.Fatal(err)
		}
		if found {
			pairs = append(pairs, fmt.Sprintf("%x=%x", k, v))
		}
	}
	return pairs, nil
}

// Every way of scanning (ScanFunc, ScanValues, Scan with a limit, RangeScan;
// forward and reverse; with and without the lock set's index) returns, for
// random histories and read timestamps, what Get returns key by key: no key
// dropped or returned twice, no deleted or rolled-back value, no version
// above the read timestamp, and a blocking lock fails the scan at its key
// after exactly the pairs before it.
func TestScanMatchesGet(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 22))
		db, ls := openLockSetEngine(t)
		alphabet := []byte{0, 1, 'a', 0xff}
		seen := map[string]bool{}
		var keys [][]byte
		for len(keys) < 60 {
			k := []byte{'k'}
			for range rng.IntN(4) {
				k = append(k, alphabet[rng.IntN(len(alphabet))])
			}
			if !seen[string(k)] {
				seen[string(k)] = true
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, bytes.Compare)
		// Timestamps from 10 (one-byte varints in the records, which
		// the scan's inline fast path leaves to the general one for
		// short values) or from a TSO's range, as in production.
		base := uint64(0)
		if seed%4 >= 2 {
			base = ComposeTS(1_800_000_000_000, 0)
		}
		maxTS := scanHistory(t, rng, db, ls, keys, base)
		if seed%2 == 0 {
			if err := db.Flush(); err != nil { // some histories in SSTs, some in the memtable
				t.Fatal(err)
			}
		}
		for probe := 0; probe < 40; probe++ {
			readTS := base + 5 + uint64(rng.Int64N(int64(maxTS-base)))
			lo, hi := rng.IntN(len(keys)), rng.IntN(len(keys)+1)
			if lo > hi {
				lo, hi = hi, lo
			}
			start, end := keys[lo], []byte(nil)
			if hi < len(keys) {
				end = keys[hi]
			}
			in := keys[lo:hi]
			if probe%5 == 0 { // from the start of the keyspace
				start, in = []byte("k"), keys[:hi]
			}
			limit := 0
			if probe%3 == 0 {
				limit = 1 + rng.IntN(8)
			}
			for _, reverse := range []bool{false, true} {
				for _, indexed := range []bool{false, true} {
					var r pebble.Reader = db
					if indexed {
						r = ls.Reader(db)
					}
					name := fmt.Sprintf("seed %d probe %d [%x, %x) at %d limit %d reverse %v indexed %v", seed, probe, start, end, readTS, limit, reverse, indexed)
					want, wantLock := expectScan(t, r, in, readTS, limit, reverse)
					check := func(how string, got []string, err error) {
						t.Helper()
						var le *LockedError
						switch {
						case wantLock != nil && (!errors.As(err, &le) || !bytes.Equal(le.Lock.Key, wantLock)):
							t.Fatalf("%s, %s: error %v, want the lock on %x", name, how, err, wantLock)
						case wantLock == nil && err != nil:
							t.Fatalf("%s, %s: %v", name, how, err)
						case fmt.Sprint(got) != fmt.Sprint(want):
							t.Fatalf("%s, %s:\n got %v\nwant %v", name, how, got, want)
						}
					}
					var got []string
					err := ScanFunc(r, start, end, limit, readTS, reverse, func(k, v []byte) error {
						got = append(got, fmt.Sprintf("%x=%x", k, v))
						return nil
					})
					check("ScanFunc", got, err)
					// ScanValues: keys asked for on every other pair only.
					got, i := nil, 0
					err = ScanValues(r, start, end, limit, readTS, reverse, func(sk *ScanKey, v []byte) error {
						if i++; i%2 == 0 {
							k, err := sk.Key()
							if err != nil {
								return err
							}
							got = append(got, fmt.Sprintf("%x=%x", k, v))
							return nil
						}
						got = append(got, fmt.Sprintf("?=%x", v))
						return nil
					})
					for j := range got {
						if j%2 == 0 && len(want) > j {
							got[j] = want[j][:strings.IndexByte(want[j], '=')] + got[j][1:]
						}
					}
					check("ScanValues", got, err)
					if limit == 0 && !reverse {
						n, _, err := Count(r, start, end, readTS)
						got = want
						if n != len(want) {
							got = []string{fmt.Sprintf("%d pairs", n)}
						}
						check("Count", got, err)
					}
					if limit > 0 {
						pairs, err := Scan(r, start, end, limit, readTS, reverse)
						got = nil
						for _, p := range pairs {
							got = append(got, fmt.Sprintf("%x=%x", p.Key, p.Value))
						}
						if wantLock != nil {
							got = want // Scan returns no pairs with its error
						}
						check("Scan", got, err)
						continue
					}
					// The same range cut in two, through one RangeScan.
					mid := keys[lo+(hi-lo)/2]
					if bytes.Compare(mid, start) <= 0 {
						continue
					}
					rs, err := OpenRanges(r, [][2][]byte{{start, mid}, {mid, end}})
					if err != nil {
						t.Fatal(err)
					}
					got = nil
					fn := func(k, v []byte) error { got = append(got, fmt.Sprintf("%x=%x", k, v)); return nil }
					order := []int{0, 1}
					if reverse {
						order = []int{1, 0}
					}
					for _, ri := range order {
						if err = rs.ScanFunc(ri, readTS, reverse, fn); err != nil {
							break
						}
					}
					if !reverse && err == nil {
						var n0, n1 int
						if n0, _, err = rs.Count(0, readTS); err == nil {
							n1, _, err = rs.Count(1, readTS)
						}
						if n0+n1 != len(got) && err == nil {
							got = append(got, fmt.Sprintf("RangeScan.Count: %d+%d pairs", n0, n1))
						}
					}
					rs.Close()
					check("RangeScan", got, err)
				}
			}
		}
	}
}

// BenchmarkScanValuesTableLocked is BenchmarkScanValuesTable with a lock
// in the range (a transaction started after the read): the scan merges
// the lock iterator's keys with the records'.
func BenchmarkScanValuesTableLocked(b *testing.B) {
	db, ls := openServerEngine(b)
	const n = 100_000
	loadTable(b, db, n)
	k := fmt.Appendf(nil, "t%08d", n/2)
	batch := db.NewBatch()
	errs, err := Prewrite(db, batch, &kvpb.PrewriteRequest{PrimaryLock: k, StartVersion: 40, LockTtl: 3000,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: k, Value: []byte("new")}}})
	if err == nil {
		err = errors.Join(errs...)
	}
	if err == nil {
		err = db.Apply(batch, pebble.NoSync)
	}
	if err == nil {
		err = ls.AfterApply(batch.Repr())
	}
	if err != nil {
		b.Fatal(err)
	}
	r := ls.Reader(db)
	b.ResetTimer()
	for range b.N {
		count := 0
		if err := ScanValues(r, []byte("t"), []byte("u"), 0, 30, false, func(_ *ScanKey, _ []byte) error { count++; return nil }); err != nil || count != n {
			b.Fatal(count, err)
		}
	}
}

// inlineWrite agrees with decodeWrite on every record it accepts, and
// accepts the records a table scan meets: puts with inline values and
// deletes, with start ts of any varint length.
func TestInlineWriteMatchesDecodeWrite(t *testing.T) {
	check := func(b []byte, encoded bool) {
		t.Helper()
		kind, value, ok := inlineWrite(b)
		w, err := decodeWrite(b)
		if !ok {
			if encoded && len(b) >= 11 && ((w.kind == writeDelete && !w.hasValue) || (w.kind == writePut && w.hasValue)) {
				t.Fatalf("%x: refused a %v record decodeWrite reads", b, w.kind)
			}
			return
		}
		if err != nil || kind != w.kind || (kind == writePut && !w.hasValue) || !bytes.Equal(value, w.value) {
			t.Fatalf("%x: inlineWrite %v %x, decodeWrite %+v %v", b, kind, value, w, err)
		}
	}
	for _, startTS := range []uint64{0, 1, 127, 128, 1 << 20, 1 << 55, 1<<56 - 1, 1 << 56, ComposeTS(1_800_000_000_000, 5), 1<<63 - 1, 1 << 63, 1<<64 - 1} {
		for _, w := range []write{
			{kind: writePut, startTS: startTS, hasValue: true, value: []byte("value")},
			{kind: writePut, startTS: startTS, hasValue: true},
			{kind: writePut, startTS: startTS},
			{kind: writeDelete, startTS: startTS},
			{kind: writeDelete, startTS: startTS, overlappedRollback: true},
			{kind: writeLock, startTS: startTS},
			{kind: writeRollback, startTS: startTS},
		} {
			b := w.encode()
			// Start ts from 1<<63 up take 10 varint bytes: refused.
			check(b, startTS < 1<<63)
			// Truncated and corrupted records.
			for i := range b {
				check(b[:i], false)
				c := slices.Clone(b)
				c[i] ^= 0x80
				check(c, false)
			}
		}
	}
}
