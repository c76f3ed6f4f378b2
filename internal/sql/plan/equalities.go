package plan

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// propagateEqualities adds to a WHERE clause's conjuncts the column =
// constant equalities its column = column equalities imply: from c_w_id =
// w_id AND w_id = 1 it derives c_w_id = 1, so that customer is read by its
// key instead of in full. Every derived conjunct holds for every row the
// WHERE clause lets through, so adding it (and pushing it into a scan)
// changes no result, outer joins included: the original conjuncts still
// filter the joined rows. Columns are matched by their written name, and
// constants are literals and parameters.
func propagateEqualities(conds []ast.ExprNode) []ast.ExprNode {
	type colConst struct {
		col   ast.ExprNode
		value ast.ExprNode
	}
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		for parent[x] != "" && parent[x] != x {
			x = parent[x]
		}
		return x
	}
	cols := map[string]ast.ExprNode{}
	var consts []colConst
	for _, c := range conds {
		be, ok := unparen(c).(*ast.BinaryOperationExpr)
		if !ok || be.Op != opcode.EQ {
			continue
		}
		l, r := unparen(be.L), unparen(be.R)
		lc, lok := l.(*ast.ColumnNameExpr)
		rc, rok := r.(*ast.ColumnNameExpr)
		switch {
		case lok && rok:
			a, b := colKeyOf(lc), colKeyOf(rc)
			cols[a], cols[b] = lc, rc
			if parent[a] == "" {
				parent[a] = a
			}
			if parent[b] == "" {
				parent[b] = b
			}
			parent[find(a)] = find(b)
		case lok && isLiteral(r):
			consts = append(consts, colConst{col: lc, value: r})
		case rok && isLiteral(l):
			consts = append(consts, colConst{col: rc, value: l})
		}
	}
	if len(consts) == 0 || len(cols) == 0 {
		return conds
	}
	have := map[string]bool{}
	for _, k := range consts {
		have[colKeyOf(k.col.(*ast.ColumnNameExpr))] = true
	}
	out := conds
	for _, k := range consts {
		key := colKeyOf(k.col.(*ast.ColumnNameExpr))
		if parent[key] == "" {
			continue
		}
		root := find(key)
		for other, n := range cols {
			if have[other] || find(other) != root {
				continue
			}
			have[other] = true
			out = append(out, &ast.BinaryOperationExpr{Op: opcode.EQ, L: n, R: k.value})
		}
	}
	return out
}

func colKeyOf(c *ast.ColumnNameExpr) string {
	n := c.Name
	return strings.ToLower(n.Schema.O + "." + n.Table.O + "." + n.Name.O)
}

func isLiteral(n ast.ExprNode) bool {
	switch n.(type) {
	case *test_driver.ValueExpr, *test_driver.ParamMarkerExpr:
		return true
	}
	return false
}
