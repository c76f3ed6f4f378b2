package sql_test

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkAnalytic runs the analytic queries over sbtest1 (an
// in-process node, sbtestRows rows) serially and with two workers
// (tidb_executor_concurrency), in batches and row by row
// (tidb_enable_vectorized_expression), and under a quota that makes them
// spill.
//
//	go test ./internal/sql -run '^$' -bench Analytic -benchtime 5x
func BenchmarkAnalytic(b *testing.B) {
	s := newSbtestSession(b)
	ctx := context.Background()
	// The SQL operators, not the coprocessor's aggregation.
	if _, err := s.Execute(ctx, "SET strata_enable_coprocessor = OFF"); err != nil {
		b.Fatal(err)
	}
	queries := []struct{ name, q string }{
		{"groupby100", "SELECT k % 100 g, COUNT(*), SUM(LENGTH(c)) FROM sbtest1 GROUP BY g ORDER BY g"},
		{"groupby_substr", "SELECT SUBSTRING(pad, 1, 2) p, COUNT(*), AVG(k) FROM sbtest1 GROUP BY p ORDER BY 2 DESC LIMIT 5"},
		{"groupby_many", "SELECT COUNT(*), SUM(n) FROM (SELECT k, COUNT(*) n FROM sbtest1 GROUP BY k) x"},
		{"join", "SELECT COUNT(*) FROM sbtest1 a JOIN sbtest1 b ON a.k = b.id + 0"},
	}
	for _, q := range queries {
		for _, mode := range []struct {
			name string
			set  string
		}{
			{"serial", "SET tidb_executor_concurrency = 1, tidb_mem_quota_query = DEFAULT, tidb_enable_vectorized_expression = ON"},
			{"serial_rowbyrow", "SET tidb_executor_concurrency = 1, tidb_mem_quota_query = DEFAULT, tidb_enable_vectorized_expression = OFF"},
			{"workers2", "SET tidb_executor_concurrency = 2, tidb_mem_quota_query = DEFAULT, tidb_enable_vectorized_expression = ON"},
			{"workers2_rowbyrow", "SET tidb_executor_concurrency = 2, tidb_mem_quota_query = DEFAULT, tidb_enable_vectorized_expression = OFF"},
			{"spill", "SET tidb_executor_concurrency = 1, tidb_mem_quota_query = 4194304, tidb_enable_vectorized_expression = ON"},
		} {
			b.Run(fmt.Sprintf("%s/%s", q.name, mode.name), func(b *testing.B) {
				if _, err := s.Execute(ctx, mode.set); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < b.N; i++ {
					if _, err := s.Execute(ctx, q.q); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
