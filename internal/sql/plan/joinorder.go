package plan

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Join order of a flattened inner join (buildFrom), greedy and without
// statistics:
//
//  1. The first table is the one whose own conditions select best, by the
//     access path they gave it (startRank): a point get on a key, then an
//     equality on an indexed column, then an IN list or a range on an index,
//     then any filter, then none.
//  2. Then, repeatedly, the table that the tables already joined reach best
//     (reachRank): through its primary key or a whole unique index, then
//     through a prefix of another index (both become index joins, which read
//     only the matching rows), then by any equality (a hash join), then by
//     another condition, and last a table joined by nothing (a cross join).
//
// An index join through a prefix of an index may read many rows per key,
// one index range each: it is used only when the first table has
// conditions of its own (the join is "driven" by them). Without any, every
// table is read whole anyway, and hash joins read each one in a single scan.
//
// Ties keep the FROM order. The rows keep the FROM order of the columns
// (buildFrom projects them back).

// startRank ranks a leaf as the first table of the join order.
func startRank(l *leaf, filtered bool) int {
	s := l.scan
	if s == nil {
		if filtered {
			return 2
		}
		return 1
	}
	switch s.Access {
	case PointGet:
		return 5
	case BatchPointGet, TableRangeScan:
		return 3
	case IndexLookup:
		if len(s.Ranges) == 1 {
			r := s.Ranges[0]
			if s.Points {
				return 5
			}
			if len(r.Eq) > 0 && r.Low.Value == nil && r.High.Value == nil {
				return 4
			}
		}
		return 3
	}
	if filtered {
		return 2
	}
	return 1
}

// Reach ranks (reachRank).
const (
	reachNone   = iota // no condition with the joined tables: cross join
	reachCond          // some other condition: nested loop and filter
	reachHash          // an equality: hash join
	reachIndex         // an equality on a prefix of an index: index join
	reachUnique        // equalities on the primary key or a whole unique index
)

// reachRank ranks how leaf i is reached from the joined leaves.
func reachRank(i int, leaves []*leaf, joined []bool, conds []joinCond, driven bool) int {
	with := append([]bool(nil), joined...)
	with[i] = true
	rank := reachNone
	bound := map[int]bool{} // columns of leaf i fixed by an equality
	for _, c := range conds {
		if !c.used[i] || !subset(c.used, with) {
			continue
		}
		rank = max(rank, reachCond)
		for _, e := range c.eqs {
			if e.leaf != i || e.other[i] || !anyTrue(e.other) {
				continue
			}
			rank = max(rank, reachHash)
			if e.col >= 0 {
				bound[e.col] = true
			}
		}
	}
	s := leaves[i].scan
	if len(bound) == 0 || s == nil || s.Access != TableFullScan || s.WithHandle {
		return rank
	}
	t := s.Table
	if t.PKIsHandle && bound[t.HandleOffset] {
		return reachUnique
	}
	for _, ix := range t.Indexes {
		if ix.IsPrefix() || !bound[ix.Columns[0]] {
			continue
		}
		if ix.Unique && allBound(ix, bound) {
			return reachUnique
		}
		if driven {
			rank = max(rank, reachIndex)
		}
	}
	return rank
}

// byHandle reports whether the joined leaves fix the integer primary key
// of leaf i by an equality (a join through it reads rows by handle).
func byHandle(i int, leaves []*leaf, joined []bool, conds []joinCond) bool {
	s := leaves[i].scan
	if s == nil || !s.Table.PKIsHandle {
		return false
	}
	with := append([]bool(nil), joined...)
	with[i] = true
	for _, c := range conds {
		if !c.used[i] || !subset(c.used, with) {
			continue
		}
		for _, e := range c.eqs {
			if e.leaf == i && !e.other[i] && anyTrue(e.other) && e.col == s.Table.HandleOffset {
				return true
			}
		}
	}
	return false
}

// newJoinCond analyzes a conjunct not yet placed for reachRank: an
// equality whose one side reads a single leaf can join that leaf.
func newJoinCond(node ast.ExprNode, used []bool, scopes []*scope) joinCond {
	c := joinCond{used: used, class: -1}
	be, ok := unparen(node).(*ast.BinaryOperationExpr)
	if !ok || be.Op != opcode.EQ {
		return c
	}
	lu, lo := refs(be.L, scopes)
	ru, ro := refs(be.R, scopes)
	if lo || ro {
		return c
	}
	for _, side := range [2]struct {
		mine, other ast.ExprNode
		mu, ou      []bool
	}{{be.L, be.R, lu, ru}, {be.R, be.L, ru, lu}} {
		k := single(side.mu)
		if k < 0 || side.ou[k] || !anyTrue(side.ou) {
			continue
		}
		e := eqSide{leaf: k, col: -1, other: side.ou}
		if col, isCol := columnOf(side.mine, scopes[k]); isCol && sameClass(side.other, side.ou, scopes, scopes[k], side.mine) {
			e.col = col
		}
		c.eqs = append(c.eqs, e)
	}
	return c
}

// single returns the only leaf u marks, or -1.
func single(u []bool) int {
	k := -1
	for j, x := range u {
		if x {
			if k >= 0 {
				return -1
			}
			k = j
		}
	}
	return k
}

func allBound(ix *catalog.IndexInfo, bound map[int]bool) bool {
	for _, c := range ix.Columns {
		if !bound[c] {
			return false
		}
	}
	return true
}

// sameClass reports whether the value kinds of both sides of an equality
// hash alike (equiKeys's rule), when the other side reads a single leaf.
func sameClass(other ast.ExprNode, ou []bool, scopes []*scope, mineScope *scope, mine ast.ExprNode) bool {
	k := single(ou)
	if k < 0 {
		return false
	}
	oe, err := expr.Compile(other, scopes[k])
	if err != nil {
		return false
	}
	me, err := expr.Compile(mine, mineScope)
	if err != nil {
		return false
	}
	return kindClass(oe.Type()) == kindClass(me.Type())
}

// joinCond is a conjunct not yet placed, for reachRank.
type joinCond struct {
	used  []bool
	eqs   []eqSide
	class int // its equivalence class (eqclass.go), -1: none
}

// eqSide is one way an equality can join a leaf: leaf's side reads only
// leaf (col >= 0: it is the bare column col, of a value kind that hashes
// like the other side's), the other side reads the leaves of other.
type eqSide struct {
	leaf, col int
	other     []bool
}

// joinOrder returns the order in which buildFrom joins the leaves, and
// whether the first table has conditions of its own.
func joinOrder(leaves []*leaf, filtered []bool, conds []joinCond, straight bool) (order []int, driven bool) {
	order = make([]int, 0, len(leaves))
	if straight {
		for i := range leaves {
			order = append(order, i)
		}
		return order, startRank(leaves[0], filtered[0]) >= 2
	}
	first, best := 0, -1
	for i, l := range leaves {
		if r := startRank(l, filtered[i]); r > best {
			first, best = i, r
		}
	}
	driven = best >= 2
	joined := make([]bool, len(leaves))
	joined[first] = true
	order = append(order, first)
	for len(order) < len(leaves) {
		next, best := -1, -1
		for i := range leaves {
			if joined[i] {
				continue
			}
			if r := reachRank(i, leaves, joined, conds, driven); r > best {
				next, best = i, r
			}
		}
		joined[next] = true
		order = append(order, next)
	}
	return order, driven
}

// indexLookup makes jn (an inner, semi or anti join) an index join
// through a secondary index (or a composite primary key) of the right
// table when the table would otherwise
// be read in full and some of the join keys are bare columns that make a
// prefix of the index: a whole unique index first, else (when prefix) the
// longest prefix.
func indexLookup(jn *Join, scan *Scan, prefix bool) {
	if scan == nil || scan.Access != TableFullScan || scan.WithHandle || jn.Type == LeftJoin || jn.Lookup >= 0 {
		return
	}
	keyOf := map[int]int{} // right column offset -> key position
	for k, rk := range jn.RightKey {
		lt, rt := jn.LeftKeys[k].Type(), rk.Type()
		if kindClass(rt) == 2 && lt.GetCollate() != rt.GetCollate() {
			// The index finds the values equal in the column's
			// collation; the join may compare in the other one.
			continue
		}
		if idx, ok := expr.ColumnIndex(rk); ok {
			if _, dup := keyOf[idx]; !dup {
				keyOf[idx] = k
			}
		}
	}
	var best *catalog.IndexInfo
	var bestKeys []int
	bestUnique := false
	for _, ix := range scan.Table.Indexes {
		if ix.IsPrefix() {
			continue
		}
		var keys []int
		for _, c := range ix.Columns {
			k, ok := keyOf[c]
			if !ok {
				break
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			continue
		}
		unique := ix.Unique && len(keys) == len(ix.Columns)
		if best == nil || (unique && !bestUnique) || (unique == bestUnique && len(keys) > len(bestKeys)) {
			best, bestKeys, bestUnique = ix, keys, unique
		}
	}
	if best != nil && (bestUnique || prefix) {
		jn.LookupIndex, jn.LookupKeys, jn.Lookup = best, bestKeys, bestKeys[0]
	}
}

// groupLookup makes jn an index join into its right side, a derived table
// of a decorrelated subquery (decorrelate.go) that groups one table's
// filtered rows: Projections over an Aggregate over a chain of filters on
// a full scan. The join keys that are, through the projections, GROUP BY
// columns of the table are the lookup keys, when they make a prefix of
// an index (indexLookup's rules). A batch of left rows then reads the
// table's rows of its keys only, and every group of those keys is whole,
// since each key fixes a GROUP BY column: the aggregate over them gives
// those groups' rows exactly (exec.indexJoinExec, LookupSource).
func groupLookup(jn *Join) {
	if jn.Type != InnerJoin || jn.Lookup >= 0 || len(jn.RightKey) == 0 {
		return
	}
	scan, _, base := LookupSource(jn.Right)
	if scan == nil || base == jn.Right {
		return
	}
	mapped := make([]expr.Expr, len(jn.RightKey))
	for k, rk := range jn.RightKey {
		mapped[k] = expr.NewConstant(types.Datum{}, rk.Type()) // not a lookup key
		idx, ok := expr.ColumnIndex(rk)
		if !ok {
			continue
		}
		if off, ok := groupColumn(jn.Right, base, idx); ok {
			mapped[k] = expr.NewColumn(off, scan.Table.Columns[off].Type, scan.Table.Columns[off].Name)
		}
	}
	probe := &Join{Type: InnerJoin, LeftKeys: jn.LeftKeys, RightKey: mapped, Lookup: -1}
	indexLookup(probe, scan, true)
	if probe.LookupIndex != nil {
		jn.LookupIndex, jn.LookupKeys, jn.Lookup = probe.LookupIndex, probe.LookupKeys, probe.Lookup
	}
}

// groupColumn follows column idx of p's output down to base, the rows of
// a table: through projections of bare columns and an Aggregate, whose
// output column is a GROUP BY column of the table. off is that column.
func groupColumn(p, base Plan, idx int) (off int, ok bool) {
	grouped := false
	for p != base {
		switch n := p.(type) {
		case *Projection:
			if idx >= len(n.Exprs) {
				return 0, false
			}
			if idx, ok = expr.ColumnIndex(n.Exprs[idx]); !ok {
				return 0, false
			}
			p = n.Child
		case *Aggregate:
			if grouped || idx < len(n.Aggs) {
				return 0, false
			}
			idx -= len(n.Aggs) // the group's first row
			found := false
			for _, g := range n.GroupBy {
				if gi, isCol := expr.ColumnIndex(g); isCol && gi == idx {
					found = true
				}
			}
			if !found {
				return 0, false
			}
			grouped = true
			p = n.Child
		default:
			return 0, false
		}
	}
	return idx, grouped
}

// LookupSource returns, for the right side p of an index join, the table
// scan it reads and the filters above the scan, and base, the node of p
// whose rows those are (the top of the chain of filters): p itself, or
// the input of the Aggregate and Projections above it (groupLookup).
// scan is nil when p is not such a plan.
func LookupSource(p Plan) (scan *Scan, conds []expr.Expr, base Plan) {
	for {
		if s, c := BaseScan(p); s != nil {
			return s, c, p
		}
		switch n := p.(type) {
		case *Projection:
			p = n.Child
		case *Aggregate:
			p = n.Child
		default:
			return nil, nil, nil
		}
	}
}

// hasStraightJoin reports whether the inner-join tree that flatten walks
// has a STRAIGHT_JOIN: MySQL then reads its left side before its right,
// and the whole join keeps the FROM order.
func hasStraightJoin(n ast.ResultSetNode) bool {
	j, ok := n.(*ast.Join)
	if !ok || j == nil {
		return false
	}
	if j.Right == nil {
		return hasStraightJoin(j.Left)
	}
	if j.StraightJoin {
		return true
	}
	if j.Tp == ast.CrossJoin && !j.NaturalJoin && len(j.Using) == 0 {
		return hasStraightJoin(j.Left) || hasStraightJoin(j.Right)
	}
	return false
}
