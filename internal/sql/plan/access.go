package plan

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
)

// colPred is what one WHERE conjunct says about one column.
type colPred struct {
	eq        ast.ExprNode   // col = c
	in        []ast.ExprNode // col IN (c, ...)
	low, high ast.ExprNode
	lowIncl   bool
	highIncl  bool
	// lowSrc and highSrc are the conjuncts low and high came from.
	lowSrc, highSrc ast.ExprNode
}

// isConst reports whether an AST expression is constant for one execution
// of the query block of sc: literals, parameters and outer references.
func isConst(n ast.ExprNode, sc *scope) bool {
	v := &constVisitor{sc: sc, ok: true}
	n.Accept(v)
	return v.ok
}

type constVisitor struct {
	sc *scope
	ok bool
}

func (v *constVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.ColumnNameExpr:
		if _, found, _ := v.sc.find(x.Name); found || v.sc.parent == nil {
			v.ok = false
		}
		return n, true
	case *ast.SubqueryExpr, *ast.AggregateFuncExpr, *ast.VariableExpr, *ast.ExistsSubqueryExpr, *ast.DefaultExpr, *ast.ValuesExpr:
		v.ok = false
		return n, true
	case *ast.FuncCallExpr:
		v.ok = false
		return n, true
	}
	return n, false
}

func (v *constVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func unparen(n ast.ExprNode) ast.ExprNode {
	for {
		p, ok := n.(*ast.ParenthesesExpr)
		if !ok {
			return n
		}
		n = p.Expr
	}
}

// columnOf returns the table column offset a bare column reference names.
func columnOf(n ast.ExprNode, sc *scope) (int, bool) {
	cn, ok := unparen(n).(*ast.ColumnNameExpr)
	if !ok {
		return 0, false
	}
	c, found, err := sc.find(cn.Name)
	if err != nil || !found {
		return 0, false
	}
	return c.idx, true
}

var flip = map[opcode.Op]opcode.Op{opcode.LT: opcode.GT, opcode.LE: opcode.GE, opcode.GT: opcode.LT, opcode.GE: opcode.LE, opcode.EQ: opcode.EQ}

// analyze extracts per-column predicates usable for key ranges.
func analyze(conds []ast.ExprNode, sc *scope) map[int]*colPred {
	preds := map[int]*colPred{}
	get := func(i int) *colPred {
		if preds[i] == nil {
			preds[i] = &colPred{}
		}
		return preds[i]
	}
	for _, c := range conds {
		switch x := unparen(c).(type) {
		case *ast.BinaryOperationExpr:
			flipped, ok := flip[x.Op]
			if !ok {
				continue
			}
			col, val, op := x.L, x.R, x.Op
			if _, isCol := columnOf(col, sc); !isCol {
				// const op col  ==  col flipped(op) const
				col, val, op = x.R, x.L, flipped
			}
			idx, isCol := columnOf(col, sc)
			if !isCol || !isConst(val, sc) {
				continue
			}
			p := get(idx)
			switch op {
			case opcode.EQ:
				p.eq = val
			case opcode.GT, opcode.GE:
				p.low, p.lowIncl, p.lowSrc = val, op == opcode.GE, c
			case opcode.LT, opcode.LE:
				p.high, p.highIncl, p.highSrc = val, op == opcode.LE, c
			}
		case *ast.BetweenExpr:
			idx, isCol := columnOf(x.Expr, sc)
			if x.Not || !isCol || !isConst(x.Left, sc) || !isConst(x.Right, sc) {
				continue
			}
			p := get(idx)
			p.low, p.lowIncl, p.high, p.highIncl = x.Left, true, x.Right, true
			p.lowSrc, p.highSrc = c, c
		case *ast.PatternInExpr:
			idx, isCol := columnOf(x.Expr, sc)
			if x.Not || x.Sel != nil || !isCol || len(x.List) == 0 {
				continue
			}
			all := true
			for _, v := range x.List {
				if !isConst(v, sc) {
					all = false
				}
			}
			if all {
				get(idx).in = x.List
			}
		}
	}
	return preds
}

func compileAll(ns []ast.ExprNode, sc *scope) ([]expr.Expr, bool) {
	out := make([]expr.Expr, len(ns))
	for i, n := range ns {
		e, err := expr.Compile(n, sc)
		if err != nil {
			return nil, false
		}
		out[i] = e
	}
	return out, true
}

func compileBound(n ast.ExprNode, incl bool, sc *scope) (Bound, bool) {
	if n == nil {
		return Bound{}, true
	}
	e, err := expr.Compile(n, sc)
	if err != nil {
		return Bound{}, false
	}
	return Bound{Value: e, Inclusive: incl}, true
}

// chooseAccess picks the access path of a base table from its single-table
// conjuncts. Preference: point get / batch point get on the integer primary
// key, an index with the longest equality prefix (a fully matched unique
// index first), a primary-key range, an index range, a full scan.
//
// For a primary-key range it also returns the conjuncts the range stands
// for exactly (see Filter.ByRange): each is the source of every bound it
// gave (a later conjunct on the same side replaces a bound), and the
// bounds are constants or parameters, which the scan and the filter
// evaluate alike and without per-row side effects.
func (b *Builder) chooseAccess(s *Scan, sc *scope, conds []ast.ExprNode) (byRange []ast.ExprNode) {
	preds := analyze(conds, sc)
	rowEqualities(conds, sc, preds)
	tins := tupleIns(conds, sc)
	if len(preds) == 0 && len(tins) == 0 {
		return nil
	}
	t := s.Table
	if t.PKIsHandle {
		if p := preds[t.HandleOffset]; p != nil {
			if p.eq != nil {
				if es, ok := compileAll([]ast.ExprNode{p.eq}, sc); ok {
					s.Access, s.Handles = PointGet, es
					return nil
				}
			}
			if p.in != nil {
				if es, ok := compileAll(p.in, sc); ok {
					s.Access, s.Handles = BatchPointGet, es
					return nil
				}
			}
		}
	}
	// A row IN list over a key: one point lookup per tuple (rowkeys.go),
	// unless the integer primary key is fixed by an equality already.
	if len(tins) > 0 && !(t.PKIsHandle && preds[t.HandleOffset] != nil && preds[t.HandleOffset].eq != nil) {
		for _, tin := range tins {
			if b.tupleAccess(s, sc, tin, preds) {
				return nil
			}
		}
	}
	var best *catalog.IndexInfo
	var bestRanges []Range
	bestScore := 0
	for _, ix := range t.Indexes {
		if ix.IsPrefix() {
			continue
		}
		ranges, score, ok := indexRanges(ix, preds, sc)
		if !ok || score <= bestScore {
			continue
		}
		best, bestRanges, bestScore = ix, ranges, score
	}
	// Full equality on a unique index beats a primary-key range.
	if best != nil && best.Unique && bestScore >= 100*len(best.Columns) {
		s.Access, s.Index, s.Ranges = IndexLookup, best, bestRanges
		s.Points = pointRanges(best, bestRanges)
		return nil
	}
	// Unsigned handles at or above 2^63 are stored as negative int64 and so
	// sort first: a handle range would miss them.
	if t.PKIsHandle && !mysql.HasUnsignedFlag(t.Columns[t.HandleOffset].Type.GetFlag()) {
		if p := preds[t.HandleOffset]; p != nil && (p.low != nil || p.high != nil) {
			lo, ok1 := compileBound(p.low, p.lowIncl, sc)
			hi, ok2 := compileBound(p.high, p.highIncl, sc)
			if ok1 && ok2 {
				s.Access, s.Ranges = TableRangeScan, []Range{{Low: lo, High: hi}}
				plain := func(bd Bound) bool {
					_, param := expr.IsParam(bd.Value)
					return bd.Value == nil || param || expr.IsConstant(bd.Value)
				}
				if !plain(lo) || !plain(hi) {
					return nil
				}
				for _, c := range conds {
					switch unparen(c).(type) {
					case *ast.BetweenExpr:
						if p.lowSrc == c && p.highSrc == c {
							byRange = append(byRange, c)
						}
					case *ast.BinaryOperationExpr:
						// A comparison gives one bound.
						if p.lowSrc == c || p.highSrc == c {
							byRange = append(byRange, c)
						}
					}
				}
				return byRange
			}
		}
	}
	if best != nil {
		s.Access, s.Index, s.Ranges = IndexLookup, best, bestRanges
		s.Points = pointRanges(best, bestRanges)
	}
	return nil
}

// pointRanges reports whether every range fixes every column of the unique
// index ix: each is then a single key.
func pointRanges(ix *catalog.IndexInfo, ranges []Range) bool {
	if !ix.Unique || len(ranges) == 0 {
		return false
	}
	for _, r := range ranges {
		if len(r.Eq) != len(ix.Columns) || r.Low.Value != nil || r.High.Value != nil {
			return false
		}
	}
	return true
}

// indexRanges builds the ranges of one index: equalities on a prefix of its
// columns, then an IN list or a range on the next column. The score ranks
// equality columns above a trailing range.
func indexRanges(ix *catalog.IndexInfo, preds map[int]*colPred, sc *scope) ([]Range, int, bool) {
	var eq []ast.ExprNode
	score := 0
	for _, off := range ix.Columns {
		p := preds[off]
		if p == nil {
			break
		}
		if p.eq != nil {
			eq = append(eq, p.eq)
			score += 100
			continue
		}
		if p.in != nil {
			eqs, ok := compileAll(eq, sc)
			if !ok {
				return nil, 0, false
			}
			var ranges []Range
			for _, v := range p.in {
				e, err := expr.Compile(v, sc)
				if err != nil {
					return nil, 0, false
				}
				r := Range{Eq: append(append([]expr.Expr{}, eqs...), e)}
				ranges = append(ranges, r)
			}
			return ranges, score + 50, true
		}
		if p.low != nil || p.high != nil {
			eqs, ok := compileAll(eq, sc)
			lo, ok1 := compileBound(p.low, p.lowIncl, sc)
			hi, ok2 := compileBound(p.high, p.highIncl, sc)
			if !ok || !ok1 || !ok2 {
				return nil, 0, false
			}
			return []Range{{Eq: eqs, Low: lo, High: hi}}, score + 10, true
		}
		break
	}
	if len(eq) == 0 {
		return nil, 0, false
	}
	eqs, ok := compileAll(eq, sc)
	if !ok {
		return nil, 0, false
	}
	return []Range{{Eq: eqs}}, score, true
}
