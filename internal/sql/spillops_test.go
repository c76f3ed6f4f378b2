package sql

import (
	"os"
	"testing"

	"github.com/strata-db/strata/internal/sql/exec"
)

// spillCase is a query that holds more rows than a small quota.
type spillCase struct {
	q string
	// unsorted: the query has no ORDER BY, and a spilled run returns its
	// rows in another order.
	unsorted bool
	// noSpill: the operator cannot spill this query; past the quota it
	// fails with 8175 even when spilling is on.
	noSpill bool
}

// runSpillCases runs each query without a quota and with quota bytes:
// spilled, it returns the same rows, creates temporary files (the process
// counter moves) and leaves none behind; with spilling off it fails with
// 8175.
func runSpillCases(t *testing.T, s *Session, dir string, quota string, cases []spillCase) {
	t.Helper()
	for _, tc := range cases {
		mustExec(t, s, "SET tidb_mem_quota_query = DEFAULT")
		mustExec(t, s, "SET tidb_enable_tmp_storage_on_oom = ON")
		want, err := queryText(t, s, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		mustExec(t, s, "SET tidb_mem_quota_query = "+quota)
		files, _ := exec.SpillStats()
		got, err := queryText(t, s, tc.q)
		if tc.noSpill {
			if !is8175(err) {
				t.Errorf("%s past the quota: err = %v, want 8175", tc.q, err)
			}
		} else {
			if err != nil {
				t.Fatalf("%s with a small quota: %v", tc.q, err)
			}
			if tc.unsorted {
				want, got = sortedLines(want), sortedLines(got)
			}
			if got != want {
				t.Errorf("%s spilled:\n%s\nwant:\n%s", tc.q, trimText(got), trimText(want))
			}
			if after, _ := exec.SpillStats(); after == files {
				t.Errorf("%s: no temporary file was created", tc.q)
			}
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("%s left %d temporary files", tc.q, len(left))
		}
		mustExec(t, s, "SET tidb_enable_tmp_storage_on_oom = OFF")
		if _, err := queryText(t, s, tc.q); !is8175(err) {
			t.Errorf("%s without spilling: err = %v, want 8175", tc.q, err)
		}
	}
}

func trimText(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// TestSpillWindow: window functions over more rows than the quota, in
// many partitions and in one partition larger than the quota.
func TestSpillWindow(t *testing.T) {
	s, dir := spillSession(t, 20000)
	sum := func(inner string) string {
		return "SELECT COUNT(*), SUM(a), SUM(b), SUM(c), MAX(x), MIN(x) FROM (" + inner + ") z"
	}
	runSpillCases(t, s, dir, "300000", []spillCase{
		// Many partitions (5000 values of g), each small.
		{q: sum("SELECT id AS x, ROW_NUMBER() OVER (PARTITION BY g ORDER BY id) a, RANK() OVER (PARTITION BY g ORDER BY s) b, SUM(v) OVER (PARTITION BY g ORDER BY s) c FROM t")},
		{q: "SELECT id, g, LAG(v) OVER w, LEAD(s, 2) OVER w, FIRST_VALUE(s) OVER w, COUNT(*) OVER (PARTITION BY g) FROM t WINDOW w AS (PARTITION BY g ORDER BY id) ORDER BY id LIMIT 10 OFFSET 12000"},
		// One partition of every row.
		{q: sum("SELECT id AS x, ROW_NUMBER() OVER (ORDER BY s, id) a, RANK() OVER (ORDER BY g) b, DENSE_RANK() OVER (ORDER BY g) c FROM t")},
		{q: sum("SELECT id AS x, SUM(v) OVER (ORDER BY g) a, COUNT(s) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) b, AVG(f) OVER () c FROM t")},
		{q: sum("SELECT id AS x, SUM(id) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) a, COUNT(*) OVER (RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) b, LAST_VALUE(g) OVER (ROWS UNBOUNDED PRECEDING) c FROM t")},
		{q: sum("SELECT s AS x, NTILE(7) OVER (ORDER BY id) a, MAX(v) OVER (ORDER BY id DESC) b, MIN(id) OVER (ORDER BY g RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) c FROM t")},
		{q: "SELECT id, PERCENT_RANK() OVER w, CUME_DIST() OVER w, FIRST_VALUE(id) OVER w, LAST_VALUE(id) OVER w, NTH_VALUE(id, 3) OVER w FROM t WINDOW w AS (ORDER BY g DESC) ORDER BY id LIMIT 10 OFFSET 9000"},
		// Two large partitions and a small one; NULLs in the ORDER BY key.
		{q: sum("SELECT id AS x, SUM(v) OVER (PARTITION BY g < 4000, g >= 4990 ORDER BY s DESC) a, CAST(CUME_DIST() OVER (PARTITION BY id % 2 ORDER BY s) * 100000 AS SIGNED) b, DENSE_RANK() OVER (PARTITION BY id % 2 ORDER BY s) c FROM t")},
		// LAG and LEAD read the partition's file a second time.
		{q: sum("SELECT id AS x, LAG(id) OVER (ORDER BY id) a, LEAD(g, 3, -1) OVER (ORDER BY s, id) b, LAG(LENGTH(s), 2, 7) OVER (PARTITION BY id < 19990 ORDER BY f, id) c FROM t")},
		{q: "SELECT id, LAG(s, 0) OVER w, LEAD(s) OVER w, LAG(s, 5) OVER w FROM t WINDOW w AS (ORDER BY g, id) ORDER BY id LIMIT 5 OFFSET 15000"},
		// A frame with offsets over a partition larger than the quota
		// cannot spill.
		{q: sum("SELECT id AS x, SUM(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING) a, 1 b, 1 c FROM t"), noSpill: true},
	})
}

// TestSpillSetOps: UNION (distinct), EXCEPT and INTERSECT, with and
// without ALL, over more distinct rows than the quota holds.
func TestSpillSetOps(t *testing.T) {
	s, dir := spillSession(t, 20000)
	sum := func(inner string) string {
		return "SELECT COUNT(*), SUM(a), SUM(LENGTH(b)), MAX(b) FROM (" + inner + ") z"
	}
	runSpillCases(t, s, dir, "300000", []spillCase{
		{q: sum("SELECT id AS a, s AS b FROM t UNION SELECT k, name FROM u")},
		{q: sum("SELECT g AS a, s AS b FROM t UNION SELECT g, name FROM u UNION SELECT id % 7000, s FROM t")},
		{q: "SELECT id, s FROM t WHERE id % 2 = 0 UNION SELECT k, name FROM u ORDER BY id DESC, s LIMIT 5 OFFSET 8000"},
		{q: sum("SELECT id AS a, s AS b FROM t EXCEPT SELECT k, name FROM u")},
		{q: sum("SELECT g AS a, s AS b FROM t EXCEPT SELECT g, s FROM t WHERE id % 3 = 0")},
		{q: sum("SELECT g % 3000 AS a, id % 5 AS b FROM t EXCEPT ALL SELECT g, w FROM u")},
		{q: sum("SELECT g AS a, id % 5 AS b FROM t INTERSECT SELECT g, w FROM u")},
		{q: sum("SELECT g % 3000 AS a, id % 5 AS b FROM t INTERSECT ALL SELECT g, w FROM u")},
		{q: sum("SELECT id AS a, s AS b FROM t INTERSECT SELECT id, s FROM t WHERE id % 4 <> 1")},
	})
}

// TestSpillNestedLoop: a join without an equality keeps its inner side
// on disk past the quota (inner and left joins).
func TestSpillNestedLoop(t *testing.T) {
	s, dir := spillSession(t, 3000)
	runSpillCases(t, s, dir, "150000", []spillCase{
		{q: "SELECT COUNT(*), SUM(t.v), SUM(u.w) FROM t JOIN u ON t.g < u.g AND u.k % 97 = t.id % 89"},
		{q: "SELECT COUNT(*), COUNT(u.k), SUM(u.w), MAX(u.name) FROM t LEFT JOIN u ON u.k BETWEEN t.id * 2 AND t.id * 2 + 1 AND u.w <> 3"},
		{q: "SELECT t.id, u.k, u.name FROM t JOIN u ON u.k BETWEEN t.id * 2 - 2 AND t.id * 2 AND t.s > u.name WHERE t.id % 100 = 7", unsorted: true},
	})
}

// TestSpillRecursiveCTE: a recursive CTE keeps two rounds in memory and
// its earlier rounds on disk; the keys of UNION (distinct) cannot spill.
func TestSpillRecursiveCTE(t *testing.T) {
	s, dir := spillSession(t, 1000)
	runSpillCases(t, s, dir, "300000", []spillCase{
		{q: "WITH RECURSIVE r (n, s) AS (SELECT id, s FROM t UNION ALL SELECT n + 1000, s FROM r WHERE n < 29000) SELECT COUNT(*), SUM(n), MAX(s), MIN(s) FROM r"},
		{q: "WITH RECURSIVE r (n, s) AS (SELECT id, s FROM t UNION ALL SELECT n + 1000, s FROM r WHERE n < 29000) SELECT n, s FROM r ORDER BY n DESC LIMIT 3 OFFSET 20000"},
		// Every row's key is held to drop repeats: 30000 keys do not fit.
		{q: "WITH RECURSIVE r (n, s) AS (SELECT id, s FROM t UNION SELECT n + 1000, s FROM r WHERE n < 29000) SELECT COUNT(*), SUM(n), MAX(s), MIN(s) FROM r", noSpill: true},
	})
}

// TestSpillUnderHungryConsumer: an aggregation whose consumer, a hash
// join's build, holds nearly the whole quota still ends (the shape of the
// TPC-C consistency check's customer balances under a small quota: each
// spilled partition used to hold a handful of groups, and the recursion
// hit its depth limit with 8175).
func TestSpillUnderHungryConsumer(t *testing.T) {
	s, dir := spillSession(t, 20000)
	runSpillCases(t, s, dir, "300000", []spillCase{
		{q: "SELECT COUNT(*), SUM(x.c), SUM(y.c) FROM t LEFT JOIN (SELECT g, COUNT(*) c, SUM(v) sv FROM t GROUP BY g) x ON x.g = t.g LEFT JOIN (SELECT id, COUNT(*) c FROM t GROUP BY id) y ON y.id = t.id WHERE t.v <> COALESCE(x.sv, 0) - COALESCE(y.c, 0)"},
		{q: "SELECT COUNT(*), SUM(y.c) FROM u LEFT JOIN (SELECT k % 20000 AS id, g, COUNT(*) c FROM u GROUP BY k % 20000, g) y ON y.id = u.k AND y.g = u.g"},
	})
}
