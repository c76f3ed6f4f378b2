package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/kvpb"
)

func sqlExec(t *testing.T, s *sql.Session, queries ...string) []*sql.Result {
	t.Helper()
	var out []*sql.Result
	for _, q := range queries {
		rs, err := s.Execute(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, rs...)
	}
	return out
}

func sqlRows(t *testing.T, s *sql.Session, q string) string {
	t.Helper()
	var lines []string
	for _, r := range sqlExec(t, s, q)[0].Rows {
		var f []string
		for _, d := range r {
			f = append(f, string(d.AppendText(nil)))
		}
		lines = append(lines, strings.Join(f, " "))
	}
	return strings.Join(lines, "\n")
}

// tableID reads the id of a table from the catalog.
func tableID(t *testing.T, n *Node, db, table string) int64 {
	t.Helper()
	ctx := context.Background()
	txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Rollback(ctx)
	s, err := catalog.Load(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	ti := s.Table(db, table)
	if ti == nil {
		t.Fatalf("no table %s.%s", db, table)
	}
	return ti.ID
}

// tableEngineKeys counts the engine records (locks, write records, values
// of every version) stored under a table's keys.
func tableEngineKeys(t *testing.T, n *Node, id int64) int {
	t.Helper()
	p := tablecodec.TablePrefix(id)
	// The rows the tests write (handles below 1000; 1000 holds a live
	// lock, which a read would wait for).
	settle(t, n, tablecodec.RecordKey(id, 0), tablecodec.RecordKey(id, 1000))
	c := 0
	for _, span := range mvcc.EngineSpans(p, tablecodec.PrefixEnd(p)) {
		it, err := n.eng.KV.NewIter(&pebble.IterOptions{LowerBound: span[0], UpperBound: span[1]})
		if err != nil {
			t.Fatal(err)
		}
		for valid := it.First(); valid; valid = it.Next() {
			c++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func pendingDropJobs(t *testing.T, n *Node) []*catalog.GCJob {
	t.Helper()
	ctx := context.Background()
	txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Rollback(ctx)
	jobs, err := catalog.GCJobs(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// fillTable creates db.t with an index, 300 rows, a second version of
// 100 of them, and returns the table's id.
func fillTable(t *testing.T, n *Node, s *sql.Session) int64 {
	t.Helper()
	var values []string
	for i := range 300 {
		values = append(values, fmt.Sprintf("(%d, %d, '%s')", i, i%7, strings.Repeat("x", i)))
	}
	sqlExec(t, s,
		"CREATE DATABASE IF NOT EXISTS d",
		"CREATE TABLE d.t (id INT PRIMARY KEY, v INT, pad TEXT, KEY v (v))",
		"INSERT INTO d.t VALUES "+strings.Join(values, ","),
		"UPDATE d.t SET v = v + 1 WHERE id < 100",
	)
	return tableID(t, n, "d", "t")
}

// A dropped table's data stays in the engine until the GC safe point
// passes the drop; a GC pass with a short life time moves it past, and
// the next cleanup destroys every engine record of the table (rows, index
// entries, old versions, a live transaction's lock) by range, while a
// table re-created under the same name keeps its rows.
func TestDroppedTableDestroyedOnceSafePointPasses(t *testing.T) {
	ctx := context.Background()
	n := startGCNode(t, -1, time.Millisecond)
	defer n.Close()
	s := n.SQL().NewSession("root", "localhost")
	old := fillTable(t, n, s)
	// A live transaction's lock on one of the table's rows.
	ts, err := n.pd.Tso(ctx, &kvpb.TsoRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	lockedRow := tablecodec.RecordKey(old, 1000)
	pw, err := n.kv.KvPrewrite(ctx, &kvpb.PrewriteRequest{Context: &kvpb.Context{RegionId: dataRegionID}, StartVersion: ts.Timestamp,
		PrimaryLock: lockedRow, LockTtl: 60000, Mutations: []*kvpb.Mutation{{Op: kvpb.Op_Put, Key: lockedRow, Value: []byte("x")}}})
	if err != nil || pw.RegionError != nil || len(pw.Errors) > 0 {
		t.Fatalf("prewrite: %v %+v", err, pw)
	}
	before := tableEngineKeys(t, n, old)
	if before < 300+300+100+100+1 {
		t.Fatalf("%d engine records for the table before the drop", before)
	}

	sqlExec(t, s, "DROP TABLE d.t",
		"CREATE TABLE d.t (id INT PRIMARY KEY, v INT, pad TEXT, KEY v (v))",
		"INSERT INTO d.t VALUES (1, 10, 'a'), (2, 20, 'b')")
	recreated := tableID(t, n, "d", "t")
	if recreated == old {
		t.Fatal("the re-created table reuses the dropped one's id")
	}

	// No GC pass yet: the safe point is below the drop.
	pass, err := n.SQL().DestroyDroppedData(ctx)
	if err != nil || pass.Destroyed != 0 {
		t.Fatalf("pass before GC: %+v %v", pass, err)
	}
	if jobs := pendingDropJobs(t, n); len(jobs) != 1 || jobs[0].NotBefore == 0 {
		t.Fatalf("jobs: %+v", jobs)
	}
	if got := tableEngineKeys(t, n, old); got != before {
		t.Fatalf("%d engine records of the dropped table before the safe point passed, had %d", got, before)
	}
	if !n.locks.MayBeLocked(lockedRow) {
		t.Fatal("the lock index lost the lock before the destroy")
	}

	time.Sleep(5 * time.Millisecond) // the safe point trails the TSO by 1ms
	gc, err := n.RunGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gc.LiveLocks != 1 {
		t.Fatalf("GC pass %+v: want the one live lock left alone", gc)
	}
	if _, err := n.SQL().DestroyDroppedData(ctx); err != nil {
		t.Fatal(err)
	}
	if jobs := pendingDropJobs(t, n); len(jobs) != 0 {
		t.Fatalf("jobs left after the safe point passed: %+v", jobs)
	}
	if got := tableEngineKeys(t, n, old); got != 0 {
		t.Fatalf("%d engine records of the dropped table remain", got)
	}
	if n.locks.MayBeLocked(lockedRow) {
		t.Fatal("the lock index still lists the destroyed lock")
	}
	if got := tableEngineKeys(t, n, recreated); got == 0 {
		t.Fatal("the re-created table lost its data")
	}
	if got := sqlRows(t, s, "SELECT id, v, pad FROM d.t ORDER BY id"); got != "1 10 a\n2 20 b" {
		t.Fatalf("re-created table: %q", got)
	}
	if got := sqlRows(t, s, "SELECT id FROM d.t WHERE v = 20"); got != "2" {
		t.Fatalf("re-created table's index: %q", got)
	}
}

// Jobs are persistent: a node restarted before the safe point passed the
// drop destroys the data on its own once its background GC moves the safe
// point past it.
func TestDroppedTableDestroyedAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(ctx, Config{DataDir: dir, GCInterval: -1, GCLifeTime: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s := n.SQL().NewSession("root", "localhost")
	old := fillTable(t, n, s)
	sqlExec(t, s, "DROP TABLE d.t", "CREATE TABLE d.t (id INT PRIMARY KEY)", "INSERT INTO d.t VALUES (7)")
	if _, err := n.SQL().DestroyDroppedData(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tableEngineKeys(t, n, old); got == 0 {
		t.Fatal("the dropped table's data went before the safe point passed")
	}
	n.Close()

	n, err = Start(ctx, Config{DataDir: dir, GCInterval: 20 * time.Millisecond, GCLifeTime: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for deadline := time.Now().Add(20 * time.Second); tableEngineKeys(t, n, old) != 0 || len(pendingDropJobs(t, n)) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after a restart the dropped table still has %d engine records, jobs %+v", tableEngineKeys(t, n, old), pendingDropJobs(t, n))
		}
	}
	if got := sqlRows(t, n.SQL().NewSession("root", "localhost"), "SELECT id FROM d.t"); got != "7" {
		t.Fatalf("re-created table after the destroy: %q", got)
	}
}
