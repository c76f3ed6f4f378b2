package plan

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/types"
)

// Equivalence classes of join columns (PostgreSQL's EquivalenceClass,
// CockroachDB's equivalence sets), for one flattened inner join.
//
// The conjuncts col = col that join two base tables of the join (WHERE and
// the ON conditions of its inner joins) put their columns in one class:
// from c_nationkey = s_nationkey AND s_nationkey = n_nationkey, the class
// {c_nationkey, s_nationkey, n_nationkey}. Every row the join returns has
// the same value in all the columns of a class, so any two of its tables
// can be joined by their columns of the class: buildFrom adds the missing
// equalities (c_nationkey = n_nationkey) as derived conjuncts, and the join
// order search may then join customer right after nation, through them.
//
// When a table joins the tables already joined, one equality of each class
// it shares with them is enough: the columns of the class in the joined
// tables are already equal to each other (a table of the class that joined
// earlier did so through an equality of the class, since every pair of its
// tables has one). buildFrom applies that one as a join key and drops the
// others, and the estimates (cost.go) count each class once per join step,
// not once per equality.
//
// What is left out, so that every derived equality holds:
//   - an outer join: it is a leaf of its own, planned as a unit (its ON
//     conditions never reach the flattened join), and its columns, whether
//     of the preserved or the null-supplying side, join no class;
//   - derived tables and views: only the columns of base tables join;
//   - an equality whose two columns compare other than as two values of
//     one type: an integer with a string ('1' = 1 and '01' = 1 but
//     '1' <> '01'), strings of different collations, signed with unsigned,
//     DATE with DATETIME; enums, sets, bits, years and JSON;
//   - a class in which one table has two columns: the join could not use
//     one equality for it (and a filter on that table would be needed); its
//     equalities stay as they were written.

// eqClass is one class: a column of each of its leaves, in the order the
// conjuncts name them.
type eqClass struct {
	members []classMember
}

// classMember is a column (offset col) of leaf, as a conjunct names it.
type classMember struct {
	leaf, col int
	name      *ast.ColumnNameExpr
}

// derivedEq is an equality a class implies and no conjunct states.
type derivedEq struct {
	node  ast.ExprNode
	used  []bool
	class int
}

// joinClasses finds the classes of the conjuncts conds of a flattened join
// of leaves. classOf[k] is the class of conds[k] (-1: none), and derived
// the equalities to add, between each pair of leaves of a class that no
// conjunct joins by it.
func joinClasses(conds []ast.ExprNode, leaves []*leaf) (classOf []int, classes []*eqClass, derived []derivedEq) {
	classOf = make([]int, len(conds))
	type key struct{ leaf, col int }
	ids := map[key]int{}
	var members []classMember
	var parent []int
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	id := func(m classMember) int {
		k := key{m.leaf, m.col}
		if i, ok := ids[k]; ok {
			return i
		}
		ids[k] = len(members)
		members = append(members, m)
		parent = append(parent, len(parent))
		return ids[k]
	}
	first := make([]int, len(conds))    // a member of each conjunct's columns, -1: none
	joins := make([][2]int, len(conds)) // the leaves each conjunct joins, lower first
	for k, c := range conds {
		classOf[k], first[k] = -1, -1
		be, ok := unparen(c).(*ast.BinaryOperationExpr)
		if !ok || be.Op != opcode.EQ {
			continue
		}
		l, lok := classColumn(be.L, leaves)
		r, rok := classColumn(be.R, leaves)
		if !lok || !rok || l.leaf == r.leaf {
			continue
		}
		if !transitiveEq(leaves[l.leaf].scope.cols[l.col].col.Type, leaves[r.leaf].scope.cols[r.col].col.Type) {
			continue
		}
		a, b := id(l), id(r)
		first[k] = a
		joins[k] = [2]int{min(l.leaf, r.leaf), max(l.leaf, r.leaf)}
		parent[find(a)] = find(b)
	}
	if len(members) == 0 {
		return classOf, nil, nil
	}
	// A class per root, unless a leaf has two of its columns.
	byRoot := map[int]*eqClass{}
	var all []*eqClass
	bad := map[*eqClass]bool{}
	for i, m := range members {
		cl := byRoot[find(i)]
		if cl == nil {
			cl = &eqClass{}
			byRoot[find(i)] = cl
			all = append(all, cl)
		}
		for _, o := range cl.members {
			bad[cl] = bad[cl] || o.leaf == m.leaf
		}
		cl.members = append(cl.members, m)
	}
	index := map[*eqClass]int{}
	for _, cl := range all {
		if !bad[cl] {
			index[cl] = len(classes)
			classes = append(classes, cl)
		}
	}
	linked := map[[3]int]bool{} // class, leaf, leaf: a conjunct joins them
	for k, a := range first {
		if a < 0 {
			continue
		}
		if ci, ok := index[byRoot[find(a)]]; ok {
			classOf[k] = ci
			linked[[3]int{ci, joins[k][0], joins[k][1]}] = true
		}
	}
	for ci, cl := range classes {
		for x, a := range cl.members {
			for _, b := range cl.members[x+1:] {
				lo, hi := min(a.leaf, b.leaf), max(a.leaf, b.leaf)
				if linked[[3]int{ci, lo, hi}] {
					continue
				}
				linked[[3]int{ci, lo, hi}] = true
				used := make([]bool, len(leaves))
				used[a.leaf], used[b.leaf] = true, true
				derived = append(derived, derivedEq{
					node:  &ast.BinaryOperationExpr{Op: opcode.EQ, L: a.name, R: b.name},
					used:  used,
					class: ci,
				})
			}
		}
	}
	return classOf, classes, derived
}

// classColumn resolves n to a column of a base-table leaf, when it is a
// bare column name that exactly one leaf has.
func classColumn(n ast.ExprNode, leaves []*leaf) (classMember, bool) {
	cn, ok := unparen(n).(*ast.ColumnNameExpr)
	if !ok {
		return classMember{}, false
	}
	m := classMember{leaf: -1, name: cn}
	for i, l := range leaves {
		c, found, err := l.scope.find(cn.Name)
		if err != nil {
			return classMember{}, false
		}
		if !found {
			continue
		}
		if m.leaf >= 0 || l.scan == nil {
			return classMember{}, false
		}
		m.leaf, m.col = i, c.idx
	}
	return m, m.leaf >= 0
}

// transitiveEq reports whether equalities between columns of types a and
// b compare their values as values of one type, so that a = b and b = c
// imply a = c.
func transitiveEq(a, b *ptypes.FieldType) bool {
	if types.KindForFieldType(a) != types.KindForFieldType(b) {
		return false
	}
	group := func(ft *ptypes.FieldType) int {
		switch ft.GetType() {
		case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
			return 1
		case mysql.TypeNewDecimal:
			return 2
		case mysql.TypeFloat, mysql.TypeDouble:
			return 3
		case mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeString:
			return 4
		case mysql.TypeDate, mysql.TypeNewDate, mysql.TypeDatetime, mysql.TypeTimestamp, mysql.TypeDuration:
			// DATE = DATETIME compares the date as a datetime:
			// only one type.
			return 10 + int(ft.GetType())
		}
		return 0
	}
	g := group(a)
	if g == 0 || g != group(b) {
		return false
	}
	return g != 4 || a.GetCollate() == b.GetCollate()
}
