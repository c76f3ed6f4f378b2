package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// stepReader is a pebble.Reader over the live DB that runs hook once,
// right after its n-th engine access (a Get or a NewIter, counting from
// 1) has taken its view of the engine. It lets a test land a concurrent
// write between any two of a read's engine accesses.
type stepReader struct {
	pebble.Reader
	n, calls int
	hook     func()
}

func (r *stepReader) step() {
	r.calls++
	if r.calls == r.n {
		r.hook()
	}
}

func (r *stepReader) Get(key []byte) ([]byte, io.Closer, error) {
	v, c, err := r.Reader.Get(key)
	r.step()
	return v, c, err
}

func (r *stepReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	it, err := r.Reader.NewIter(o)
	r.step()
	return it, err
}

// The KV service reads the live engine, not a snapshot: each Get and each
// iterator sees the engine as of the moment it is opened, and a Raft apply
// may commit between two of them. A read at readTS must still see either
// the lock of a transaction that commits at or below readTS, or its commit
// record: never neither. Here transaction 20 commits k at 25 while a read
// at 30 runs, between every pair of the read's engine accesses in turn;
// the read must fail with the lock or return the new value, never the old
// one (the first scan that opened its write iterator before its lock
// iterator returned the old value, and a bank audit saw a transfer half
// applied).
func TestReadsSeeALockOrItsCommitWhenACommitLandsMidRead(t *testing.T) {
	for _, size := range []int{8, maxShortValue + 1} { // inline value; value in the data CF
		oldV, newV := bytes.Repeat([]byte("o"), size), bytes.Repeat([]byte("n"), size)
		reads := map[string]func(r pebble.Reader) ([]byte, error){
			"get": func(r pebble.Reader) ([]byte, error) {
				v, _, err := Get(r, []byte("k"), 30, nil)
				return v, err
			},
			"scan": func(r pebble.Reader) ([]byte, error) { return scanOne(r, false) },
			"reverse scan": func(r pebble.Reader) ([]byte, error) {
				return scanOne(r, true)
			},
		}
		for name, read := range reads {
			// n = 1, 2, ...: until the commit lands after the read's last
			// engine access, every gap has been tried.
			for n, accesses := 1, 1; n <= accesses; n++ {
				db, ls := openLockedKey(t, oldV, newV)
				r := &stepReader{Reader: db, n: n, hook: func() {
					b := db.NewBatch()
					defer b.Close()
					if err := Commit(db, b, [][]byte{[]byte("k")}, 20, 25); err != nil {
						t.Fatal(err)
					}
					if err := db.Apply(b, pebble.NoSync); err != nil {
						t.Fatal(err)
					}
					if err := ls.AfterApply(b.Repr()); err != nil {
						t.Fatal(err)
					}
				}}
				v, err := read(ls.Reader(r))
				accesses = r.calls
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				var le *LockedError
				switch {
				case errors.As(err, &le):
				case err != nil:
					t.Errorf("%s (value of %d bytes), commit after engine access %d: %v", name, size, n, err)
				case bytes.Equal(v, oldV):
					t.Errorf("%s at 30 (value of %d bytes), commit at 25 landing after engine access %d of %d: "+
						"read the old value, having seen neither the lock nor the commit record", name, size, n, accesses)
				case !bytes.Equal(v, newV):
					t.Errorf("%s (value of %d bytes), commit after engine access %d: read %.20q, want the new value or the lock",
						name, size, n, v)
				}
			}
		}
	}
}

// openLockedKey returns a DB in which k = oldV committed at 11 and
// transaction 20 has prewritten k = newV, with a LockSet fed like the
// store's.
func openLockedKey(t *testing.T, oldV, newV []byte) (*pebble.DB, *LockSet) {
	t.Helper()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := LoadLockSet(db)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(fn func(b *pebble.Batch) error) {
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
	prewrite := func(startTS uint64, v []byte) func(b *pebble.Batch) error {
		return func(b *pebble.Batch) error {
			errs, err := Prewrite(db, b, &kvpb.PrewriteRequest{
				PrimaryLock: []byte("k"), StartVersion: startTS, LockTtl: 3000,
				Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte("k"), Value: v}},
			})
			if err == nil && errs[0] != nil {
				err = errs[0]
			}
			return err
		}
	}
	apply(prewrite(10, oldV))
	apply(func(b *pebble.Batch) error { return Commit(db, b, [][]byte{[]byte("k")}, 10, 11) })
	apply(prewrite(20, newV))
	return db, ls
}

func scanOne(r pebble.Reader, reverse bool) ([]byte, error) {
	pairs, err := Scan(r, []byte("a"), []byte("z"), 0, 30, reverse)
	if err != nil {
		return nil, err
	}
	if len(pairs) != 1 || string(pairs[0].Key) != "k" {
		return nil, fmt.Errorf("scan returned %d pairs", len(pairs))
	}
	return pairs[0].Value, nil
}
