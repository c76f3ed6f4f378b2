package sql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// FuzzExecute: any statement text reaching the session (the parser entry,
// the INSERT fast path that scans literals itself, then planning and
// execution on a small table) gets a result or a MySQL error with a code,
// never a panic and never a bare Go error.
func FuzzExecute(f *testing.F) {
	s, exec := nodeSession(f)
	exec("CREATE DATABASE fz")
	exec("USE fz")
	exec("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR(20), c DECIMAL(10,2), KEY (b))")
	exec("INSERT INTO t VALUES (1, 'x', 1.5), (2, 'y', NULL), (3, NULL, -2)")
	for _, q := range []string{
		"SELECT * FROM t WHERE a = 1",
		"INSERT INTO t VALUES (4, 'z', 0.25)",
		"INSERT INTO t (a, b) VALUES (5, 'it''s'), (6, \"q\\\"\") ON DUPLICATE KEY UPDATE b = CONCAT(b, ',', 'x')",
		"REPLACE INTO t VALUES (-9223372036854775808, x'41', 1e3)",
		"UPDATE t SET c = c * 2 WHERE b IN ('x', 'y') ORDER BY a LIMIT 1",
		"SELECT b, COUNT(*), SUM(c) FROM t GROUP BY b HAVING COUNT(*) > 0 ORDER BY 2 DESC",
		"SELECT 1e308 * 10, -0.0, CAST('abc' AS SIGNED), 1/0",
		"DELETE FROM t WHERE a > 3",
		"BEGIN; SELECT * FROM t FOR UPDATE; COMMIT",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if len(q) > 512 || !utf8.ValidString(q) {
			return
		}
		// Statements that would change the fixture for later inputs, or
		// run for long, are not the point here.
		upper := strings.ToUpper(q)
		for _, w := range []string{"DROP", "TRUNCATE", "ALTER", "SLEEP", "BENCHMARK", "RECURSIVE", "KILL", "SHUTDOWN", "LOCK", "REPEAT", "RPAD", "LPAD", "SPACE"} {
			if strings.Contains(upper, w) {
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := s.Execute(ctx, q)
		if err != nil {
			var se *sqlerr.Error
			if !errors.As(err, &se) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%q: error without a MySQL code: %T %v", q, err, err)
			}
		}
		// Leave no transaction open for the next input.
		s.Execute(context.Background(), "ROLLBACK")
		s.Execute(context.Background(), "USE fz")
	})
}
