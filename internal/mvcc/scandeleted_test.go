package mvcc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strata-db/strata/kvpb"
)

// loadQueue commits, through one-phase commits, n keys at ts 10 (key i is
// "q" + i as 4 bytes, with zero bytes that the engine's key encoding
// escapes) and deletes those with del(i) at ts 20.
func loadQueue(tb testing.TB, db *pebble.DB, n int, del func(i int) bool) [][]byte {
	tb.Helper()
	onePC := func(ts uint64, ms []*kvpb.Mutation) {
		b := db.NewBatch()
		defer b.Close()
		errs, err := OnePC(db, b, &kvpb.PrewriteRequest{PrimaryLock: ms[0].Key, StartVersion: ts - 1, LockTtl: 1000, Mutations: ms}, ts)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err == nil {
			err = b.Commit(pebble.NoSync)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	keys := make([][]byte, n)
	var puts, dels []*kvpb.Mutation
	for i := range keys {
		keys[i] = []byte{'q', byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
		puts = append(puts, &kvpb.Mutation{Op: kvpb.Op_Put, Key: keys[i], Value: fmt.Appendf(nil, "v%d", i)})
		if del(i) {
			dels = append(dels, &kvpb.Mutation{Op: kvpb.Op_Del, Key: keys[i]})
		}
	}
	onePC(10, puts)
	if len(dels) > 0 {
		onePC(20, dels)
	}
	return keys
}

// A scan without locks in its range (no lock iterator) returns the live
// keys, decoded, and steps over deleted ones; at a timestamp before the
// deletes it sees them all.
func TestScanStepsOverDeletedKeys(t *testing.T) {
	db, ls := openLockSetEngine(t)
	keys := loadQueue(t, db, 300, func(i int) bool { return i < 250 || i%3 == 0 })
	scan := func(readTS uint64, limit int) []string {
		t.Helper()
		var out []string
		err := ScanFunc(ls.Reader(db), []byte("q"), []byte("r"), limit, readTS, false, func(k, v []byte) error {
			out = append(out, fmt.Sprintf("%x=%s", k, v))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := func(i int) string { return fmt.Sprintf("%x=v%d", keys[i], i) }

	if got := scan(30, 1); len(got) != 1 || got[0] != want(250) {
		t.Fatalf("first live key at 30: %v, want [%s]", got, want(250))
	}
	var live []string
	for i := 250; i < 300; i++ {
		if i%3 != 0 {
			live = append(live, want(i))
		}
	}
	if got := scan(30, 0); fmt.Sprint(got) != fmt.Sprint(live) {
		t.Fatalf("live keys at 30:\n%v\nwant\n%v", got, live)
	}
	if got := scan(15, 0); len(got) != 300 || got[0] != want(0) || got[299] != want(299) {
		t.Fatalf("keys at 15: %d (first %v), want all 300", len(got), got[:min(1, len(got))])
	}
}

// BenchmarkScanPastDeletedKeys is a queue table's consumer: the first live
// key behind 5000 deleted ones (TPC-C Delivery's oldest new order).
func BenchmarkScanPastDeletedKeys(b *testing.B) {
	db, ls := openLockSetEngine(b)
	loadQueue(b, db, 5001, func(i int) bool { return i < 5000 })
	r := ls.Reader(db)
	b.ResetTimer()
	for range b.N {
		n := 0
		if err := ScanFunc(r, []byte("q"), []byte("r"), 1, 30, false, func(k, v []byte) error { n++; return nil }); err != nil || n != 1 {
			b.Fatal(n, err)
		}
	}
}
