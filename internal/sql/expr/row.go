package expr

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// Row constructors, (a, b), stand in comparisons and IN lists, and compile
// to the scalar expressions MySQL defines them by:
//
//	(a, b) = (x, y)          a = x AND b = y
//	(a, b) <=> (x, y)        a <=> x AND b <=> y
//	(a, b) <> (x, y)         a <> x OR b <> y
//	(a, b) < (x, y)          a < x OR (a = x AND b < y)      (and <=, >, >= alike)
//	(a, b) IN ((x, y), ...)  (a, b) = (x, y) OR ...
//
// which gives MySQL's NULL results too: (1, NULL) = (1, 2) is NULL,
// (1, NULL) = (2, 2) is 0. Rows may nest. The planner reads (a, b) IN
// ((x, y), ...) over a key's columns as a set of key lookups (plan's
// access paths); the compiled form is what filters.

// RowElems returns the elements of a row constructor.
func RowElems(n ast.ExprNode) ([]ast.ExprNode, bool) {
	for {
		p, ok := n.(*ast.ParenthesesExpr)
		if !ok {
			break
		}
		n = p.Expr
	}
	r, ok := n.(*ast.RowExpr)
	if !ok {
		return nil, false
	}
	return r.Values, true
}

// arity is the number of columns an operand has: a row's length, 1 for a
// scalar.
func arity(n ast.ExprNode) int {
	if elems, ok := RowElems(n); ok {
		return len(elems)
	}
	return 1
}

func errOperandColumns(n int) error {
	return sqlerr.New(sqlerr.ErOperandColumns, "21000", "Operand should contain %d column(s)", n)
}

// rowCompare compiles l op r where at least one side is a row.
func (c *compiler) rowCompare(op opcode.Op, l, r ast.ExprNode) (Expr, error) {
	le, lok := RowElems(l)
	re, rok := RowElems(r)
	if !lok || !rok {
		if _, sub := r.(*ast.SubqueryExpr); sub {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support 'row subquery'")
		}
		return nil, errOperandColumns(arity(l))
	}
	if len(le) != len(re) {
		return nil, errOperandColumns(len(le))
	}
	pair := func(op opcode.Op, i int) (Expr, error) {
		return c.compileCompare(op, le[i], re[i])
	}
	n := len(le)
	switch op {
	case opcode.EQ, opcode.NullEQ, opcode.NE:
		join := LogicAnd
		if op == opcode.NE {
			join = LogicOr
		}
		var out Expr
		for i := 0; i < n; i++ {
			e, err := pair(op, i)
			if err != nil {
				return nil, err
			}
			if out == nil {
				out = e
			} else {
				out = NewLogic(join, out, e)
			}
		}
		return out, nil
	case opcode.LT, opcode.LE, opcode.GT, opcode.GE:
		strict := opcode.LT
		if op == opcode.GT || op == opcode.GE {
			strict = opcode.GT
		}
		out, err := pair(op, n-1)
		if err != nil {
			return nil, err
		}
		for i := n - 2; i >= 0; i-- {
			lt, err := pair(strict, i)
			if err != nil {
				return nil, err
			}
			eq, err := pair(opcode.EQ, i)
			if err != nil {
				return nil, err
			}
			out = NewLogic(LogicOr, lt, NewLogic(LogicAnd, eq, out))
		}
		return out, nil
	}
	return nil, errOperandColumns(1)
}

// compileCompare compiles l op r for a comparison operator, rows or not.
func (c *compiler) compileCompare(op opcode.Op, l, r ast.ExprNode) (Expr, error) {
	if _, ok := RowElems(l); ok {
		return c.rowCompare(op, l, r)
	}
	if _, ok := RowElems(r); ok {
		return nil, errOperandColumns(1)
	}
	le, err := c.compile(l)
	if err != nil {
		return nil, err
	}
	re, err := c.compile(r)
	if err != nil {
		return nil, err
	}
	return NewComparison(cmpOps[op], le, re), nil
}

// rowIn compiles (a, b) [NOT] IN ((x, y), ...).
func (c *compiler) rowIn(n *ast.PatternInExpr) (Expr, error) {
	var out Expr
	for _, v := range n.List {
		if arity(v) != arity(n.Expr) {
			return nil, errOperandColumns(arity(n.Expr))
		}
		e, err := c.rowCompare(opcode.EQ, n.Expr, v)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = e
		} else {
			out = NewLogic(LogicOr, out, e)
		}
	}
	if n.Not {
		return &Not{E: out}, nil
	}
	return out, nil
}
