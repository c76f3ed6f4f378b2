// Package infoschema serves the read-only INFORMATION_SCHEMA database: the
// tables mysqldump, the mysql CLI and ORM migration tools read to learn the
// schema (SCHEMATA, TABLES, COLUMNS, STATISTICS, KEY_COLUMN_USAGE,
// REFERENTIAL_CONSTRAINTS, TABLE_CONSTRAINTS, VIEWS, ROUTINES, ENGINES,
// CHARACTER_SETS, COLLATIONS and a few that are always empty here, such as
// TRIGGERS and FILES).
//
// Contract with the planner: Table returns the definition of a table (a
// catalog.TableInfo that exists nowhere in storage) and Rows its rows,
// computed from one catalog.Schema snapshot; the planner reads them as a
// constant relation. Column names and types follow MySQL 8.0's
// INFORMATION_SCHEMA.
//
// Privileges. As in MySQL 8, a session sees in SCHEMATA only the databases
// on which it holds some privilege (all of them with SHOW DATABASES), in
// TABLES, STATISTICS, KEY_COLUMN_USAGE, TABLE_CONSTRAINTS,
// REFERENTIAL_CONSTRAINTS and VIEWS only the tables on which it holds some
// privilege (on the table or one of its columns), and in COLUMNS only the
// columns it holds a privilege on, with those privileges in PRIVILEGES.
// Rows takes the session's Visibility for that; since the rows then depend
// on privileges too, the planner computes them each time a plan runs.
package infoschema

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/types"
)

// Name is the database name.
const Name = "information_schema"

// IsName reports whether db names INFORMATION_SCHEMA (any case).
func IsName(db string) bool { return strings.EqualFold(db, Name) }

type colKind int

const (
	str colKind = iota
	num
	dt
)

type colDef struct {
	name string
	kind colKind
}

func s(name string) colDef { return colDef{name, str} }
func n(name string) colDef { return colDef{name, num} }
func d(name string) colDef { return colDef{name, dt} }

// tableDefs lists the columns of every table, in MySQL 8.0's order.
var tableDefs = map[string][]colDef{
	"SCHEMATA": {s("CATALOG_NAME"), s("SCHEMA_NAME"), s("DEFAULT_CHARACTER_SET_NAME"), s("DEFAULT_COLLATION_NAME"), s("SQL_PATH"), s("DEFAULT_ENCRYPTION")},
	"TABLES": {s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"), s("TABLE_TYPE"), s("ENGINE"), n("VERSION"), s("ROW_FORMAT"),
		n("TABLE_ROWS"), n("AVG_ROW_LENGTH"), n("DATA_LENGTH"), n("MAX_DATA_LENGTH"), n("INDEX_LENGTH"), n("DATA_FREE"), n("AUTO_INCREMENT"),
		d("CREATE_TIME"), d("UPDATE_TIME"), d("CHECK_TIME"), s("TABLE_COLLATION"), n("CHECKSUM"), s("CREATE_OPTIONS"), s("TABLE_COMMENT")},
	"COLUMNS": {s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"), s("COLUMN_NAME"), n("ORDINAL_POSITION"), s("COLUMN_DEFAULT"),
		s("IS_NULLABLE"), s("DATA_TYPE"), n("CHARACTER_MAXIMUM_LENGTH"), n("CHARACTER_OCTET_LENGTH"), n("NUMERIC_PRECISION"), n("NUMERIC_SCALE"),
		n("DATETIME_PRECISION"), s("CHARACTER_SET_NAME"), s("COLLATION_NAME"), s("COLUMN_TYPE"), s("COLUMN_KEY"), s("EXTRA"), s("PRIVILEGES"),
		s("COLUMN_COMMENT"), s("GENERATION_EXPRESSION"), n("SRS_ID")},
	"STATISTICS": {s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"), n("NON_UNIQUE"), s("INDEX_SCHEMA"), s("INDEX_NAME"), n("SEQ_IN_INDEX"),
		s("COLUMN_NAME"), s("COLLATION"), n("CARDINALITY"), n("SUB_PART"), s("PACKED"), s("NULLABLE"), s("INDEX_TYPE"), s("COMMENT"),
		s("INDEX_COMMENT"), s("IS_VISIBLE"), s("EXPRESSION")},
	"KEY_COLUMN_USAGE": {s("CONSTRAINT_CATALOG"), s("CONSTRAINT_SCHEMA"), s("CONSTRAINT_NAME"), s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"),
		s("COLUMN_NAME"), n("ORDINAL_POSITION"), n("POSITION_IN_UNIQUE_CONSTRAINT"), s("REFERENCED_TABLE_SCHEMA"), s("REFERENCED_TABLE_NAME"), s("REFERENCED_COLUMN_NAME")},
	"REFERENTIAL_CONSTRAINTS": {s("CONSTRAINT_CATALOG"), s("CONSTRAINT_SCHEMA"), s("CONSTRAINT_NAME"), s("UNIQUE_CONSTRAINT_CATALOG"),
		s("UNIQUE_CONSTRAINT_SCHEMA"), s("UNIQUE_CONSTRAINT_NAME"), s("MATCH_OPTION"), s("UPDATE_RULE"), s("DELETE_RULE"), s("TABLE_NAME"), s("REFERENCED_TABLE_NAME")},
	"TABLE_CONSTRAINTS": {s("CONSTRAINT_CATALOG"), s("CONSTRAINT_SCHEMA"), s("CONSTRAINT_NAME"), s("TABLE_SCHEMA"), s("TABLE_NAME"), s("CONSTRAINT_TYPE"), s("ENFORCED")},
	"VIEWS": {s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"), s("VIEW_DEFINITION"), s("CHECK_OPTION"), s("IS_UPDATABLE"), s("DEFINER"),
		s("SECURITY_TYPE"), s("CHARACTER_SET_CLIENT"), s("COLLATION_CONNECTION")},
	"ROUTINES": {s("SPECIFIC_NAME"), s("ROUTINE_CATALOG"), s("ROUTINE_SCHEMA"), s("ROUTINE_NAME"), s("ROUTINE_TYPE"), s("DATA_TYPE"),
		n("CHARACTER_MAXIMUM_LENGTH"), n("CHARACTER_OCTET_LENGTH"), n("NUMERIC_PRECISION"), n("NUMERIC_SCALE"), n("DATETIME_PRECISION"),
		s("CHARACTER_SET_NAME"), s("COLLATION_NAME"), s("DTD_IDENTIFIER"), s("ROUTINE_BODY"), s("ROUTINE_DEFINITION"), s("EXTERNAL_NAME"),
		s("EXTERNAL_LANGUAGE"), s("PARAMETER_STYLE"), s("IS_DETERMINISTIC"), s("SQL_DATA_ACCESS"), s("SQL_PATH"), s("SECURITY_TYPE"),
		d("CREATED"), d("LAST_ALTERED"), s("SQL_MODE"), s("ROUTINE_COMMENT"), s("DEFINER"), s("CHARACTER_SET_CLIENT"), s("COLLATION_CONNECTION"), s("DATABASE_COLLATION")},
	"PARAMETERS": {s("SPECIFIC_CATALOG"), s("SPECIFIC_SCHEMA"), s("SPECIFIC_NAME"), n("ORDINAL_POSITION"), s("PARAMETER_MODE"), s("PARAMETER_NAME"),
		s("DATA_TYPE"), n("CHARACTER_MAXIMUM_LENGTH"), n("CHARACTER_OCTET_LENGTH"), n("NUMERIC_PRECISION"), n("NUMERIC_SCALE"), n("DATETIME_PRECISION"),
		s("CHARACTER_SET_NAME"), s("COLLATION_NAME"), s("DTD_IDENTIFIER"), s("ROUTINE_TYPE")},
	"TRIGGERS": {s("TRIGGER_CATALOG"), s("TRIGGER_SCHEMA"), s("TRIGGER_NAME"), s("EVENT_MANIPULATION"), s("EVENT_OBJECT_CATALOG"), s("EVENT_OBJECT_SCHEMA"),
		s("EVENT_OBJECT_TABLE"), n("ACTION_ORDER"), s("ACTION_CONDITION"), s("ACTION_STATEMENT"), s("ACTION_ORIENTATION"), s("ACTION_TIMING"),
		s("ACTION_REFERENCE_OLD_TABLE"), s("ACTION_REFERENCE_NEW_TABLE"), s("ACTION_REFERENCE_OLD_ROW"), s("ACTION_REFERENCE_NEW_ROW"), d("CREATED"),
		s("SQL_MODE"), s("DEFINER"), s("CHARACTER_SET_CLIENT"), s("COLLATION_CONNECTION"), s("DATABASE_COLLATION")},
	"EVENTS": {s("EVENT_CATALOG"), s("EVENT_SCHEMA"), s("EVENT_NAME"), s("DEFINER"), s("TIME_ZONE"), s("EVENT_BODY"), s("EVENT_DEFINITION"),
		s("EVENT_TYPE"), d("EXECUTE_AT"), s("INTERVAL_VALUE"), s("INTERVAL_FIELD"), s("SQL_MODE"), d("STARTS"), d("ENDS"), s("STATUS"),
		s("ON_COMPLETION"), d("CREATED"), d("LAST_ALTERED"), d("LAST_EXECUTED"), s("EVENT_COMMENT"), n("ORIGINATOR"), s("CHARACTER_SET_CLIENT"),
		s("COLLATION_CONNECTION"), s("DATABASE_COLLATION")},
	"FILES": {n("FILE_ID"), s("FILE_NAME"), s("FILE_TYPE"), s("TABLESPACE_NAME"), s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"),
		s("LOGFILE_GROUP_NAME"), n("LOGFILE_GROUP_NUMBER"), s("ENGINE"), s("FULLTEXT_KEYS"), n("DELETED_ROWS"), n("UPDATE_COUNT"),
		n("FREE_EXTENTS"), n("TOTAL_EXTENTS"), n("EXTENT_SIZE"), n("INITIAL_SIZE"), n("MAXIMUM_SIZE"), n("AUTOEXTEND_SIZE"), d("CREATION_TIME"),
		d("LAST_UPDATE_TIME"), d("LAST_ACCESS_TIME"), n("RECOVER_TIME"), n("TRANSACTION_COUNTER"), n("VERSION"), s("ROW_FORMAT"),
		n("TABLE_ROWS"), n("AVG_ROW_LENGTH"), n("DATA_LENGTH"), n("MAX_DATA_LENGTH"), n("INDEX_LENGTH"), n("DATA_FREE"), d("CREATE_TIME"),
		d("UPDATE_TIME"), d("CHECK_TIME"), n("CHECKSUM"), s("STATUS"), s("EXTRA")},
	"PARTITIONS": {s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"), s("PARTITION_NAME"), s("SUBPARTITION_NAME"),
		n("PARTITION_ORDINAL_POSITION"), n("SUBPARTITION_ORDINAL_POSITION"), s("PARTITION_METHOD"), s("SUBPARTITION_METHOD"),
		s("PARTITION_EXPRESSION"), s("SUBPARTITION_EXPRESSION"), s("PARTITION_DESCRIPTION"), n("TABLE_ROWS")},
	"CHECK_CONSTRAINTS":                     {s("CONSTRAINT_CATALOG"), s("CONSTRAINT_SCHEMA"), s("CONSTRAINT_NAME"), s("CHECK_CLAUSE")},
	"ENGINES":                               {s("ENGINE"), s("SUPPORT"), s("COMMENT"), s("TRANSACTIONS"), s("XA"), s("SAVEPOINTS")},
	"CHARACTER_SETS":                        {s("CHARACTER_SET_NAME"), s("DEFAULT_COLLATE_NAME"), s("DESCRIPTION"), n("MAXLEN")},
	"COLLATIONS":                            {s("COLLATION_NAME"), s("CHARACTER_SET_NAME"), n("ID"), s("IS_DEFAULT"), s("IS_COMPILED"), n("SORTLEN"), s("PAD_ATTRIBUTE")},
	"COLLATION_CHARACTER_SET_APPLICABILITY": {s("COLLATION_NAME"), s("CHARACTER_SET_NAME")},
	"USER_PRIVILEGES":                       {s("GRANTEE"), s("TABLE_CATALOG"), s("PRIVILEGE_TYPE"), s("IS_GRANTABLE")},
	"SCHEMA_PRIVILEGES":                     {s("GRANTEE"), s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("PRIVILEGE_TYPE"), s("IS_GRANTABLE")},
	"TABLE_PRIVILEGES":                      {s("GRANTEE"), s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"), s("PRIVILEGE_TYPE"), s("IS_GRANTABLE")},
	"COLUMN_PRIVILEGES":                     {s("GRANTEE"), s("TABLE_CATALOG"), s("TABLE_SCHEMA"), s("TABLE_NAME"), s("COLUMN_NAME"), s("PRIVILEGE_TYPE"), s("IS_GRANTABLE")},
}

// TableNames lists the tables, sorted.
func TableNames() []string {
	out := make([]string, 0, len(tableDefs))
	for k := range tableDefs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var tableInfos = func() map[string]*catalog.TableInfo {
	out := map[string]*catalog.TableInfo{}
	for name, cols := range clusterTableDefs {
		tableDefs[name] = cols
	}
	for name, cols := range tableDefs {
		t := &catalog.TableInfo{Name: name}
		for i, c := range cols {
			var ft *ptypes.FieldType
			switch c.kind {
			case str:
				ft = ptypes.NewFieldType(mysql.TypeVarchar)
				ft.SetFlen(512)
				ft.SetCharset("utf8mb3")
				ft.SetCollate("utf8mb3_general_ci")
			case num:
				ft = ptypes.NewFieldType(mysql.TypeLonglong)
				ft.SetFlen(21)
				ft.SetFlag(mysql.UnsignedFlag)
				ft.SetCharset("binary")
				ft.SetCollate("binary")
			case dt:
				ft = ptypes.NewFieldType(mysql.TypeDatetime)
				ft.SetFlen(19)
				ft.SetCharset("binary")
				ft.SetCollate("binary")
			}
			t.Columns = append(t.Columns, &catalog.ColumnInfo{ID: int64(i + 1), Name: c.name, Offset: i, Type: ft})
		}
		out[name] = t
	}
	return out
}()

// IsPrivilegeTable reports whether name is one of the privilege tables
// (USER_, SCHEMA_, TABLE_, COLUMN_PRIVILEGES), whose rows come from the
// accounts, through a PrivilegeSource.
func IsPrivilegeTable(name string) bool {
	switch strings.ToUpper(name) {
	case "USER_PRIVILEGES", "SCHEMA_PRIVILEGES", "TABLE_PRIVILEGES", "COLUMN_PRIVILEGES":
		return true
	}
	return false
}

// PrivilegeSource returns the rows of a privilege table now, as the
// session running the statement may see them.
type PrivilegeSource func(table string) [][]types.Datum

// Table returns the definition of an INFORMATION_SCHEMA table (any case),
// or nil.
func Table(name string) *catalog.TableInfo { return tableInfos[strings.ToUpper(name)] }

// Visibility is what a session may see of the schema (see the package
// comment). Names are as stored; implementations compare them without
// regard to case.
type Visibility interface {
	// DB reports whether the database is listed.
	DB(db string) bool
	// Table reports whether the table or view is listed.
	Table(db, table string) bool
	// Column returns the privileges held on a column, as COLUMNS.PRIVILEGES
	// lists them ("select,insert,update,references" or part of it); ""
	// hides the column.
	Column(db, table, col string) string
	// ViewDefinition reports whether VIEWS.VIEW_DEFINITION is shown (SHOW
	// VIEW and SELECT on the view); otherwise it is empty.
	ViewDefinition(db, view string) bool
}

// ViewColumner is a Visibility that can describe a view's columns (by
// planning its query); COLUMNS then lists them for views too.
type ViewColumner interface {
	ViewColumns(schema *catalog.Schema, view *catalog.TableInfo) []*catalog.ColumnInfo
}

// Rows returns the rows of an INFORMATION_SCHEMA table as seen in schema
// by a session that sees vis (nil: everything); the values have the kinds
// of Table(name)'s column types. TABLES.TABLE_ROWS and STATISTICS.
// CARDINALITY come from stats (ANALYZE TABLE), 0 for a table without.
func Rows(schema *catalog.Schema, name string, vis Visibility, stats *catalog.Stats) [][]types.Datum {
	b := &builder{schema: schema, vis: vis, stats: stats}
	switch strings.ToUpper(name) {
	case "SCHEMATA":
		b.schemata()
	case "TABLES":
		b.tables()
	case "COLUMNS":
		b.columns()
	case "STATISTICS":
		b.statistics()
	case "KEY_COLUMN_USAGE":
		b.keyColumnUsage()
	case "REFERENTIAL_CONSTRAINTS":
		b.referentialConstraints()
	case "TABLE_CONSTRAINTS":
		b.tableConstraints()
	case "VIEWS":
		b.views()
	case "ENGINES":
		b.add("InnoDB", "DEFAULT", "Strata transactional storage (Raft replicated, on Pebble)", "YES", "NO", "YES")
	case "CHARACTER_SETS":
		for _, cs := range Charsets {
			b.add(cs.Name, cs.DefaultCollation, cs.Description, int64(cs.MaxLen))
		}
	case "COLLATIONS":
		for _, c := range Collations {
			b.add(c.Name, c.Charset, int64(c.ID), yesEmpty(c.Default), "Yes", int64(c.SortLen), c.Pad)
		}
	case "COLLATION_CHARACTER_SET_APPLICABILITY":
		for _, c := range Collations {
			b.add(c.Name, c.Charset)
		}
	}
	return b.rows
}

func yesEmpty(v bool) string {
	if v {
		return "Yes"
	}
	return ""
}

type builder struct {
	schema *catalog.Schema
	vis    Visibility
	stats  *catalog.Stats
	rows   [][]types.Datum
}

// add appends a row; values are string, int64, nil (NULL) or a Datum.
func (b *builder) add(vals ...any) {
	row := make([]types.Datum, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case nil:
			row[i] = types.Null
		case string:
			row[i] = types.NewString(x)
		case int64:
			row[i] = types.NewUint(uint64(x))
		case int:
			row[i] = types.NewUint(uint64(x))
		case types.Datum:
			row[i] = x
		default:
			panic(fmt.Sprintf("infoschema: value of type %T", v))
		}
	}
	b.rows = append(b.rows, row)
}

// dbs lists the stored databases the session sees.
func (b *builder) dbs() []string {
	names := b.schema.DBNames()
	if b.vis == nil {
		return names
	}
	out := names[:0:0]
	for _, db := range names {
		if b.vis.DB(db) {
			out = append(out, db)
		}
	}
	return out
}

// tablesOf lists the tables and views of db the session sees.
func (b *builder) tablesOf(db string) []*catalog.TableInfo {
	all := b.schema.Tables(db)
	if b.vis == nil {
		return all
	}
	out := all[:0:0]
	for _, t := range all {
		if b.vis.Table(db, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func (b *builder) schemata() {
	b.add("def", Name, "utf8mb3", "utf8mb3_general_ci", nil, "NO")
	for _, name := range b.dbs() {
		db := b.schema.DB(name)
		cs, coll := DBCharset(db)
		b.add("def", db.Name, cs, coll, nil, "NO")
	}
}

// DBCharset returns a database's default character set and collation.
func DBCharset(db *catalog.DBInfo) (string, string) {
	if db.Collate != "" {
		return CharsetOfCollation(db.Collate), db.Collate
	}
	return "utf8mb4", DefaultCollation
}

// TableCollation returns a table's default collation.
func TableCollation(t *catalog.TableInfo) string {
	if t.Collate != "" {
		return t.Collate
	}
	return "utf8mb4_bin"
}

func (b *builder) tables() {
	for _, name := range TableNames() {
		b.add("def", Name, name, "SYSTEM VIEW", nil, int64(10), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, "", "")
	}
	for _, db := range b.dbs() {
		for _, t := range b.tablesOf(db) {
			if t.IsView() {
				b.add("def", db, t.Name, "VIEW", nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, "VIEW")
				continue
			}
			var rows int64
			if ts := b.stats.Table(t.ID); ts != nil {
				rows = ts.Rows
			}
			b.add("def", db, t.Name, "BASE TABLE", "InnoDB", int64(10), "Dynamic", rows, int64(0), int64(16384), int64(0),
				int64(0), int64(0), nil, nil, nil, nil, TableCollation(t), nil, "", t.Comment)
		}
	}
}

func (b *builder) columns() {
	for _, db := range b.dbs() {
		for _, t := range b.tablesOf(db) {
			cols := t.Columns
			if vc, ok := b.vis.(ViewColumner); ok && t.IsView() {
				cols = vc.ViewColumns(b.schema, t)
			}
			for _, c := range cols {
				row := ColumnRow(db, t, c)
				if t.IsView() {
					row[16] = "" // COLUMN_KEY
				}
				if b.vis != nil {
					privs := b.vis.Column(db, t.Name, c.Name)
					if privs == "" {
						continue
					}
					row[18] = privs
				}
				b.add(row...)
			}
		}
	}
}

// ColumnRow is a column's INFORMATION_SCHEMA.COLUMNS row.
func ColumnRow(db string, t *catalog.TableInfo, c *catalog.ColumnInfo) []any {
	ft := c.Type
	var def any
	switch {
	case c.DefaultNow:
		def = "CURRENT_TIMESTAMP"
		if ft.GetDecimal() > 0 {
			def = fmt.Sprintf("CURRENT_TIMESTAMP(%d)", ft.GetDecimal())
		}
	case c.HasDefault && !c.DefaultNull:
		def = c.Default
	}
	null := "YES"
	if c.NotNull {
		null = "NO"
	}
	var charLen, octLen, prec, scale, dtPrec, cs, coll any
	switch ft.GetType() {
	case mysql.TypeString, mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeBlob, mysql.TypeTinyBlob, mysql.TypeMediumBlob,
		mysql.TypeLongBlob, mysql.TypeEnum, mysql.TypeSet:
		l := int64(ft.GetFlen())
		switch ft.GetType() {
		case mysql.TypeTinyBlob:
			l = 255
		case mysql.TypeBlob:
			l = 65535
		case mysql.TypeMediumBlob:
			l = 16777215
		case mysql.TypeLongBlob:
			l = 4294967295
		case mysql.TypeEnum, mysql.TypeSet:
			l = 0
			for i, e := range ft.GetElems() {
				if ft.GetType() == mysql.TypeEnum {
					l = max(l, int64(len([]rune(e))))
				} else {
					l += int64(len([]rune(e)))
					if i > 0 {
						l++
					}
				}
			}
		}
		charLen = l
		if ft.GetCharset() == "binary" || ft.GetCharset() == "" {
			octLen = l
		} else {
			mul := int64(4)
			if strings.HasPrefix(ft.GetCharset(), "utf8mb3") || ft.GetCharset() == "utf8" {
				mul = 3
			} else if ft.GetCharset() == "latin1" || ft.GetCharset() == "ascii" {
				mul = 1
			}
			octLen = min(l*mul, 4294967295)
			if ft.GetType() == mysql.TypeBlob || ft.GetType() == mysql.TypeTinyBlob || ft.GetType() == mysql.TypeMediumBlob || ft.GetType() == mysql.TypeLongBlob {
				octLen = l
			}
			cs, coll = ft.GetCharset(), ft.GetCollate()
		}
	case mysql.TypeTiny:
		prec, scale = int64(3), int64(0)
	case mysql.TypeShort:
		prec, scale = int64(5), int64(0)
	case mysql.TypeInt24:
		prec, scale = int64(7), int64(0)
	case mysql.TypeLong:
		prec, scale = int64(10), int64(0)
	case mysql.TypeLonglong:
		prec, scale = int64(19), int64(0)
		if mysql.HasUnsignedFlag(ft.GetFlag()) {
			prec = int64(20)
		}
	case mysql.TypeNewDecimal:
		prec, scale = int64(ft.GetFlen()), int64(max(ft.GetDecimal(), 0))
	case mysql.TypeFloat:
		prec = int64(12)
		if ft.GetDecimal() >= 0 && ft.GetDecimal() < 31 {
			prec, scale = int64(ft.GetFlen()), int64(ft.GetDecimal())
		}
	case mysql.TypeDouble:
		prec = int64(22)
		if ft.GetDecimal() >= 0 && ft.GetDecimal() < 31 {
			prec, scale = int64(ft.GetFlen()), int64(ft.GetDecimal())
		}
	case mysql.TypeBit:
		prec = int64(ft.GetFlen())
	case mysql.TypeDatetime, mysql.TypeTimestamp, mysql.TypeDuration:
		dtPrec = int64(max(ft.GetDecimal(), 0))
	}
	if ft.GetType() == mysql.TypeJSON {
		charLen, octLen = nil, nil
	}
	return []any{"def", db, t.Name, c.Name, int64(c.Offset + 1), def, null, DataType(ft), charLen, octLen, prec, scale, dtPrec,
		cs, coll, ColumnType(ft), ColumnKey(t, c), Extra(c), "select,insert,update,references", c.Comment, c.GeneratedExpr, nil}
}

// DataType is COLUMNS.DATA_TYPE: the type's name without attributes.
func DataType(ft *ptypes.FieldType) string {
	return ptypes.TypeToStr(ft.GetType(), ft.GetCharset())
}

// ColumnType is the type as SHOW COLUMNS and COLUMNS.COLUMN_TYPE print it
// (int(11), varchar(20), decimal(10,2) unsigned, enum('a','b')), with the
// integer display widths of the MySQL version the server reports.
func ColumnType(ft *ptypes.FieldType) string {
	return strings.TrimSuffix(ft.InfoSchemaStr(), " binary")
}

// ColumnKey is COLUMNS.COLUMN_KEY: PRI, UNI, MUL or empty.
func ColumnKey(t *catalog.TableInfo, c *catalog.ColumnInfo) string {
	if t.PKIsHandle && t.HandleOffset == c.Offset {
		return "PRI"
	}
	key := ""
	for _, ix := range t.Indexes {
		for i, off := range ix.Columns {
			if off != c.Offset {
				continue
			}
			switch {
			case ix.Primary:
				return "PRI"
			case ix.Unique && len(ix.Columns) == 1 && key == "":
				key = "UNI"
			case i == 0 && key == "":
				key = "MUL"
			}
		}
	}
	return key
}

// Extra is COLUMNS.EXTRA.
func Extra(c *catalog.ColumnInfo) string {
	var parts []string
	if c.AutoIncrement {
		parts = append(parts, "auto_increment")
	}
	if c.DefaultNow {
		parts = append(parts, "DEFAULT_GENERATED")
	}
	if c.OnUpdateNow {
		parts = append(parts, "on update CURRENT_TIMESTAMP")
	}
	if c.IsGenerated() {
		if c.GeneratedStored {
			parts = append(parts, "STORED GENERATED")
		} else {
			parts = append(parts, "VIRTUAL GENERATED")
		}
	}
	return strings.Join(parts, " ")
}

func (b *builder) statistics() {
	for _, db := range b.dbs() {
		for _, t := range b.tablesOf(db) {
			for _, r := range IndexRows(t, b.stats.Table(t.ID)) {
				b.add(append([]any{"def", db, t.Name, r.NonUnique, db}, r.Name, r.Seq, r.Column, "A", r.Cardinality, r.SubPart,
					nil, r.Nullable, "BTREE", "", r.Comment, "YES", nil)...)
			}
		}
	}
}

// IndexRow is one column of one index, as SHOW INDEX and STATISTICS list it.
type IndexRow struct {
	Name      string
	NonUnique int64
	Seq       int64
	Column    string
	SubPart   any // nil or int64
	Nullable  string
	Comment   string
	// Cardinality is the number of distinct values of the index's
	// columns up to this one, from ts (0 without statistics).
	Cardinality int64
}

// IndexRows lists the index columns of t: the clustered primary key
// first, then every index in creation order, with the cardinalities of
// the table's statistics ts (nil: none).
func IndexRows(t *catalog.TableInfo, ts *catalog.TableStats) []IndexRow {
	var out []IndexRow
	if t.IsView() {
		return nil
	}
	if t.PKIsHandle {
		r := IndexRow{Name: "PRIMARY", Seq: 1, Column: t.Columns[t.HandleOffset].Name}
		if ts != nil {
			r.Cardinality = ts.Rows
		}
		out = append(out, r)
	}
	for _, ix := range t.Indexes {
		var nonUnique int64 = 1
		if ix.Unique {
			nonUnique = 0
		}
		name := ix.Name
		if ix.Primary {
			name = "PRIMARY"
		}
		for i, off := range ix.Columns {
			r := IndexRow{Name: name, NonUnique: nonUnique, Seq: int64(i + 1), Column: t.Columns[off].Name}
			if !t.Columns[off].NotNull {
				r.Nullable = "YES"
			}
			if i < len(ix.Lengths) && ix.Lengths[i] > 0 {
				r.SubPart = int64(ix.Lengths[i])
			}
			if ts != nil && i < len(ts.Indexes[ix.ID]) {
				r.Cardinality = ts.Indexes[ix.ID][i]
			}
			out = append(out, r)
		}
	}
	return out
}

func (b *builder) keyColumnUsage() {
	for _, db := range b.dbs() {
		for _, t := range b.tablesOf(db) {
			if t.PKIsHandle {
				b.add("def", db, "PRIMARY", "def", db, t.Name, t.Columns[t.HandleOffset].Name, int64(1), nil, nil, nil, nil)
			}
			for _, ix := range t.Indexes {
				if !ix.Unique {
					continue
				}
				name := ix.Name
				if ix.Primary {
					name = "PRIMARY"
				}
				for i, off := range ix.Columns {
					b.add("def", db, name, "def", db, t.Name, t.Columns[off].Name, int64(i+1), nil, nil, nil, nil)
				}
			}
			for _, fk := range t.ForeignKeys {
				for i, off := range fk.Columns {
					b.add("def", db, fk.Name, "def", db, t.Name, t.Columns[off].Name, int64(i+1), int64(i+1), fk.RefDB, fk.RefTable, fk.RefColumns[i])
				}
			}
		}
	}
}

// RefUniqueName names the parent's key a foreign key references: PRIMARY or
// the unique index on exactly its columns ("" when there is none).
func RefUniqueName(schema *catalog.Schema, fk *catalog.ForeignKeyInfo) string {
	p := schema.Table(fk.RefDB, fk.RefTable)
	if p == nil {
		return ""
	}
	if p.PKIsHandle && len(fk.RefColumns) == 1 && strings.EqualFold(p.Columns[p.HandleOffset].Name, fk.RefColumns[0]) {
		return "PRIMARY"
	}
	for _, ix := range p.Indexes {
		if !ix.Unique || len(ix.Columns) != len(fk.RefColumns) {
			continue
		}
		same := true
		for i, off := range ix.Columns {
			same = same && strings.EqualFold(p.Columns[off].Name, fk.RefColumns[i])
		}
		if same {
			if ix.Primary {
				return "PRIMARY"
			}
			return ix.Name
		}
	}
	return ""
}

func rule(r string) string {
	if r == "" {
		return "NO ACTION"
	}
	return r
}

func (b *builder) referentialConstraints() {
	for _, db := range b.dbs() {
		for _, t := range b.tablesOf(db) {
			for _, fk := range t.ForeignKeys {
				var uniq any
				if u := RefUniqueName(b.schema, fk); u != "" {
					uniq = u
				}
				b.add("def", db, fk.Name, "def", fk.RefDB, uniq, "NONE", rule(fk.OnUpdate), rule(fk.OnDelete), t.Name, fk.RefTable)
			}
		}
	}
}

func (b *builder) tableConstraints() {
	for _, db := range b.dbs() {
		for _, t := range b.tablesOf(db) {
			if t.PKIsHandle {
				b.add("def", db, "PRIMARY", db, t.Name, "PRIMARY KEY", "YES")
			}
			for _, ix := range t.Indexes {
				switch {
				case ix.Primary:
					b.add("def", db, "PRIMARY", db, t.Name, "PRIMARY KEY", "YES")
				case ix.Unique:
					b.add("def", db, ix.Name, db, t.Name, "UNIQUE", "YES")
				}
			}
			for _, fk := range t.ForeignKeys {
				b.add("def", db, fk.Name, db, t.Name, "FOREIGN KEY", "YES")
			}
		}
	}
}

func (b *builder) views() {
	for _, db := range b.dbs() {
		for _, t := range b.tablesOf(db) {
			if t.IsView() {
				def := t.ViewSQL
				if b.vis != nil && !b.vis.ViewDefinition(db, t.Name) {
					def = ""
				}
				b.add("def", db, t.Name, def, "NONE", "NO", "root@localhost", "DEFINER", "utf8mb4", "utf8mb4_general_ci")
			}
		}
	}
}
