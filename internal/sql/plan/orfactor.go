package plan

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// factorOr takes out of every OR among a WHERE clause's conjuncts the
// conjuncts all its branches share: (a AND b) OR (a AND c) becomes a AND
// (b OR c). The two are equivalent under SQL's three-valued logic, and the
// common conjunct, now at the top, can become a join or index condition:
// TPC-H's Q19 repeats its join condition p_partkey = l_partkey in each of
// three branches, and without this is a cross join. Conjuncts are matched
// by their text (a = b matching b = a); ones holding a subquery are left alone. A branch left
// with nothing makes the OR true, and it is dropped.
func factorOr(conds []ast.ExprNode) []ast.ExprNode {
	var out []ast.ExprNode
	for _, c := range conds {
		branches := splitOr(c, nil)
		if len(branches) < 2 {
			out = append(out, c)
			continue
		}
		terms := make([][]ast.ExprNode, len(branches))
		keys := make([][]string, len(branches))
		for i, br := range branches {
			terms[i] = splitAnd(br, nil)
			for _, t := range terms[i] {
				keys[i] = append(keys[i], factorKey(t))
			}
		}
		// The conjuncts of the first branch that every other one has.
		var common []int
		for j, k := range keys[0] {
			if k == "" {
				continue
			}
			inAll := true
			for i := 1; i < len(keys) && inAll; i++ {
				inAll = containsKey(keys[i], k)
			}
			if inAll && !containsKeyBefore(keys[0], k, j) {
				common = append(common, j)
			}
		}
		if len(common) == 0 {
			out = append(out, c)
			continue
		}
		taken := map[string]bool{}
		for _, j := range common {
			out = append(out, terms[0][j])
			taken[keys[0][j]] = true
		}
		var rest ast.ExprNode
		alwaysTrue := false
		for i := range branches {
			var left ast.ExprNode
			for j, t := range terms[i] {
				if taken[keys[i][j]] {
					continue
				}
				left = and(left, t)
			}
			if left == nil {
				alwaysTrue = true
				break
			}
			if rest == nil {
				rest = left
			} else {
				rest = &ast.BinaryOperationExpr{Op: opcode.LogicOr, L: rest, R: &ast.ParenthesesExpr{Expr: left}}
			}
		}
		if !alwaysTrue {
			out = append(out, rest)
		}
	}
	return out
}

func and(a, b ast.ExprNode) ast.ExprNode {
	if a == nil {
		return &ast.ParenthesesExpr{Expr: b}
	}
	return &ast.BinaryOperationExpr{Op: opcode.LogicAnd, L: a, R: &ast.ParenthesesExpr{Expr: b}}
}

// splitOr flattens a disjunction.
func splitOr(e ast.ExprNode, out []ast.ExprNode) []ast.ExprNode {
	switch x := e.(type) {
	case *ast.BinaryOperationExpr:
		if x.Op == opcode.LogicOr {
			out = splitOr(x.L, out)
			return splitOr(x.R, out)
		}
	case *ast.ParenthesesExpr:
		return splitOr(x.Expr, out)
	}
	return append(out, e)
}

// factorKey is a conjunct's text, or "" for one that must stay where it is
// (a subquery, a nondeterministic or side-effecting call).
func factorKey(e ast.ExprNode) string {
	v := &factorable{ok: true}
	e.Accept(v)
	if !v.ok {
		return ""
	}
	// a = b and b = a are the same conjunct.
	if be, ok := unparen(e).(*ast.BinaryOperationExpr); ok && be.Op == opcode.EQ {
		l, r := restore(be.L), restore(be.R)
		if l == "?" || r == "?" {
			return ""
		}
		if r < l {
			l, r = r, l
		}
		return l + " = " + r
	}
	if k := restore(e); k != "?" {
		return k
	}
	return ""
}

type factorable struct{ ok bool }

func (v *factorable) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr, *ast.VariableExpr, ast.ParamMarkerExpr:
		v.ok = false
		return n, true
	case *ast.FuncCallExpr:
		switch x.FnName.L {
		case "rand", "uuid", "uuid_short", "sleep", "get_lock", "release_lock", "last_insert_id", "nextval", "setval":
			v.ok = false
			return n, true
		}
	}
	return n, false
}

func (v *factorable) Leave(n ast.Node) (ast.Node, bool) { return n, v.ok }

func containsKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

func containsKeyBefore(keys []string, k string, j int) bool { return containsKey(keys[:j], k) }

// orImplied derives, from an OR over several tables of a join, the
// condition it implies on each table alone: for a table every branch
// has conjuncts on (and only on), the OR of those conjuncts. From TPC-H
// Q7's (n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name =
// 'GERMANY' AND n2.n_name = 'FRANCE') come n1.n_name = 'FRANCE' OR
// n1.n_name = 'GERMANY' and the same on n2, which filter the two nation
// tables before the joins and let them drive index joins. A row the OR
// keeps has a branch that is true, so every conjunct of that branch is
// true: the derived conditions keep it too, and adding them changes no
// result (the OR itself stays, as the join's filter).
func orImplied(c ast.ExprNode, leaves []*scope) []ast.ExprNode {
	branches := splitOr(c, nil)
	if len(branches) < 2 {
		return nil
	}
	used, _ := refs(c, leaves)
	var out []ast.ExprNode
	for i := range leaves {
		if !used[i] || onlyUses(used, i) {
			continue // the OR is this table's alone already, or not its at all
		}
		var derived ast.ExprNode
		for _, br := range branches {
			var mine ast.ExprNode
			for _, t := range splitAnd(br, nil) {
				tu, opaque := refs(t, leaves)
				if opaque || factorKey(t) == "" || !onlyUses(tu, i) {
					continue
				}
				mine = and(mine, t)
			}
			if mine == nil {
				derived = nil // a branch says nothing of this table
				break
			}
			if derived == nil {
				derived = &ast.ParenthesesExpr{Expr: mine}
			} else {
				derived = &ast.BinaryOperationExpr{Op: opcode.LogicOr, L: derived, R: &ast.ParenthesesExpr{Expr: mine}}
			}
		}
		if derived != nil {
			out = append(out, derived)
		}
	}
	return out
}
