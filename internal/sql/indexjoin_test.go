package sql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/sql"
	exec_ "github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/plan"
)

// TestIndexJoinBatchedLookups runs index joins through a non-integer
// primary key and a secondary index on a real in-process node, with the
// right table's index split into several regions, and requires the
// answers of the batched lookups (a batch's ranges through the
// coprocessor, all ranges of a region in one request) to be those of the
// lookups one range at a time (the coprocessor off): duplicate and NULL
// outer keys, keys with no match, several rows per key, rows updated and
// deleted (several MVCC versions), LEFT JOIN beside them, batches of one
// row to a thousand, responses cut into pages, rows read by BatchGet and
// by runs of record keys (exec.LookupRunMin), a split under the client's
// cached regions, a snapshot older than other sessions' commits, another
// session's locks on the rows, and a transaction with its own writes in
// the right table (in its index, and in its rows only).
func TestIndexJoinBatchedLookups(t *testing.T) {
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
	// o's k repeats (each value about three times), is NULL for some rows
	// and points past l's keys for others.
	exec(s, "CREATE TABLE o (id INT PRIMARY KEY, k INT, flag INT NOT NULL, note VARCHAR(20))")
	// l's primary key is not an integer: rows have hidden handles, and
	// the key is a unique index read by its prefix.
	exec(s, "CREATE TABLE l (okey INT NOT NULL, line INT NOT NULL, qty INT, price DECIMAL(10,2), txt VARCHAR(40), PRIMARY KEY (okey, line), KEY l_qty (qty))")
	const orders = 3000
	for i := 1; i <= orders; i += 500 {
		var vals []string
		for j := i; j < i+500; j++ {
			k := fmt.Sprint((j * 7) % 1100)
			if j%41 == 0 {
				k = "NULL"
			}
			vals = append(vals, fmt.Sprintf("(%d, %s, %d, 'n%d')", j, k, j%3, j%13))
		}
		exec(s, "INSERT INTO o VALUES "+strings.Join(vals, ","))
	}
	for i := 0; i < 1000; i += 250 {
		var vals []string
		for k := i; k < i+250; k++ {
			for line := 1; line <= k%5; line++ { // 0 to 4 rows per key
				vals = append(vals, fmt.Sprintf("(%d, %d, %d, %d.%02d, '%s')", k, line, (k*line)%50, k%97, line*7, strings.Repeat("t", (k+line)%23)))
			}
		}
		exec(s, "INSERT INTO l VALUES "+strings.Join(vals, ","))
	}
	exec(s, "SPLIT TABLE l INDEX `PRIMARY` BY (100), (333), (600), (901)")
	exec(s, "SPLIT TABLE l INDEX l_qty BY (10), (25), (40)")
	// l's rows (hidden handles 1 to about 2000) in several regions too.
	exec(s, "SPLIT TABLE l BY (300), (700), (1500)")
	if regions := exec(s, "SHOW TABLE l INDEX `PRIMARY` REGIONS"); len(regions) < 5 {
		t.Fatalf("l's primary key has %d regions, want 5", len(regions))
	}
	exec(s, "UPDATE l SET qty = qty + 1, txt = CONCAT(txt, 'u') WHERE okey % 10 = 3")
	exec(s, "DELETE FROM l WHERE okey % 97 = 5")

	queries := []string{
		"SELECT o.id, o.k, l.line, l.qty, l.price FROM o, l WHERE l.okey = o.k AND o.flag = 1",
		"SELECT o.id, l.line, l.txt FROM o JOIN l ON l.okey = o.k WHERE o.flag = 2 AND l.qty > 20",
		"SELECT o.note, COUNT(*), SUM(l.price), MAX(l.txt) FROM o, l WHERE l.okey = o.k AND o.flag = 0 GROUP BY o.note ORDER BY o.note",
		"SELECT o.id, l.line FROM o, l WHERE l.okey = o.k AND l.line = o.flag + 1 AND o.flag = 1",
		"SELECT o.id, l.okey, l.line FROM o, l WHERE l.qty = o.k AND o.flag = 1 AND o.id < 700",
		"SELECT o.id, l.line FROM o, l WHERE l.okey = o.k AND o.flag = 1 AND o.id > 2000 LIMIT 17",
		"SELECT o.id, l.line, l.price FROM o LEFT JOIN l ON l.okey = o.k WHERE o.flag = 1 AND o.id % 7 = 0",
		// Filters on l under the index join: evaluated by the coprocessor
		// when the rows come by runs of record keys.
		"SELECT o.id, l.line, l.txt FROM o, l WHERE l.okey = o.k AND o.flag = 1 AND l.price > 40 AND l.txt LIKE '%tt%'",
		"SELECT o.id, l.line, l.qty FROM o, l WHERE l.okey = o.k AND o.flag = 2 AND (l.qty < 10 OR l.line = 3) AND o.id < 1500",
	}
	explain := fmt.Sprint(exec(s, "EXPLAIN "+queries[0]))
	if !strings.Contains(explain, "IndexJoin") || !strings.Contains(explain, "index=PRIMARY") {
		t.Fatalf("not an index join through l's primary key:\n%s", explain)
	}
	if explain := fmt.Sprint(exec(s, "EXPLAIN "+queries[4])); !strings.Contains(explain, "index=l_qty") {
		t.Errorf("not an index join through l_qty:\n%s", explain)
	}
	for _, q := range queries[len(queries)-2:] {
		if explain := fmt.Sprint(exec(s, "EXPLAIN "+q)); !strings.Contains(explain, "IndexJoin") || !strings.Contains(explain, "Filter (") {
			t.Errorf("not an index join with filters on l:\n%s", explain)
		}
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
	// Without column pruning: every column of l decoded.
	plan.ColumnPruning = false
	got := run(s)
	plan.ColumnPruning = true
	for i := range queries {
		if got[i] != want[i] {
			t.Errorf("without column pruning: %s\ngot:  %s\nwant: %s", queries[i], got[i], want[i])
		}
	}
	exec(s, "SET strata_enable_coprocessor = ON")
	pages, bmin, bmax, runMin, spread := exec_.CopPagingRows, exec_.LookupBatchMin, exec_.LookupBatchMax, exec_.LookupRunMin, exec_.LookupRunSpread
	defer func() {
		exec_.CopPagingRows, exec_.LookupBatchMin, exec_.LookupBatchMax, exec_.LookupRunMin, exec_.LookupRunSpread = pages, bmin, bmax, runMin, spread
	}()
	// runMins: rows by BatchGet only, by runs when they average two
	// handles and spread little, by runs always.
	runMins := []int{0, 2, 1}
	setRuns := func(rm int) {
		exec_.LookupRunMin, exec_.LookupRunSpread = rm, spread
		if rm == 1 {
			exec_.LookupRunSpread = 1 << 40
		}
	}
	for _, conc := range []int{1, 2, 5} {
		for _, batch := range [][2]int{{bmin, bmax}, {1, 1}, {3, 50}, {1024, 1024}} {
			for _, paging := range []int{pages, 5} {
				for _, rm := range runMins {
					exec_.LookupBatchMin, exec_.LookupBatchMax, exec_.CopPagingRows = batch[0], batch[1], paging
					setRuns(rm)
					exec(s, fmt.Sprintf("SET tidb_distsql_scan_concurrency = %d", conc))
					got := run(s)
					for i := range queries {
						if got[i] != want[i] {
							t.Errorf("concurrency %d, batches %v, pages of %d, runs of %d: %s\nbatched:    %s\none by one: %s", conc, batch, paging, rm, queries[i], got[i], want[i])
						}
					}
				}
			}
		}
	}
	exec_.CopPagingRows, exec_.LookupBatchMin, exec_.LookupBatchMax = pages, bmin, bmax

	// A snapshot older than other sessions' commits, and another
	// session's locks on the rows: the answers at the snapshot, by
	// BatchGet and by runs alike.
	s2 := e.NewSession("root", "localhost")
	exec(s2, "USE d")
	exec(s, "BEGIN")
	exec(s, "SELECT COUNT(*) FROM o") // the snapshot is taken
	exec(s2, "UPDATE l SET price = price + 1, txt = 'new' WHERE okey % 3 = 0")
	exec(s2, "DELETE FROM l WHERE okey % 11 = 1")
	exec(s2, "BEGIN")
	exec(s2, "UPDATE l SET qty = qty + 100, txt = 'locked' WHERE okey % 4 = 2")
	exec(s2, "SELECT * FROM l WHERE okey BETWEEN 400 AND 450 FOR UPDATE")
	for _, rm := range runMins {
		setRuns(rm)
		for i, got := range run(s) {
			if got != want[i] {
				t.Errorf("at an older snapshot, runs of %d: %s\ngot:  %s\nwant: %s", rm, queries[i], got, want[i])
			}
		}
	}
	exec(s, "COMMIT")
	exec(s2, "ROLLBACK")
	// After the commits: the same with the coprocessor on and off.
	exec(s, "SET strata_enable_coprocessor = OFF")
	after := run(s)
	exec(s, "SET strata_enable_coprocessor = ON")
	if fmt.Sprint(after) == fmt.Sprint(want) {
		t.Fatal("the other session's commits changed no answer")
	}
	for _, rm := range runMins {
		setRuns(rm)
		for i, got := range run(s) {
			if got != after[i] {
				t.Errorf("after other sessions' commits, runs of %d: %s\nbatched:    %s\none by one: %s", rm, queries[i], got, after[i])
			}
		}
	}
	setRuns(runMin)
	want = after
	// Split again under the client's cached regions: requests to the old
	// regions come back with region errors and are sent again, each with
	// the ranges of its new region.
	exec(s, "SPLIT TABLE l INDEX `PRIMARY` BY (50), (450), (777)")
	for i, got := range run(s) {
		if got != want[i] {
			t.Errorf("after a split: %s\nbatched:    %s\none by one: %s", queries[i], got, want[i])
		}
	}

	// A transaction's own writes to the right table are seen (its
	// lookups then read the ranges themselves).
	exec(s, "BEGIN")
	exec(s, "INSERT INTO l VALUES (7, 9, 1, 1.00, 'mine')")
	inTxn := fmt.Sprint(exec(s, queries[0]))
	exec(s, "ROLLBACK")
	if !strings.Contains(inTxn, " 9 1 1.00]") {
		t.Errorf("own write not seen by the index join: %s", inTxn)
	}
	// A write to rows only (no indexed column): the entries come through
	// the coprocessor, the rows by BatchGet, which sees the write.
	for _, rm := range runMins {
		setRuns(rm)
		exec(s, "BEGIN")
		exec(s, "UPDATE l SET price = 777.77 WHERE okey = 14")
		inTxn = fmt.Sprint(exec(s, "SELECT o.id, l.line, l.price FROM o, l WHERE l.okey = o.k AND o.flag = 1"))
		exec(s, "ROLLBACK")
		if !strings.Contains(inTxn, " 777.77]") {
			t.Errorf("runs of %d: own write to a row not seen by the index join: %s", rm, inTxn)
		}
	}
}

// TestIndexSemiJoinFromEntries runs [NOT] EXISTS over an index that holds
// every column the subquery reads (NOT EXISTS (SELECT * FROM l WHERE
// l.qty = o.k), TPC-H Q22's shape) on a real in-process node, the index
// split into several regions: planned as index semi and anti joins, whose
// batched lookups take the keys from the index entries without reading
// the rows (plan.CoveringIndexDAG). The answers must be the per-row
// subquery's (RAND() keeps it per row) at several batch sizes and page
// sizes, over entries updated and deleted, and at a snapshot older than
// another session's commits and locks on those entries.
func TestIndexSemiJoinFromEntries(t *testing.T) {
	ctx := context.Background()
	n := inProcessNode(t)
	s := n.SQL().NewSession("root", "localhost")
	exec := func(s *sql.Session, q string) string {
		t.Helper()
		rs, err := s.Execute(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var b strings.Builder
		for _, r := range rs[len(rs)-1].Rows {
			for _, d := range r {
				b.WriteString(" ")
				if d.IsNull() {
					b.WriteString("NULL")
				} else {
					b.Write(d.AppendText(nil))
				}
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	exec(s, "CREATE DATABASE d; USE d")
	exec(s, "CREATE TABLE o (id INT PRIMARY KEY, k INT, flag INT NOT NULL)")
	exec(s, "CREATE TABLE l (id INT PRIMARY KEY, qty INT, note VARCHAR(20), KEY l_qty (qty))")
	for i := 0; i < 4000; i += 500 {
		var vals []string
		for j := i; j < i+500; j++ {
			k := fmt.Sprint((j * 13) % 3000)
			if j%37 == 0 {
				k = "NULL"
			}
			vals = append(vals, fmt.Sprintf("(%d, %s, %d)", j, k, j%3))
		}
		exec(s, "INSERT INTO o VALUES "+strings.Join(vals, ","))
	}
	for i := 0; i < 6000; i += 500 {
		var vals []string
		for j := i; j < i+500; j++ {
			q := fmt.Sprint((j * 7) % 2000) // 0-1999, three entries each
			if j%53 == 0 {
				q = "NULL"
			}
			vals = append(vals, fmt.Sprintf("(%d, %s, 'n%d')", j, q, j%11))
		}
		exec(s, "INSERT INTO l VALUES "+strings.Join(vals, ","))
	}
	exec(s, "SPLIT TABLE l INDEX l_qty BY (300), (800), (1400)")
	exec(s, "UPDATE l SET qty = qty + 2000 WHERE id % 10 = 3") // entries moved past o's keys
	exec(s, "DELETE FROM l WHERE id % 17 = 4")
	exec(s, "ANALYZE TABLE o, l")
	queries := []string{
		"SELECT o.id, o.k FROM o WHERE o.flag = 1 AND o.id < 600 AND EXISTS (SELECT * FROM l WHERE l.qty = o.k) ORDER BY o.id",
		"SELECT o.id, o.k FROM o WHERE o.flag = 2 AND o.id BETWEEN 1000 AND 1700 AND NOT EXISTS (SELECT 1 FROM l WHERE o.k = l.qty) ORDER BY o.id",
		"SELECT COUNT(*), SUM(o.k) FROM o WHERE o.id < 500 AND NOT EXISTS (SELECT * FROM l WHERE l.qty = o.k AND l.id <> o.id)",
	}
	perRow := func(q string) string {
		return strings.ReplaceAll(q, " FROM l WHERE ", " FROM l WHERE RAND() >= 0 AND ")
	}
	for i, q := range queries[:2] {
		plan := exec(s, "EXPLAIN "+q)
		want := []string{"IndexJoin semi", "IndexJoin anti"}[i]
		if !strings.Contains(plan, want) || !strings.Contains(plan, "index=l_qty") {
			t.Fatalf("%s is not an %s through l_qty:\n%s", q, want, plan)
		}
	}
	check := func(what string, s *sql.Session, want []string) {
		t.Helper()
		for i, q := range queries {
			if got := exec(s, q); got != want[i] {
				t.Errorf("%s: %s\ngot:  %.300s\nwant: %.300s", what, q, got, want[i])
			}
		}
	}
	var want []string
	for _, q := range queries {
		want = append(want, exec(s, perRow(q)))
	}
	if strings.Count(want[0], "\n") < 50 || strings.Count(want[1], "\n") < 50 {
		t.Fatalf("too few rows to compare:\n%.200s\n%.200s", want[0], want[1])
	}
	pages, bmin, bmax := exec_.CopPagingRows, exec_.LookupBatchMin, exec_.LookupBatchMax
	defer func() { exec_.CopPagingRows, exec_.LookupBatchMin, exec_.LookupBatchMax = pages, bmin, bmax }()
	for _, batch := range [][2]int{{bmin, bmax}, {3, 50}, {1024, 1024}} {
		for _, paging := range []int{pages, 7} {
			exec_.LookupBatchMin, exec_.LookupBatchMax, exec_.CopPagingRows = batch[0], batch[1], paging
			check(fmt.Sprintf("batches %v, pages of %d", batch, paging), s, want)
		}
	}
	exec_.CopPagingRows, exec_.LookupBatchMin, exec_.LookupBatchMax = pages, bmin, bmax

	// At a snapshot older than another session's commits and locks on
	// the entries: the answers at the snapshot.
	s2 := n.SQL().NewSession("root", "localhost")
	exec(s2, "USE d")
	exec(s, "BEGIN")
	exec(s, "SELECT COUNT(*) FROM o") // the snapshot is taken
	exec(s2, "DELETE FROM l WHERE id % 5 = 1")
	exec(s2, "BEGIN")
	exec(s2, "UPDATE l SET qty = qty + 5000 WHERE id % 4 = 2")
	check("at an older snapshot", s, want)
	exec(s, "COMMIT")
	exec(s2, "ROLLBACK")
	var after []string
	for _, q := range queries {
		after = append(after, exec(s, perRow(q)))
	}
	if fmt.Sprint(after) == fmt.Sprint(want) {
		t.Fatal("the other session's delete changed no answer")
	}
	check("after the other session's delete", s, after)
}
