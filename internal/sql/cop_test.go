package sql_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/node"
	"github.com/strata-db/strata/internal/sql"
	exec_ "github.com/strata-db/strata/internal/sql/exec"
)

// TestCoprocessorPushdown runs analytic queries over a table split into
// several regions on a real in-process node, with the coprocessor on
// (strata_enable_coprocessor, at a few concurrencies) and off, and
// requires the same answers: aggregation with and without GROUP BY,
// filters, top-N, LIMIT forward and backward, over rows updated and
// deleted after they were written (several MVCC versions), in a snapshot
// older than some of them, and in a transaction with its own writes.
func TestCoprocessorPushdown(t *testing.T) {
	ctx := context.Background()
	n := inProcessNode(t)
	e := n.SQL()
	exec := func(s *sql.Session, q string) [][]string {
		t.Helper()
		rs, err := s.Execute(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var out [][]string
		for _, r := range rs[len(rs)-1].Rows {
			var row []string
			for _, d := range r {
				if d.IsNull() {
					row = append(row, "NULL")
				} else {
					row = append(row, string(d.AppendText(nil)))
				}
			}
			out = append(out, row)
		}
		return out
	}
	s := e.NewSession("root", "localhost")
	exec(s, "CREATE DATABASE d; USE d")
	exec(s, "CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, f DOUBLE, m DECIMAL(10,2), KEY k_1 (k))")
	const rows = 3000
	for i := 1; i <= rows; i += 500 {
		var vals []string
		for j := i; j < i+500; j++ {
			f := "NULL"
			if j%7 != 0 {
				f = fmt.Sprintf("%d.5", j%13)
			}
			vals = append(vals, fmt.Sprintf("(%d, %d, 'c%d-%s', '%s%d', %s, %d.25)", j, (j*7919)%1000, j, strings.Repeat("x", j%17), string(rune('a'+j%5))+string(rune('A'+j%3)), j%11, f, j%100))
		}
		exec(s, "INSERT INTO sbtest1 VALUES "+strings.Join(vals, ","))
	}
	exec(s, "SPLIT TABLE sbtest1 BY (500), (1000), (1700), (2500)")
	if regions := exec(s, "SHOW TABLE sbtest1 REGIONS"); len(regions) < 5 {
		t.Fatalf("the table has %d regions, want 5", len(regions))
	}
	// Newer versions of some rows, and deleted rows.
	exec(s, "UPDATE sbtest1 SET k = k + 1 WHERE id % 10 = 3")
	exec(s, "UPDATE sbtest1 SET c = CONCAT(c, 'u') WHERE id % 10 = 3")
	exec(s, "DELETE FROM sbtest1 WHERE id % 97 = 5")

	// COUNT(*) of a whole table counts the entries of its narrowest
	// index: a unique index whose NULL entries are keyed by the handle
	// too, rows deleted, and rows whose indexed value changed.
	exec(s, "CREATE TABLE u (id INT PRIMARY KEY, name VARCHAR(200), code INT, UNIQUE KEY code_u (code))")
	for i := 1; i <= 400; i += 100 {
		var vals []string
		for j := i; j < i+100; j++ {
			code := "NULL"
			if j%3 != 0 {
				code = fmt.Sprint(j * 2)
			}
			vals = append(vals, fmt.Sprintf("(%d, 'name %d', %s)", j, j, code))
		}
		exec(s, "INSERT INTO u VALUES "+strings.Join(vals, ","))
	}
	exec(s, "SPLIT TABLE u INDEX code_u BY (100), (500)")
	exec(s, "UPDATE u SET code = NULL WHERE id % 10 = 1")
	exec(s, "UPDATE u SET code = id * 2 + 1 WHERE id % 10 = 3")
	exec(s, "DELETE FROM u WHERE id % 7 = 2")

	queries := []string{
		"SELECT COUNT(*) FROM sbtest1",
		"SELECT k % 100 g, COUNT(*), SUM(LENGTH(c)) FROM sbtest1 GROUP BY g ORDER BY g",
		"SELECT SUBSTRING(pad,1,2) p, COUNT(*), AVG(k) FROM sbtest1 GROUP BY p ORDER BY 2 DESC, 1 LIMIT 5",
		"SELECT COUNT(*), SUM(k), AVG(k), MIN(c), MAX(c), MIN(k), MAX(id), SUM(f), AVG(f), SUM(m), AVG(m), COUNT(f) FROM sbtest1",
		"SELECT COUNT(*), SUM(k) FROM sbtest1 WHERE k > 500 AND c LIKE 'c1%'",
		"SELECT COUNT(*), MAX(k) FROM sbtest1 WHERE id IN (3, 13, 500, 2999) OR k BETWEEN 10 AND 20",
		"SELECT COUNT(*) FROM sbtest1 WHERE f IS NULL",
		"SELECT COUNT(*), SUM(k) FROM sbtest1 WHERE k > 5000",
		"SELECT pad, COUNT(*), MIN(k), MAX(k) FROM sbtest1 GROUP BY pad ORDER BY pad",
		"SELECT id, k FROM sbtest1 WHERE k < 30 ORDER BY id",
		"SELECT id, k FROM sbtest1 WHERE k < 30",
		"SELECT id, k FROM sbtest1 WHERE k % 3 = 1 LIMIT 7",
		"SELECT id FROM sbtest1 ORDER BY id DESC LIMIT 9",
		"SELECT id, k FROM sbtest1 WHERE NOT (k < 900) ORDER BY id DESC LIMIT 4",
		"SELECT id, k, c FROM sbtest1 ORDER BY k DESC, id LIMIT 6",
		"SELECT id, k FROM sbtest1 WHERE LENGTH(c) > 20 ORDER BY k, id LIMIT 5 OFFSET 3",
		"SELECT id, -k, UPPER(pad) FROM sbtest1 WHERE id % 250 = 1",
		"SELECT id % 1000 g, COUNT(*), SUM(k), MIN(pad) FROM sbtest1 GROUP BY g ORDER BY g",
		"SELECT COUNT(*), SUM(id) FROM sbtest1 WHERE id <> 77",
		// Covering index scans of k_1 under an aggregation.
		"SELECT COUNT(*) FROM sbtest1 WHERE k BETWEEN 100 AND 300",
		"SELECT COUNT(*), SUM(k), MIN(id), MAX(id), AVG(id) FROM sbtest1 WHERE k > 990",
		"SELECT k, COUNT(*), SUM(id) FROM sbtest1 WHERE k IN (5, 77, 900, 1001) GROUP BY k ORDER BY k",
		"SELECT k % 7, COUNT(*) FROM sbtest1 WHERE k < 200 AND id % 3 = 0 GROUP BY k % 7 ORDER BY 1",
		"SELECT COUNT(*) FROM sbtest1 WHERE k > 5000",
		"SELECT COUNT(*), COUNT(1) FROM u",
		"SELECT COUNT(*) FROM u WHERE code IS NULL",
	}
	run := func(s *sql.Session) []string {
		var out []string
		for _, q := range queries {
			out = append(out, fmt.Sprint(exec(s, q)))
		}
		return out
	}
	exec(s, "SET strata_enable_coprocessor = OFF")
	want := run(s)
	exec(s, "SET strata_enable_coprocessor = ON")
	pages := exec_.CopPagingRows
	defer func() { exec_.CopPagingRows = pages }()
	for _, conc := range []int{1, 3, 8} {
		for _, paging := range []int{pages, 7} {
			exec_.CopPagingRows = paging
			exec(s, fmt.Sprintf("SET tidb_distsql_scan_concurrency = %d", conc))
			got := run(s)
			for i := range queries {
				if got[i] != want[i] {
					t.Errorf("concurrency %d, pages of %d: %s\npushed:     %s\nnot pushed: %s", conc, paging, queries[i], got[i], want[i])
				}
			}
		}
	}
	exec_.CopPagingRows = pages
	// Split again under the client's cached regions: requests to the old
	// regions come back with region errors and are sent again.
	exec(s, "SPLIT TABLE sbtest1 BY (250), (2000), (2900)")
	for i, got := range run(s) {
		if got != want[i] {
			t.Errorf("after a split: %s\npushed:     %s\nnot pushed: %s", queries[i], got, want[i])
		}
	}
	plan := fmt.Sprint(exec(s, "EXPLAIN "+queries[1]))
	if !strings.Contains(plan, "cop[strata]") {
		t.Errorf("the group-by is not pushed:\n%s", plan)
	}
	for tbl, index := range map[string]string{"sbtest1": "index=k_1", "u": "index=code_u"} {
		plan = fmt.Sprint(exec(s, "EXPLAIN SELECT COUNT(*) FROM "+tbl))
		if !strings.Contains(plan, "cop[strata]") || !strings.Contains(plan, index) {
			t.Errorf("COUNT(*) of %s does not count the entries of its narrowest index:\n%s", tbl, plan)
		}
	}
	plan = fmt.Sprint(exec(s, "EXPLAIN SELECT COUNT(*) FROM sbtest1 WHERE k BETWEEN 100 AND 300"))
	if !strings.Contains(plan, "cop[strata]") || !strings.Contains(plan, "index=k_1") {
		t.Errorf("the count over an index range is not pushed as an index scan:\n%s", plan)
	}
	plan = fmt.Sprint(exec(s, "EXPLAIN SELECT COUNT(*) FROM sbtest1 WHERE id BETWEEN 100 AND 300"))
	if strings.Contains(plan, "cop[strata]") {
		t.Errorf("a primary-key range is pushed:\n%s", plan)
	}

	// A snapshot older than a later write reads the old versions.
	old := e.NewSession("root", "localhost")
	exec(old, "USE d")
	exec(old, "BEGIN")
	before := fmt.Sprint(exec(old, queries[1]))
	exec(s, "UPDATE sbtest1 SET k = k + 5 WHERE id % 4 = 0")
	if got := fmt.Sprint(exec(old, queries[1])); got != before {
		t.Errorf("a snapshot read saw a later commit:\nbefore: %s\nafter:  %s", before, got)
	}
	exec(old, "COMMIT")

	// A transaction's own writes are seen.
	exec(s, "BEGIN")
	exec(s, "INSERT INTO sbtest1 VALUES (100000, 1, 'mine', 'zz', NULL, NULL)")
	inTxn := fmt.Sprint(exec(s, "SELECT COUNT(*), MAX(id) FROM sbtest1"))
	exec(s, "ROLLBACK")
	outside := fmt.Sprint(exec(s, "SELECT COUNT(*), MAX(id) FROM sbtest1"))
	if inTxn == outside || !strings.Contains(inTxn, "100000") {
		t.Errorf("own write not seen: in the transaction %s, outside %s", inTxn, outside)
	}
}

// BenchmarkCopQueries runs the three analytic queries of issue 22 over a
// sysbench-like table of STRATA_COP_BENCH_ROWS rows (default 100,000) on
// an in-process node, with the coprocessor on and off:
//
//	go test ./internal/sql -run '^$' -bench CopQueries -cpuprofile /tmp/cop.prof
func BenchmarkCopQueries(b *testing.B) {
	ctx := context.Background()
	n, err := node.Start(ctx, node.Config{DataDir: b.TempDir(), InMemory: true, GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	s := n.SQL().NewSession("root", "localhost")
	exec := func(q string) {
		if _, err := s.Execute(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	rows := 100000
	if v := os.Getenv("STRATA_COP_BENCH_ROWS"); v != "" {
		fmt.Sscan(v, &rows)
	}
	exec("CREATE DATABASE d; USE d")
	exec("CREATE TABLE sbtest1 (id INT PRIMARY KEY, k INT NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', KEY k_1 (k))")
	for i := 1; i <= rows; i += 1000 {
		var vals []string
		for j := i; j < i+1000 && j <= rows; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, '%011d-%011d-%011d-%011d-%011d-%011d-%011d-%011d-%011d-%011d', '%011d-%011d-%011d-%011d-%011d')",
				j, (j*7919)%rows, j, j*3, j*5, j*7, j*11, j*13, j*17, j*19, j*23, j*29, j*31, j*37, j*41, j*43, j*47))
		}
		exec("INSERT INTO sbtest1 VALUES " + strings.Join(vals, ","))
	}
	for _, q := range []string{
		"SELECT COUNT(*) FROM sbtest1",
		"SELECT k % 100 g, COUNT(*), SUM(LENGTH(c)) FROM sbtest1 GROUP BY g ORDER BY g",
		"SELECT SUBSTRING(pad,1,2) p, COUNT(*), AVG(k) FROM sbtest1 GROUP BY p ORDER BY 2 DESC LIMIT 5",
	} {
		for _, on := range []string{"ON", "OFF"} {
			b.Run(fmt.Sprintf("%s/cop=%s", strings.Fields(q)[1], on), func(b *testing.B) {
				exec("SET strata_enable_coprocessor = " + on)
				for i := 0; i < b.N; i++ {
					exec(q)
				}
			})
		}
	}
}

// inProcessNode starts a real node in memory (no GC) for the test and
// stops it at its end.
func inProcessNode(t testing.TB) *node.Node {
	t.Helper()
	n, err := node.Start(context.Background(), node.Config{DataDir: t.TempDir(), InMemory: true, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
