package plan

import (
	"slices"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Builder plans the statements of one session against one schema snapshot.
// A Builder is used for one statement; Subqueries lists every subquery
// expression of the statement so exec can bind them before running.
type Builder struct {
	Schema     *catalog.Schema
	DB         string
	Subqueries []*Subquery
	// ParseView parses the stored SELECT of a view.
	ParseView func(sql string) (ast.ResultSetNode, error)
	viewDepth int
	clause    string // for error messages: "where clause", "order clause" ...
	// ctes are the common table expressions in scope, innermost last.
	ctes []*cteDef
	// Cluster reads the cluster's state for INFORMATION_SCHEMA's cluster
	// tables (nil outside a node).
	Cluster infoschema.ClusterSource
	// Processes lists the node's sessions for INFORMATION_SCHEMA.
	// PROCESSLIST (nil: empty).
	Processes infoschema.ProcessSource
	// Privileges lists accounts' privileges for INFORMATION_SCHEMA's
	// privilege tables (nil: empty).
	Privileges infoschema.PrivilegeSource
	// Visible filters INFORMATION_SCHEMA's schema tables by the session's
	// privileges (nil: everything is visible).
	Visible infoschema.Visibility
	// straight is set while planning the FROM clause of SELECT
	// STRAIGHT_JOIN: tables are joined in FROM order.
	straight bool
	// lockOpts are the options of the locking read whose FROM clause is
	// being planned (its scans take them).
	lockOpts kv.LockOptions
	// OnlyFullGroupBy enforces sql_mode's ONLY_FULL_GROUP_BY
	// (fullgroupby.go).
	OnlyFullGroupBy bool
	// NoCoprocessor keeps every scan in SQL (strata_enable_coprocessor
	// = OFF): no CopRead is planned.
	NoCoprocessor bool
	// Stats are the tables' statistics (ANALYZE TABLE; nil: none): with
	// them the join order and the hash joins' build sides follow
	// estimated row counts (cost.go).
	Stats *catalog.Stats
	// lookupSels are the derived tables of decorrelated subqueries that
	// are joined through an index of their table (decorrelate.go,
	// groupLookup).
	lookupSels map[*ast.SelectStmt]bool
}

func (b *Builder) clauseName() string {
	if b.clause == "" {
		return "field list"
	}
	return b.clause
}

// NewBuilder returns a planner over schema with db as the current database.
func NewBuilder(schema *catalog.Schema, db string) *Builder {
	return &Builder{Schema: schema, DB: db}
}

// BuildQuery plans a SELECT, a set operation or a parenthesized query.
func (b *Builder) BuildQuery(node ast.ResultSetNode) (Plan, error) {
	p, err := b.buildResultSet(node, nil, nil)
	if err == nil {
		pruneColumns(p)
		if Coprocessor && !b.NoCoprocessor {
			p = pushCoprocessor(p)
		}
		// An uncorrelated subquery's plan reads nothing of the outer row:
		// its scans are pruned and pushed like the main plan's (TPC-H
		// Q18's GROUP BY over lineitem runs in the coprocessor). A
		// correlated one runs once per outer row, where a fragment's
		// round trip would cost more than it saves.
		for _, sq := range b.Subqueries {
			// A query reads and writes nothing else while it runs: a
			// correlated subquery whose result depends on the outer
			// row's columns alone is remembered per distinct value of
			// them (subquery.go). Statements that write do not, as
			// their subqueries may read what they have written.
			sq.memoOK = sq.Correlated && !sq.reachesOut && !sq.volatile && len(sq.outerCols) > 0
			if sq.Correlated {
				// Its scans decode only the columns it reads (an
				// EXISTS none of its select list).
				if sq.Kind == ExistsSubquery && ColumnPruning {
					prune(sq.Plan, make([]bool, len(sq.Plan.Columns())))
				} else {
					pruneColumns(sq.Plan)
				}
				continue
			}
			pruneColumns(sq.Plan)
			if Coprocessor && !b.NoCoprocessor {
				sq.Plan = pushCoprocessor(sq.Plan)
			}
		}
	}
	return p, err
}

func (b *Builder) buildResultSet(node ast.Node, parent *scope, sub *Subquery) (Plan, error) {
	switch n := node.(type) {
	case *ast.SelectStmt:
		return b.buildSelect(n, parent, sub)
	case *ast.SetOprStmt:
		return b.buildSetOpr(n, parent, sub)
	case *ast.SetOprSelectList:
		return b.buildSetOprList(n, parent, sub)
	}
	return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this query form")
}

func (b *Builder) buildSubquery(sc *scope, n *ast.SubqueryExpr, kind SubqueryKind, left ast.ExprNode, op opcode.Op, not bool) (expr.Expr, error) {
	sq := &Subquery{Kind: kind, Not: not, Op: op, ft: boolType()}
	if left != nil {
		l, err := expr.Compile(left, sc)
		if err != nil {
			return nil, err
		}
		sq.Left = l
	}
	p, err := b.buildResultSet(n.Query, sc, sq)
	if err != nil {
		return nil, err
	}
	vv := &volatileVisitor{}
	n.Query.Accept(vv)
	sq.volatile = vv.found
	if kind != ExistsSubquery && len(p.Columns()) != 1 {
		return nil, sqlerr.New(sqlerr.ErOperandColumns, "21000", "Operand should contain 1 column(s)")
	}
	if kind == ScalarSubquery {
		sq.ft = p.Columns()[0].Type
	}
	if kind == ExistsSubquery {
		existsHint(p)
	}
	sq.Plan = p
	b.Subqueries = append(b.Subqueries, sq)
	return sq, nil
}

// volatileFuncs are the functions whose value may differ between two calls
// with the same arguments in one statement.
var volatileFuncs = map[string]bool{
	"rand": true, "uuid": true, "uuid_short": true, "sleep": true, "benchmark": true,
	"sysdate": true, "get_lock": true, "release_lock": true, "release_all_locks": true,
	"is_free_lock": true, "is_used_lock": true, "last_insert_id": true, "found_rows": true,
	"row_count": true, "nextval": true, "lastval": true, "setval": true, "random_bytes": true,
}

// volatileVisitor finds calls of volatile functions and user variables
// (which the statement may assign as it runs).
type volatileVisitor struct{ found bool }

func (v *volatileVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.FuncCallExpr:
		if volatileFuncs[x.FnName.L] {
			v.found = true
		}
	case *ast.VariableExpr:
		if !x.IsSystem {
			v.found = true
		}
	}
	return n, v.found
}

func (v *volatileVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// fieldName is the column name MySQL reports for a select-list item.
func fieldName(f *ast.SelectField) string {
	if f.AsName.O != "" {
		return f.AsName.O
	}
	if c, ok := f.Expr.(*ast.ColumnNameExpr); ok {
		return c.Name.Name.O
	}
	if t := strings.TrimSpace(f.Text()); t != "" {
		return t
	}
	return restore(f.Expr)
}

// intLiteral returns the value of an integer literal (ORDER BY 2).
func intLiteral(n ast.ExprNode) (int64, bool) {
	if p, ok := n.(*ast.PositionExpr); ok && p.P == nil {
		return int64(p.N), true
	}
	v, ok := n.(ast.ValueExpr)
	if !ok {
		return 0, false
	}
	switch x := v.GetValue().(type) {
	case int64:
		return x, true
	case uint64:
		return int64(x), true
	}
	return 0, false
}

func (b *Builder) buildSelect(sel *ast.SelectStmt, parent *scope, sub *Subquery) (Plan, error) {
	if sel.Kind != ast.SelectStmtKindSelect {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support TABLE / VALUES statements")
	}
	if sel.With != nil {
		pop, err := b.pushWith(sel.With)
		if err != nil {
			return nil, err
		}
		defer pop()
	}
	defer func(saved string) { b.clause = saved }(b.clause)
	b.clause = "where clause"
	sc := newScope(b)
	sc.parent, sc.sub = parent, sub
	var p Plan
	conds := propagateEqualities(factorOr(splitAnd(sel.Where, nil)))
	lock := sel.LockInfo != nil && sel.LockInfo.LockType != ast.SelectLockNone
	if sel.From == nil {
		p = &Dual{}
	} else {
		var err error
		saved, savedLock := b.straight, b.lockOpts
		b.straight = sel.SelectStmtOpts != nil && sel.SelectStmtOpts.StraightJoin
		b.lockOpts = kv.LockOptions{}
		if lock {
			b.lockOpts = lockOptions(sel.LockInfo)
		}
		all, nsubs := conds, len(b.Subqueries)
		p, conds, err = b.buildFrom(sel.From.TableRefs, sc, conds, lock)
		if err == nil && !lock {
			// A correlated aggregate subquery the estimates say is
			// cheaper as a join (decorrelate.go): the FROM clause is
			// planned again with it.
			if rw := b.decorrelate(sel.From.TableRefs, all, p, sc); rw != nil {
				firstSubs := slices.Clone(b.Subqueries[nsubs:])
				b.Subqueries = b.Subqueries[:nsubs]
				sc2 := newScope(b)
				sc2.parent, sc2.sub = parent, sub
				p2, conds2, err2 := b.buildFrom(rw.from, sc2, rw.conds, lock)
				if err2 == nil {
					for i := range sc2.cols {
						if strings.EqualFold(sc2.cols[i].table, rw.alias) {
							sc2.cols[i].hidden = true // not in SELECT *
						}
					}
					sc, p, conds = sc2, p2, conds2
				} else {
					b.Subqueries = append(b.Subqueries[:nsubs], firstSubs...)
				}
			}
		}
		b.straight, b.lockOpts = saved, savedLock
		if err != nil {
			return nil, err
		}
	}
	for _, c := range conds {
		nsub := len(b.Subqueries)
		e, err := expr.Compile(c, sc)
		if err != nil {
			return nil, err
		}
		if sel.From != nil && !lock && parent == nil && sub == nil && len(b.Subqueries) == nsub+1 {
			// A correlated [NOT] EXISTS the estimates say is cheaper
			// as a hash semi or anti join (semijoin.go).
			if jn := b.semiJoin(c, p, sc, b.Subqueries[nsub]); jn != nil {
				clear(b.Subqueries[nsub:])
				b.Subqueries = b.Subqueries[:nsub]
				p = jn
				continue
			}
		}
		p = &Filter{base: base{p.Columns()}, Child: p, Cond: e}
	}

	fields := sel.Fields.Fields
	ac := &aggCollector{seen: map[string]bool{}}
	for _, f := range fields {
		if f.Expr != nil {
			f.Expr.Accept(ac)
		}
	}
	if sel.Having != nil {
		sel.Having.Expr.Accept(ac)
	}
	if sel.OrderBy != nil {
		for _, it := range sel.OrderBy.Items {
			it.Expr.Accept(ac)
		}
	}
	out := sc
	b.clause = "group statement"
	if sel.GroupBy != nil || len(ac.list) > 0 {
		agg := &Aggregate{Child: p}
		var groups []ast.ExprNode
		if sel.GroupBy != nil {
			for _, it := range sel.GroupBy.Items {
				n := it.Expr
				if pos, ok := intLiteral(n); ok {
					if pos < 1 || int(pos) > len(fields) || fields[pos-1].Expr == nil {
						return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%d' in 'group statement'", pos)
					}
					n = fields[pos-1].Expr
				} else if cn, ok := n.(*ast.ColumnNameExpr); ok && cn.Name.Table.O == "" {
					if _, found, _ := sc.find(cn.Name); !found {
						for _, f := range fields {
							if f.AsName.L != "" && f.AsName.L == cn.Name.Name.L {
								n = f.Expr
							}
						}
					}
				}
				e, err := expr.Compile(n, sc)
				if err != nil {
					return nil, err
				}
				agg.GroupBy = append(agg.GroupBy, e)
				groups = append(groups, n)
			}
		}
		if err := b.fullGroupBy(sc, fields, groups, sel.Having, sel.OrderBy); err != nil {
			return nil, err
		}
		as := newScope(b)
		as.parent, as.sub = parent, sub
		as.aggs = map[string]int{}
		for i, a := range ac.list {
			args := make([]expr.Expr, 0, len(a.Args))
			for _, arg := range a.Args {
				e, err := expr.Compile(arg, sc)
				if err != nil {
					return nil, err
				}
				args = append(args, e)
			}
			af, err := expr.NewAggFunc(strings.ToLower(a.F), a.Distinct, args)
			if err != nil {
				return nil, err
			}
			text := restore(a)
			agg.Aggs = append(agg.Aggs, af)
			agg.aggText = append(agg.aggText, text)
			as.aggs[text] = i
			as.cols = append(as.cols, scopeCol{col: &Column{Name: text, Type: af.Type()}, idx: i, hidden: true})
		}
		for _, c := range sc.cols {
			c.idx += len(ac.list)
			as.cols = append(as.cols, c)
		}
		agg.cols = make([]*Column, len(as.cols))
		for i, c := range as.cols {
			agg.cols[i] = c.col
		}
		p = agg
		out = as
	}
	out.aliases = map[string]ast.ExprNode{}
	for _, f := range fields {
		if f.AsName.L != "" && f.Expr != nil {
			out.aliases[f.AsName.L] = f.Expr
		}
	}
	b.clause = "having clause"
	if sel.Having != nil {
		e, err := expr.Compile(sel.Having.Expr, out)
		if err != nil {
			return nil, err
		}
		p = &Filter{base: base{p.Columns()}, Child: p, Cond: e}
	}
	b.clause = "window"
	{
		var err error
		if p, out, err = b.buildWindow(p, sel, out); err != nil {
			return nil, err
		}
	}

	b.clause = "field list"
	proj := &Projection{Child: p}
	for _, f := range fields {
		if f.WildCard != nil {
			n := 0
			for _, c := range out.cols {
				if c.hidden {
					continue
				}
				if f.WildCard.Table.O != "" && !strings.EqualFold(c.table, f.WildCard.Table.O) {
					continue
				}
				if f.WildCard.Schema.O != "" && !strings.EqualFold(c.db, f.WildCard.Schema.O) {
					continue
				}
				proj.Exprs = append(proj.Exprs, expr.NewColumn(c.idx, c.col.Type, c.col.Name))
				proj.cols = append(proj.cols, c.col)
				n++
			}
			if n == 0 && f.WildCard.Table.O != "" {
				return nil, sqlerr.New(sqlerr.ErUnknownTable, "42S02", "Unknown table '%s'", f.WildCard.Table.O)
			}
			continue
		}
		e, err := expr.Compile(f.Expr, out)
		if err != nil {
			return nil, err
		}
		col := &Column{Name: fieldName(f), Type: e.Type()}
		if cn, ok := f.Expr.(*ast.ColumnNameExpr); ok {
			if c, found, _ := out.find(cn.Name); found {
				col.OrgName, col.Table, col.OrgTable, col.DB = c.col.OrgName, c.col.Table, c.col.OrgTable, c.col.DB
			}
		}
		proj.Exprs = append(proj.Exprs, e)
		proj.cols = append(proj.cols, col)
	}
	visible := len(proj.Exprs)

	b.clause = "order clause"
	var keys []SortKey
	if sel.OrderBy != nil {
		for _, it := range sel.OrderBy.Items {
			idx := -1
			if pos, ok := intLiteral(it.Expr); ok {
				if pos < 1 || int(pos) > visible {
					return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%d' in 'order clause'", pos)
				}
				idx = int(pos - 1)
			} else if cn, ok := it.Expr.(*ast.ColumnNameExpr); ok && cn.Name.Table.O == "" {
				for i, f := range fields {
					if f.AsName.L != "" && f.AsName.L == cn.Name.Name.L {
						idx = i
						break
					}
				}
			}
			if idx < 0 {
				e, err := expr.Compile(it.Expr, out)
				if err != nil {
					return nil, err
				}
				// ORDER BY c where c is also selected: sort on the selected
				// column rather than a hidden copy (which would also keep a
				// DISTINCT from sharing the sort: exec's keysAmong).
				if ci, ok := expr.ColumnIndex(e); ok {
					for i, v := range proj.Exprs[:visible] {
						if vi, ok := expr.ColumnIndex(v); ok && vi == ci {
							idx = i
							break
						}
					}
				}
				if idx < 0 {
					idx = len(proj.Exprs)
					proj.Exprs = append(proj.Exprs, e)
					proj.cols = append(proj.cols, &Column{Name: e.String(), Type: e.Type()})
				}
			}
			keys = append(keys, SortKey{Expr: expr.NewColumn(idx, proj.cols[idx].Type, proj.cols[idx].Name), Desc: it.Desc})
		}
	}
	p = proj
	if sel.Distinct {
		p = &Distinct{base: base{p.Columns()}, Child: p, N: visible}
	}
	if len(keys) > 0 && !(out == sc && !sel.Distinct && (b.orderByHandle(proj.Child, sel.OrderBy, sc) || b.orderByIndex(proj.Child, sel.OrderBy, sc))) {
		p = &Sort{base: base{p.Columns()}, Child: p, Keys: keys}
	}
	var err error
	if p, err = b.buildLimit(p, sel.Limit); err != nil {
		return nil, err
	}
	if len(proj.Exprs) > visible {
		p = trim(p, visible)
	}
	return p, nil
}

// orderByHandle recognizes ORDER BY <clustered key> [DESC] over a single
// table read along the handle (full scan or one handle range): the scan
// then returns rows in that order and no sort is needed.
// orderByIndex reports whether a single-table query's ORDER BY is the order
// of its index lookup, and if so makes the scan read in that order: one
// range of equalities on the index's leading columns, ordered by the
// columns that follow, all ascending or all descending, or, with every
// index column fixed, by the integer primary key alone. Only numeric and
// temporal columns qualify (their key order is their SQL order under every
// collation).
func (b *Builder) orderByIndex(p Plan, ob *ast.OrderByClause, sc *scope) bool {
	for {
		f, ok := p.(*Filter)
		if !ok {
			break
		}
		p = f.Child
	}
	s, ok := p.(*Scan)
	if !ok || s.Access != IndexLookup || len(s.Ranges) != 1 || s.Points || len(sc.cols) != len(s.Table.Columns) {
		return false
	}
	r := s.Ranges[0]
	next := len(r.Eq)
	if next == len(s.Index.Columns) && len(ob.Items) == 1 && b.orderByHandleOf(s, ob.Items[0], sc) {
		// Every index column is fixed: the entries of one encoded value
		// (collated text is encoded as its sort key) follow each other
		// in handle order (a non-unique entry's key ends with the
		// handle; a unique one matches at most one row).
		s.Desc = ob.Items[0].Desc
		return true
	}
	if len(ob.Items) == 0 || next+len(ob.Items) > len(s.Index.Columns) {
		return false
	}
	desc := ob.Items[0].Desc
	for i, it := range ob.Items {
		cn, ok := unparen(it.Expr).(*ast.ColumnNameExpr)
		if !ok || it.Desc != desc {
			return false
		}
		c, found, err := sc.find(cn.Name)
		off := s.Index.Columns[next+i]
		if err != nil || !found || c.idx != off {
			return false
		}
		switch s.Table.Columns[off].Type.EvalType() {
		case ptypes.ETInt, ptypes.ETDecimal, ptypes.ETDatetime, ptypes.ETTimestamp, ptypes.ETDuration:
		default:
			return false
		}
	}
	s.Desc = desc
	return true
}

// orderByHandleOf reports whether it orders by s's integer handle (its
// clustered primary key, signed: an unsigned one's handles above 2^63 sort
// before small ones).
func (b *Builder) orderByHandleOf(s *Scan, it *ast.ByItem, sc *scope) bool {
	if !s.Table.PKIsHandle || len(sc.cols) != len(s.Table.Columns) {
		return false
	}
	cn, ok := unparen(it.Expr).(*ast.ColumnNameExpr)
	if !ok {
		return false
	}
	c, found, err := sc.find(cn.Name)
	if err != nil || !found || c.idx != s.Table.HandleOffset {
		return false
	}
	return !mysql.HasUnsignedFlag(s.Table.Columns[s.Table.HandleOffset].Type.GetFlag())
}

func (b *Builder) orderByHandle(p Plan, ob *ast.OrderByClause, sc *scope) bool {
	if len(ob.Items) != 1 {
		return false
	}
	for {
		f, ok := p.(*Filter)
		if !ok {
			break
		}
		p = f.Child
	}
	s, ok := p.(*Scan)
	if !ok || (s.Access != TableFullScan && !(s.Access == TableRangeScan && len(s.Ranges) == 1)) || !b.orderByHandleOf(s, ob.Items[0], sc) {
		return false
	}
	s.Desc = ob.Items[0].Desc
	return true
}

func trim(p Plan, n int) Plan {
	cols := p.Columns()[:n]
	t := &Projection{base: base{cols}, Child: p}
	for i, c := range cols {
		t.Exprs = append(t.Exprs, expr.NewColumn(i, c.Type, c.Name))
	}
	return t
}

func (b *Builder) buildLimit(p Plan, l *ast.Limit) (Plan, error) {
	if l == nil {
		return p, nil
	}
	empty := newScope(b)
	lim := &Limit{base: base{p.Columns()}, Child: p}
	var err error
	if lim.Count, err = expr.Compile(l.Count, empty); err != nil {
		return nil, err
	}
	if l.Offset != nil {
		if lim.Offset, err = expr.Compile(l.Offset, empty); err != nil {
			return nil, err
		}
	}
	limitHint(lim)
	return lim, nil
}

// limitHint tells a scan that feeds a LIMIT through projections and
// filters alone how many rows the limit takes, so that its first batch
// reads (and, for FOR UPDATE, locks) about that many instead of a full
// batch. Filters may reject rows; the scan then reads on as usual.
func limitHint(l *Limit) {
	n, ok := constInt(l.Count)
	if !ok {
		return
	}
	if l.Offset != nil {
		off, ok := constInt(l.Offset)
		if !ok {
			return
		}
		n += off
	}
	if x := scanBelow(l.Child); x != nil && n > 0 && n < 1<<20 {
		x.LimitHint = int(n)
	}
}

// scanBelow is the scan right under p's projections and filters, or nil.
func scanBelow(p Plan) *Scan {
	for {
		switch x := p.(type) {
		case *Projection:
			p = x.Child
		case *Filter:
			p = x.Child
		case *Scan:
			return x
		default:
			return nil
		}
	}
}

// existsHint tells an index lookup under an EXISTS subquery (through
// projections and filters) that one row answers it: its first batch
// fetches one table row instead of a batch (TPC-H Q22's NOT EXISTS over
// orders by o_custkey fetched every order of the customer). If filters
// reject that row the scan reads on in full batches.
func existsHint(p Plan) {
	if x := scanBelow(p); x != nil && x.Access == IndexLookup && x.LimitHint == 0 {
		x.LimitHint = 1
	}
}

func constInt(e expr.Expr) (int64, bool) {
	if !expr.IsConstant(e) {
		return 0, false
	}
	d, err := e.Eval(nil, nil)
	if err != nil {
		return 0, false
	}
	n, err := d.ToInt64()
	return n, err == nil && n >= 0
}

func setOpOf(t *ast.SetOprType) (SetOpKind, bool) {
	if t == nil {
		return Union, false
	}
	switch *t {
	case ast.UnionAll:
		return Union, true
	case ast.Except:
		return Except, false
	case ast.ExceptAll:
		return Except, true
	case ast.Intersect:
		return Intersect, false
	case ast.IntersectAll:
		return Intersect, true
	}
	return Union, false
}

func (b *Builder) buildSetOprList(l *ast.SetOprSelectList, parent *scope, sub *Subquery) (Plan, error) {
	var p Plan
	for i, s := range l.Selects {
		q, err := b.buildResultSet(s, parent, sub)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			p = q
			continue
		}
		var after *ast.SetOprType
		switch x := s.(type) {
		case *ast.SelectStmt:
			after = x.AfterSetOperator
		case *ast.SetOprSelectList:
			after = x.AfterSetOperator
		}
		if len(q.Columns()) != len(p.Columns()) {
			return nil, sqlerr.New(1222, "21000", "The used SELECT statements have a different number of columns")
		}
		kind, all := setOpOf(after)
		cols := make([]*Column, len(p.Columns()))
		for j, c := range p.Columns() {
			cc := *c
			cc.Type = unionType(c.Type, q.Columns()[j].Type)
			cols[j] = &cc
		}
		p = &SetOp{base: base{cols}, Left: p, Right: q, Kind: kind, All: all}
	}
	if l.OrderBy != nil || l.Limit != nil {
		return b.orderLimitOutput(p, l.OrderBy, l.Limit)
	}
	return p, nil
}

// unionType is the result type of a set-operation column whose inputs have
// types a and b, following MySQL's aggregation of types: integers widen to
// BIGINT, any string makes a string, any floating point a DOUBLE, any
// decimal a DECIMAL wide enough for both.
func unionType(a, b *ptypes.FieldType) *ptypes.FieldType {
	if a.GetType() == b.GetType() && a.GetFlen() >= b.GetFlen() && a.GetDecimal() >= b.GetDecimal() {
		return a
	}
	if a.GetType() == mysql.TypeNull {
		return b
	}
	if b.GetType() == mysql.TypeNull {
		return a
	}
	ka, kb := types.KindForFieldType(a), types.KindForFieldType(b)
	str := func(k types.Kind) bool { return k == types.KindString || k == types.KindBytes }
	switch {
	case str(ka) || str(kb) || ka == types.KindTime || kb == types.KindTime || ka == types.KindDuration || kb == types.KindDuration:
		if (ka == types.KindTime && kb == types.KindTime) || (ka == types.KindDuration && kb == types.KindDuration) {
			return a
		}
		ft := ptypes.NewFieldType(mysql.TypeVarString)
		ft.SetFlen(max(a.GetFlen(), b.GetFlen(), 20))
		ft.SetCharset(mysql.DefaultCharset)
		ft.SetCollate(collate.Default)
		return ft
	case ka == types.KindFloat64 || kb == types.KindFloat64:
		return ptypes.NewFieldType(mysql.TypeDouble)
	case ka == types.KindDecimal || kb == types.KindDecimal:
		ft := ptypes.NewFieldType(mysql.TypeNewDecimal)
		dec := max(a.GetDecimal(), b.GetDecimal(), 0)
		ft.SetDecimal(dec)
		ft.SetFlen(min(max(a.GetFlen(), b.GetFlen())+dec, 65))
		return ft
	}
	return ptypes.NewFieldType(mysql.TypeLonglong)
}

func (b *Builder) buildSetOpr(s *ast.SetOprStmt, parent *scope, sub *Subquery) (Plan, error) {
	if s.With != nil {
		pop, err := b.pushWith(s.With)
		if err != nil {
			return nil, err
		}
		defer pop()
	}
	p, err := b.buildSetOprList(s.SelectList, parent, sub)
	if err != nil {
		return nil, err
	}
	return b.orderLimitOutput(p, s.OrderBy, s.Limit)
}

// orderLimitOutput applies ORDER BY / LIMIT that name output columns (of a
// set operation).
func (b *Builder) orderLimitOutput(p Plan, ob *ast.OrderByClause, l *ast.Limit) (Plan, error) {
	if ob != nil {
		sc := newScope(b)
		for _, c := range p.Columns() {
			sc.add("", "", c)
		}
		var keys []SortKey
		for _, it := range ob.Items {
			var e expr.Expr
			if pos, ok := intLiteral(it.Expr); ok {
				if pos < 1 || int(pos) > len(p.Columns()) {
					return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%d' in 'order clause'", pos)
				}
				c := p.Columns()[pos-1]
				e = expr.NewColumn(int(pos-1), c.Type, c.Name)
			} else {
				if cn, ok := it.Expr.(*ast.ColumnNameExpr); ok && cn.Name.Table.O != "" {
					// ORDER BY t.a over a set operation: resolve by column name.
					cn2 := *cn.Name
					cn2.Table, cn2.Schema = ast.CIStr{}, ast.CIStr{}
					var err error
					if e, err = sc.resolveColumn(&cn2); err != nil {
						return nil, err
					}
				} else {
					var err error
					if e, err = expr.Compile(it.Expr, sc); err != nil {
						return nil, err
					}
				}
			}
			keys = append(keys, SortKey{Expr: e, Desc: it.Desc})
		}
		p = &Sort{base: base{p.Columns()}, Child: p, Keys: keys}
	}
	return b.buildLimit(p, l)
}

// ---- FROM clause ----

// leaf is one input of a flattened inner-join tree.
type leaf struct {
	plan  Plan
	scope *scope
	scan  *Scan // set when the leaf is a base table (access path candidate)
	// lookup: a derived table of a decorrelated subquery, joined through
	// an index of its table when it can be (groupLookup).
	lookup bool
}

// buildFrom plans the FROM clause into sc. Conjuncts of WHERE (conds) that
// reference a single table are pushed onto it (and drive its access path);
// equalities between tables become hash-join keys. It returns the conjuncts
// it could not place.
func (b *Builder) buildFrom(j *ast.Join, sc *scope, conds []ast.ExprNode, lock bool) (Plan, []ast.ExprNode, error) {
	var leaves []*leaf
	var err error
	if leaves, conds, err = b.flatten(j, sc, leaves, conds, lock); err != nil {
		return nil, nil, err
	}
	straight := b.straight || hasStraightJoin(j)
	scopes := make([]*scope, len(leaves))
	for i, l := range leaves {
		scopes[i] = l.scope
	}
	type cond struct {
		node   ast.ExprNode
		used   []bool
		opaque bool
		done   bool
		class  int // equivalence class of a column = column join (eqclass.go), -1: none
	}
	cs := make([]*cond, len(conds))
	for i, c := range conds {
		used, opaque := refs(c, scopes)
		cs[i] = &cond{node: c, used: used, opaque: opaque, class: -1}
	}
	var classes []*eqClass
	if len(leaves) > 1 {
		var classOf []int
		var derived []derivedEq
		classOf, classes, derived = joinClasses(conds, leaves)
		for i, ci := range classOf {
			cs[i].class = ci
		}
		for _, d := range derived {
			cs = append(cs, &cond{node: d.node, used: d.used, class: d.class})
		}
		for _, c := range cs[:len(conds)] {
			if c.opaque {
				continue
			}
			for _, d := range orImplied(c.node, scopes) {
				used, opaque := refs(d, scopes)
				cs = append(cs, &cond{node: d, used: used, opaque: opaque, class: -1})
			}
		}
	}
	// Single-table conjuncts: filter (and access path) on the leaf.
	// costed: the join order will be costed (every leaf a table with
	// statistics), which inLookup must not take away.
	costed := len(leaves) > 1 && b.Stats != nil
	for _, l := range leaves {
		costed = costed && b.leafStats(l) != nil
	}
	filtered := make([]bool, len(leaves))
	mineOf := make([][]ast.ExprNode, len(leaves)) // for the estimates (cost.go)
	subqOf := make([][]float64, len(leaves))      // the selectivity of each conjunct with a subquery
	for i, l := range leaves {
		var mine []ast.ExprNode
		var subq []expr.Expr // compiled conjuncts with uncorrelated subqueries
		var subqSel []float64
		var subqNode []ast.ExprNode
		var subqOwn []*Subquery // the subquery each compiled last (its own, not a nested one)
		for _, c := range cs {
			if c.done || !onlyUses(c.used, i) {
				continue
			}
			if c.opaque {
				nsub := len(b.Subqueries)
				e, ok := b.compileUncorrelated(c.node, l.scope)
				if !ok {
					continue
				}
				subq = append(subq, e)
				subqSel = append(subqSel, b.subquerySel(c.node, b.Subqueries[nsub:]))
				subqNode = append(subqNode, c.node)
				subqOwn = append(subqOwn, b.Subqueries[len(b.Subqueries)-1])
				c.done = true
				continue
			}
			mine = append(mine, c.node)
			c.done = true
		}
		if len(mine) == 0 && len(subq) == 0 {
			continue
		}
		filtered[i] = true
		mineOf[i], subqOf[i] = mine, subqSel
		var byRange []ast.ExprNode
		if l.scan != nil && len(mine) > 0 {
			byRange = b.chooseAccess(l.scan, l.scope, mine)
		}
		for _, m := range mine {
			e, err := expr.Compile(m, l.scope)
			if err != nil {
				return nil, nil, err
			}
			l.plan = &Filter{base: base{l.plan.Columns()}, Child: l.plan, Cond: e, ByRange: slices.Contains(byRange, m)}
		}
		// After the sargable filters: a subquery's condition is tested
		// on the rows they leave, or reads them through an index
		// (inlookup.go).
		for k, e := range subq {
			if !costed && !lock {
				if jp := b.inLookup(l, subqNode[k], subqOwn[k]); jp != nil {
					l.plan, l.scan = jp, nil
					continue
				}
			}
			l.plan = &Filter{base: base{l.plan.Columns()}, Child: l.plan, Cond: e}
		}
	}
	for i, l := range leaves {
		if l.scan != nil {
			b.annotateLeaf(l, mineOf[i], subqOf[i])
		}
	}
	// Join order (joinorder.go).
	var pending []joinCond
	for _, c := range cs {
		if len(leaves) > 1 && !straight && !c.done && !c.opaque {
			jc := newJoinCond(c.node, c.used, scopes)
			jc.class = c.class
			pending = append(pending, jc)
		}
	}
	var est *estimates
	if !straight {
		est = b.newEstimates(leaves, mineOf, subqOf, pending, classes)
	}
	var order []int
	var driven bool
	var hashed uint64 // leaves joined by a hash join although an index reaches them
	if est != nil {
		order, driven, hashed = costOrder(leaves, filtered, pending, est)
	} else {
		order, driven = joinOrder(leaves, filtered, pending, straight)
	}
	joined := make([]bool, len(leaves))
	first := order[0]
	p := leaves[first].plan
	sc.cols = append(sc.cols, leaves[first].scope.cols...)
	joined[first] = true
	joinedScopes := []*scope{scopes[first]}
	layout := []int{first} // the leaves in the order of their columns in p's rows
	var mask uint64 = 1 << first
	for _, i := range order[1:] {
		joined[i] = true
		l := leaves[i]
		leftScope := &scope{b: b, cols: sc.cols, values: -1}
		jn := &Join{Left: p, Right: l.plan, Type: InnerJoin, Lookup: -1}
		// Combined scope: left columns then this leaf's, shifted.
		off := len(sc.cols)
		for _, c := range l.scope.cols {
			c.idx += off
			sc.cols = append(sc.cols, c)
		}
		var filters []ast.ExprNode
		keyed := map[int]bool{} // the classes joined by a key at this step
		for _, c := range cs {
			if c.done || c.opaque || !subset(c.used, joined) || !c.used[i] {
				continue
			}
			c.done = true
			if c.class >= 0 {
				if keyed[c.class] {
					// Implied by the key of its class already
					// taken and the equalities applied before.
					continue
				}
				keyed[c.class] = true
			}
			if lk, rk, ok := b.equiKeys(c.node, leftScope, l.scope, joinedScopes, scopes[i]); ok {
				jn.LeftKeys = append(jn.LeftKeys, lk)
				jn.RightKey = append(jn.RightKey, rk)
				continue
			}
			filters = append(filters, c.node)
		}
		joinedScopes = append(joinedScopes, scopes[i])
		if hashed&(1<<i) == 0 {
			jn.Lookup = lookupKey(jn, l.scan)
			indexLookup(jn, l.scan, driven)
			if l.lookup {
				groupLookup(jn)
			}
		}
		if jn.Lookup >= 0 || jn.LookupIndex != nil {
			clearEstimates(jn.Right)
		}
		layout = append(layout, i)
		if est != nil {
			jn.EstRows = est.card(mask | 1<<i)
			if jn.Lookup < 0 && jn.LookupIndex == nil && len(jn.LeftKeys) > 0 && est.rows[i] > est.card(mask) {
				// The hash join builds its right input: the smaller
				// one, the tables joined so far. The new table's
				// columns come first in the joined rows.
				jn.Left, jn.Right = jn.Right, jn.Left
				jn.LeftKeys, jn.RightKey = jn.RightKey, jn.LeftKeys
				w := len(l.scope.cols)
				cols := make([]scopeCol, 0, len(sc.cols))
				for _, c := range sc.cols[len(sc.cols)-w:] {
					c.idx -= off
					cols = append(cols, c)
				}
				for _, c := range sc.cols[:len(sc.cols)-w] {
					c.idx += w
					cols = append(cols, c)
				}
				sc.cols = cols
				layout = append([]int{i}, layout[:len(layout)-1]...)
			}
		}
		mask |= 1 << i
		jn.cols = scopeColumns(sc)
		p = jn
		for _, f := range filters {
			e, err := expr.Compile(f, sc)
			if err != nil {
				return nil, nil, err
			}
			p = &Filter{base: base{p.Columns()}, Child: p, Cond: e}
		}
	}
	if !sortedInts(layout) {
		// Restore FROM order of the columns (SELECT * and positions).
		proj := &Projection{Child: p}
		var cols []scopeCol
		pos := map[int]int{} // leaf -> offset in the joined row
		off := 0
		for _, i := range layout {
			pos[i] = off
			off += len(leaves[i].scope.cols)
		}
		for i, l := range leaves {
			for k, c := range l.scope.cols {
				src := pos[i] + k
				proj.Exprs = append(proj.Exprs, expr.NewColumn(src, c.col.Type, c.col.Name))
				c.idx = len(cols)
				cols = append(cols, c)
			}
		}
		sc.cols = cols
		proj.cols = scopeColumns(sc)
		p = proj
	}
	var rest []ast.ExprNode
	for _, c := range cs {
		if !c.done {
			rest = append(rest, c.node)
		}
	}
	return p, rest, nil
}

// compileUncorrelated compiles a conjunct that refs found opaque for one
// leaf, when what made it opaque is only subqueries that read nothing
// outside themselves (x IN (SELECT ...), EXISTS (SELECT ...) over other
// tables): such a condition filters the leaf's rows before any join
// instead of the joined rows (TPC-H Q18's IN subquery ran on 600,000
// joined rows instead of 150,000 orders). An aggregate, a variable or
// RAND(), or a subquery reading any outer column, keeps the conjunct
// where it was (ok false, the builder's state as before).
func (b *Builder) compileUncorrelated(node ast.ExprNode, sc *scope) (expr.Expr, bool) {
	v := &opaqueKinds{}
	node.Accept(v)
	if !v.subquery || v.other {
		return nil, false
	}
	nsub, clause, nctes, straight, depth := len(b.Subqueries), b.clause, len(b.ctes), b.straight, b.viewDepth
	e, err := expr.Compile(node, sc)
	ok := err == nil && len(b.Subqueries) > nsub
	for _, sq := range b.Subqueries[nsub:] {
		ok = ok && !sq.Correlated
	}
	if !ok {
		clear(b.Subqueries[nsub:])
		b.Subqueries = b.Subqueries[:nsub]
		b.clause, b.ctes, b.straight, b.viewDepth = clause, b.ctes[:nctes], straight, depth
		return nil, false
	}
	return e, true
}

// opaqueKinds tells what of a conjunct refVisitor finds opaque: its
// subqueries, and anything else (aggregates, variables, RAND()).
type opaqueKinds struct{ subquery, other bool }

func (v *opaqueKinds) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		v.subquery = true
		if c, ok := x.(*ast.CompareSubqueryExpr); ok {
			// Its left operand is outside the subquery.
			c.L.Accept(v)
		}
		return n, true
	case *ast.PatternInExpr:
		if x.Sel != nil {
			v.subquery = true
			x.Expr.Accept(v)
			for _, e := range x.List {
				e.Accept(v)
			}
			return n, true
		}
	case *ast.AggregateFuncExpr, *ast.VariableExpr:
		v.other = true
		return n, true
	case *ast.FuncCallExpr:
		if strings.EqualFold(x.FnName.L, "rand") {
			v.other = true
		}
	}
	return n, false
}

func (v *opaqueKinds) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// BaseScan returns the table scan under a chain of filters, with the
// filters' conditions (nil if p is not such a chain).
func BaseScan(p Plan) (*Scan, []expr.Expr) {
	var conds []expr.Expr
	for {
		switch n := p.(type) {
		case *Filter:
			conds = append(conds, n.Cond)
			p = n.Child
		case *Scan:
			return n, conds
		default:
			return nil, nil
		}
	}
}

// lookupKey picks the join key that is the clustered key of the right
// table when that table would otherwise be read in full (-1: none).
func lookupKey(jn *Join, scan *Scan) int {
	if scan == nil || scan.Access != TableFullScan || !scan.Table.PKIsHandle {
		return -1
	}
	for k, rk := range jn.RightKey {
		if idx, ok := expr.ColumnIndex(rk); ok && idx == scan.Table.HandleOffset {
			return k
		}
	}
	return -1
}

func sortedInts(xs []int) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] < xs[i-1] {
			return false
		}
	}
	return true
}

func scopeColumns(sc *scope) []*Column {
	out := make([]*Column, len(sc.cols))
	for i, c := range sc.cols {
		out[i] = c.col
	}
	return out
}

func onlyUses(used []bool, i int) bool {
	for j, u := range used {
		if u && j != i {
			return false
		}
	}
	return used[i]
}

func subset(used, avail []bool) bool {
	for j, u := range used {
		if u && (j >= len(avail) || !avail[j]) {
			return false
		}
	}
	return true
}

// equiKeys recognizes l = r where one side uses only already-joined tables
// and the other only the new table.
func (b *Builder) equiKeys(n ast.ExprNode, leftScope, rightScope *scope, leftLeaves []*scope, rightLeaf *scope) (expr.Expr, expr.Expr, bool) {
	for {
		p, ok := n.(*ast.ParenthesesExpr)
		if !ok {
			break
		}
		n = p.Expr
	}
	be, ok := n.(*ast.BinaryOperationExpr)
	if !ok || be.Op != opcode.EQ {
		return nil, nil, false
	}
	lu, lo := refs(be.L, append(append([]*scope{}, leftLeaves...), rightLeaf))
	ru, ro := refs(be.R, append(append([]*scope{}, leftLeaves...), rightLeaf))
	if lo || ro {
		return nil, nil, false
	}
	k := len(leftLeaves)
	leftOnly := func(u []bool) bool { return !u[k] && anyTrue(u[:k]) }
	rightOnly := func(u []bool) bool { return u[k] && !anyTrue(u[:k]) }
	var ln, rn ast.ExprNode
	switch {
	case leftOnly(lu) && rightOnly(ru):
		ln, rn = be.L, be.R
	case leftOnly(ru) && rightOnly(lu):
		ln, rn = be.R, be.L
	default:
		return nil, nil, false
	}
	le, err := expr.Compile(ln, leftScope)
	if err != nil {
		return nil, nil, false
	}
	re, err := expr.Compile(rn, rightScope)
	if err != nil {
		return nil, nil, false
	}
	if kindClass(le.Type()) != kindClass(re.Type()) {
		// '1' = 1 is true in MySQL (compared as numbers) but the hash keys
		// differ: leave mixed-class equalities to a filter.
		return nil, nil, false
	}
	return le, re, true
}

// kindClass groups value kinds whose equal values have equal hash keys.
func kindClass(ft *ptypes.FieldType) int {
	switch types.KindForFieldType(ft) {
	case types.KindInt64, types.KindUint64, types.KindFloat64, types.KindDecimal:
		return 1
	case types.KindString, types.KindBytes:
		return 2
	case types.KindTime:
		return 3
	case types.KindDuration:
		return 4
	}
	return 0
}

func anyTrue(u []bool) bool {
	for _, x := range u {
		if x {
			return true
		}
	}
	return false
}

// flatten collects the inputs of a tree of inner/cross joins; ON conditions
// of inner joins join the WHERE conjuncts. Outer joins are planned as a unit.
func (b *Builder) flatten(n ast.ResultSetNode, parent *scope, leaves []*leaf, conds []ast.ExprNode, lock bool) ([]*leaf, []ast.ExprNode, error) {
	switch x := n.(type) {
	case *ast.Join:
		if x.Right == nil {
			return b.flatten(x.Left, parent, leaves, conds, lock)
		}
		if x.Tp == ast.CrossJoin && !x.NaturalJoin && len(x.Using) == 0 {
			var err error
			if leaves, conds, err = b.flatten(x.Left, parent, leaves, conds, lock); err != nil {
				return nil, nil, err
			}
			if leaves, conds, err = b.flatten(x.Right, parent, leaves, conds, lock); err != nil {
				return nil, nil, err
			}
			if x.On != nil {
				conds = splitAnd(x.On.Expr, conds)
			}
			return leaves, conds, nil
		}
		l, err := b.buildOuterJoin(x, parent, lock)
		if err != nil {
			return nil, nil, err
		}
		return append(leaves, l), conds, nil
	case *ast.TableSource:
		l, err := b.buildTableSource(x, parent, lock)
		if err != nil {
			return nil, nil, err
		}
		return append(leaves, l), conds, nil
	}
	return nil, nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this FROM clause")
}

func (b *Builder) buildOuterJoin(j *ast.Join, parent *scope, lock bool) (*leaf, error) {
	left, right := j.Left, j.Right
	if j.Tp == ast.RightJoin {
		left, right = right, left
	}
	ls := newScope(b)
	ls.parent, ls.sub = parent.parent, parent.sub
	lp, rest, err := b.buildFrom(asJoin(left), ls, nil, lock)
	if err != nil {
		return nil, err
	}
	_ = rest
	rs := newScope(b)
	rs.parent, rs.sub = parent.parent, parent.sub
	// The ON conjuncts that read the inner (right) side alone filter its
	// rows before the join: a right row they reject matches no left row,
	// which is all such a conjunct does in the join. So they drive the
	// right side's access path and run in the coprocessor with its scan,
	// and the columns only they read stay out of the join (TPC-H Q13's
	// o_comment NOT LIKE ... was tested per pair, with every order's
	// comment in the hash table). The right side is planned again with
	// them when there are any.
	rp, _, err := b.buildFrom(asJoin(right), rs, nil, lock)
	if err != nil {
		return nil, err
	}
	var conds, inner []ast.ExprNode
	if j.On != nil {
		for _, c := range splitAnd(j.On.Expr, nil) {
			if used, opaque := refs(c, []*scope{ls, rs}); !opaque && used[1] && !used[0] && resolvesIn(c, rs) {
				inner = append(inner, c)
				continue
			}
			conds = append(conds, c)
		}
	}
	if len(inner) > 0 {
		rs = newScope(b)
		rs.parent, rs.sub = parent.parent, parent.sub
		var innerRest []ast.ExprNode
		if rp, innerRest, err = b.buildFrom(asJoin(right), rs, inner, lock); err != nil {
			return nil, err
		}
		conds = append(conds, innerRest...)
	}
	using, err := usingColumns(j, ls, rs)
	if err != nil {
		return nil, err
	}
	for _, u := range using {
		conds = append(conds, &ast.BinaryOperationExpr{Op: opcode.EQ,
			L: &ast.ColumnNameExpr{Name: &ast.ColumnName{Table: ast.NewCIStr(u.l.table), Name: ast.NewCIStr(u.l.col.Name)}},
			R: &ast.ColumnNameExpr{Name: &ast.ColumnName{Table: ast.NewCIStr(u.r.table), Name: ast.NewCIStr(u.r.col.Name)}}})
	}
	js := newScope(b)
	js.parent, js.sub = parent.parent, parent.sub
	js.cols = append(js.cols, ls.cols...)
	for _, c := range rs.cols {
		c.idx += len(ls.cols)
		js.cols = append(js.cols, c)
	}
	jn := &Join{Left: lp, Right: rp, Type: LeftJoin, Lookup: -1}
	if j.Tp != ast.LeftJoin && j.Tp != ast.RightJoin {
		jn.Type = InnerJoin
	}
	if len(conds) > 0 {
		var others []ast.ExprNode
		for _, c := range conds {
			if lk, rk, ok := b.equiKeys(c, ls, rs, []*scope{ls}, rs); ok {
				jn.LeftKeys = append(jn.LeftKeys, lk)
				jn.RightKey = append(jn.RightKey, rk)
				continue
			}
			others = append(others, c)
		}
		for _, c := range others {
			e, err := expr.Compile(c, js)
			if err != nil {
				return nil, err
			}
			if jn.Cond == nil {
				jn.Cond = e
			} else {
				jn.Cond = &andExpr{jn.Cond, e}
			}
		}
	}
	rscan, _ := BaseScan(rp)
	jn.Lookup = lookupKey(jn, rscan)
	jn.cols = scopeColumns(js)
	out := &leaf{plan: jn, scope: js}
	if len(using) > 0 {
		return coalesceUsing(b, jn, js, len(ls.cols), using), nil
	}
	if j.Tp == ast.RightJoin {
		// Restore the written column order: original left (now right) first.
		rs2 := newScope(b)
		rs2.parent, rs2.sub = js.parent, js.sub
		proj := &Projection{Child: jn}
		nr := len(rs.cols)
		for i := 0; i < nr; i++ {
			c := js.cols[len(ls.cols)+i]
			proj.Exprs = append(proj.Exprs, expr.NewColumn(c.idx, c.col.Type, c.col.Name))
			c.idx = i
			rs2.cols = append(rs2.cols, c)
		}
		for i := 0; i < len(ls.cols); i++ {
			c := js.cols[i]
			proj.Exprs = append(proj.Exprs, expr.NewColumn(c.idx, c.col.Type, c.col.Name))
			c.idx = nr + i
			rs2.cols = append(rs2.cols, c)
		}
		proj.cols = scopeColumns(rs2)
		out = &leaf{plan: proj, scope: rs2}
	}
	return out, nil
}

// resolvesIn reports whether every column name of node resolves among
// sc's own columns (none in an outer query's), and node calls no
// function whose value changes between calls.
func resolvesIn(node ast.ExprNode, sc *scope) bool {
	v := &resolveVisitor{sc: sc, ok: true}
	node.Accept(v)
	vv := &volatileVisitor{}
	node.Accept(vv)
	return v.ok && !vv.found
}

type resolveVisitor struct {
	sc *scope
	ok bool
}

func (v *resolveVisitor) Enter(n ast.Node) (ast.Node, bool) {
	if cn, isCol := n.(*ast.ColumnNameExpr); isCol {
		if _, found, err := v.sc.find(cn.Name); err != nil || !found {
			v.ok = false
		}
		return n, true
	}
	return n, !v.ok
}

func (v *resolveVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, v.ok }

// usingPair is one column of USING / NATURAL JOIN on both sides.
type usingPair struct{ l, r scopeCol }

// usingColumns lists the join columns of USING (...) or NATURAL JOIN.
func usingColumns(j *ast.Join, ls, rs *scope) ([]usingPair, error) {
	var names []string
	switch {
	case j.NaturalJoin:
		for _, c := range ls.cols {
			if c.hidden || c.qualOnly {
				continue
			}
			for _, r := range rs.cols {
				if !r.hidden && !r.qualOnly && strings.EqualFold(c.col.Name, r.col.Name) {
					names = append(names, c.col.Name)
					break
				}
			}
		}
	default:
		for _, n := range j.Using {
			names = append(names, n.Name.O)
		}
	}
	var out []usingPair
	for _, n := range names {
		cn := &ast.ColumnName{Name: ast.NewCIStr(n)}
		l, okL, err := ls.find(cn)
		if err != nil {
			return nil, err
		}
		r, okR, err := rs.find(cn)
		if err != nil {
			return nil, err
		}
		if !okL || !okR {
			return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'from clause'", n)
		}
		out = append(out, usingPair{l: l, r: r})
	}
	return out, nil
}

// coalesceUsing shapes the output of a USING / NATURAL join like MySQL:
// the join columns once (from the preserved side), then the other columns
// of the left and of the right side. The right side's copies stay
// reachable by qualified name only.
func coalesceUsing(b *Builder, jn *Join, js *scope, nLeft int, using []usingPair) *leaf {
	out := newScope(b)
	out.parent, out.sub = js.parent, js.sub
	proj := &Projection{Child: jn}
	add := func(c scopeCol, src int) {
		proj.Exprs = append(proj.Exprs, expr.NewColumn(src, c.col.Type, c.col.Name))
		c.idx = len(out.cols)
		out.cols = append(out.cols, c)
	}
	isUsing := func(idx int, left bool) bool {
		for _, u := range using {
			if (left && u.l.idx == idx) || (!left && u.r.idx+nLeft == idx) {
				return true
			}
		}
		return false
	}
	for _, u := range using {
		add(u.l, u.l.idx)
	}
	for _, c := range js.cols[:nLeft] {
		if !isUsing(c.idx, true) {
			add(c, c.idx)
		}
	}
	for _, c := range js.cols[nLeft:] {
		if !isUsing(c.idx, false) {
			add(c, c.idx)
		}
	}
	for _, u := range using {
		c := u.r
		c.hidden, c.qualOnly = true, true
		add(c, u.r.idx+nLeft)
	}
	proj.cols = scopeColumns(out)
	return &leaf{plan: proj, scope: out}
}

func asJoin(n ast.ResultSetNode) *ast.Join {
	if j, ok := n.(*ast.Join); ok {
		return j
	}
	return &ast.Join{Left: n}
}

func (b *Builder) buildTableSource(ts *ast.TableSource, parent *scope, lock bool) (*leaf, error) {
	sc := newScope(b)
	if parent != nil {
		sc.parent, sc.sub = parent.parent, parent.sub
	}
	switch src := ts.Source.(type) {
	case *ast.TableName:
		alias := src.Name.O
		if ts.AsName.O != "" {
			alias = ts.AsName.O
		}
		if cte := b.findCTE(src); cte != nil {
			return b.buildCTERef(sc, cte, alias)
		}
		db := src.Schema.O
		if db == "" {
			db = b.DB
		}
		if db == "" {
			return nil, sqlerr.New(sqlerr.ErNoDB, "3D000", "No database selected")
		}
		if infoSchemaTable(db) {
			return b.buildInfoSchema(sc, src.Name.O, alias)
		}
		tbl := b.Schema.Table(db, src.Name.O)
		if tbl == nil {
			return nil, sqlerr.New(sqlerr.ErNoSuchTable, "42S02", "Table '%s.%s' doesn't exist", db, src.Name.O)
		}
		if tbl.IsView() {
			return b.buildView(sc, tbl, alias)
		}
		scan := &Scan{DB: db, Table: tbl, Alias: alias, Access: TableFullScan, Lock: lock}
		if lock {
			scan.LockOpts = b.lockOpts
		}
		for _, c := range tbl.Columns {
			col := &Column{Name: c.Name, OrgName: c.Name, Table: alias, OrgTable: tbl.Name, DB: db, Type: c.Type}
			scan.cols = append(scan.cols, col)
			sc.add(db, alias, col)
		}
		return &leaf{plan: scan, scope: sc, scan: scan}, nil
	case *ast.SelectStmt, *ast.SetOprStmt:
		if ts.AsName.O == "" {
			return nil, sqlerr.New(1248, "42000", "Every derived table must have its own alias")
		}
		p, err := b.buildResultSet(src, nil, nil)
		if err != nil {
			return nil, err
		}
		cols := make([]*Column, len(p.Columns()))
		for i, c := range p.Columns() {
			cc := *c
			cc.Table, cc.OrgTable, cc.DB = ts.AsName.O, ts.AsName.O, ""
			if i < len(ts.ColumnNames) {
				cc.Name = ts.ColumnNames[i].O
			}
			cols[i] = &cc
			sc.add("", ts.AsName.O, &cc)
		}
		sel, isSel := src.(*ast.SelectStmt)
		return &leaf{plan: &Projection{base: base{cols}, Child: p, Exprs: identity(p.Columns())}, scope: sc, lookup: isSel && b.lookupSels[sel]}, nil
	case *ast.Join:
		p, _, err := b.buildFrom(src, sc, nil, lock)
		if err != nil {
			return nil, err
		}
		return &leaf{plan: p, scope: sc}, nil
	}
	return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this table source")
}

// buildView plans a view as a derived table named alias.
func (b *Builder) buildView(sc *scope, tbl *catalog.TableInfo, alias string) (*leaf, error) {
	if b.ParseView == nil || b.viewDepth > 32 {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "view %s cannot be expanded here", tbl.Name)
	}
	node, err := b.ParseView(tbl.ViewSQL)
	if err != nil {
		return nil, err
	}
	// The view's table names resolve in its own database, and the
	// caller's CTEs are not visible inside it.
	savedDB, savedCTEs := b.DB, b.ctes
	if d := b.Schema.DBByID(tbl.DBID); d != nil {
		b.DB = d.Name
	}
	b.ctes = nil
	b.viewDepth++
	p, err := b.buildResultSet(node, nil, nil)
	b.viewDepth--
	b.DB, b.ctes = savedDB, savedCTEs
	if err != nil {
		return nil, err
	}
	cols := make([]*Column, len(p.Columns()))
	for i, c := range p.Columns() {
		cc := *c
		cc.Table, cc.OrgTable = alias, tbl.Name
		if i < len(tbl.ViewColumns) {
			cc.Name = tbl.ViewColumns[i]
		}
		cols[i] = &cc
		sc.add("", alias, &cc)
	}
	return &leaf{plan: &Projection{base: base{cols}, Child: p, Exprs: identity(p.Columns())}, scope: sc}, nil
}

func identity(cols []*Column) []expr.Expr {
	out := make([]expr.Expr, len(cols))
	for i, c := range cols {
		out[i] = expr.NewColumn(i, c.Type, c.Name)
	}
	return out
}

// andExpr is the conjunction of two join conditions (three-valued).
type andExpr struct{ l, r expr.Expr }

func (a *andExpr) Eval(ctx *expr.EvalContext, row []types.Datum) (types.Datum, error) {
	lv, err := a.l.Eval(ctx, row)
	if err != nil {
		return types.Null, err
	}
	lt, lnull, err := lv.ToBool()
	if err != nil {
		return types.Null, err
	}
	if !lnull && !lt {
		return boolDatum(false), nil
	}
	rv, err := a.r.Eval(ctx, row)
	if err != nil {
		return types.Null, err
	}
	rt, rnull, err := rv.ToBool()
	if err != nil {
		return types.Null, err
	}
	if !rnull && !rt {
		return boolDatum(false), nil
	}
	if lnull || rnull {
		return types.Null, nil
	}
	return boolDatum(true), nil
}

func (a *andExpr) Type() *ptypes.FieldType { return boolType() }
func (a *andExpr) String() string          { return "and(" + a.l.String() + ", " + a.r.String() + ")" }

// lockOptions maps a locking read's NOWAIT, SKIP LOCKED and WAIT n to the
// storage's options (FOR SHARE locks as FOR UPDATE does).
func lockOptions(li *ast.SelectLockInfo) kv.LockOptions {
	switch li.LockType {
	case ast.SelectLockForUpdateNoWait, ast.SelectLockForShareNoWait:
		return kv.LockOptions{NoWait: true}
	case ast.SelectLockForUpdateSkipLocked, ast.SelectLockForShareSkipLocked:
		return kv.LockOptions{SkipLocked: true}
	case ast.SelectLockForUpdateWaitN:
		if li.WaitSec == 0 {
			return kv.LockOptions{NoWait: true}
		}
		return kv.LockOptions{Wait: time.Duration(li.WaitSec) * time.Second}
	}
	return kv.LockOptions{}
}
