package mvcc

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// A lock request that staged its lock for the in-memory table before the
// store marked the region for a handover (PersistNewLocks), and applies
// after the mark, writes the lock to its batch: the move of the region's
// locks (PersistPessimisticLocks) looked at the table before the lock was
// there, so in memory it would be lost with the leadership.
func TestLockStagedBeforeHandoverGoesToEngine(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}, Comparer: engine.Comparer})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table := NewPessimisticLocks(0)
	r := WithPessimisticLocks(db, table)
	req := &kvpb.PessimisticLockRequest{PrimaryLock: []byte("b"), StartVersion: 10, ForUpdateTs: 10, LockTtl: 3000}
	var s staged
	if kerr, err := pessimisticLockKey(r, &s, req, []byte("b"), nil); kerr != nil || err != nil {
		t.Fatal(kerr, err)
	}
	if len(s.memOps) != 1 || len(s.ops) != 0 {
		t.Fatalf("staged %d table and %d engine changes, want the lock for the table", len(s.memOps), len(s.ops))
	}
	table.PersistNewLocks([]byte("a"), []byte("c"), time.Hour)
	b := db.NewBatch()
	defer b.Close()
	if err := s.applyTo(b); err != nil {
		t.Fatal(err)
	}
	if table.Len() != 0 {
		t.Fatalf("the table holds %d locks after the handover mark, want 0", table.Len())
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	l, err := getLock(db, []byte("b"))
	if err != nil || l == nil {
		t.Fatalf("no lock in the engine after the apply: %v", err)
	}
	if l.typ != kvpb.Op_PessimisticLock || l.startTS != 10 || l.forUpdateTS != 10 || l.mem {
		t.Fatalf("engine lock %+v, want the staged pessimistic lock", l)
	}

	// Outside the marked range, and once the mark expires, locks go to the
	// table again.
	table.PersistNewLocks([]byte("m"), []byte("n"), time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	for _, key := range []string{"zz", "m1"} {
		var s staged
		if kerr, err := pessimisticLockKey(r, &s, &kvpb.PessimisticLockRequest{PrimaryLock: []byte(key), StartVersion: 20, ForUpdateTs: 20}, []byte(key), nil); kerr != nil || err != nil {
			t.Fatal(kerr, err)
		}
		b := db.NewBatch()
		if err := s.applyTo(b); err != nil {
			t.Fatal(err)
		}
		if b.Count() != 0 {
			t.Fatalf("lock on %q went to the engine, want the table", key)
		}
		b.Close()
	}
	if table.Len() != 2 {
		t.Fatalf("table holds %d locks, want 2", table.Len())
	}
}
