package sql

import (
	"context"
	"io"
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	pmysql "github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// sessionExtra is the session state of the statements in this file:
// savepoints, SQL-level prepared statements, temporary tables, the
// READ ONLY characteristic, and ROW_COUNT() / FOUND_ROWS().
type sessionExtra struct {
	savepoints []savepoint
	// sqlPrepared maps PREPARE names (lower case) to prepared statement ids.
	sqlPrepared map[string]uint32
	// nextReadOnly: SET TRANSACTION READ ONLY / WRITE for the next
	// transaction only (nil: the session's default).
	nextReadOnly *bool
	// temp holds the session's temporary tables; tempVersion counts their
	// changes, so that cached plans are planned again.
	temp        []*catalog.TableInfo
	tempDB      []string // the database of each temporary table
	tempVersion int64
	rowCount    int64
	foundRows   uint64
	fkOff       bool // foreign_key_checks = 0
	// mods counts the rows the transaction changed per table with
	// statistics (autoanalyze.go).
	mods map[int64]int64
	// copConc caches copConcurrency (0: not read yet, -1: off).
	copConc         int
	nonStrict       bool // sql_mode has neither STRICT_TRANS_TABLES nor STRICT_ALL_TABLES
	clientFoundRows bool // the client connected with CLIENT_FOUND_ROWS
	noBackslash     bool // sql_mode has NO_BACKSLASH_ESCAPES
	// localInfile fetches a LOAD DATA LOCAL file from the client (nil:
	// not available on this connection).
	localInfile func(name string) (io.ReadCloser, error)
}

// setNoBackslashEscapes applies sql_mode's NO_BACKSLASH_ESCAPES to the
// parser (a backslash in a string literal is then an ordinary character).
func (s *Session) setNoBackslashEscapes(on bool) {
	s.x.noBackslash = on
	var m pmysql.SQLMode
	if on {
		m = pmysql.ModeNoBackslashEscapes
	}
	s.parser.SetSQLMode(m)
}

// NoBackslashEscapes reports whether sql_mode has NO_BACKSLASH_ESCAPES;
// the server reports it to the client in the status flags, and drivers
// then escape quotes by doubling them.
func (s *Session) NoBackslashEscapes() bool { return s.x.noBackslash }

// SetClientFoundRows makes UPDATE report matched rather than changed rows,
// as a client connecting with CLIENT_FOUND_ROWS expects.
func (s *Session) SetClientFoundRows(on bool) { s.x.clientFoundRows = on }

type savepoint struct {
	name string
	sp   any
}

// runExtra runs the statements this file implements; handled is false for
// any other.
func (s *Session) runExtra(ctx context.Context, st ast.StmtNode) (res *Result, handled bool, err error) {
	switch n := st.(type) {
	case *ast.SavepointStmt:
		return &Result{}, true, s.savepoint(ctx, n.Name)
	case *ast.ReleaseSavepointStmt:
		i := s.findSavepoint(n.Name)
		if i < 0 {
			return nil, true, noSavepoint(n.Name)
		}
		s.x.savepoints = s.x.savepoints[:i]
		return &Result{}, true, nil
	case *ast.LockTablesStmt:
		// Accepted the way mysqldump uses it: the open transaction ends
		// (an implicit commit, as in MySQL), the tables must exist, and
		// no lock is taken: writers are not blocked while a dump reads.
		if s.txn != nil {
			if err := s.finish(ctx, true); err != nil {
				return nil, true, err
			}
		}
		schema, err := s.currentSchema(ctx)
		if err != nil {
			return nil, true, err
		}
		for _, tl := range n.TableLocks {
			if _, err := s.tableOf(schema, tl.Table); err != nil {
				return nil, true, err
			}
		}
		return &Result{}, true, nil
	case *ast.UnlockTablesStmt:
		return &Result{}, true, nil
	case *ast.FlushStmt:
		return &Result{}, true, nil
	case *ast.DoStmt:
		ec := s.evalContext(nil)
		ec.Ctx = ctx
		for _, e := range n.Exprs {
			ce, err := expr.Compile(e, noColumns{})
			if err != nil {
				return nil, true, err
			}
			if _, err := ce.Eval(ec, nil); err != nil {
				return nil, true, err
			}
		}
		return &Result{}, true, nil
	case *ast.PrepareStmt:
		return s.sqlPrepare(ctx, n)
	case *ast.ExecuteStmt:
		return s.sqlExecute(ctx, n)
	case *ast.DeallocateStmt:
		id, ok := s.x.sqlPrepared[strings.ToLower(n.Name)]
		if !ok {
			return nil, true, sqlerr.New(1243, "HY000", "Unknown prepared statement handler (%s) given to DEALLOCATE PREPARE", n.Name)
		}
		delete(s.x.sqlPrepared, strings.ToLower(n.Name))
		s.ClosePrepared(id)
		return &Result{}, true, nil
	case *ast.RenameTableStmt:
		r, err := s.runDDL(ctx, st)
		return r, true, err
	}
	return nil, false, nil
}

func noSavepoint(name string) error {
	return sqlerr.New(1305, "42000", "SAVEPOINT %s does not exist", name)
}

func (s *Session) findSavepoint(name string) int {
	for i := len(s.x.savepoints) - 1; i >= 0; i-- {
		if strings.EqualFold(s.x.savepoints[i].name, name) {
			return i
		}
	}
	return -1
}

// savepoint records the transaction's writes so far under name. Outside a
// transaction it does nothing, as in MySQL with autocommit.
func (s *Session) savepoint(ctx context.Context, name string) error {
	if s.txn == nil && !s.autocommit {
		// With autocommit off, SAVEPOINT starts the transaction, as any
		// statement does (Django's first atomic block does exactly this).
		if err := s.begin(ctx); err != nil {
			return err
		}
	}
	if !s.InTxn() {
		return nil
	}
	sp, ok := s.txn.(kv.Savepointer)
	if !ok {
		return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support SAVEPOINT on this storage")
	}
	if i := s.findSavepoint(name); i >= 0 {
		s.x.savepoints = append(s.x.savepoints[:i], s.x.savepoints[i+1:]...)
	}
	s.x.savepoints = append(s.x.savepoints, savepoint{name: name, sp: sp.Savepoint()})
	return nil
}

// rollbackTo undoes the writes made after a savepoint; the savepoint stays,
// later ones go.
func (s *Session) rollbackTo(name string) error {
	i := s.findSavepoint(name)
	if i < 0 || s.txn == nil {
		return noSavepoint(name)
	}
	s.txn.(kv.Savepointer).RollbackToSavepoint(s.x.savepoints[i].sp)
	s.x.savepoints = s.x.savepoints[:i+1]
	return nil
}

// sqlPrepare implements PREPARE name FROM 'text' | @var.
func (s *Session) sqlPrepare(ctx context.Context, n *ast.PrepareStmt) (*Result, bool, error) {
	text := n.SQLText
	if n.SQLVar != nil {
		v, _ := s.GetVar(n.SQLVar.Name, false, "")
		if v.IsNull() {
			text = "NULL"
		} else {
			text, _ = v.ToString()
		}
	}
	ps, err := s.Prepare(ctx, text)
	if err != nil {
		return nil, true, err
	}
	if s.x.sqlPrepared == nil {
		s.x.sqlPrepared = map[string]uint32{}
	}
	if old, ok := s.x.sqlPrepared[strings.ToLower(n.Name)]; ok {
		s.ClosePrepared(old)
	}
	s.x.sqlPrepared[strings.ToLower(n.Name)] = ps.ID
	return &Result{}, true, nil
}

// sqlExecute implements EXECUTE name [USING @a, @b ...].
func (s *Session) sqlExecute(ctx context.Context, n *ast.ExecuteStmt) (*Result, bool, error) {
	id, ok := s.x.sqlPrepared[strings.ToLower(n.Name)]
	if !ok {
		return nil, true, sqlerr.New(1243, "HY000", "Unknown prepared statement handler (%s) given to EXECUTE", n.Name)
	}
	p := s.prepared[id]
	if len(n.UsingVars) != p.info.ParamCount {
		return nil, true, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to EXECUTE")
	}
	params := make([]types.Datum, len(n.UsingVars))
	ec := s.evalContext(nil)
	for i, u := range n.UsingVars {
		e, err := expr.Compile(u, noColumns{})
		if err != nil {
			return nil, true, err
		}
		if params[i], err = e.Eval(ec, nil); err != nil {
			return nil, true, err
		}
	}
	r, err := s.runOnce(ctx, p.stmt, params, p)
	return r, true, err
}

// setTxnReadOnly handles tx_read_only / transaction_read_only: SET
// TRANSACTION applies to the next transaction only, SET SESSION
// TRANSACTION (or the variable) to every later one.
func (s *Session) setTxnReadOnly(stmtText string, global bool, val types.Datum) error {
	on, err := parseOnOff(val)
	if err != nil {
		return err
	}
	if oneShotTxn.MatchString(stmtText) {
		s.x.nextReadOnly = &on
		return nil
	}
	if global {
		s.setGlobal("transaction_read_only", boolInt(on))
		s.setGlobal("tx_read_only", boolInt(on))
		return nil
	}
	s.vars["transaction_read_only"], s.vars["tx_read_only"] = boolInt(on), boolInt(on)
	return nil
}

var oneShotTxn = regexp.MustCompile(`(?i)^\s*(/\*.*?\*/\s*)*SET\s+TRANSACTION\b`)

// defaultReadOnly is the session's transaction_read_only.
func (s *Session) defaultReadOnly() bool {
	v, _ := s.GetVar("transaction_read_only", true, "")
	on, _ := parseOnOff(v)
	return on
}

// startReadOnly decides, as a transaction starts, whether it is read only:
// START TRANSACTION READ ONLY, a pending SET TRANSACTION READ ONLY, or the
// session's default.
func (s *Session) startReadOnly(explicit bool) {
	s.readOnly = explicit || s.defaultReadOnly()
	if s.x.nextReadOnly != nil {
		s.readOnly = *s.x.nextReadOnly || explicit
		s.x.nextReadOnly = nil
	}
}

// writeRefused is the error for a write in a read-only transaction.
func (s *Session) writeRefused() error {
	ro := s.readOnly
	if !s.explicit && !(s.txn != nil && !s.autocommit) {
		ro = s.defaultReadOnly() || (s.x.nextReadOnly != nil && *s.x.nextReadOnly)
	}
	if ro {
		return sqlerr.New(1792, "25006", "Cannot execute statement in a READ ONLY transaction.")
	}
	return nil
}

// schemaForSession is the schema the session's statements see: the
// transaction's (or the latest) with the session's temporary tables.
func (s *Session) withTemp(schema *catalog.Schema) *catalog.Schema {
	if len(s.x.temp) == 0 {
		return schema
	}
	return schema.WithTables(s.x.temp)
}

// isInfoSchemaDB reports whether name is INFORMATION_SCHEMA.
func isInfoSchemaDB(name string) bool { return infoschema.IsName(name) }

// latestSchema is the stored schema txn reads (without temporary tables).
func (e *Engine) latestSchema(ctx context.Context, txn kv.Txn) (*catalog.Schema, error) {
	ver, err := catalog.Version(ctx, txn)
	if err != nil {
		return nil, err
	}
	return e.schemaFor(ctx, txn, ver)
}

// noteCounts records what ROW_COUNT() and FOUND_ROWS() report after a
// statement: the rows a DML statement changed (-1 after a query), and the
// rows a SELECT returned.
func (s *Session) noteCounts(st ast.StmtNode, r *Result) {
	switch st.(type) {
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt:
		s.x.rowCount = int64(r.AffectedRows)
	case *ast.SelectStmt, *ast.SetOprStmt:
		s.x.rowCount = -1
		s.x.foundRows = uint64(r.RowCount())
	case *ast.CreateTableStmt, *ast.DropTableStmt, *ast.AlterTableStmt, *ast.CreateIndexStmt, *ast.DropIndexStmt, *ast.TruncateTableStmt:
		s.x.rowCount = 0
	}
}
