package mvcc

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// TestRecentWritesFloor follows the timestamp ceiling through the life of
// an engine: a new engine's floor is zero; an apply batch with a record at
// or above the persisted ceiling carries a new one; a reopened engine's
// floor is the ceiling it persisted; an engine holding records but no
// ceiling (written before ceilings were kept) has an unknown floor and
// never gets one.
func TestRecentWritesFloor(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer, DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	load := func() *RecentWrites {
		t.Helper()
		rw, err := LoadRecentWrites(db)
		if err != nil {
			t.Fatal(err)
		}
		return rw
	}
	ceiling := func() (uint64, bool) {
		t.Helper()
		v, closer, err := db.Get(tsCeilingKey)
		if err == pebble.ErrNotFound {
			return 0, false
		} else if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		return binary.BigEndian.Uint64(v), true
	}
	// apply commits a one-phase write of key at commitTS the way the
	// store's apply path does, and reports whether the batch carried a
	// ceiling.
	apply := func(rw *RecentWrites, key string, commitTS uint64) bool {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		req := &kvpb.PrewriteRequest{PrimaryLock: []byte(key), StartVersion: commitTS - 1,
			Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte("v")}}}
		if errs, err := OnePC(db, b, req, commitTS); err != nil || hasError(errs) {
			t.Fatal(err, errs)
		}
		records := b.Count()
		if err := eachWrite(b.Repr(), func(kind pebble.InternalKeyKind, k, _ []byte) error {
			rw.beforeApply(kind, k)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := rw.BeforeCommit(b); err != nil {
			t.Fatal(err)
		}
		withCeiling := b.Count() > records
		if err := db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return withCeiling
	}

	rw := load()
	if rw.Floor() != 0 {
		t.Fatalf("floor of an empty engine = %d, want 0", rw.Floor())
	}
	if !apply(rw, "a", 100) {
		t.Fatal("the first record did not carry a ceiling")
	}
	if c, ok := ceiling(); !ok || c != 100+ceilingWindow {
		t.Fatalf("ceiling = %d (%v), want %d", c, ok, 100+ceilingWindow)
	}
	if apply(rw, "b", 200) {
		t.Fatal("a record below the ceiling wrote a new one")
	}
	if !apply(rw, "c", 100+ceilingWindow) {
		t.Fatal("a record at the ceiling did not raise it")
	}
	want := uint64(100 + 2*ceilingWindow)
	if c, _ := ceiling(); c != want {
		t.Fatalf("ceiling = %d, want %d", c, want)
	}

	// A restart: the memtables were flushed (the engine has no WAL, so
	// what reopens is what was flushed, records and ceiling together).
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if rw := load(); rw.Floor() != want {
		t.Fatalf("floor after reopening = %d, want the ceiling %d", rw.Floor(), want)
	}

	// An engine written before ceilings were kept.
	if err := db.Delete(tsCeilingKey, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	legacy := load()
	if legacy.Floor() != math.MaxUint64 {
		t.Fatalf("floor of an engine with records and no ceiling = %d, want unknown", legacy.Floor())
	}
	if apply(legacy, "d", want+1) {
		t.Fatal("an engine with records and no ceiling got one")
	}

	// A corrupt ceiling is an error, not a guess.
	if err := db.Set(tsCeilingKey, []byte{1, 2, 3}, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRecentWrites(db); err == nil {
		t.Fatal("a corrupt ceiling record loaded")
	}
}

// TestOnePCWritesNoLockTombstone checks what a one-phase commit puts in
// the apply batch: the commit record alone for a key without a lock (a
// deletion of a lock that was never stored would be a tombstone in every
// memtable, flush and compaction), and the record plus the lock's deletion
// for a key holding the transaction's pessimistic lock.
func TestOnePCWritesNoLockTombstone(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer, DisableWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kinds := func(b *pebble.Batch) (kinds []string) {
		t.Helper()
		r := batchrepr.Read(b.Repr())
		for {
			kind, k, _, ok, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return kinds
			}
			kinds = append(kinds, fmt.Sprintf("%s %c", kind, k[1]))
		}
	}
	onePC := func(key string, startTS, forUpdateTS uint64, pessimistic bool) []string {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		req := &kvpb.PrewriteRequest{PrimaryLock: []byte(key), StartVersion: startTS, ForUpdateTs: forUpdateTS,
			Mutations:         []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: []byte(key), Value: []byte("v")}},
			IsPessimisticLock: []bool{pessimistic}}
		if errs, err := OnePC(db, b, req, max(startTS, forUpdateTS)+1); err != nil || hasError(errs) {
			t.Fatal(err, errs)
		}
		got := kinds(b)
		if err := db.Apply(b, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := onePC("a", 10, 0, false); fmt.Sprint(got) != "[SET w]" {
		t.Fatalf("one-phase commit of an unlocked key wrote %v, want the commit record alone", got)
	}

	b := db.NewBatch()
	req := &kvpb.PessimisticLockRequest{PrimaryLock: []byte("b"), StartVersion: 20, ForUpdateTs: 20, LockTtl: 100,
		Mutations: []*kvpb.Mutation{{Op: kvpb.Op_PessimisticLock, Key: []byte("b")}}}
	if errs, _, err := PessimisticLock(db, b, req); err != nil || hasError(errs) {
		t.Fatal(err, errs)
	}
	if err := db.Apply(b, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if got := onePC("b", 20, 20, true); fmt.Sprint(got) != "[SET w DEL l]" {
		t.Fatalf("one-phase commit over a pessimistic lock wrote %v, want the commit record and the lock's deletion", got)
	}
	if l, err := getLock(db, []byte("b")); err != nil || l != nil {
		t.Fatalf("lock after the commit: %v %v", l, err)
	}
}
