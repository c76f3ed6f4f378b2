package sql

import (
	"context"
	"runtime"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// ServerVersion is what VERSION() and the handshake report.
const ServerVersion = "8.0.11-strata"

// systemVars are the variables with their defaults; drivers read many of
// them on connect. Values are strings or integers as MySQL reports them.
var systemVars = map[string]types.Datum{
	"version":                         types.NewString(ServerVersion),
	"version_comment":                 types.NewString("Strata distributed SQL"),
	"version_compile_os":              types.NewString("Linux"),
	"version_compile_machine":         types.NewString("x86_64"),
	"max_allowed_packet":              types.NewInt(67108864),
	"sql_mode":                        types.NewString("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"),
	"character_set_client":            types.NewString("utf8mb4"),
	"character_set_connection":        types.NewString("utf8mb4"),
	"character_set_results":           types.NewString("utf8mb4"),
	"character_set_server":            types.NewString("utf8mb4"),
	"character_set_database":          types.NewString("utf8mb4"),
	"character_set_system":            types.NewString("utf8mb3"),
	"character_set_filesystem":        types.NewString("binary"),
	"collation_connection":            types.NewString("utf8mb4_0900_ai_ci"),
	"collation_server":                types.NewString("utf8mb4_0900_ai_ci"),
	"collation_database":              types.NewString("utf8mb4_0900_ai_ci"),
	"time_zone":                       types.NewString("SYSTEM"),
	"system_time_zone":                types.NewString("UTC"),
	"transaction_isolation":           types.NewString("REPEATABLE-READ"),
	"tx_isolation":                    types.NewString("REPEATABLE-READ"),
	"transaction_read_only":           types.NewInt(0),
	"tx_read_only":                    types.NewInt(0),
	"autocommit":                      types.NewInt(1),
	"auto_increment_increment":        types.NewInt(1),
	"auto_increment_offset":           types.NewInt(1),
	"lower_case_table_names":          types.NewInt(2),
	"net_write_timeout":               types.NewInt(60),
	"net_read_timeout":                types.NewInt(30),
	"net_buffer_length":               types.NewInt(16384),
	"wait_timeout":                    types.NewInt(28800),
	"interactive_timeout":             types.NewInt(28800),
	"license":                         types.NewString("Apache-2.0"),
	"init_connect":                    types.NewString(""),
	"performance_schema":              types.NewInt(0),
	"query_cache_size":                types.NewInt(0),
	"query_cache_type":                types.NewString("OFF"),
	"have_query_cache":                types.NewString("NO"),
	"max_execution_time":              types.NewInt(0),
	"sql_select_limit":                types.NewUint(18446744073709551615),
	"sql_auto_is_null":                types.NewInt(0),
	"sql_safe_updates":                types.NewInt(0),
	"explicit_defaults_for_timestamp": types.NewInt(1),
	"default_storage_engine":          types.NewString("InnoDB"),
	"storage_engine":                  types.NewString("InnoDB"),
	"innodb_lock_wait_timeout":        types.NewInt(50),
	"tidb_txn_mode":                   types.NewString("pessimistic"),
	"lock_wait_timeout":               types.NewInt(31536000),
	"group_concat_max_len":            types.NewInt(1024),
	"div_precision_increment":         types.NewInt(4),
	"foreign_key_checks":              types.NewInt(1),
	"unique_checks":                   types.NewInt(1),
	"max_connections":                 types.NewInt(4096),
	"lc_messages":                     types.NewString("en_US"),
	"port":                            types.NewInt(4000),
	"hostname":                        types.NewString("strata"),
	"event_scheduler":                 types.NewString("OFF"),
	"default_week_format":             types.NewInt(0),
	"session_track_gtids":             types.NewString("OFF"),
	"transaction_prealloc_size":       types.NewInt(4096),
	"tidb_mem_quota_query":            types.NewInt(1 << 30),
	"tidb_enable_tmp_storage_on_oom":  types.NewInt(1),
	"tidb_executor_concurrency":       types.NewInt(int64(defaultExecutorConcurrency)),
	"tidb_ddl_reorg_worker_cnt":       types.NewInt(defaultBackfillWorkers),
	// Whether SQL operators evaluate expressions over batches of rows
	// (exec's vecbatch.go) or row by row; the answers, errors and
	// warnings are the same.
	"tidb_enable_vectorized_expression": types.NewInt(1),
	// The coprocessor (docs/architecture.md): whether full table scans
	// with a filter, an aggregation, a top-N or a limit run next to the
	// data, and how many region requests a statement keeps in flight.
	"strata_enable_coprocessor":     types.NewInt(1),
	"tidb_distsql_scan_concurrency": types.NewInt(int64(defaultCopConcurrency())),
	"tidb_ddl_reorg_batch_size":     types.NewInt(defaultBackfillBatch),
	// Whether ADD INDEX backfills a non-unique index in ingest mode
	// (sorted runs of entries imported without transactions; ddl_owner.go's
	// fillShareImport) or in transactions of tidb_ddl_reorg_batch_size rows.
	"tidb_ddl_enable_fast_reorg": types.NewInt(1),
	"last_insert_id":             types.NewInt(0),
	"warning_count":              types.NewInt(0),
	"error_count":                types.NewInt(0),
	"identity":                   types.NewInt(0),
	// Read or set by dump tools, the mysql CLI and drivers.
	"sql_quote_show_create":            types.NewInt(1),
	"sql_notes":                        types.NewInt(1),
	"sql_warnings":                     types.NewInt(0),
	"sql_big_selects":                  types.NewInt(1),
	"sql_buffer_result":                types.NewInt(0),
	"sql_log_bin":                      types.NewInt(1),
	"big_tables":                       types.NewInt(0),
	"gtid_mode":                        types.NewString("OFF"),
	"enforce_gtid_consistency":         types.NewString("OFF"),
	"gtid_purged":                      types.NewString(""),
	"log_bin":                          types.NewInt(0),
	"innodb_stats_on_metadata":         types.NewInt(0),
	"max_statement_time":               types.NewInt(0),
	"default_tmp_storage_engine":       types.NewString("InnoDB"),
	"collation_database_default":       types.NewString("utf8mb4_0900_ai_ci"),
	"default_collation_for_utf8mb4":    types.NewString("utf8mb4_0900_ai_ci"),
	"cte_max_recursion_depth":          types.NewInt(1000),
	"information_schema_stats_expiry":  types.NewInt(86400),
	"completion_type":                  types.NewString("NO_CHAIN"),
	"old_alter_table":                  types.NewInt(0),
	"updatable_views_with_limit":       types.NewString("YES"),
	"secure_file_priv":                 types.NewString(""),
	"local_infile":                     types.NewInt(1),
	"ndbinfo_version":                  types.NewString(""),
	"character_set_filesystem_default": types.NewString("binary"),
	"have_ssl":                         types.NewString("DISABLED"),
	"have_openssl":                     types.NewString("DISABLED"),
	"protocol_version":                 types.NewInt(10),
	"version_compile_zlib":             types.NewString(""),
	"tx_isolation_default":             types.NewString("REPEATABLE-READ"),
	"optimizer_switch":                 types.NewString("index_merge=on"),
	"sort_buffer_size":                 types.NewInt(262144),
	"join_buffer_size":                 types.NewInt(262144),
	"tmp_table_size":                   types.NewInt(16777216),
	"max_heap_table_size":              types.NewInt(16777216),
	"bulk_insert_buffer_size":          types.NewInt(8388608),
	"read_buffer_size":                 types.NewInt(131072),
	"thread_stack":                     types.NewInt(262144),
	"block_encryption_mode":            types.NewString("aes-128-ecb"),
	"time_format":                      types.NewString("%H:%i:%s"),
	"date_format":                      types.NewString("%Y-%m-%d"),
	"datetime_format":                  types.NewString("%Y-%m-%d %H:%i:%s"),
	"lower_case_file_system":           types.NewInt(0),
	"skip_name_resolve":                types.NewInt(0),
	"read_only":                        types.NewInt(0),
	"super_read_only":                  types.NewInt(0),
	"innodb_strict_mode":               types.NewInt(1),
	"innodb_file_per_table":            types.NewInt(1),
	"innodb_default_row_format":        types.NewString("dynamic"),
	"innodb_large_prefix":              types.NewInt(1),
	"innodb_version":                   types.NewString("8.0.11"),
	"default_authentication_plugin":    types.NewString("mysql_native_password"),
	"show_create_table_verbosity":      types.NewInt(0),
	"windowing_use_high_precision":     types.NewInt(1),
	"profiling":                        types.NewInt(0),
	"timestamp":                        types.NewInt(0),
	"rand_seed1":                       types.NewInt(0),
	"insert_id":                        types.NewInt(0),
	"pseudo_thread_id":                 types.NewInt(0),
	"sql_require_primary_key":          types.NewInt(0),
	"session_track_schema":             types.NewInt(1),
	"session_track_state_change":       types.NewInt(0),
	"session_track_system_variables":   types.NewString("time_zone,autocommit,character_set_client,character_set_results,character_set_connection"),
	"session_track_transaction_info":   types.NewString("OFF"),
	"max_join_size":                    types.NewUint(18446744073709551615),
	"sql_max_join_size":                types.NewUint(18446744073709551615),
	"long_query_time":                  types.NewFloat(10),
	"slow_query_log":                   types.NewInt(0),
	"general_log":                      types.NewInt(0),
	"character_sets_dir":               types.NewString("/usr/share/mysql/charsets/"),
	"basedir":                          types.NewString("/usr/"),
	"datadir":                          types.NewString("/var/lib/mysql/"),
	"tmpdir":                           types.NewString("/tmp"),
	"socket":                           types.NewString(""),
	"server_id":                        types.NewInt(1),
	"server_uuid":                      types.NewString("00000000-0000-0000-0000-000000000001"),
	"binlog_format":                    types.NewString("ROW"),
	"transaction_write_set_extraction": types.NewString("OFF"),
}

// GetVar implements expr.VarReader.
func (s *Session) GetVar(name string, system bool, scope string) (types.Datum, bool) {
	name = strings.ToLower(name)
	if !system {
		v, ok := s.userVars[name]
		if !ok {
			return types.Null, true
		}
		return v, true
	}
	switch name {
	case "autocommit":
		if scope != "global" {
			return boolInt(s.autocommit), true
		}
	case "last_insert_id", "identity":
		return types.NewUint(s.lastInsertID), true
	case "warning_count":
		return types.NewInt(int64(len(s.lastWarnings))), true
	}
	if scope != "global" {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	s.e.mu.Lock()
	v, ok := s.e.globalVars[name]
	s.e.mu.Unlock()
	if ok {
		return v, true
	}
	v, ok = systemVars[name]
	return v, ok
}

func boolInt(b bool) types.Datum {
	if b {
		return types.NewInt(1)
	}
	return types.NewInt(0)
}

// noColumns is the binder for expressions that may not name columns (SET,
// DEFAULT clauses).
type noColumns struct{}

func (noColumns) Bind(n ast.ExprNode) (expr.Expr, error) {
	if c, ok := n.(*ast.ColumnNameExpr); ok {
		return nil, sqlerr.New(sqlerr.ErBadField, "42S22", "Unknown column '%s' in 'field list'", c.Name.Name.O)
	}
	return nil, nil
}

func (s *Session) runSet(ctx context.Context, n *ast.SetStmt) (*Result, error) {
	for _, v := range n.Variables {
		name := strings.ToLower(v.Name)
		if v.Name == ast.SetNames || v.Name == ast.SetCharset {
			cs := "utf8mb4"
			if ve, ok := v.Value.(ast.ValueExpr); ok {
				cs = strings.ToLower(ve.GetString())
			}
			for _, k := range []string{"character_set_client", "character_set_connection", "character_set_results"} {
				s.vars[k] = types.NewString(cs)
			}
			continue
		}
		var val types.Datum
		switch x := v.Value.(type) {
		case *ast.ColumnNameExpr: // SET autocommit = ON, SET tx_isolation = READ-COMMITTED as identifiers
			val = types.NewString(x.Name.Name.O)
		case *ast.DefaultExpr:
			val = systemVars[name]
		case nil:
			val = types.Null
		default:
			if hasSubquery(v.Value) {
				// SET @x = (SELECT ...): the value of a one-column SELECT.
				var err error
				if val, err = s.selectValue(ctx, v.Value); err != nil {
					return nil, err
				}
				break
			}
			e, err := expr.Compile(v.Value, noColumns{})
			if err != nil {
				return nil, err
			}
			if val, err = e.Eval(s.evalContext(nil), nil); err != nil {
				return nil, err
			}
		}
		if !v.IsSystem {
			s.userVars[name] = val
			continue
		}
		if ok, err := s.setTxnVar(name, val, v.IsGlobal); ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		switch name {
		case "tx_read_only", "transaction_read_only":
			if err := s.setTxnReadOnly(n.Text(), v.IsGlobal, val); err != nil {
				return nil, err
			}
			continue
		case "transaction_isolation", "tx_isolation":
			str, err := isolationLevel(name, val)
			if err != nil {
				return nil, err
			}
			val = types.NewString(str)
			if v.IsGlobal {
				s.setGlobal("transaction_isolation", val)
				s.setGlobal("tx_isolation", val)
			} else {
				s.vars["transaction_isolation"], s.vars["tx_isolation"] = val, val
			}
			continue
		}
		if name == "sql_mode" && !v.IsGlobal {
			mode, _ := val.ToString()
			mode = strings.ToUpper(mode)
			s.x.nonStrict = !strings.Contains(mode, "STRICT_TRANS_TABLES") && !strings.Contains(mode, "STRICT_ALL_TABLES")
			s.setNoBackslashEscapes(strings.Contains(mode, "NO_BACKSLASH_ESCAPES"))
		}
		if name == "wait_timeout" {
			// MySQL keeps it within [1, 31536000] seconds.
			n, err := val.ToInt64()
			if err != nil {
				return nil, sqlerr.New(1232, "42000", "Incorrect argument type to variable 'wait_timeout'")
			}
			if c := min(max(n, 1), 31536000); c != n {
				s.warn(1292, "22007", "Truncated incorrect wait_timeout value: '%d'", n)
				n = c
			}
			val = types.NewInt(n)
			if !v.IsGlobal {
				s.waitTimeout.Store(n)
			}
		}
		if name == "foreign_key_checks" && !v.IsGlobal {
			on, err := parseOnOff(val)
			if err != nil {
				return nil, err
			}
			s.x.fkOff = !on
		}
		if name == "strata_enable_coprocessor" || name == "tidb_distsql_scan_concurrency" {
			if err := checkCopVar(name, val); err != nil {
				return nil, err
			}
			// Read again at the next statement; cached plans are planned
			// again (they depend on strata_enable_coprocessor).
			s.x.copConc = 0
			s.x.tempVersion++
		}
		if _, known := systemVars[name]; !known {
			return nil, sqlerr.New(sqlerr.ErUnknownSystemVariable, "HY000", "Unknown system variable '%s'", v.Name)
		}
		switch name {
		case "tidb_enable_tmp_storage_on_oom", "tidb_enable_vectorized_expression", "tidb_ddl_enable_fast_reorg":
			on, err := parseOnOff(val)
			if err != nil {
				return nil, err
			}
			val = boolInt(on)
		case "tidb_executor_concurrency", "tidb_mem_quota_query":
			n, err := val.ToInt64()
			if err != nil || n < 1 {
				str, _ := val.ToString()
				return nil, sqlerr.New(1231, "42000", "Variable '%s' can't be set to the value of '%s'", name, str)
			}
			val = types.NewInt(n)
		}
		if name == "autocommit" {
			on, err := parseOnOff(val)
			if err != nil {
				return nil, err
			}
			val = boolInt(on)
			if !v.IsGlobal {
				if on && !s.autocommit && s.txn != nil && !s.explicit {
					if err := s.finish(ctx, true); err != nil {
						return nil, err
					}
				}
				s.autocommit = on
				continue
			}
		}
		if v.IsGlobal {
			s.setGlobal(name, val)
		} else {
			s.vars[name] = val
		}
	}
	return &Result{}, nil
}

func (s *Session) setGlobal(name string, v types.Datum) {
	s.e.mu.Lock()
	s.e.globalVars[name] = v
	if _, ok := execVarNames[name]; ok {
		s.e.execGlobals.Store(execGlobalsOf(s.e.globalVars))
	}
	s.e.mu.Unlock()
}

// defaultExecutorConcurrency is tidb_executor_concurrency's default: the
// cores Go uses, at most 8; serial on two cores or fewer, where the
// goroutine reading the input already keeps one core busy and workers
// measured no faster (BenchmarkAnalytic, 2026-11-27).
var defaultExecutorConcurrency = func() int {
	n := runtime.GOMAXPROCS(0)
	if n <= 2 {
		return 1
	}
	return min(n, 8)
}()

// execVarNames are the variables that set how statements execute; their
// global values are kept in Engine.execGlobals so that a statement reads
// them without the engine's lock.
var execVarNames = map[string]struct{}{
	"tidb_mem_quota_query": {}, "tidb_enable_tmp_storage_on_oom": {}, "tidb_executor_concurrency": {},
	"tidb_enable_vectorized_expression": {},
}

// execSettings are a statement's memory quota, spill switch and worker
// count.
type execSettings struct {
	quota       int64
	spill       bool
	concurrency int
	recursion   int  // cte_max_recursion_depth
	noVec       bool // tidb_enable_vectorized_expression = OFF
}

func execGlobalsOf(globals map[string]types.Datum) *execSettings {
	get := func(name string) types.Datum {
		if v, ok := globals[name]; ok {
			return v
		}
		return systemVars[name]
	}
	return &execSettings{quota: intVar(get("tidb_mem_quota_query"), exec.DefaultMemQuota),
		spill:       intVar(get("tidb_enable_tmp_storage_on_oom"), 1) != 0,
		concurrency: int(intVar(get("tidb_executor_concurrency"), int64(defaultExecutorConcurrency))),
		recursion:   int(intVar(get("cte_max_recursion_depth"), exec.DefaultMaxRecursion)),
		noVec:       intVar(get("tidb_enable_vectorized_expression"), 1) == 0}
}

func intVar(v types.Datum, def int64) int64 {
	n, err := v.ToInt64()
	if err != nil || v.IsNull() {
		return def
	}
	return n
}

// execSettings returns the statement settings: the session's values, or
// the globals.
func (s *Session) execSettings() execSettings {
	g := s.e.execGlobals.Load()
	if g == nil {
		g = execGlobalsOf(nil)
		s.e.execGlobals.CompareAndSwap(nil, g)
	}
	out := *g
	if v, ok := s.vars["tidb_mem_quota_query"]; ok {
		out.quota = intVar(v, out.quota)
	}
	if v, ok := s.vars["tidb_enable_tmp_storage_on_oom"]; ok {
		out.spill = intVar(v, 1) != 0
	}
	if v, ok := s.vars["tidb_executor_concurrency"]; ok {
		out.concurrency = int(intVar(v, int64(out.concurrency)))
	}
	if v, ok := s.vars["tidb_enable_vectorized_expression"]; ok {
		out.noVec = intVar(v, 1) == 0
	}
	if v, ok := s.vars["cte_max_recursion_depth"]; ok {
		out.recursion = int(intVar(v, int64(out.recursion)))
	}
	if out.quota <= 0 {
		out.quota = exec.DefaultMemQuota
	}
	return out
}

func parseOnOff(v types.Datum) (bool, error) {
	str, err := v.ToString()
	if err != nil {
		return false, err
	}
	switch strings.ToUpper(str) {
	case "1", "ON", "TRUE":
		return true, nil
	case "0", "OFF", "FALSE":
		return false, nil
	}
	if n, err := strconv.ParseFloat(str, 64); err == nil {
		return n != 0, nil
	}
	return false, sqlerr.New(1231, "42000", "Variable 'autocommit' can't be set to the value of '%s'", str)
}

// hasSubquery reports whether e contains a subquery.
func hasSubquery(e ast.ExprNode) bool {
	v := &subqueryFinder{}
	e.Accept(v)
	return v.found
}

type subqueryFinder struct{ found bool }

func (f *subqueryFinder) Enter(n ast.Node) (ast.Node, bool) {
	switch n.(type) {
	case *ast.SubqueryExpr, *ast.ExistsSubqueryExpr, *ast.CompareSubqueryExpr:
		f.found = true
		return n, true
	}
	return n, f.found
}

func (f *subqueryFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// selectValue evaluates e as SELECT e does (so that it may hold
// subqueries), in the session's transaction or a statement transaction of
// its own.
func (s *Session) selectValue(ctx context.Context, e ast.ExprNode) (types.Datum, error) {
	sel := &ast.SelectStmt{
		Kind:   ast.SelectStmtKindSelect,
		Fields: &ast.FieldList{Fields: []*ast.SelectField{{Expr: e}}},
	}
	res, err := s.runDML(ctx, sel, nil, nil)
	if err != nil {
		return types.Null, err
	}
	defer res.Close()
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return types.Null, sqlerr.New(sqlerr.ErUnknown, "HY000", "SET expression did not produce one value")
	}
	return res.Rows[0][0], nil
}

// defaultCopConcurrency is tidb_distsql_scan_concurrency's default: one
// request in flight per core, at least 2.
func defaultCopConcurrency() int { return min(max(runtime.GOMAXPROCS(0), 2), 64) }

func checkCopVar(name string, val types.Datum) error {
	if name == "strata_enable_coprocessor" {
		_, err := parseOnOff(val)
		return err
	}
	n, err := val.ToInt64()
	if err != nil || n < 1 || n > 256 {
		return sqlerr.New(1231, "42000", "Variable '%s' can't be set to the value of '%s'", name, val.String())
	}
	return nil
}

// copConcurrency is how many coprocessor requests a statement keeps in
// flight: tidb_distsql_scan_concurrency, or 0 when
// strata_enable_coprocessor is OFF. It is read once after each SET.
func (s *Session) copConcurrency() int {
	if s.x.copConc == 0 {
		s.x.copConc = -1
		if v, ok := s.GetVar("strata_enable_coprocessor", true, ""); ok {
			if on, err := parseOnOff(v); err == nil && on {
				s.x.copConc = defaultCopConcurrency()
				if v, ok := s.GetVar("tidb_distsql_scan_concurrency", true, ""); ok {
					if n, err := v.ToInt64(); err == nil && n >= 1 {
						s.x.copConc = int(min(n, 256))
					}
				}
			}
		}
	}
	return max(s.x.copConc, 0)
}
