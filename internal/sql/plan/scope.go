package plan

import (
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/opcode"

	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// scopeCol is a name visible in a scope and the row position it reads.
type scopeCol struct {
	db, table string // as written by the user (alias if any)
	col       *Column
	idx       int
	hidden    bool // not expanded by *
	qualOnly  bool // resolved only by a qualified name (t.c): the right copy of a USING column
}

// scope resolves names while compiling the expressions of one query block.
// It is the expr.Binder the planner hands to expr.Compile.
type scope struct {
	b      *Builder
	cols   []scopeCol
	parent *scope    // enclosing query block (correlated references)
	sub    *Subquery // subquery expression through which parent is reached

	// aggs maps the text of an aggregate call to its output column when
	// compiling above an Aggregate node; nil elsewhere (aggregates invalid).
	aggs map[string]int
	// windows maps the text of a window function call to its output
	// column above a Window node; nil elsewhere.
	windows map[string]int
	// aliases are select-list aliases usable in HAVING / ORDER BY.
	aliases map[string]ast.ExprNode
	// values is the row offset of the new row for VALUES(col) in
	// INSERT ... ON DUPLICATE KEY UPDATE; -1 when not allowed.
	values      int
	valuesTable *scope
	resolving   map[string]bool
}

func newScope(b *Builder) *scope { return &scope{b: b, values: -1} }

func (sc *scope) add(db, table string, c *Column) {
	sc.cols = append(sc.cols, scopeCol{db: db, table: table, col: c, idx: len(sc.cols)})
}

// find resolves a column name in this scope only.
func (sc *scope) find(cn *ast.ColumnName) (scopeCol, bool, error) {
	var found scopeCol
	n := 0
	for _, c := range sc.cols {
		if !strings.EqualFold(c.col.Name, cn.Name.O) {
			continue
		}
		if cn.Table.O != "" && !strings.EqualFold(c.table, cn.Table.O) {
			continue
		}
		if c.qualOnly && cn.Table.O == "" {
			continue
		}
		if cn.Schema.O != "" && !strings.EqualFold(c.db, cn.Schema.O) {
			continue
		}
		if n == 0 {
			found = c
		}
		n++
	}
	if n > 1 {
		return found, false, sqlerr.New(sqlerr.ErNonUniq, "23000", "Column '%s' in field list is ambiguous", cn.Name.O)
	}
	return found, n == 1, nil
}

// Bind implements expr.Binder.
func (sc *scope) Bind(node ast.ExprNode) (expr.Expr, error) {
	switch n := node.(type) {
	case *ast.ColumnNameExpr:
		return sc.resolveColumn(n.Name)
	case *ast.AggregateFuncExpr:
		if sc.aggs == nil {
			return nil, sqlerr.New(sqlerr.ErInvalidGroupFuncUse, "HY000", "Invalid use of group function")
		}
		idx, ok := sc.aggs[restore(n)]
		if !ok {
			return nil, sqlerr.New(sqlerr.ErInvalidGroupFuncUse, "HY000", "Invalid use of group function")
		}
		return expr.NewColumn(idx, sc.cols[idx].col.Type, restore(n)), nil
	case *ast.WindowFuncExpr:
		idx, ok := sc.windows[restore(n)]
		if !ok {
			return nil, sqlerr.New(3593, "HY000", "You cannot use the window function '%s' in this context.", n.Name)
		}
		for _, c := range sc.cols {
			if c.idx == idx {
				return expr.NewColumn(idx, c.col.Type, restore(n)), nil
			}
		}
		return nil, sqlerr.New(3593, "HY000", "You cannot use the window function '%s' in this context.", n.Name)
	case *ast.SubqueryExpr:
		return sc.b.buildSubquery(sc, n, ScalarSubquery, nil, 0, false)
	case *ast.ExistsSubqueryExpr:
		sq, ok := n.Sel.(*ast.SubqueryExpr)
		if !ok {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "EXISTS needs a subquery")
		}
		return sc.b.buildSubquery(sc, sq, ExistsSubquery, nil, 0, n.Not)
	case *ast.PatternInExpr:
		if n.Sel == nil {
			return nil, nil
		}
		sq, ok := n.Sel.(*ast.SubqueryExpr)
		if !ok {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "IN needs a subquery or a value list")
		}
		if _, row := expr.RowElems(n.Expr); row {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support '(...) IN (subquery)' of rows")
		}
		return sc.b.buildSubquery(sc, sq, InSubquery, n.Expr, 0, n.Not)
	case *ast.CompareSubqueryExpr:
		sq, ok := n.R.(*ast.SubqueryExpr)
		if !ok {
			return nil, nil
		}
		kind := AnySubquery
		if n.All {
			kind = AllSubquery
		}
		return sc.b.buildSubquery(sc, sq, kind, n.L, n.Op, false)
	case *ast.ValuesExpr:
		if sc.values < 0 || sc.valuesTable == nil {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "VALUES() is only supported in ON DUPLICATE KEY UPDATE")
		}
		c, ok, err := sc.valuesTable.find(n.Column.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, unknownColumn(n.Column.Name, sc.b.clauseName())
		}
		return expr.NewColumn(sc.values+c.idx, c.col.Type, "values("+c.col.Name+")"), nil
	}
	return nil, nil
}

func (sc *scope) resolveColumn(cn *ast.ColumnName) (expr.Expr, error) {
	c, ok, err := sc.find(cn)
	if err != nil {
		return nil, err
	}
	if ok {
		return expr.NewColumn(c.idx, c.col.Type, c.col.Name), nil
	}
	if cn.Table.O == "" && sc.aliases != nil {
		if e, ok := sc.aliases[strings.ToLower(cn.Name.O)]; ok {
			key := strings.ToLower(cn.Name.O)
			if sc.resolving == nil {
				sc.resolving = map[string]bool{}
			}
			if !sc.resolving[key] {
				sc.resolving[key] = true
				defer delete(sc.resolving, key)
				return expr.Compile(e, sc)
			}
		}
	}
	// Correlated reference: walk out through the enclosing query blocks.
	var path []*Subquery
	for cur := sc; cur.parent != nil; cur = cur.parent {
		path = append(path, cur.sub)
		oc, ok, err := cur.parent.find(cn)
		if err != nil {
			return nil, err
		}
		if ok {
			for _, s := range path {
				s.Correlated = true
			}
			// The subqueries nested inside cur.sub read a row beyond
			// their own outer row; cur.sub reads column oc.idx of its.
			for _, s := range path[:len(path)-1] {
				s.reachesOut = true
			}
			if !slices.Contains(cur.sub.outerCols, oc.idx) {
				cur.sub.outerCols = append(cur.sub.outerCols, oc.idx)
			}
			return &OuterRef{Sub: cur.sub, Index: oc.idx, Name: oc.col.Name, ft: oc.col.Type}, nil
		}
	}
	return nil, unknownColumn(cn, sc.b.clauseName())
}

func unknownColumn(cn *ast.ColumnName, where string) error {
	name := cn.Name.O
	if cn.Table.O != "" {
		name = cn.Table.O + "." + name
	}
	return sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in '%s'", name, where)
}

// restore renders an AST expression back to SQL text; the text identifies
// aggregates and names unnamed select-list expressions.
func restore(n ast.Node) string {
	var sb strings.Builder
	if err := n.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreKeyWordLowercase|format.RestoreNameBackQuotes, &sb)); err != nil {
		return "?"
	}
	return sb.String()
}

// refs reports which of the given leaf scopes the column names of an AST
// expression resolve to; other (outer or unknown) names are ignored. It
// reports opaque=true when the expression contains a subquery or an
// aggregate, which the planner never pushes down.
func refs(node ast.ExprNode, leaves []*scope) (used []bool, opaque bool) {
	used = make([]bool, len(leaves))
	v := &refVisitor{leaves: leaves, used: used}
	node.Accept(v)
	return used, v.opaque
}

type refVisitor struct {
	leaves []*scope
	used   []bool
	opaque bool
}

func (v *refVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.ColumnNameExpr:
		for i, l := range v.leaves {
			if _, ok, _ := l.find(x.Name); ok {
				v.used[i] = true
			}
		}
		return n, true
	case *ast.SubqueryExpr, *ast.AggregateFuncExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr, *ast.VariableExpr:
		v.opaque = true
		return n, true
	case *ast.FuncCallExpr:
		if strings.EqualFold(x.FnName.L, "rand") {
			v.opaque = true
		}
	}
	return n, false
}

func (v *refVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// aggCollector gathers the aggregate calls of a query block (not of its
// subqueries).
type aggCollector struct {
	list []*ast.AggregateFuncExpr
	seen map[string]bool
}

func (v *aggCollector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.AggregateFuncExpr:
		t := restore(x)
		if !v.seen[t] {
			v.seen[t] = true
			v.list = append(v.list, x)
		}
		return n, true
	case *ast.SubqueryExpr:
		return n, true
	}
	return n, false
}

func (v *aggCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// splitAnd flattens a conjunction.
func splitAnd(e ast.ExprNode, out []ast.ExprNode) []ast.ExprNode {
	if e == nil {
		return out
	}
	switch x := e.(type) {
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.LogicAnd {
			out = splitAnd(x.L, out)
			return splitAnd(x.R, out)
		}
	case *ast.ParenthesesExpr:
		return splitAnd(x.Expr, out)
	}
	return append(out, e)
}
