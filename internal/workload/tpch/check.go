package tpch

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

func dayOf(y int, m time.Month, d int) int {
	return int(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Sub(epoch).Hours() / 24)
}

// fixed formats v × 10^-scale.
func fixed(v int64, scale int) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	s := strconv.FormatInt(v, 10)
	for len(s) <= scale {
		s = "0" + s
	}
	return sign + s[:len(s)-scale] + "." + s[len(s)-scale:]
}

func ratio(a, b int64) string { return strconv.FormatFloat(float64(a)/float64(b), 'f', 6, 64) }

// Expected is what check computes from the generator, independently of any
// server: each table's row count and the answers of some queries.
type Expected struct {
	Counts  map[string]int64
	Answers map[int]Result
}

// Reference generates the data of a scale factor and seed in memory (one
// pass, nothing kept but the aggregates) and returns the row counts and the
// answers of Q1, Q4, Q6, Q12 and Q13.
func Reference(sf float64, seed uint64) Expected {
	g := NewGenerator(sf, seed)
	sz := g.Sizes
	e := Expected{Counts: map[string]int64{
		"nation": 25, "region": 5, "part": int64(sz.Parts), "partsupp": 4 * int64(sz.Parts),
		"supplier": int64(sz.Suppliers), "customer": int64(sz.Customers), "orders": int64(sz.Orders),
	}, Answers: map[int]Result{}}

	type q1group struct{ qty, base, disc, charge, discount, n int64 }
	q1 := map[string]*q1group{}
	q1cut := dayOf(1998, 9, 2) // 1998-12-01 - 90 days
	q4 := map[string]int64{}
	q4lo, q4hi := dayOf(1993, 7, 1), dayOf(1993, 10, 1)
	var q6 int64 // 1/10,000ths
	y94, y95 := dayOf(1994, 1, 1), dayOf(1995, 1, 1)
	q12 := map[string][2]int64{}
	perCust := map[int]int64{} // Q13: orders whose comment does not match
	var lines int64
	for c := 0; c < Chunks(sz.Orders); c++ {
		g.Orders(c, func(o *Order) {
			lines += int64(len(o.Lines))
			late := false
			for _, l := range o.Lines {
				if l.Ship <= q1cut {
					k := l.ReturnFlag + "\x00" + l.LineStatus
					gr := q1[k]
					if gr == nil {
						gr = &q1group{}
						q1[k] = gr
					}
					gr.qty += int64(l.Quantity)
					gr.base += l.Extended
					gr.disc += l.Extended * (100 - l.Discount)
					gr.charge += l.Extended * (100 - l.Discount) * (100 + l.Tax)
					gr.discount += l.Discount
					gr.n++
				}
				if l.Commit < l.Receipt {
					late = true
				}
				if l.Ship >= y94 && l.Ship < y95 && l.Discount >= 5 && l.Discount <= 7 && l.Quantity < 24 {
					q6 += l.Extended * l.Discount
				}
				if (l.Mode == "MAIL" || l.Mode == "SHIP") && l.Commit < l.Receipt && l.Ship < l.Commit &&
					l.Receipt >= y94 && l.Receipt < y95 {
					v := q12[l.Mode]
					if o.Priority == "1-URGENT" || o.Priority == "2-HIGH" {
						v[0]++
					} else {
						v[1]++
					}
					q12[l.Mode] = v
				}
			}
			if late && o.Date >= q4lo && o.Date < q4hi {
				q4[o.Priority]++
			}
			if i := strings.Index(o.Cmt, "special"); i < 0 || !strings.Contains(o.Cmt[i+len("special"):], "requests") {
				perCust[o.Cust]++
			}
		})
	}
	e.Counts["lineitem"] = lines

	var r Result
	for _, k := range sortedKeys(q1) {
		gr := q1[k]
		f := strings.Split(k, "\x00")
		r = append(r, []string{f[0], f[1], fixed(gr.qty, 0), fixed(gr.base, 2), fixed(gr.disc, 4), fixed(gr.charge, 6),
			ratio(gr.qty, gr.n), ratio(gr.base, 100*gr.n), ratio(gr.discount, 100*gr.n), strconv.FormatInt(gr.n, 10)})
	}
	e.Answers[1] = r

	r = nil
	for _, k := range sortedKeys(q4) {
		r = append(r, []string{k, strconv.FormatInt(q4[k], 10)})
	}
	e.Answers[4] = r
	e.Answers[6] = Result{{fixed(q6, 4)}}
	if q6 == 0 {
		e.Answers[6] = Result{{"NULL"}}
	}

	r = nil
	for _, k := range sortedKeys(q12) {
		r = append(r, []string{k, strconv.FormatInt(q12[k][0], 10), strconv.FormatInt(q12[k][1], 10)})
	}
	e.Answers[12] = r

	hist := map[int64]int64{}
	for k := 1; k <= sz.Customers; k++ {
		hist[perCust[k]]++
	}
	type bucket struct{ count, dist int64 }
	var bs []bucket
	for c, d := range hist {
		bs = append(bs, bucket{c, d})
	}
	sort.Slice(bs, func(i, j int) bool {
		if bs[i].dist != bs[j].dist {
			return bs[i].dist > bs[j].dist
		}
		return bs[i].count > bs[j].count
	})
	r = nil
	for _, b := range bs {
		r = append(r, []string{strconv.FormatInt(b.count, 10), strconv.FormatInt(b.dist, 10)})
	}
	e.Answers[13] = r
	return e
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Check verifies a loaded database: every table's row count and the
// answers of Q1, Q4, Q6, Q12 and Q13 against Reference, and, when against
// is not nil, the answers of queries qs (all when empty) against those of
// the server it describes (loaded with the same scale factor and seed). It prints one
// line per check and returns an error if any fails.
func Check(ctx context.Context, cfg Config, against *Config, qs []int, out io.Writer) error {
	db, err := open(ctx, cfg, cfg.Database, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	exp := Reference(cfg.ScaleFactor, cfg.Seed)
	failed, checks := 0, 0
	report := func(name, problem string) {
		checks++
		if problem != "" {
			failed++
			fmt.Fprintf(out, "%-40s FAILED: %s\n", name, problem)
			return
		}
		fmt.Fprintf(out, "%-40s ok\n", name)
	}
	for _, t := range TableNames {
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t).Scan(&n); err != nil {
			report("rows of "+t, err.Error())
			continue
		}
		problem := ""
		if n != exp.Counts[t] {
			problem = fmt.Sprintf("%d rows, want %d", n, exp.Counts[t])
		}
		report(fmt.Sprintf("rows of %s (%d)", t, exp.Counts[t]), problem)
	}
	var refQs []int
	for q := range exp.Answers {
		refQs = append(refQs, q)
	}
	sort.Ints(refQs)
	got, errs, err := Answers(ctx, cfg, refQs)
	if err != nil {
		return err
	}
	for _, q := range refQs {
		name := fmt.Sprintf("Q%d = answer computed from the generator", q)
		if errs[q] != nil {
			report(name, errs[q].Error())
			continue
		}
		report(name, Compare(got[q], exp.Answers[q]))
	}
	if against != nil {
		if len(qs) == 0 {
			for q := 1; q <= NumQueries; q++ {
				qs = append(qs, q)
			}
		}
		mine, myErrs, err := Answers(ctx, cfg, qs)
		if err != nil {
			return err
		}
		theirs, theirErrs, err := Answers(ctx, *against, qs)
		if err != nil {
			return err
		}
		for _, q := range qs {
			name := fmt.Sprintf("Q%d = answer of %s", q, against.Addr)
			switch {
			case myErrs[q] != nil:
				report(name, myErrs[q].Error())
			case theirErrs[q] != nil:
				report(name, against.Addr+": "+theirErrs[q].Error())
			default:
				report(name, Compare(mine[q], theirs[q]))
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, checks)
	}
	fmt.Fprintf(out, "all %d checks pass\n", checks)
	return nil
}
