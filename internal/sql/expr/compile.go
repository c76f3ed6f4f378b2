package expr

import (
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Compile turns a parser expression into an Expr. b.Bind sees every node
// first (b may be nil when the expression has no column references).
// Subtrees without columns, parameters, variables or volatile functions are
// folded into constants, unless evaluating them warns or fails (the
// warning or error must then surface at execution, once per row).
func Compile(node ast.ExprNode, b Binder) (Expr, error) {
	c := compiler{binder: b}
	return c.compile(node)
}

type compiler struct {
	binder Binder
}

func (c *compiler) compileAll(nodes []ast.ExprNode) ([]Expr, error) {
	out := make([]Expr, len(nodes))
	for i, n := range nodes {
		e, err := c.compile(n)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (c *compiler) compile(node ast.ExprNode) (Expr, error) {
	if c.binder != nil {
		e, err := c.binder.Bind(node)
		if err != nil {
			return nil, err
		}
		if e != nil {
			return e, nil
		}
	}
	e, err := c.compileNode(node)
	if err != nil {
		return nil, err
	}
	return fold(e), nil
}

func (c *compiler) compileNode(node ast.ExprNode) (Expr, error) {
	switch n := node.(type) {
	case *test_driver.ParamMarkerExpr:
		if n.Order <= 0 {
			return nil, errInternal("parameter marker at offset %d is not numbered: call expr.NumberParams on the statement first", n.Offset)
		}
		return NewParam(n.Order - 1), nil
	case *test_driver.ValueExpr:
		return literal(n)
	case *ast.ParenthesesExpr:
		return c.compile(n.Expr)
	case *ast.ColumnNameExpr:
		return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'field list'", columnName(n.Name))
	case *ast.BinaryOperationExpr:
		return c.binary(n)
	case *ast.UnaryOperationExpr:
		return c.unary(n)
	case *ast.IsNullExpr:
		e, err := c.compile(n.Expr)
		if err != nil {
			return nil, err
		}
		return &IsNull{E: e, Not: n.Not}, nil
	case *ast.IsTruthExpr:
		e, err := c.compile(n.Expr)
		if err != nil {
			return nil, err
		}
		return &IsTruth{E: e, Not: n.Not, Truth: n.True != 0}, nil
	case *ast.BetweenExpr:
		args, err := c.compileAll([]ast.ExprNode{n.Expr, n.Left, n.Right})
		if err != nil {
			return nil, err
		}
		return NewBetween(args[0], args[1], args[2], n.Not), nil
	case *ast.PatternInExpr:
		if _, row := RowElems(n.Expr); row {
			if n.Sel != nil {
				return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support '(...) IN (subquery)' of rows")
			}
			return c.rowIn(n)
		}
		if n.Sel != nil {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "IN (subquery) must be planned by the binder")
		}
		e, err := c.compile(n.Expr)
		if err != nil {
			return nil, err
		}
		list, err := c.compileAll(n.List)
		if err != nil {
			return nil, err
		}
		return NewIn(e, list, n.Not), nil
	case *ast.PatternLikeOrIlikeExpr:
		e, err := c.compile(n.Expr)
		if err != nil {
			return nil, err
		}
		p, err := c.compile(n.Pattern)
		if err != nil {
			return nil, err
		}
		escape := rune(n.Escape)
		if !n.IsLike {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "ILIKE is not MySQL syntax")
		}
		return NewLike(e, p, escape, n.Not), nil
	case *ast.PatternRegexpExpr:
		e, err := c.compile(n.Expr)
		if err != nil {
			return nil, err
		}
		p, err := c.compile(n.Pattern)
		if err != nil {
			return nil, err
		}
		return NewRegexp(e, p, n.Not)
	case *ast.CaseExpr:
		return c.caseExpr(n)
	case *ast.SetCollationExpr:
		return c.setCollation(n)
	case *ast.FuncCastExpr:
		e, err := c.compile(n.Expr)
		if err != nil {
			return nil, err
		}
		return NewCast(e, n.Tp)
	case *ast.FuncCallExpr:
		return c.funcCall(n)
	case *ast.VariableExpr:
		if n.Value != nil {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support assignment to @%s inside an expression", n.Name)
		}
		scope := ""
		if n.ExplicitScope {
			scope = "session"
			if n.IsGlobal {
				scope = "global"
			}
		}
		return &Variable{Name: strings.ToLower(n.Name), System: n.IsSystem, Scope: scope}, nil
	case *ast.DefaultExpr:
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "DEFAULT must be resolved by the binder")
	case *ast.AggregateFuncExpr:
		return nil, sqlerr.New(sqlerr.ErInvalidGroupFuncUse, "HY000", "Invalid use of group function")
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "subqueries must be planned by the binder")
	case *ast.RowExpr:
		return nil, sqlerr.New(sqlerr.ErOperandColumns, "21000", "Operand should contain 1 column(s)")
	}
	return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support '%s'", FeatureName(node))
}

// FeatureName names an expression the compiler does not support, in words
// for the user: the feature when it has a name, otherwise the expression's
// own SQL text. Never a Go type.
func FeatureName(node ast.ExprNode) string {
	switch n := node.(type) {
	case *ast.WindowFuncExpr:
		return "window function " + strings.ToUpper(n.Name)
	case *ast.MatchAgainst:
		return "MATCH ... AGAINST"
	case *ast.SetCollationExpr:
		return "COLLATE"
	case *ast.PositionExpr:
		return "ORDER BY / GROUP BY position here"
	}
	var sb strings.Builder
	if err := node.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &sb)); err != nil || sb.Len() == 0 {
		return "this expression"
	}
	text := sb.String()
	if len(text) > 64 {
		text = text[:61] + "..."
	}
	return "the expression " + text
}

// NumberParams numbers the ? markers of a parsed statement in text order
// and returns how many there are. Prepare must call it before compiling any
// expression of the statement: the parser records only each marker's byte
// offset, and EvalContext.Params is indexed by the marker's ordinal. (The
// ordinal is stored 1-based in the marker's Order field so that Compile can
// reject markers of a statement that was never numbered.)
func NumberParams(stmt ast.Node) int {
	v := &paramCollector{}
	stmt.Accept(v)
	sort.SliceStable(v.markers, func(i, j int) bool { return v.markers[i].Offset < v.markers[j].Offset })
	for i, m := range v.markers {
		m.Order = i + 1
	}
	return len(v.markers)
}

type paramCollector struct {
	markers []*test_driver.ParamMarkerExpr
}

func (v *paramCollector) Enter(n ast.Node) (ast.Node, bool) {
	if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
		v.markers = append(v.markers, m)
	}
	return n, false
}

func (v *paramCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func columnName(n *ast.ColumnName) string {
	parts := make([]string, 0, 3)
	if n.Schema.O != "" {
		parts = append(parts, n.Schema.O)
	}
	if n.Table.O != "" {
		parts = append(parts, n.Table.O)
	}
	parts = append(parts, n.Name.O)
	return strings.Join(parts, ".")
}

// literal converts a parser literal to a constant with the parser's type.
func literal(v *test_driver.ValueExpr) (Expr, error) {
	ft := v.Type.Clone()
	var d types.Datum
	switch v.Kind() {
	case test_driver.KindNull:
	case test_driver.KindInt64:
		d = types.NewInt(v.GetInt64())
	case test_driver.KindUint64:
		d = types.NewUint(v.GetUint64())
	case test_driver.KindFloat32:
		d = types.NewFloat(float64(v.GetFloat32()))
	case test_driver.KindFloat64:
		d = types.NewFloat(v.GetFloat64())
	case test_driver.KindString:
		d = types.NewString(v.GetString())
	case test_driver.KindBytes:
		d = types.NewBytes(v.GetBytes())
	case test_driver.KindMysqlDecimal:
		dec, err := types.ParseDecimal(v.GetMysqlDecimal().String())
		if err != nil {
			return nil, sqlerr.New(sqlerr.ErParse, "42000", "invalid decimal literal %s", v.GetMysqlDecimal().String())
		}
		d = types.NewDecimal(dec)
		ft.SetFlen(dec.Precision())
		ft.SetDecimal(dec.Scale())
	case test_driver.KindBinaryLiteral:
		// x'..', 0x.. and b'..' are binary strings, and numbers where the
		// context is numeric (see numericContext).
		d = types.NewBytes([]byte(v.GetBinaryLiteral()))
		return &Constant{Value: d, ft: types.DefaultFieldTypeFor(d), bitLiteral: true}, nil
	default:
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support literal of kind %d", v.Kind())
	}
	if d.Kind() == types.KindString && ft.GetType() == mysql.TypeVarString {
		ft.SetFlen(len([]rune(v.GetString())))
		// The parser gives text literals its own default (utf8mb4_bin);
		// MySQL 8's, collation_connection's default, is utf8mb4_0900_ai_ci.
		if ft.GetCharset() == "" || (ft.GetCharset() == mysql.DefaultCharset && ft.GetCollate() == mysql.DefaultCollationName) {
			ft.SetCharset(mysql.DefaultCharset)
			ft.SetCollate(collate.Default)
		}
	}
	return NewConstant(d, ft), nil
}

var cmpOps = map[opcode.Op]CmpOp{
	opcode.EQ: CmpEQ, opcode.NE: CmpNE, opcode.LT: CmpLT, opcode.LE: CmpLE,
	opcode.GT: CmpGT, opcode.GE: CmpGE, opcode.NullEQ: CmpNullEQ,
}

var arithOps = map[opcode.Op]ArithOp{
	opcode.Plus: OpPlus, opcode.Minus: OpMinus, opcode.Mul: OpMul, opcode.Div: OpDiv,
	opcode.IntDiv: OpIntDiv, opcode.Mod: OpMod, opcode.And: OpBitAnd, opcode.Or: OpBitOr,
	opcode.Xor: OpBitXor, opcode.LeftShift: OpShiftLeft, opcode.RightShift: OpShiftRight,
}

func (c *compiler) binary(n *ast.BinaryOperationExpr) (Expr, error) {
	if _, isCmp := cmpOps[n.Op]; isCmp {
		_, lrow := RowElems(n.L)
		_, rrow := RowElems(n.R)
		if lrow || rrow {
			if !lrow {
				return nil, errOperandColumns(1)
			}
			return c.rowCompare(n.Op, n.L, n.R)
		}
	}
	l, err := c.compile(n.L)
	if err != nil {
		return nil, err
	}
	r, err := c.compile(n.R)
	if err != nil {
		return nil, err
	}
	if op, ok := cmpOps[n.Op]; ok {
		return NewComparison(op, l, r), nil
	}
	if op, ok := arithOps[n.Op]; ok {
		return NewArith(op, l, r), nil
	}
	switch n.Op {
	case opcode.LogicAnd:
		return NewLogic(LogicAnd, l, r), nil
	case opcode.LogicOr:
		return NewLogic(LogicOr, l, r), nil
	case opcode.LogicXor:
		return NewLogic(LogicXor, l, r), nil
	}
	return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support operator %s", n.Op.String())
}

func (c *compiler) unary(n *ast.UnaryOperationExpr) (Expr, error) {
	e, err := c.compile(n.V)
	if err != nil {
		return nil, err
	}
	switch n.Op {
	case opcode.Minus:
		return NewNeg(e), nil
	case opcode.Plus:
		return e, nil
	case opcode.Not, opcode.Not2:
		return &Not{E: e}, nil
	case opcode.BitNeg:
		return &BitNeg{E: e}, nil
	}
	return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support unary operator %s", n.Op.String())
}

func (c *compiler) caseExpr(n *ast.CaseExpr) (Expr, error) {
	var value, els Expr
	var err error
	if n.Value != nil {
		if value, err = c.compile(n.Value); err != nil {
			return nil, err
		}
	}
	whens := make([]Expr, len(n.WhenClauses))
	thens := make([]Expr, len(n.WhenClauses))
	for i, w := range n.WhenClauses {
		if whens[i], err = c.compile(w.Expr); err != nil {
			return nil, err
		}
		if thens[i], err = c.compile(w.Result); err != nil {
			return nil, err
		}
	}
	if n.ElseClause != nil {
		if els, err = c.compile(n.ElseClause); err != nil {
			return nil, err
		}
	}
	return NewCase(value, whens, thens, els), nil
}

// fold evaluates e once when it is deterministic and all its inputs are
// constants, replacing it by a Constant of the same type.
func fold(e Expr) Expr {
	if _, ok := e.(*Constant); ok || !foldable(e) {
		return e
	}
	var warnings []error
	ctx := &EvalContext{Warnings: &warnings}
	d, err := e.Eval(ctx, nil)
	if err != nil || len(warnings) > 0 {
		return e
	}
	return NewConstant(d, e.Type())
}

// foldable reports whether e's direct children are all constants and e
// itself is deterministic and row-independent.
func foldable(e Expr) bool {
	var kids []Expr
	switch n := e.(type) {
	case *Arith:
		kids = []Expr{n.L, n.R}
	case *Neg:
		kids = []Expr{n.E}
	case *BitNeg:
		kids = []Expr{n.E}
	case *Comparison:
		kids = []Expr{n.L, n.R}
	case *Logic:
		kids = []Expr{n.L, n.R}
	case *Not:
		kids = []Expr{n.E}
	case *IsNull:
		kids = []Expr{n.E}
	case *IsTruth:
		kids = []Expr{n.E}
	case *Between:
		kids = []Expr{n.E, n.Lo, n.Hi}
	case *In:
		kids = append([]Expr{n.E}, n.List...)
	case *Like:
		kids = []Expr{n.E, n.Pattern}
	case *Case:
		kids = append(append([]Expr{}, n.Whens...), n.Thens...)
		if n.Value != nil {
			kids = append(kids, n.Value)
		}
		if n.Else != nil {
			kids = append(kids, n.Else)
		}
	case *Coalesce:
		kids = n.Args
	case *NullIf:
		kids = []Expr{n.A, n.B}
	case *Cast:
		kids = []Expr{n.E}
	case *Extract:
		kids = []Expr{n.E}
	case *DateArith:
		kids = []Expr{n.Date, n.Interval}
	case *TimestampDiff:
		kids = []Expr{n.A, n.B}
	case *Func:
		if n.def.volatile {
			return false
		}
		kids = n.Args
	default:
		return false
	}
	for _, k := range kids {
		if _, ok := k.(*Constant); !ok {
			return false
		}
	}
	return true
}
