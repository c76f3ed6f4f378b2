package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestNormalizeInsert(t *testing.T) {
	for _, c := range []struct {
		in, form, params string // params "" and form "" when not cacheable
	}{
		{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 5014, '6837-3', '2260-1')",
			"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)", "0 5014 6837-3 2260-1"},
		{"  insert into t values ( 1 ,'a''b' ),(2,'') ; ",
			"insert into t values ( ? ,? ),(?,?)", "1 a'b 2 "},
		{"REPLACE INTO `1t` (`a b`) VALUES (7)", "REPLACE INTO `1t` (`a b`) VALUES (?)", "7"},
		// Literals inside expressions, negative numbers and ON DUPLICATE
		// KEY UPDATE stay as they are.
		{"INSERT INTO t VALUES (-5, 1+2, CONCAT('a', 'b'), 3) ON DUPLICATE KEY UPDATE a = 4",
			"INSERT INTO t VALUES (-5, 1+2, CONCAT('a', 'b'), ?) ON DUPLICATE KEY UPDATE a = 4", "3"},
		{"INSERT INTO t2 VALUES (1, 'ñandú')", "INSERT INTO t2 VALUES (?, ?)", "1 ñandú"},
		{"INSERT INTO t SET a = 1", "", ""},
		{"INSERT INTO t VALUES (1.5)", "", ""},
		{"INSERT INTO t VALUES (.5)", "", ""},
		{"INSERT INTO t VALUES (1e3)", "", ""},
		{"INSERT INTO t VALUES (0x1F)", "", ""},
		{"INSERT INTO t VALUES (X'1F')", "", ""},
		{"INSERT INTO t VALUES (_utf8mb4'x')", "", ""},
		{"INSERT INTO t VALUES (N'x')", "", ""},
		{"INSERT INTO t VALUES ('a' 'b')", "", ""},
		{"INSERT INTO t VALUES ('a\\'b')", "", ""},
		{`INSERT INTO t VALUES ("a")`, "", ""},
		{"INSERT INTO t VALUES (1) -- c", "", ""},
		{"INSERT /*+ hint */ INTO t VALUES (1)", "", ""},
		{"INSERT INTO t VALUES (?)", "", ""},
		{"INSERT INTO t VALUES (@v)", "", ""},
		{"INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)", "", ""},
		{"INSERT INTO t VALUES (99999999999999999999)", "", ""},
		{"INSERT INTO t SELECT 1 FROM u ORDER BY 1", "", ""},
		{"INSERT INTO t (a) VALUES ((SELECT 1))", "", ""},
		{"INSERT INTO t VALUES ('unterminated)", "", ""},
		{"SELECT 1", "", ""},
		{"INSERTX INTO t VALUES (1)", "", ""},
	} {
		form, params, ok := normalizeInsert(c.in)
		var ps []string
		for _, p := range params {
			ps = append(ps, string(p.AppendText(nil)))
		}
		if c.form == "" {
			if ok {
				t.Errorf("%q: normalized to %q %q, want the full parse", c.in, form, ps)
			}
			continue
		}
		if !ok || form != c.form || strings.Join(ps, " ") != c.params {
			t.Errorf("%q:\n got %v %q %q\nwant %q %q", c.in, ok, form, strings.Join(ps, " "), c.form, c.params)
		}
	}
}

// A text INSERT run through the session's cache of prepared forms has the
// outcome of the same statement parsed in full: affected rows, insert id,
// warnings, errors (code and message) and the rows written.
func TestTextPlanCacheMatchesFullParse(t *testing.T) {
	cached := newTestEngine(t).NewSession("root", "localhost")
	parsed := newTestEngine(t).NewSession("root", "localhost")
	parsed.textPlans = nil // every statement parsed in full
	ctx := context.Background()
	for _, s := range []*Session{cached, parsed} {
		mustExec(t, s, "CREATE DATABASE d")
		mustExec(t, s, "USE d")
		mustExec(t, s, `CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, ti TINYINT, v VARCHAR(5),
			d DECIMAL(6,2), dt DATE, u INT UNSIGNED, KEY v_ix (v))`)
		mustExec(t, s, "SET sql_mode = ''") // conversions warn instead of failing
	}
	stmts := []string{
		"INSERT INTO t (id, ti, v) VALUES (0, 1, 'a')",
		"INSERT INTO t (id, ti, v) VALUES (0, 2, 'b')",
		"INSERT INTO t (id, ti, v) VALUES (10, 3, 'c')",
		"INSERT INTO t (id, ti, v) VALUES (10, 4, 'dup')",
		"INSERT INTO t (id, ti, v) VALUES (11, 300, 'toolongvalue')",
		"INSERT INTO t (id, ti, v) VALUES (12, '12abc', 'x')",
		"INSERT INTO t (id, d, dt, u) VALUES (13, '1.255', '2024-02-30', 5)",
		"INSERT INTO t (id, d, dt, u) VALUES (14, 12, '2024-02-28', '-1')",
		"INSERT INTO t (id, d, dt, u) VALUES (15, 'abc', 'notadate', 3)",
		"INSERT INTO t (id, v) VALUES (16, 'it''s'), (17, 'ñandú')",
		"INSERT INTO t (id, v) VALUES (18, NULL)",
		"INSERT INTO t (id, v) VALUES (19, DEFAULT)",
		"INSERT INTO t VALUES (20, 1, 'e', 1, '2024-01-01', 1)",
		"INSERT INTO t VALUES (21, 1, 'e', 1, '2024-01-01')",
		"INSERT INTO nope VALUES (1)",
		"INSERT INTO t (nope) VALUES (1)",
		"REPLACE INTO t (id, v) VALUES (10, 'r')",
		"INSERT INTO t (id, ti) VALUES (10, 7) ON DUPLICATE KEY UPDATE ti = 8",
		"SET sql_mode = 'STRICT_TRANS_TABLES'",
		"INSERT INTO t (id, ti, v) VALUES (30, 300, 'x')",
		"INSERT INTO t (id, ti, v) VALUES (31, 1, 'toolongvalue')",
		"INSERT INTO t (id, ti, v) VALUES (32, '12abc', 'x')",
		"INSERT INTO t (id, ti, v) VALUES (33, 5, 'ok')",
	}
	outcome := func(s *Session, q string) string {
		rs, err := s.Execute(ctx, q)
		if err != nil {
			return "error: " + err.Error()
		}
		r := rs[len(rs)-1]
		w := query(t, s, "SHOW WARNINGS")
		return fmt.Sprintf("affected %d, id %d, %d warnings: %s; last_insert_id %s",
			r.AffectedRows, r.LastInsertID, r.Warnings, w, query(t, s, "SELECT LAST_INSERT_ID()"))
	}
	// The first run of a form prepares it (and runs it prepared), later
	// runs of the same form reuse it.
	for _, q := range stmts {
		want := outcome(parsed, q)
		got := outcome(cached, q)
		if got != want {
			t.Errorf("%s\n cached: %s\n parsed: %s", q, got, want)
		}
		if rowsOf(t, cached) != rowsOf(t, parsed) {
			t.Fatalf("after %s the tables differ:\ncached:\n%s\nparsed:\n%s", q, rowsOf(t, cached), rowsOf(t, parsed))
		}
	}
	// Run the same statements again with other keys: every cacheable form
	// is now a cache hit.
	hits := 0
	for _, q := range stmts {
		if _, _, ok := normalizeInsert(q); ok {
			hits++
		}
		q = strings.NewReplacer("(1", "(4", "(2", "(5", "(3", "(6").Replace(q)
		want, got := outcome(parsed, q), outcome(cached, q)
		if got != want {
			t.Errorf("%s (cached form)\n cached: %s\n parsed: %s", q, got, want)
		}
	}
	if hits < 15 || len(cached.textPlans) == 0 {
		t.Fatalf("%d cacheable statements, %d cached forms", hits, len(cached.textPlans))
	}
	if rowsOf(t, cached) != rowsOf(t, parsed) {
		t.Fatalf("the tables differ:\ncached:\n%s\nparsed:\n%s", rowsOf(t, cached), rowsOf(t, parsed))
	}
}

func rowsOf(t *testing.T, s *Session) string {
	t.Helper()
	return query(t, s, "SELECT * FROM t ORDER BY id")
}
