package plan

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// ONLY_FULL_GROUP_BY, in MySQL 8's default sql_mode: in a query that
// groups (GROUP BY, or an aggregate without it), every column the select
// list, HAVING or ORDER BY reads outside an aggregate must be grouped, or
// be determined by the grouped columns (MySQL's functional dependence; here
// the rule every schema gets from its keys: grouping by a table's primary
// key, or a unique key of NOT NULL columns, determines the table's other
// columns), or sit in an expression that is itself grouped. Otherwise the
// value would come from an arbitrary row of the group. Builder.
// OnlyFullGroupBy turns the check on (the session passes its sql_mode).

// fullGroupBy checks a grouped SELECT's expressions against its GROUP BY
// items (groups; empty with implicit grouping) in the FROM scope sc.
func (b *Builder) fullGroupBy(sc *scope, fields []*ast.SelectField, groups []ast.ExprNode, having *ast.HavingClause, order *ast.OrderByClause) error {
	if !b.OnlyFullGroupBy {
		return nil
	}
	g := &grouping{sc: sc, cols: map[string]bool{}, texts: map[string]bool{}, aliases: map[string]bool{}}
	for _, e := range groups {
		g.texts[restore(e)] = true
		if cn, ok := e.(*ast.ColumnNameExpr); ok {
			if c, found, _ := sc.find(cn.Name); found {
				g.cols[colKey(c)] = true
			}
		}
	}
	for _, f := range fields {
		if f.AsName.L != "" {
			g.aliases[f.AsName.L] = true
		}
	}
	g.dependents = b.determinedTables(sc, g.cols)
	implicit := len(groups) == 0
	for i, f := range fields {
		if f.WildCard != nil {
			for _, c := range sc.cols {
				if c.hidden || (f.WildCard.Table.O != "" && !strings.EqualFold(c.table, f.WildCard.Table.O)) {
					continue
				}
				if !g.covered(c) {
					return g.error(implicit, "SELECT list", i+1, c)
				}
			}
			continue
		}
		if c, bad := g.check(f.Expr, false); bad {
			return g.error(implicit, "SELECT list", i+1, c)
		}
	}
	if implicit {
		return nil // MySQL checks HAVING and ORDER BY only against a GROUP BY
	}
	if having != nil {
		if c, bad := g.check(having.Expr, true); bad {
			return g.error(false, "HAVING clause", 1, c)
		}
	}
	if order != nil {
		for i, it := range order.Items {
			if _, ok := intLiteral(it.Expr); ok {
				continue // a position: the select list's expression, checked above
			}
			if c, bad := g.check(it.Expr, true); bad {
				return g.error(false, "ORDER BY clause", i+1, c)
			}
		}
	}
	return nil
}

type grouping struct {
	sc         *scope
	cols       map[string]bool // grouped columns (colKey)
	texts      map[string]bool // grouped expressions, restored
	aliases    map[string]bool // select list aliases (HAVING, ORDER BY may name them)
	dependents map[string]bool // table aliases whose every column the groups determine
}

func colKey(c scopeCol) string { return strings.ToLower(c.db + "." + c.table + "." + c.col.Name) }

func (g *grouping) covered(c scopeCol) bool {
	return g.cols[colKey(c)] || g.dependents[strings.ToLower(c.db+"."+c.table)]
}

// check walks e and returns the first column it reads outside an aggregate
// that the grouping does not cover.
func (g *grouping) check(e ast.ExprNode, aliasesOK bool) (scopeCol, bool) {
	if g.texts[restore(e)] {
		return scopeCol{}, false
	}
	v := &groupChecker{g: g, aliasesOK: aliasesOK}
	e.Accept(v)
	return v.bad, v.found
}

type groupChecker struct {
	g         *grouping
	aliasesOK bool
	bad       scopeCol
	found     bool
}

func (v *groupChecker) Enter(n ast.Node) (ast.Node, bool) {
	if v.found {
		return n, true
	}
	if e, ok := n.(ast.ExprNode); ok && v.g.texts[restore(e)] {
		return n, true // a grouped expression as a whole
	}
	switch x := n.(type) {
	case *ast.AggregateFuncExpr, *ast.WindowFuncExpr, *ast.SubqueryExpr, *ast.ExistsSubqueryExpr:
		return n, true
	case *ast.FuncCallExpr:
		if x.FnName.L == "any_value" {
			return n, true
		}
	case *ast.ColumnNameExpr:
		if v.aliasesOK && x.Name.Table.O == "" && v.g.aliases[x.Name.Name.L] {
			return n, true
		}
		if c, found, _ := v.g.sc.find(x.Name); found && !v.g.covered(c) {
			v.bad, v.found = c, true
		}
		return n, true
	}
	return n, false
}

func (v *groupChecker) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func (g *grouping) error(implicit bool, where string, pos int, c scopeCol) error {
	name := c.col.Name
	if c.table != "" {
		name = c.table + "." + name
	}
	if c.db != "" {
		name = c.db + "." + name
	}
	if implicit {
		return sqlerr.New(1140, "42000", "In aggregated query without GROUP BY, expression #%d of %s contains nonaggregated column '%s'; this is incompatible with sql_mode=only_full_group_by", pos, where, name)
	}
	return sqlerr.New(1055, "42000", "%s", fmt.Sprintf("Expression #%d of %s is not in GROUP BY clause and contains nonaggregated column '%s' which is not functionally dependent on columns in GROUP BY clause; this is incompatible with sql_mode=only_full_group_by", pos, where, name))
}

// determinedTables returns the table aliases of sc whose primary key, or a
// unique key over NOT NULL columns, is among the grouped columns.
func (b *Builder) determinedTables(sc *scope, grouped map[string]bool) map[string]bool {
	out := map[string]bool{}
	seen := map[string]bool{}
	for _, c := range sc.cols {
		alias := strings.ToLower(c.db + "." + c.table)
		if seen[alias] || c.col.OrgTable == "" || b.Schema == nil {
			continue
		}
		seen[alias] = true
		t := b.Schema.Table(c.col.DB, c.col.OrgTable)
		if t == nil {
			continue
		}
		for _, ix := range t.Indexes {
			if !ix.Primary && !ix.Unique {
				continue
			}
			all := true
			for _, off := range ix.Columns {
				col := t.Columns[off]
				if (!ix.Primary && !col.NotNull) || !grouped[strings.ToLower(c.db+"."+c.table+"."+col.Name)] {
					all = false
					break
				}
			}
			if all && !ix.IsPrefix() {
				out[alias] = true
				break
			}
		}
		if t.PKIsHandle && grouped[strings.ToLower(c.db+"."+c.table+"."+t.Columns[t.HandleOffset].Name)] {
			out[alias] = true
		}
	}
	return out
}
