package sql_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestScansThroughCursorsOnARealNode runs table and index scans, ascending
// and descending, over more rows than one cursor visit reads (the first
// reads 256, later ones 1024), on a real in-process node, where they read
// through kv.FuncScanner cursors, and inside a transaction whose own writes
// in the range make them read through its iterator instead.
func TestScansThroughCursorsOnARealNode(t *testing.T) {
	_, exec := nodeSession(t)
	run := func(q string) string {
		t.Helper()
		rs := exec(q)
		var lines []string
		for _, r := range rs {
			for _, row := range r.Rows {
				parts := make([]string, len(row))
				for i, d := range row {
					parts[i] = d.String()
				}
				lines = append(lines, strings.Join(parts, " "))
			}
		}
		return strings.Join(lines, "\n")
	}
	run("CREATE DATABASE d")
	run("USE d")
	run("CREATE TABLE t (id INT PRIMARY KEY, k INT, s VARCHAR(20), e VARCHAR(5), KEY k (k))")
	const rows = 3000
	for lo := 1; lo <= rows; lo += 500 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO t VALUES ")
		for i := lo; i < lo+500; i++ {
			if i > lo {
				sb.WriteString(", ")
			}
			// k runs the other way from id; e is empty for odd ids.
			e := "'x'"
			if i%2 == 1 {
				e = "''"
			}
			fmt.Fprintf(&sb, "(%d, %d, 's%05d', %s)", i, rows+1-i, i, e)
		}
		run(sb.String())
	}
	check := func(q, want string) {
		t.Helper()
		if got := run(q); got != want {
			t.Errorf("%s:\ngot  %q\nwant %q", q, got, want)
		}
	}
	sum := rows * (rows + 1) / 2
	scans := func(extra string) {
		t.Helper()
		check("SELECT COUNT(*), SUM(id), SUM(k), MIN(s), MAX(s), SUM(LENGTH(e)) FROM t",
			fmt.Sprintf("%d %d %d s00001 s%05d %d%s", rows, sum, sum, rows, rows/2, extra))
		check("SELECT id, s FROM t ORDER BY id DESC LIMIT 3", fmt.Sprintf("%d s%05d\n%d s%05d\n%d s%05d", rows, rows, rows-1, rows-1, rows-2, rows-2))
		check("SELECT COUNT(*), MIN(s), MAX(s) FROM t WHERE id BETWEEN 100 AND 2900", "2801 s00100 s02900")
		check("SELECT id FROM t WHERE id > 2995 ORDER BY id DESC", "3000\n2999\n2998\n2997\n2996")
		// Through the secondary index on k.
		check("SELECT COUNT(*), SUM(id) FROM t WHERE k BETWEEN 1 AND 2000", fmt.Sprintf("2000 %d", (1001+3000)*2000/2))
		check("SELECT k, id FROM t WHERE k >= 10 ORDER BY k DESC LIMIT 2", fmt.Sprintf("%d 1\n%d 2", rows, rows-1))
		check("SELECT id, e FROM t WHERE k < 4 ORDER BY k", "3000 x\n2999 \n2998 x")
		// Descending over several visits, by the key and by the index.
		var ids, kids []string
		for id := 1500; id >= 1; id-- {
			ids = append(ids, fmt.Sprint(id))
		}
		for id := rows + 1 - 1400; id <= rows; id++ {
			kids = append(kids, fmt.Sprint(id))
		}
		check("SELECT id FROM t WHERE id <= 1500 ORDER BY id DESC", strings.Join(ids, "\n"))
		check("SELECT id FROM t WHERE k <= 1400 ORDER BY k DESC", strings.Join(kids, "\n"))
	}
	scans("")
	// The transaction's own writes in the ranges: read through its
	// iterator, and seen.
	run("BEGIN")
	run("UPDATE t SET s = 'zzz', e = 'yy' WHERE id = 2")
	if got := run("SELECT s, e FROM t WHERE id BETWEEN 1 AND 3 ORDER BY id DESC"); got != "s00003 \nzzz yy\ns00001 " {
		t.Errorf("own write in a range: %q", got)
	}
	if got := run("SELECT COUNT(*), MAX(s) FROM t"); got != fmt.Sprintf("%d zzz", rows) {
		t.Errorf("own write in a full scan: %q", got)
	}
	run("ROLLBACK")
	scans("")
}
