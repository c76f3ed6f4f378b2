package expr

import (
	"math"
	"math/rand"
	"sort"
	"sync"
	"testing"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/strata-db/strata/internal/sql/types"
)

func testRow(cols []testColumn) []types.Datum {
	row := make([]types.Datum, len(cols))
	for i, c := range cols {
		row[i] = c.value
	}
	return row
}

func mustCompile(t *testing.T, cols []testColumn, sql string) Expr {
	t.Helper()
	e, err := compileSQL(t, cols, sql)
	if err != nil {
		t.Fatalf("compile %q: %v", sql, err)
	}
	return e
}

// TestHotPathsDoNotAllocate holds the sysbench contract: column reads,
// constants, parameters, comparisons, BETWEEN and integer arithmetic
// evaluate without heap allocation.
func TestHotPathsDoNotAllocate(t *testing.T) {
	cols := testColumns(t)
	row := testRow(cols)
	ctx := &EvalContext{Params: []types.Datum{types.NewInt(1), types.NewInt(10)}}
	for _, sql := range []string{
		"i",
		"42",
		"?",
		"i + 1",
		"i * j - 3",
		"u - 1",
		"i = 7",
		"i < j",
		"i BETWEEN ? AND ?",
		"i = ? AND j < 0",
		"i IN (1, 2, 3, 4, 5, 7)",
		"s IN ('a', 'b', 'c', 'd', 'e', 'abc')",
		"n IS NULL",
		"NOT (i > 3)",
	} {
		e := mustCompile(t, cols, sql)
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := e.Eval(ctx, row); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Eval", sql, allocs)
		}
	}
}

func TestParamsAreReadPerExecution(t *testing.T) {
	cols := testColumns(t)
	row := testRow(cols)
	e := mustCompile(t, cols, "i BETWEEN ? AND ?")
	for _, tc := range []struct {
		lo, hi types.Datum
		want   string
	}{
		{types.NewInt(1), types.NewInt(10), "1"},
		{types.NewInt(8), types.NewInt(10), "0"},
		{types.NewString("7"), types.NewFloat(7.5), "1"},
		{types.Datum{}, types.NewInt(10), "NULL"},
	} {
		got, err := e.Eval(&EvalContext{Params: []types.Datum{tc.lo, tc.hi}}, row)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != tc.want {
			t.Errorf("7 BETWEEN %v AND %v = %v, want %s", tc.lo, tc.hi, got, tc.want)
		}
	}
	if _, err := e.Eval(&EvalContext{}, row); err == nil {
		t.Error("missing parameters evaluated without error")
	}
	k := mustCompile(t, cols, "i + ?")
	if got, _ := k.Eval(&EvalContext{Params: []types.Datum{types.NewInt(1)}}, row); got.String() != "8" || got.Kind() != types.KindInt64 {
		t.Errorf("i + 1 = %v (%v)", got, got.Kind())
	}
	if got, _ := k.Eval(&EvalContext{Params: []types.Datum{types.NewString("0.5")}}, row); got.String() != "7.5" {
		t.Errorf("i + '0.5' = %v", got)
	}
}

func TestConstantFolding(t *testing.T) {
	cols := testColumns(t)
	for sql, folded := range map[string]bool{
		"1 + 2 * 3":              true,
		"CONCAT('a', 'b')":       true,
		"i + 1":                  false,
		"1 / 0":                  false, // the warning must be raised per execution
		"RAND() < 2":             false,
		"? + 1":                  false,
		"NOW()":                  false,
		"CASE WHEN 1 THEN 2 END": true,
	} {
		e := mustCompile(t, cols, sql)
		if IsConstant(e) != folded {
			t.Errorf("%s: folded=%v, want %v", sql, IsConstant(e), folded)
		}
	}
	if idx, ok := ColumnIndex(mustCompile(t, cols, "j")); !ok || idx != 1 {
		t.Errorf("ColumnIndex(j) = %d, %v", idx, ok)
	}
	if off, ok := IsParam(mustCompile(t, cols, "?")); !ok || off != 0 {
		t.Errorf("IsParam(?) = %d, %v", off, ok)
	}
}

func TestParamsNumberedInTextOrder(t *testing.T) {
	stmt, err := parser.New().ParseOneStmt("SELECT ? - ?, CONCAT(?, 'x')", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if n := NumberParams(stmt); n != 3 {
		t.Fatalf("NumberParams = %d", n)
	}
	fields := stmt.(*ast.SelectStmt).Fields.Fields
	ctx := &EvalContext{Params: []types.Datum{types.NewInt(10), types.NewInt(3), types.NewString("p")}}
	for i, want := range []string{"7", "px"} {
		e, err := Compile(fields[i].Expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Eval(ctx, nil)
		if err != nil || got.String() != want {
			t.Errorf("field %d = %v, %v; want %s", i, got, err, want)
		}
	}
	unnumbered, err := parser.New().ParseOneStmt("SELECT ?", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(unnumbered.(*ast.SelectStmt).Fields.Fields[0].Expr, nil); err == nil {
		t.Error("compiled a parameter marker that NumberParams never numbered")
	}
}

// TestConcurrentEval checks compiled trees carry no per-call state.
func TestConcurrentEval(t *testing.T) {
	cols := testColumns(t)
	e := mustCompile(t, cols, "CASE WHEN i IN (1,2,3,4,5,6,7) THEN CONCAT(s, i) ELSE 'x' END")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := testRow(cols)
			for i := 0; i < 500; i++ {
				d, err := e.Eval(&EvalContext{}, row)
				if err != nil || d.String() != "abc7" {
					t.Errorf("got %v, %v", d, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func runAgg(t *testing.T, name string, distinct bool, args []Expr, rows [][]types.Datum) (types.Datum, *AggFunc) {
	t.Helper()
	a, err := NewAggFunc(name, distinct, args)
	if err != nil {
		t.Fatal(err)
	}
	acc := a.NewAccumulator()
	ctx := &EvalContext{}
	for _, r := range rows {
		if err := acc.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	return acc.Result(), a
}

func TestAggregates(t *testing.T) {
	intCol := NewColumn(0, newFT(mysql.TypeLong, 11, 0, 0), "a")
	decCol := NewColumn(0, newFT(mysql.TypeNewDecimal, 10, 2, 0), "d")
	fltCol := NewColumn(0, newFT(mysql.TypeDouble, 22, -1, 0), "f")
	strCol := NewColumn(1, newFT(mysql.TypeVarchar, 10, 0, 0), "s")
	comma := NewConstant(types.NewString(","), nil)
	dec := func(s string) types.Datum {
		d, err := types.ParseDecimal(s)
		if err != nil {
			t.Fatal(err)
		}
		return types.NewDecimal(d)
	}
	ints := [][]types.Datum{
		{types.NewInt(1), types.NewString("x")},
		{types.NewInt(2), types.NewString("y")},
		{types.Datum{}, types.NewString("z")},
		{types.NewInt(2), types.Datum{}},
		{types.NewInt(9223372036854775807), types.NewString("x")},
	}
	cases := []struct {
		name     string
		distinct bool
		args     []Expr
		rows     [][]types.Datum
		want     string
		wantType string
	}{
		{"count", false, nil, ints, "5", "bigint(21)"},
		{"count", false, []Expr{intCol}, ints, "4", "bigint(21)"},
		{"count", true, []Expr{intCol}, ints, "3", "bigint(21)"},
		{"count", true, []Expr{intCol, strCol}, ints, "3", "bigint(21)"},
		{"sum", false, []Expr{intCol}, ints, "9223372036854775812", "decimal(33,0)"},
		{"sum", true, []Expr{intCol}, ints, "9223372036854775810", "decimal(33,0)"},
		{"sum", false, []Expr{intCol}, ints[:2], "3", "decimal(33,0)"},
		{"avg", false, []Expr{intCol}, ints[:2], "1.5000", "decimal(15,4)"},
		{"avg", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(1)}, {types.NewInt(1)}, {types.NewInt(2)}}, "1.3333", "decimal(15,4)"},
		{"sum", false, []Expr{decCol}, [][]types.Datum{{dec("1.25")}, {dec("2.50")}}, "3.75", "decimal(32,2)"},
		{"avg", false, []Expr{decCol}, [][]types.Datum{{dec("1.25")}, {dec("2.50")}}, "1.875000", "decimal(14,6)"},
		{"sum", false, []Expr{fltCol}, [][]types.Datum{{types.NewFloat(0.5)}, {types.NewFloat(0.25)}}, "0.75", "double"},
		{"sum", false, []Expr{intCol}, [][]types.Datum{{types.Datum{}}}, "NULL", "decimal(33,0)"},
		{"avg", false, []Expr{intCol}, nil, "NULL", "decimal(15,4)"},
		{"min", false, []Expr{intCol}, ints, "1", "int(11)"},
		{"max", false, []Expr{intCol}, ints, "9223372036854775807", "int(11)"},
		{"max", false, []Expr{strCol}, ints, "z", "varchar(10)"},
		{"min", false, []Expr{intCol}, nil, "NULL", "int(11)"},
		{"var_pop", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(2)}, {types.NewInt(4)}, {types.NewInt(4)}, {types.NewInt(4)}, {types.NewInt(5)}, {types.NewInt(5)}, {types.NewInt(7)}, {types.NewInt(9)}}, "4", "double"},
		{"std", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(2)}, {types.NewInt(4)}, {types.NewInt(4)}, {types.NewInt(4)}, {types.NewInt(5)}, {types.NewInt(5)}, {types.NewInt(7)}, {types.NewInt(9)}}, "2", "double"},
		{"var_samp", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(1)}, {types.NewInt(3)}}, "2", "double"},
		{"var_samp", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(1)}}, "NULL", "double"},
		{"stddev", false, []Expr{intCol}, nil, "NULL", "double"},
		{"bit_and", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(12)}, {types.NewInt(10)}}, "8", "bigint(20)"},
		{"bit_and", false, []Expr{intCol}, nil, "18446744073709551615", "bigint(20)"},
		{"bit_or", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(12)}, {types.NewInt(10)}, {types.Datum{}}}, "14", "bigint(20)"},
		{"bit_xor", false, []Expr{intCol}, [][]types.Datum{{types.NewInt(12)}, {types.NewInt(10)}}, "6", "bigint(20)"},
		{"group_concat", false, []Expr{strCol, comma}, ints, "x,y,z,x", "var_string(1024)"},
		{"group_concat", true, []Expr{strCol, comma}, ints, "x,y,z", "var_string(1024)"},
		{"group_concat", false, []Expr{intCol, strCol, NewConstant(types.NewString("; "), nil)}, ints[:2], "1x; 2y", "var_string(1024)"},
	}
	for _, tc := range cases {
		got, a := runAgg(t, tc.name, tc.distinct, tc.args, tc.rows)
		if got.String() != tc.want {
			t.Errorf("%s: got %v, want %s", a, got, tc.want)
		}
		if a.Type().CompactStr() != tc.wantType {
			t.Errorf("%s: type %s, want %s", a, a.Type().CompactStr(), tc.wantType)
		}
	}
	if _, err := NewAggFunc("median", false, []Expr{intCol}); err == nil {
		t.Error("unknown aggregate accepted")
	}
	if _, err := NewAggFunc("group_concat", false, []Expr{strCol, intCol}); err == nil {
		t.Error("GROUP_CONCAT with a non-constant separator accepted")
	}
}

func TestGroupConcatIsCut(t *testing.T) {
	col := NewColumn(0, newFT(mysql.TypeVarchar, 100, 0, 0), "s")
	a, err := NewAggFunc("group_concat", false, []Expr{col, NewConstant(types.NewString("--"), nil)})
	if err != nil {
		t.Fatal(err)
	}
	acc := a.NewAccumulator()
	var warnings []error
	ctx := &EvalContext{Warnings: &warnings}
	long := types.NewString("0123456789012345678901234567890123456789")
	for i := 0; i < 100; i++ {
		if err := acc.Add(ctx, []types.Datum{long}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(acc.Result().Bytes()); n != GroupConcatMaxLen {
		t.Errorf("length %d, want %d", n, GroupConcatMaxLen)
	}
	if len(warnings) != 1 {
		t.Errorf("warnings = %v", warnings)
	}
}

// TestBuiltinsNeverPanic calls every builtin and operator with awkward
// arguments of every kind: results may be NULL or errors, never panics.
func TestBuiltinsNeverPanic(t *testing.T) {
	tm, err := types.ParseTime("2020-02-29 23:59:59.999999", mysql.TypeDatetime, 6)
	if err != nil {
		t.Fatal(err)
	}
	big, _ := types.ParseDecimal("-99999999999999999999999999999.999999")
	values := []types.Datum{
		{}, types.NewInt(0), types.NewInt(-1), types.NewInt(math.MinInt64), types.NewInt(math.MaxInt64),
		types.NewUint(math.MaxUint64), types.NewFloat(-0.5), types.NewFloat(1e308), types.NewFloat(math.SmallestNonzeroFloat64),
		types.NewDecimal(big), types.NewString(""), types.NewString("héllo wörld"), types.NewString("%_\\"),
		types.NewString("2020-01-01"), types.NewBytes([]byte{0xff, 0x00}), types.NewTime(tm), types.NewTime(0),
	}
	rng := rand.New(rand.NewSource(11))
	pick := func() Expr {
		d := values[rng.Intn(len(values))]
		return NewConstant(d, nil)
	}
	run := func(what string, e Expr) {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("%s panicked: %v", what, p)
			}
		}()
		var warnings []error
		_, _ = e.Eval(&EvalContext{Warnings: &warnings}, nil)
		_ = e.String()
		_ = e.Type()
	}
	names := make([]string, 0, len(builtins))
	for name := range builtins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		def := builtins[name]
		maxArgs := def.maxArgs
		if maxArgs < 0 {
			maxArgs = def.minArgs + 2
		}
		for n := def.minArgs; n <= maxArgs; n++ {
			for i := 0; i < 300; i++ {
				args := make([]Expr, n)
				for j := range args {
					args[j] = pick()
				}
				e, err := newFunc(name, args)
				if err != nil {
					t.Fatalf("%s/%d: %v", name, n, err)
				}
				run(e.String(), e)
			}
		}
	}
	for _, name := range []string{"count", "sum", "avg", "min", "max", "std", "var_samp", "bit_and", "bit_xor", "group_concat"} {
		for _, distinct := range []bool{false, true} {
			args := []Expr{NewColumn(0, nil, "v")}
			if name == "group_concat" {
				args = append(args, NewConstant(types.NewString(","), nil))
			}
			a, err := NewAggFunc(name, distinct, args)
			if err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s panicked: %v", a, p)
					}
				}()
				acc := a.NewAccumulator()
				var warnings []error
				ctx := &EvalContext{Warnings: &warnings}
				for i := 0; i < 200; i++ {
					_ = acc.Add(ctx, []types.Datum{values[rng.Intn(len(values))]})
				}
				_ = acc.Result()
			}()
		}
	}
	for i := 0; i < 3000; i++ {
		l, r, x := pick(), pick(), pick()
		run("arith", NewArith(ArithOp(rng.Intn(int(OpShiftRight)+1)), l, r))
		run("neg", NewNeg(l))
		run("cmp", NewComparison(CmpOp(rng.Intn(int(CmpNullEQ)+1)), l, r))
		run("between", NewBetween(l, r, x, rng.Intn(2) == 0))
		run("in", NewIn(l, []Expr{r, x, pick(), pick(), pick()}, false))
		run("like", NewLike(l, r, '\\', false))
		run("case", NewCase(l, []Expr{r}, []Expr{x}, pick()))
		run("coalesce", NewCoalesce("coalesce", []Expr{l, r, x}))
		for _, tp := range []byte{mysql.TypeLonglong, mysql.TypeNewDecimal, mysql.TypeDouble, mysql.TypeVarString, mysql.TypeDate, mysql.TypeDatetime} {
			c, err := NewCast(l, newFT(tp, 5, 2, 0))
			if err != nil {
				t.Fatal(err)
			}
			run("cast", c)
		}
		for _, unit := range []ast.TimeUnitType{ast.TimeUnitDay, ast.TimeUnitMonth, ast.TimeUnitMicrosecond, ast.TimeUnitDaySecond, ast.TimeUnitYearMonth} {
			da, err := NewDateArith(l, r, unit, rng.Intn(2) == 0)
			if err != nil {
				t.Fatal(err)
			}
			run("date arith", da)
		}
	}
}

// TestBuiltinCallsUseTheArgumentStack: a builtin's arguments go on the
// EvalContext's stack, so calls (nested too) allocate nothing once the
// stack has grown, give the right answers, and leave the stack empty; a
// Fork has a stack of its own.
func TestBuiltinCallsUseTheArgumentStack(t *testing.T) {
	cols := testColumns(t)
	row := testRow(cols)
	ctx := &EvalContext{}
	for _, tc := range []struct{ sql, want string }{
		{"ABS(i)", "7"},
		{"ABS(i - ABS(j))", ""},
		{"LENGTH(s)", ""},
		{"GREATEST(ABS(i), LENGTH(s), 1, 2, 3)", ""},
		{"COALESCE(n, ABS(i))", "7"},
	} {
		e := mustCompile(t, cols, tc.sql)
		want, err := e.Eval(&EvalContext{}, row)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want != "" && string(want.AppendText(nil)) != tc.want {
			t.Errorf("%s = %s, want %s", tc.sql, want.AppendText(nil), tc.want)
		}
		allocs := testing.AllocsPerRun(200, func() {
			got, err := e.Eval(ctx, row)
			if err != nil {
				t.Fatal(err)
			}
			if c, err := types.Compare(got, want); err != nil || c != 0 {
				t.Fatalf("%s: %v then %v", tc.sql, want, got)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Eval", tc.sql, allocs)
		}
		if len(ctx.args) != 0 {
			t.Fatalf("%s left %d arguments on the stack", tc.sql, len(ctx.args))
		}
	}
	f := ctx.Fork()
	f.args = append(f.args, types.NewInt(1))
	if len(ctx.args) != 0 || cap(ctx.args) == 0 || &f.args[0] == &ctx.args[:1][0] {
		t.Fatal("a fork shares its parent's argument stack")
	}
}
