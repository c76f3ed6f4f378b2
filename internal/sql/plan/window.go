package plan

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Window computes window functions over its child's rows: its output is
// each child row followed by one value per function, in the child's order.
// It stands above aggregation and HAVING and below the projection, as in
// MySQL, so window functions may take aggregates as arguments and the
// select list, ORDER BY and DISTINCT may use their results.
type Window struct {
	base
	Child Plan
	Funcs []*WindowFunc
	text  []string
}

// WindowFunc is one window function call with its window.
type WindowFunc struct {
	Name      string // lower case: row_number, rank, ..., or an aggregate's name
	Args      []expr.Expr
	Agg       *expr.AggFunc // aggregates used as window functions
	Partition []expr.Expr
	Order     []SortKey
	Frame     *Frame // nil: the default frame
	ft        *ptypes.FieldType
}

// Frame is a ROWS or RANGE frame. Offsets are constants (expressions
// evaluated once per execution); a RANGE frame with offsets needs one
// numeric ORDER BY key.
type Frame struct {
	Rows       bool
	Start, End FrameBound
}

// FrameBound is UNBOUNDED PRECEDING/FOLLOWING, CURRENT ROW, or N
// PRECEDING/FOLLOWING.
type FrameBound struct {
	Unbounded bool
	Current   bool
	Preceding bool
	Offset    expr.Expr
}

// Type is the result type of the function.
func (f *WindowFunc) Type() *ptypes.FieldType { return f.ft }

func (w *Window) Children() []Plan { return []Plan{w.Child} }
func (w *Window) Explain() string {
	return fmt.Sprintf("Window funcs=[%s]", strings.Join(w.text, ", "))
}

// windowCollector gathers the window function calls of a query block.
type windowCollector struct {
	list []*ast.WindowFuncExpr
	seen map[string]bool
}

func (v *windowCollector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.WindowFuncExpr:
		t := restore(x)
		if !v.seen[t] {
			v.seen[t] = true
			v.list = append(v.list, x)
		}
		return n, true
	case *ast.SubqueryExpr:
		return n, true
	}
	return n, false
}

func (v *windowCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// buildWindow adds a Window node above p for the window functions of sel,
// compiled in scope sc, and returns the scope above it (sc's columns, then
// one per function, bound by the call's text).
func (b *Builder) buildWindow(p Plan, sel *ast.SelectStmt, sc *scope) (Plan, *scope, error) {
	wc := &windowCollector{seen: map[string]bool{}}
	for _, f := range sel.Fields.Fields {
		if f.Expr != nil {
			f.Expr.Accept(wc)
		}
	}
	if sel.OrderBy != nil {
		for _, it := range sel.OrderBy.Items {
			it.Expr.Accept(wc)
		}
	}
	if len(wc.list) == 0 {
		return p, sc, nil
	}
	named := map[string]*ast.WindowSpec{}
	for i := range sel.WindowSpecs {
		s := &sel.WindowSpecs[i]
		if _, dup := named[s.Name.L]; dup {
			return nil, nil, sqlerr.New(3591, "HY000", "Window '%s' is defined twice.", s.Name.O)
		}
		named[s.Name.L] = s
	}
	w := &Window{Child: p}
	ws := &scope{b: b, parent: sc.parent, sub: sc.sub, aggs: sc.aggs, aliases: sc.aliases, values: -1}
	ws.cols = append(ws.cols, sc.cols...)
	ws.windows = map[string]int{}
	width := len(p.Columns())
	cols := append([]*Column(nil), p.Columns()...)
	for i, call := range wc.list {
		f, err := b.windowFunc(call, named, sc)
		if err != nil {
			return nil, nil, err
		}
		text := restore(call)
		w.Funcs = append(w.Funcs, f)
		w.text = append(w.text, text)
		col := &Column{Name: text, Type: f.ft}
		cols = append(cols, col)
		ws.windows[text] = width + i
		ws.cols = append(ws.cols, scopeCol{col: col, idx: width + i, hidden: true})
	}
	w.cols = cols
	return w, ws, nil
}

// resolveSpec merges a window specification with the named window it
// refers to (OVER w, OVER (w ORDER BY ...)).
func resolveSpec(spec ast.WindowSpec, named map[string]*ast.WindowSpec, depth int) (ast.WindowSpec, error) {
	ref := spec.Ref
	if spec.OnlyAlias {
		ref = spec.Name
	}
	if ref.L == "" {
		return spec, nil
	}
	base, ok := named[ref.L]
	if !ok {
		return spec, sqlerr.New(3579, "HY000", "Window name '%s' is not defined.", ref.O)
	}
	if depth > len(named) {
		return spec, sqlerr.New(3580, "HY000", "There is a circularity in the window dependency graph.")
	}
	b, err := resolveSpec(*base, named, depth+1)
	if err != nil {
		return spec, err
	}
	if spec.OnlyAlias {
		return b, nil
	}
	out := b
	if spec.PartitionBy != nil {
		if b.PartitionBy != nil {
			return spec, sqlerr.New(3581, "HY000", "A window which depends on another cannot define partitioning.")
		}
		out.PartitionBy = spec.PartitionBy
	}
	if spec.OrderBy != nil {
		if b.OrderBy != nil {
			return spec, sqlerr.New(3582, "HY000", "Window '%s' has both ORDER BY and a referenced window with ORDER BY.", ref.O)
		}
		out.OrderBy = spec.OrderBy
	}
	if spec.Frame != nil {
		out.Frame = spec.Frame
	}
	return out, nil
}

func (b *Builder) windowFunc(call *ast.WindowFuncExpr, named map[string]*ast.WindowSpec, sc *scope) (*WindowFunc, error) {
	if call.IgnoreNull || call.FromLast {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support IGNORE NULLS or FROM LAST")
	}
	spec, err := resolveSpec(call.Spec, named, 0)
	if err != nil {
		return nil, err
	}
	f := &WindowFunc{Name: strings.ToLower(call.Name)}
	for _, a := range call.Args {
		e, err := expr.Compile(a, sc)
		if err != nil {
			return nil, err
		}
		f.Args = append(f.Args, e)
	}
	if spec.PartitionBy != nil {
		for _, it := range spec.PartitionBy.Items {
			e, err := expr.Compile(it.Expr, sc)
			if err != nil {
				return nil, err
			}
			f.Partition = append(f.Partition, e)
		}
	}
	if spec.OrderBy != nil {
		for _, it := range spec.OrderBy.Items {
			e, err := expr.Compile(it.Expr, sc)
			if err != nil {
				return nil, err
			}
			f.Order = append(f.Order, SortKey{Expr: e, Desc: it.Desc})
		}
	}
	if spec.Frame != nil {
		fr := &Frame{Rows: spec.Frame.Type == ast.Rows}
		bound := func(fb ast.FrameBound) (FrameBound, error) {
			out := FrameBound{Unbounded: fb.UnBounded, Current: fb.Type == ast.CurrentRow, Preceding: fb.Type == ast.Preceding}
			if !fb.UnBounded && fb.Type != ast.CurrentRow {
				if fb.Unit != ast.TimeUnitInvalid {
					return out, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support INTERVAL frame bounds")
				}
				e, err := expr.Compile(fb.Expr, sc)
				if err != nil {
					return out, err
				}
				out.Offset = e
			}
			return out, nil
		}
		if fr.Start, err = bound(spec.Frame.Extent.Start); err != nil {
			return nil, err
		}
		if fr.End, err = bound(spec.Frame.Extent.End); err != nil {
			return nil, err
		}
		if !fr.Rows && (fr.Start.Offset != nil || fr.End.Offset != nil) && len(f.Order) != 1 {
			return nil, sqlerr.New(3587, "HY000", "Window with a RANGE frame that has an offset needs exactly one ORDER BY expression.")
		}
		if !fr.Rows && (fr.Start.Offset != nil || fr.End.Offset != nil) {
			switch types.KindForFieldType(f.Order[0].Expr.Type()) {
			case types.KindInt64, types.KindUint64, types.KindFloat64, types.KindDecimal:
			default:
				return nil, sqlerr.New(3588, "HY000", "Window with a RANGE frame that has an offset needs a numeric ORDER BY expression.")
			}
		}
		f.Frame = fr
	}
	intFT := func() *ptypes.FieldType {
		ft := ptypes.NewFieldType(mysql.TypeLonglong)
		ft.SetFlen(21)
		ft.SetDecimal(0)
		ft.SetCharset("binary")
		ft.SetCollate("binary")
		ft.AddFlag(mysql.BinaryFlag)
		return ft
	}
	argc := func(lo, hi int) error {
		if len(f.Args) < lo || len(f.Args) > hi {
			return sqlerr.New(1582, "42000", "Incorrect parameter count in the call to native function '%s'", call.Name)
		}
		return nil
	}
	switch f.Name {
	case "row_number", "rank", "dense_rank":
		err = argc(0, 0)
		f.ft = intFT()
	case "percent_rank", "cume_dist":
		err = argc(0, 0)
		f.ft = types.DefaultFieldTypeFor(types.NewFloat(0))
	case "ntile":
		err = argc(1, 1)
		f.ft = intFT()
	case "lag", "lead":
		err = argc(1, 3)
		if err == nil {
			f.ft = f.Args[0].Type()
		}
	case "first_value", "last_value":
		err = argc(1, 1)
		if err == nil {
			f.ft = f.Args[0].Type()
		}
	case "nth_value":
		err = argc(2, 2)
		if err == nil {
			f.ft = f.Args[0].Type()
		}
	default:
		agg, aerr := expr.NewAggFunc(f.Name, call.Distinct, f.Args)
		if aerr != nil {
			return nil, aerr
		}
		if call.Distinct {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support <window function>(DISTINCT ..)")
		}
		f.Agg = agg
		f.ft = agg.Type()
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}
