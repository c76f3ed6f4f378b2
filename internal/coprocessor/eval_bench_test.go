package coprocessor

import (
	"math/rand"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// sbtestFragment returns the fragment of a group-by over sysbench's
// sbtest1 (id handle, k INT, c CHAR(120), pad CHAR(60)) and row values
// shaped as sysbench writes them.
func sbtestFragment(b *testing.B, groupBy expr.Expr, funcs ...*kvpb.CopAggFunc) (*Fragment, [][]byte) {
	b.Helper()
	intFT := ptypes.NewFieldType(mysql.TypeLong)
	intFT.SetFlag(mysql.NotNullFlag)
	charFT := func(n int) *ptypes.FieldType {
		ft := ptypes.NewFieldType(mysql.TypeString)
		ft.SetFlen(n)
		ft.SetCharset("utf8mb4")
		ft.SetCollate("utf8mb4_0900_ai_ci")
		ft.SetFlag(mysql.NotNullFlag)
		return ft
	}
	fts := []*ptypes.FieldType{intFT, intFT, charFT(120), charFT(60)}
	scan := &kvpb.CopScan{TableId: 100, HandleOffset: 0}
	for i, ft := range fts {
		scan.Columns = append(scan.Columns, &kvpb.CopColumnInfo{Id: int64(i + 1), Type: FieldTypeToPB(ft), Needed: true})
	}
	agg := &kvpb.CopAgg{Funcs: funcs}
	if groupBy != nil {
		g, ok := ExprToPB(groupBy)
		if !ok {
			b.Fatalf("%s does not push", groupBy)
		}
		agg.GroupBy = []*kvpb.CopExpr{g}
	}
	dag := &kvpb.CopDAG{Scan: scan, Agg: agg}
	// Only the columns the expressions read are needed.
	for _, c := range scan.Columns {
		c.Needed = false
	}
	var mark func(e *kvpb.CopExpr)
	mark = func(e *kvpb.CopExpr) {
		if e.Kind == kvpb.CopExprKind_CopColumnRef {
			scan.Columns[e.Column].Needed = true
		}
		for _, a := range e.Args {
			mark(a)
		}
	}
	for _, g := range agg.GroupBy {
		mark(g)
	}
	for _, f := range funcs {
		for _, a := range f.Args {
			mark(a)
		}
	}
	f, err := Compile(dag)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	digits := func(n int) []byte {
		out := make([]byte, 0, n)
		for len(out) < n {
			if len(out)%12 == 11 {
				out = append(out, '-')
			} else {
				out = append(out, byte('0'+rng.Intn(10)))
			}
		}
		return out
	}
	var rows [][]byte
	for range 4096 {
		v, err := codec.EncodeRow(nil, []int64{2, 3, 4}, []types.Datum{
			types.NewInt(int64(rng.Intn(1000000))), types.NewStringBytes(digits(119)), types.NewStringBytes(digits(59)),
		})
		if err != nil {
			b.Fatal(err)
		}
		rows = append(rows, v)
	}
	return f, rows
}

func column(i int, ft *ptypes.FieldType, name string) expr.Expr { return expr.NewColumn(i, ft, name) }

// sbtestTypes are the types of sbtest1's k (INT NOT NULL) and of its
// CHAR columns.
func sbtestTypes() (intFT, charFT *ptypes.FieldType) {
	intFT = ptypes.NewFieldType(mysql.TypeLong)
	intFT.SetFlag(mysql.NotNullFlag)
	charFT = ptypes.NewFieldType(mysql.TypeString)
	charFT.SetCharset("utf8mb4")
	charFT.SetCollate("utf8mb4_0900_ai_ci")
	charFT.SetFlag(mysql.NotNullFlag)
	return intFT, charFT
}

func BenchmarkFragmentGroupBy(b *testing.B) {
	intFT, charFT := sbtestTypes()
	mustPB := func(e expr.Expr, err error) *kvpb.CopExpr {
		if err != nil {
			b.Fatal(err)
		}
		p, ok := ExprToPB(e)
		if !ok {
			b.Fatalf("%s does not push", e)
		}
		return p
	}
	k := column(1, intFT, "k")
	c := column(2, charFT, "c")
	pad := column(3, charFT, "pad")
	substr, err := expr.NewFunc("substring", []expr.Expr{pad, expr.NewConstant(types.NewInt(1), nil), expr.NewConstant(types.NewInt(2), nil)})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		groupBy expr.Expr
		funcs   []*kvpb.CopAggFunc
	}{
		{"k%100", expr.NewArith(expr.OpMod, k, expr.NewConstant(types.NewInt(100), nil)), []*kvpb.CopAggFunc{
			{Name: "count"}, {Name: "sum", Args: []*kvpb.CopExpr{mustPB(expr.NewFunc("length", []expr.Expr{c}))}},
		}},
		{"substring", substr, []*kvpb.CopAggFunc{
			{Name: "count"}, {Name: "avg", Args: []*kvpb.CopExpr{mustPB(k, nil)}},
		}},
	} {
		for _, mode := range []string{"batch", "rows"} {
			b.Run(tc.name+"/"+mode, func(b *testing.B) {
				benchFragment(b, mode, tc.groupBy, tc.funcs)
			})
		}
	}
}

func benchFragment(b *testing.B, mode string, groupBy expr.Expr, funcs []*kvpb.CopAggFunc) {
	f, rows := sbtestFragment(b, groupBy, funcs...)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		r := f.NewRunner(0)
		if mode == "rows" {
			r.vecTried = true // the row-at-a-time path
		}
		for j := 0; j < 100000 && i < b.N; j, i = j+1, i+1 {
			if err := r.Add(nil, rows[i%len(rows)]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := r.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFragmentFilter is a filtered aggregation over sbtest1 rows:
// SELECT COUNT(*), SUM(k) ... WHERE k >= 100000 AND k < 900000 AND
// LENGTH(c) > 10 AND k % 7 <> 3.
func BenchmarkFragmentFilter(b *testing.B) {
	intFT, charFT := sbtestTypes()
	k := column(1, intFT, "k")
	c := column(2, charFT, "c")
	num := func(v int64) expr.Expr { return expr.NewConstant(types.NewInt(v), nil) }
	length, err := expr.NewFunc("length", []expr.Expr{c})
	if err != nil {
		b.Fatal(err)
	}
	cond := expr.NewLogic(expr.LogicAnd,
		expr.NewLogic(expr.LogicAnd, expr.NewComparison(expr.CmpGE, k, num(100000)), expr.NewComparison(expr.CmpLT, k, num(900000))),
		expr.NewLogic(expr.LogicAnd, expr.NewComparison(expr.CmpGT, length, num(10)),
			expr.NewComparison(expr.CmpNE, expr.NewArith(expr.OpMod, k, num(7)), num(3))))
	kpb, _ := ExprToPB(k)
	for _, mode := range []string{"batch", "rows"} {
		b.Run(mode, func(b *testing.B) {
			f, rows := sbtestFragment(b, nil, &kvpb.CopAggFunc{Name: "count"}, &kvpb.CopAggFunc{Name: "sum", Args: []*kvpb.CopExpr{kpb}})
			fpb, ok := ExprToPB(cond)
			if !ok {
				b.Fatal("filter does not push")
			}
			dag := f.dag
			dag.Filter = fpb
			for _, col := range dag.Scan.Columns[1:3] {
				col.Needed = true
			}
			if f, err = Compile(dag); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; {
				r := f.NewRunner(0)
				if mode == "rows" {
					r.vecTried = true
				}
				for j := 0; j < 100000 && i < b.N; j, i = j+1, i+1 {
					if err := r.Add(nil, rows[i%len(rows)]); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := r.Finish(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
