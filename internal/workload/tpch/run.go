package tpch

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Timing is one query's execution.
type Timing struct {
	Query   int
	Elapsed time.Duration
	Rows    int
	Err     error
}

// Run executes the queries (1..22 when qs is empty) repeats times each,
// in order, on one connection, and prints every execution's time and a
// line per query for scripts:
//
//	_query q=N seconds=X rows=N [error="..."]
//
// then a summary line. A query that fails is reported and the run goes
// on; the error returned counts the failures.
func Run(ctx context.Context, cfg Config, qs []int, repeats int, out io.Writer) ([]Timing, error) {
	db, err := open(ctx, cfg, cfg.Database, 1)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	conn, err := session(ctx, db, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if len(qs) == 0 {
		for q := 1; q <= NumQueries; q++ {
			qs = append(qs, q)
		}
	}
	var timings []Timing
	failed := 0
	var total time.Duration
	fmt.Fprintf(out, "TPC-H scale factor %g on %s, database %s\n", cfg.ScaleFactor, cfg.Addr, cfg.Database)
	for _, q := range qs {
		for rep := 0; rep < max(repeats, 1); rep++ {
			if ctx.Err() != nil {
				return timings, ctx.Err()
			}
			begin := time.Now()
			res, err := runQuery(ctx, conn, Query(q, cfg.ScaleFactor))
			t := Timing{Query: q, Elapsed: time.Since(begin), Rows: len(res), Err: err}
			timings = append(timings, t)
			if err != nil {
				failed++
				fmt.Fprintf(out, "Q%-2d  error after %.3fs: %v\n", q, t.Elapsed.Seconds(), err)
				fmt.Fprintf(out, "_query q=%d seconds=%.3f rows=0 error=%q\n", q, t.Elapsed.Seconds(), err.Error())
				if conn.PingContext(ctx) != nil {
					// The server closed the connection (a timeout): open another.
					conn.Close()
					if conn, err = session(ctx, db, cfg); err != nil {
						return timings, err
					}
				}
				continue
			}
			total += t.Elapsed
			fmt.Fprintf(out, "Q%-2d  %8.3fs  %d rows\n", q, t.Elapsed.Seconds(), t.Rows)
			fmt.Fprintf(out, "_query q=%d seconds=%.3f rows=%d\n", q, t.Elapsed.Seconds(), t.Rows)
		}
	}
	fmt.Fprintf(out, "_summary workload=tpch sf=%g queries=%d errors=%d seconds=%.3f\n", cfg.ScaleFactor, len(timings), failed, total.Seconds())
	if failed > 0 {
		return timings, fmt.Errorf("%d of %d query executions failed", failed, len(timings))
	}
	return timings, nil
}

// Answers runs queries qs (all when empty) once each and returns their
// results by query number; a failed query's error is in errs.
func Answers(ctx context.Context, cfg Config, qs []int) (map[int]Result, map[int]error, error) {
	db, err := open(ctx, cfg, cfg.Database, 1)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	conn, err := session(ctx, db, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	if len(qs) == 0 {
		for q := 1; q <= NumQueries; q++ {
			qs = append(qs, q)
		}
	}
	res, errs := map[int]Result{}, map[int]error{}
	for _, q := range qs {
		r, err := runQuery(ctx, conn, Query(q, cfg.ScaleFactor))
		if err != nil {
			errs[q] = err
			if conn.PingContext(ctx) != nil {
				conn.Close()
				if conn, err = session(ctx, db, cfg); err != nil {
					return res, errs, err
				}
			}
			continue
		}
		res[q] = r
	}
	return res, errs, nil
}

// sameValue compares two values of an answer: equal text, or numbers that
// round to the same hundredth (within one hundredth, for values that fall
// either side of a rounding boundary, and within a relative 1e-12 for the
// float64 they are parsed into).
func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	d := math.Abs(math.Round(x*100)/100 - math.Round(y*100)/100)
	return d <= 0.0100001 || d <= 1e-12*math.Max(math.Abs(x), math.Abs(y))
}

func sameRow(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Compare reports how answer got differs from want, or "" when they are
// the same: the same number of rows, each row's values the same in order.
// Rows that the query's ORDER BY leaves tied may come in any order, so a
// second comparison sorts both answers first.
func Compare(got, want Result) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d rows, want %d", len(got), len(want))
	}
	first := -1
	for i := range got {
		if !sameRow(got[i], want[i]) {
			first = i
			break
		}
	}
	if first < 0 {
		return ""
	}
	g, w := sortedCopy(got), sortedCopy(want)
	for i := range g {
		if !sameRow(g[i], w[i]) {
			return fmt.Sprintf("row %d is %v, want %v", first+1, got[first], want[first])
		}
	}
	return ""
}

func sortedCopy(r Result) Result {
	c := append(Result(nil), r...)
	key := func(row []string) string {
		parts := make([]string, len(row))
		for i, v := range row {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				v = strconv.FormatFloat(math.Round(f*100)/100, 'f', 2, 64)
			}
			parts[i] = v
		}
		return strings.Join(parts, "\x00")
	}
	sort.SliceStable(c, func(i, j int) bool { return key(c[i]) < key(c[j]) })
	return c
}
