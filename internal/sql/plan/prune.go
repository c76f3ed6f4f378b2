package plan

import "github.com/strata-db/strata/internal/sql/expr"

// pruneColumns records on each table scan of a query plan which of the
// table's columns the plan above it reads (Scan.Needed), so that the
// executor decodes only those from each row: sysbench's range selects read
// one column of four, and decoding the others was a sixth of the CPU of
// oltp_read_only outside the system calls.
//
// The walk goes top-down and knows which columns of its input each
// operator reads. It is conservative: below an operator it does not
// model (set operations, derived tables) and below any expression it
// cannot see into, every column counts as read. A subquery reads the row
// it is evaluated with at the positions of its OuterRefs
// (Subquery.outerCols); an OuterRef inside a correlated subquery's plan
// reads the outer row, none of the plan's own columns. A column the plan does read but
// the walk missed would come out NULL, so anything unknown must fall into
// "every column".
func pruneColumns(p Plan) {
	if ColumnPruning {
		prune(p, nil)
	}
}

// ColumnPruning switches pruneColumns on; tests turn it off to compare
// results with and without it.
var ColumnPruning = true

// prune marks p's subtree given need, the columns of p's output its parent
// reads (nil: all of them).
func prune(p Plan, need []bool) {
	switch n := p.(type) {
	case *Scan:
		if need == nil || len(need) != len(n.Table.Columns) {
			return
		}
		for _, b := range need {
			if !b {
				n.Needed = need
				return
			}
		}
	case *Filter:
		prune(n.Child, addExprCols(need, n.Child, n.Cond))
	case *Sort:
		for _, k := range n.Keys {
			need = addExprCols(need, n.Child, k.Expr)
		}
		prune(n.Child, need)
	case *Limit:
		prune(n.Child, need)
	case *Distinct:
		for i := 0; i < n.N && need != nil; i++ {
			need = markCol(need, n.Child, i)
		}
		prune(n.Child, need)
	case *Projection:
		child := newNeed(n.Child)
		for i, e := range n.Exprs {
			if need == nil || i >= len(need) || need[i] {
				child = addExprCols(child, n.Child, e)
			}
		}
		prune(n.Child, child)
	case *Aggregate:
		// The output is the aggregates, then the group's first input row.
		child := newNeed(n.Child)
		for _, g := range n.GroupBy {
			child = addExprCols(child, n.Child, g)
		}
		for _, a := range n.Aggs {
			for _, e := range a.Args {
				child = addExprCols(child, n.Child, e)
			}
		}
		if need == nil {
			child = nil
		}
		for i := len(n.Aggs); i < len(need) && child != nil; i++ {
			if need[i] {
				child = markCol(child, n.Child, i-len(n.Aggs))
			}
		}
		prune(n.Child, child)
	case *Join:
		// The output is the left row followed by the right row; Cond
		// reads the combined row, the keys each side's own.
		nl, nr := len(n.Left.Columns()), len(n.Right.Columns())
		if n.Type.LeftOnly() && (need == nil || len(need) == nl) {
			// The output is the left row; the right row is read by
			// Cond and the keys alone.
			ext := make([]bool, nl+nr)
			for i := range nl {
				ext[i] = need == nil || need[i]
			}
			need = ext
		}
		if need == nil || len(need) != nl+nr {
			prune(n.Left, nil)
			prune(n.Right, nil)
			return
		}
		both := append([]bool(nil), need...)
		if !exprCols(n.Cond, func(i int) bool {
			if i < 0 || i >= len(both) {
				return false
			}
			both[i] = true
			return true
		}) {
			prune(n.Left, nil)
			prune(n.Right, nil)
			return
		}
		left, right := both[:nl:nl], both[nl:]
		for _, k := range n.LeftKeys {
			left = addExprCols(left, n.Left, k)
		}
		for _, k := range n.RightKey {
			right = addExprCols(right, n.Right, k)
		}
		// An index join reads its right table itself (plan.BaseScan:
		// the scan under its filters), decoding the columns the scan
		// needs as well: its keys, its filters and what the plan above
		// reads.
		prune(n.Left, left)
		prune(n.Right, right)
	default:
		for _, c := range p.Children() {
			prune(c, nil)
		}
	}
}

// newNeed returns an empty need for the output of p.
func newNeed(p Plan) []bool { return make([]bool, len(p.Columns())) }

// markCol adds column i of child's output to need; nil (all) when need is
// nil or i is out of range.
func markCol(need []bool, child Plan, i int) []bool {
	if need == nil || i < 0 || i >= len(need) || len(need) != len(child.Columns()) {
		return nil
	}
	need[i] = true
	return need
}

// addExprCols adds the columns of child's output that e reads to need, or
// returns nil (all) when need is nil or e holds a node the walk does not
// know.
func addExprCols(need []bool, child Plan, e expr.Expr) []bool {
	if need == nil {
		return nil
	}
	need = append([]bool(nil), need...) // a parent's slice may be shared
	if !exprCols(e, func(i int) bool { return markCol(need, child, i) != nil }) {
		return nil
	}
	return need
}

// exprCols calls mark for each column e reads; it returns false when e
// holds an expression it cannot see into, or mark does.
func exprCols(e expr.Expr, mark func(int) bool) bool {
	all := func(es ...expr.Expr) bool {
		for _, x := range es {
			if x != nil && !exprCols(x, mark) {
				return false
			}
		}
		return true
	}
	switch n := e.(type) {
	case nil:
		return true
	case *expr.Column:
		return mark(n.Idx)
	case *expr.Constant, *expr.Param, *expr.Variable:
		return true
	case *expr.Arith:
		return all(n.L, n.R)
	case *expr.Neg:
		return all(n.E)
	case *expr.BitNeg:
		return all(n.E)
	case *expr.Func:
		return all(n.Args...)
	case *expr.Case:
		return all(n.Value, n.Else) && all(n.Whens...) && all(n.Thens...)
	case *expr.Coalesce:
		return all(n.Args...)
	case *expr.NullIf:
		return all(n.A, n.B)
	case *expr.Cast:
		return all(n.E)
	case *expr.DateArith:
		return all(n.Date, n.Interval)
	case *expr.TimestampDiff:
		return all(n.A, n.B)
	case *expr.Comparison:
		return all(n.L, n.R)
	case *expr.Logic:
		return all(n.L, n.R)
	case *expr.Not:
		return all(n.E)
	case *expr.IsNull:
		return all(n.E)
	case *expr.IsTruth:
		return all(n.E)
	case *expr.Between:
		return all(n.E, n.Lo, n.Hi)
	case *expr.In:
		return all(n.E) && all(n.List...)
	case *expr.Like:
		return all(n.E, n.Pattern)
	case *expr.Regexp:
		return all(n.E, n.Pattern)
	case *Subquery:
		// Its plan reads the row it is evaluated with only through
		// OuterRefs (its own and its nested subqueries'), whose
		// columns are outerCols; its operand is an expression of the
		// row.
		for _, i := range n.outerCols {
			if !mark(i) {
				return false
			}
		}
		return all(n.Left)
	case *OuterRef:
		// A column of the outer row, not of this plan's rows.
		return true
	}
	return false
}
