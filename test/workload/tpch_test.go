package workload

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/workload/tpch"
	"github.com/strata-db/strata/test/integration"
)

// TestTPCH loads a small TPC-H scale factor into a real strata process with
// `strata workload init tpch`, runs some queries with `run` and all 22
// through the package, and checks
// the answers: `check` compares every table's row count and the answers of
// Q1, Q4, Q6, Q12 and Q13 with values computed from the generator, and the
// test checks the shape every other answer must have on any data of the
// spec (the groups a query's parameters allow).
func TestTPCH(t *testing.T) {
	begin := time.Now()
	n := integration.StartNode(t)
	t.Logf("node started in %s", time.Since(begin).Round(time.Millisecond))
	common := []string{"--scale-factor", "0.01", "--addr", n.SQLAddr, "--query-timeout", "60s"}
	if _, err := run(t, append([]string{"init", "tpch", "--threads", "4"}, common...)...); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded at %s", time.Since(begin).Round(time.Millisecond))
	// run prints a line per execution; all 22 queries run through
	// tpch.Answers below.
	out, err := run(t, append([]string{"run", "tpch", "--queries", "1,6,13-14", "--repeats", "2"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(regexp.MustCompile(`(?m)^_query q=\d+ seconds=[0-9.]+ rows=\d+$`).FindAllString(out, -1)); got != 8 {
		t.Fatalf("%d query executions succeeded, want 8:\n%s", got, out)
	}
	if !strings.Contains(out, "_summary workload=tpch sf=0.01 queries=8 errors=0 ") {
		t.Errorf("no clean summary line:\n%s", out)
	}
	out, err = run(t, append([]string{"check", "tpch"}, common...)...)
	if err != nil || !strings.Contains(out, "all 13 checks pass") {
		t.Fatalf("check: %v\n%s", err, out)
	}

	t.Logf("run and check done at %s", time.Since(begin).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := tpch.Config{Addr: n.SQLAddr, Database: "tpch", ScaleFactor: 0.01, Timeout: 10 * time.Second}
	res, errs, err := tpch.Answers(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("22 queries answered at %s", time.Since(begin).Round(time.Millisecond))
	for q, err := range errs {
		t.Errorf("Q%d: %v", q, err)
	}
	// Rows every answer has whatever the data: Q1 the four (return flag,
	// line status) pairs the spec's dates produce, Q4 the five priorities,
	// Q5 the five nations of ASIA, Q7 two nation pairs over two years, Q8
	// two years, Q12 the two ship modes, aggregates without GROUP BY one.
	exact := map[int]int{1: 4, 4: 5, 5: 5, 7: 4, 8: 2, 12: 2, 6: 1, 14: 1, 17: 1, 19: 1}
	for q, want := range exact {
		if got := len(res[q]); got != want {
			t.Errorf("Q%d: %d rows, want %d: %v", q, got, want, res[q])
		}
	}
	limits := map[int]int{2: 100, 3: 10, 10: 20, 18: 100, 21: 100, 22: 7, 9: 25 * 7, 13: 1 << 20}
	for q, most := range limits {
		if got := len(res[q]); got > most || (got == 0 && q != 18) {
			t.Errorf("Q%d: %d rows, want 1 to %d", q, got, most)
		}
	}
	if len(res[1]) == 4 {
		flags := []string{}
		for _, r := range res[1] {
			flags = append(flags, r[0]+r[1])
		}
		if strings.Join(flags, " ") != "AF NF NO RF" {
			t.Errorf("Q1 groups %v, want AF NF NO RF", flags)
		}
	}
	// Q13's distribution counts every customer once.
	var customers int
	for _, r := range res[13] {
		var c int
		for _, ch := range r[1] {
			c = c*10 + int(ch-'0')
		}
		customers += c
	}
	if customers != tpch.SizesFor(0.01).Customers {
		t.Errorf("Q13 counts %d customers, want %d", customers, tpch.SizesFor(0.01).Customers)
	}
	// Q15's supplier has the greatest revenue: one row (or ties).
	if len(res[15]) < 1 {
		t.Errorf("Q15: no top supplier")
	}
}
