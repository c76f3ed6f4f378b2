package sql_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// TestCopAggregationOverQuotaFallsBack: on a real in-process node, a GROUP
// BY pushed to the coprocessor whose final merge holds more groups than
// the statement's quota falls back to the aggregation in SQL, which
// spills, and answers as without a quota; without spilling it fails with
// 8175.
func TestCopAggregationOverQuotaFallsBack(t *testing.T) {
	ctx := context.Background()
	n := inProcessNode(t)
	s := n.SQL().NewSession("root", "localhost")
	run := func(q string) (string, error) {
		rs, err := s.Execute(ctx, q)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for _, r := range rs[len(rs)-1].Rows {
			for _, d := range r {
				b.Write(d.AppendText(nil))
				b.WriteByte(' ')
			}
			b.WriteByte('\n')
		}
		return b.String(), nil
	}
	must := func(q string) string {
		t.Helper()
		out, err := run(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	must("CREATE DATABASE d")
	must("USE d")
	must("CREATE TABLE t (id INT PRIMARY KEY, g INT, v DECIMAL(10,2))")
	for start := 0; start < 20000; start += 1000 {
		var vals []string
		for i := start; i < start+1000; i++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, %d.%02d)", i, i%5000, i%1000, i%100))
		}
		must("INSERT INTO t VALUES " + strings.Join(vals, ","))
	}
	q := "SELECT COUNT(*), SUM(c), SUM(sv) FROM (SELECT g, COUNT(*) c, SUM(v) sv FROM t GROUP BY g) x"
	if plan := must("EXPLAIN " + q); !strings.Contains(plan, "partial-agg") {
		t.Fatalf("the GROUP BY is not pushed:\n%s", plan)
	}
	want := must(q)
	must("SET tidb_mem_quota_query = 65536")
	must("SET tidb_enable_tmp_storage_on_oom = OFF")
	var se *sqlerr.Error
	if _, err := run(q); !errors.As(err, &se) || se.Code != sqlerr.ErMemoryExceeded {
		t.Fatalf("without spilling: %v, want 8175", err)
	}
	must("SET tidb_enable_tmp_storage_on_oom = ON")
	if got := must(q); got != want {
		t.Fatalf("spilling: %q, want %q", got, want)
	}
}
