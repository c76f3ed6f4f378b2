package sql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// spillSession returns a session over tables t (rows rows) and u (the same
// number, joining t on g), whose engine spills into the returned directory.
func spillSession(t *testing.T, rows int) (*Session, string) {
	t.Helper()
	dir := t.TempDir()
	s := newTestEngineWith(t, Options{TmpDir: dir}).NewSession("root", "localhost")
	// The SQL operators under test, not the coprocessor's aggregation.
	mustExec(t, s, "SET strata_enable_coprocessor = OFF")
	mustExec(t, s, "CREATE DATABASE d")
	mustExec(t, s, "USE d")
	mustExec(t, s, "CREATE TABLE t (id INT PRIMARY KEY, g INT, s VARCHAR(20), v DECIMAL(10,2), f DOUBLE)")
	mustExec(t, s, "CREATE TABLE u (k INT, g INT, w INT, name VARCHAR(10))")
	for start := 0; start < rows; start += 500 {
		var tv, uv []string
		for i := start; i < min(start+500, rows); i++ {
			s := fmt.Sprintf("'s%05d'", (i*7919)%rows)
			if i%97 == 0 {
				s = "NULL"
			}
			tv = append(tv, fmt.Sprintf("(%d, %d, %s, %d.%02d, %d.5)", i, i%5000, s, i%1000, i%100, i%13))
			uv = append(uv, fmt.Sprintf("(%d, %d, %d, 'n%d')", i*2, (i*31)%6000, i%7, i%11))
		}
		mustExec(t, s, "INSERT INTO t VALUES "+strings.Join(tv, ","))
		mustExec(t, s, "INSERT INTO u VALUES "+strings.Join(uv, ","))
	}
	return s, dir
}

func queryText(t *testing.T, s *Session, q string) (string, error) {
	t.Helper()
	rs, err := s.Execute(context.Background(), q)
	if err != nil {
		return "", err
	}
	return rowsText(rs[len(rs)-1].Rows), nil
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func is8175(err error) bool {
	var se *sqlerr.Error
	return errors.As(err, &se) && se.Code == sqlerr.ErMemoryExceeded
}

// TestSpill runs hash aggregation, sort (with and without top-N), hash join
// (inner and left) and DISTINCT over more rows than a small quota holds:
// with spilling they return what they return without a quota, without it
// they fail with 8175, and no temporary file is left behind.
func TestSpill(t *testing.T) {
	s, dir := spillSession(t, 20000)
	queries := []struct {
		q        string
		unsorted bool
	}{
		// 5000 groups.
		{q: "SELECT COUNT(*), SUM(c), SUM(sv), MIN(ms), MAX(ms) FROM (SELECT g, COUNT(*) c, SUM(v) sv, MIN(s) ms FROM t GROUP BY g) x"},
		{q: "SELECT g, COUNT(*), SUM(v), MIN(s), MAX(s), AVG(f) FROM t GROUP BY g ORDER BY SUM(v) DESC, g LIMIT 20"},
		{q: "SELECT COUNT(*), SUM(cd), SUM(LENGTH(gc)), MAX(gc) FROM (SELECT g, COUNT(DISTINCT s) cd, GROUP_CONCAT(id ORDER BY id) gc FROM t GROUP BY g) x"},
		// Sort: every row, the runs merged; top-N deep into the order.
		{q: "SELECT id, s, v FROM t ORDER BY s DESC, v, id LIMIT 10 OFFSET 15000"},
		{q: "SELECT id, f FROM t ORDER BY f + id % 7, id DESC LIMIT 5 OFFSET 19990"},
		{q: "SELECT COUNT(*), SUM(x.v) FROM (SELECT v FROM t ORDER BY s) x"},
		// DISTINCT, alone and fused with ORDER BY.
		{q: "SELECT COUNT(*), SUM(x.g) FROM (SELECT DISTINCT g, id % 3 m FROM t) x"},
		{q: "SELECT DISTINCT g FROM t ORDER BY g DESC LIMIT 5 OFFSET 4000"},
		// Hash join: build side u, 20000 rows.
		{q: "SELECT COUNT(*), SUM(t.v), SUM(u.w) FROM t JOIN u ON t.g = u.g"},
		{q: "SELECT COUNT(*), COUNT(u.k), SUM(u.w) FROM t LEFT JOIN u ON t.id = u.k AND u.w <> 3"},
		{q: "SELECT t.id, u.k, u.name FROM t JOIN u ON t.g = u.g AND t.s > u.name WHERE t.id % 1000 = 7", unsorted: true},
		{q: "SELECT COUNT(*), SUM(c) FROM (SELECT u.name, COUNT(*) c FROM t JOIN u ON t.g = u.g GROUP BY u.name, t.id % 50) x"},
	}
	for _, tc := range queries {
		mustExec(t, s, "SET tidb_mem_quota_query = DEFAULT")
		mustExec(t, s, "SET tidb_enable_tmp_storage_on_oom = ON")
		want, err := queryText(t, s, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		mustExec(t, s, "SET tidb_mem_quota_query = 300000")
		got, err := queryText(t, s, tc.q)
		if err != nil {
			t.Fatalf("%s with a small quota: %v", tc.q, err)
		}
		if tc.unsorted {
			want, got = sortedLines(want), sortedLines(got)
		}
		if got != want {
			t.Errorf("%s spilled:\n%s\nwant:\n%s", tc.q, got, want)
		}
		mustExec(t, s, "SET tidb_enable_tmp_storage_on_oom = OFF")
		if _, err := queryText(t, s, tc.q); !is8175(err) {
			t.Errorf("%s without spilling: err = %v, want 8175", tc.q, err)
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("%s left %d temporary files", tc.q, len(left))
		}
	}
}

// TestSpillDir: a new engine empties its spill directory.
func TestSpillDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/strata-spill-old", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	newTestEngineWith(t, Options{TmpDir: dir})
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Fatalf("%d files left in the spill directory", len(left))
	}
}

// TestParallelSameAnswer: hash aggregation and hash join over inputs
// large enough to go parallel return exactly the serial rows, in the
// serial order.
func TestParallelSameAnswer(t *testing.T) {
	s, _ := spillSession(t, 40000)
	for _, q := range []string{
		"SELECT g, COUNT(*), SUM(v), MIN(s), GROUP_CONCAT(id % 10), AVG(f) FROM t GROUP BY g",
		"SELECT s, COUNT(*) FROM t GROUP BY s",
		"SELECT id % 3, COUNT(*), SUM(v) FROM t GROUP BY id % 3",
		"SELECT t.id, u.k, u.w FROM t JOIN u ON t.g = u.g",
		"SELECT t.id, u.k FROM t LEFT JOIN u ON t.id = u.k AND u.w > 2",
		"SELECT u.name, COUNT(*), SUM(t.v) FROM t JOIN u ON t.g = u.g GROUP BY u.name",
	} {
		mustExec(t, s, "SET tidb_executor_concurrency = 1")
		want, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		mustExec(t, s, "SET tidb_executor_concurrency = 4")
		got, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s in parallel: %v", q, err)
		}
		if got != want {
			t.Errorf("%s: the parallel rows differ from the serial ones", q)
		}
	}
	// Parallel and spilling at once: the workers' tables spill.
	for _, q := range []string{
		"SELECT COUNT(*), SUM(c), SUM(sv), MAX(ms) FROM (SELECT g, COUNT(*) c, SUM(v) sv, MIN(s) ms FROM t GROUP BY g) x",
		"SELECT COUNT(*), SUM(c) FROM (SELECT u.name, t.id % 100 m, COUNT(*) c FROM t JOIN u ON t.g = u.g GROUP BY u.name, t.id % 100) x",
	} {
		mustExec(t, s, "SET tidb_executor_concurrency = 1")
		mustExec(t, s, "SET tidb_mem_quota_query = DEFAULT")
		want, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		mustExec(t, s, "SET tidb_executor_concurrency = 4")
		mustExec(t, s, "SET tidb_mem_quota_query = 500000")
		got, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s spilled in parallel: %v", q, err)
		}
		if got != want {
			t.Errorf("%s spilled in parallel: %s, want %s", q, got, want)
		}
	}
}

// TestSpillKinds: rows of every kind of value read back from a spill file
// as they were written (dates, times, unsigned, binary, JSON, decimals).
func TestSpillKinds(t *testing.T) {
	dir := t.TempDir()
	s := newTestEngineWith(t, Options{TmpDir: dir}).NewSession("root", "localhost")
	mustExec(t, s, "SET strata_enable_coprocessor = OFF")
	mustExec(t, s, "CREATE DATABASE d")
	mustExec(t, s, "USE d")
	mustExec(t, s, "CREATE TABLE k (id INT PRIMARY KEY, dt DATETIME(3), d DATE, tm TIME(2), u BIGINT UNSIGNED, b VARBINARY(16), j JSON, dec1 DECIMAL(12,4), e ENUM('x','y','z'))")
	var vals []string
	for i := 0; i < 3000; i++ {
		vals = append(vals, fmt.Sprintf("(%d, '2026-%02d-%02d 10:%02d:%02d.%03d', '2020-01-%02d', '%d:%02d:01.25', %d, x'%04x', '{\"a\": %d}', %d.%04d, '%c')",
			i, 1+i%12, 1+i%28, i%60, (i*7)%60, i%1000, 1+i%28, i%100-50, i%60, uint64(1)<<63+uint64(i), i, i%17, i-1500, i%10000, 'x'+rune(i%3)))
		if len(vals) == 500 {
			mustExec(t, s, "INSERT INTO k VALUES "+strings.Join(vals, ","))
			vals = vals[:0]
		}
	}
	for _, q := range []string{
		"SELECT * FROM k ORDER BY dt DESC, id LIMIT 5 OFFSET 2000",
		"SELECT tm, COUNT(*), MAX(u), MIN(b), MAX(dec1), MIN(d), MAX(e) FROM k GROUP BY tm ORDER BY tm LIMIT 5 OFFSET 50",
		"SELECT COUNT(*), SUM(a.u - b.u), MAX(b.j) FROM k a JOIN k b ON a.b = b.b",
	} {
		mustExec(t, s, "SET tidb_mem_quota_query = DEFAULT")
		want, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		mustExec(t, s, "SET tidb_mem_quota_query = 100000")
		got, err := queryText(t, s, q)
		if err != nil {
			t.Fatalf("%s spilled: %v", q, err)
		}
		if got != want {
			t.Errorf("%s spilled:\n%s\nwant:\n%s", q, got, want)
		}
		mustExec(t, s, "SET tidb_enable_tmp_storage_on_oom = OFF")
		if _, err := queryText(t, s, q); !is8175(err) {
			t.Errorf("%s without spilling: err = %v, want 8175", q, err)
		}
		mustExec(t, s, "SET tidb_enable_tmp_storage_on_oom = ON")
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("%d temporary files left", len(left))
	}
}
