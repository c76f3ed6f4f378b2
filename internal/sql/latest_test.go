package sql

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/strata-db/strata/internal/kv/kvtest"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kv"
)

// latestCounter counts the storage's timestamp-free reads.
type latestCounter struct {
	kv.Storage
	latest atomic.Int64
}

func (c *latestCounter) GetLatest(ctx context.Context, key []byte) ([]byte, error) {
	c.latest.Add(1)
	return c.Storage.(kv.LatestReader).GetLatest(ctx, key)
}

// TestAutocommitPointSelectReadsLatest: an autocommit SELECT of one row by
// primary key reads the row's newest committed value without opening a
// transaction (no TSO timestamp); every other statement shape, and every
// statement inside an explicit transaction, still reads a snapshot.
func TestAutocommitPointSelectReadsLatest(t *testing.T) {
	if testStorage != nil {
		t.Skip("counts the reads of the in-memory storage")
	}
	store := &latestCounter{Storage: kvtest.NewMemStorage()}
	e, err := NewEngine(context.Background(), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s := e.NewSession("root", "localhost")
	other := e.NewSession("root", "localhost")
	mustExec(t, s, "CREATE DATABASE d; USE d")
	mustExec(t, other, "USE d")
	mustExec(t, s, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), k INT, KEY (k))")
	mustExec(t, s, "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)")
	mustExec(t, s, "CREATE TEMPORARY TABLE tmp (id INT PRIMARY KEY, v INT)")
	mustExec(t, s, "INSERT INTO tmp VALUES (1, 100)")

	check := func(q, want string, latest bool) {
		t.Helper()
		before := store.latest.Load()
		if got := query(t, s, q); got != want {
			t.Fatalf("%s: got %q, want %q", q, got, want)
		}
		if n := store.latest.Load() - before; (n == 1) != latest || n > 1 {
			t.Fatalf("%s: %d timestamp-free reads, want latest=%v", q, n, latest)
		}
	}
	check("SELECT v FROM t WHERE id = 2", "b", true)
	check("SELECT id, v, k + 1 FROM t WHERE id = 3 AND v = 'c'", "3 c 31", true)
	check("SELECT v FROM t WHERE id = 3 AND v = 'x'", "", true)
	check("SELECT v FROM t WHERE id = 9", "", true)
	check("SELECT v FROM t WHERE id = 1.5", "", false) // no row can match: nothing read
	check("SELECT v FROM t WHERE id = 1 LIMIT 1", "a", true)
	// Not one row by primary key: a snapshot as before.
	check("SELECT v FROM t WHERE id IN (1, 2)", "a\nb", false)
	check("SELECT v FROM t WHERE id BETWEEN 1 AND 1", "a", false)
	check("SELECT v FROM t WHERE k = 20", "b", false)
	check("SELECT COUNT(*) FROM t WHERE id = 1", "1", false)
	check("SELECT v FROM t WHERE id = (SELECT MIN(id) FROM t)", "a", false)
	check("SELECT a.v, b.v FROM t a JOIN t b ON b.id = a.id WHERE a.id = 1", "a a", false)
	check("SELECT v FROM t WHERE id = 1 FOR UPDATE", "a", false)
	check("SELECT v FROM tmp WHERE id = 1", "100", false)

	// The newest committed value, at once.
	mustExec(t, other, "UPDATE t SET v = 'b2' WHERE id = 2")
	check("SELECT v FROM t WHERE id = 2", "b2", true)
	mustExec(t, other, "DELETE FROM t WHERE id = 2")
	check("SELECT v FROM t WHERE id = 2", "", true)

	// Inside a transaction: its snapshot and its own writes.
	mustExec(t, s, "BEGIN")
	check("SELECT v FROM t WHERE id = 1", "a", false)
	mustExec(t, other, "UPDATE t SET v = 'a2' WHERE id = 1")
	check("SELECT v FROM t WHERE id = 1", "a", false)
	mustExec(t, s, "UPDATE t SET v = 'mine' WHERE id = 3")
	check("SELECT v FROM t WHERE id = 3", "mine", false)
	mustExec(t, s, "COMMIT")
	check("SELECT v FROM t WHERE id = 1", "a2", true)
	mustExec(t, s, "SET autocommit = 0")
	check("SELECT v FROM t WHERE id = 1", "a2", false)
	mustExec(t, s, "COMMIT")
	mustExec(t, s, "SET autocommit = 1")

	// Prepared: the cached plan takes the same path, and a schema change
	// under it is planned again.
	ps, err := s.Prepare(context.Background(), "SELECT v FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"a2", "", "mine"} {
		before := store.latest.Load()
		r, err := s.ExecutePrepared(context.Background(), ps.ID, []types.Datum{types.NewInt(int64(i + 1))})
		if err != nil {
			t.Fatal(err)
		}
		if got := rowsText(r.Rows); got != want {
			t.Fatalf("prepared id=%d: got %q, want %q", i+1, got, want)
		}
		if store.latest.Load()-before != 1 {
			t.Fatalf("prepared id=%d: not read at latest", i+1)
		}
	}
	mustExec(t, other, "ALTER TABLE t ADD COLUMN w INT DEFAULT 7")
	mustExec(t, other, "UPDATE t SET w = 8 WHERE id = 3")
	ps2, err := s.Prepare(context.Background(), "SELECT * FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.ExecutePrepared(context.Background(), ps2.ID, []types.Datum{types.NewInt(3)})
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsText(r.Rows); got != "3 mine 30 8" {
		t.Fatalf("after ALTER: got %q", got)
	}
}
