package mvcc

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
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
			if err := ls.Observe(b.Repr()); err != nil {
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
			if err := ls.Observe(b.Repr()); err != nil {
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
