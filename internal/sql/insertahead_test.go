package sql

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/kv/kvtest"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// readCountingStorage counts a transaction's reads of table data: point
// Gets and BatchGet calls, each as one.
type readCountingStorage struct {
	kv.Storage
	gets, batches atomic.Int64
}

func (s *readCountingStorage) Begin(ctx context.Context, opts kv.TxnOptions) (kv.Txn, error) {
	txn, err := s.Storage.Begin(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &readCountingTxn{Txn: txn, s: s}, nil
}

type readCountingTxn struct {
	kv.Txn
	s *readCountingStorage
}

func (t *readCountingTxn) Get(ctx context.Context, key []byte) ([]byte, error) {
	if len(key) > 0 && key[0] == 't' {
		t.s.gets.Add(1)
	}
	return t.Txn.Get(ctx, key)
}

func (t *readCountingTxn) BatchGet(ctx context.Context, keys [][]byte) (map[string][]byte, error) {
	if len(keys) > 0 && keys[0][0] == 't' {
		t.s.batches.Add(1)
	}
	return t.Txn.BatchGet(ctx, keys)
}

func newReadCountingSession(t *testing.T) (*Session, *readCountingStorage) {
	t.Helper()
	var store kv.Storage = kvtest.NewMemStorage()
	if testStorage != nil {
		store = testStorage(t)
	}
	cs := &readCountingStorage{Storage: store}
	e, err := NewEngine(context.Background(), cs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e.NewSession("root", "localhost"), cs
}

// A multi-row INSERT whose primary keys come from AUTO_INCREMENT checks
// them in batches, not with one read per row.
func TestMultiRowInsertReadsGeneratedKeysInBatches(t *testing.T) {
	s, cs := newReadCountingSession(t)
	mustExec(t, s, "CREATE DATABASE d")
	mustExec(t, s, "USE d")
	mustExec(t, s, "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)")
	q := "INSERT INTO t (v) VALUES (0)"
	for i := 1; i < 100; i++ {
		q += ", (0)"
	}
	gets, batches := cs.gets.Load(), cs.batches.Load()
	mustExec(t, s, q)
	if g, b := cs.gets.Load()-gets, cs.batches.Load()-batches; g > 1 || b > 2 {
		t.Errorf("100 generated keys: %d point reads and %d batch reads, want at most 1 and 2", g, b)
	}
	expectRows(t, s, "SELECT COUNT(*), MIN(id), MAX(id) FROM t", "100 1 100")
}

// setupTaken makes a table whose next generated ids (101, 102, ...) run
// into rows that exist already, at 103 and 106: an UPDATE moves a row's
// key without moving the allocator.
func setupTaken(t *testing.T, s *Session) {
	t.Helper()
	mustExec(t, s, "CREATE DATABASE d")
	mustExec(t, s, "USE d")
	mustExec(t, s, "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)")
	mustExec(t, s, "INSERT INTO t VALUES (100, -1)") // next id: 101
	mustExec(t, s, "INSERT INTO t VALUES (1, -2)")   // below it: no change
	mustExec(t, s, "UPDATE t SET id = 103 WHERE id = 100")
	mustExec(t, s, "UPDATE t SET id = 106 WHERE id = 1")
}

// Generated ids that collide with existing rows fail the statement with
// the 1062 of the first colliding row, and change nothing; an error in a
// later row's values does not hide an earlier row's duplicate, while one
// in an earlier row comes first.
func TestMultiRowInsertGeneratedDuplicate(t *testing.T) {
	s, _ := newReadCountingSession(t)
	setupTaken(t, s)

	se := expectCode(t, s, "INSERT INTO t (v) VALUES (1), (2), (3), (4), (5), (6), (7)", sqlerr.ErDupEntry)
	if se.Msg != "Duplicate entry '103' for key 't.PRIMARY'" || se.State != "23000" {
		t.Errorf("first colliding row: %s %q", se.State, se.Msg)
	}
	expectRows(t, s, "SELECT id, v FROM t ORDER BY id", "103 -1\n106 -2")

	// 101..103 are used up: this statement gets 104, 105, 106 (taken),
	// then a NULL in the fourth row.
	se = expectCode(t, s, "INSERT INTO t (v) VALUES (1), (2), (3), (NULL), (5)", sqlerr.ErDupEntry)
	if se.Msg != "Duplicate entry '106' for key 't.PRIMARY'" {
		t.Errorf("duplicate before a NULL: %q", se.Msg)
	}
	// A NULL in the row before the duplicate is the error (107, then 108
	// and the NULL; 109 would be taken).
	mustExec(t, s, "UPDATE t SET id = 109 WHERE id = 103")
	se = expectCode(t, s, "INSERT INTO t (v) VALUES (1), (NULL), (3), (4)", sqlerr.ErBadNull)
	if se.Msg != "Column 'v' cannot be null" {
		t.Errorf("NULL before a duplicate: %q", se.Msg)
	}
	expectRows(t, s, "SELECT id, v FROM t ORDER BY id", "106 -2\n109 -1")
	mustExec(t, s, "UPDATE t SET id = 120 WHERE id = 109")

	// An explicit id among generated ones is checked as before.
	se = expectCode(t, s, "INSERT INTO t (id, v) VALUES (NULL, 1), (0, 2), (106, 3), (NULL, 4)", sqlerr.ErDupEntry)
	if se.Msg != "Duplicate entry '106' for key 't.PRIMARY'" {
		t.Errorf("explicit duplicate among generated ids: %q", se.Msg)
	}
	expectRows(t, s, "SELECT id, v FROM t ORDER BY id", "106 -2\n120 -1")
}

// INSERT IGNORE skips the rows whose generated id is taken, with one 1062
// warning each, in row order; REPLACE replaces them.
func TestMultiRowInsertIgnoreGeneratedDuplicates(t *testing.T) {
	s, _ := newReadCountingSession(t)
	setupTaken(t, s)

	rs := mustExec(t, s, "INSERT IGNORE INTO t (v) VALUES (1), (2), (3), (4), (5), (6), (7)")
	if rs[0].AffectedRows != 5 {
		t.Errorf("INSERT IGNORE affected %d rows, want 5", rs[0].AffectedRows)
	}
	if rs[0].LastInsertID != 101 {
		t.Errorf("INSERT IGNORE insert id %d, want 101", rs[0].LastInsertID)
	}
	expectRows(t, s, "SHOW WARNINGS",
		"Warning 1062 Duplicate entry '103' for key 't.PRIMARY'\nWarning 1062 Duplicate entry '106' for key 't.PRIMARY'")
	expectRows(t, s, "SELECT id, v FROM t ORDER BY id",
		"101 1\n102 2\n103 -1\n104 4\n105 5\n106 -2\n107 7")

	mustExec(t, s, "UPDATE t SET id = 110 WHERE id = 103")
	rs = mustExec(t, s, "REPLACE INTO t (v) VALUES (8), (9), (10)")
	if rs[0].AffectedRows != 4 {
		t.Errorf("REPLACE affected %d rows, want 4", rs[0].AffectedRows)
	}
	expectRows(t, s, "SELECT id, v FROM t WHERE id >= 108 ORDER BY id", "108 8\n109 9\n110 10")
}
