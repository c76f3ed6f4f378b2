package expr

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// testColumn is a column of the fixed row expressions in testdata see.
type testColumn struct {
	name  string
	ft    *ptypes.FieldType
	value types.Datum
}

func newFT(tp byte, flen, dec int, flag uint) *ptypes.FieldType {
	ft := ptypes.NewFieldType(tp)
	ft.SetFlen(flen)
	ft.SetDecimal(dec)
	ft.AddFlag(flag)
	if tp == mysql.TypeVarchar {
		ft.SetCharset(mysql.DefaultCharset)
		ft.SetCollate(mysql.DefaultCollationName)
	}
	return ft
}

func testColumns(t testing.TB) []testColumn {
	dec, err := types.ParseDecimal("3.50")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := types.ParseTime("2020-01-02 03:04:05", mysql.TypeDatetime, 0)
	if err != nil {
		t.Fatal(err)
	}
	day, err := types.ParseTime("2020-01-02", mysql.TypeDate, 0)
	if err != nil {
		t.Fatal(err)
	}
	return []testColumn{
		{"i", newFT(mysql.TypeLong, 11, 0, 0), types.NewInt(7)},
		{"j", newFT(mysql.TypeLong, 11, 0, 0), types.NewInt(-3)},
		{"n", newFT(mysql.TypeLong, 11, 0, 0), types.Datum{}},
		{"big", newFT(mysql.TypeLonglong, 20, 0, 0), types.NewInt(9223372036854775807)},
		{"u", newFT(mysql.TypeLonglong, 20, 0, mysql.UnsignedFlag), types.NewUint(18446744073709551615)},
		{"d", newFT(mysql.TypeNewDecimal, 10, 2, 0), types.NewDecimal(dec)},
		{"f", newFT(mysql.TypeDouble, 22, -1, 0), types.NewFloat(2.5)},
		{"s", newFT(mysql.TypeVarchar, 20, 0, 0), types.NewString("abc")},
		{"t", newFT(mysql.TypeDatetime, 19, 0, 0), types.NewTime(tm)},
		{"day", newFT(mysql.TypeDate, 10, 0, 0), types.NewTime(day)},
	}
}

type testBinder struct{ cols []testColumn }

func (b testBinder) Bind(node ast.ExprNode) (Expr, error) {
	cn, ok := node.(*ast.ColumnNameExpr)
	if !ok {
		return nil, nil
	}
	for i, c := range b.cols {
		if c.name == cn.Name.Name.L {
			return NewColumn(i, c.ft, c.name), nil
		}
	}
	return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'field list'", cn.Name.Name.O)
}

type testVars map[string]types.Datum

func (v testVars) GetVar(name string, system bool, scope string) (types.Datum, bool) {
	if system {
		name = "@@" + name
	}
	d, ok := v[name]
	return d, ok
}

// compileSQL parses "SELECT <expr>" and compiles the expression.
func compileSQL(t testing.TB, cols []testColumn, sql string) (Expr, error) {
	stmt, err := parser.New().ParseOneStmt("SELECT "+sql, "", "")
	if err != nil {
		t.Fatalf("parse %q: %v", sql, err)
	}
	NumberParams(stmt)
	field := stmt.(*ast.SelectStmt).Fields.Fields[0].Expr
	return Compile(field, testBinder{cols})
}

func formatDatum(d types.Datum) string {
	if d.IsNull() {
		return "NULL"
	}
	return fmt.Sprintf("%s (%s)", d.String(), d.Kind())
}

func formatErr(err error) string {
	if e, ok := err.(*sqlerr.Error); ok {
		return fmt.Sprintf("%d: %s", e.Code, e.Msg)
	}
	return err.Error()
}

// TestEval runs testdata/eval: each "eval" block holds one expression per
// line; the output is its value and kind, the static type with "type",
// and any warnings. Columns i j n big u d f s t day come from testColumns.
func TestEval(t *testing.T) {
	cols := testColumns(t)
	row := make([]types.Datum, len(cols))
	for i, c := range cols {
		row[i] = c.value
	}
	datadriven.RunTest(t, "testdata/eval", func(t *testing.T, td *datadriven.TestData) string {
		var out strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			e, err := compileSQL(t, cols, line)
			if err != nil {
				fmt.Fprintf(&out, "%s -> compile error %s\n", line, formatErr(err))
				continue
			}
			var warnings []error
			ctx := &EvalContext{
				Warnings:     &warnings,
				Now:          time.Date(2024, 2, 29, 13, 14, 15, 123456789, time.UTC),
				Database:     "test",
				Vars:         testVars{"x": types.NewInt(42), "@@autocommit": types.NewInt(1)},
				User:         "root@localhost",
				ConnectionID: 9,
				LastInsertID: 17,
			}
			d, err := e.Eval(ctx, row)
			switch {
			case err != nil:
				fmt.Fprintf(&out, "%s -> error %s\n", line, formatErr(err))
			case td.Cmd == "type":
				fmt.Fprintf(&out, "%s -> %s : %s\n", line, formatDatum(d), e.Type().CompactStr())
			default:
				fmt.Fprintf(&out, "%s -> %s\n", line, formatDatum(d))
			}
			for _, w := range warnings {
				fmt.Fprintf(&out, "  warning %s\n", formatErr(w))
			}
		}
		return out.String()
	})
}
