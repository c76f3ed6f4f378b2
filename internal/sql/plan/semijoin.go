package plan

import (
	"math"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"github.com/strata-db/strata/internal/sql/expr"
)

// A correlated EXISTS or NOT EXISTS conjunct of WHERE (TPC-H Q4, Q21 and
// Q22's shape):
//
//	WHERE ... AND [NOT] EXISTS (SELECT ... FROM l WHERE l.k = o.k AND
//	                            l.s <> o.s AND <c>)
//
// becomes a hash semi join (EXISTS) or anti join (NOT EXISTS) of the outer
// rows with the subquery's rows that pass its own conditions <c>, keyed on
// the correlation equalities (l.k = o.k); the other conditions that read
// the outer row (l.s <> o.s) are tested on each candidate pair. An outer
// row is kept once when some candidate passes (semi) or none does (anti):
// EXISTS is two-valued, so a NULL key (no candidate) is false under
// EXISTS and true under NOT EXISTS, as the per-row subquery answers.
//
// It is equivalent only when all of these hold, and is not made otherwise:
//   - the EXISTS is a conjunct of WHERE (unknown and false both drop the
//     row), of a query block that is not itself a subquery's (whose rows
//     would be rebuilt per outer row), in a read-only query;
//   - the subquery is a plain SELECT over base tables without GROUP BY,
//     HAVING, aggregates, ORDER BY, LIMIT, window functions, locking,
//     nested subqueries or volatile functions: it returns a row exactly
//     when a row of its FROM passes its WHERE (its select list is not
//     evaluated, but it has been compiled, so a wrong one still fails);
//   - its WHERE reads no column beyond the outer block, and has at least
//     one conjunct inner column = outer column of one type (and
//     collation), sameKeyType's rule, so that the hash key matches
//     exactly the pairs = would; an equality of other types is a residual
//     condition like any other;
//   - every name the residual conditions read resolves, among the outer
//     row followed by the inner row, to the column SQL's scoping gives it
//     (no inner name hiding an outer one).
//
// x NOT IN (SELECT ...) is not rewritten: a NULL on either side makes it
// unknown, not true, which an anti join does not model.
//
// It is chosen by cost, only with table statistics. The per-row path runs
// the subquery once per outer row (memoized per distinct value: subquery.go)
// and, when the correlation reaches an index, reads the rows of one key
// (an EXISTS stops at the first that passes: existsHint); the hash join
// reads the inner table once, filtered next to the data, hashes the rows
// that pass, and probes it once per outer row. semiRunCost is a run's
// fixed cost (building and starting its plan), in the units of cost.go:
// with EXPLAIN ANALYZE at TPC-H scale factor 0.1, a run through an index
// took 7 us (Q22, orders by o_custkey, no row) to 15-19 us (Q4 and Q21,
// lineitem by its primary key's l_orderkey, a row or three), about 12 to
// 30 units with the index range and the rows; hashing took 0.3 us per
// stored row read and 0.35 us per row hashed (Q4: 600,000 lineitems,
// 379,000 hashed). At that scale the per-row path wins Q4, Q21 and Q22
// (a few thousand outer rows, an index on the key); the hash join wins
// where the outer rows number more than about a sixteenth of the inner
// table's, or no index reaches the inner rows (a run reads them all).
const semiRunCost = 15

// semiJoin returns the semi or anti join of the outer plan p (of scope sc)
// with the subquery of conjunct c when c qualifies (see above) and the
// estimates say it pays, or nil. sq is the per-row Subquery c compiled to,
// whose plan is the alternative.
func (b *Builder) semiJoin(c ast.ExprNode, p Plan, sc *scope, sq *Subquery) *Join {
	if b.Stats == nil || len(b.ctes) > 0 || sq == nil || sq.Kind != ExistsSubquery || !sq.Correlated || sq.reachesOut || sq.volatile {
		return nil
	}
	outerRows := planEst(p)
	if outerRows <= 0 {
		return nil
	}
	ex, not := existsOf(c)
	if ex == nil {
		return nil
	}
	sub, ok := ex.Sel.(*ast.SubqueryExpr)
	if !ok {
		return nil
	}
	sel, ok := sub.Query.(*ast.SelectStmt)
	if !ok || sel.Kind != ast.SelectStmtKindSelect || sel.With != nil || sel.From == nil || sel.GroupBy != nil ||
		sel.Having != nil || sel.OrderBy != nil || sel.Limit != nil || sel.LockInfo != nil || sel.WindowSpecs != nil ||
		(sel.SelectStmtOpts != nil && sel.SelectStmtOpts.StraightJoin) || !baseTablesOnly(sel.From.TableRefs) || hasSubquery(sel) {
		return nil
	}
	ac := &aggCollector{seen: map[string]bool{}}
	sel.Accept(ac)
	vv := &volatileVisitor{}
	sel.Accept(vv)
	if len(ac.list) > 0 || vv.found {
		return nil
	}

	// The inner block's names, from a plan of its FROM alone.
	probe := newScope(b)
	if _, _, err := b.buildFrom(sel.From.TableRefs, probe, nil, false); err != nil {
		return nil
	}
	width := len(p.Columns())
	comb := b.pairScope(sc, probe, width)
	var kept, residual []ast.ExprNode
	var innerKeys, outerKeys []ast.ExprNode
	read := map[int]bool{} // the inner columns keys and residual read
	for _, w := range splitAnd(sel.Where, nil) {
		inner, outer, ok := sides(w, probe, sc, comb, width, read)
		switch {
		case !ok:
			return nil
		case !outer:
			kept = append(kept, w)
		case !inner:
			// Reads the outer row only: a condition on it.
			residual = append(residual, w)
		default:
			if in, out, ok := b.correlationKey(w, probe, sc); ok {
				innerKeys, outerKeys = append(innerKeys, in), append(outerKeys, out)
				continue
			}
			residual = append(residual, w)
		}
	}
	if len(innerKeys) == 0 {
		return nil
	}

	// The inner rows: its FROM with its own conditions.
	in := newScope(b)
	right, rest, err := b.buildFrom(sel.From.TableRefs, in, kept, false)
	if err != nil {
		return nil
	}
	for _, r := range rest {
		e, err := expr.Compile(r, in)
		if err != nil {
			return nil
		}
		right = &Filter{base: base{right.Columns()}, Child: right, Cond: e}
	}
	if len(in.cols) != len(probe.cols) {
		return nil
	}
	innerRows, ok := b.planRows(right)
	innerRaw := b.innerRows(sel.From.TableRefs)
	if !ok || innerRaw <= 0 {
		return nil
	}
	hashCost := scanCost*innerRaw + innerRows + outerRows
	perRow := outerRows * b.perRunCost(sq.Plan, innerRaw, innerRows)
	if ij, cost := b.indexSemiJoin(p, sc, right, in, not, innerKeys, outerKeys, residual, read, outerRows, innerRaw); ij != nil && cost < hashCost && cost < perRow {
		clearEstimates(ij.Right) // right is read per key, not whole
		return ij
	}
	if hashCost >= perRow {
		return nil
	}

	// The hash table holds the inner columns the keys and the residual
	// conditions read, not whole rows.
	proj := &Projection{Child: right}
	narrow := &scope{b: b, values: -1}
	comb = &scope{b: b, values: -1}
	comb.cols = append(comb.cols, sc.cols...)
	for _, col := range in.cols {
		if !read[col.idx] {
			continue
		}
		proj.Exprs = append(proj.Exprs, expr.NewColumn(col.idx, col.col.Type, col.col.Name))
		proj.cols = append(proj.cols, col.col)
		col.idx = len(narrow.cols)
		narrow.cols = append(narrow.cols, col)
		col.idx += width
		comb.cols = append(comb.cols, col)
	}
	jn := newSemiJoin(p, proj, not, sc, narrow, comb, innerKeys, outerKeys, residual)
	if jn == nil {
		return nil
	}
	// EXISTS selectivity unknown: half the outer rows, as for any other
	// condition (cost.go's defaultSel).
	jn.EstRows = math.Max(1, outerRows*defaultSel)
	return jn
}

// indexSemiJoin returns the semi or anti join of the outer plan p with
// right, the inner table's scan under its own conditions (scope in), as
// an index join: batches of outer rows look their keys up together
// through the inner table's integer primary key or an index whose leading
// columns are correlation keys (exec's indexJoinExec, joinExec's lookup),
// one request per region for a batch's index ranges instead of one run of
// the subquery per outer row. It returns nil when right is not a single
// table or no index reaches it, else the join and its estimated cost:
// per outer row a point read (the integer primary key) or an index range,
// and the inner rows of a key fetched (the table's rows over the number
// of distinct values of its first lookup column), or only their index
// entries read when the index holds every inner column the join reads
// (read: the keys' and the residual conditions', no filter of the inner
// table's own) and the lookup takes them from the entries
// (coveringIndex; NOT EXISTS (SELECT * FROM orders WHERE o_custkey =
// c_custkey), TPC-H Q22).
func (b *Builder) indexSemiJoin(p Plan, sc *scope, right Plan, in *scope, not bool,
	innerKeys, outerKeys, residual []ast.ExprNode, read map[int]bool, outerRows, innerRaw float64) (*Join, float64) {
	scan, _ := BaseScan(right)
	if scan == nil || scan.Access != TableFullScan {
		return nil, 0
	}
	// Cond reads the outer row followed by the whole inner row.
	comb := b.pairScope(sc, in, len(p.Columns()))
	jn := newSemiJoin(p, right, not, sc, in, comb, innerKeys, outerKeys, residual)
	if jn == nil {
		return nil, 0
	}
	jn.Lookup = lookupKey(jn, scan)
	perKey, perKeyRows := rangeCost, 1.0
	if jn.Lookup >= 0 {
		perKey = pointCost
	} else {
		indexLookup(jn, scan, true)
		if jn.Lookup < 0 {
			return nil, 0
		}
		ndv := 0.0
		for _, k := range jn.LookupKeys {
			if off, ok := expr.ColumnIndex(jn.RightKey[k]); ok {
				ndv = math.Max(ndv, b.columnNDV(&leaf{scan: scan}, off))
			}
		}
		if ndv > 0 {
			perKeyRows = math.Max(1, innerRaw/ndv)
		} else {
			perKeyRows = math.Max(1, innerRaw/math.Max(1, outerRows))
		}
	}
	perRow := fetchCost
	if right == Plan(scan) && jn.LookupIndex != nil {
		var cols []int
		for off, r := range read {
			if r {
				cols = append(cols, off)
			}
		}
		if indexHolds(scan.Table, jn.LookupIndex, cols) {
			perRow = scanCost
		}
	}
	jn.EstRows = math.Max(1, outerRows*defaultSel)
	return jn, outerRows*(perKey+perRow*perKeyRows) + outerRows
}

// pairScope returns the names of an outer row (sc, width columns)
// followed by an inner one (in).
func (b *Builder) pairScope(sc, in *scope, width int) *scope {
	comb := &scope{b: b, values: -1}
	comb.cols = append(comb.cols, sc.cols...)
	for _, col := range in.cols {
		col.idx += width
		comb.cols = append(comb.cols, col)
	}
	return comb
}

// newSemiJoin returns the semi (anti, when not) join of left with right
// on the correlation keys (the outer ones compiled in outer, the inner
// ones in inner, right's scope) and the residual conditions (compiled in
// comb, the outer row followed by right's row), or nil when one does not
// compile.
func newSemiJoin(left, right Plan, not bool, outer, inner, comb *scope, innerKeys, outerKeys, residual []ast.ExprNode) *Join {
	jn := &Join{Left: left, Right: right, Type: SemiJoin, Lookup: -1}
	if not {
		jn.Type = AntiJoin
	}
	for i := range innerKeys {
		lk, err := expr.Compile(outerKeys[i], outer)
		if err != nil {
			return nil
		}
		rk, err := expr.Compile(innerKeys[i], inner)
		if err != nil {
			return nil
		}
		jn.LeftKeys, jn.RightKey = append(jn.LeftKeys, lk), append(jn.RightKey, rk)
	}
	for _, r := range residual {
		e, err := expr.Compile(r, comb)
		if err != nil {
			return nil
		}
		if jn.Cond == nil {
			jn.Cond = e
		} else {
			jn.Cond = &andExpr{l: jn.Cond, r: e}
		}
	}
	jn.cols = left.Columns()
	return jn
}

// perRunCost estimates one run of an EXISTS subquery's per-row plan: the
// rows of one key through an index (until one passes its filters), or the
// whole inner input.
func (b *Builder) perRunCost(p Plan, innerRaw, innerRows float64) float64 {
	s := scanBelow(p)
	if s == nil || s.Access == TableFullScan || s.Access == TableRangeScan && len(s.Ranges) == 0 {
		return semiRunCost + scanCost*innerRaw + innerRows
	}
	perKey := rangeCost
	if s.Access == PointGet || s.Access == BatchPointGet || s.Points {
		perKey = pointCost
	}
	fetched := 1.0
	if s.EstRows > 0 {
		// The rows read before one passes: one in 1/sel of them.
		fetched = math.Min(s.EstRows, math.Max(1, innerRaw/math.Max(1, innerRows)))
	}
	return semiRunCost + perKey + fetchCost*fetched
}

// existsOf returns the EXISTS of a conjunct [NOT] EXISTS (...), and
// whether it is negated.
func existsOf(c ast.ExprNode) (*ast.ExistsSubqueryExpr, bool) {
	not := false
	for {
		switch x := unparen(c).(type) {
		case *ast.UnaryOperationExpr:
			if x.Op != opcode.Not && x.Op != opcode.Not2 {
				return nil, false
			}
			not = !not
			c = x.V
			continue
		case *ast.ExistsSubqueryExpr:
			return x, not != x.Not
		}
		return nil, false
	}
}

// sides reports whether conjunct w of the subquery's WHERE reads inner
// columns (names the inner scope in resolves) and outer ones (names only
// the outer scope out resolves); ok is false when a name resolves nowhere,
// further out, ambiguously, or, among comb (the outer row then the inner
// row from offset width), to another column than SQL's scoping gives it.
// The inner columns of a conjunct that reads the outer row are added to
// read.
func sides(w ast.ExprNode, in, out, comb *scope, width int, read map[int]bool) (inner, outer, ok bool) {
	v := &sideVisitor{in: in, out: out, comb: comb, width: width, ok: true}
	w.Accept(v)
	if v.outer {
		for _, i := range v.read {
			read[i] = true
		}
	}
	return v.inner, v.outer, v.ok
}

type sideVisitor struct {
	in, out, comb *scope
	width         int
	inner, outer  bool
	ok            bool
	read          []int // the inner columns (offsets in in)
}

func (v *sideVisitor) Enter(n ast.Node) (ast.Node, bool) {
	cn, isCol := n.(*ast.ColumnNameExpr)
	if !isCol {
		return n, false
	}
	ic, found, err := v.in.find(cn.Name)
	if err != nil {
		v.ok = false
		return n, true
	}
	want := ic.idx + v.width
	if found {
		v.inner = true
		v.read = append(v.read, ic.idx)
	} else {
		oc, found, err := v.out.find(cn.Name)
		if err != nil || !found {
			v.ok = false
			return n, true
		}
		v.outer = true
		want = oc.idx
	}
	if cc, found, err := v.comb.find(cn.Name); err != nil || !found || cc.idx != want {
		v.ok = false
	}
	return n, true
}

func (v *sideVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, v.ok }

// correlationKey recognizes inner column = outer column (either order) of
// one type and collation (sameKeyType).
func (b *Builder) correlationKey(w ast.ExprNode, in, out *scope) (inner, outer ast.ExprNode, ok bool) {
	l, r, ok := columnEquality(w)
	if !ok {
		return nil, nil, false
	}
	if _, found, _ := in.find(l.Name); !found {
		l, r = r, l
	}
	ic, found, err := in.find(l.Name)
	if err != nil || !found {
		return nil, nil, false
	}
	if _, found, _ := in.find(r.Name); found {
		return nil, nil, false
	}
	oc, found, err := out.find(r.Name)
	if err != nil || !found || !sameKeyType(ic.col.Type, oc.col.Type) {
		return nil, nil, false
	}
	return l, r, true
}
