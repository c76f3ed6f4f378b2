package sql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// tableOf resolves a table name (in the current database when unqualified)
// in schema, or fails with 1046 or 1146.
func (s *Session) tableOf(schema *catalog.Schema, tn *ast.TableName) (*catalog.TableInfo, error) {
	db, err := s.dbName(tn.Schema.O)
	if err != nil {
		return nil, err
	}
	t := schema.Table(db, tn.Name.O)
	if t == nil {
		return nil, noSuchTable(db, tn.Name.O)
	}
	return t, nil
}

// AUTO_RANDOM's shard bits: TiDB's default and maximum.
const (
	defaultAutoRandomBits = 5
	maxAutoRandomBits     = 15
)

// invalidAutoRandom is TiDB's 8216.
func invalidAutoRandom(why string) error {
	return sqlerr.New(8216, "HY000", "Invalid auto random: %s", why)
}

func noSuchTable(db, table string) error {
	return sqlerr.New(sqlerr.ErNoSuchTable, "42S02", "Table '%s.%s' doesn't exist", db, table)
}

func (s *Session) dbName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if s.db == "" {
		return "", sqlerr.New(sqlerr.ErNoDB, "3D000", "No database selected")
	}
	return s.db, nil
}

func (s *Session) warn(code uint16, state, format string, args ...any) {
	s.warnings = append(s.warnings, sqlerr.New(code, state, format, args...))
}

// applyDDL performs the catalog change; changed=false means nothing to do
// (IF [NOT] EXISTS).
func (s *Session) applyDDL(ctx context.Context, txn kv.Txn, schema *catalog.Schema, st ast.StmtNode) (bool, error) {
	switch n := st.(type) {
	case *ast.CreateDatabaseStmt:
		if schema.DB(n.Name.O) != nil {
			if n.IfNotExists {
				s.warn(sqlerr.ErDBCreateExists, "HY000", "Can't create database '%s'; database exists", n.Name.O)
				return false, nil
			}
			return false, sqlerr.New(sqlerr.ErDBCreateExists, "HY000", "Can't create database '%s'; database exists", n.Name.O)
		}
		id, err := catalog.AllocID(ctx, txn)
		if err != nil {
			return false, err
		}
		d := &catalog.DBInfo{ID: id, Name: n.Name.O}
		for _, o := range n.Options {
			switch o.Tp {
			case ast.DatabaseOptionCharset:
				if d.Collate == "" {
					d.Collate = defaultCollationOf(o.Value)
				}
			case ast.DatabaseOptionCollate:
				c, ok := infoschema.LookupCollation(o.Value)
				if !ok {
					return false, sqlerr.New(1273, "HY000", "Unknown collation: '%s'", o.Value)
				}
				d.Collate = c.Name
			}
		}
		return true, catalog.PutDB(txn, d)
	case *ast.DropDatabaseStmt:
		d := schema.DB(n.Name.O)
		if d == nil {
			if n.IfExists {
				s.warn(sqlerr.ErDBDropExists, "HY000", "Can't drop database '%s'; database doesn't exist", n.Name.O)
				return false, nil
			}
			return false, sqlerr.New(sqlerr.ErDBDropExists, "HY000", "Can't drop database '%s'; database doesn't exist", n.Name.O)
		}
		for _, t := range schema.Tables(d.Name) {
			if err := dropTableData(ctx, txn, t); err != nil {
				return false, err
			}
			s.e.ids.forget(t.ID)
		}
		if strings.EqualFold(s.db, d.Name) {
			s.db = ""
		}
		return true, catalog.DeleteDB(txn, d)
	case *ast.CreateTableStmt:
		return s.createTable(ctx, txn, schema, n)
	case *ast.CreateViewStmt:
		return s.createView(ctx, txn, schema, n)
	case *ast.AlterTableStmt:
		return s.alterTable(ctx, txn, schema, n)
	case *ast.RenameTableStmt:
		return s.renameTables(ctx, txn, schema, n.TableToTables)
	case *ast.DropTableStmt:
		if err := s.checkDropReferenced(schema, n.Tables); err != nil {
			return false, err
		}
		var missing []string
		changed := false
		for _, tn := range n.Tables {
			db, err := s.dbName(tn.Schema.O)
			if err != nil {
				return false, err
			}
			t := schema.Table(db, tn.Name.O)
			if t == nil {
				missing = append(missing, db+"."+tn.Name.O)
				continue
			}
			if n.IsView && !t.IsView() {
				return false, sqlerr.New(1347, "HY000", "'%s.%s' is not VIEW", db, t.Name)
			}
			if err := dropTableData(ctx, txn, t); err != nil {
				return false, err
			}
			s.e.ids.forget(t.ID)
			changed = true
		}
		if len(missing) > 0 {
			if !n.IfExists {
				return false, sqlerr.New(sqlerr.ErUnknownTable, "42S02", "Unknown table '%s'", strings.Join(missing, ","))
			}
			for _, m := range missing {
				s.warn(sqlerr.ErUnknownTable, "42S02", "Unknown table '%s'", m)
			}
		}
		return changed, nil
	case *ast.TruncateTableStmt:
		t, err := s.tableOf(schema, n.Table)
		if err != nil {
			return false, err
		}
		if s.foreignKeyChecks() {
			db, _ := s.dbName(n.Table.Schema.O)
			if childDB, child, fk := referencingKey(schema, db, t.Name, func(c *catalog.TableInfo, _ *catalog.ForeignKeyInfo) bool { return c != t }); fk != nil {
				return false, sqlerr.New(1701, "42000", "Cannot truncate a table referenced in a foreign key constraint (`%s`.`%s`, CONSTRAINT `%s`)", childDB, child.Name, fk.Name)
			}
		}
		if err := dropTableData(ctx, txn, t); err != nil {
			return false, err
		}
		s.e.ids.forget(t.ID)
		nt := t.Clone()
		if nt.ID, err = catalog.AllocID(ctx, txn); err != nil {
			return false, err
		}
		return true, catalog.PutTable(txn, nt)
	case *ast.CreateIndexStmt:
		t, err := s.tableOf(schema, n.Table)
		if err != nil {
			return false, err
		}
		if t.Index(n.IndexName) != nil || strings.EqualFold(n.IndexName, "PRIMARY") {
			if n.IfNotExists {
				return false, nil
			}
			return false, sqlerr.New(sqlerr.ErDupKeyName, "42000", "Duplicate key name '%s'", n.IndexName)
		}
		if n.KeyType != ast.IndexKeyTypeNone && n.KeyType != ast.IndexKeyTypeUnique {
			return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this index type")
		}
		nt := t.Clone()
		ix, err := addIndex(nt, n.IndexName, n.IndexPartSpecifications, n.KeyType == ast.IndexKeyTypeUnique, false)
		if err != nil {
			return false, err
		}
		startIndexAdd(nt, ix)
		return true, catalog.PutTable(txn, nt)
	case *ast.DropIndexStmt:
		t, err := s.tableOf(schema, n.Table)
		if err != nil {
			return false, err
		}
		nt := t.Clone()
		if found := startIndexDrop(nt, n.IndexName); !found {
			if n.IfExists {
				return false, nil
			}
			return false, sqlerr.New(sqlerr.ErCantDropFieldOrKey, "42000", "Can't DROP '%s'; check that column/key exists", n.IndexName)
		}
		return true, catalog.PutTable(txn, nt)
	}
	return false, notSupported(stmtName(st))
}

// createView validates the view's query against the current schema and
// stores its text.
func (s *Session) createView(ctx context.Context, txn kv.Txn, schema *catalog.Schema, n *ast.CreateViewStmt) (bool, error) {
	db, err := s.dbName(n.ViewName.Schema.O)
	if err != nil {
		return false, err
	}
	d := schema.DB(db)
	if d == nil {
		return false, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", db)
	}
	old := schema.Table(db, n.ViewName.Name.O)
	if old != nil && (!n.OrReplace || !old.IsView()) {
		return false, sqlerr.New(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", n.ViewName.Name.O)
	}
	var sb strings.Builder
	if err := n.Select.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &sb)); err != nil {
		return false, err
	}
	b := plan.NewBuilder(schema, s.db)
	b.ParseView = parseView
	rs, ok := n.Select.(ast.ResultSetNode)
	if !ok {
		return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "view definition is not a query")
	}
	p, err := b.BuildQuery(rs)
	if err != nil {
		return false, err
	}
	if len(n.Cols) > 0 && len(n.Cols) != len(p.Columns()) {
		return false, sqlerr.New(1353, "HY000", "In definition of view, derived table or common table expression, SELECT list and column names list have different column counts")
	}
	t := &catalog.TableInfo{DBID: d.ID, Name: n.ViewName.Name.O, ViewSQL: sb.String()}
	for _, c := range n.Cols {
		t.ViewColumns = append(t.ViewColumns, c.O)
	}
	if old != nil {
		if err := catalog.DeleteTable(txn, old); err != nil {
			return false, err
		}
	}
	if t.ID, err = catalog.AllocID(ctx, txn); err != nil {
		return false, err
	}
	return true, catalog.PutTable(txn, t)
}

// alterTable applies ADD/DROP INDEX, ADD COLUMN (at the end) and DROP
// COLUMN; table options are accepted and ignored.
func (s *Session) alterTable(ctx context.Context, txn kv.Txn, schema *catalog.Schema, n *ast.AlterTableStmt) (bool, error) {
	t, err := s.tableOf(schema, n.Table)
	if err == nil && t.IsView() {
		db, _ := s.dbName(n.Table.Schema.O) // resolved by tableOf already
		err = noSuchTable(db, n.Table.Name.O)
	}
	if err != nil {
		return false, err
	}
	nt := t.Clone()
	var added []*catalog.IndexInfo
	var rewrite []int // offsets of columns whose rows must be rewritten
	// addFK adds foreign key c to nt (with an index on its columns when
	// none starts with them) and checks the rows against it.
	addFK := func(c *ast.Constraint) error {
		db, _ := s.dbName(n.Table.Schema.O)
		before := len(nt.Indexes)
		if err := s.addForeignKey(schema, db, nt, c); err != nil {
			return err
		}
		added = append(added, nt.Indexes[before:]...)
		if s.foreignKeyChecks() {
			ec := &exec.Context{Ctx: ctx, Txn: txn, Writes: exec.NewStmtBuffer(txn), Eval: s.evalContext(nil), IDs: s.e.ids, Mem: exec.NewMemTracker(0), Schema: schema}
			return exec.CheckForeignKeyRows(ec, nt, nt.ForeignKeys[len(nt.ForeignKeys)-1])
		}
		return nil
	}
	for _, spec := range n.Specs {
		switch spec.Tp {
		case ast.AlterTableRenameColumn, ast.AlterTableChangeColumn, ast.AlterTableModifyColumn:
			var col string
			if spec.OldColumnName != nil {
				col = spec.OldColumnName.Name.O
			} else {
				col = spec.NewColumns[0].Name.Name.O
			}
			off := -1
			if c := nt.Column(col); c != nil {
				off = c.Offset
			}
			rw, err := s.alterColumn(nt, spec)
			if err != nil {
				return false, err
			}
			if rw {
				rewrite = append(rewrite, off)
			}
		case ast.AlterTableRenameTable:
			db, _ := s.dbName(n.Table.Schema.O)
			ok, err := s.renameTables(ctx, txn, schema, []*ast.TableToTable{{OldTable: &ast.TableName{Schema: ast.NewCIStr(db), Name: n.Table.Name}, NewTable: spec.NewTable}})
			if err != nil || len(n.Specs) > 1 {
				if err == nil {
					err = sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support RENAME TO with other ALTER TABLE operations")
				}
				return false, err
			}
			return ok, nil
		case ast.AlterTableAlterColumn:
			if err := s.alterColumnDefault(nt, spec.NewColumns[0]); err != nil {
				return false, err
			}
		case ast.AlterTableDisableKeys, ast.AlterTableEnableKeys, ast.AlterTableLock, ast.AlterTableAlgorithm, ast.AlterTableForce:
			// Accepted (mysqldump wraps its inserts in DISABLE/ENABLE
			// KEYS): indexes are always maintained, online.
		case ast.AlterTableDropForeignKey:
			found := false
			for i, fk := range nt.ForeignKeys {
				if strings.EqualFold(fk.Name, spec.Name) {
					nt.ForeignKeys = append(nt.ForeignKeys[:i], nt.ForeignKeys[i+1:]...)
					found = true
					break
				}
			}
			if !found {
				return false, sqlerr.New(sqlerr.ErCantDropFieldOrKey, "42000", "Can't DROP '%s'; check that column/key exists", spec.Name)
			}
		case ast.AlterTableOption:
			for _, o := range spec.Options {
				if o.Tp == ast.TableOptionComment {
					nt.Comment = o.StrValue
				}
			}
		case ast.AlterTableAddConstraint:
			c := spec.Constraint
			var unique bool
			switch c.Tp {
			case ast.ConstraintKey, ast.ConstraintIndex:
			case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
				unique = true
			case ast.ConstraintForeignKey:
				if err := addFK(c); err != nil {
					return false, err
				}
				continue
			default:
				return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support adding this constraint")
			}
			ix, err := addIndex(nt, c.Name, c.Keys, unique, false)
			if err != nil {
				return false, err
			}
			added = append(added, ix)
		case ast.AlterTableDropIndex:
			if found := startIndexDrop(nt, spec.Name); !found && !spec.IfExists {
				return false, sqlerr.New(sqlerr.ErCantDropFieldOrKey, "42000", "Can't DROP '%s'; check that column/key exists", spec.Name)
			}
		case ast.AlterTableAddColumns:
			if spec.Position != nil && spec.Position.Tp != ast.ColumnPositionNone {
				return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support FIRST / AFTER")
			}
			for _, cd := range spec.NewColumns {
				// UNIQUE and REFERENCES become an index and a foreign
				// key on the new column, as in CREATE TABLE.
				plain := *cd
				plain.Options = nil
				var keys []*ast.ColumnOption
				for _, opt := range cd.Options {
					switch opt.Tp {
					case ast.ColumnOptionUniqKey, ast.ColumnOptionReference:
						keys = append(keys, opt)
					default:
						plain.Options = append(plain.Options, opt)
					}
				}
				if err := s.addColumn(nt, &plain); err != nil {
					return false, err
				}
				part := []*ast.IndexPartSpecification{{Column: cd.Name}}
				for _, opt := range keys {
					if opt.Tp == ast.ColumnOptionReference {
						if err := addFK(&ast.Constraint{Tp: ast.ConstraintForeignKey, Keys: part, Refer: opt.Refer}); err != nil {
							return false, err
						}
						continue
					}
					ix, err := addIndex(nt, "", part, true, false)
					if err != nil {
						return false, err
					}
					added = append(added, ix)
				}
			}
		case ast.AlterTableDropColumn:
			if err := s.checkColumnReferenced(schema, n.Table, nt, spec.OldColumnName.Name.O); err != nil {
				return false, err
			}
			dropped, err := dropColumn(nt, spec.OldColumnName.Name.O)
			if err != nil {
				return false, err
			}
			// Writes to the table wait behind the statement's barrier, so
			// the index's entries stop changing with it; they are
			// destroyed once no reader can need them.
			for _, id := range dropped {
				p := tablecodec.IndexPrefix(nt.ID, id)
				if err := catalog.AddGCJob(ctx, txn, p, tablecodec.PrefixEnd(p)); err != nil {
					return false, err
				}
			}
		default:
			return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this ALTER TABLE operation")
		}
	}
	if len(rewrite) > 0 {
		ec := &exec.Context{Ctx: ctx, Txn: txn, Writes: exec.NewStmtBuffer(txn), Eval: s.evalContext(nil), IDs: s.e.ids, Mem: exec.NewMemTracker(0)}
		if err := exec.RewriteColumns(ec, t, nt); err != nil {
			return false, err
		}
		if err := ec.Writes.Flush(); err != nil {
			return false, err
		}
	}
	for _, ix := range added {
		startIndexAdd(nt, ix)
	}
	return true, catalog.PutTable(txn, nt)
}

// addColumn appends a column; existing rows read its default (or the
// type's zero value when it is NOT NULL without a default, as MySQL does).
func (s *Session) addColumn(t *catalog.TableInfo, cd *ast.ColumnDef) error {
	if t.Column(cd.Name.Name.O) != nil {
		return sqlerr.New(1060, "42S21", "Duplicate column name '%s'", cd.Name.Name.O)
	}
	ft := cd.Tp.Clone()
	if err := normalizeTypeIn(ft, t.Collate); err != nil {
		return err
	}
	t.NextColumnID++
	col := &catalog.ColumnInfo{ID: t.NextColumnID, Name: cd.Name.Name.O, Offset: len(t.Columns), Type: ft}
	for _, opt := range cd.Options {
		switch opt.Tp {
		case ast.ColumnOptionNotNull:
			col.NotNull = true
		case ast.ColumnOptionNull:
			col.NotNull = false
		case ast.ColumnOptionDefaultValue:
			if err := s.setDefault(col, opt.Expr); err != nil {
				return err
			}
		case ast.ColumnOptionComment:
			col.Comment = commentText(opt.Expr)
		case ast.ColumnOptionCollate:
			if err := setColumnCollation(ft, opt.StrValue); err != nil {
				return err
			}
		case ast.ColumnOptionOnUpdate:
			col.OnUpdateNow = true
		case ast.ColumnOptionColumnFormat, ast.ColumnOptionStorage, ast.ColumnOptionCheck:
			// Accepted and ignored, as in CREATE TABLE.
		case ast.ColumnOptionPrimaryKey:
			return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support adding a primary key column")
		case ast.ColumnOptionAutoIncrement, ast.ColumnOptionAutoRandom:
			return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support adding an AUTO_INCREMENT column")
		case ast.ColumnOptionGenerated:
			return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support adding a generated column")
		default:
			return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this option in ADD COLUMN")
		}
	}
	switch {
	case col.DefaultNow:
		return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support ADD COLUMN ... DEFAULT CURRENT_TIMESTAMP")
	case col.HasDefault && !col.DefaultNull:
		d := col.Default
		col.OriginDefault = &d
	case col.NotNull:
		zero := "0"
		if k := types.KindForFieldType(ft); k == types.KindString || k == types.KindBytes {
			zero = ""
		} else if k == types.KindTime {
			return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support adding a NOT NULL time column without a default")
		}
		col.OriginDefault = &zero
	}
	flag := ft.GetFlag()
	if col.NotNull {
		flag |= mysql.NotNullFlag
	}
	if !col.HasDefault {
		flag |= mysql.NoDefaultValueFlag
	}
	ft.SetFlag(flag)
	t.Columns = append(t.Columns, col)
	return nil
}

// alterColumnDefault applies ALTER [COLUMN] c SET DEFAULT v (one option,
// the default) or DROP DEFAULT (none): the column's default for rows
// inserted from now on, as if the column had been created with it (or
// without a DEFAULT clause). Rows stored before keep their values, and a
// column added later still reads its ADD COLUMN default in older rows.
func (s *Session) alterColumnDefault(t *catalog.TableInfo, cd *ast.ColumnDef) error {
	col := t.Column(cd.Name.Name.O)
	if col == nil {
		return sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in '%s'", cd.Name.Name.O, t.Name)
	}
	// The parser gives SET DEFAULT one option holding the expression.
	if len(cd.Options) > 1 || len(cd.Options) == 1 && cd.Options[0].Expr == nil {
		return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this ALTER COLUMN operation")
	}
	col.HasDefault, col.DefaultNull, col.DefaultNow, col.Default = false, false, false, ""
	flag := col.Type.GetFlag() | mysql.NoDefaultValueFlag
	if len(cd.Options) == 1 {
		if err := s.setDefault(col, cd.Options[0].Expr); err != nil {
			return err
		}
		flag &^= mysql.NoDefaultValueFlag
	}
	col.Type.SetFlag(flag)
	return nil
}

// dropColumn removes a column and renumbers offsets. A public index whose
// only column it is goes with it, as in MySQL; the ids of such indexes are
// returned (their entries are destroyed later). A column in an index with
// other columns, in an index being added or dropped, or in a foreign key
// of the table stays (1235, 1828).
func dropColumn(t *catalog.TableInfo, name string) (dropped []int64, err error) {
	c := t.Column(name)
	if c == nil {
		return nil, sqlerr.New(sqlerr.ErCantDropFieldOrKey, "42000", "Can't DROP '%s'; check that column/key exists", name)
	}
	if len(t.Columns) == 1 {
		return nil, sqlerr.New(1090, "42000", "You can't delete all columns with ALTER TABLE; use DROP TABLE instead")
	}
	if t.PKIsHandle && t.HandleOffset == c.Offset {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support dropping the primary key column")
	}
	for _, fk := range t.ForeignKeys {
		if slices.Contains(fk.Columns, c.Offset) {
			return nil, sqlerr.New(1828, "HY000", "Cannot drop column '%s': needed in a foreign key constraint '%s'", c.Name, fk.Name)
		}
	}
	uses := func(ix *catalog.IndexInfo) bool { return slices.Contains(ix.Columns, c.Offset) }
	for _, ix := range t.Changing {
		if ix.State != catalog.StateAbsent && uses(ix) {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support dropping a column of index '%s' while that index is being changed", ix.Name)
		}
	}
	kept := t.Indexes[:0:0]
	for _, ix := range t.Indexes {
		switch {
		case !uses(ix):
			kept = append(kept, ix)
		case ix.Primary:
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support dropping a primary key column")
		case len(ix.Columns) > 1:
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support dropping a column of the multi-column index '%s'", ix.Name)
		default:
			dropped = append(dropped, ix.ID)
		}
	}
	t.Indexes = kept
	t.Columns = append(t.Columns[:c.Offset], t.Columns[c.Offset+1:]...)
	for i, col := range t.Columns {
		col.Offset = i
	}
	shift := func(off int) int {
		if off > c.Offset {
			return off - 1
		}
		return off
	}
	for _, ix := range t.DeletableIndexes() {
		for i, off := range ix.Columns {
			ix.Columns[i] = shift(off)
		}
	}
	// A foreign key's columns are in an index, so none of them is the
	// dropped column; the ones after it move.
	for _, fk := range t.ForeignKeys {
		for i, off := range fk.Columns {
			fk.Columns[i] = shift(off)
		}
	}
	if t.PKIsHandle {
		t.HandleOffset = shift(t.HandleOffset)
	}
	return dropped, nil
}

// dropTableData removes a table from the catalog and schedules its rows and
// index entries for deletion.
func dropTableData(ctx context.Context, txn kv.Txn, t *catalog.TableInfo) error {
	if err := catalog.DeleteTable(txn, t); err != nil {
		return err
	}
	if t.IsView() {
		return nil
	}
	p := tablecodec.TablePrefix(t.ID)
	return catalog.AddGCJob(ctx, txn, p, tablecodec.PrefixEnd(p))
}

// normalizeType fills the lengths, charset and collation MySQL implies.
func normalizeType(ft *ptypes.FieldType) error { return normalizeTypeIn(ft, "") }

// normalizeTypeIn is normalizeType for a column of a table whose default
// collation is tableCollate ("" for the server's).
func normalizeTypeIn(ft *ptypes.FieldType, tableCollate string) error {
	switch ft.GetType() {
	case mysql.TypeGeometry:
		return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support column type %s", ft.CompactStr())
	}
	flen, dec := mysql.GetDefaultFieldLengthAndDecimal(ft.GetType())
	if ft.GetFlen() == ptypes.UnspecifiedLength {
		ft.SetFlen(flen)
	}
	if ft.GetDecimal() == ptypes.UnspecifiedLength {
		ft.SetDecimal(dec)
	}
	switch ft.GetType() {
	case mysql.TypeJSON:
		// JSON text compares byte-wise, as MySQL's utf8mb4_bin JSON does.
		ft.SetCharset(mysql.DefaultCharset)
		ft.SetCollate("utf8mb4_bin")
	case mysql.TypeString, mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob, mysql.TypeEnum, mysql.TypeSet:
		if ft.GetCharset() == "" && ft.GetCollate() == "" {
			coll := tableCollate
			if coll == "" {
				coll = infoschema.DefaultCollation
			}
			ft.SetCharset(infoschema.CharsetOfCollation(coll))
			ft.SetCollate(coll)
		} else if ft.GetCharset() == "" {
			ft.SetCharset(infoschema.CharsetOfCollation(ft.GetCollate()))
		} else if ft.GetCollate() == "" {
			if cs, err := charset.GetCharsetInfo(ft.GetCharset()); err == nil {
				ft.SetCollate(cs.DefaultCollation)
			}
		}
	default:
		if ft.GetCharset() == "" {
			ft.SetCharset(charset.CharsetBin)
			ft.SetCollate(charset.CollationBin)
		}
	}
	return nil
}

func (s *Session) createTable(ctx context.Context, txn kv.Txn, schema *catalog.Schema, n *ast.CreateTableStmt) (bool, error) {
	t, err := s.buildTable(ctx, txn, schema, n)
	if t == nil || err != nil {
		return false, err
	}
	if err := catalog.PutTable(txn, t); err != nil {
		return false, err
	}
	if n.Select != nil {
		if err := s.fillTable(ctx, txn, schema, t, n); err != nil {
			return false, err
		}
	}
	return true, nil
}

// buildTable makes the definition of a new table (nil when it exists and
// IF NOT EXISTS says to do nothing); the caller stores it.
func (s *Session) buildTable(ctx context.Context, txn kv.Txn, schema *catalog.Schema, n *ast.CreateTableStmt) (*catalog.TableInfo, error) {
	if n.ReferTable != nil {
		return s.tableLike(ctx, txn, schema, n)
	}
	var selectCols []*ast.ColumnDef
	if n.Select != nil {
		var err error
		if selectCols, err = s.selectColumns(schema, n); err != nil {
			return nil, err
		}
	}
	db, err := s.dbName(n.Table.Schema.O)
	if err != nil {
		return nil, err
	}
	d := schema.DB(db)
	if d == nil {
		return nil, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", db)
	}
	if schema.Table(db, n.Table.Name.O) != nil {
		if n.IfNotExists {
			s.warn(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", n.Table.Name.O)
			return nil, nil
		}
		return nil, sqlerr.New(sqlerr.ErTableExists, "42S01", "Table '%s' already exists", n.Table.Name.O)
	}
	t := &catalog.TableInfo{DBID: d.ID, Name: n.Table.Name.O, Temporary: n.TemporaryKeyword != ast.TemporaryNone}
	if err := tableOptions(t, d, n.Options); err != nil {
		return nil, err
	}
	if t.ID, err = catalog.AllocID(ctx, txn); err != nil {
		return nil, err
	}
	var pk []*ast.IndexPartSpecification
	type pending struct {
		name   string
		parts  []*ast.IndexPartSpecification
		unique bool
	}
	var indexes []pending
	var fks []*ast.Constraint
	for _, cd := range append(append([]*ast.ColumnDef{}, n.Cols...), selectCols...) {
		if t.Column(cd.Name.Name.O) != nil {
			return nil, sqlerr.New(1060, "42S21", "Duplicate column name '%s'", cd.Name.Name.O)
		}
		ft := cd.Tp.Clone()
		if err := normalizeTypeIn(ft, t.Collate); err != nil {
			return nil, err
		}
		t.NextColumnID++
		col := &catalog.ColumnInfo{ID: t.NextColumnID, Name: cd.Name.Name.O, Offset: len(t.Columns), Type: ft}
		part := []*ast.IndexPartSpecification{{Column: cd.Name}}
		for _, opt := range cd.Options {
			switch opt.Tp {
			case ast.ColumnOptionNotNull:
				col.NotNull = true
			case ast.ColumnOptionNull:
				col.NotNull = false
			case ast.ColumnOptionPrimaryKey:
				if pk != nil {
					return nil, sqlerr.New(sqlerr.ErMultiplePriKey, "42000", "Multiple primary key defined")
				}
				pk = part
			case ast.ColumnOptionUniqKey:
				indexes = append(indexes, pending{name: col.Name, parts: part, unique: true})
			case ast.ColumnOptionAutoIncrement:
				col.AutoIncrement = true
			case ast.ColumnOptionAutoRandom:
				bits := opt.AutoRandOpt.ShardBits
				if bits == ptypes.UnspecifiedLength || bits == 0 {
					bits = defaultAutoRandomBits
				}
				if bits < 1 || bits > maxAutoRandomBits {
					return nil, invalidAutoRandom(fmt.Sprintf("the shard bits must be between 1 and %d", maxAutoRandomBits))
				}
				col.AutoIncrement, col.AutoRandomBits = true, bits
			case ast.ColumnOptionDefaultValue:
				if err := s.setDefault(col, opt.Expr); err != nil {
					return nil, err
				}
			case ast.ColumnOptionOnUpdate:
				col.OnUpdateNow = true
			case ast.ColumnOptionComment:
				col.Comment = commentText(opt.Expr)
			case ast.ColumnOptionGenerated:
				if err := s.setGenerated(col, opt); err != nil {
					return nil, err
				}
			case ast.ColumnOptionReference:
				fks = append(fks, &ast.Constraint{Tp: ast.ConstraintForeignKey, Keys: part, Refer: opt.Refer})
			case ast.ColumnOptionCollate:
				if err := setColumnCollation(ft, opt.StrValue); err != nil {
					return nil, err
				}
			case ast.ColumnOptionColumnFormat, ast.ColumnOptionStorage, ast.ColumnOptionCheck:
			default:
				return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this column option")
			}
		}
		t.Columns = append(t.Columns, col)
	}
	for _, c := range n.Constraints {
		switch c.Tp {
		case ast.ConstraintPrimaryKey:
			if pk != nil {
				return nil, sqlerr.New(sqlerr.ErMultiplePriKey, "42000", "Multiple primary key defined")
			}
			pk = c.Keys
		case ast.ConstraintKey, ast.ConstraintIndex:
			indexes = append(indexes, pending{name: c.Name, parts: c.Keys})
		case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
			indexes = append(indexes, pending{name: c.Name, parts: c.Keys, unique: true})
		case ast.ConstraintForeignKey:
			fks = append(fks, c)
		case ast.ConstraintCheck:
			// Accepted and not enforced, like MySQL before 8.0.16.
		default:
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this constraint")
		}
	}
	if pk != nil {
		for _, p := range pk {
			if p.Column == nil {
				return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support expression indexes")
			}
			c := t.Column(p.Column.Name.O)
			if c == nil {
				return nil, sqlerr.New(sqlerr.ErKeyDoesNotExist, "42000", "Key column '%s' doesn't exist in table", p.Column.Name.O)
			}
			c.NotNull = true
		}
		if c := t.Column(pk[0].Column.Name.O); len(pk) == 1 && catalog.IsIntegerType(c.Type) {
			t.PKIsHandle, t.HandleOffset = true, c.Offset
		} else if _, err := addIndex(t, "PRIMARY", pk, true, true); err != nil {
			return nil, err
		}
	}
	for _, ix := range indexes {
		if _, err := addIndex(t, ix.name, ix.parts, ix.unique, false); err != nil {
			return nil, err
		}
	}
	for _, c := range t.Columns {
		if c.AutoRandomBits > 0 && (!t.PKIsHandle || t.HandleOffset != c.Offset || c.Type.GetType() != mysql.TypeLonglong) {
			return nil, invalidAutoRandom(fmt.Sprintf("column %s is not the table's BIGINT primary key", c.Name))
		}
	}
	if t.PKIsHandle {
		t.ShardRowIDBits = 0 // rows are keyed by the primary key (TiDB ignores the option too)
	}
	nAuto := 0
	for _, c := range t.Columns {
		flag := c.Type.GetFlag()
		if c.NotNull {
			flag |= mysql.NotNullFlag
		}
		if c.AutoIncrement {
			nAuto++
			flag |= mysql.AutoIncrementFlag
		}
		if !c.HasDefault && !c.AutoIncrement {
			flag |= mysql.NoDefaultValueFlag
		}
		if t.PKIsHandle && c.Offset == t.HandleOffset {
			flag |= mysql.PriKeyFlag
		}
		c.Type.SetFlag(flag)
	}
	for _, ix := range t.Indexes {
		for i, off := range ix.Columns {
			ft := t.Columns[off].Type
			switch {
			case ix.Primary:
				ft.AddFlag(mysql.PriKeyFlag)
			case ix.Unique && len(ix.Columns) == 1:
				ft.AddFlag(mysql.UniqueKeyFlag)
			case i == 0:
				ft.AddFlag(mysql.MultipleKeyFlag)
			}
		}
	}
	if nAuto > 1 {
		return nil, sqlerr.New(1075, "42000", "Incorrect table definition; there can be only one auto column and it must be defined as a key")
	}
	for _, c := range fks {
		if err := s.addForeignKey(schema, db, t, c); err != nil {
			return nil, err
		}
	}
	if err := checkGenerated(t); err != nil {
		return nil, err
	}
	return t, nil
}

// addIndex appends an index definition to t, naming it like MySQL when
// unnamed (first column, then _2, _3 ...).
func addIndex(t *catalog.TableInfo, name string, parts []*ast.IndexPartSpecification, unique, primary bool) (*catalog.IndexInfo, error) {
	ix := &catalog.IndexInfo{Name: name, Unique: unique, Primary: primary}
	for _, p := range parts {
		if p.Column == nil {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support expression indexes")
		}
		c := t.Column(p.Column.Name.O)
		if c == nil {
			return nil, sqlerr.New(sqlerr.ErKeyDoesNotExist, "42000", "Key column '%s' doesn't exist in table", p.Column.Name.O)
		}
		if p.Length > 0 && types.KindForFieldType(c.Type) != types.KindString && types.KindForFieldType(c.Type) != types.KindBytes {
			return nil, sqlerr.New(1089, "HY000", "Incorrect prefix key; the used key part isn't a string, the used length is longer than the key part, or the storage engine doesn't support unique prefix keys")
		}
		ix.Columns = append(ix.Columns, c.Offset)
		ix.Lengths = append(ix.Lengths, max(p.Length, 0))
	}
	if ix.Name == "" {
		base := t.Columns[ix.Columns[0]].Name
		ix.Name = base
		for i := 2; t.Index(ix.Name) != nil; i++ {
			ix.Name = fmt.Sprintf("%s_%d", base, i)
		}
	} else if t.Index(ix.Name) != nil {
		return nil, sqlerr.New(sqlerr.ErDupKeyName, "42000", "Duplicate key name '%s'", ix.Name)
	}
	t.NextIndexID++
	ix.ID = t.NextIndexID
	t.Indexes = append(t.Indexes, ix)
	return ix, nil
}

// setDefault validates a DEFAULT clause against the column type.
func (s *Session) setDefault(col *catalog.ColumnInfo, e ast.ExprNode) error {
	col.HasDefault = true
	if fc, ok := e.(*ast.FuncCallExpr); ok {
		switch fc.FnName.L {
		case "current_timestamp", "now", "localtime", "localtimestamp":
			switch col.Type.GetType() {
			case mysql.TypeDatetime, mysql.TypeTimestamp:
				col.DefaultNow = true
				return nil
			}
		}
		return sqlerr.New(1067, "42000", "Invalid default value for '%s'", col.Name)
	}
	ce, err := expr.Compile(e, nil)
	if err != nil {
		return err
	}
	v, err := ce.Eval(s.evalContext(nil), nil)
	if err != nil {
		return err
	}
	if v.IsNull() {
		if col.NotNull {
			return sqlerr.New(1067, "42000", "Invalid default value for '%s'", col.Name)
		}
		col.DefaultNull = true
		return nil
	}
	cv, err := types.Convert(v, col.Type)
	if err != nil {
		return sqlerr.New(1067, "42000", "Invalid default value for '%s'", col.Name)
	}
	col.Default = string(cv.AppendText(nil))
	return nil
}
