package plan

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Cost-based join order, when every table of a flattened inner join has
// statistics (ANALYZE TABLE; Builder.Stats). Without them buildFrom keeps
// the rank rules of joinorder.go, so plans do not change until a table is
// analyzed.
//
// Estimates (System R's, with the table's own counts):
//   - a table access: its rows times the selectivity of its own conditions:
//     col = const 1/NDV(col), col IN (n values) n/NDV, col <> const
//     1 - 1/NDV, IS [NOT] NULL from the NULL count; the ranges of one
//     column with constant bounds (<, >, <=, >=, BETWEEN) are intersected
//     and take their share of the column's [min, max] (numbers, dates and
//     times), else 1/3 (BETWEEN 1/4); LIKE 1/10, AND a product, OR
//     s1+s2-s1*s2, anything else 1/2;
//   - a join: |L| * |R| / max(NDV(L.k), NDV(R.k)) for each equality of two
//     columns, 1/max(rows) for an equality of expressions, 1/3 for any other
//     condition between the tables.
//
// The order is the left-deep one of least cost (every order, by dynamic
// programming over the sets of tables, up to dpMaxTables tables; greedy
// past that), where a step costs what it reads and what it produces:
// a table read whole for a hash join costs scanCost per stored row (the
// filter runs next to the data) plus its filtered rows; a table reached
// through an index (the same rules as reachRank: its primary key or a
// unique index, or an index prefix when the first table has conditions of
// its own) costs lookupCost per key and per row fetched; a join costs the
// rows of both inputs and its result. Tables joined by no condition come
// after the others, as without statistics.
//
// Then each hash join builds its smaller input (buildFrom): the plan's
// right input is the one built, so when the new table is estimated to
// have more rows than the tables joined so far, the two swap.

const (
	dpMaxTables = 8
	scanCost    = 0.5
	lookupCost  = 2.0
	defaultSel  = 0.5
	rangeSel    = 1.0 / 3
	betweenSel  = 0.25
	likeSel     = 0.1
	otherJoin   = 1.0 / 3
)

// estimates are the cardinalities of the leaves of one flattened join.
type estimates struct {
	raw   []float64 // stored rows of each leaf's table
	rows  []float64 // rows after the leaf's own conditions
	edges []joinEdge
}

// joinEdge is a condition between the leaves of mask with selectivity sel.
type joinEdge struct {
	mask uint64
	sel  float64
}

// leafStats returns the statistics of a base-table leaf, or nil.
func (b *Builder) leafStats(l *leaf) *catalog.TableStats {
	if b.Stats == nil || l.scan == nil {
		return nil
	}
	return b.Stats.Table(l.scan.Table.ID)
}

// newEstimates returns the estimates of the leaves, or nil unless every
// leaf is a table with statistics (and there are at most 64).
func (b *Builder) newEstimates(leaves []*leaf, mine [][]ast.ExprNode, extra []int, conds []joinCond) *estimates {
	if b.Stats == nil || len(leaves) < 2 || len(leaves) > 64 {
		return nil
	}
	est := &estimates{raw: make([]float64, len(leaves)), rows: make([]float64, len(leaves))}
	for i, l := range leaves {
		ts := b.leafStats(l)
		if ts == nil {
			return nil
		}
		raw := math.Max(1, float64(ts.Rows))
		sel := b.conjSel(mine[i], l, ts)
		for range extra[i] {
			sel *= defaultSel
		}
		est.raw[i] = raw
		est.rows[i] = math.Max(1, raw*sel)
	}
	for _, c := range conds {
		var mask uint64
		for i, u := range c.used {
			if u {
				mask |= 1 << i
			}
		}
		if bits.OnesCount64(mask) < 2 {
			continue
		}
		sel := otherJoin
		if len(c.eqs) > 0 {
			// An equality: the larger NDV of its column sides, else
			// the larger table it reads (a key meeting its foreign key).
			ndv := 0.0
			for _, e := range c.eqs {
				if e.col >= 0 {
					ndv = math.Max(ndv, b.columnNDV(leaves[e.leaf], e.col))
				}
			}
			if ndv == 0 {
				for i, u := range c.used {
					if u {
						ndv = math.Max(ndv, est.raw[i])
					}
				}
			}
			sel = 1 / math.Max(1, ndv)
		}
		est.edges = append(est.edges, joinEdge{mask: mask, sel: sel})
	}
	return est
}

// columnNDV is the number of distinct values of column off of a leaf's
// table (0: unknown).
func (b *Builder) columnNDV(l *leaf, off int) float64 {
	ts := b.leafStats(l)
	if ts == nil || off >= len(l.scan.Table.Columns) {
		return 0
	}
	cs := ts.Column(l.scan.Table.Columns[off].ID)
	if cs == nil {
		return 0
	}
	return float64(cs.NDV)
}

// card estimates the rows of the join of the leaves of mask.
func (e *estimates) card(mask uint64) float64 {
	c := 1.0
	for m := mask; m != 0; m &= m - 1 {
		c *= e.rows[bits.TrailingZeros64(m)]
	}
	for _, ed := range e.edges {
		if ed.mask&mask == ed.mask {
			c *= ed.sel
		}
	}
	return math.Max(1, c)
}

// connected reports whether a condition joins leaf j to the leaves of mask.
func (e *estimates) connected(mask uint64, j int) bool {
	for _, ed := range e.edges {
		if ed.mask&(1<<j) != 0 && ed.mask&^(1<<j)&^mask == 0 && ed.mask&mask != 0 {
			return true
		}
	}
	return false
}

// selectivity estimates the fraction of a leaf's rows that satisfy c.
func (b *Builder) selectivity(c ast.ExprNode, l *leaf, ts *catalog.TableStats) float64 {
	rows := math.Max(1, float64(ts.Rows))
	col := func(n ast.ExprNode) *catalog.ColumnStats {
		off, ok := columnOf(n, l.scope)
		if !ok || off >= len(l.scan.Table.Columns) {
			return nil
		}
		return ts.Column(l.scan.Table.Columns[off].ID)
	}
	eq := func(cs *catalog.ColumnStats) float64 {
		if cs == nil || cs.NDV <= 0 {
			return 0.1
		}
		return (1 - float64(cs.Nulls)/rows) / float64(cs.NDV)
	}
	var s float64
	switch x := unparen(c).(type) {
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd:
			s = b.conjSel([]ast.ExprNode{x.L, x.R}, l, ts)
		case opcode.LogicOr:
			a, c := b.selectivity(x.L, l, ts), b.selectivity(x.R, l, ts)
			s = a + c - a*c
		case opcode.EQ, opcode.NullEQ:
			constant := func(n ast.ExprNode) bool { return isConst(n, l.scope) || foldable(n) }
			cs := col(x.L)
			if cs == nil || !constant(x.R) {
				if cs = col(x.R); cs == nil || !constant(x.L) {
					cs = nil
				}
			}
			s = eq(cs)
		case opcode.NE:
			s = 1 - eq(col(x.L))
			if cs := col(x.R); cs != nil {
				s = 1 - eq(cs)
			}
		case opcode.LT, opcode.LE, opcode.GT, opcode.GE:
			s = rangeSel
		default:
			s = defaultSel
		}
	case *ast.BetweenExpr:
		s = betweenSel
		if x.Not {
			s = 1 - s
		}
	case *ast.PatternInExpr:
		if x.Sel != nil {
			s = defaultSel
			break
		}
		s = math.Min(1, float64(len(x.List))*eq(col(x.Expr)))
		if x.Not {
			s = 1 - s
		}
	case *ast.PatternLikeOrIlikeExpr:
		s = likeSel
		if x.Not {
			s = 1 - s
		}
	case *ast.IsNullExpr:
		s = defaultSel
		if cs := col(x.Expr); cs != nil {
			s = float64(cs.Nulls) / rows
		}
		if x.Not {
			s = 1 - s
		}
	case *ast.UnaryOperationExpr:
		s = defaultSel
		if x.Op == opcode.Not {
			s = 1 - b.selectivity(x.V, l, ts)
		}
	default:
		s = defaultSel
	}
	return math.Min(1, math.Max(s, 1/rows))
}

// firstCost is the cost of reading leaf i first.
func (e *estimates) firstCost(l *leaf, i int) float64 {
	if l.scan != nil && l.scan.Access != TableFullScan {
		return lookupCost * e.rows[i]
	}
	return scanCost*e.raw[i] + e.rows[i]
}

// stepCost is the cost of joining leaf j to the leaves of mask, reached
// with rank reach.
func (e *estimates) stepCost(mask uint64, j, reach int) float64 {
	left, out := e.card(mask), e.card(mask|1<<j)
	switch {
	case reach >= reachIndex:
		fetched := math.Min(e.raw[j], out*e.raw[j]/e.rows[j])
		return lookupCost*(left+fetched) + out
	case reach >= reachHash:
		return scanCost*e.raw[j] + e.rows[j] + left + out
	}
	// A nested loop tests every pair.
	return scanCost*e.raw[j] + left*e.rows[j] + out
}

// costOrder chooses the join order of least estimated cost.
func costOrder(leaves []*leaf, filtered []bool, conds []joinCond, est *estimates) (order []int, driven bool) {
	n := len(leaves)
	bestCost := math.Inf(1)
	for f := range n {
		d := startRank(leaves[f], filtered[f]) >= 2
		var o []int
		var c float64
		if n <= dpMaxTables {
			o, c = dpOrder(leaves, conds, est, f, d)
		} else {
			o, c = greedyOrder(leaves, conds, est, f, d)
		}
		if c < bestCost {
			bestCost, order, driven = c, o, d
		}
	}
	return order, driven
}

// candidates lists the leaves that may follow the leaves of mask: those a
// condition joins to them, or every other leaf when none is.
func (e *estimates) candidates(n int, mask uint64) []int {
	var conn, all []int
	for j := range n {
		if mask&(1<<j) != 0 {
			continue
		}
		all = append(all, j)
		if e.connected(mask, j) {
			conn = append(conn, j)
		}
	}
	if len(conn) > 0 {
		return conn
	}
	return all
}

func joinedOf(n int, mask uint64) []bool {
	joined := make([]bool, n)
	for j := range n {
		joined[j] = mask&(1<<j) != 0
	}
	return joined
}

type dpEntry struct {
	cost  float64
	order []int
}

// dpOrder finds the cheapest left-deep order starting with leaf f.
func dpOrder(leaves []*leaf, conds []joinCond, est *estimates, f int, driven bool) ([]int, float64) {
	n := len(leaves)
	full := uint64(1)<<n - 1
	dp := map[uint64]*dpEntry{1 << f: {cost: est.firstCost(leaves[f], f), order: []int{f}}}
	for mask := uint64(1) << f; mask < full; mask++ {
		cur := dp[mask]
		if cur == nil {
			continue
		}
		joined := joinedOf(n, mask)
		for _, j := range est.candidates(n, mask) {
			reach := reachRank(j, leaves, joined, conds, driven)
			c := cur.cost + est.stepCost(mask, j, reach)
			next := mask | 1<<j
			if old := dp[next]; old == nil || c < old.cost {
				dp[next] = &dpEntry{cost: c, order: append(append(make([]int, 0, n), cur.order...), j)}
			}
		}
	}
	if e := dp[full]; e != nil {
		return e.order, e.cost
	}
	return nil, math.Inf(1)
}

// greedyOrder starts with leaf f and adds, each time, the leaf whose step
// costs least.
func greedyOrder(leaves []*leaf, conds []joinCond, est *estimates, f int, driven bool) ([]int, float64) {
	n := len(leaves)
	mask := uint64(1) << f
	order := []int{f}
	cost := est.firstCost(leaves[f], f)
	for len(order) < n {
		joined := joinedOf(n, mask)
		next, best := -1, math.Inf(1)
		for _, j := range est.candidates(n, mask) {
			if c := est.stepCost(mask, j, reachRank(j, leaves, joined, conds, driven)); c < best {
				next, best = j, c
			}
		}
		cost += best
		mask |= 1 << next
		order = append(order, next)
	}
	return order, cost
}

// estRows formats an estimate for EXPLAIN.
func estRows(v float64) string { return fmt.Sprintf("estRows=%.0f", v) }

// conjSel estimates the selectivity of the conjunction of conds: the
// ranges on each column intersected, times the selectivity of the rest.
func (b *Builder) conjSel(conds []ast.ExprNode, l *leaf, ts *catalog.TableStats) float64 {
	type interval struct{ lo, hi float64 }
	var ivs map[int]*interval
	sel := 1.0
	var walk func(c ast.ExprNode)
	walk = func(c ast.ExprNode) {
		if be, ok := unparen(c).(*ast.BinaryOperationExpr); ok && be.Op == opcode.LogicAnd {
			walk(be.L)
			walk(be.R)
			return
		}
		if off, lo, hi, ok := b.rangeOf(c, l, ts); ok {
			if ivs == nil {
				ivs = map[int]*interval{}
			}
			iv := ivs[off]
			if iv == nil {
				iv = &interval{lo: math.Inf(-1), hi: math.Inf(1)}
				ivs[off] = iv
			}
			iv.lo, iv.hi = math.Max(iv.lo, lo), math.Min(iv.hi, hi)
			return
		}
		sel *= b.selectivity(c, l, ts)
	}
	for _, c := range conds {
		walk(c)
	}
	rows := math.Max(1, float64(ts.Rows))
	for off, iv := range ivs {
		col := l.scan.Table.Columns[off]
		cs := ts.Column(col.ID)
		lo, hi := math.Max(iv.lo, cs.Min), math.Min(iv.hi, cs.Max)
		width, span := hi-lo, cs.Max-cs.Min
		if catalog.IsIntegerType(col.Type) {
			width, span = width+1, span+1
		}
		frac := 0.0
		switch {
		case hi < lo:
		case span <= 0:
			frac = 1
		default:
			frac = math.Min(1, width/span)
			if cs.NDV > 0 {
				// A range holding a value holds at least one of the
				// distinct values.
				frac = math.Max(frac, 1/float64(cs.NDV))
			}
		}
		sel *= frac * (1 - float64(cs.Nulls)/rows)
	}
	return sel
}

// rangeOf recognizes a range with constant bounds on a column that has
// [min, max] statistics: col < v, v >= col, col BETWEEN a AND b ...
func (b *Builder) rangeOf(c ast.ExprNode, l *leaf, ts *catalog.TableStats) (off int, lo, hi float64, ok bool) {
	colStats := func(n ast.ExprNode) (int, *catalog.ColumnStats) {
		off, isCol := columnOf(n, l.scope)
		if !isCol || off >= len(l.scan.Table.Columns) {
			return 0, nil
		}
		cs := ts.Column(l.scan.Table.Columns[off].ID)
		if cs == nil || !cs.HasRange {
			return 0, nil
		}
		return off, cs
	}
	lo, hi = math.Inf(-1), math.Inf(1)
	switch x := unparen(c).(type) {
	case *ast.BinaryOperationExpr:
		op := x.Op
		colN, valN := x.L, x.R
		if _, cs := colStats(colN); cs == nil {
			colN, valN = x.R, x.L
			flipped, known := flip[op]
			if !known {
				return 0, 0, 0, false
			}
			op = flipped
		}
		off, cs := colStats(colN)
		if cs == nil {
			return 0, 0, 0, false
		}
		v, vok := b.constPos(valN, l, off)
		if !vok {
			return 0, 0, 0, false
		}
		switch op {
		case opcode.LT, opcode.LE:
			hi = v
		case opcode.GT, opcode.GE:
			lo = v
		default:
			return 0, 0, 0, false
		}
		return off, lo, hi, true
	case *ast.BetweenExpr:
		if x.Not {
			return 0, 0, 0, false
		}
		off, cs := colStats(x.Expr)
		if cs == nil {
			return 0, 0, 0, false
		}
		a, aok := b.constPos(x.Left, l, off)
		z, zok := b.constPos(x.Right, l, off)
		if !aok || !zok {
			return 0, 0, 0, false
		}
		return off, a, z, true
	}
	return 0, 0, 0, false
}

// constPos evaluates a constant compared with column off of a leaf, as a
// value of the column's type on the linear scale of StatPos.
func (b *Builder) constPos(n ast.ExprNode, l *leaf, off int) (float64, bool) {
	if !foldable(n) {
		return 0, false
	}
	e, err := expr.Compile(n, l.scope)
	if err != nil {
		return 0, false
	}
	d, err := e.Eval(&expr.EvalContext{Now: time.Now()}, nil)
	if err != nil || d.IsNull() {
		return 0, false
	}
	if d, err = types.Convert(d, l.scan.Table.Columns[off].Type); err != nil {
		return 0, false
	}
	return StatPos(d)
}

// foldable reports whether n can be evaluated when the statement is
// planned, for an estimate: it reads no column, subquery, variable or ?
// parameter (functions are allowed: DATE '1994-01-01' + INTERVAL 1 YEAR).
func foldable(n ast.ExprNode) bool {
	v := &foldVisitor{ok: true}
	n.Accept(v)
	return v.ok
}

type foldVisitor struct{ ok bool }

func (v *foldVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.ColumnNameExpr, *ast.SubqueryExpr, *ast.AggregateFuncExpr, *ast.VariableExpr, *ast.ExistsSubqueryExpr,
		*ast.DefaultExpr, *ast.ValuesExpr, *ast.WindowFuncExpr, ast.ParamMarkerExpr:
		v.ok = false
	}
	return n, !v.ok
}

func (v *foldVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, v.ok }

// StatPos places a value on the linear scale of catalog.ColumnStats' Min
// and Max: numbers as they are, dates and times in seconds. Other values
// have none (ok false).
func StatPos(d types.Datum) (float64, bool) {
	switch d.Kind() {
	case types.KindInt64:
		return float64(d.Int()), true
	case types.KindUint64:
		return float64(d.Uint()), true
	case types.KindFloat64:
		return d.Float(), true
	case types.KindDecimal:
		return d.Decimal().Float64(), true
	case types.KindTime:
		t := d.Time()
		if t.IsZero() {
			return 0, false
		}
		return float64(t.GoTime(time.UTC).Unix()) + float64(t.Microsecond())/1e6, true
	}
	return 0, false
}
