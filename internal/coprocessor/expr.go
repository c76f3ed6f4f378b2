package coprocessor

import (
	"fmt"

	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/kvpb"
)

// PushableFuncs are the scalar functions a fragment may call. Every other
// function, and every expression kind not in kvpb.CopExprKind (CASE, CAST,
// subqueries, variables, ? parameters, COLLATE, date arithmetic, JSON,
// REGEXP ...), keeps the expression in SQL.
var PushableFuncs = map[string]bool{
	"length": true, "char_length": true, "character_length": true, "octet_length": true,
	"substring": true, "substr": true, "left": true, "right": true,
	"upper": true, "lower": true, "ucase": true, "lcase": true,
	"concat": true, "abs": true, "ceil": true, "ceiling": true, "floor": true,
}

// ExprToPB serializes e for a fragment. It returns false when e (or a
// part of it) cannot be pushed: the caller then keeps it in SQL. The
// expression rebuilt from the result by ExprFromPB prints and types the
// same as e (checked here), so both sides evaluate the same thing.
func ExprToPB(e expr.Expr) (*kvpb.CopExpr, bool) {
	p, ok := exprToPB(e)
	if !ok {
		return nil, false
	}
	back, err := ExprFromPB(p)
	if err != nil || back.String() != e.String() || back.Type().GetType() != e.Type().GetType() ||
		back.Type().GetCollate() != e.Type().GetCollate() || back.Type().GetDecimal() != e.Type().GetDecimal() {
		return nil, false
	}
	return p, true
}

func exprsToPB(es ...expr.Expr) ([]*kvpb.CopExpr, bool) {
	out := make([]*kvpb.CopExpr, len(es))
	for i, e := range es {
		p, ok := exprToPB(e)
		if !ok {
			return nil, false
		}
		out[i] = p
	}
	return out, true
}

func exprToPB(e expr.Expr) (*kvpb.CopExpr, bool) {
	var (
		p    = &kvpb.CopExpr{}
		args []expr.Expr
	)
	switch n := e.(type) {
	case *expr.Column:
		return &kvpb.CopExpr{Kind: kvpb.CopExprKind_CopColumnRef, Column: int32(n.Idx), Type: FieldTypeToPB(n.Type()), Name: n.String()}, true
	case *expr.Constant:
		return &kvpb.CopExpr{Kind: kvpb.CopExprKind_CopConstant, Value: EncodeDatum(n.Value), Type: FieldTypeToPB(n.Type())}, true
	case *expr.Comparison:
		p.Kind, p.Op, args = kvpb.CopExprKind_CopCompare, int32(n.Op), []expr.Expr{n.L, n.R}
	case *expr.Arith:
		p.Kind, p.Op, args = kvpb.CopExprKind_CopArith, int32(n.Op), []expr.Expr{n.L, n.R}
	case *expr.Logic:
		p.Kind, p.Op, args = kvpb.CopExprKind_CopLogic, int32(n.Op), []expr.Expr{n.L, n.R}
	case *expr.Not:
		p.Kind, args = kvpb.CopExprKind_CopNot, []expr.Expr{n.E}
	case *expr.Neg:
		p.Kind, args = kvpb.CopExprKind_CopNeg, []expr.Expr{n.E}
	case *expr.IsNull:
		p.Kind, p.Not, args = kvpb.CopExprKind_CopIsNull, n.Not, []expr.Expr{n.E}
	case *expr.In:
		p.Kind, p.Not, args = kvpb.CopExprKind_CopIn, n.Not, append([]expr.Expr{n.E}, n.List...)
	case *expr.Like:
		p.Kind, p.Not, p.Escape, args = kvpb.CopExprKind_CopLike, n.Not, n.Escape, []expr.Expr{n.E, n.Pattern}
	case *expr.Between:
		p.Kind, p.Not, args = kvpb.CopExprKind_CopBetween, n.Not, []expr.Expr{n.E, n.Lo, n.Hi}
	case *expr.Func:
		if !PushableFuncs[n.Name] {
			return nil, false
		}
		p.Kind, p.Name, args = kvpb.CopExprKind_CopFunc, n.Name, n.Args
	default:
		return nil, false
	}
	var ok bool
	if p.Args, ok = exprsToPB(args...); !ok {
		return nil, false
	}
	return p, true
}

// ExprFromPB rebuilds an expression of a fragment with package expr's
// constructors, which give it the types, collations and conversions the
// SQL layer's compiler gives the same expression.
func ExprFromPB(p *kvpb.CopExpr) (expr.Expr, error) {
	if p == nil {
		return nil, fmt.Errorf("coprocessor: missing expression")
	}
	args := make([]expr.Expr, len(p.Args))
	for i, a := range p.Args {
		e, err := ExprFromPB(a)
		if err != nil {
			return nil, err
		}
		args[i] = e
	}
	need := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("coprocessor: %v takes %d arguments, has %d", p.Kind, n, len(args))
		}
		return nil
	}
	switch p.Kind {
	case kvpb.CopExprKind_CopColumnRef:
		if p.Type == nil || p.Column < 0 {
			return nil, fmt.Errorf("coprocessor: bad column reference")
		}
		return expr.NewColumn(int(p.Column), FieldTypeFromPB(p.Type), p.Name), nil
	case kvpb.CopExprKind_CopConstant:
		d, err := DecodeDatum(p.Value)
		if err != nil {
			return nil, err
		}
		if p.Type == nil {
			return expr.NewConstant(d, nil), nil
		}
		return expr.NewConstant(d, FieldTypeFromPB(p.Type)), nil
	case kvpb.CopExprKind_CopCompare:
		if err := need(2); err != nil {
			return nil, err
		}
		if p.Op < int32(expr.CmpEQ) || p.Op > int32(expr.CmpNullEQ) {
			return nil, fmt.Errorf("coprocessor: bad comparison %d", p.Op)
		}
		return expr.NewComparison(expr.CmpOp(p.Op), args[0], args[1]), nil
	case kvpb.CopExprKind_CopArith:
		if err := need(2); err != nil {
			return nil, err
		}
		if p.Op < int32(expr.OpPlus) || p.Op > int32(expr.OpShiftRight) {
			return nil, fmt.Errorf("coprocessor: bad arithmetic %d", p.Op)
		}
		return expr.NewArith(expr.ArithOp(p.Op), args[0], args[1]), nil
	case kvpb.CopExprKind_CopLogic:
		if err := need(2); err != nil {
			return nil, err
		}
		if p.Op < int32(expr.LogicAnd) || p.Op > int32(expr.LogicXor) {
			return nil, fmt.Errorf("coprocessor: bad logic %d", p.Op)
		}
		return expr.NewLogic(expr.LogicOp(p.Op), args[0], args[1]), nil
	case kvpb.CopExprKind_CopNot:
		if err := need(1); err != nil {
			return nil, err
		}
		return &expr.Not{E: args[0]}, nil
	case kvpb.CopExprKind_CopNeg:
		if err := need(1); err != nil {
			return nil, err
		}
		return expr.NewNeg(args[0]), nil
	case kvpb.CopExprKind_CopIsNull:
		if err := need(1); err != nil {
			return nil, err
		}
		return &expr.IsNull{E: args[0], Not: p.Not}, nil
	case kvpb.CopExprKind_CopIn:
		if len(args) < 2 {
			return nil, fmt.Errorf("coprocessor: IN without a list")
		}
		return expr.NewIn(args[0], args[1:], p.Not), nil
	case kvpb.CopExprKind_CopLike:
		if err := need(2); err != nil {
			return nil, err
		}
		return expr.NewLike(args[0], args[1], p.Escape, p.Not), nil
	case kvpb.CopExprKind_CopBetween:
		if err := need(3); err != nil {
			return nil, err
		}
		return expr.NewBetween(args[0], args[1], args[2], p.Not), nil
	case kvpb.CopExprKind_CopFunc:
		if !PushableFuncs[p.Name] {
			return nil, fmt.Errorf("coprocessor: function %s cannot be pushed", p.Name)
		}
		return expr.NewFunc(p.Name, args)
	}
	return nil, fmt.Errorf("coprocessor: unknown expression kind %v", p.Kind)
}
