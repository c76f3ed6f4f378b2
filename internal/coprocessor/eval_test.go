package coprocessor

import (
	"fmt"
	"math/rand"
	"slices"
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

// TestRunnerDecodesEveryLayout runs fragments over the records of a table
// whose columns changed while it was written: rows without the columns
// added later (ALTER TABLE ADD COLUMN, one with a default, one without),
// rows still holding a dropped column, in any order. Every fragment's
// output must be what decoding each row in full (codec.DecodeRow with the
// defaults filled in) gives, whichever columns it reads or skips.
func TestRunnerDecodesEveryLayout(t *testing.T) {
	const tableID = 70
	intFT := ptypes.NewFieldType(mysql.TypeLonglong)
	strFT := ptypes.NewFieldType(mysql.TypeVarchar)
	strFT.SetFlen(64)
	strFT.SetCharset("utf8mb4")
	strFT.SetCollate("utf8mb4_0900_ai_ci")
	dblFT := ptypes.NewFieldType(mysql.TypeDouble)
	// The table now: id (the handle), a INT, b VARCHAR, c INT added with
	// DEFAULT 7, d DOUBLE added without a default. Column 4 was dropped.
	type column struct {
		id     int64
		ft     *ptypes.FieldType
		origin types.Datum
	}
	cols := []column{{1, intFT, types.Datum{}}, {2, intFT, types.Datum{}}, {3, strFT, types.Datum{}}, {5, intFT, types.NewInt(7)}, {6, dblFT, types.Datum{}}}
	layouts := [][]int64{{2, 3}, {2, 3, 4}, {2, 3, 5}, {2, 3, 5, 6}, {3, 2, 6, 5}}

	rng := rand.New(rand.NewSource(7))
	value := func(id int64) types.Datum {
		if rng.Intn(5) == 0 {
			return types.Datum{}
		}
		switch id {
		case 3, 4:
			return types.NewString(strings.Repeat(string(rune('a'+rng.Intn(3))), rng.Intn(300)))
		case 6:
			return types.NewFloat(float64(rng.Intn(1000)) / 8)
		}
		return types.NewInt(rng.Int63n(2000) - 1000)
	}
	type record struct{ key, value []byte }
	var records []record
	var full [][]types.Datum // each row decoded in full, by column offset
	for h := int64(1); h <= 500; h++ {
		ids := layouts[rng.Intn(len(layouts))]
		ds := make([]types.Datum, len(ids))
		for i, id := range ids {
			ds[i] = value(id)
		}
		v, err := codec.EncodeRow(nil, ids, ds)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, record{tablecodec.RecordKey(tableID, h), v})
		row := []types.Datum{types.NewInt(h)}
		for _, c := range cols[1:] {
			out := []types.Datum{c.origin}
			if err := codec.DecodeRow(v, []int64{c.id}, []*ptypes.FieldType{c.ft}, out); err != nil {
				t.Fatal(err)
			}
			row = append(row, out[0])
		}
		full = append(full, row)
	}

	scan := func(needed ...int) *kvpb.CopScan {
		s := &kvpb.CopScan{TableId: tableID, HandleOffset: 0}
		for off, c := range cols {
			info := &kvpb.CopColumnInfo{Id: c.id, Type: FieldTypeToPB(c.ft), Needed: slices.Contains(needed, off)}
			if !c.origin.IsNull() {
				info.OriginDefault = EncodeDatum(c.origin)
			}
			s.Columns = append(s.Columns, info)
		}
		return s
	}
	run := func(dag *kvpb.CopDAG) [][]types.Datum {
		t.Helper()
		f, err := Compile(dag)
		if err != nil {
			t.Fatal(err)
		}
		r := f.NewRunner(0)
		for _, rec := range records {
			if err := r.Add(rec.key, rec.value); err != nil {
				t.Fatal(err)
			}
		}
		b, err := r.Finish()
		if err != nil {
			t.Fatal(err)
		}
		rows, err := DecodeBatch(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	text := func(r []types.Datum) string {
		parts := make([]string, len(r))
		for i, d := range r {
			parts[i] = "NULL"
			if !d.IsNull() {
				parts[i] = string(d.AppendText(nil))
			}
		}
		return strings.Join(parts, " ")
	}

	// Scans reading every subset of the columns: the rows as decoded in full.
	for mask := 1; mask < 1<<len(cols); mask++ {
		var needed []int
		for off := range cols {
			if mask&(1<<off) != 0 {
				needed = append(needed, off)
			}
		}
		got := run(&kvpb.CopDAG{Scan: scan(needed...)})
		if len(got) != len(full) {
			t.Fatalf("columns %v: %d rows, want %d", needed, len(got), len(full))
		}
		for i, row := range full {
			want := make([]types.Datum, len(needed))
			for j, off := range needed {
				want[j] = row[off]
			}
			if text(got[i]) != text(want) {
				t.Fatalf("columns %v, row %d: got %s, want %s", needed, i+1, text(got[i]), text(want))
			}
		}
	}

	// A partial aggregation over the added column: GROUP BY c, COUNT(*),
	// SUM(LENGTH(b)), AVG(a).
	colExpr := func(off int) expr.Expr { return expr.NewColumn(off, cols[off].ft, fmt.Sprintf("col%d", off)) }
	length, err := expr.NewFunc("length", []expr.Expr{colExpr(2)})
	if err != nil {
		t.Fatal(err)
	}
	pb := func(e expr.Expr) *kvpb.CopExpr {
		p, ok := ExprToPB(e)
		if !ok {
			t.Fatalf("%s does not push", e)
		}
		return p
	}
	got := run(&kvpb.CopDAG{Scan: scan(1, 2, 3), Agg: &kvpb.CopAgg{
		GroupBy: []*kvpb.CopExpr{pb(colExpr(3))},
		Funcs:   []*kvpb.CopAggFunc{{Name: "count"}, {Name: "sum", Args: []*kvpb.CopExpr{pb(length)}}, {Name: "avg", Args: []*kvpb.CopExpr{pb(colExpr(1))}}},
	}})
	type partial struct {
		count, lenSum, lenN, aSum, aN int64
	}
	want := map[string]*partial{}
	var order []string
	for _, row := range full {
		k := text(row[3:4])
		p := want[k]
		if p == nil {
			p = &partial{}
			want[k] = p
			order = append(order, k)
		}
		p.count++
		if !row[2].IsNull() {
			p.lenSum += int64(len(row[2].Bytes()))
			p.lenN++
		}
		if !row[1].IsNull() {
			p.aSum += row[1].Int()
			p.aN++
		}
	}
	sum := func(s, n int64) string {
		if n == 0 {
			return "NULL"
		}
		return fmt.Sprint(s)
	}
	if len(got) != len(order) {
		t.Fatalf("%d groups, want %d", len(got), len(order))
	}
	for i, k := range order {
		p := want[k]
		exp := fmt.Sprintf("%s %d %s %s %d", k, p.count, sum(p.lenSum, p.lenN), sum(p.aSum, p.aN), p.aN)
		if text(got[i]) != exp {
			t.Errorf("group %d: got %s, want %s", i, text(got[i]), exp)
		}
	}
}
