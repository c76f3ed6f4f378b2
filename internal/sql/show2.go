package sql

import (
	"context"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// runShowExtra answers the SHOW statements dump tools, the mysql CLI and
// ORMs send beyond the basic ones (show.go); handled is false for others.
func (s *Session) runShowExtra(ctx context.Context, n *ast.ShowStmt, schema *catalog.Schema, keep func(string) bool) (res *Result, handled bool, err error) {
	res = &Result{}
	switch n.Tp {
	case ast.ShowTables:
		db, err := s.dbName(n.DBName)
		if err != nil {
			return nil, true, err
		}
		if !isInfoSchemaDB(db) {
			return nil, false, nil
		}
		res.Columns = textColumns("Tables_in_" + infoschema.Name)
		if n.Full {
			res.Columns = textColumns("Tables_in_"+infoschema.Name, "Table_type")
		}
		for _, name := range infoschema.TableNames() {
			if keep(name) {
				if n.Full {
					res.Rows = append(res.Rows, textRow(name, "SYSTEM VIEW"))
				} else {
					res.Rows = append(res.Rows, textRow(name))
				}
			}
		}
	case ast.ShowColumns, ast.ShowIndex, ast.ShowCreateTable, ast.ShowCreateView:
		db, err := s.dbName(n.Table.Schema.O)
		if n.DBName != "" {
			db, err = n.DBName, nil
		}
		if err != nil {
			return nil, true, err
		}
		t := schema.Table(db, n.Table.Name.O)
		if isInfoSchemaDB(db) {
			t = infoschema.Table(n.Table.Name.O)
		}
		// Refused before "doesn't exist", as in MySQL: no probing.
		if !s.canSeeTable(db, n.Table.Name.O) {
			return nil, true, s.commandDenied("SHOW", n.Table.Name.O)
		}
		if t == nil {
			return nil, true, noSuchTable(db, n.Table.Name.O)
		}
		if n.Tp == ast.ShowCreateView && !isSuperuser(s.privs()) && s.privs().Table(db, t.Name)&privilege.ShowView == 0 {
			return nil, true, s.commandDenied("SHOW VIEW", t.Name)
		}
		switch n.Tp {
		case ast.ShowColumns:
			return s.showColumns(schema, db, t, n.Full, keep)
		case ast.ShowIndex:
			res.Columns = textColumns("Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Collation", "Cardinality",
				"Sub_part", "Packed", "Null", "Index_type", "Comment", "Index_comment", "Visible", "Expression")
			for _, r := range infoschema.IndexRows(t, s.e.stats.Load().Table(t.ID)) {
				row := textRow(t.Name, fmt.Sprint(r.NonUnique), r.Name, fmt.Sprint(r.Seq), r.Column, "A", fmt.Sprint(r.Cardinality), "", "", r.Nullable, "BTREE", "", r.Comment, "YES", "")
				row[7], row[8], row[14] = types.Null, types.Null, types.Null
				if r.SubPart != nil {
					row[7] = types.NewString(fmt.Sprint(r.SubPart))
				}
				res.Rows = append(res.Rows, row)
			}
		case ast.ShowCreateTable, ast.ShowCreateView:
			if t.IsView() {
				res.Columns = textColumns("View", "Create View", "character_set_client", "collation_connection")
				res.Rows = append(res.Rows, textRow(t.Name, createViewText(t), "utf8mb4", "utf8mb4_general_ci"))
				break
			}
			if n.Tp == ast.ShowCreateView {
				return nil, true, sqlerr.New(1347, "HY000", "'%s.%s' is not VIEW", db, t.Name)
			}
			res.Columns = textColumns("Table", "Create Table")
			res.Rows = append(res.Rows, textRow(t.Name, ShowCreateTable(t)))
		}
	case ast.ShowCreateDatabase:
		if isInfoSchemaDB(n.DBName) {
			res.Columns = textColumns("Database", "Create Database")
			res.Rows = append(res.Rows, textRow(infoschema.Name, "CREATE DATABASE `information_schema` /*!40100 DEFAULT CHARACTER SET utf8mb3 */ /*!80016 DEFAULT ENCRYPTION='N' */"))
			break
		}
		if err := s.checkShowDB(n.DBName); err != nil {
			return nil, true, err
		}
		d := schema.DB(n.DBName)
		if d == nil {
			return nil, true, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", n.DBName)
		}
		cs, coll := infoschema.DBCharset(d)
		ine := ""
		if n.IfNotExists {
			ine = "/*!32312 IF NOT EXISTS*/ "
		}
		res.Columns = textColumns("Database", "Create Database")
		res.Rows = append(res.Rows, textRow(d.Name, fmt.Sprintf("CREATE DATABASE %s`%s` /*!40100 DEFAULT CHARACTER SET %s COLLATE %s */ /*!80016 DEFAULT ENCRYPTION='N' */", ine, d.Name, cs, coll)))
	case ast.ShowTableStatus:
		db, err := s.dbName(n.DBName)
		if err != nil {
			return nil, true, err
		}
		res.Columns = textColumns("Name", "Engine", "Version", "Row_format", "Rows", "Avg_row_length", "Data_length", "Max_data_length",
			"Index_length", "Data_free", "Auto_increment", "Create_time", "Update_time", "Check_time", "Collation", "Checksum", "Create_options", "Comment")
		if isInfoSchemaDB(db) {
			break
		}
		if err := s.checkShowDB(db); err != nil {
			return nil, true, err
		}
		if schema.DB(db) == nil {
			return nil, true, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", db)
		}
		for _, t := range schema.Tables(db) {
			if t.Temporary || !keep(t.Name) || !s.canSeeTable(db, t.Name) {
				continue
			}
			row := make([]types.Datum, 18)
			row[0] = types.NewString(t.Name)
			if t.IsView() {
				row[17] = types.NewString("VIEW")
			} else {
				for i, v := range []string{"InnoDB", "10", "Dynamic", "0", "0", "16384", "0", "0", "0"} {
					row[1+i] = types.NewString(v)
				}
				row[14] = types.NewString(infoschema.TableCollation(t))
				row[16] = types.NewString("")
				row[17] = types.NewString(t.Comment)
			}
			res.Rows = append(res.Rows, row)
		}
	case ast.ShowGrants:
		r, err := s.showGrants(n)
		return r, true, err
	case ast.ShowTriggers:
		res.Columns = textColumns("Trigger", "Event", "Table", "Statement", "Timing", "Created", "sql_mode", "Definer", "character_set_client", "collation_connection", "Database Collation")
	case ast.ShowProcedureStatus, ast.ShowFunctionStatus:
		res.Columns = textColumns("Db", "Name", "Type", "Definer", "Modified", "Created", "Security_type", "Comment", "character_set_client", "collation_connection", "Database Collation")
	case ast.ShowEvents:
		res.Columns = textColumns("Db", "Name", "Definer", "Time zone", "Type", "Execute at", "Interval value", "Interval field", "Starts", "Ends", "Status", "Originator", "character_set_client", "collation_connection", "Database Collation")
	case ast.ShowPlugins:
		res.Columns = textColumns("Name", "Status", "Type", "Library", "License")
		res.Rows = append(res.Rows, textRow("InnoDB", "ACTIVE", "STORAGE ENGINE", "", "GPL"))
		res.Rows[0][3] = types.Null
	case ast.ShowOpenTables:
		res.Columns = textColumns("Database", "Table", "In_use", "Name_locked")
	case ast.ShowMasterStatus:
		res.Columns = textColumns("File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set")
	case ast.ShowCollation:
		res.Columns = textColumns("Collation", "Charset", "Id", "Default", "Compiled", "Sortlen", "Pad_attribute")
		for _, c := range infoschema.Collations {
			if keep(c.Name) {
				def := ""
				if c.Default {
					def = "Yes"
				}
				res.Rows = append(res.Rows, textRow(c.Name, c.Charset, fmt.Sprint(c.ID), def, "Yes", fmt.Sprint(c.SortLen), c.Pad))
			}
		}
	case ast.ShowCharset:
		res.Columns = textColumns("Charset", "Description", "Default collation", "Maxlen")
		for _, c := range infoschema.Charsets {
			if keep(c.Name) {
				res.Rows = append(res.Rows, textRow(c.Name, c.Description, c.DefaultCollation, fmt.Sprint(c.MaxLen)))
			}
		}
	case ast.ShowEngines:
		res.Columns = textColumns("Engine", "Support", "Comment", "Transactions", "XA", "Savepoints")
		res.Rows = append(res.Rows, textRow("InnoDB", "DEFAULT", "Strata transactional storage (Raft replicated, on Pebble)", "YES", "NO", "YES"))
	default:
		return nil, false, nil
	}
	return res, true, nil
}

// showColumns is SHOW [FULL] COLUMNS (DESCRIBE): of a table, or of a view
// (its columns as its query produces them).
func (s *Session) showColumns(schema *catalog.Schema, db string, t *catalog.TableInfo, full bool, keep func(string) bool) (*Result, bool, error) {
	res := &Result{Columns: textColumns("Field", "Type", "Null", "Key", "Default", "Extra")}
	if full {
		res.Columns = textColumns("Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment")
	}
	cols := t.Columns
	if t.IsView() {
		vc, err := s.viewColumns(schema, t)
		if err != nil {
			return nil, true, err
		}
		cols = vc
	}
	vis := infoVisibility{s}
	for _, c := range cols {
		privs := vis.Column(db, t.Name, c.Name)
		if !keep(c.Name) || privs == "" && !isInfoSchemaDB(db) {
			continue
		}
		r := infoschema.ColumnRow(db, t, c)
		if !isInfoSchemaDB(db) {
			r[18] = privs
		}
		def := types.Null
		if r[5] != nil {
			def = types.NewString(r[5].(string))
		}
		null := "YES"
		if c.NotNull {
			null = "NO"
		}
		key := r[16].(string)
		if t.IsView() {
			key = ""
		}
		if full {
			coll := types.Null
			if r[14] != nil {
				coll = types.NewString(r[14].(string))
			}
			res.Rows = append(res.Rows, []types.Datum{types.NewString(c.Name), types.NewString(r[15].(string)), coll, types.NewString(null),
				types.NewString(key), def, types.NewString(r[17].(string)), types.NewString(r[18].(string)), types.NewString(c.Comment)})
			continue
		}
		res.Rows = append(res.Rows, []types.Datum{types.NewString(c.Name), types.NewString(r[15].(string)), types.NewString(null),
			types.NewString(key), def, types.NewString(r[17].(string))})
	}
	return res, true, nil
}

// viewColumns plans a view's query and describes its output columns.
func (s *Session) viewColumns(schema *catalog.Schema, t *catalog.TableInfo) ([]*catalog.ColumnInfo, error) {
	node, err := parseView(t.ViewSQL)
	if err != nil {
		return nil, err
	}
	db := s.db
	if d := schema.DBByID(t.DBID); d != nil {
		db = d.Name
	}
	b := plan.NewBuilder(schema, db)
	b.ParseView = parseView
	p, err := b.BuildQuery(node)
	if err != nil {
		return nil, err
	}
	var out []*catalog.ColumnInfo
	for i, c := range p.Columns() {
		name := c.Name
		if i < len(t.ViewColumns) {
			name = t.ViewColumns[i]
		}
		ft := c.Type
		if ft.GetType() == mysql.TypeVarString {
			ft = ft.Clone()
			ft.SetType(mysql.TypeVarchar)
		}
		out = append(out, &catalog.ColumnInfo{Name: name, Offset: i, Type: ft, NotNull: mysql.HasNotNullFlag(ft.GetFlag())})
	}
	return out, nil
}

func createViewText(t *catalog.TableInfo) string {
	cols := ""
	if len(t.ViewColumns) > 0 {
		q := make([]string, len(t.ViewColumns))
		for i, c := range t.ViewColumns {
			q[i] = "`" + c + "`"
		}
		cols = " (" + strings.Join(q, ",") + ")"
	}
	return fmt.Sprintf("CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `%s`%s AS %s", t.Name, cols, t.ViewSQL)
}

// showWhere keeps the rows of a SHOW result for which the WHERE clause
// holds, its column names naming the result's columns.
func showWhere(res *Result, where ast.ExprNode) error {
	e, err := expr.Compile(where, showBinder(res.Columns))
	if err != nil {
		return err
	}
	ec := &expr.EvalContext{}
	kept := res.Rows[:0]
	for _, r := range res.Rows {
		d, err := e.Eval(ec, r)
		if err != nil {
			return err
		}
		t, null, _ := d.ToBool()
		if t && !null {
			kept = append(kept, r)
		}
	}
	res.Rows = kept
	return nil
}

type showBinder []*Column

func (b showBinder) Bind(n ast.ExprNode) (expr.Expr, error) {
	if c, ok := n.(*ast.ColumnNameExpr); ok {
		for i, col := range b {
			if strings.EqualFold(col.Name, c.Name.Name.O) {
				return expr.NewColumn(i, col.Type, col.Name), nil
			}
		}
		return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'where clause'", c.Name.Name.O)
	}
	return nil, nil
}

// columnDefinition renders one column of SHOW CREATE TABLE.
func columnDefinition(t *catalog.TableInfo, c *catalog.ColumnInfo) string {
	line := fmt.Sprintf("  `%s` %s", c.Name, infoschema.ColumnType(c.Type))
	if k := types.KindForFieldType(c.Type); (k == types.KindString) && c.Type.GetCollate() != "" && c.Type.GetCollate() != infoschema.TableCollation(t) {
		line += fmt.Sprintf(" CHARACTER SET %s COLLATE %s", c.Type.GetCharset(), c.Type.GetCollate())
	}
	if c.IsGenerated() {
		kind := "VIRTUAL"
		if c.GeneratedStored {
			kind = "STORED"
		}
		line += fmt.Sprintf(" GENERATED ALWAYS AS (%s) %s", c.GeneratedExpr, kind)
		if c.NotNull {
			line += " NOT NULL"
		}
	} else {
		if c.NotNull {
			line += " NOT NULL"
		} else if c.Type.GetType() == mysql.TypeTimestamp {
			line += " NULL"
		}
		switch {
		case c.DefaultNow:
			line += " DEFAULT CURRENT_TIMESTAMP"
			if c.Type.GetDecimal() > 0 {
				line += fmt.Sprintf("(%d)", c.Type.GetDecimal())
			}
		case c.HasDefault && c.DefaultNull:
			line += " DEFAULT NULL"
		case c.HasDefault:
			line += " DEFAULT " + defaultLiteral(c)
		case !c.NotNull && !c.AutoIncrement && !isBlobOrJSON(c.Type):
			line += " DEFAULT NULL"
		}
		if c.OnUpdateNow {
			line += " ON UPDATE CURRENT_TIMESTAMP"
			if c.Type.GetDecimal() > 0 {
				line += fmt.Sprintf("(%d)", c.Type.GetDecimal())
			}
		}
		if c.AutoRandomBits > 0 {
			line += fmt.Sprintf(" /*T![auto_rand] AUTO_RANDOM(%d) */", c.AutoRandomBits)
		} else if c.AutoIncrement {
			line += " AUTO_INCREMENT"
		}
	}
	if c.Comment != "" {
		line += " COMMENT " + sqlString(c.Comment)
	}
	return line
}

func isBlobOrJSON(ft *ptypes.FieldType) bool {
	switch ft.GetType() {
	case mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob, mysql.TypeJSON:
		return true
	}
	return false
}

// defaultLiteral renders a column default: numbers bare for BIT, quoted
// otherwise, as MySQL shows them.
func defaultLiteral(c *catalog.ColumnInfo) string {
	return sqlString(c.Default)
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `''`, "\n", `\n`, "\r", `\r`, "\x00", `\0`)
	return "'" + r.Replace(s) + "'"
}

func foreignKeyDefinition(t *catalog.TableInfo, fk *catalog.ForeignKeyInfo, db string) string {
	cols := make([]string, len(fk.Columns))
	for i, off := range fk.Columns {
		cols[i] = "`" + t.Columns[off].Name + "`"
	}
	refs := make([]string, len(fk.RefColumns))
	for i, c := range fk.RefColumns {
		refs[i] = "`" + c + "`"
	}
	ref := "`" + fk.RefTable + "`"
	if db != "" && !strings.EqualFold(db, fk.RefDB) {
		ref = "`" + fk.RefDB + "`." + ref
	}
	line := fmt.Sprintf("  CONSTRAINT `%s` FOREIGN KEY (%s) REFERENCES %s (%s)", fk.Name, strings.Join(cols, ", "), ref, strings.Join(refs, ", "))
	if fk.OnDelete != "" && fk.OnDelete != "RESTRICT" {
		line += " ON DELETE " + fk.OnDelete
	}
	if fk.OnUpdate != "" && fk.OnUpdate != "RESTRICT" {
		line += " ON UPDATE " + fk.OnUpdate
	}
	return line
}
