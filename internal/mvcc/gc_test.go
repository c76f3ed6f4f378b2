package mvcc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// gcHistory builds a random history of transactions over a few keys,
// through the protocol functions, and returns the highest ts used.
func gcHistory(t *testing.T, db *pebble.DB, rng *rand.Rand, keys [][]byte, base uint64) uint64 {
	t.Helper()
	ts := base + 10
	apply := func(fn func(r pebble.Reader, b *pebble.Batch) error) {
		snap := db.NewSnapshot()
		defer snap.Close()
		b := db.NewBatch()
		defer b.Close()
		if err := fn(snap, b); err != nil && !isKeyError(err) {
			t.Fatal(err)
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	randValue := func() []byte {
		if rng.IntN(4) == 0 {
			return bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, maxShortValue+1+rng.IntN(10))
		}
		return fmt.Appendf(nil, "v%d", ts)
	}
	locked := map[string]bool{}
	for range 30 + rng.IntN(40) {
		ts += 1 + uint64(rng.IntN(3))
		start := ts
		// A transaction over one or two keys that hold no lock.
		var ms []*kvpb.Mutation
		for _, k := range keys {
			if locked[string(k)] || rng.IntN(len(keys)) > 1 {
				continue
			}
			m := &kvpb.Mutation{Key: k}
			switch rng.IntN(6) {
			case 0:
				m.Op = kvpb.Op_Del
			case 1:
				m.Op = kvpb.Op_Lock
			default:
				m.Op, m.Value = kvpb.Op_Put, randValue()
			}
			ms = append(ms, m)
		}
		if len(ms) == 0 {
			continue
		}
		req := &kvpb.PrewriteRequest{PrimaryLock: ms[0].Key, StartVersion: start, Mutations: ms, LockTtl: 100}
		keysOf := make([][]byte, len(ms))
		for i, m := range ms {
			keysOf[i] = m.Key
		}
		ts++
		switch rng.IntN(5) {
		case 0:
			apply(func(r pebble.Reader, b *pebble.Batch) error { _, err := OnePC(r, b, req, ts); return err })
		case 1:
			apply(func(r pebble.Reader, b *pebble.Batch) error { _, err := Prewrite(r, b, req); return err })
			apply(func(r pebble.Reader, b *pebble.Batch) error { return Rollback(r, b, keysOf, start) })
		case 2:
			if rng.IntN(3) == 0 {
				// Left in place: a live transaction's locks.
				apply(func(r pebble.Reader, b *pebble.Batch) error { _, err := Prewrite(r, b, req); return err })
				for _, k := range keysOf {
					locked[string(k)] = true
				}
				continue
			}
			fallthrough
		default:
			apply(func(r pebble.Reader, b *pebble.Batch) error { _, err := Prewrite(r, b, req); return err })
			apply(func(r pebble.Reader, b *pebble.Batch) error { return Commit(r, b, keysOf, start, ts) })
		}
	}
	return ts
}

// readAll records every answer a reader at ts >= from can get: a Get of
// every key and scans in both directions, at every ts up to to.
func readAll(t *testing.T, r pebble.Reader, keys [][]byte, from, to uint64) string {
	t.Helper()
	var sb strings.Builder
	for ts := from; ts <= to; ts++ {
		for _, k := range keys {
			v, found, err := Get(r, k, ts, nil)
			fmt.Fprintf(&sb, "get %q@%d: %q %v %v\n", k, ts, v, found, err)
		}
		for _, rev := range []bool{false, true} {
			pairs, err := Scan(r, nil, nil, 0, ts, rev)
			fmt.Fprintf(&sb, "scan@%d rev=%v: %v", ts, rev, err)
			for _, p := range pairs {
				fmt.Fprintf(&sb, " %q=%q", p.Key, p.Value)
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// rawCF returns the engine entries of one column family, as text.
func rawCF(t *testing.T, r pebble.Reader, cf byte, filter func(k []byte) bool) string {
	t.Helper()
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{Prefix, cf}, UpperBound: []byte{Prefix, cf + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var sb strings.Builder
	for valid := it.First(); valid; valid = it.Next() {
		if filter == nil || filter(it.Key()) {
			fmt.Fprintf(&sb, "%q=%q\n", it.Key(), it.Value())
		}
	}
	return sb.String()
}

// Property: after GC at any safe point, in chunks of any size, every read
// at or above the safe point returns exactly what it returned before; the
// locks and all versions above the safe point are untouched; each key
// keeps at most one write record at or below the safe point, a Put; and
// no data-CF value is left without a record that points to it.
func TestGCPreservesReadsAtAndAboveSafePoint(t *testing.T) {
	keys := [][]byte{[]byte("a"), []byte("a\x00"), []byte("b"), []byte("c")}
	for seed := range uint64(150) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// Timestamps from 10 (one-byte varints in the records) or
			// from a TSO's range (nine bytes, as in production: the
			// records GC reads without decoding, inlineWrite).
			base := uint64(0)
			if seed%2 == 1 {
				base = ComposeTS(1_800_000_000_000, 0)
			}
			maxTS := gcHistory(t, db, rng, keys, base)
			sp := base + 1 + uint64(rng.IntN(int(maxTS-base)+2))
			above := func(k []byte) bool {
				_, ts, err := decodeWriteKey(k)
				return err == nil && ts > sp
			}
			wantReads := readAll(t, db, keys, sp, maxTS+1)
			wantLocks := rawCF(t, db, lockCF, nil)
			wantAbove := rawCF(t, db, writeCF, above)

			limit := rng.IntN(6) // 0: no bound
			var start []byte
			for calls := 0; ; calls++ {
				if calls > 10000 {
					t.Fatal("GC does not finish")
				}
				b := db.NewBatch()
				res, err := GC(db, b, start, nil, sp, limit)
				if err != nil {
					t.Fatal(err)
				}
				if limit > 0 && res.Versions+res.Values > limit+1 {
					t.Fatalf("one call deleted %d keys with limit %d", res.Versions+res.Values, limit)
				}
				if err := db.Apply(b, pebble.NoSync); err != nil {
					t.Fatal(err)
				}
				b.Close()
				if res.Resume == nil {
					break
				}
				start = res.Resume
			}

			if got := readAll(t, db, keys, sp, maxTS+1); got != wantReads {
				t.Fatalf("reads at or above safe point %d changed:\n%s", sp, diffLines(wantReads, got))
			}
			if got := rawCF(t, db, lockCF, nil); got != wantLocks {
				t.Fatalf("locks changed:\nbefore:\n%s\nafter:\n%s", wantLocks, got)
			}
			if got := rawCF(t, db, writeCF, above); got != wantAbove {
				t.Fatalf("versions above the safe point changed:\nbefore:\n%s\nafter:\n%s", wantAbove, got)
			}
			for _, k := range keys {
				n := 0
				err := forEachVersion(db, k, sp, func(_ uint64, w *write) (bool, error) {
					n++
					if w.kind != writePut {
						t.Errorf("key %q keeps a %s record below the safe point", k, w.kind)
					}
					return true, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if n > 1 {
					t.Errorf("key %q keeps %d versions below the safe point", k, n)
				}
			}
			checkNoOrphanValues(t, db)
		})
	}
}

// checkNoOrphanValues fails if a data-CF value is referenced neither by a
// write record nor by a lock.
func checkNoOrphanValues(t *testing.T, db *pebble.DB) {
	t.Helper()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{Prefix, dataCF}, UpperBound: []byte{Prefix, dataCF + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		key, rest, err := decodeEscaped(it.Key()[2:])
		if err != nil {
			t.Fatal(err)
		}
		startTS := ^bigEndianTS(rest)
		l, err := getLock(db, key)
		if err != nil {
			t.Fatal(err)
		}
		if l != nil && l.startTS == startTS {
			continue
		}
		state, _, err := txnRecord(db, key, startTS)
		if err != nil {
			t.Fatal(err)
		}
		if state != stateCommitted {
			t.Errorf("orphan data-CF value of %q at start %d", key, startTS)
		}
	}
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var sb strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			fmt.Fprintf(&sb, "- %s\n+ %s\n", a, b)
		}
	}
	return sb.String()
}

// BenchmarkGCNothingToCollect is a GC pass over a table of 100,000 rows
// of one version each, the background pass over data that has not
// changed: the safe point above every version (settled rows) or below
// them (rows loaded within the GC life time).
func BenchmarkGCNothingToCollect(b *testing.B) {
	db, _ := openServerEngine(b)
	const n = 100_000
	loadTable(b, db, n)
	for _, c := range []struct {
		name string
		sp   uint64
	}{{"settled", 1000}, {"recent", 5}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				batch := db.NewBatch()
				res, err := GC(db, batch, []byte("t"), []byte("u"), c.sp, 0)
				batch.Close()
				if err != nil || res.Versions != 0 || res.Resume != nil {
					b.Fatal(res, err)
				}
			}
		})
	}
}
