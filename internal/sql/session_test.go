package sql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/kv/kvtest"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

func newTestEngine(t *testing.T) *Engine {
	t.Helper()
	return newTestEngineWith(t, Options{})
}

func newTestEngineWith(t *testing.T, opts Options) *Engine {
	t.Helper()
	var store kv.Storage = kvtest.NewMemStorage()
	if testStorage != nil {
		store = testStorage(t)
	}
	e, err := NewEngine(context.Background(), store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close) // before the storage's own cleanup
	return e
}

func newTestSession(t *testing.T) *Session {
	return newTestEngine(t).NewSession("root", "localhost")
}

func mustExec(t *testing.T, s *Session, q string) []*Result {
	t.Helper()
	rs, err := s.Execute(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rs
}

// rowsText renders a result like the mysql client: one line per row,
// columns separated by spaces, NULL as NULL.
func rowsText(rows [][]types.Datum) string {
	var lines []string
	for _, r := range rows {
		parts := make([]string, len(r))
		for i, d := range r {
			if d.IsNull() {
				parts[i] = "NULL"
			} else {
				parts[i] = string(d.AppendText(nil))
			}
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	return strings.Join(lines, "\n")
}

func query(t *testing.T, s *Session, q string) string {
	t.Helper()
	rs := mustExec(t, s, q)
	return rowsText(rs[len(rs)-1].Rows)
}

func expectRows(t *testing.T, s *Session, q, want string) {
	t.Helper()
	if got := query(t, s, q); got != want {
		t.Errorf("%s:\ngot:\n%s\nwant:\n%s", q, got, want)
	}
}

func expectCode(t *testing.T, s *Session, q string, code uint16) *sqlerr.Error {
	t.Helper()
	_, err := s.Execute(context.Background(), q)
	var se *sqlerr.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: want error %d, got %v", q, code, err)
	}
	if se.Code != code {
		t.Fatalf("%s: want error %d, got %v", q, code, se)
	}
	return se
}

func setupSbtest(t *testing.T, s *Session) {
	mustExec(t, s, "CREATE DATABASE sbtest")
	mustExec(t, s, "USE sbtest")
	mustExec(t, s, `CREATE TABLE sbtest1 (
		id INTEGER NOT NULL AUTO_INCREMENT,
		k INTEGER DEFAULT '0' NOT NULL,
		c CHAR(120) DEFAULT '' NOT NULL,
		pad CHAR(60) DEFAULT '' NOT NULL,
		PRIMARY KEY (id))`)
	mustExec(t, s, "INSERT INTO sbtest1 (k, c, pad) VALUES (5, 'c1', 'p1'), (3, 'c2', 'p2'), (5, 'c3', 'p3'), (7, 'c4', 'p4')")
	mustExec(t, s, "CREATE INDEX k_1 ON sbtest1(k)")
}

func TestSysbenchStatements(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	expectRows(t, s, "SELECT c FROM sbtest1 WHERE id=2", "c2")
	expectRows(t, s, "SELECT c FROM sbtest1 WHERE id BETWEEN 2 AND 3", "c2\nc3")
	expectRows(t, s, "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 4", "20")
	expectRows(t, s, "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 4 ORDER BY c DESC", "c4\nc3\nc2\nc1")
	expectRows(t, s, "SELECT DISTINCT k FROM sbtest1 WHERE id BETWEEN 1 AND 4 ORDER BY k", "3\n5\n7")
	mustExec(t, s, "BEGIN")
	rs := mustExec(t, s, "UPDATE sbtest1 SET k=k+1 WHERE id=1")
	if rs[0].AffectedRows != 1 {
		t.Fatalf("affected %d", rs[0].AffectedRows)
	}
	mustExec(t, s, "UPDATE sbtest1 SET c='changed' WHERE id=2")
	mustExec(t, s, "DELETE FROM sbtest1 WHERE id=3")
	mustExec(t, s, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (3, 9, 'c3b', 'p3b')")
	mustExec(t, s, "COMMIT")
	expectRows(t, s, "SELECT id, k, c FROM sbtest1 ORDER BY id", "1 6 c1\n2 3 changed\n3 9 c3b\n4 7 c4")
	// The secondary index follows the updates.
	expectRows(t, s, "SELECT id FROM sbtest1 WHERE k = 6", "1")
	expectRows(t, s, "SELECT id FROM sbtest1 WHERE k = 5", "")
	expectRows(t, s, "SELECT id FROM sbtest1 WHERE k >= 7 ORDER BY id", "3\n4")
	// AUTO_INCREMENT continues above explicit ids.
	rs = mustExec(t, s, "INSERT INTO sbtest1 (k) VALUES (1)")
	if rs[0].LastInsertID <= 4 {
		t.Fatalf("last insert id %d", rs[0].LastInsertID)
	}
	expectRows(t, s, "SELECT LAST_INSERT_ID() = "+fmt.Sprint(rs[0].LastInsertID), "1")
}

func TestPreparedPointGet(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	ctx := context.Background()
	ps, err := s.Prepare(ctx, "SELECT c FROM sbtest1 WHERE id=?")
	if err != nil {
		t.Fatal(err)
	}
	if ps.ParamCount != 1 || len(ps.Columns) != 1 || ps.Columns[0].Name != "c" {
		t.Fatalf("prepared %+v", ps)
	}
	for id, want := range map[int64]string{1: "c1", 4: "c4", 99: ""} {
		r, err := s.ExecutePrepared(ctx, ps.ID, []types.Datum{types.NewInt(id)})
		if err != nil {
			t.Fatal(err)
		}
		if got := rowsText(r.Rows); got != want {
			t.Errorf("id %d: got %q want %q", id, got, want)
		}
	}
	// A schema change re-plans the cached statement.
	mustExec(t, s, "CREATE INDEX c_1 ON sbtest1(c)")
	r, err := s.ExecutePrepared(ctx, ps.ID, []types.Datum{types.NewInt(2)})
	if err != nil || rowsText(r.Rows) != "c2" {
		t.Fatalf("after DDL: %v %v", err, r)
	}
	ex := query(t, s, "EXPLAIN SELECT c FROM sbtest1 WHERE id=1")
	if !strings.Contains(ex, "PointGet") {
		t.Fatalf("explain: %s", ex)
	}
}

func TestErrors(t *testing.T) {
	s := newTestSession(t)
	se := expectCode(t, s, "SELEC 1", sqlerr.ErParse)
	if se.Msg != "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'SELEC 1' at line 1" {
		t.Errorf("syntax error message %q", se.Msg)
	}
	expectCode(t, s, "SELECT * FROM t", sqlerr.ErNoDB)
	setupSbtest(t, s)
	expectCode(t, s, "SELECT * FROM nope", sqlerr.ErNoSuchTable)
	expectCode(t, s, "SELECT nope FROM sbtest1", sqlerr.ErBadField)
	se = expectCode(t, s, "INSERT INTO sbtest1 (id, k) VALUES (1, 1)", sqlerr.ErDupEntry)
	if se.Msg != "Duplicate entry '1' for key 'sbtest1.PRIMARY'" {
		t.Errorf("message %q", se.Msg)
	}
	expectCode(t, s, "INSERT INTO sbtest1 (k) VALUES (NULL)", sqlerr.ErBadNull)
	mustExec(t, s, "CREATE TABLE small (a TINYINT, b VARCHAR(3), UNIQUE KEY ua (a))")
	expectCode(t, s, "INSERT INTO small VALUES (1000, 'x')", sqlerr.ErWarnDataOutOfRange)
	expectCode(t, s, "INSERT INTO small VALUES (1, 'toolong')", sqlerr.ErDataTooLong)
	mustExec(t, s, "INSERT INTO small VALUES (1, 'a')")
	se = expectCode(t, s, "INSERT INTO small VALUES (2, 'b'), (1, 'c')", sqlerr.ErDupEntry)
	if se.Msg != "Duplicate entry '1' for key 'small.ua'" {
		t.Errorf("message %q", se.Msg)
	}
	// The failed multi-row statement changed nothing.
	expectRows(t, s, "SELECT a, b FROM small", "1 a")
	expectCode(t, s, "CREATE TABLE small (x INT)", sqlerr.ErTableExists)
	expectCode(t, s, "CREATE DATABASE sbtest", sqlerr.ErDBCreateExists)
	expectCode(t, s, "DROP TABLE nope", sqlerr.ErUnknownTable)
	expectCode(t, s, "SELECT (SELECT k FROM sbtest1)", sqlerr.ErSubqueryNo1Row)
}

func TestStatementAtomicityInTransaction(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	mustExec(t, s, "BEGIN")
	mustExec(t, s, "INSERT INTO sbtest1 (id, k) VALUES (10, 1)")
	expectCode(t, s, "INSERT INTO sbtest1 (id, k) VALUES (11, 1), (10, 1)", sqlerr.ErDupEntry)
	mustExec(t, s, "COMMIT")
	expectRows(t, s, "SELECT id FROM sbtest1 WHERE id >= 10", "10")
	mustExec(t, s, "BEGIN")
	mustExec(t, s, "DELETE FROM sbtest1")
	expectRows(t, s, "SELECT COUNT(*) FROM sbtest1", "0")
	mustExec(t, s, "ROLLBACK")
	expectRows(t, s, "SELECT COUNT(*) FROM sbtest1", "5")
}

func TestWriteConflict(t *testing.T) {
	e := newTestEngine(t)
	a, b := e.NewSession("root", ""), e.NewSession("root", "")
	setupSbtest(t, a)
	mustExec(t, b, "USE sbtest")
	// Optimistic transactions: the conflict shows at COMMIT (pessimistic
	// ones wait instead: pessimistic_test.go).
	mustExec(t, a, "SET tidb_txn_mode = 'optimistic'")
	mustExec(t, b, "SET tidb_txn_mode = 'optimistic'")
	mustExec(t, a, "BEGIN")
	mustExec(t, b, "BEGIN")
	mustExec(t, a, "UPDATE sbtest1 SET k = 100 WHERE id = 1")
	mustExec(t, b, "UPDATE sbtest1 SET k = 200 WHERE id = 1")
	mustExec(t, a, "COMMIT")
	expectCode(t, b, "COMMIT", sqlerr.ErLockDeadlock)
	expectRows(t, a, "SELECT k FROM sbtest1 WHERE id = 1", "100")
	// Snapshot isolation: a transaction keeps reading its snapshot.
	mustExec(t, b, "BEGIN")
	expectRows(t, b, "SELECT k FROM sbtest1 WHERE id = 1", "100")
	mustExec(t, a, "UPDATE sbtest1 SET k = 300 WHERE id = 1")
	expectRows(t, b, "SELECT k FROM sbtest1 WHERE id = 1", "100")
	mustExec(t, b, "COMMIT")
	expectRows(t, b, "SELECT k FROM sbtest1 WHERE id = 1", "300")
}

func TestDMLForms(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE d; USE d")
	mustExec(t, s, "CREATE TABLE t (id INT PRIMARY KEY, v INT, name VARCHAR(10) DEFAULT 'none', UNIQUE KEY (name))")
	mustExec(t, s, "INSERT INTO t (id, v) VALUES (1, 10)")
	expectRows(t, s, "SELECT * FROM t", "1 10 none")
	rs := mustExec(t, s, "INSERT INTO t (id, v, name) VALUES (1, 5, 'a') ON DUPLICATE KEY UPDATE v = v + VALUES(v)")
	if rs[0].AffectedRows != 2 {
		t.Errorf("on duplicate affected %d", rs[0].AffectedRows)
	}
	expectRows(t, s, "SELECT * FROM t", "1 15 none")
	mustExec(t, s, "REPLACE INTO t VALUES (1, 7, 'r')")
	expectRows(t, s, "SELECT * FROM t", "1 7 r")
	mustExec(t, s, "INSERT INTO t VALUES (2, 1, 'b'), (3, 2, 'c'), (4, 3, NULL), (5, 4, NULL)")
	mustExec(t, s, "UPDATE t SET v = v * 10 WHERE id > 2 ORDER BY id DESC LIMIT 2")
	expectRows(t, s, "SELECT id, v FROM t ORDER BY id", "1 7\n2 1\n3 2\n4 30\n5 40")
	mustExec(t, s, "DELETE FROM t WHERE v < 10 ORDER BY id LIMIT 1")
	expectRows(t, s, "SELECT id FROM t ORDER BY id", "2\n3\n4\n5")
	mustExec(t, s, "INSERT INTO t SELECT id + 10, v, NULL FROM t WHERE id < 4")
	expectRows(t, s, "SELECT COUNT(*), SUM(v) FROM t", "6 76")
	mustExec(t, s, "CREATE TABLE nopk (a INT, b INT)")
	mustExec(t, s, "INSERT INTO nopk VALUES (1, 1), (1, 1), (2, NULL)")
	mustExec(t, s, "UPDATE nopk SET b = 5 WHERE b IS NULL")
	expectRows(t, s, "SELECT a, b FROM nopk ORDER BY a, b", "1 1\n1 1\n2 5")
	mustExec(t, s, "TRUNCATE TABLE nopk")
	expectRows(t, s, "SELECT COUNT(*) FROM nopk", "0")
}

func TestQueries(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE q; USE q")
	mustExec(t, s, "CREATE TABLE t1 (a INT, b INT, c VARCHAR(10))")
	mustExec(t, s, "CREATE TABLE t2 (x INT PRIMARY KEY, y INT)")
	mustExec(t, s, "INSERT INTO t1 VALUES (1, 10, 'x'), (2, 20, 'y'), (3, NULL, 'x'), (2, 5, 'z')")
	mustExec(t, s, "INSERT INTO t2 VALUES (1, 100), (2, 200), (4, 400)")
	expectRows(t, s, "SELECT 1 + 1, 'a'", "2 a")
	expectRows(t, s, "SELECT a, COUNT(*), SUM(b) FROM t1 GROUP BY a ORDER BY a", "1 1 10\n2 2 25\n3 1 NULL")
	expectRows(t, s, "SELECT a FROM t1 GROUP BY a HAVING COUNT(*) > 1", "2")
	expectRows(t, s, "SELECT t1.a, t2.y FROM t1, t2 WHERE t1.a = t2.x ORDER BY t1.b", "2 200\n1 100\n2 200")
	expectRows(t, s, "SELECT t1.a, t2.y FROM t1 LEFT JOIN t2 ON t1.a = t2.x ORDER BY t1.a, t1.b", "1 100\n2 200\n2 200\n3 NULL")
	expectRows(t, s, "SELECT x FROM t2 WHERE x IN (SELECT a FROM t1) ORDER BY x", "1\n2")
	expectRows(t, s, "SELECT x FROM t2 WHERE NOT EXISTS (SELECT 1 FROM t1 WHERE t1.a = t2.x)", "4")
	expectRows(t, s, "SELECT x, (SELECT COUNT(*) FROM t1 WHERE t1.a <= t2.x) FROM t2 ORDER BY 2 DESC", "4 4\n2 3\n1 1")
	expectRows(t, s, "SELECT a FROM t1 UNION SELECT x FROM t2 ORDER BY 1", "1\n2\n3\n4")
	expectRows(t, s, "SELECT a FROM t1 UNION ALL SELECT x FROM t2 ORDER BY 1 LIMIT 3", "1\n1\n2")
	expectRows(t, s, "SELECT a FROM t1 EXCEPT SELECT x FROM t2", "3")
	expectRows(t, s, "SELECT a FROM t1 INTERSECT SELECT x FROM t2 ORDER BY a", "1\n2")
	expectRows(t, s, "SELECT d.s FROM (SELECT a + b AS s FROM t1) AS d WHERE d.s > 10 ORDER BY d.s", "11\n22")
	expectRows(t, s, "SELECT t1.*, t2.y FROM t1 JOIN t2 ON t2.x = t1.a WHERE t1.c = 'x'", "1 10 x 100")
	expectRows(t, s, "SELECT a AS aa FROM t1 ORDER BY aa DESC, b LIMIT 1 OFFSET 1", "2")
	expectRows(t, s, "SELECT COUNT(*) FROM t1 WHERE b IS NULL", "1")
	expectRows(t, s, "SELECT x FROM t2 WHERE x > ALL (SELECT a FROM t1 WHERE a < 3)", "4")
	expectRows(t, s, "SELECT y FROM t2 WHERE x IN (2, 4) ORDER BY y", "200\n400")
	expectRows(t, s, "SELECT CASE WHEN a > 1 THEN 'big' ELSE 'small' END FROM t1 WHERE b = 10", "small")
}

func TestSessionVariables(t *testing.T) {
	s := newTestSession(t)
	expectRows(t, s, "SELECT @@version_comment, @@transaction_isolation, @@autocommit", "Strata distributed SQL REPEATABLE-READ 1")
	mustExec(t, s, "SET autocommit = 0")
	if s.AutoCommit() {
		t.Fatal("autocommit still on")
	}
	mustExec(t, s, "SET @x = 5")
	expectRows(t, s, "SELECT @x + 1", "6")
	mustExec(t, s, "SET NAMES utf8mb4")
	mustExec(t, s, "SET SESSION transaction_isolation = 'READ-COMMITTED'")
	expectRows(t, s, "SELECT @@session.transaction_isolation", "READ-COMMITTED")
	expectCode(t, s, "SET @@nope = 1", sqlerr.ErUnknownSystemVariable)
}

func TestShow(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	expectRows(t, s, "SHOW DATABASES", "information_schema\nsbtest")
	expectRows(t, s, "SHOW TABLES", "sbtest1")
	got := query(t, s, "SHOW CREATE TABLE sbtest1")
	if !strings.Contains(got, "PRIMARY KEY (`id`)") || !strings.Contains(got, "KEY `k_1` (`k`)") {
		t.Errorf("show create table: %s", got)
	}
	expectRows(t, s, "SHOW VARIABLES LIKE 'version_comment'", "version_comment Strata distributed SQL")
	expectRows(t, s, "SHOW VARIABLES LIKE 'autocommit'", "autocommit ON")
	if desc := query(t, s, "DESC sbtest1"); !strings.HasPrefix(desc, "id int(11) NO PRI") {
		t.Errorf("desc: %s", desc)
	}
	cols := query(t, s, "SHOW COLUMNS FROM sbtest1")
	if !strings.HasPrefix(cols, "id int(11) NO PRI NULL auto_increment") {
		t.Errorf("show columns: %s", cols)
	}
}

func TestSelectForUpdateLocksRows(t *testing.T) {
	e := newTestEngine(t)
	a, b := e.NewSession("root", ""), e.NewSession("root", "")
	setupSbtest(t, a)
	mustExec(t, b, "USE sbtest")
	ctx := context.Background()
	mustExec(t, a, "BEGIN")
	expectRows(t, a, "SELECT k FROM sbtest1 WHERE id = 2", "3")
	// Another transaction changes the row after a's snapshot: locking it
	// (or committing a's write based on the stale read) must fail rather
	// than silently lose b's update.
	mustExec(t, b, "UPDATE sbtest1 SET k = 50 WHERE id = 2")
	_, lockErr := a.Execute(ctx, "SELECT k FROM sbtest1 WHERE id = 2 FOR UPDATE")
	var commitErr error
	if lockErr == nil {
		mustExec(t, a, "UPDATE sbtest1 SET k = k + 1 WHERE id = 2")
		_, commitErr = a.Execute(ctx, "COMMIT")
	} else {
		mustExec(t, a, "ROLLBACK")
	}
	err := lockErr
	if err == nil {
		err = commitErr
	}
	if err == nil {
		// A pessimistic transaction's FOR UPDATE reads the latest row,
		// so a's increment applies to b's value.
		expectRows(t, b, "SELECT k FROM sbtest1 WHERE id = 2", "51")
	} else {
		var se *sqlerr.Error
		if !errors.As(err, &se) || (se.Code != sqlerr.ErLockDeadlock && se.Code != sqlerr.ErLockWaitTimeout) {
			t.Fatalf("lost update not prevented: lock %v, commit %v", lockErr, commitErr)
		}
		expectRows(t, b, "SELECT k FROM sbtest1 WHERE id = 2", "50")
	}
	// Read-only transactions commit nothing and never conflict.
	mustExec(t, a, "BEGIN")
	expectRows(t, a, "SELECT COUNT(*) FROM sbtest1", "4")
	mustExec(t, b, "DELETE FROM sbtest1 WHERE id = 4")
	mustExec(t, a, "COMMIT")
	if a.InTxn() {
		t.Fatal("transaction still open after COMMIT")
	}
}

func TestAutocommitOff(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	mustExec(t, s, "SET autocommit = 0")
	mustExec(t, s, "DELETE FROM sbtest1 WHERE id = 1")
	if !s.InTxn() {
		t.Fatal("autocommit=0 did not keep the transaction open")
	}
	mustExec(t, s, "ROLLBACK")
	expectRows(t, s, "SELECT COUNT(*) FROM sbtest1", "4")
	mustExec(t, s, "DELETE FROM sbtest1 WHERE id = 1")
	mustExec(t, s, "SET autocommit = 1") // commits the open transaction
	expectRows(t, s, "SELECT COUNT(*) FROM sbtest1", "3")
}

func TestMemoryQuotaFailsTheStatement(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	mustExec(t, s, "INSERT INTO sbtest1 (k, c) SELECT k, c FROM sbtest1")
	mustExec(t, s, "SET tidb_mem_quota_query = 500")
	expectCode(t, s, "SELECT a.c, b.c FROM sbtest1 a, sbtest1 b", sqlerr.ErMemoryExceeded)
	expectCode(t, s, "INSERT INTO sbtest1 (k, c) SELECT k, c FROM sbtest1", sqlerr.ErMemoryExceeded)
	mustExec(t, s, "SET tidb_mem_quota_query = 1073741824")
	expectRows(t, s, "SELECT COUNT(*) FROM sbtest1", "8")
}

// TestPreparedSysbenchTransaction runs oltp_read_write's statements the way
// sysbench does: prepared once, executed with parameters.
func TestPreparedSysbenchTransaction(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	ctx := context.Background()
	prep := func(q string) uint32 {
		ps, err := s.Prepare(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return ps.ID
	}
	run := func(id uint32, args ...any) string {
		params := make([]types.Datum, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case int:
				params[i] = types.NewInt(int64(v))
			case string:
				params[i] = types.NewString(v)
			}
		}
		r, err := s.ExecutePrepared(ctx, id, params)
		if err != nil {
			t.Fatalf("execute %d %v: %v", id, args, err)
		}
		return rowsText(r.Rows)
	}
	point := prep("SELECT c FROM sbtest1 WHERE id=?")
	simpleRange := prep("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?")
	sumRange := prep("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?")
	orderRange := prep("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c")
	distinctRange := prep("SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c")
	indexUpdate := prep("UPDATE sbtest1 SET k=k+1 WHERE id=?")
	nonIndexUpdate := prep("UPDATE sbtest1 SET c=? WHERE id=?")
	del := prep("DELETE FROM sbtest1 WHERE id=?")
	ins := prep("INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)")
	begin, commit := prep("BEGIN"), prep("COMMIT")

	for round := 0; round < 3; round++ {
		run(begin)
		if got := run(point, 2); got != "c2" && round == 0 {
			t.Fatalf("point select %q", got)
		}
		if got := run(simpleRange, 1, 2); round == 0 && got != "c1\nc2" {
			t.Fatalf("simple range %q", got)
		}
		run(sumRange, 1, 4)
		run(orderRange, 1, 4)
		run(distinctRange, 1, 4)
		run(indexUpdate, 1)
		run(nonIndexUpdate, fmt.Sprintf("round%d", round), 2)
		run(del, 3)
		run(ins, 3, 42, "c3", "p3")
		run(commit)
	}
	expectRows(t, s, "SELECT id, k, c FROM sbtest1 ORDER BY id", "1 8 c1\n2 3 round2\n3 42 c3\n4 7 c4")
	expectRows(t, s, "SELECT id FROM sbtest1 WHERE k = 42", "3")
	expectRows(t, s, "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 4", "60")
}

// testSafePoint is a GC safe point the test moves by hand.
type testSafePoint struct{ sp atomic.Uint64 }

func (s *testSafePoint) GCSafePoint(context.Context) (uint64, error) { return s.sp.Load(), nil }

// The data of a dropped table and of a dropped index stays until the GC
// safe point reaches a timestamp at which the drop was committed (the
// job's NotBefore), and is then destroyed and its job removed; the tables
// and indexes kept, and a table re-created under the dropped one's name,
// are untouched.
func TestDropReclaimsData(t *testing.T) {
	ctx := context.Background()
	sp := &testSafePoint{}
	e := newTestEngineWith(t, Options{SafePoint: sp, CleanupInterval: time.Hour})
	s := e.NewSession("root", "")
	setupSbtest(t, s)
	mustExec(t, s, "CREATE TABLE other (a INT PRIMARY KEY, b INT, KEY b (b))")
	mustExec(t, s, "INSERT INTO other VALUES (1, 1), (2, 2)")
	var values []string
	for i := 100; i < 300; i++ {
		values = append(values, fmt.Sprintf("(%d, %d, 'c', 'p')", i, i))
	}
	mustExec(t, s, "INSERT INTO sbtest1 (id, k, c, pad) VALUES "+strings.Join(values, ","))
	schema, err := s.currentSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, other := schema.Table("sbtest", "sbtest1"), schema.Table("sbtest", "other")
	// count reads the keys still stored under prefix: a dropped table's
	// rows are not deleted by the drop, only by the cleanup.
	count := func(prefix []byte) int {
		txn, err := e.store.Begin(ctx, kv.TxnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer txn.Rollback(ctx)
		kvs, err := txn.Scan(ctx, prefix, tablecodec.PrefixEnd(prefix), 0, false)
		if err != nil {
			t.Fatal(err)
		}
		return len(kvs)
	}
	jobs := func() []*catalog.GCJob {
		txn, err := e.store.Begin(ctx, kv.TxnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer txn.Rollback(ctx)
		js, err := catalog.GCJobs(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	sbKeys := count(tablecodec.TablePrefix(sb.ID))
	ixPrefix := tablecodec.IndexPrefix(other.ID, other.Index("b").ID)
	if sbKeys < 200 || count(ixPrefix) != 2 {
		t.Fatalf("before the drops: %d keys in sbtest1, %d in other's index", sbKeys, count(ixPrefix))
	}
	mustExec(t, s, "DROP INDEX b ON other")
	mustExec(t, s, "DROP TABLE sbtest1")
	mustExec(t, s, "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT, KEY k_1 (k))")
	mustExec(t, s, "INSERT INTO sbtest1 VALUES (1, 10), (2, 20)")

	// Before the safe point passes: the jobs are marked, nothing goes.
	if _, err := e.DestroyDroppedData(ctx); err != nil {
		t.Fatal(err)
	}
	js := jobs()
	if len(js) != 2 || js[0].NotBefore == 0 || js[1].NotBefore == 0 {
		t.Fatalf("jobs after a pass: %+v", js)
	}
	notBefore := max(js[0].NotBefore, js[1].NotBefore)
	sp.sp.Store(min(js[0].NotBefore, js[1].NotBefore) - 1)
	pass, err := e.DestroyDroppedData(ctx)
	if err != nil || pass.Destroyed != 0 {
		t.Fatalf("pass below NotBefore: %+v %v", pass, err)
	}
	if n := count(tablecodec.TablePrefix(sb.ID)); n != sbKeys {
		t.Fatalf("%d keys of the dropped table before the safe point passed, had %d", n, sbKeys)
	}
	if n := count(ixPrefix); n != 2 {
		t.Fatalf("%d entries of the dropped index before the safe point passed", n)
	}

	// At NotBefore: both ranges are destroyed and the jobs removed.
	sp.sp.Store(notBefore)
	if _, err := e.DestroyDroppedData(ctx); err != nil {
		t.Fatal(err)
	}
	if js := jobs(); len(js) != 0 {
		t.Fatalf("jobs left after the safe point passed: %+v", js)
	}
	if n := count(tablecodec.TablePrefix(sb.ID)); n != 0 {
		t.Fatalf("%d keys of the dropped table remain", n)
	}
	if n := count(ixPrefix); n != 0 {
		t.Fatalf("%d entries of the dropped index remain", n)
	}
	if n := count(tablecodec.RecordPrefix(other.ID)); n != 2 {
		t.Fatalf("rows of the kept table: %d", n)
	}
	expectRows(t, s, "SELECT a FROM other WHERE b = 2", "2")
	expectRows(t, s, "SELECT id, k FROM sbtest1 ORDER BY id", "1 10\n2 20")
	expectRows(t, s, "SELECT id FROM sbtest1 WHERE k = 20", "2")
}

func TestSetOperationTypes(t *testing.T) {
	s := newTestSession(t)
	rs := mustExec(t, s, "SELECT 1 UNION SELECT 2.5")
	if got := typeLetter(rs[0].Columns[0].Type); got != 'R' {
		t.Errorf("int UNION decimal is %c", got)
	}
	expectRows(t, s, "SELECT 1 UNION SELECT 2.5 ORDER BY 1", "1.0\n2.5")
	rs = mustExec(t, s, "SELECT 1 UNION ALL SELECT 'x'")
	if got := typeLetter(rs[0].Columns[0].Type); got != 'T' {
		t.Errorf("int UNION string is %c", got)
	}
}

func TestAlterTable(t *testing.T) {
	s := newTestSession(t)
	setupSbtest(t, s)
	mustExec(t, s, "ALTER TABLE sbtest1 ADD COLUMN extra INT NOT NULL DEFAULT 7, ADD COLUMN note VARCHAR(5)")
	expectRows(t, s, "SELECT id, extra, note FROM sbtest1 WHERE id <= 2", "1 7 NULL\n2 7 NULL")
	mustExec(t, s, "INSERT INTO sbtest1 (k, extra, note) VALUES (1, 9, 'n')")
	expectRows(t, s, "SELECT extra, note FROM sbtest1 WHERE k = 1", "9 n")
	mustExec(t, s, "ALTER TABLE sbtest1 ADD UNIQUE KEY uc (c)")
	expectCode(t, s, "INSERT INTO sbtest1 (k, c) VALUES (1, 'c1')", sqlerr.ErDupEntry)
	ex := query(t, s, "EXPLAIN SELECT id FROM sbtest1 WHERE c = 'c2'")
	if !strings.Contains(ex, "index=uc") {
		t.Errorf("new index not used: %s", ex)
	}
	expectRows(t, s, "SELECT id FROM sbtest1 WHERE c = 'c2'", "2")
	mustExec(t, s, "ALTER TABLE sbtest1 DROP INDEX uc, DROP COLUMN pad")
	expectRows(t, s, "SELECT id, k, c, extra FROM sbtest1 WHERE id = 3", "3 5 c3 7")
	expectCode(t, s, "SELECT pad FROM sbtest1", sqlerr.ErBadField)
	mustExec(t, s, "ALTER TABLE sbtest1 ENGINE = InnoDB")
	mustExec(t, s, "ALTER TABLE sbtest1 DROP COLUMN k") // and k_1, its index
	expectCode(t, s, "SELECT k FROM sbtest1", sqlerr.ErBadField)
	expectRows(t, s, "SELECT COUNT(*) FROM information_schema.statistics WHERE table_name = 'sbtest1' AND index_name = 'k_1'", "0")
	mustExec(t, s, "ADMIN CHECK TABLE sbtest1")
}

func TestOnUpdateCurrentTimestamp(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE ts; USE ts")
	mustExec(t, s, "CREATE TABLE t (id INT PRIMARY KEY, v INT, changed DATETIME DEFAULT '2000-01-01 00:00:00' ON UPDATE CURRENT_TIMESTAMP)")
	mustExec(t, s, "INSERT INTO t (id, v) VALUES (1, 1), (2, 2)")
	mustExec(t, s, "UPDATE t SET v = 10 WHERE id = 1")
	mustExec(t, s, "UPDATE t SET v = 2 WHERE id = 2") // unchanged row keeps its timestamp
	expectRows(t, s, "SELECT id, changed > '2001-01-01' FROM t ORDER BY id", "1 1\n2 0")
}

func TestUsingAndNaturalJoins(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE j; USE j")
	mustExec(t, s, "CREATE TABLE t (a INT, b VARCHAR(5)); CREATE TABLE u (a INT, c INT)")
	mustExec(t, s, "INSERT INTO t VALUES (1, 'x'), (2, 'y'); INSERT INTO u VALUES (1, 10), (3, 30)")
	expectRows(t, s, "SELECT * FROM t JOIN u USING (a)", "1 x 10")
	expectRows(t, s, "SELECT * FROM t NATURAL JOIN u", "1 x 10")
	expectRows(t, s, "SELECT a, u.a, c FROM t LEFT JOIN u USING (a) ORDER BY a", "1 1 10\n2 NULL NULL")
	expectRows(t, s, "SELECT * FROM t RIGHT JOIN u USING (a) ORDER BY a", "1 10 x\n3 30 NULL")
}

func TestUnsignedHandles(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE un; USE un")
	mustExec(t, s, "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, v INT)")
	mustExec(t, s, "INSERT INTO t VALUES (1, 1), (18446744073709551615, 2), (9223372036854775808, 3)")
	expectRows(t, s, "SELECT v FROM t WHERE id = 18446744073709551615", "2")
	expectRows(t, s, "SELECT id FROM t WHERE id > 5 ORDER BY id", "9223372036854775808\n18446744073709551615")
	expectRows(t, s, "SELECT v FROM t ORDER BY id DESC", "2\n3\n1")
}

// TestConcurrentAutocommitIncrements: concurrent autocommit read-modify-write
// statements never lose an update; conflicts are retried inside the server
// (the statement re-reads) or reported as 1213, never applied twice.
func TestConcurrentAutocommitIncrements(t *testing.T) {
	e := newTestEngine(t)
	s := e.NewSession("root", "")
	mustExec(t, s, "CREATE DATABASE bank; USE bank; CREATE TABLE acct (id INT PRIMARY KEY, balance BIGINT NOT NULL)")
	mustExec(t, s, "INSERT INTO acct VALUES (1, 0)")
	const workers, perWorker = 6, 40
	var mu sync.Mutex
	ok, conflicts := 0, 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := e.NewSession("root", "")
			defer ws.Close()
			if err := ws.UseDB("bank"); err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < perWorker; i++ {
				_, err := ws.Execute(context.Background(), "UPDATE acct SET balance = balance + 1 WHERE id = 1")
				mu.Lock()
				var se *sqlerr.Error
				switch {
				case err == nil:
					ok++
				case errors.As(err, &se) && (se.Code == sqlerr.ErLockDeadlock || se.Code == sqlerr.ErLockWaitTimeout):
					conflicts++
				default:
					t.Errorf("update: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d increments applied, %d reported as conflicts", ok, conflicts)
	expectRows(t, s, "SELECT balance FROM acct WHERE id = 1", fmt.Sprint(ok))
	if ok < workers*perWorker/2 {
		t.Errorf("only %d of %d increments succeeded (%d conflicts)", ok, workers*perWorker, conflicts)
	}
}

func TestMultiTableUpdateDelete(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE mt; USE mt")
	mustExec(t, s, "CREATE TABLE orders (id INT PRIMARY KEY, cust INT, total INT)")
	mustExec(t, s, "CREATE TABLE cust (id INT PRIMARY KEY, name VARCHAR(10), spent INT DEFAULT 0)")
	mustExec(t, s, "INSERT INTO cust (id, name) VALUES (1, 'ann'), (2, 'bob'), (3, 'cy')")
	mustExec(t, s, "INSERT INTO orders VALUES (10, 1, 5), (11, 1, 7), (12, 2, 3)")
	rs := mustExec(t, s, "UPDATE cust c JOIN orders o ON o.cust = c.id SET c.spent = c.spent + o.total, o.total = 0 WHERE c.name <> 'bob'")
	// Each row changes once: ann's first order only (MySQL semantics), and
	// both of ann's orders.
	if rs[0].AffectedRows != 3 {
		t.Errorf("affected %d", rs[0].AffectedRows)
	}
	expectRows(t, s, "SELECT id, spent FROM cust ORDER BY id", "1 5\n2 0\n3 0")
	expectRows(t, s, "SELECT id, total FROM orders ORDER BY id", "10 0\n11 0\n12 3")
	mustExec(t, s, "DELETE o FROM orders o JOIN cust c ON c.id = o.cust WHERE c.name = 'ann'")
	expectRows(t, s, "SELECT id FROM orders", "12")
	mustExec(t, s, "DELETE c, o FROM cust c LEFT JOIN orders o ON o.cust = c.id WHERE c.id >= 2")
	expectRows(t, s, "SELECT id FROM cust", "1")
	expectRows(t, s, "SELECT COUNT(*) FROM orders", "0")
}

// countingStorage counts the keys its transactions read (Get and
// BatchGet).
type countingStorage struct {
	kv.Storage
	gets atomic.Int64
}

func (s *countingStorage) Begin(ctx context.Context, opts kv.TxnOptions) (kv.Txn, error) {
	txn, err := s.Storage.Begin(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &countingTxn{Txn: txn, gets: &s.gets}, nil
}

type countingTxn struct {
	kv.Txn
	gets *atomic.Int64
}

// Get and BatchGet count reads of table data only: the engine's
// background schema polls, which may run during a statement, read catalog
// keys.
func (t *countingTxn) Get(ctx context.Context, key []byte) ([]byte, error) {
	t.count(key)
	return t.Txn.Get(ctx, key)
}

func (t *countingTxn) BatchGet(ctx context.Context, keys [][]byte) (map[string][]byte, error) {
	for _, k := range keys {
		t.count(k)
	}
	return t.Txn.BatchGet(ctx, keys)
}

func (t *countingTxn) count(key []byte) {
	if len(key) > 0 && key[0] == 't' {
		t.gets.Add(1)
	}
}

func (t *countingTxn) Insert(key, value []byte) error { return t.Txn.(kv.Inserter).Insert(key, value) }

// A single-row INSERT that is its own transaction leaves the primary key's
// uniqueness to the commit (no read before the write) and still fails with
// MySQL's 1062 and message, changing nothing; in an explicit transaction,
// and for statements that act on the duplicate, the key is read first.
func TestInsertDupCheckedAtCommit(t *testing.T) {
	var store kv.Storage = kvtest.NewMemStorage()
	if testStorage != nil {
		store = testStorage(t)
	}
	cs := &countingStorage{Storage: store}
	e, err := NewEngine(context.Background(), cs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s := e.NewSession("root", "localhost")
	setupSbtest(t, s)
	reads := func(q string) int64 {
		t.Helper()
		before := cs.gets.Load()
		_, _ = s.Execute(context.Background(), q)
		return cs.gets.Load() - before
	}

	if n := reads("INSERT INTO sbtest1 (id, k, c, pad) VALUES (10, 1, 'new', 'p')"); n != 0 {
		t.Errorf("autocommit single-row INSERT read %d keys, want 0", n)
	}
	expectRows(t, s, "SELECT LAST_INSERT_ID()", "1") // the first id setupSbtest's INSERT generated
	se := expectCode(t, s, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (10, 2, 'dup', 'p')", sqlerr.ErDupEntry)
	if se.Msg != "Duplicate entry '10' for key 'sbtest1.PRIMARY'" || se.State != "23000" {
		t.Errorf("deferred duplicate: %d %s %q", se.Code, se.State, se.Msg)
	}
	expectRows(t, s, "SELECT k, c FROM sbtest1 WHERE id = 10", "1 new")
	expectRows(t, s, "SELECT COUNT(*), SUM(k) FROM sbtest1", "5 21")
	// A failed insert leaves LAST_INSERT_ID alone, as when checked first.
	mustExec(t, s, "INSERT INTO sbtest1 (k, c, pad) VALUES (0, 'auto', 'p')")
	expectRows(t, s, "SELECT LAST_INSERT_ID()", "11")
	expectCode(t, s, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (2, 0, 'dup', 'p')", sqlerr.ErDupEntry)
	expectRows(t, s, "SELECT LAST_INSERT_ID()", "11")

	// A deleted row's key can be inserted again.
	mustExec(t, s, "DELETE FROM sbtest1 WHERE id = 10")
	mustExec(t, s, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (10, 9, 'again', 'p')")
	expectRows(t, s, "SELECT k, c FROM sbtest1 WHERE id = 10", "9 again")

	// Checked before the write: inside a transaction (the statement's
	// error must come at once and leave the transaction usable), for
	// several rows, and where the duplicate is acted on.
	mustExec(t, s, "BEGIN")
	if n := reads("INSERT INTO sbtest1 (id, k, c, pad) VALUES (20, 1, 'tx', 'p')"); n == 0 {
		t.Error("INSERT inside a transaction did not check its key")
	}
	expectCode(t, s, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (20, 1, 'tx', 'p')", sqlerr.ErDupEntry)
	mustExec(t, s, "COMMIT")
	expectRows(t, s, "SELECT c FROM sbtest1 WHERE id = 20", "tx")
	for _, q := range []string{
		"INSERT INTO sbtest1 (id, k, c, pad) VALUES (30, 0, 'a', 'p'), (31, 0, 'b', 'p')",
		"INSERT IGNORE INTO sbtest1 (id, k, c, pad) VALUES (1, 0, 'ignored', 'p')",
		"INSERT INTO sbtest1 (id, k, c, pad) VALUES (2, 0, 'x', 'p') ON DUPLICATE KEY UPDATE k = k + 100",
		"REPLACE INTO sbtest1 (id, k, c, pad) VALUES (3, 0, 'replaced', 'p')",
	} {
		if n := reads(q); n == 0 {
			t.Errorf("%s: did not check its key before writing", q)
		}
	}
	expectRows(t, s, "SELECT id, k, c FROM sbtest1 WHERE id IN (1, 2, 3, 30, 31) ORDER BY id",
		"1 5 c1\n2 103 c2\n3 0 replaced\n30 0 a\n31 0 b")
	se = expectCode(t, s, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (40, 0, 'a', 'p'), (40, 0, 'b', 'p')", sqlerr.ErDupEntry)
	if se.Msg != "Duplicate entry '40' for key 'sbtest1.PRIMARY'" {
		t.Errorf("duplicate within one statement: %q", se.Msg)
	}
	expectRows(t, s, "SELECT COUNT(*) FROM sbtest1 WHERE id = 40", "0")
}
