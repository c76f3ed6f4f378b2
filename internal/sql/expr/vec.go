package expr

import (
	"github.com/strata-db/strata/internal/sql/types"
)

// Batch evaluation.
//
// A Vec evaluates one expression over a batch of rows node by node: each
// node computes its value for every selected row into a vector before its
// parent reads them, so the per-row work of an operator is a loop over
// values of known kinds instead of a chain of interface calls per row
// (TiDB's vectorized expressions over chunks, CockroachDB's vectorized
// engine). Rows stay as the executors and the coprocessor hold them (a row
// is a []types.Datum); what is vectorized is the evaluation.
//
// # Exactness
//
// Every node applies the same operator code as Eval (Arith.apply,
// Comparison.apply, Logic.short and combine, truthOf, a function's own
// evaluator), so a value computed here equals Eval's for its row. What
// differs is the order: Eval finishes a row before the next, a Vec
// finishes a node before its parent, and it may evaluate an operand Eval
// would skip (the right side of an arithmetic whose left side is NULL, the
// later arguments of a function after a NULL one). Both orders matter only
// through errors and warnings, since the expressions a Vec accepts (NewVec)
// have no side effects. The contract is therefore: when Eval returns no
// error and adds no warning to ctx, its values are exactly Eval's; when it
// fails or warns, the caller drops what it computed (and the warnings it
// added) and evaluates those rows one by one with Expr.Eval, which reports
// the first error and the warnings in MySQL's order. A Vec evaluates every
// (node, row) pair Eval would evaluate, so a batch that Eval would fail or
// warn on never passes here silently.
type Vec struct {
	root vnode
}

// NewVec prepares e for batch evaluation, or returns nil when e cannot be
// evaluated that way: it holds a node of a type outside this package (a
// subquery, an aggregate computed by the executor), a variable, or a
// volatile function (RAND, UUID, SLEEP, NOW ...: a different number or
// order of calls would change results). A Vec keeps its vectors between
// calls: it serves one goroutine.
func NewVec(e Expr) *Vec {
	n := buildVec(e)
	if n == nil {
		return nil
	}
	return &Vec{root: n}
}

// Eval computes the expression for rows[sel[j]], j = 0..len(sel)-1, and
// returns the values in that order. The slice is the Vec's own and is
// overwritten by the next Eval; the values may share bytes with the rows.
func (v *Vec) Eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	if ctx == nil {
		ctx = &EvalContext{}
	}
	return v.root.eval(ctx, rows, sel)
}

// vnode is one node of a Vec: eval returns its values for the selected
// rows in a vector it owns.
type vnode interface {
	eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error)
}

func buildVec(e Expr) vnode {
	switch n := e.(type) {
	case *Column:
		return &colVec{idx: n.Idx}
	case *Constant:
		return &constVec{v: n.Value}
	case *Arith:
		l, r := buildVec(n.L), buildVec(n.R)
		if l == nil || r == nil {
			return nil
		}
		return &arithVec{a: n, l: l, r: r}
	case *Comparison:
		l, r := buildVec(n.L), buildVec(n.R)
		if l == nil || r == nil {
			return nil
		}
		return &cmpVec{c: n, l: l, r: r}
	case *Logic:
		l, r := buildVec(n.L), buildVec(n.R)
		if l == nil || r == nil {
			return nil
		}
		return &logicVec{g: n, l: l, r: r}
	case *Not:
		in := buildVec(n.E)
		if in == nil {
			return nil
		}
		return &notVec{in: in}
	case *IsNull:
		in := buildVec(n.E)
		if in == nil {
			return nil
		}
		return &isNullVec{not: n.Not, in: in}
	case *Func:
		if n.def.volatile {
			return nil
		}
		args := make([]vnode, len(n.Args))
		for i, a := range n.Args {
			if args[i] = buildVec(a); args[i] == nil {
				return nil
			}
		}
		return &funcVec{f: n, args: args}
	case *Param, *Neg, *BitNeg, *IsTruth, *Between, *In, *Like, *Collated, *Cast, *Case, *Coalesce, *NullIf, *Extract, *DateArith, *TimestampDiff:
		// Evaluated row by row inside the batch; their operands must be
		// free of side effects too.
		if !pureTree(e) {
			return nil
		}
		return &rowVec{e: e}
	}
	return nil
}

// pureTree reports whether every node under e is of this package and
// free of side effects.
func pureTree(e Expr) bool {
	ok := true
	var walk func(e Expr)
	walk = func(e Expr) {
		if !ok {
			return
		}
		switch n := e.(type) {
		case *Column, *Constant, *Param:
		case *Arith:
			walk(n.L)
			walk(n.R)
		case *Comparison:
			walk(n.L)
			walk(n.R)
		case *Logic:
			walk(n.L)
			walk(n.R)
		case *Not:
			walk(n.E)
		case *Neg:
			walk(n.E)
		case *BitNeg:
			walk(n.E)
		case *IsNull:
			walk(n.E)
		case *IsTruth:
			walk(n.E)
		case *Func:
			if n.def.volatile {
				ok = false
				return
			}
			for _, a := range n.Args {
				walk(a)
			}
		case *Between:
			walk(n.E)
			walk(n.Lo)
			walk(n.Hi)
		case *In:
			walk(n.E)
			for _, a := range n.List {
				walk(a)
			}
		case *Like:
			walk(n.E)
			walk(n.Pattern)
		case *Collated:
			walk(n.E)
		case *Cast:
			walk(n.E)
		case *Case:
			if n.Value != nil {
				walk(n.Value)
			}
			for i := range n.Whens {
				walk(n.Whens[i])
				walk(n.Thens[i])
			}
			if n.Else != nil {
				walk(n.Else)
			}
		case *Coalesce:
			for _, a := range n.Args {
				walk(a)
			}
		case *NullIf:
			walk(n.A)
			walk(n.B)
		case *Extract:
			walk(n.E)
		case *DateArith:
			walk(n.Date)
			walk(n.Interval)
		case *TimestampDiff:
			walk(n.A)
			walk(n.B)
		default:
			ok = false
		}
	}
	walk(e)
	return ok
}

// grow sets *buf to length n, reusing its memory, and returns it.
func grow(buf *[]types.Datum, n int) []types.Datum {
	if cap(*buf) < n {
		*buf = make([]types.Datum, n, max(n, 2*cap(*buf)))
	} else {
		*buf = (*buf)[:n]
	}
	return *buf
}

// operands evaluates a binary node's operands.
func operands(ctx *EvalContext, l, r vnode, rows [][]types.Datum, sel []int) (lv, rv []types.Datum, err error) {
	if lv, err = l.eval(ctx, rows, sel); err != nil {
		return nil, nil, err
	}
	rv, err = r.eval(ctx, rows, sel)
	return lv, rv, err
}

type colVec struct {
	idx int
	buf []types.Datum
}

func (n *colVec) eval(_ *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	out := grow(&n.buf, len(sel))
	for j, i := range sel {
		out[j] = rows[i][n.idx]
	}
	return out, nil
}

type constVec struct {
	v   types.Datum
	buf []types.Datum // every element is v
}

func (n *constVec) eval(_ *EvalContext, _ [][]types.Datum, sel []int) ([]types.Datum, error) {
	if len(n.buf) < len(sel) {
		n.buf = make([]types.Datum, max(len(sel), 2*len(n.buf)))
		for i := range n.buf {
			n.buf[i] = n.v
		}
	}
	return n.buf[:len(sel)], nil
}

type arithVec struct {
	a    *Arith
	l, r vnode
	buf  []types.Datum
}

func (n *arithVec) eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	lv, rv, err := operands(ctx, n.l, n.r, rows, sel)
	if err != nil {
		return nil, err
	}
	out := grow(&n.buf, len(sel))
	a := n.a
	for j := range out {
		x, y := lv[j], rv[j]
		switch {
		case x.IsNull() || y.IsNull():
			out[j] = types.Datum{}
		case x.Kind() == types.KindInt64 && y.Kind() == types.KindInt64 && a.Op != OpDiv:
			// The cases evalInt settles without an error or a warning,
			// inline; the rest through it.
			xi, yi := x.Int(), y.Int()
			switch a.Op {
			case OpPlus:
				if s := xi + yi; (s > xi) == (yi > 0) {
					out[j] = types.NewInt(s)
					continue
				}
			case OpMinus:
				if s := xi - yi; (s < xi) == (yi > 0) {
					out[j] = types.NewInt(s)
					continue
				}
			case OpMod:
				if yi != 0 && yi != -1 {
					out[j] = types.NewInt(xi % yi)
					continue
				}
			}
			if out[j], err = a.evalInt(ctx, xi, yi); err != nil {
				return nil, err
			}
		default:
			if out[j], err = a.evalSlow(ctx, x, y); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

type cmpVec struct {
	c    *Comparison
	l, r vnode
	buf  []types.Datum
}

func (n *cmpVec) eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	lv, rv, err := operands(ctx, n.l, n.r, rows, sel)
	if err != nil {
		return nil, err
	}
	out := grow(&n.buf, len(sel))
	c := n.c
	if c.Op != CmpNullEQ && !c.json {
		// The common case, integers against integers, inline.
		for j := range out {
			x, y := lv[j], rv[j]
			if x.Kind() == types.KindInt64 && y.Kind() == types.KindInt64 {
				xi, yi := x.Int(), y.Int()
				cmp := 0
				if xi < yi {
					cmp = -1
				} else if xi > yi {
					cmp = 1
				}
				out[j] = types.NewBool(cmpResult(c.Op, cmp))
				continue
			}
			if out[j], err = c.apply(x, y); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	for j := range out {
		if out[j], err = c.apply(lv[j], rv[j]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// logicVec evaluates its right operand only for the rows whose left
// operand does not decide the result, as Eval does.
type logicVec struct {
	g      *Logic
	l, r   vnode
	buf    []types.Datum
	lt, ln []bool
	rsel   []int // rows needing the right operand
	rpos   []int // their positions in sel
}

func (n *logicVec) eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	lv, err := n.l.eval(ctx, rows, sel)
	if err != nil {
		return nil, err
	}
	out := grow(&n.buf, len(sel))
	if cap(n.lt) < len(sel) {
		n.lt, n.ln = make([]bool, len(sel)), make([]bool, len(sel))
	}
	lt, ln := n.lt[:len(sel)], n.ln[:len(sel)]
	n.rsel, n.rpos = n.rsel[:0], n.rpos[:0]
	for j, d := range lv {
		lt[j], ln[j] = truthOf(ctx, d)
		var done bool
		if out[j], done = n.g.short(lt[j], ln[j]); !done {
			n.rsel = append(n.rsel, sel[j])
			n.rpos = append(n.rpos, j)
		}
	}
	if len(n.rsel) == 0 {
		return out, nil
	}
	rv, err := n.r.eval(ctx, rows, n.rsel)
	if err != nil {
		return nil, err
	}
	for k, j := range n.rpos {
		rt, rn := truthOf(ctx, rv[k])
		out[j] = n.g.combine(lt[j], ln[j], rt, rn)
	}
	return out, nil
}

type notVec struct {
	in  vnode
	buf []types.Datum
}

func (n *notVec) eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	v, err := n.in.eval(ctx, rows, sel)
	if err != nil {
		return nil, err
	}
	out := grow(&n.buf, len(sel))
	for j, d := range v {
		if t, isNull := truthOf(ctx, d); isNull {
			out[j] = types.Datum{}
		} else {
			out[j] = types.NewBool(!t)
		}
	}
	return out, nil
}

type isNullVec struct {
	not bool
	in  vnode
	buf []types.Datum
}

func (n *isNullVec) eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	v, err := n.in.eval(ctx, rows, sel)
	if err != nil {
		return nil, err
	}
	out := grow(&n.buf, len(sel))
	for j, d := range v {
		out[j] = types.NewBool(d.IsNull() != n.not)
	}
	return out, nil
}

type funcVec struct {
	f    *Func
	args []vnode
	vals [][]types.Datum
	buf  []types.Datum
}

func (n *funcVec) eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	if n.vals == nil {
		n.vals = make([][]types.Datum, len(n.args))
	}
	for i, a := range n.args {
		v, err := a.eval(ctx, rows, sel)
		if err != nil {
			return nil, err
		}
		n.vals[i] = v
	}
	out := grow(&n.buf, len(sel))
	f := n.f
	base := len(ctx.args)
	defer func() { ctx.args = ctx.args[:base] }()
rows:
	for j := range out {
		ctx.args = ctx.args[:base]
		for _, v := range n.vals {
			d := v[j]
			if d.IsNull() && f.def.nullIfNullArg {
				out[j] = types.Datum{}
				continue rows
			}
			ctx.args = append(ctx.args, d)
		}
		top := len(ctx.args)
		d, err := f.def.eval(ctx, f, ctx.args[base:top:top])
		if err != nil {
			return nil, err
		}
		out[j] = d
	}
	return out, nil
}

// rowVec evaluates a node (and everything under it) row by row.
type rowVec struct {
	e   Expr
	buf []types.Datum
}

func (n *rowVec) eval(ctx *EvalContext, rows [][]types.Datum, sel []int) ([]types.Datum, error) {
	out := grow(&n.buf, len(sel))
	var err error
	for j, i := range sel {
		if out[j], err = n.e.Eval(ctx, rows[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
