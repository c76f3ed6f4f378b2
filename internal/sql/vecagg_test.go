package sql

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// TestBatchEvaluationSameAnswer runs filters, projections and
// aggregations with computed group keys and arguments (GROUP BY g % 3,
// SUM(a * 2 + 1), AVG(b * (1 - f))), serially and with two workers, with
// the SQL operators' batch evaluation on and off
// (tidb_enable_vectorized_expression): the rows, the error and the
// warnings (strings that are not numbers, division by zero) are the same,
// and the same with workers as serially, warnings in the same order.
// The input is large enough for the aggregation to go parallel
// (aggParallelRows), and the coprocessor is off so that SQL aggregates.
func TestBatchEvaluationSameAnswer(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE va")
	mustExec(t, s, "USE va")
	mustExec(t, s, "SET strata_enable_coprocessor = OFF")
	mustExec(t, s, "CREATE TABLE v (id INT PRIMARY KEY, a INT, b DECIMAL(10,2), f DOUBLE, s VARCHAR(20), g INT)")
	r := rand.New(rand.NewSource(7))
	maybeNull := func(v string) string {
		if r.Intn(10) == 0 {
			return "NULL"
		}
		return v
	}
	strs := []string{"'12'", "'3.5'", "'x1'", "'7abc'", "''", "'-4'"}
	const rows = 36000
	for start := 0; start < rows; start += 1000 {
		var vs []string
		for id := start; id < start+1000; id++ {
			vs = append(vs, fmt.Sprintf("(%d, %s, %s, %s, %s, %d)", id,
				maybeNull(fmt.Sprint(r.Intn(200)-50)),
				maybeNull(fmt.Sprintf("%d.%02d", r.Intn(1000), r.Intn(100))),
				maybeNull(fmt.Sprintf("%.3f", r.Float64())),
				maybeNull(strs[r.Intn(len(strs))]),
				r.Intn(40)))
		}
		mustExec(t, s, "INSERT INTO v VALUES "+strings.Join(vs, ", "))
	}
	queries := []string{
		"SELECT g, SUM(a * 2 + 1), AVG(b * (1 - f)), COUNT(*), SUM(a), AVG(b + a) FROM v GROUP BY g ORDER BY g",
		"SELECT g % 3, SUM(s * 2), AVG(a / (g - 3)), SUM(b / (a - a)) FROM v GROUP BY g % 3 ORDER BY 1",
		"SELECT SUM(b * a), AVG(a + 0.5), SUM(f * 2) FROM v",
		"SELECT g, SUM(DISTINCT a * 2), SUM(CASE WHEN a > 50 THEN b ELSE 0 END), MAX(a * 3) FROM v GROUP BY g ORDER BY g",
		"SELECT a % 7 k, SUM(s + 1), AVG(f * a) FROM v WHERE s <> '' GROUP BY k ORDER BY k",
		// Fails in the last rows: BIGINT overflow (1690).
		"SELECT g, SUM(a * (id DIV 35990) * 9223372036854775807) FROM v GROUP BY g ORDER BY g",
	}
	// run returns q's rows and warnings.
	run := func(q string) string {
		rs, err := s.Execute(context.Background(), q)
		if err != nil {
			return "error: " + err.Error()
		}
		out := rowsText(rs[len(rs)-1].Rows)
		w, err := s.Execute(context.Background(), "SHOW WARNINGS")
		if err != nil {
			t.Fatal(err)
		}
		return out + "warnings:\n" + rowsText(w[0].Rows)
	}
	serial := map[string]string{}
	for _, workers := range []int{1, 2} {
		mustExec(t, s, fmt.Sprintf("SET tidb_executor_concurrency = %d", workers))
		for _, q := range queries {
			mustExec(t, s, "SET tidb_enable_vectorized_expression = OFF")
			want := run(q)
			mustExec(t, s, "SET tidb_enable_vectorized_expression = ON")
			got := run(q)
			if got != want {
				t.Errorf("%d workers: %s\nbatches:  %.600s\nrow path: %.600s", workers, q, got, want)
			}
			// Workers give the serial aggregation's rows and warnings,
			// in its order.
			if workers == 1 {
				serial[q] = want
			} else if want != serial[q] {
				t.Errorf("%s: 2 workers differ from the serial aggregation\nworkers: %.600s\nserial:  %.600s", q, want, serial[q])
			}
			if strings.Contains(q, "GROUP BY") && !strings.Contains(q, "WHERE") && !strings.Contains(q, "9223372036854775807") && workers == 2 {
				an, err := queryText(t, s, "EXPLAIN ANALYZE "+q)
				if err != nil || !strings.Contains(an, "workers=2") {
					t.Errorf("%s did not aggregate in parallel (%v):\n%s", q, err, an)
				}
			}
		}
	}
	// The answers are not vacuous: the warnings and the error occur.
	mustExec(t, s, "SET tidb_executor_concurrency = 1")
	if out := run(queries[1]); !strings.Contains(out, "1292") || !strings.Contains(out, "1365") {
		t.Errorf("%s: expected truncation (1292) and division-by-zero (1365) warnings:\n%.800s", queries[1], out)
	}
	if out := run(queries[5]); !strings.Contains(out, "error") {
		t.Errorf("%s: expected an overflow error, got\n%.300s", queries[5], out)
	}
}
