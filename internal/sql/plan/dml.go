package plan

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// Assign sets table column Offset to Expr.
type Assign struct {
	Offset int
	Expr   expr.Expr
}

// Insert writes rows into a table. Rows hold one expression per entry of
// Columns; a nil expression means DEFAULT. Select, when set, produces the
// rows instead. OnDup assignments are evaluated over the existing row
// followed by the row that failed to insert (VALUES(col)).
type Insert struct {
	base
	DB      string
	Table   *catalog.TableInfo
	Targets []int
	Rows    [][]expr.Expr
	Select  Plan
	Replace bool
	Ignore  bool
	OnDup   []Assign
}

func (i *Insert) Children() []Plan {
	if i.Select != nil {
		return []Plan{i.Select}
	}
	return nil
}

func (i *Insert) Explain() string {
	if i.Replace {
		return "Replace table=" + i.Table.Name
	}
	return "Insert table=" + i.Table.Name
}

// Update rewrites the rows Source produces. Source yields full table rows
// followed by the row handle. A multi-table UPDATE sets Multi instead: Source
// yields joined rows and each Target names where a table's row starts.
type Update struct {
	base
	Table   *catalog.TableInfo
	Source  Plan
	Assigns []Assign
	Multi   []Target
}

// Target is a table changed by a multi-table UPDATE / DELETE: its row is
// the joined row's columns [Offset, Offset+len(Table.Columns)); its handle
// is its clustered key. Assigns' expressions read the whole joined row.
type Target struct {
	Table   *catalog.TableInfo
	Offset  int
	Assigns []Assign
}

func (u *Update) Children() []Plan { return []Plan{u.Source} }
func (u *Update) Explain() string {
	if len(u.Multi) > 0 {
		return "Update tables=" + targetNames(u.Multi)
	}
	return "Update table=" + u.Table.Name
}

// Delete removes the rows Source produces (full rows followed by handles),
// or, with Multi, the rows of each target table in Source's joined rows.
type Delete struct {
	base
	Table  *catalog.TableInfo
	Source Plan
	Multi  []Target
}

func (d *Delete) Children() []Plan { return []Plan{d.Source} }
func (d *Delete) Explain() string {
	if len(d.Multi) > 0 {
		return "Delete tables=" + targetNames(d.Multi)
	}
	return "Delete table=" + d.Table.Name
}

func targetNames(ts []Target) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Table.Name
	}
	return strings.Join(names, ",")
}

// multiSource plans the joined rows of a multi-table UPDATE / DELETE.
func (b *Builder) multiSource(refs *ast.TableRefsClause, where ast.ExprNode) (Plan, *scope, error) {
	sc := newScope(b)
	p, conds, err := b.buildFrom(refs.TableRefs, sc, splitAnd(where, nil), false)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range conds {
		e, err := expr.Compile(c, sc)
		if err != nil {
			return nil, nil, err
		}
		p = &Filter{base: base{p.Columns()}, Child: p, Cond: e}
	}
	return p, sc, nil
}

// target finds the table a multi-table statement changes by its name or
// alias in the joined scope.
func (b *Builder) target(sc *scope, name string, targets []Target) (int, []Target, error) {
	for _, c := range sc.cols {
		if c.qualOnly || !strings.EqualFold(c.table, name) {
			continue
		}
		t := b.Schema.Table(c.col.DB, c.col.OrgTable)
		if t == nil || t.IsView() {
			return 0, nil, sqlerr.New(1288, "HY000", "The target table %s of the UPDATE/DELETE is not updatable", name)
		}
		if !t.PKIsHandle {
			return 0, nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support multi-table UPDATE/DELETE of a table without an integer primary key (%s)", t.Name)
		}
		for i, tg := range targets {
			if tg.Offset == c.idx {
				return i, targets, nil
			}
		}
		return len(targets), append(targets, Target{Table: t, Offset: c.idx}), nil
	}
	return 0, nil, sqlerr.New(sqlerr.ErUnknownTable, "42S02", "Unknown table '%s' in MULTI DELETE", name)
}

func (b *Builder) table(tn *ast.TableName) (string, *catalog.TableInfo, error) {
	db := tn.Schema.O
	if db == "" {
		db = b.DB
	}
	if db == "" {
		return "", nil, sqlerr.New(sqlerr.ErNoDB, "3D000", "No database selected")
	}
	t := b.Schema.Table(db, tn.Name.O)
	if t == nil {
		return "", nil, sqlerr.New(sqlerr.ErNoSuchTable, "42S02", "Table '%s.%s' doesn't exist", db, tn.Name.O)
	}
	if t.IsView() {
		return "", nil, sqlerr.New(1471, "HY000", "The target table %s of the DML is not updatable", t.Name)
	}
	return db, t, nil
}

func singleTable(refs *ast.TableRefsClause) (*ast.TableName, string, bool) {
	if refs == nil || refs.TableRefs == nil || refs.TableRefs.Right != nil {
		return nil, "", false
	}
	ts, ok := refs.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return nil, "", false
	}
	tn, ok := ts.Source.(*ast.TableName)
	if !ok {
		return nil, "", false
	}
	return tn, ts.AsName.O, true
}

func tableScope(b *Builder, db, alias string, t *catalog.TableInfo) *scope {
	sc := newScope(b)
	if alias == "" {
		alias = t.Name
	}
	for _, c := range t.Columns {
		sc.add(db, alias, &Column{Name: c.Name, OrgName: c.Name, Table: alias, OrgTable: t.Name, DB: db, Type: c.Type})
	}
	return sc
}

// BuildInsert plans INSERT / REPLACE.
func (b *Builder) BuildInsert(n *ast.InsertStmt) (*Insert, error) {
	tn, _, ok := singleTable(n.Table)
	if !ok {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this INSERT target")
	}
	db, t, err := b.table(tn)
	if err != nil {
		return nil, err
	}
	ins := &Insert{DB: db, Table: t, Replace: n.IsReplace, Ignore: n.IgnoreErr}
	if len(n.Columns) == 0 {
		for _, c := range t.Columns {
			ins.Targets = append(ins.Targets, c.Offset)
		}
	} else {
		seen := map[int]bool{}
		for _, cn := range n.Columns {
			c := t.Column(cn.Name.O)
			if c == nil {
				return nil, unknownColumn(cn, "field list")
			}
			if seen[c.Offset] {
				return nil, sqlerr.New(sqlerr.ErFieldSpecifiedTwice, "42000", "Column '%s' specified twice", c.Name)
			}
			seen[c.Offset] = true
			ins.Targets = append(ins.Targets, c.Offset)
		}
	}
	empty := newScope(b)
	for i, row := range n.Lists {
		if len(row) != len(ins.Targets) && !(len(row) == 0 && len(n.Columns) == 0) {
			return nil, sqlerr.New(sqlerr.ErWrongValueCount, "21S01", "Column count doesn't match value count at row %d", i+1)
		}
		exprs := make([]expr.Expr, len(ins.Targets))
		if len(row) == 0 {
			ins.Rows = append(ins.Rows, exprs) // VALUES (): all defaults
			continue
		}
		for j, v := range row {
			if d, ok := v.(*ast.DefaultExpr); ok && d.Name == nil {
				continue
			}
			e, err := expr.Compile(v, empty)
			if err != nil {
				return nil, err
			}
			exprs[j] = e
		}
		ins.Rows = append(ins.Rows, exprs)
	}
	if n.Select != nil {
		p, err := b.buildResultSet(n.Select, nil, nil)
		if err != nil {
			return nil, err
		}
		if len(p.Columns()) != len(ins.Targets) {
			return nil, sqlerr.New(sqlerr.ErWrongValueCount, "21S01", "Column count doesn't match value count at row 1")
		}
		ins.Select = p
	}
	if len(n.OnDuplicate) > 0 {
		sc := tableScope(b, db, "", t)
		sc.values = len(t.Columns)
		sc.valuesTable = tableScope(b, db, "", t)
		for _, a := range n.OnDuplicate {
			c := t.Column(a.Column.Name.O)
			if c == nil {
				return nil, unknownColumn(a.Column, "field list")
			}
			e, err := expr.Compile(a.Expr, sc)
			if err != nil {
				return nil, err
			}
			ins.OnDup = append(ins.OnDup, Assign{Offset: c.Offset, Expr: e})
		}
	}
	return ins, nil
}

// dmlSource plans the row source of UPDATE / DELETE: access path, WHERE,
// ORDER BY and LIMIT over full rows with the handle appended.
func (b *Builder) dmlSource(db, alias string, t *catalog.TableInfo, where ast.ExprNode, order *ast.OrderByClause, limit *ast.Limit) (Plan, *scope, error) {
	sc := tableScope(b, db, alias, t)
	scan := &Scan{DB: db, Table: t, Alias: alias, Access: TableFullScan, WithHandle: true}
	scan.cols = scopeColumns(sc)
	conds := splitAnd(where, nil)
	b.chooseAccess(scan, sc, conds)
	var p Plan = scan
	for _, c := range conds {
		e, err := expr.Compile(c, sc)
		if err != nil {
			return nil, nil, err
		}
		p = &Filter{base: base{p.Columns()}, Child: p, Cond: e}
	}
	if order != nil {
		var keys []SortKey
		for _, it := range order.Items {
			e, err := expr.Compile(it.Expr, sc)
			if err != nil {
				return nil, nil, err
			}
			keys = append(keys, SortKey{Expr: e, Desc: it.Desc})
		}
		p = &Sort{base: base{p.Columns()}, Child: p, Keys: keys}
	}
	p, err := b.buildLimit(p, limit)
	return p, sc, err
}

// BuildUpdate plans a single-table UPDATE.
func (b *Builder) BuildUpdate(n *ast.UpdateStmt) (*Update, error) {
	tn, alias, ok := singleTable(n.TableRefs)
	if !ok || n.MultipleTable {
		return b.buildMultiUpdate(n)
	}
	db, t, err := b.table(tn)
	if err != nil {
		return nil, err
	}
	src, sc, err := b.dmlSource(db, alias, t, n.Where, n.Order, n.Limit)
	if err != nil {
		return nil, err
	}
	up := &Update{Table: t, Source: src}
	for _, a := range n.List {
		if a.Column.Table.O != "" && !strings.EqualFold(a.Column.Table.O, t.Name) && !strings.EqualFold(a.Column.Table.O, alias) {
			return nil, unknownColumn(a.Column, "field list")
		}
		c := t.Column(a.Column.Name.O)
		if c == nil {
			return nil, unknownColumn(a.Column, "field list")
		}
		var e expr.Expr
		if d, ok := a.Expr.(*ast.DefaultExpr); ok && d.Name == nil {
			e = nil
		} else if e, err = expr.Compile(a.Expr, sc); err != nil {
			return nil, err
		}
		up.Assigns = append(up.Assigns, Assign{Offset: c.Offset, Expr: e})
	}
	return up, nil
}

// BuildDelete plans a single-table DELETE.
func (b *Builder) BuildDelete(n *ast.DeleteStmt) (*Delete, error) {
	tn, alias, ok := singleTable(n.TableRefs)
	if !ok || n.IsMultiTable {
		return b.buildMultiDelete(n)
	}
	db, t, err := b.table(tn)
	if err != nil {
		return nil, err
	}
	src, _, err := b.dmlSource(db, alias, t, n.Where, n.Order, n.Limit)
	if err != nil {
		return nil, err
	}
	return &Delete{Table: t, Source: src}, nil
}

func (b *Builder) buildMultiUpdate(n *ast.UpdateStmt) (*Update, error) {
	if n.Order != nil || n.Limit != nil {
		return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect usage of UPDATE and ORDER BY / LIMIT")
	}
	src, sc, err := b.multiSource(n.TableRefs, n.Where)
	if err != nil {
		return nil, err
	}
	up := &Update{Source: src}
	for _, a := range n.List {
		c, found, err := sc.find(a.Column)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, unknownColumn(a.Column, "field list")
		}
		var i int
		if i, up.Multi, err = b.target(sc, c.table, up.Multi); err != nil {
			return nil, err
		}
		tg := &up.Multi[i]
		col := tg.Table.Column(c.col.OrgName)
		if col == nil {
			return nil, unknownColumn(a.Column, "field list")
		}
		var e expr.Expr
		if d, ok := a.Expr.(*ast.DefaultExpr); !ok || d.Name != nil {
			if e, err = expr.Compile(a.Expr, sc); err != nil {
				return nil, err
			}
		}
		tg.Assigns = append(tg.Assigns, Assign{Offset: col.Offset, Expr: e})
	}
	up.Table = up.Multi[0].Table
	return up, nil
}

func (b *Builder) buildMultiDelete(n *ast.DeleteStmt) (*Delete, error) {
	if n.Order != nil || n.Limit != nil {
		return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect usage of DELETE and ORDER BY / LIMIT")
	}
	src, sc, err := b.multiSource(n.TableRefs, n.Where)
	if err != nil {
		return nil, err
	}
	del := &Delete{Source: src}
	if n.Tables == nil || len(n.Tables.Tables) == 0 {
		return nil, sqlerr.New(sqlerr.ErParse, "42000", "DELETE names no table to delete from")
	}
	for _, tn := range n.Tables.Tables {
		if _, del.Multi, err = b.target(sc, tn.Name.O, del.Multi); err != nil {
			return nil, err
		}
	}
	del.Table = del.Multi[0].Table
	return del, nil
}
