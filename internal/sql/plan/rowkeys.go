package plan

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
)

// Row constructors as keys. TPC-C and ORMs look up rows by composite keys
// with (a, b) IN ((?, ?), ...) and (a, b) = (?, ?). The second reads as a
// = ? AND b = ? (rowEqualities); the first is a set of tuples of constants
// over some columns (tupleIn). When the tuples' columns cover a unique
// index (a composite primary key is one), the scan becomes one point
// lookup per tuple, all batched (Scan.Points); on an integer primary key,
// a batch point get of the handles; over a leading part of another index,
// one index range per tuple.

// tupleIn is (cols...) IN (tuples...) with constant tuples.
type tupleIn struct {
	cols   []int // column offsets in the scope, one per tuple element
	tuples [][]ast.ExprNode
}

// tupleIns finds the row IN lists among conds that can drive an access
// path: every row element a bare column of sc, every tuple constant.
func tupleIns(conds []ast.ExprNode, sc *scope) []tupleIn {
	var out []tupleIn
	for _, c := range conds {
		in, ok := unparen(c).(*ast.PatternInExpr)
		if !ok || in.Not || in.Sel != nil || len(in.List) == 0 {
			continue
		}
		elems, ok := expr.RowElems(in.Expr)
		if !ok {
			continue
		}
		t := tupleIn{}
		good := true
		for _, e := range elems {
			idx, isCol := columnOf(e, sc)
			if !isCol {
				good = false
				break
			}
			t.cols = append(t.cols, idx)
		}
		for _, v := range in.List {
			vals, ok := expr.RowElems(v)
			if !good || !ok || len(vals) != len(elems) {
				good = false
				break
			}
			for _, x := range vals {
				if !isConst(x, sc) {
					good = false
				}
			}
			t.tuples = append(t.tuples, vals)
		}
		if good {
			out = append(out, t)
		}
	}
	return out
}

// rowEqualities adds the column equalities of (a, b) = (x, y) conjuncts to
// preds.
func rowEqualities(conds []ast.ExprNode, sc *scope, preds map[int]*colPred) {
	for _, c := range conds {
		be, ok := unparen(c).(*ast.BinaryOperationExpr)
		if !ok || be.Op != opcode.EQ {
			continue
		}
		l, lok := expr.RowElems(be.L)
		r, rok := expr.RowElems(be.R)
		if !lok || !rok || len(l) != len(r) {
			continue
		}
		for i := range l {
			col, val := l[i], r[i]
			if _, isCol := columnOf(col, sc); !isCol {
				col, val = val, col
			}
			idx, isCol := columnOf(col, sc)
			if !isCol || !isConst(val, sc) {
				continue
			}
			if preds[idx] == nil {
				preds[idx] = &colPred{}
			}
			preds[idx].eq = val
		}
	}
}

// tupleAccess chooses an access path from a row IN list: a batch point get
// on the integer primary key, or one lookup per tuple on the index whose
// leading columns the tuple (with equalities of preds) covers, a unique
// index wholly covered first. It reports whether it chose one.
func (b *Builder) tupleAccess(s *Scan, sc *scope, tin tupleIn, preds map[int]*colPred) bool {
	t := s.Table
	pos := map[int]int{} // column offset -> tuple element
	for i, c := range tin.cols {
		pos[c] = i
	}
	if t.PKIsHandle {
		if i, ok := pos[t.HandleOffset]; ok {
			handles := make([]ast.ExprNode, len(tin.tuples))
			for j, tup := range tin.tuples {
				handles[j] = tup[i]
			}
			if es, ok := compileAll(handles, sc); ok {
				s.Access, s.Handles = BatchPointGet, es
				return true
			}
		}
	}
	var best *catalog.IndexInfo
	bestCovered := 0
	for _, ix := range t.Indexes {
		if ix.IsPrefix() {
			continue
		}
		covered, fromTuple := 0, false
		for _, off := range ix.Columns {
			if _, ok := pos[off]; ok {
				fromTuple = true
			} else if p := preds[off]; p == nil || p.eq == nil {
				break
			}
			covered++
		}
		if !fromTuple || covered == 0 {
			continue
		}
		full := covered == len(ix.Columns) && ix.Unique
		bestFull := best != nil && bestCovered == len(best.Columns) && best.Unique
		if best == nil || (full && !bestFull) || (full == bestFull && covered > bestCovered) {
			best, bestCovered = ix, covered
		}
	}
	if best == nil {
		return false
	}
	ranges := make([]Range, 0, len(tin.tuples))
	for _, tup := range tin.tuples {
		vals := make([]ast.ExprNode, bestCovered)
		for k, off := range best.Columns[:bestCovered] {
			if i, ok := pos[off]; ok {
				vals[k] = tup[i]
			} else {
				vals[k] = preds[off].eq
			}
		}
		eqs, ok := compileAll(vals, sc)
		if !ok {
			return false
		}
		ranges = append(ranges, Range{Eq: eqs})
	}
	s.Access, s.Index, s.Ranges = IndexLookup, best, ranges
	s.Points = best.Unique && bestCovered == len(best.Columns)
	return true
}
