package coprocessor

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// runOutcome is everything a run shows its caller: the output rows, where
// it stopped, its error and its warnings.
type runOutcome struct {
	rows     []string
	stopAt   int // record index whose Add returned ErrStop; -1 none
	err      string
	warnings []string
}

// driveRunner feeds records to a runner as the KV server does, with
// range ends (Flush) after the records whose index is in ends.
func driveRunner(t *testing.T, f *Fragment, paging int, rowPath bool, records [][2][]byte, ends map[int]bool) runOutcome {
	t.Helper()
	r := f.NewRunner(paging)
	if rowPath {
		r.vecTried = true
	}
	out := runOutcome{stopAt: -1}
	var err error
	for i, rec := range records {
		if err = r.Add(rec[0], rec[1]); err == ErrStop {
			out.stopAt, err = i, nil
			break
		}
		if err == nil && ends[i] {
			err = r.Flush()
		}
		if err != nil {
			break
		}
	}
	var b *kvpb.CopBatch
	if err == nil {
		b, err = r.Finish()
	}
	if err != nil {
		out.err = err.Error()
	} else {
		rows, derr := DecodeBatch(b, 0)
		if derr != nil {
			t.Fatal(derr)
		}
		for _, row := range rows {
			parts := make([]string, len(row))
			for i, d := range row {
				parts[i] = "NULL"
				if !d.IsNull() {
					parts[i] = fmt.Sprintf("%s:%s", d.Kind(), d.AppendText(nil))
				}
			}
			out.rows = append(out.rows, strings.Join(parts, " "))
		}
	}
	for _, w := range r.Warnings() {
		out.warnings = append(out.warnings, w.Error())
	}
	return out
}

// TestBatchMatchesRowPath runs random fragments with filters (the ones
// evaluated in batches, vec.go) over a table's records both ways: in
// batches, and row at a time. Output, the record a run stops at (a page
// of groups or rows, a limit), errors and warnings must be the same,
// including filters that warn (text compared with numbers), divide by
// zero, overflow, or read columns of rows written before the column was
// added.
func TestBatchMatchesRowPath(t *testing.T) {
	const tableID = 71
	intFT := ptypes.NewFieldType(mysql.TypeLonglong)
	strFT := ptypes.NewFieldType(mysql.TypeVarchar)
	strFT.SetFlen(64)
	strFT.SetCharset("utf8mb4")
	strFT.SetCollate("utf8mb4_0900_ai_ci")
	decFT := ptypes.NewFieldType(mysql.TypeNewDecimal)
	decFT.SetFlen(12)
	decFT.SetDecimal(2)
	// id (handle), a BIGINT, s VARCHAR, c BIGINT added later with
	// DEFAULT 7, m DECIMAL(12,2).
	colFTs := []*ptypes.FieldType{intFT, intFT, strFT, intFT, decFT}
	colIDs := []int64{1, 2, 3, 4, 5}
	origin := []types.Datum{{}, {}, {}, types.NewInt(7), {}}

	rng := rand.New(rand.NewSource(11))
	strs := []string{"abc", "ABC", "12", "7.5x", "", "zz", "0"}
	var records [][2][]byte
	for h := int64(1); h <= 3000; h++ {
		ids := []int64{2, 3, 5}
		if rng.Intn(3) > 0 {
			ids = append(ids, 4)
		}
		vals := make([]types.Datum, len(ids))
		for i, id := range ids {
			if rng.Intn(6) == 0 {
				continue // NULL
			}
			switch id {
			case 2:
				vals[i] = types.NewInt(rng.Int63n(200) - 100)
				if rng.Intn(500) == 0 {
					vals[i] = types.NewInt(1 << 62) // overflows when doubled
				}
			case 3:
				vals[i] = types.NewString(strs[rng.Intn(len(strs))])
			case 4:
				vals[i] = types.NewInt(rng.Int63n(10))
			case 5:
				d, err := types.ParseDecimal(fmt.Sprintf("%d.%02d", rng.Intn(1000)-500, rng.Intn(100)))
				if err != nil {
					t.Fatal(err)
				}
				vals[i] = types.NewDecimal(d)
			}
		}
		v, err := codec.EncodeRow(nil, ids, vals)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, [2][]byte{tablecodec.RecordKey(tableID, h), v})
	}

	col := func(off int) expr.Expr { return expr.NewColumn(off, colFTs[off], fmt.Sprintf("col%d", off)) }
	num := func(v int64) expr.Expr { return expr.NewConstant(types.NewInt(v), nil) }
	str := func(s string) expr.Expr { return expr.NewConstant(types.NewString(s), nil) }
	fn := func(name string, args ...expr.Expr) expr.Expr {
		e, err := expr.NewFunc(name, args)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	conds := []expr.Expr{
		expr.NewComparison(expr.CmpGT, col(1), num(0)),
		expr.NewComparison(expr.CmpLT, col(3), num(5)),
		expr.NewComparison(expr.CmpGE, col(4), num(0)),
		expr.NewComparison(expr.CmpEQ, col(2), str("abc")),
		expr.NewComparison(expr.CmpGT, col(2), num(5)), // warns for text that is not a number
		&expr.IsNull{E: col(1)},
		expr.NewComparison(expr.CmpNE, expr.NewArith(expr.OpMod, col(1), col(3)), num(1)), // % 0 warns
		expr.NewComparison(expr.CmpGT, expr.NewArith(expr.OpMul, col(1), num(2)), num(0)), // overflows
		expr.NewComparison(expr.CmpGT, fn("length", col(2)), num(1)),
		col(2), // a text value as a condition
		expr.NewBetween(col(1), num(-20), num(20), false),
		expr.NewIn(col(3), []expr.Expr{num(1), num(7)}, false),
	}
	randCond := func() expr.Expr {
		e := conds[rng.Intn(len(conds))]
		for k := rng.Intn(3); k > 0; k-- {
			op := expr.LogicAnd
			if rng.Intn(4) == 0 {
				op = expr.LogicOr
			}
			e = expr.NewLogic(op, e, conds[rng.Intn(len(conds))])
		}
		if rng.Intn(6) == 0 {
			e = &expr.Not{E: e}
		}
		return e
	}
	pb := func(e expr.Expr) *kvpb.CopExpr {
		p, ok := ExprToPB(e)
		if !ok {
			t.Fatalf("%s does not push", e)
		}
		return p
	}
	scan := func() *kvpb.CopScan {
		s := &kvpb.CopScan{TableId: tableID, HandleOffset: 0}
		for off := range colFTs {
			info := &kvpb.CopColumnInfo{Id: colIDs[off], Type: FieldTypeToPB(colFTs[off]), Needed: true}
			if !origin[off].IsNull() {
				info.OriginDefault = EncodeDatum(origin[off])
			}
			s.Columns = append(s.Columns, info)
		}
		return s
	}
	var batched, withErrors, withWarnings, stopped int
	for iter := 0; iter < 400; iter++ {
		cond := randCond()
		dag := &kvpb.CopDAG{Scan: scan(), Filter: pb(cond)}
		paging := []int{0, 0, 3, 40, 2000}[rng.Intn(5)]
		switch rng.Intn(3) {
		case 0: // rows, maybe with a limit
			if rng.Intn(2) == 0 {
				dag.Limit = uint64(1 + rng.Intn(1500))
			}
		case 1: // group by
			g := []expr.Expr{col(3), expr.NewArith(expr.OpMod, col(1), num(7)), col(2)}[rng.Intn(3)]
			dag.Agg = &kvpb.CopAgg{GroupBy: []*kvpb.CopExpr{pb(g)}, Funcs: []*kvpb.CopAggFunc{
				{Name: "count"}, {Name: "sum", Args: []*kvpb.CopExpr{pb(col(4))}}, {Name: "max", Args: []*kvpb.CopExpr{pb(col(2))}},
				{Name: "avg", Args: []*kvpb.CopExpr{pb(expr.NewArith(expr.OpPlus, col(1), col(3)))}},
			}}
		default: // one group
			dag.Agg = &kvpb.CopAgg{Funcs: []*kvpb.CopAggFunc{{Name: "count"}, {Name: "min", Args: []*kvpb.CopExpr{pb(col(4))}}}}
		}
		f, err := Compile(dag)
		if err != nil {
			t.Fatal(err)
		}
		if newVecRun(f) == nil {
			t.Fatalf("%s: not evaluated in batches", cond)
		}
		ends := map[int]bool{}
		for k := rng.Intn(4); k > 0; k-- {
			ends[rng.Intn(len(records))] = true
		}
		got := driveRunner(t, f, paging, false, records, ends)
		want := driveRunner(t, f, paging, true, records, ends)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("filter %s, paging %d, limit %d, agg %v:\nbatches: stop %d err %q warnings %d rows %d\nrows:    stop %d err %q warnings %d rows %d",
				cond, paging, dag.Limit, dag.Agg != nil, got.stopAt, got.err, len(got.warnings), len(got.rows),
				want.stopAt, want.err, len(want.warnings), len(want.rows))
		}
		batched++
		if want.err != "" {
			withErrors++
		}
		if len(want.warnings) > 0 {
			withWarnings++
		}
		if want.stopAt >= 0 {
			stopped++
		}
	}
	t.Logf("%d fragments: %d failed, %d warned, %d stopped early", batched, withErrors, withWarnings, stopped)
	if withErrors == 0 || withWarnings == 0 || stopped == 0 {
		t.Fatal("the fragments did not cover errors, warnings and early stops")
	}
}
