package plan

import (
	"math"
	"slices"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/expr"
)

// A table's own condition col IN (SELECT ...), with an uncorrelated
// subquery, filters every row of a full scan against the subquery's
// hashed rows. When col leads an index (or is the integer primary key)
// and the subquery returns few rows against the table, the table is read
// instead through that index for the subquery's distinct values: an index
// join (exec.indexJoinExec, or joinExec's lookup by handle) of
//
//	Distinct(subquery) JOIN table ON subquery.value = col
//
// projected back to the table's columns. It is the same set of rows: IN
// holds for a row exactly when some value of the subquery equals col
// (NULLs equal nothing, and a WHERE conjunct drops unknown as it drops
// false), and DISTINCT makes each row match once. The two sides must
// compare like the join's keys (sameKeyType).
//
// TPC-H Q20 (scale factor 1) read all 800,000 partsupp rows to keep the
// 8,644 of the 2,161 parts named 'forest%' (330 ms); by partsupp's
// primary key (ps_partkey, ps_suppkey), those 8,644 only.
//
// The leaf becomes an opaque plan (no scan another table can reach by
// index, no statistics): it is made only when the join order is not
// costed anyway, a single table or a join with a leaf that has no
// statistics (a derived table), so that it never trades a costed order
// for the rank rules.

// inLookup returns the index join that reads leaf l's rows for the
// condition node, compiled with the uncorrelated subquery sq, or nil.
// l.plan is the leaf's scan under its other conditions.
func (b *Builder) inLookup(l *leaf, node ast.ExprNode, sq *Subquery) Plan {
	in, ok := unparen(node).(*ast.PatternInExpr)
	if !ok || in.Not || in.Sel == nil || sq == nil || sq.Kind != InSubquery || sq.Not || sq.Correlated || sq.Plan == nil {
		return nil
	}
	scan, _ := BaseScan(l.plan)
	if scan == nil || scan != l.scan || scan.Access != TableFullScan || scan.Lock || scan.WithHandle || b.Stats == nil {
		return nil
	}
	col, isCol := columnOf(in.Expr, l.scope)
	if !isCol || len(sq.Plan.Columns()) != 1 {
		return nil
	}
	ts := b.Stats.Table(scan.Table.ID)
	keys, ok := b.planRows(sq.Plan)
	if ts == nil || !ok || ts.Rows <= 0 {
		return nil
	}
	ct, vt := scan.Table.Columns[col].Type, sq.Plan.Columns()[0].Type
	if !sameKeyType(ct, vt) {
		return nil
	}
	d := &Distinct{base: base{sq.Plan.Columns()}, Child: sq.Plan, N: 1}
	jn := &Join{Left: d, Right: l.plan, Type: InnerJoin, Lookup: -1,
		LeftKeys: []expr.Expr{expr.NewColumn(0, vt, sq.Plan.Columns()[0].Name)},
		RightKey: []expr.Expr{expr.NewColumn(col, ct, scan.Table.Columns[col].Name)},
	}
	raw := float64(ts.Rows)
	perKey := pointCost
	if jn.Lookup = lookupKey(jn, scan); jn.Lookup < 0 {
		indexLookup(jn, scan, true)
		if jn.Lookup < 0 {
			return nil
		}
		perKey = rangeCost
	}
	// The rows of a key: the table's over the column's distinct values.
	perKeyRows := 1.0
	if ndv := b.columnNDV(l, col); ndv > 0 {
		perKeyRows = math.Max(1, raw/ndv)
	}
	keys = math.Min(keys, raw)
	if keys*(perKey+fetchCost*perKeyRows) >= raw*scanCost {
		return nil
	}
	b.Subqueries = slices.DeleteFunc(b.Subqueries, func(s *Subquery) bool { return s == sq })
	jn.EstRows = math.Max(1, math.Min(raw, keys*perKeyRows))
	width := len(scan.Table.Columns)
	cols := jn.Right.Columns()
	jn.cols = append(slices.Clone(d.Columns()), cols...)
	proj := &Projection{base: base{cols}, Child: jn}
	for i := range width {
		proj.Exprs = append(proj.Exprs, expr.NewColumn(1+i, cols[i].Type, cols[i].Name))
	}
	return proj
}
