package plan

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
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
//     s1+s2-s1*s2; x [NOT] IN (uncorrelated subquery) the share of the
//     rows the subquery reads that it returns (System R's rule, from the
//     estimates of its plan: a GROUP BY returns the product of its
//     columns' NDV, a HAVING comparison 1/3); anything else 1/2;
//   - a join: |L| * |R| / max(NDV(L.k), NDV(R.k)) for each equality of two
//     columns, 1/max(rows) for an equality of expressions, 1/3 for any other
//     condition between the tables. The equalities of one equivalence class
//     (eqclass.go) count once per table: the tables of a class joined so
//     far, with NDVs d1 >= d2 >= ... >= dk in the class's columns, divide
//     the product of their rows by d1 * ... * d(k-1) (every NDV but the
//     smallest), however many equalities of the class the query states or
//     implies: c_nationkey = s_nationkey AND s_nationkey = n_nationkey
//     AND c_nationkey = n_nationkey select like the first two.
//
// The order is the left-deep one of least cost (every order, by dynamic
// programming over the sets of tables, up to dpMaxTables tables; greedy
// past that), where a step costs what it reads and what it produces:
// a table read whole for a hash join costs scanCost per stored row (the
// filter runs next to the data) plus its filtered rows, and the join the
// rows of both inputs and its result. A table an index can reach (the same
// rules as reachRank: its primary key or a unique index, or an index
// prefix when the first table has conditions of its own) is an index join
// only when that costs less: pointCost per key through the integer
// primary key (batched point reads), rangeCost per key through any other
// index (an index range each, a batch's ranges read together in the
// coprocessor: exec/indexjoin.go), fetchCost per row fetched, plus its
// result. The constants are in units of a row passed between operators
// (about 0.6 us), from EXPLAIN ANALYZE and a CPU profile of TPC-H Q5 at
// scale factor 0.1: a lineitem read by a full scan that is not pushed down
// about 0.9 us (half a unit for the stored row, one for the row passed
// on), a point read through the primary key about 1 us (1.5 us for a
// lineitem, decoded), an index range about 3 us (it was 15 us when the
// ranges were read one after the other). Tables joined by no condition
// come after the others, as without statistics.
//
// Then each hash join builds its smaller input (buildFrom): the plan's
// right input is the one built, so when the new table is estimated to
// have more rows than the tables joined so far, the two swap.

const (
	dpMaxTables = 8
	scanCost    = 0.5
	lookupCost  = 2.0
	pointCost   = 2.0
	rangeCost   = 5.0
	fetchCost   = 2.0
	defaultSel  = 0.5
	rangeSel    = 1.0 / 3
	betweenSel  = 0.25
	likeSel     = 0.1
	otherJoin   = 1.0 / 3
)

// estimates are the cardinalities of the leaves of one flattened join.
type estimates struct {
	raw     []float64 // stored rows of each leaf's table
	rows    []float64 // rows after the leaf's own conditions
	edges   []joinEdge
	classes [][]classNDV // the columns of each equivalence class
}

// classNDV is the column of leaf in an equivalence class and its number
// of distinct values (the table's rows when unknown).
type classNDV struct {
	leaf int
	ndv  float64
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
func (b *Builder) newEstimates(leaves []*leaf, mine [][]ast.ExprNode, extra [][]float64, conds []joinCond, classes []*eqClass) *estimates {
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
		for _, s := range extra[i] {
			sel *= s
		}
		est.raw[i] = raw
		est.rows[i] = math.Max(1, raw*sel)
	}
	for _, cl := range classes {
		var cols []classNDV
		for _, m := range cl.members {
			ndv := b.columnNDV(leaves[m.leaf], m.col)
			if ndv <= 0 {
				ndv = est.raw[m.leaf]
			}
			cols = append(cols, classNDV{leaf: m.leaf, ndv: ndv})
		}
		est.classes = append(est.classes, cols)
	}
	for _, c := range conds {
		if c.class >= 0 {
			continue // counted by its class
		}
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
	var ndvs []float64
	for _, cl := range e.classes {
		ndvs = ndvs[:0]
		for _, m := range cl {
			if mask&(1<<m.leaf) != 0 {
				ndvs = append(ndvs, m.ndv)
			}
		}
		if len(ndvs) < 2 {
			continue
		}
		// Every NDV but the smallest.
		slices.Sort(ndvs)
		for _, d := range ndvs[1:] {
			c /= math.Max(1, d)
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
	for _, cl := range e.classes {
		in, other := false, false
		for _, m := range cl {
			in = in || m.leaf == j
			other = other || mask&(1<<m.leaf) != 0
		}
		if in && other {
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
// with rank reach (handle: through its integer primary key), and whether
// the join is a hash join. A leaf an index
// can reach (reach >= reachIndex) is joined through the index when that
// costs less than reading it whole for a hash join: each left row looks
// its key up (a point read through the primary key or a whole unique
// index, an index range through a prefix of another) and fetches the
// rows that match it.
func (e *estimates) stepCost(mask uint64, j, reach int, handle bool) (cost float64, hash bool) {
	left, out := e.card(mask), e.card(mask|1<<j)
	hashCost := scanCost*e.raw[j] + e.rows[j] + left + out
	switch {
	case reach >= reachIndex:
		perKey, fetched := rangeCost, out*e.raw[j]/e.rows[j]
		if reach == reachUnique {
			// At most one row per key, whatever else the join tests
			// once it is fetched; by the integer primary key, a batch
			// of point reads.
			fetched = left
			if handle {
				perKey = pointCost
			}
		}
		if c := perKey*left + fetchCost*fetched + out; c <= hashCost {
			return c, false
		}
		return hashCost, true
	case reach >= reachHash:
		return hashCost, true
	}
	// A nested loop tests every pair.
	return scanCost*e.raw[j] + left*e.rows[j] + out, false
}

// costOrder chooses the join order of least estimated cost, and the
// leaves to join by a hash join although an index could reach them (bits
// of hashed).
func costOrder(leaves []*leaf, filtered []bool, conds []joinCond, est *estimates) (order []int, driven bool, hashed uint64) {
	n := len(leaves)
	bestCost := math.Inf(1)
	for f := range n {
		d := startRank(leaves[f], filtered[f]) >= 2
		var best dpEntry
		if n <= dpMaxTables {
			best = dpOrder(leaves, conds, est, f, d)
		} else {
			best = greedyOrder(leaves, conds, est, f, d)
		}
		if best.cost < bestCost {
			bestCost, order, driven, hashed = best.cost, best.order, d, best.hashed
		}
	}
	return order, driven, hashed
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

// dpEntry is the cheapest order found of a set of leaves.
type dpEntry struct {
	cost   float64
	order  []int
	hashed uint64 // leaves an index could reach, joined by a hash join
}

// extend returns the entry e followed by leaf j, reached with rank reach.
func (e *dpEntry) extend(leaves []*leaf, conds []joinCond, est *estimates, mask uint64, j int, driven bool) dpEntry {
	joined := joinedOf(len(leaves), mask)
	reach := reachRank(j, leaves, joined, conds, driven)
	c, hash := est.stepCost(mask, j, reach, reach == reachUnique && byHandle(j, leaves, joined, conds))
	next := dpEntry{cost: e.cost + c, order: append(append(make([]int, 0, len(e.order)+1), e.order...), j), hashed: e.hashed}
	if hash && reach >= reachIndex {
		next.hashed |= 1 << j
	}
	return next
}

// dpOrder finds the cheapest left-deep order starting with leaf f.
func dpOrder(leaves []*leaf, conds []joinCond, est *estimates, f int, driven bool) dpEntry {
	n := len(leaves)
	full := uint64(1)<<n - 1
	dp := map[uint64]*dpEntry{1 << f: {cost: est.firstCost(leaves[f], f), order: []int{f}}}
	for mask := uint64(1) << f; mask < full; mask++ {
		cur := dp[mask]
		if cur == nil {
			continue
		}
		for _, j := range est.candidates(n, mask) {
			next := cur.extend(leaves, conds, est, mask, j, driven)
			if old := dp[mask|1<<j]; old == nil || next.cost < old.cost {
				dp[mask|1<<j] = &next
			}
		}
	}
	if e := dp[full]; e != nil {
		return *e
	}
	return dpEntry{cost: math.Inf(1)}
}

// greedyOrder starts with leaf f and adds, each time, the leaf whose step
// costs least.
func greedyOrder(leaves []*leaf, conds []joinCond, est *estimates, f int, driven bool) dpEntry {
	n := len(leaves)
	mask := uint64(1) << f
	cur := dpEntry{cost: est.firstCost(leaves[f], f), order: []int{f}}
	for len(cur.order) < n {
		var best dpEntry
		next := -1
		for _, j := range est.candidates(n, mask) {
			if e := cur.extend(leaves, conds, est, mask, j, driven); next < 0 || e.cost < best.cost {
				next, best = j, e
			}
		}
		cur = best
		mask |= 1 << next
	}
	return cur
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

// annotateLeaf sets the estimated rows of a base-table leaf's scan and of
// the filters of its own conditions (mine, then subq filters with a
// subquery) when its table has statistics, for EXPLAIN: the scan's are the
// rows its access path reads (the table's for a full scan; for a range or
// an index lookup, the share of the conditions on the columns it seeks),
// each filter's the rows left after it and the conditions below it, the
// estimates the join order uses.
func (b *Builder) annotateLeaf(l *leaf, mine []ast.ExprNode, subq []float64) {
	ts := b.leafStats(l)
	if ts == nil {
		return
	}
	s := l.scan
	raw := math.Max(1, float64(ts.Rows))
	switch {
	case s.Access == PointGet:
		s.EstRows = 1
	case s.Access == BatchPointGet:
		s.EstRows = math.Min(raw, float64(len(s.Handles)))
	case s.Access == IndexLookup && s.Points:
		s.EstRows = math.Min(raw, float64(len(s.Ranges)))
	case s.Access == TableRangeScan || s.Access == IndexLookup:
		seek := map[int]bool{}
		if s.Access == TableRangeScan {
			seek[s.Table.HandleOffset] = true
		} else {
			for _, r := range s.Ranges {
				n := len(r.Eq)
				if r.Low.Value != nil || r.High.Value != nil {
					n++
				}
				for _, off := range s.Index.Columns[:min(n, len(s.Index.Columns))] {
					seek[off] = true
				}
			}
		}
		var on []ast.ExprNode
		for _, c := range mine {
			if offs, ok := columnsOf(c, l.scope); ok && len(offs) > 0 && allIn(offs, seek) {
				on = append(on, c)
			}
		}
		s.EstRows = math.Max(1, raw*b.conjSel(on, l, ts))
	default:
		s.EstRows = raw
	}
	var chain []*Filter // innermost first
	p := l.plan
	for {
		f, ok := p.(*Filter)
		if !ok {
			break
		}
		chain = append([]*Filter{f}, chain...)
		p = f.Child
	}
	if p != Plan(s) || len(chain) != len(mine)+len(subq) {
		return
	}
	est := s.EstRows
	for k, f := range chain {
		if k < len(mine) {
			est = math.Min(est, math.Max(1, raw*b.conjSel(mine[:k+1], l, ts)))
		} else {
			est = math.Max(1, est*subq[k-len(mine)])
		}
		f.EstRows = est
	}
}

// clearEstimates removes the estimates of a leaf read by an index join:
// it is read a key at a time, not as a whole.
func clearEstimates(p Plan) {
	for {
		switch n := p.(type) {
		case *Filter:
			n.EstRows = 0
			p = n.Child
			continue
		case *Scan:
			n.EstRows = 0
		}
		return
	}
}

// columnsOf lists the column offsets of a leaf that n reads; ok is false
// when it reads anything else that is not a constant (a subquery, a
// column of another table).
func columnsOf(n ast.ExprNode, sc *scope) ([]int, bool) {
	v := &colVisitor{sc: sc, ok: true}
	n.Accept(v)
	return v.offs, v.ok
}

type colVisitor struct {
	sc   *scope
	offs []int
	ok   bool
}

func (v *colVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.ColumnNameExpr:
		off, ok := columnOf(x, v.sc)
		if !ok {
			v.ok = false
		} else {
			v.offs = append(v.offs, off)
		}
		return n, true
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr:
		v.ok = false
	}
	return n, !v.ok
}

func (v *colVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, v.ok }

func allIn(offs []int, set map[int]bool) bool {
	for _, o := range offs {
		if !set[o] {
			return false
		}
	}
	return true
}

// subquerySel estimates the selectivity of a table's own condition with
// uncorrelated subqueries (subs, the ones it made). For x [NOT] IN
// (subquery) it is System R's: the share of the rows the subquery reads
// that it returns (its rows over the product of its tables' rows), when
// every table it reads has statistics; else 1/2.
func (b *Builder) subquerySel(n ast.ExprNode, subs []*Subquery) float64 {
	x, ok := unparen(n).(*ast.PatternInExpr)
	if !ok || x.Sel == nil || len(subs) != 1 || subs[0].Plan == nil {
		return defaultSel
	}
	rows, ok := b.planRows(subs[0].Plan)
	read, ok2 := b.readRows(subs[0].Plan)
	if !ok || !ok2 {
		return defaultSel
	}
	s := math.Min(1, rows/read)
	if x.Not {
		s = 1 - s
	}
	return math.Max(s, 1/read)
}

// planRows estimates the rows a plan returns from the estimates of its
// scans, filters and joins (ok false: unknown).
func (b *Builder) planRows(p Plan) (float64, bool) {
	switch n := p.(type) {
	case *Scan:
		return n.EstRows, n.EstRows > 0
	case *Join:
		return n.EstRows, n.EstRows > 0 && n.Type == InnerJoin
	case *Filter:
		if n.EstRows > 0 {
			return n.EstRows, true
		}
		r, ok := b.planRows(n.Child)
		s := defaultSel
		if c, isCmp := n.Cond.(*expr.Comparison); isCmp && c.Op >= expr.CmpLT && c.Op <= expr.CmpGE {
			s = rangeSel
		}
		return math.Max(1, r*s), ok
	case *CopRead:
		r, ok := b.planRows(n.Fallback)
		if n.Limit > 0 {
			r = math.Min(r, float64(n.Limit))
		}
		return r, ok
	case *Projection:
		return b.planRows(n.Child)
	case *Sort:
		return b.planRows(n.Child)
	case *Distinct:
		return b.planRows(n.Child)
	case *Aggregate:
		r, ok := b.planRows(n.Child)
		if len(n.GroupBy) == 0 {
			return 1, ok
		}
		return math.Min(r, b.groups(n)), ok
	}
	return 0, false
}

// groups estimates the groups of an aggregation: the product of the
// distinct values of its GROUP BY columns when it reads one table with
// statistics, else no bound.
func (b *Builder) groups(a *Aggregate) float64 {
	scan, _ := BaseScan(a.Child)
	if scan == nil || b.Stats == nil {
		return math.Inf(1)
	}
	ts := b.Stats.Table(scan.Table.ID)
	if ts == nil {
		return math.Inf(1)
	}
	g := 1.0
	for _, e := range a.GroupBy {
		off, ok := expr.ColumnIndex(e)
		if !ok || off >= len(scan.Table.Columns) {
			return math.Inf(1)
		}
		cs := ts.Column(scan.Table.Columns[off].ID)
		if cs == nil || cs.NDV <= 0 {
			return math.Inf(1)
		}
		g *= float64(cs.NDV)
	}
	return g
}

// readRows is the product of the rows of the tables a plan reads (ok
// false: one has no statistics).
func (b *Builder) readRows(p Plan) (float64, bool) {
	if c, isCop := p.(*CopRead); isCop {
		p = c.Scan
	}
	if s, isScan := p.(*Scan); isScan {
		if b.Stats == nil {
			return 0, false
		}
		ts := b.Stats.Table(s.Table.ID)
		if ts == nil {
			return 0, false
		}
		return math.Max(1, float64(ts.Rows)), true
	}
	r := 1.0
	for _, c := range p.Children() {
		cr, ok := b.readRows(c)
		if !ok {
			return 0, false
		}
		r *= cr
	}
	return r, true
}
