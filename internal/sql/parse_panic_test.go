package sql_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// A numeric literal of 96 digits made the parser panic (its decimal
// conversion does not handle the overflow; found by FuzzExecute), which
// cost the client its connection. It is a syntax error (1064) now, in a
// query, a prepared statement and an INSERT of the literal-scanning path.
func TestOverlongNumericLiteralIsASyntaxError(t *testing.T) {
	s, exec := nodeSession(t)
	exec("CREATE DATABASE d")
	exec("USE d")
	exec("CREATE TABLE t (a INT PRIMARY KEY, b DECIMAL(65,0))")
	long := "1" + strings.Repeat("0", 95)
	ctx := context.Background()
	for _, q := range []string{"SELECT " + long, "INSERT INTO t VALUES (1, " + long + ")", "SELECT * FROM t WHERE a = " + long} {
		_, err := s.Execute(ctx, q)
		var se *sqlerr.Error
		if !errors.As(err, &se) || se.Code != sqlerr.ErParse {
			t.Errorf("%.40s...: got %v, want error 1064", q, err)
		}
		if _, err := s.Prepare(ctx, q); !errors.As(err, &se) || se.Code != sqlerr.ErParse {
			t.Errorf("prepare %.40s...: got %v, want error 1064", q, err)
		}
	}
	if rs := exec("SELECT COUNT(*) FROM t"); len(rs) != 1 {
		t.Fatal("session unusable afterwards")
	}
}
