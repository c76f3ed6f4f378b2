package plan

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
)

// Decorrelation of a scalar aggregate subquery compared with the outer row
// (TPC-H Q17 and Q20's shape):
//
//	WHERE x < (SELECT 0.2 * AVG(q) FROM l WHERE l.k = p.k AND <c>)
//
// becomes a join with the subquery grouped by its correlation columns:
//
//	FROM ..., (SELECT l.k AS k1, 0.2 * AVG(q) AS v FROM l WHERE <c>
//	           GROUP BY l.k) AS sq
//	WHERE sq.k1 = p.k AND x < sq.v
//
// It is equivalent only when all of these hold, and is not made otherwise:
//   - the comparison is a conjunct of WHERE (unknown and false both drop
//     the row) with one of = <> < <= > >= (not <=>), and its other side
//     has no subquery;
//   - the subquery is a plain SELECT of one expression over base tables,
//     without GROUP BY, HAVING, DISTINCT, ORDER BY, LIMIT, locking,
//     nested subqueries or volatile functions: one row per outer row;
//   - that expression is NULL over no rows: SUM, AVG, MIN, MAX and
//     arithmetic on them (never COUNT, which is 0 over no rows): an outer
//     row without a group compares with NULL and is dropped, as the join
//     drops it;
//   - every conjunct of its WHERE that reads the outer row is inner column
//     = outer column, the two of one type (and collation), so that GROUP BY
//     groups exactly the rows one outer value selects; any other outer
//     reference (l.q > p.k) keeps the subquery correlated;
//   - the statement is a read-only query (no FOR UPDATE).
//
// It is chosen by cost, only with table statistics: the per-row path (one
// index lookup per distinct outer value, memoized) reads rows of the
// outer values only; the join aggregates the whole inner input once. At
// TPC-H scale factor 0.1 a Q17 run per outer value cost 0.07 ms and the
// grouped lineitem 1.0 s (1.7 us a row), so the hash join pays only when
// the outer rows number at least 1/decorrelateRatio of the inner table's.
//
// With fewer outer rows, when the subquery reads one table and an index
// of it starts with a correlation column, the rewrite is made all the
// same and its derived table is joined through that index (groupLookup):
// batches of outer rows read the inner rows of their keys together, one
// coprocessor request per region for a batch's index ranges, and
// aggregate them per group. It reads the rows the per-row path reads,
// without a plan run and a round trip per outer value: TPC-H Q20 at
// scale factor 1 ran its subquery for 8,644 partsupp rows at 67 us each.
const decorrelateRatio = 32

// decorrelation is a rewritten FROM clause and WHERE conjuncts.
type decorrelation struct {
	from  *ast.Join
	conds []ast.ExprNode
	alias string
}

// decorrelate returns the rewrite of the first conjunct of conds that
// qualifies (see above) and pays by estimate for an outer plan p of scope
// sc, or nil.
func (b *Builder) decorrelate(from *ast.Join, conds []ast.ExprNode, p Plan, sc *scope) *decorrelation {
	if b.Stats == nil || len(b.ctes) > 0 {
		return nil
	}
	outer := planEst(p)
	if outer <= 0 {
		return nil
	}
	for i, c := range conds {
		rw := b.decorrelateCond(c, outer, sc, len(b.Subqueries)+i)
		if rw == nil {
			continue
		}
		out := make([]ast.ExprNode, 0, len(conds)+len(rw.conds))
		out = append(out, conds[:i]...)
		out = append(out, rw.conds...)
		out = append(out, conds[i+1:]...)
		return &decorrelation{
			from:  &ast.Join{Left: from, Right: &ast.TableSource{Source: rw.sel, AsName: ast.NewCIStr(rw.alias)}, Tp: ast.CrossJoin},
			conds: out,
			alias: rw.alias,
		}
	}
	return nil
}

type condRewrite struct {
	sel   *ast.SelectStmt
	conds []ast.ExprNode
	alias string
}

func (b *Builder) decorrelateCond(c ast.ExprNode, outerRows float64, sc *scope, n int) *condRewrite {
	bin, ok := unparen(c).(*ast.BinaryOperationExpr)
	if !ok {
		return nil
	}
	switch bin.Op {
	case opcode.EQ, opcode.NE, opcode.LT, opcode.LE, opcode.GT, opcode.GE:
	default:
		return nil
	}
	sqx, onRight := unparen(bin.R).(*ast.SubqueryExpr)
	other := bin.L
	if !onRight {
		if sqx, ok = unparen(bin.L).(*ast.SubqueryExpr); !ok {
			return nil
		}
		other = bin.R
	}
	if hasSubquery(other) {
		return nil
	}
	sel, ok := sqx.Query.(*ast.SelectStmt)
	if !ok || sel.Kind != ast.SelectStmtKindSelect || sel.With != nil || sel.From == nil || sel.GroupBy != nil ||
		sel.Having != nil || sel.OrderBy != nil || sel.Limit != nil || sel.Distinct || sel.LockInfo != nil ||
		sel.WindowSpecs != nil || sel.Fields == nil || len(sel.Fields.Fields) != 1 || sel.Fields.Fields[0].Expr == nil ||
		(sel.SelectStmtOpts != nil && sel.SelectStmtOpts.StraightJoin) {
		return nil
	}
	field := sel.Fields.Fields[0].Expr
	if !nullOnEmpty(field) || !baseTablesOnly(sel.From.TableRefs) {
		return nil
	}
	vv := &volatileVisitor{}
	sel.Accept(vv)
	if vv.found || hasSubquery(sel.Where) || hasSubquery(field) {
		return nil
	}
	nsubs := len(b.Subqueries)
	defer func() { b.Subqueries = b.Subqueries[:nsubs] }()

	// The correlation: conjuncts inner column = outer column.
	var inner, outerCols []*ast.ColumnNameExpr
	var kept []ast.ExprNode
	for _, w := range splitAnd(sel.Where, nil) {
		if in, out, ok := b.correlationPair(w, sel.From, sc); ok {
			inner, outerCols = append(inner, in), append(outerCols, out)
			continue
		}
		kept = append(kept, w)
	}
	if len(inner) == 0 {
		return nil
	}
	innerRows := b.innerRows(sel.From.TableRefs)
	if innerRows <= 0 {
		return nil
	}
	lookup := outerRows*decorrelateRatio < innerRows
	if lookup && (!b.lookupIndexed(sel.From.TableRefs, inner) || !oneTable(outerCols, sc)) {
		return nil
	}
	alias := fmt.Sprintf("__sq%d", n+1)
	d := &ast.SelectStmt{
		Kind:    ast.SelectStmtKindSelect,
		From:    sel.From,
		Fields:  &ast.FieldList{},
		GroupBy: &ast.GroupByClause{},
	}
	if len(kept) > 0 {
		d.Where = andAll(kept)
	}
	var conds []ast.ExprNode
	for i, in := range inner {
		name := fmt.Sprintf("__k%d", i+1)
		d.Fields.Fields = append(d.Fields.Fields, &ast.SelectField{Expr: in, AsName: ast.NewCIStr(name)})
		d.GroupBy.Items = append(d.GroupBy.Items, &ast.ByItem{Expr: in})
		conds = append(conds, &ast.BinaryOperationExpr{Op: opcode.EQ, L: qualified(alias, name), R: outerCols[i]})
	}
	d.Fields.Fields = append(d.Fields.Fields, &ast.SelectField{Expr: field, AsName: ast.NewCIStr("__v")})
	// It must plan on its own: a reference to the outer row left in it
	// (a correlated conjunct that is not an equality) fails here.
	if _, err := b.buildResultSet(d, nil, nil); err != nil || len(b.Subqueries) != nsubs {
		return nil
	}
	if lookup {
		if b.lookupSels == nil {
			b.lookupSels = map[*ast.SelectStmt]bool{}
		}
		b.lookupSels[d] = true
	}
	cmp := &ast.BinaryOperationExpr{Op: bin.Op, L: bin.L, R: bin.R}
	if onRight {
		cmp.R = qualified(alias, "__v")
	} else {
		cmp.L = qualified(alias, "__v")
	}
	return &condRewrite{sel: d, conds: append(conds, cmp), alias: alias}
}

// lookupIndexed reports whether from is one base table with an index
// (not the integer primary key) whose first column is one of the
// correlation columns inner: groupLookup can join the derived table
// through it.
func (b *Builder) lookupIndexed(j *ast.Join, inner []*ast.ColumnNameExpr) bool {
	if j == nil || j.Right != nil {
		return false
	}
	ts, ok := j.Left.(*ast.TableSource)
	if !ok {
		return false
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok {
		return false
	}
	db := tn.Schema.O
	if db == "" {
		db = b.DB
	}
	tbl := b.Schema.Table(db, tn.Name.O)
	if tbl == nil || tbl.IsView() || tbl.Temporary {
		return false
	}
	for _, ix := range tbl.Indexes {
		if ix.IsPrefix() {
			continue
		}
		first := tbl.Columns[ix.Columns[0]].Name
		for _, in := range inner {
			if strings.EqualFold(in.Name.Name.O, first) {
				return true
			}
		}
	}
	return false
}

// oneTable reports whether the outer columns cols all belong to one table
// of sc: every key of the derived table is bound once that table is
// joined (a join order that reached it first from another table, by
// some of its keys, could join the whole derived table by hash).
func oneTable(cols []*ast.ColumnNameExpr, sc *scope) bool {
	var db, table string
	for i, cn := range cols {
		c, found, err := sc.find(cn.Name)
		if err != nil || !found {
			return false
		}
		if i == 0 {
			db, table = c.db, c.table
		} else if !strings.EqualFold(c.db, db) || !strings.EqualFold(c.table, table) {
			return false
		}
	}
	return true
}

// columnEquality returns the two columns of a conjunct column = column.
func columnEquality(w ast.ExprNode) (l, r *ast.ColumnNameExpr, ok bool) {
	eq, isEq := unparen(w).(*ast.BinaryOperationExpr)
	if !isEq || eq.Op != opcode.EQ {
		return nil, nil, false
	}
	l, lok := unparen(eq.L).(*ast.ColumnNameExpr)
	r, rok := unparen(eq.R).(*ast.ColumnNameExpr)
	return l, r, lok && rok
}

// correlationPair recognizes inner column = outer column (either order):
// a name that resolves among the subquery's tables, and one that does not
// but resolves in the outer scope sc, of one type.
func (b *Builder) correlationPair(w ast.ExprNode, from *ast.TableRefsClause, sc *scope) (in, out *ast.ColumnNameExpr, ok bool) {
	l, r, ok := columnEquality(w)
	if !ok {
		return nil, nil, false
	}
	lt := b.innerColumnType(l, from)
	rt := b.innerColumnType(r, from)
	switch {
	case lt != nil && rt == nil:
		in, out = l, r
	case lt == nil && rt != nil:
		in, out, lt = r, l, rt
	default:
		return nil, nil, false
	}
	oc, found, err := sc.find(out.Name)
	if err != nil || !found || !sameKeyType(lt, oc.col.Type) {
		return nil, nil, false
	}
	return in, out, true
}

// innerColumnType is the type of column cn among the tables of from (nil:
// it is not one of theirs).
func (b *Builder) innerColumnType(cn *ast.ColumnNameExpr, from *ast.TableRefsClause) *ptypes.FieldType {
	probe := &ast.SelectStmt{
		Kind:   ast.SelectStmtKindSelect,
		From:   from,
		Fields: &ast.FieldList{Fields: []*ast.SelectField{{Expr: cn}}},
	}
	p, err := b.buildResultSet(probe, nil, nil)
	if err != nil {
		return nil
	}
	return p.Columns()[0].Type
}

// sameKeyType: values of a and b are equal under = exactly when GROUP BY
// puts them in one group and a hash join matches them.
func sameKeyType(a, b *ptypes.FieldType) bool {
	if a.EvalType() != b.EvalType() {
		return false
	}
	switch a.GetType() {
	case mysql.TypeJSON, mysql.TypeEnum, mysql.TypeSet, mysql.TypeBit, mysql.TypeGeometry:
		return false
	}
	switch b.GetType() {
	case mysql.TypeJSON, mysql.TypeEnum, mysql.TypeSet, mysql.TypeBit, mysql.TypeGeometry:
		return false
	}
	switch a.EvalType() {
	case ptypes.ETInt, ptypes.ETDecimal, ptypes.ETDatetime, ptypes.ETTimestamp, ptypes.ETDuration:
		return true
	case ptypes.ETString:
		return strings.EqualFold(a.GetCollate(), b.GetCollate())
	}
	return false
}

// nullOnEmpty reports whether e, the select expression of an aggregate
// query without GROUP BY, is NULL when the query reads no rows: an
// aggregate that is NULL over no rows, or arithmetic with one.
func nullOnEmpty(e ast.ExprNode) bool {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return nullOnEmpty(x.Expr)
	case *ast.AggregateFuncExpr:
		switch strings.ToLower(x.F) {
		case ast.AggFuncSum, ast.AggFuncAvg, ast.AggFuncMin, ast.AggFuncMax:
			return true
		}
		return false
	case *ast.UnaryOperationExpr:
		return x.Op == opcode.Minus && nullOnEmpty(x.V)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.Plus, opcode.Minus, opcode.Mul, opcode.Div, opcode.IntDiv, opcode.Mod:
			return (nullOnEmpty(x.L) && aggOrConst(x.R)) || (aggOrConst(x.L) && nullOnEmpty(x.R))
		}
	}
	return false
}

// aggOrConst: literals, aggregates and arithmetic on them (no column read
// outside an aggregate).
func aggOrConst(e ast.ExprNode) bool {
	switch x := e.(type) {
	case ast.ValueExpr:
		return true
	case *ast.ParenthesesExpr:
		return aggOrConst(x.Expr)
	case *ast.AggregateFuncExpr:
		return true
	case *ast.UnaryOperationExpr:
		return x.Op == opcode.Minus && aggOrConst(x.V)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.Plus, opcode.Minus, opcode.Mul, opcode.Div, opcode.IntDiv, opcode.Mod:
			return aggOrConst(x.L) && aggOrConst(x.R)
		}
	}
	return false
}

// baseTablesOnly: a FROM clause of table names joined (no derived tables).
func baseTablesOnly(n ast.ResultSetNode) bool {
	switch x := n.(type) {
	case *ast.Join:
		if x.Right == nil {
			return baseTablesOnly(x.Left)
		}
		return baseTablesOnly(x.Left) && baseTablesOnly(x.Right) && x.Tp != ast.LeftJoin && x.Tp != ast.RightJoin && !x.NaturalJoin && !x.StraightJoin
	case *ast.TableSource:
		_, ok := x.Source.(*ast.TableName)
		return ok
	}
	return false
}

// innerRows is the row count of the largest table of a FROM clause by its
// statistics (0: a table without them).
func (b *Builder) innerRows(n ast.ResultSetNode) float64 {
	switch x := n.(type) {
	case *ast.Join:
		l := b.innerRows(x.Left)
		if x.Right == nil || l <= 0 {
			return l
		}
		r := b.innerRows(x.Right)
		if r <= 0 {
			return 0
		}
		return max(l, r)
	case *ast.TableSource:
		tn, ok := x.Source.(*ast.TableName)
		if !ok {
			return 0
		}
		db := tn.Schema.O
		if db == "" {
			db = b.DB
		}
		tbl := b.Schema.Table(db, tn.Name.O)
		if tbl == nil {
			return 0
		}
		st := b.Stats.Table(tbl.ID)
		if st == nil {
			return 0
		}
		return float64(st.Rows)
	}
	return 0
}

// planEst is the estimated row count of a plan's output, through
// projections (0: none).
func planEst(p Plan) float64 {
	for {
		switch x := p.(type) {
		case *Projection:
			p = x.Child
			continue
		case *Join:
			return x.EstRows
		case *Filter:
			if x.EstRows > 0 {
				return x.EstRows
			}
			p = x.Child
			continue
		case *Scan:
			return x.EstRows
		}
		return 0
	}
}

func hasSubquery(n ast.Node) bool {
	if n == nil {
		return false
	}
	v := &subqueryFinder{}
	n.Accept(v)
	return v.found
}

type subqueryFinder struct{ found bool }

func (v *subqueryFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr, *ast.WindowFuncExpr:
		v.found = true
	}
	return n, v.found
}

func (v *subqueryFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func qualified(table, col string) *ast.ColumnNameExpr {
	return &ast.ColumnNameExpr{Name: &ast.ColumnName{Table: ast.NewCIStr(table), Name: ast.NewCIStr(col)}}
}

func andAll(conds []ast.ExprNode) ast.ExprNode {
	e := conds[0]
	for _, c := range conds[1:] {
		e = &ast.BinaryOperationExpr{Op: opcode.LogicAnd, L: e, R: c}
	}
	return e
}
