package sql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// This file holds the DDL that applications and dump tools send beyond
// CREATE/DROP/ALTER of tables and indexes: table options (COMMENT,
// CHARSET, COLLATE), generated columns, foreign keys, CREATE TABLE ...
// LIKE / AS SELECT, RENAME TABLE, ALTER TABLE RENAME/CHANGE/MODIFY, and
// temporary tables.

// tableOptions applies CREATE TABLE options; unknown ones are accepted and
// ignored, as MySQL ignores options of other engines.
func tableOptions(t *catalog.TableInfo, d *catalog.DBInfo, opts []*ast.TableOption) error {
	for _, o := range opts {
		switch o.Tp {
		case ast.TableOptionComment:
			t.Comment = o.StrValue
		case ast.TableOptionCharset:
			cs, ok := infoschema.LookupCharset(o.StrValue)
			if !ok {
				return sqlerr.New(1115, "42000", "Unknown character set: '%s'", o.StrValue)
			}
			if t.Collate == "" || infoschema.CharsetOfCollation(t.Collate) != cs.Name {
				t.Collate = defaultCollationOf(cs.Name)
			}
		case ast.TableOptionCollate:
			c, ok := infoschema.LookupCollation(o.StrValue)
			if !ok {
				return sqlerr.New(1273, "HY000", "Unknown collation: '%s'", o.StrValue)
			}
			t.Collate = c.Name
		case ast.TableOptionShardRowID:
			if o.UintValue > maxAutoRandomBits {
				return sqlerr.New(sqlerr.ErWrongArguments, "HY000", "SHARD_ROW_ID_BITS must be at most %d", maxAutoRandomBits)
			}
			t.ShardRowIDBits = int(o.UintValue)
		}
	}
	if t.Collate == "" && d != nil && d.Collate != "" {
		t.Collate = d.Collate
	}
	if t.Collate == "" {
		t.Collate = infoschema.DefaultCollation
	}
	return nil
}

// defaultCollationOf is a character set's default collation.
func defaultCollationOf(cs string) string {
	if c, ok := infoschema.LookupCharset(cs); ok {
		return c.DefaultCollation
	}
	return infoschema.DefaultCollation
}

// setColumnCollation applies a column's COLLATE clause.
func setColumnCollation(ft *ptypes.FieldType, name string) error {
	c, ok := infoschema.LookupCollation(name)
	if !ok {
		return sqlerr.New(1273, "HY000", "Unknown collation: '%s'", name)
	}
	switch types.KindForFieldType(ft) {
	case types.KindString, types.KindBytes:
		ft.SetCharset(c.Charset)
		ft.SetCollate(c.Name)
	}
	return nil
}

// commentText is the text of a COMMENT clause.
func commentText(e ast.ExprNode) string {
	if v, ok := e.(ast.ValueExpr); ok {
		return v.GetString()
	}
	return ""
}

// restoreExpr renders an expression as SQL text (for generated columns).
func restoreExpr(e ast.Node) (string, error) {
	var sb strings.Builder
	if err := e.Restore(format.NewRestoreCtx(format.RestoreStringSingleQuotes|format.RestoreKeyWordLowercase|format.RestoreNameBackQuotes, &sb)); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// setGenerated records a GENERATED ALWAYS AS (expr) [VIRTUAL|STORED] column.
func (s *Session) setGenerated(col *catalog.ColumnInfo, opt *ast.ColumnOption) error {
	text, err := restoreExpr(opt.Expr)
	if err != nil {
		return err
	}
	col.GeneratedExpr, col.GeneratedStored = text, opt.Stored
	return nil
}

// checkGenerated validates the generated columns of t: their expressions
// compile over the table's columns and read no later generated column.
func checkGenerated(t *catalog.TableInfo) error {
	for _, c := range t.Columns {
		if !c.IsGenerated() {
			continue
		}
		if c.AutoIncrement || c.HasDefault {
			return sqlerr.New(3109, "HY000", "Generated column '%s' cannot refer to auto-increment column.", c.Name)
		}
		if err := exec.CheckGenerated(t, c); err != nil {
			return err
		}
	}
	return nil
}

func referOpt(o ast.ReferOptionType) string {
	switch o {
	case ast.ReferOptionRestrict:
		return "RESTRICT"
	case ast.ReferOptionCascade:
		return "CASCADE"
	case ast.ReferOptionSetNull:
		return "SET NULL"
	case ast.ReferOptionNoAction:
		return "NO ACTION"
	case ast.ReferOptionSetDefault:
		return "SET DEFAULT"
	}
	return ""
}

// addForeignKey adds a FOREIGN KEY constraint to t (in database db), with
// an index on its columns when no index starts with them, as InnoDB does.
func (s *Session) addForeignKey(schema *catalog.Schema, db string, t *catalog.TableInfo, c *ast.Constraint) error {
	r := c.Refer
	if r == nil || r.Table == nil {
		return sqlerr.New(sqlerr.ErParse, "42000", "FOREIGN KEY needs REFERENCES")
	}
	if t.Temporary {
		return sqlerr.New(1215, "HY000", "Cannot add foreign key constraint")
	}
	fk := &catalog.ForeignKeyInfo{Name: c.Name, RefDB: r.Table.Schema.O, RefTable: r.Table.Name.O}
	if fk.RefDB == "" {
		fk.RefDB = db
	}
	if r.OnDelete != nil {
		fk.OnDelete = referOpt(r.OnDelete.ReferOpt)
	}
	if r.OnUpdate != nil {
		fk.OnUpdate = referOpt(r.OnUpdate.ReferOpt)
	}
	if fk.OnDelete == "SET DEFAULT" || fk.OnUpdate == "SET DEFAULT" {
		return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support ON DELETE/UPDATE SET DEFAULT (InnoDB rejects it too)")
	}
	for _, k := range c.Keys {
		col := t.Column(k.Column.Name.O)
		if col == nil {
			return sqlerr.New(sqlerr.ErKeyDoesNotExist, "42000", "Key column '%s' doesn't exist in table", k.Column.Name.O)
		}
		if (fk.OnDelete == "SET NULL" || fk.OnUpdate == "SET NULL") && col.NotNull {
			return sqlerr.New(1830, "HY000", "Column '%s' cannot be NOT NULL: needed in a foreign key constraint '%s' SET NULL", col.Name, fk.Name)
		}
		fk.Columns = append(fk.Columns, col.Offset)
	}
	for _, k := range r.IndexPartSpecifications {
		fk.RefColumns = append(fk.RefColumns, k.Column.Name.O)
	}
	if len(fk.RefColumns) != len(fk.Columns) {
		return sqlerr.New(1239, "42000", "Incorrect foreign key definition for '%s': Key reference and table reference don't match", fk.Name)
	}
	if fk.Name == "" {
		for i := 1; ; i++ {
			name := fmt.Sprintf("%s_ibfk_%d", t.Name, i)
			taken := false
			for _, o := range t.ForeignKeys {
				taken = taken || strings.EqualFold(o.Name, name)
			}
			if !taken {
				fk.Name = name
				break
			}
		}
	}
	for _, o := range t.ForeignKeys {
		if strings.EqualFold(o.Name, fk.Name) {
			return sqlerr.New(1826, "HY000", "Duplicate foreign key constraint name '%s'", fk.Name)
		}
	}
	if s.foreignKeyChecks() {
		parent := schema.Table(fk.RefDB, fk.RefTable)
		if strings.EqualFold(fk.RefDB, db) && strings.EqualFold(fk.RefTable, t.Name) {
			parent = t
		}
		if parent == nil || parent.IsView() {
			return sqlerr.New(1824, "HY000", "Failed to open the referenced table '%s'", fk.RefTable)
		}
		if exec.FindParentKey(parent, fk.RefColumns) == nil {
			return sqlerr.New(1822, "HY000", "Failed to add the foreign key constraint. Missing index for constraint '%s' in the referenced table '%s'", fk.Name, fk.RefTable)
		}
	}
	if !hasIndexPrefix(t, fk.Columns) {
		parts := make([]*ast.IndexPartSpecification, len(c.Keys))
		copy(parts, c.Keys)
		name := c.Name
		if name == "" || t.Index(name) != nil {
			name = fk.Name
		}
		if _, err := addIndex(t, name, parts, false, false); err != nil {
			return err
		}
	}
	t.ForeignKeys = append(t.ForeignKeys, fk)
	return nil
}

// hasIndexPrefix reports whether some index of t starts with cols.
func hasIndexPrefix(t *catalog.TableInfo, cols []int) bool {
	if t.PKIsHandle && len(cols) == 1 && cols[0] == t.HandleOffset {
		return true
	}
	for _, ix := range t.Indexes {
		if len(ix.Columns) < len(cols) {
			continue
		}
		ok := true
		for i, c := range cols {
			ok = ok && ix.Columns[i] == c
		}
		if ok {
			return true
		}
	}
	return false
}

// foreignKeyChecks is the session's foreign_key_checks.
func (s *Session) foreignKeyChecks() bool {
	v, _ := s.GetVar("foreign_key_checks", true, "")
	on, _ := parseOnOff(v)
	return on
}

// selectColumns plans the SELECT of CREATE TABLE ... AS SELECT and returns
// a column definition for each of its output columns not defined
// explicitly.
func (s *Session) selectColumns(schema *catalog.Schema, n *ast.CreateTableStmt) ([]*ast.ColumnDef, error) {
	b := plan.NewBuilder(schema, s.db)
	b.ParseView = parseView
	b.Visible = infoVisibility{s}
	p, err := b.BuildQuery(n.Select)
	if err != nil {
		return nil, err
	}
	var out []*ast.ColumnDef
	for _, c := range p.Columns() {
		dup := false
		for _, cd := range n.Cols {
			dup = dup || strings.EqualFold(cd.Name.Name.O, c.Name)
		}
		if dup {
			continue
		}
		ft := c.Type.Clone()
		ft.SetFlag(ft.GetFlag() & (mysql.UnsignedFlag | mysql.BinaryFlag | mysql.NotNullFlag))
		if ft.GetType() == mysql.TypeNull || ft.GetType() == mysql.TypeUnspecified {
			ft = ptypes.NewFieldType(mysql.TypeVarString)
			ft.SetFlen(0)
		}
		if ft.GetType() == mysql.TypeVarString {
			ft.SetType(mysql.TypeVarchar)
		}
		cd := &ast.ColumnDef{Name: &ast.ColumnName{Name: ast.NewCIStr(c.Name)}, Tp: ft}
		if mysql.HasNotNullFlag(ft.GetFlag()) {
			cd.Options = append(cd.Options, &ast.ColumnOption{Tp: ast.ColumnOptionNotNull})
		}
		ft.DelFlag(mysql.NotNullFlag)
		out = append(out, cd)
	}
	return out, nil
}

// fillTable inserts the rows of CREATE TABLE ... AS SELECT, in the DDL
// transaction, matching output columns to table columns by name.
func (s *Session) fillTable(ctx context.Context, txn kv.Txn, schema *catalog.Schema, t *catalog.TableInfo, n *ast.CreateTableStmt) error {
	b := plan.NewBuilder(schema, s.db)
	b.ParseView = parseView
	b.Visible = infoVisibility{s}
	p, err := b.BuildQuery(n.Select)
	if err != nil {
		return err
	}
	ins := &plan.Insert{Table: t, Select: p, Ignore: n.OnDuplicate == ast.OnDuplicateKeyHandlingIgnore, Replace: n.OnDuplicate == ast.OnDuplicateKeyHandlingReplace}
	for _, c := range p.Columns() {
		col := t.Column(c.Name)
		if col == nil {
			return sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'field list'", c.Name)
		}
		ins.Targets = append(ins.Targets, col.Offset)
	}
	set := s.execSettings()
	ec := &exec.Context{Ctx: ctx, Txn: txn, Writes: exec.NewStmtBuffer(txn), Eval: s.evalContext(nil), IDs: s.e.ids,
		Mem: exec.NewMemTracker(set.quota), TmpDir: s.e.tmpDir, NoSpill: !set.spill}
	defer ec.Close()
	if err := exec.RunInsert(ec, ins); err != nil {
		return err
	}
	return ec.Writes.Flush()
}

// tableLike makes the definition of CREATE TABLE ... LIKE: the source's
// columns and indexes, without its rows or foreign keys.
func (s *Session) tableLike(ctx context.Context, txn kv.Txn, schema *catalog.Schema, n *ast.CreateTableStmt) (*catalog.TableInfo, error) {
	src, err := s.tableOf(schema, n.ReferTable)
	if err != nil {
		return nil, err
	}
	if src.IsView() {
		return nil, sqlerr.New(1347, "HY000", "'%s' is not BASE TABLE", src.Name)
	}
	db, err := s.dbName(n.Table.Schema.O)
	if err != nil {
		return nil, err
	}
	d := schema.DB(db)
	if d == nil {
		return nil, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", db)
	}
	if schema.Table(db, n.Table.Name.O) != nil && n.TemporaryKeyword == ast.TemporaryNone {
		if n.IfNotExists {
			s.warn(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", n.Table.Name.O)
			return nil, nil
		}
		return nil, sqlerr.New(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", n.Table.Name.O)
	}
	t := src.Clone()
	t.DBID, t.Name, t.ForeignKeys = d.ID, n.Table.Name.O, nil
	t.Temporary = n.TemporaryKeyword != ast.TemporaryNone
	for _, c := range t.Columns {
		c.OriginDefault = nil
	}
	if t.ID, err = catalog.AllocID(ctx, txn); err != nil {
		return nil, err
	}
	return t, nil
}

// renameTables implements RENAME TABLE a TO b [, c TO d ...] (and ALTER
// TABLE ... RENAME TO): only the catalog entry changes, so the table stays
// readable and writable throughout.
func (s *Session) renameTables(ctx context.Context, txn kv.Txn, schema *catalog.Schema, pairs []*ast.TableToTable) (bool, error) {
	// Apply in order on a working copy so that a swap (a TO tmp, b TO a,
	// tmp TO b) works.
	type entry struct {
		old *catalog.TableInfo
		t   *catalog.TableInfo
	}
	byName := map[string]*entry{}
	key := func(dbID int64, name string) string { return fmt.Sprintf("%d.%s", dbID, strings.ToLower(name)) }
	lookup := func(db *catalog.DBInfo, name string) *entry {
		if e, ok := byName[key(db.ID, name)]; ok {
			return e
		}
		t := schema.Table(db.Name, name)
		if t == nil {
			return nil
		}
		e := &entry{old: t, t: t.Clone()}
		byName[key(db.ID, name)] = e
		return e
	}
	var moved []*entry
	for _, p := range pairs {
		oldDB, err := s.dbName(p.OldTable.Schema.O)
		if err != nil {
			return false, err
		}
		newDB, err := s.dbName(p.NewTable.Schema.O)
		if err != nil {
			return false, err
		}
		od, nd := schema.DB(oldDB), schema.DB(newDB)
		if od == nil {
			return false, noSuchTable(oldDB, p.OldTable.Name.O)
		}
		if nd == nil {
			return false, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", newDB)
		}
		e := lookup(od, p.OldTable.Name.O)
		if e == nil {
			return false, noSuchTable(oldDB, p.OldTable.Name.O)
		}
		if dst, ok := byName[key(nd.ID, p.NewTable.Name.O)]; ok && dst != nil || (!ok && schema.Table(nd.Name, p.NewTable.Name.O) != nil) {
			return false, sqlerr.New(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", p.NewTable.Name.O)
		}
		byName[key(od.ID, p.OldTable.Name.O)] = nil
		e.t.DBID, e.t.Name = nd.ID, p.NewTable.Name.O
		byName[key(nd.ID, p.NewTable.Name.O)] = e
		moved = append(moved, e)
		// Foreign keys of other tables that name the parent follow it.
		for _, db := range schema.DBNames() {
			for _, ct := range schema.Tables(db) {
				for _, fk := range ct.ForeignKeys {
					if strings.EqualFold(fk.RefDB, od.Name) && strings.EqualFold(fk.RefTable, p.OldTable.Name.O) {
						ce := lookup(schema.DB(db), ct.Name)
						if ce == nil {
							continue
						}
						for _, cfk := range ce.t.ForeignKeys {
							if strings.EqualFold(cfk.Name, fk.Name) {
								cfk.RefDB, cfk.RefTable = nd.Name, p.NewTable.Name.O
							}
						}
						if ce != e {
							moved = append(moved, ce)
						}
					}
				}
			}
		}
	}
	done := map[*entry]bool{}
	for _, e := range moved {
		if done[e] {
			continue
		}
		done[e] = true
		if err := catalog.DeleteTableEntry(txn, e.old); err != nil {
			return false, err
		}
	}
	for e := range done {
		if err := catalog.PutTable(txn, e.t); err != nil {
			return false, err
		}
	}
	return true, nil
}

// alterColumn implements ALTER TABLE ... RENAME COLUMN, CHANGE and MODIFY.
// A change of name, comment or default only rewrites the catalog entry; a
// change of type or nullability also rewrites every row (converting its
// value; a value that does not fit fails the statement) and the entries
// of the indexes on the column, in the DDL transaction.
func (s *Session) alterColumn(t *catalog.TableInfo, spec *ast.AlterTableSpec) (rewrite bool, err error) {
	oldName := ""
	switch spec.Tp {
	case ast.AlterTableRenameColumn:
		c := t.Column(spec.OldColumnName.Name.O)
		if c == nil {
			return false, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in '%s'", spec.OldColumnName.Name.O, t.Name)
		}
		if o := t.Column(spec.NewColumnName.Name.O); o != nil && o != c {
			return false, sqlerr.New(1060, "42S21", "Duplicate column name '%s'", spec.NewColumnName.Name.O)
		}
		renameColumnRefs(t, c.Name, spec.NewColumnName.Name.O)
		c.Name = spec.NewColumnName.Name.O
		return false, nil
	case ast.AlterTableChangeColumn:
		oldName = spec.OldColumnName.Name.O
	case ast.AlterTableModifyColumn:
		oldName = spec.NewColumns[0].Name.Name.O
	}
	if spec.Position != nil && spec.Position.Tp != ast.ColumnPositionNone {
		return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support FIRST / AFTER")
	}
	c := t.Column(oldName)
	if c == nil {
		return false, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in '%s'", oldName, t.Name)
	}
	cd := spec.NewColumns[0]
	if o := t.Column(cd.Name.Name.O); o != nil && o != c {
		return false, sqlerr.New(1060, "42S21", "Duplicate column name '%s'", cd.Name.Name.O)
	}
	ft := cd.Tp.Clone()
	if err := normalizeTypeIn(ft, t.Collate); err != nil {
		return false, err
	}
	nc := &catalog.ColumnInfo{ID: c.ID, Name: cd.Name.Name.O, Offset: c.Offset, Type: ft}
	for _, opt := range cd.Options {
		switch opt.Tp {
		case ast.ColumnOptionNotNull:
			nc.NotNull = true
		case ast.ColumnOptionNull:
			nc.NotNull = false
		case ast.ColumnOptionDefaultValue:
			if err := s.setDefault(nc, opt.Expr); err != nil {
				return false, err
			}
		case ast.ColumnOptionAutoIncrement:
			nc.AutoIncrement = true
		case ast.ColumnOptionOnUpdate:
			nc.OnUpdateNow = true
		case ast.ColumnOptionComment:
			nc.Comment = commentText(opt.Expr)
		case ast.ColumnOptionCollate:
			if err := setColumnCollation(ft, opt.StrValue); err != nil {
				return false, err
			}
		case ast.ColumnOptionPrimaryKey, ast.ColumnOptionUniqKey:
			return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support adding a key in MODIFY / CHANGE COLUMN; use ADD INDEX")
		case ast.ColumnOptionColumnFormat, ast.ColumnOptionStorage:
		default:
			return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this option in MODIFY / CHANGE COLUMN")
		}
	}
	isKey := t.PKIsHandle && t.HandleOffset == c.Offset
	for _, ix := range t.Indexes {
		for _, off := range ix.Columns {
			isKey = isKey || (ix.Primary && off == c.Offset)
		}
	}
	if isKey {
		nc.NotNull = true
	}
	if t.PKIsHandle && t.HandleOffset == c.Offset && !catalog.IsIntegerType(ft) {
		return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support changing the clustered primary key column to a non-integer type")
	}
	flag := ft.GetFlag() &^ (mysql.PriKeyFlag | mysql.UniqueKeyFlag | mysql.MultipleKeyFlag)
	flag |= c.Type.GetFlag() & (mysql.PriKeyFlag | mysql.UniqueKeyFlag | mysql.MultipleKeyFlag)
	if nc.NotNull {
		flag |= mysql.NotNullFlag
	} else {
		flag &^= mysql.NotNullFlag
	}
	if nc.AutoIncrement {
		flag |= mysql.AutoIncrementFlag
	}
	if !nc.HasDefault && !nc.AutoIncrement {
		flag |= mysql.NoDefaultValueFlag
	}
	ft.SetFlag(flag)
	rewrite = ft.String() != c.Type.String() || nc.NotNull != c.NotNull
	if rewrite && c.OriginDefault != nil {
		nc.OriginDefault = c.OriginDefault
	}
	if !rewrite {
		nc.OriginDefault = c.OriginDefault
	}
	if !strings.EqualFold(c.Name, nc.Name) || c.Name != nc.Name {
		renameColumnRefs(t, c.Name, nc.Name)
	}
	t.Columns[c.Offset] = nc
	return rewrite, nil
}

// renameColumnRefs follows a column rename in the expressions of generated
// columns (by name).
func renameColumnRefs(t *catalog.TableInfo, from, to string) {
	for _, c := range t.Columns {
		if c.IsGenerated() {
			c.GeneratedExpr = strings.ReplaceAll(c.GeneratedExpr, "`"+from+"`", "`"+to+"`")
		}
	}
}

// tempDDL runs DDL on temporary tables: CREATE TEMPORARY TABLE, DROP
// [TEMPORARY] TABLE of a temporary table, TRUNCATE of one. These neither
// commit the open transaction nor change the schema version: the table
// lives in the session (s.x.temp), its rows in storage under its own id,
// destroyed when it is dropped or the session ends.
func (s *Session) tempDDL(ctx context.Context, st ast.StmtNode) (*Result, bool, error) {
	switch n := st.(type) {
	case *ast.CreateTableStmt:
		if n.TemporaryKeyword == ast.TemporaryNone {
			return nil, false, nil
		}
		return s.createTemp(ctx, n)
	case *ast.DropTableStmt:
		if len(s.x.temp) == 0 && !(n.TemporaryKeyword != ast.TemporaryNone) {
			return nil, false, nil
		}
		var rest []*ast.TableName
		dropped := false
		for _, tn := range n.Tables {
			if i := s.tempIndex(tn); i >= 0 {
				if err := s.dropTemp(ctx, i); err != nil {
					return nil, true, err
				}
				dropped = true
				continue
			}
			rest = append(rest, tn)
		}
		if len(rest) == 0 {
			return &Result{}, true, nil
		}
		if n.TemporaryKeyword != ast.TemporaryNone {
			names := make([]string, len(rest))
			for i, tn := range rest {
				names[i] = tn.Name.O
			}
			if n.IfExists {
				for _, nm := range names {
					s.warn(sqlerr.ErUnknownTable, "42S02", "Unknown table '%s'", nm)
				}
				return &Result{}, true, nil
			}
			return nil, true, sqlerr.New(sqlerr.ErUnknownTable, "42S02", "Unknown table '%s'", strings.Join(names, ","))
		}
		if dropped {
			cp := *n
			cp.Tables = rest
			r, err := s.runDDL(ctx, &cp)
			return r, true, err
		}
		return nil, false, nil
	case *ast.TruncateTableStmt:
		if i := s.tempIndex(n.Table); i >= 0 {
			return &Result{}, true, s.truncateTemp(ctx, i)
		}
	case *ast.AlterTableStmt:
		if s.tempIndex(n.Table) >= 0 {
			return nil, true, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support ALTER TABLE on a temporary table")
		}
	case *ast.CreateIndexStmt:
		if s.tempIndex(n.Table) >= 0 {
			return nil, true, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support CREATE INDEX on a temporary table")
		}
	}
	return nil, false, nil
}

func (s *Session) tempIndex(tn *ast.TableName) int {
	db := tn.Schema.O
	if db == "" {
		db = s.db
	}
	for i, t := range s.x.temp {
		if strings.EqualFold(t.Name, tn.Name.O) && strings.EqualFold(s.x.tempDB[i], db) {
			return i
		}
	}
	return -1
}

// tempChanged installs the new set of temporary tables in the open
// transaction's schema and invalidates cached plans.
func (s *Session) tempChanged(ctx context.Context) error {
	s.x.tempVersion++
	if s.txn != nil {
		base, err := s.e.latestSchema(ctx, s.txn)
		if err != nil {
			return err
		}
		s.schema = s.withTemp(base)
	}
	return nil
}

func (s *Session) createTemp(ctx context.Context, n *ast.CreateTableStmt) (*Result, bool, error) {
	txn, err := s.e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return nil, true, err
	}
	schema, err := catalog.Load(ctx, txn)
	if err != nil {
		txn.Rollback(ctx)
		return nil, true, err
	}
	db, err := s.dbName(n.Table.Schema.O)
	if err != nil {
		txn.Rollback(ctx)
		return nil, true, err
	}
	if s.tempIndex(n.Table) >= 0 {
		txn.Rollback(ctx)
		if n.IfNotExists {
			s.warn(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", n.Table.Name.O)
			return &Result{}, true, nil
		}
		return nil, true, sqlerr.New(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", n.Table.Name.O)
	}
	// A temporary table may hide a stored one of the same name.
	cp := *n
	cp.IfNotExists = false
	t, err := s.buildTable(ctx, txn, schemaWithout(schema, db, n.Table.Name.O), &cp)
	if err != nil {
		txn.Rollback(ctx)
		return nil, true, err
	}
	t.Temporary = true
	// Only the id counter is committed; the definition stays here.
	if err := txn.Commit(ctx); err != nil {
		return nil, true, err
	}
	s.x.temp = append(s.x.temp, t)
	s.x.tempDB = append(s.x.tempDB, db)
	if err := s.tempChanged(ctx); err != nil {
		return nil, true, err
	}
	if n.Select != nil {
		r, err := s.Execute(ctx, "INSERT INTO `"+db+"`.`"+t.Name+"` "+selectText(n.Select))
		if err != nil {
			_ = s.dropTemp(ctx, len(s.x.temp)-1)
			return nil, true, err
		}
		if len(r) > 0 {
			return r[0], true, nil
		}
	}
	return &Result{}, true, nil
}

func selectText(n ast.ResultSetNode) string {
	t, _ := restoreExpr(n)
	return t
}

// schemaWithout is schema with table db.name hidden, so that a temporary
// table may take the name of a stored one.
func schemaWithout(schema *catalog.Schema, db, name string) *catalog.Schema {
	if schema.Table(db, name) == nil {
		return schema
	}
	return schema.WithoutTable(db, name)
}

// dropTemp drops temporary table i and schedules its rows for deletion.
func (s *Session) dropTemp(ctx context.Context, i int) error {
	t := s.x.temp[i]
	s.x.temp = append(s.x.temp[:i:i], s.x.temp[i+1:]...)
	s.x.tempDB = append(s.x.tempDB[:i:i], s.x.tempDB[i+1:]...)
	s.e.ids.forget(t.ID)
	if err := s.destroyLater(ctx, t.ID); err != nil {
		return err
	}
	return s.tempChanged(ctx)
}

func (s *Session) truncateTemp(ctx context.Context, i int) error {
	t := s.x.temp[i].Clone()
	old := s.x.temp[i].ID
	txn, err := s.e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	if t.ID, err = catalog.AllocID(ctx, txn); err != nil {
		txn.Rollback(ctx)
		return err
	}
	if err := txn.Commit(ctx); err != nil {
		return err
	}
	s.x.temp[i] = t
	s.e.ids.forget(old)
	if err := s.destroyLater(ctx, old); err != nil {
		return err
	}
	return s.tempChanged(ctx)
}

// destroyLater records a GC job for the rows of table id.
func (s *Session) destroyLater(ctx context.Context, id int64) error {
	txn, err := s.e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	p := tablecodec.TablePrefix(id)
	if err := catalog.AddGCJob(ctx, txn, p, tablecodec.PrefixEnd(p)); err != nil {
		txn.Rollback(ctx)
		return err
	}
	if err := txn.Commit(ctx); err != nil {
		return err
	}
	s.e.kickCleanup()
	return nil
}

// dropAllTemp drops the session's temporary tables (at disconnect).
func (s *Session) dropAllTemp() {
	ctx := context.Background()
	for len(s.x.temp) > 0 {
		if err := s.dropTemp(ctx, len(s.x.temp)-1); err != nil {
			return
		}
	}
}

// referencingKey returns the first foreign key that references db.name
// and that match accepts, with its table and database (nil when there is
// none).
func referencingKey(schema *catalog.Schema, db, name string, match func(child *catalog.TableInfo, fk *catalog.ForeignKeyInfo) bool) (string, *catalog.TableInfo, *catalog.ForeignKeyInfo) {
	for _, cdb := range schema.DBNames() {
		for _, child := range schema.Tables(cdb) {
			for _, fk := range child.ForeignKeys {
				if strings.EqualFold(fk.RefDB, db) && strings.EqualFold(fk.RefTable, name) && match(child, fk) {
					return cdb, child, fk
				}
			}
		}
	}
	return "", nil, nil
}

// checkDropReferenced refuses, as InnoDB does (3730), to drop a table that
// a foreign key of a table not dropped with it references, unless
// foreign_key_checks is off.
func (s *Session) checkDropReferenced(schema *catalog.Schema, tables []*ast.TableName) error {
	if !s.foreignKeyChecks() {
		return nil
	}
	dropping := map[*catalog.TableInfo]bool{}
	var order []*catalog.TableInfo
	for _, tn := range tables {
		db, err := s.dbName(tn.Schema.O)
		if err != nil {
			return err
		}
		if t := schema.Table(db, tn.Name.O); t != nil && !t.IsView() && !dropping[t] {
			dropping[t] = true
			order = append(order, t)
		}
	}
	for _, t := range order {
		db := schema.DBByID(t.DBID)
		if db == nil {
			continue
		}
		if _, child, fk := referencingKey(schema, db.Name, t.Name, func(c *catalog.TableInfo, _ *catalog.ForeignKeyInfo) bool { return !dropping[c] }); fk != nil {
			return sqlerr.New(3730, "HY000", "Cannot drop table '%s' referenced by a foreign key constraint '%s' on table '%s'.", t.Name, fk.Name, child.Name)
		}
	}
	return nil
}

// checkColumnReferenced refuses, as InnoDB does (1829), to drop a column
// of table t (tn in the statement) that a foreign key references.
func (s *Session) checkColumnReferenced(schema *catalog.Schema, tn *ast.TableName, t *catalog.TableInfo, col string) error {
	db, err := s.dbName(tn.Schema.O)
	if err != nil {
		return err
	}
	refers := func(_ *catalog.TableInfo, fk *catalog.ForeignKeyInfo) bool {
		return slices.ContainsFunc(fk.RefColumns, func(rc string) bool { return strings.EqualFold(rc, col) })
	}
	if _, child, fk := referencingKey(schema, db, t.Name, refers); fk != nil {
		return sqlerr.New(1829, "HY000", "Cannot drop column '%s': needed in a foreign key constraint '%s' of table '%s'", col, fk.Name, child.Name)
	}
	return nil
}
