package sql

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/sqljson"
	"github.com/strata-db/strata/internal/sql/types"
)

func textColumns(names ...string) []*Column {
	out := make([]*Column, len(names))
	for i, n := range names {
		ft := ptypes.NewFieldType(mysql.TypeVarchar)
		ft.SetFlen(256)
		ft.SetCharset(mysql.DefaultCharset)
		ft.SetCollate(mysql.DefaultCollationName)
		out[i] = &Column{Name: n, OrgName: n, Type: ft}
	}
	return out
}

func textRow(vals ...string) []types.Datum {
	row := make([]types.Datum, len(vals))
	for i, v := range vals {
		row[i] = types.NewString(v)
	}
	return row
}

// likeMatch implements SQL LIKE with % and _ (case-insensitive, as SHOW
// patterns are) and backslash escapes.
func likeMatch(pattern, s string) bool {
	p, str := []rune(strings.ToLower(pattern)), []rune(strings.ToLower(s))
	var match func(pi, si int) bool
	match = func(pi, si int) bool {
		for pi < len(p) {
			switch p[pi] {
			case '%':
				for k := si; k <= len(str); k++ {
					if match(pi+1, k) {
						return true
					}
				}
				return false
			case '_':
				if si >= len(str) {
					return false
				}
			case '\\':
				if pi+1 < len(p) {
					pi++
				}
				fallthrough
			default:
				if si >= len(str) || str[si] != p[pi] {
					return false
				}
			}
			pi++
			si++
		}
		return si == len(str)
	}
	return match(0, 0)
}

func showPattern(n *ast.ShowStmt) (string, bool) {
	if n.Pattern == nil {
		return "", false
	}
	if v, ok := n.Pattern.Pattern.(ast.ValueExpr); ok {
		return v.GetString(), true
	}
	return "", false
}

func (s *Session) runShow(ctx context.Context, n *ast.ShowStmt) (*Result, error) {
	res, err := s.runShowAll(ctx, n)
	if err != nil || n.Where == nil {
		return res, err
	}
	return res, showWhere(res, n.Where)
}

func (s *Session) runShowAll(ctx context.Context, n *ast.ShowStmt) (*Result, error) {
	if n.Tp == ast.ShowRegions {
		return s.showRegions(ctx, n)
	}
	schema, err := s.currentSchema(ctx)
	if err != nil {
		return nil, err
	}
	pat, hasPat := showPattern(n)
	keep := func(name string) bool { return !hasPat || likeMatch(pat, name) }
	if r, ok, err := s.runShowExtra(ctx, n, schema, keep); ok {
		return r, err
	}
	res := &Result{}
	switch n.Tp {
	case ast.ShowDatabases:
		res.Columns = textColumns("Database")
		for _, d := range append([]string{"information_schema"}, schema.DBNames()...) {
			if keep(d) && s.canSeeDB(d) {
				res.Rows = append(res.Rows, textRow(d))
			}
		}
	case ast.ShowTables:
		db, err := s.dbName(n.DBName)
		if err != nil {
			return nil, err
		}
		if err := s.checkShowDB(db); err != nil {
			return nil, err
		}
		if schema.DB(db) == nil {
			return nil, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", db)
		}
		res.Columns = textColumns("Tables_in_" + db)
		if n.Full {
			res.Columns = textColumns("Tables_in_"+db, "Table_type")
		}
		for _, t := range schema.Tables(db) {
			if !keep(t.Name) || t.Temporary || !s.canSeeTable(db, t.Name) {
				continue
			}
			if n.Full {
				kind := "BASE TABLE"
				if t.IsView() {
					kind = "VIEW"
				}
				res.Rows = append(res.Rows, textRow(t.Name, kind))
			} else {
				res.Rows = append(res.Rows, textRow(t.Name))
			}
		}
	case ast.ShowCreateTable, ast.ShowColumns, ast.ShowIndex:
		db, err := s.dbName(n.Table.Schema.O)
		if n.DBName != "" {
			db, err = n.DBName, nil
		}
		if err != nil {
			return nil, err
		}
		t := schema.Table(db, n.Table.Name.O)
		if t == nil {
			return nil, sqlerr.New(sqlerr.ErNoSuchTable, "42S02", "Table '%s.%s' doesn't exist", db, n.Table.Name.O)
		}
		switch n.Tp {
		case ast.ShowCreateTable:
			if t.IsView() {
				res.Columns = textColumns("View", "Create View")
				res.Rows = append(res.Rows, textRow(t.Name, fmt.Sprintf("CREATE VIEW `%s` AS %s", t.Name, t.ViewSQL)))
				break
			}
			res.Columns = textColumns("Table", "Create Table")
			res.Rows = append(res.Rows, textRow(t.Name, ShowCreateTable(t)))
		case ast.ShowColumns:
			res.Columns = textColumns("Field", "Type", "Null", "Key", "Default", "Extra")
			for _, c := range t.Columns {
				if !keep(c.Name) {
					continue
				}
				null := "YES"
				if c.NotNull {
					null = "NO"
				}
				key := ""
				switch f := c.Type.GetFlag(); {
				case mysql.HasPriKeyFlag(f):
					key = "PRI"
				case mysql.HasUniKeyFlag(f):
					key = "UNI"
				case mysql.HasMultipleKeyFlag(f):
					key = "MUL"
				}
				row := textRow(c.Name, typeString(c.Type), null, key, "", "")
				switch {
				case c.DefaultNow:
					row[4] = types.NewString("CURRENT_TIMESTAMP")
				case c.HasDefault && !c.DefaultNull:
					row[4] = types.NewString(c.Default)
				default:
					row[4] = types.Null
				}
				if c.AutoIncrement {
					row[5] = types.NewString("auto_increment")
				}
				res.Rows = append(res.Rows, row)
			}
		case ast.ShowIndex:
			res.Columns = textColumns("Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Null", "Index_type")
			if t.PKIsHandle {
				res.Rows = append(res.Rows, textRow(t.Name, "0", "PRIMARY", "1", t.Columns[t.HandleOffset].Name, "", "BTREE"))
			}
			for _, ix := range t.Indexes {
				nonUnique := "1"
				if ix.Unique {
					nonUnique = "0"
				}
				for i, off := range ix.Columns {
					null := "YES"
					if t.Columns[off].NotNull {
						null = ""
					}
					res.Rows = append(res.Rows, textRow(t.Name, nonUnique, ix.Name, fmt.Sprint(i+1), t.Columns[off].Name, null, "BTREE"))
				}
			}
		}
	case ast.ShowCreateDatabase:
		d := schema.DB(n.DBName)
		if d == nil {
			return nil, sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", n.DBName)
		}
		res.Columns = textColumns("Database", "Create Database")
		cs, coll := infoschema.DBCharset(d)
		res.Rows = append(res.Rows, textRow(d.Name, fmt.Sprintf("CREATE DATABASE `%s` /*!40100 DEFAULT CHARACTER SET %s COLLATE %s */", d.Name, cs, coll)))
	case ast.ShowVariables:
		res.Columns = textColumns("Variable_name", "Value")
		names := make([]string, 0, len(systemVars))
		for k := range systemVars {
			names = append(names, k)
		}
		sort.Strings(names)
		scope := "session"
		if n.GlobalScope {
			scope = "global"
		}
		for _, k := range names {
			if !keep(k) {
				continue
			}
			v, _ := s.GetVar(k, true, scope)
			text := string(v.AppendText(nil))
			if onOffVars[k] {
				// SHOW VARIABLES spells booleans ON/OFF; SELECT @@x gives 1/0.
				text = map[string]string{"1": "ON", "0": "OFF"}[text]
			}
			res.Rows = append(res.Rows, []types.Datum{types.NewString(k), types.NewString(text)})
		}
	case ast.ShowWarnings, ast.ShowErrors:
		res.Columns = textColumns("Level", "Code", "Message")
		for _, w := range s.lastWarnings {
			code, msg := uint16(sqlerr.ErUnknown), w.Error()
			if se, ok := w.(*sqlerr.Error); ok {
				code, msg = se.Code, se.Msg
			}
			if n.Tp == ast.ShowErrors {
				continue
			}
			res.Rows = append(res.Rows, textRow("Warning", fmt.Sprint(code), msg))
		}
	case ast.ShowStatus:
		res.Columns = textColumns("Variable_name", "Value")
		status := [][2]string{{"Threads_connected", "1"}, {"Uptime", "1"},
			{"Ssl_cipher", s.auth.tlsCipher}, {"Ssl_version", s.auth.tlsVersion}}
		for _, kv := range status {
			if keep(kv[0]) {
				res.Rows = append(res.Rows, textRow(kv[0], kv[1]))
			}
		}
	case ast.ShowEngines:
		res.Columns = textColumns("Engine", "Support", "Comment", "Transactions", "XA", "Savepoints")
		res.Rows = append(res.Rows, textRow("InnoDB", "DEFAULT", "Strata transactional storage (Raft + Pebble)", "YES", "NO", "NO"))
	case ast.ShowCollation:
		res.Columns = textColumns("Collation", "Charset", "Id", "Default", "Compiled", "Sortlen")
		res.Rows = append(res.Rows, textRow("utf8mb4_bin", "utf8mb4", "46", "Yes", "Yes", "1"))
	case ast.ShowCharset:
		res.Columns = textColumns("Charset", "Description", "Default collation", "Maxlen")
		res.Rows = append(res.Rows, textRow("utf8mb4", "UTF-8 Unicode", "utf8mb4_bin", "4"))
	case ast.ShowProcessList:
		res.Columns = processColumns()
		res.Rows = processRows(s.visibleProcesses(), n.Full)
	default:
		return nil, notSupported(showName(n))
	}
	return res, nil
}

// onOffVars are the boolean system variables.
var onOffVars = map[string]bool{
	"autocommit": true, "foreign_key_checks": true, "unique_checks": true, "sql_auto_is_null": true,
	"sql_safe_updates": true, "explicit_defaults_for_timestamp": true, "performance_schema": true,
	"transaction_read_only": true, "tx_read_only": true,
	"sql_quote_show_create": true, "sql_notes": true, "sql_warnings": true, "sql_big_selects": true,
	"sql_log_bin": true, "big_tables": true, "log_bin": true, "local_infile": true, "read_only": true,
	"super_read_only": true, "innodb_strict_mode": true, "innodb_file_per_table": true, "profiling": true,
}

func typeString(ft *ptypes.FieldType) string {
	return strings.TrimSuffix(ft.InfoSchemaStr(), " binary")
}

// ShowCreateTable renders a table definition as MySQL's SHOW CREATE TABLE.
func ShowCreateTable(t *catalog.TableInfo) string {
	var sb strings.Builder
	kind := "TABLE"
	if t.Temporary {
		kind = "TEMPORARY TABLE"
	}
	fmt.Fprintf(&sb, "CREATE %s `%s` (\n", kind, t.Name)
	var lines []string
	for _, c := range t.Columns {
		lines = append(lines, columnDefinition(t, c))
	}
	if t.PKIsHandle {
		lines = append(lines, fmt.Sprintf("  PRIMARY KEY (`%s`)", t.Columns[t.HandleOffset].Name))
	}
	for _, ix := range t.Indexes {
		cols := make([]string, len(ix.Columns))
		for i, off := range ix.Columns {
			cols[i] = "`" + t.Columns[off].Name + "`"
			if i < len(ix.Lengths) && ix.Lengths[i] > 0 {
				cols[i] += fmt.Sprintf("(%d)", ix.Lengths[i])
			}
		}
		switch {
		case ix.Primary:
			lines = append(lines, fmt.Sprintf("  PRIMARY KEY (%s)", strings.Join(cols, ",")))
		case ix.Unique:
			lines = append(lines, fmt.Sprintf("  UNIQUE KEY `%s` (%s)", ix.Name, strings.Join(cols, ",")))
		default:
			lines = append(lines, fmt.Sprintf("  KEY `%s` (%s)", ix.Name, strings.Join(cols, ",")))
		}
	}
	for _, fk := range t.ForeignKeys {
		lines = append(lines, foreignKeyDefinition(t, fk, fk.RefDB))
	}
	sb.WriteString(strings.Join(lines, ",\n"))
	coll := infoschema.TableCollation(t)
	fmt.Fprintf(&sb, "\n) ENGINE=InnoDB DEFAULT CHARSET=%s COLLATE=%s", infoschema.CharsetOfCollation(coll), coll)
	if t.ShardRowIDBits > 0 {
		fmt.Fprintf(&sb, " /*T! SHARD_ROW_ID_BITS=%d */", t.ShardRowIDBits)
	}
	if t.Comment != "" {
		sb.WriteString(" COMMENT=" + sqlString(t.Comment))
	}
	return sb.String()
}

func (s *Session) runExplain(ctx context.Context, n *ast.ExplainStmt) (*Result, error) {
	if show, ok := n.Stmt.(*ast.ShowStmt); ok && !n.Analyze {
		return s.runShow(ctx, show) // DESCRIBE t / DESC t
	}
	hadTxn := s.txn != nil
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	c, err := s.compile(n.Stmt)
	var an *exec.Analysis
	if err == nil && n.Analyze {
		if c.query == nil {
			err = sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support EXPLAIN ANALYZE of a statement that writes")
		} else {
			an, _, err = s.explainAnalyze(ctx, c)
		}
	}
	if !hadTxn {
		s.finish(ctx, false)
	}
	if err != nil {
		return nil, err
	}
	var p plan.Plan
	switch {
	case c.query != nil:
		p = c.query
	case c.insert != nil:
		p = c.insert
	case c.update != nil:
		p = c.update
	case c.delete != nil:
		p = c.delete
	}
	if isTreeFormat(n) {
		return explainTree(p, c.subqueries, an), nil
	}
	res := &Result{Columns: textColumns("plan")}
	for _, line := range plan.Explain(p) {
		res.Rows = append(res.Rows, textRow(line))
	}
	for i, sq := range c.subqueries {
		kind := "uncorrelated"
		if sq.Correlated {
			kind = "correlated"
		}
		if sq.Memoized() {
			kind = "correlated, memoized"
		}
		res.Rows = append(res.Rows, textRow(fmt.Sprintf("Subquery %d (%s): %s", i+1, kind, sq.String())))
		for _, line := range plan.Explain(sq.Plan) {
			res.Rows = append(res.Rows, textRow("  "+line))
		}
	}
	if strings.EqualFold(n.Format, "json") {
		// FORMAT=JSON: one row holding a JSON document (tools parse it);
		// the plan is Strata's text plan, line by line.
		lines := make([]any, len(res.Rows))
		for i, r := range res.Rows {
			lines[i] = string(r[0].Bytes())
		}
		doc := sqljson.Object{"query_block": sqljson.Object{"select_id": json.Number("1"), "strata_plan": lines}}
		res = &Result{Columns: textColumns("EXPLAIN"), Rows: [][]types.Datum{textRow(string(sqljson.Append(nil, doc)))}}
	}
	return res, nil
}
