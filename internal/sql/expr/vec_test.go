package expr

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/strata-db/strata/internal/sql/types"
)

// vecGen writes random SQL expressions over testColumns' names.
type vecGen struct{ rng *rand.Rand }

func (g vecGen) pick(xs ...string) string { return xs[g.rng.IntN(len(xs))] }

func (g vecGen) leaf() string {
	if g.rng.IntN(3) == 0 {
		return g.pick("0", "1", "-1", "2", "100", "3.5", "0.25", "1e3", "'7'", "'abc'", "'ABC'", "'1.5x'", "''", "NULL",
			"9223372036854775807", "18446744073709551615", "'2020-01-02'")
	}
	return g.pick("i", "j", "n", "big", "u", "d", "f", "s", "t", "day")
}

func (g vecGen) expr(depth int) string {
	if depth == 0 || g.rng.IntN(4) == 0 {
		return g.leaf()
	}
	a, b := g.expr(depth-1), g.expr(depth-1)
	switch g.rng.IntN(12) {
	case 0, 1:
		return "(" + a + " " + g.pick("+", "-", "*", "/", "DIV", "%", "&", "|", "<<") + " " + b + ")"
	case 2, 3:
		return "(" + a + " " + g.pick("=", "<>", "<", "<=", ">", ">=", "<=>") + " " + b + ")"
	case 4:
		return "(" + a + " " + g.pick("AND", "OR", "XOR") + " " + b + ")"
	case 5:
		return "(" + g.pick("NOT ", "-", "~") + "(" + a + "))"
	case 6:
		return "(" + a + g.pick(" IS NULL)", " IS NOT NULL)", " IS TRUE)", " IS NOT FALSE)")
	case 7:
		return g.pick("LENGTH", "CHAR_LENGTH", "UPPER", "ABS", "FLOOR", "CEIL") + "(" + a + ")"
	case 8:
		return g.pick("CONCAT", "IFNULL", "LEFT", "NULLIF") + "(" + a + ", " + b + ")"
	case 9:
		return "SUBSTRING(" + a + ", " + b + ", 2)"
	case 10:
		return "(" + a + g.pick(" BETWEEN ", " NOT BETWEEN ") + b + " AND " + g.expr(depth-1) + ")"
	default:
		return "(" + a + g.pick(" IN (", " NOT IN (") + b + ", " + g.leaf() + "))"
	}
}

// vecRows are rows of testColumns' shape with random values, NULLs
// included.
func vecRows(rng *rand.Rand, n int) [][]types.Datum {
	dec := func(s string) types.Datum {
		d, err := types.ParseDecimal(s)
		if err != nil {
			panic(err)
		}
		return types.NewDecimal(d)
	}
	tm, _ := types.ParseTime("2020-01-02 03:04:05", mysql.TypeDatetime, 0)
	day, _ := types.ParseTime("2021-12-31", mysql.TypeDate, 0)
	choices := [][]types.Datum{
		{types.NewInt(7), types.NewInt(0), types.NewInt(-1), types.NewInt(100)},
		{types.NewInt(-3), types.NewInt(2), types.NewInt(0)},
		{{}, types.NewInt(5)},
		{types.NewInt(9223372036854775807), types.NewInt(-9223372036854775808), types.NewInt(1)},
		{types.NewUint(18446744073709551615), types.NewUint(0), types.NewUint(3)},
		{dec("3.50"), dec("-0.01"), dec("0.00"), dec("99999999.99")},
		{types.NewFloat(2.5), types.NewFloat(-1e300), types.NewFloat(0)},
		{types.NewString("abc"), types.NewString("ABC"), types.NewString("12"), types.NewString("1.5x"), types.NewString(""), types.NewString("é")},
		{types.NewTime(tm)},
		{types.NewTime(day)},
	}
	rows := make([][]types.Datum, n)
	for i := range rows {
		row := make([]types.Datum, len(choices))
		for c, vals := range choices {
			if rng.IntN(8) == 0 {
				continue // NULL
			}
			row[c] = vals[rng.IntN(len(vals))]
		}
		rows[i] = row
	}
	return rows
}

func sameDatum(a, b types.Datum) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	return a.IsNull() || a.String() == b.String()
}

// TestVecMatchesEval evaluates random expressions over random batches both
// ways. Where row-by-row evaluation fails or warns on some row, the batch
// must fail or warn too (the caller then falls back to rows); where the
// batch passes cleanly, every value must be Eval's.
func TestVecMatchesEval(t *testing.T) {
	cols := testColumns(t)
	rng := rand.New(rand.NewPCG(1, 2))
	g := vecGen{rng}
	var clean, fellBack, refused int
	for iter := 0; iter < 4000; iter++ {
		sql := g.expr(3)
		e, err := compileSQL(t, cols, sql)
		if err != nil {
			continue
		}
		v := NewVec(e)
		if v == nil {
			refused++
			continue
		}
		rows := vecRows(rng, 1+rng.IntN(40))
		var sel []int
		for i := range rows {
			if rng.IntN(3) > 0 {
				sel = append(sel, i)
			}
		}
		// The same Vec serves several batches: its vectors are reused.
		for round := 0; round < 2; round++ {
			var rowWarn []error
			rowCtx := &EvalContext{Warnings: &rowWarn}
			want := make([]types.Datum, len(sel))
			var rowErr error
			for j, i := range sel {
				if want[j], rowErr = e.Eval(rowCtx, rows[i]); rowErr != nil {
					break
				}
			}
			var vecWarn []error
			got, vecErr := v.Eval(&EvalContext{Warnings: &vecWarn}, rows, sel)
			if vecErr != nil || len(vecWarn) > 0 {
				fellBack++
				continue
			}
			if rowErr != nil || len(rowWarn) > 0 {
				t.Fatalf("%s: rows give error %v, warnings %v; the batch passed cleanly", sql, rowErr, rowWarn)
			}
			clean++
			for j := range sel {
				if !sameDatum(got[j], want[j]) {
					t.Fatalf("%s over row %v: batch %s, Eval %s", sql, rows[sel[j]], formatDatum(got[j]), formatDatum(want[j]))
				}
			}
			sel = sel[:len(sel)/2]
		}
	}
	t.Logf("clean batches %d, batches that fall back %d, expressions refused %d", clean, fellBack, refused)
	if clean < 1000 {
		t.Fatalf("only %d clean batches: the generator tests too little", clean)
	}
}

// TestVecRefusesSideEffects: expressions whose evaluation count matters
// are not batch-evaluated.
func TestVecRefusesSideEffects(t *testing.T) {
	cols := testColumns(t)
	for _, sql := range []string{"RAND()", "i + RAND()", "UUID()", "SLEEP(0)", "@x", "COALESCE(i, RAND())", "i BETWEEN 1 AND RAND()"} {
		e, err := compileSQL(t, cols, sql)
		if err != nil {
			t.Fatal(err)
		}
		if NewVec(e) != nil {
			t.Errorf("%s: batch evaluation accepted", sql)
		}
	}
	for _, sql := range []string{"i + 1", "s LIKE 'a%'", "CASE WHEN i > 0 THEN s END", "LENGTH(s) > 2 AND i % 10 = 3"} {
		e, err := compileSQL(t, cols, sql)
		if err != nil {
			t.Fatal(err)
		}
		if NewVec(e) == nil {
			t.Errorf("%s: batch evaluation refused", sql)
		}
	}
}

func BenchmarkVecVsEval(b *testing.B) {
	cols := testColumns(b)
	rng := rand.New(rand.NewPCG(1, 2))
	rows := vecRows(rng, 1024)
	sel := make([]int, len(rows))
	for i := range sel {
		sel[i] = i
	}
	for _, sql := range []string{"i % 100", "LENGTH(s)", "i > 5 AND j < 2", "(i + j) * 2 >= j - 1", "d * (1 - d)", "CASE WHEN i > 5 THEN d ELSE 0 END"} {
		e, err := compileSQL(b, cols, sql)
		if err != nil {
			b.Fatal(err)
		}
		name := strings.NewReplacer(" ", "", "%", "mod", "*", "x").Replace(sql)
		b.Run(name+"/rows", func(b *testing.B) {
			ctx := &EvalContext{}
			for range b.N {
				for _, i := range sel {
					if _, err := e.Eval(ctx, rows[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sel)), "ns/row")
		})
		b.Run(name+"/batch", func(b *testing.B) {
			ctx := &EvalContext{}
			v := NewVec(e)
			for range b.N {
				if _, err := v.Eval(ctx, rows, sel); err != nil {
					b.Fatal(fmt.Sprint(err))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sel)), "ns/row")
		})
	}
}
