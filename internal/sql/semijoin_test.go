package sql

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

// semiJoinQueries are [NOT] EXISTS conditions over o (outer) and i
// (inner) that the planner makes hash semi or anti joins once both tables
// have statistics: correlation keys of one type and collation, with
// residual conditions on the pair and conditions of the inner table alone.
var semiJoinQueries = []string{
	"EXISTS (SELECT * FROM i WHERE i.k = o.k)",
	"NOT EXISTS (SELECT * FROM i WHERE i.k = o.k)",
	"EXISTS (SELECT 1 FROM i WHERE i.k = o.k AND i.q <> o.x)",
	"NOT EXISTS (SELECT 1 FROM i WHERE o.k = i.k AND i.q <> o.x)",
	"EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.k2 = o.k2 AND i.q < 50)",
	"NOT EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.k2 = o.k2 AND i.q < 50)",
	"NOT EXISTS (SELECT * FROM i WHERE i.s = o.s AND i.q > o.x AND i.k IS NOT NULL)",
	"EXISTS (SELECT * FROM i WHERE i.s = o.s AND (i.q > o.x OR o.x IS NULL))",
	"NOT EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q > 1000)",
	"EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q IS NULL)",
	"(NOT EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.k2 <> o.k2)) AND EXISTS (SELECT * FROM i WHERE i.k = o.k)",
}

// perRow keeps the subquery of a semiJoinQueries condition per outer row:
// RAND() in its WHERE makes it volatile, which the rewrite never takes.
func perRow(cond string) string {
	return strings.ReplaceAll(cond, " FROM i WHERE ", " FROM i WHERE RAND() >= 0 AND ")
}

// semiJoinTables fills o and i with n and m rows of random values from
// small domains (so that inner keys repeat and outer keys miss: k has
// keys values outside o), NULL one time in eight, strings differing only in
// case (equal under utf8mb4_general_ci), and analyzes them; with empty
// set, i's rows are deleted after, its statistics kept.
func semiJoinTables(t *testing.T, s *Session, r *rand.Rand, n, m, keys int, empty bool) {
	t.Helper()
	mustExec(t, s, "DROP TABLE IF EXISTS o, i")
	mustExec(t, s, "CREATE TABLE o (id INT PRIMARY KEY, k INT, k2 INT, x INT, s VARCHAR(10) COLLATE utf8mb4_general_ci)")
	mustExec(t, s, "CREATE TABLE i (id INT PRIMARY KEY, k INT, k2 INT, q INT, s VARCHAR(10) COLLATE utf8mb4_general_ci, KEY (k))")
	val := func(domain int) string {
		if r.Intn(8) == 0 {
			return "NULL"
		}
		return fmt.Sprint(r.Intn(domain))
	}
	str := func() string {
		if r.Intn(8) == 0 {
			return "NULL"
		}
		return fmt.Sprintf("'%c'", "aAbBcCdD"[r.Intn(8)])
	}
	insert := func(table string, rows, keys int) {
		for start := 0; start < rows; start += 500 {
			var vs []string
			for id := start; id < min(start+500, rows); id++ {
				vs = append(vs, fmt.Sprintf("(%d, %s, %s, %s, %s)", id, val(keys), val(3), val(100), str()))
			}
			mustExec(t, s, "INSERT INTO "+table+" VALUES "+strings.Join(vs, ","))
		}
	}
	insert("o", n, keys+keys/3)
	insert("i", m, keys)
	mustExec(t, s, "ANALYZE TABLE o, i")
	if empty {
		mustExec(t, s, "DELETE FROM i")
	}
}

// TestSemiJoinSameAnswer compares, on random tables, every condition of
// semiJoinQueries planned as a hash semi or anti join with the same
// condition run per outer row: the same rows, for NULL keys on either
// side, repeated inner keys, residual conditions and an empty inner table.
func TestSemiJoinSameAnswer(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE sj")
	mustExec(t, s, "USE sj")
	for seed := int64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewSource(seed))
		inner := 1 + r.Intn(400)
		semiJoinTables(t, s, r, 300+r.Intn(300), inner, 30, seed == 8)
		for _, cond := range semiJoinQueries {
			q := "SELECT id, k, x FROM o WHERE id % 7 <> 3 AND " + cond + " ORDER BY id"
			plan, err := queryText(t, s, "EXPLAIN "+q)
			if err != nil {
				t.Fatalf("EXPLAIN %s: %v", q, err)
			}
			if !strings.Contains(plan, "HashJoin semi") && !strings.Contains(plan, "HashJoin anti") {
				t.Fatalf("seed %d: %s is not a semi or anti join:\n%s", seed, q, plan)
			}
			got, err := queryText(t, s, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			slow := "SELECT id, k, x FROM o WHERE id % 7 <> 3 AND " + perRow(cond) + " ORDER BY id"
			if plan, _ := queryText(t, s, "EXPLAIN "+slow); strings.Contains(plan, "HashJoin semi") || strings.Contains(plan, "HashJoin anti") {
				t.Fatalf("%s is not kept per row:\n%s", slow, plan)
			}
			want, err := queryText(t, s, slow)
			if err != nil {
				t.Fatalf("%s: %v", slow, err)
			}
			if got != want {
				if seed == 8 {
					inner = 0
				}
				t.Errorf("seed %d (%d inner rows): %s\ngot  %d rows: %.300s\nwant %d rows: %.300s", seed, inner, q,
					strings.Count(got, "\n"), got, strings.Count(want, "\n"), want)
			}
		}
	}
}

// TestSemiJoinSpillParallel runs semi and anti joins whose inner rows
// pass a small quota (they move to partition files) and whose outer rows
// are many enough to be probed in parallel: the same rows as the serial
// join in memory, 8175 without spilling, no file left behind
// (TestSemiJoinSameAnswer compares the serial join with the per-row
// subquery).
func TestSemiJoinSpillParallel(t *testing.T) {
	dir := t.TempDir()
	s := newTestEngineWith(t, Options{TmpDir: dir}).NewSession("root", "localhost")
	mustExec(t, s, "SET strata_enable_coprocessor = OFF")
	mustExec(t, s, "CREATE DATABASE sj")
	mustExec(t, s, "USE sj")
	semiJoinTables(t, s, rand.New(rand.NewSource(42)), 12000, 12000, 4000, false)
	for _, cond := range []string{
		"EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q <> o.x)",
		"NOT EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q > o.x)",
		"NOT EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.k2 = o.k2)",
	} {
		// (The rows counted: a result set is held against the quota.)
		q := "SELECT COUNT(*), SUM(id), SUM(x), MAX(k) FROM o WHERE " + cond
		mustExec(t, s, "SET tidb_mem_quota_query = DEFAULT, tidb_executor_concurrency = 1, tidb_enable_tmp_storage_on_oom = ON")
		if plan, _ := queryText(t, s, "EXPLAIN "+q); !strings.Contains(plan, "HashJoin semi") && !strings.Contains(plan, "HashJoin anti") {
			t.Fatalf("%s is not a semi or anti join:\n%s", q, plan)
		}
		want, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		mustExec(t, s, "SET tidb_executor_concurrency = 4")
		if got, err := queryText(t, s, q); err != nil || got != want {
			t.Errorf("%s in parallel: the rows differ from the serial ones (%v)", q, err)
		}
		if an, _ := queryText(t, s, "EXPLAIN ANALYZE "+q); !strings.Contains(an, "workers=4") {
			t.Errorf("%s did not probe in parallel:\n%s", q, an)
		}
		mustExec(t, s, "SET tidb_executor_concurrency = 1, tidb_mem_quota_query = 300000")
		got, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s with a small quota: %v", q, err)
		}
		if got != want {
			t.Errorf("%s spilled: the rows differ", q)
		}
		an, err := queryText(t, s, "EXPLAIN ANALYZE "+q)
		if err != nil || !strings.Contains(an, "disk=") || strings.Contains(an, "disk=0") && !strings.Contains(maskAnalyze(an), "disk=D") {
			t.Errorf("EXPLAIN ANALYZE %s shows no spill (%v):\n%s", q, err, an)
		}
		mustExec(t, s, "SET tidb_enable_tmp_storage_on_oom = OFF")
		if _, err := queryText(t, s, q); !is8175(err) {
			t.Errorf("%s without spilling: err = %v, want 8175", q, err)
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("%s left %d temporary files", q, len(left))
		}
	}
}
