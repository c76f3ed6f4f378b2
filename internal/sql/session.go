package sql

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal and ? expressions
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// autocommitRetries is how many times an autocommit statement that hit a
// write conflict is re-run from scratch.
const autocommitRetries = 3

// Column describes a result column for the wire protocol.
type Column struct {
	Name, OrgName, Table, OrgTable, Database string
	Type                                     *ptypes.FieldType
}

// Result is the outcome of one statement: rows for queries, counts for DML.
type Result struct {
	Columns                    []*Column
	Rows                       [][]types.Datum
	AffectedRows, LastInsertID uint64
	Warnings                   uint16

	// spool holds the rows of a result larger than the statement's memory
	// quota, in a temporary file (only when the session spools results,
	// SetSpoolResults): Rows is then empty, and the caller reads them with
	// NextSpooled and must Close the result.
	spool *exec.Spool
}

// RowCount is the number of rows of the result.
func (r *Result) RowCount() int64 { return int64(len(r.Rows)) + r.spool.Len() }

// Spooled reports whether the rows are in a temporary file.
func (r *Result) Spooled() bool { return r.spool != nil }

// NextSpooled returns the next batch of a spooled result's rows, nil at
// the end.
func (r *Result) NextSpooled() ([][]types.Datum, error) { return r.spool.Next() }

// Close removes a spooled result's temporary file.
func (r *Result) Close() {
	if r != nil {
		r.spool.Close()
		r.spool = nil
	}
}

// SetSpoolResults lets a query's result larger than the statement's
// memory quota go to a temporary file instead of failing with 8175; the
// caller then reads results with NextSpooled and closes them. The MySQL
// front end sets it for its connections.
func (s *Session) SetSpoolResults(on bool) { s.spoolResults = on }

// PreparedStmt is a statement prepared with Session.Prepare.
type PreparedStmt struct {
	ID         uint32
	ParamCount int
	Columns    []*Column
}

type prepared struct {
	info    PreparedStmt
	text    string // for SHOW PROCESSLIST
	stmt    ast.StmtNode
	version int64
	cached  *compiled
}

// compiled is a planned statement, reusable while the schema version holds.
type compiled struct {
	query       plan.Plan
	insert      *plan.Insert
	update      *plan.Update
	delete      *plan.Delete
	subqueries  []*plan.Subquery
	version     int64
	tempVersion int64          // the session's temporary tables when planned
	stats       *catalog.Stats // the table statistics it was planned with
	forUpdate   bool
	columns     []*Column // result columns of query
	// needs are the privileges the statement needs (privcheck.go);
	// privOK is the privilege set they last passed for.
	needs  []need
	privOK *privilege.Set
}

// Session is one client connection's SQL state. It is used by one
// goroutine at a time.
type Session struct {
	e          *Engine
	user, host string
	userHost   string // user@host, for USER() and friends
	connID     uint32

	// waitTimeout is wait_timeout in seconds, kept apart from the other
	// variables for the server's idle-connection check, which runs on
	// another goroutine.
	waitTimeout atomic.Int64

	spoolResults bool // SetSpoolResults
	parser       *parser.Parser

	db         string
	autocommit bool
	txn        kv.Txn
	txnOpts    kv.TxnOptions // txn's
	explicit   bool          // inside BEGIN ... COMMIT
	schema     *catalog.Schema
	readOnly   bool
	pin        *txnPin // the tables txn writes, once it writes (schemalease.go)
	pinBuf     txnPin  // pin's memory, reused by the session's transactions

	// beginMode is BEGIN PESSIMISTIC / OPTIMISTIC's mode for the open
	// transaction; autoPessimistic makes an autocommit statement's retry
	// pessimistic; nextIsolation is a one-shot SET TRANSACTION ISOLATION
	// LEVEL (txnmode.go).
	beginMode       string
	autoPessimistic bool
	nextIsolation   string

	// proc is the running statement, as SHOW PROCESSLIST and KILL see it
	// (process.go).
	proc procState

	vars     map[string]types.Datum // session system variables (lower case)
	userVars map[string]types.Datum

	warnings     []error
	lastWarnings []error
	lastInsertID uint64

	prepared map[uint32]*prepared
	nextStmt uint32

	// textPlans: per literal-free INSERT form (textplan.go), its prepared
	// statement, or nil when the form cannot be prepared.
	textPlans map[string]*prepared

	x sessionExtra // stmts.go

	auth sessionAuth // privcheck.go
}

// NewSession opens a session that no client connection announced an id
// for (the DDL owner's, tests', an embedding program's): its id comes from
// the engine, above every id a connection's handshake gives.
func (e *Engine) NewSession(user, host string) *Session {
	return e.NewClientSession(user, host, internalConnIDs+e.nextConnID.Add(1))
}

// internalConnIDs is where the ids of sessions opened without a client
// connection's id start: the MySQL server numbers connections from 1, so
// the two ranges do not meet.
const internalConnIDs = 1 << 31

// NewClientSession opens the session of a client connection whose
// handshake gave it connID: the session reports that id (CONNECTION_ID(),
// SHOW PROCESSLIST) and KILL finds it by it, as the client expects.
func (e *Engine) NewClientSession(user, host string, connID uint32) *Session {
	s := &Session{
		e: e, user: user, host: host, userHost: user + "@" + host, connID: connID,
		parser: parser.New(), autocommit: true,
		vars: map[string]types.Datum{}, userVars: map[string]types.Datum{},
		prepared: map[uint32]*prepared{}, textPlans: map[string]*prepared{},
	}
	s.initAuth()
	if v, ok := s.GetVar("wait_timeout", true, ""); ok {
		n, _ := v.ToInt64()
		s.waitTimeout.Store(max(n, 1))
	}
	e.register(s)
	return s
}

// CurrentDB returns the default database ("" if none).
func (s *Session) CurrentDB() string { return s.db }

// UseDB sets the default database (COM_INIT_DB / USE).
func (s *Session) UseDB(name string) error {
	ctx := context.Background()
	schema, err := s.currentSchema(ctx)
	if err != nil {
		return toSQLError(err)
	}
	if isInfoSchemaDB(name) {
		s.db = "information_schema"
		return nil
	}
	if err := s.checkUse(name); err != nil {
		return err
	}
	d := schema.DB(name)
	if d == nil {
		return sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", name)
	}
	s.db = d.Name
	return nil
}

// InTxn reports whether a transaction is open.
func (s *Session) InTxn() bool { return s.txn != nil && (s.explicit || !s.autocommit) }

// AutoCommit reports the autocommit setting.
func (s *Session) AutoCommit() bool { return s.autocommit }

// WarningCount is the number of warnings of the last statement.
func (s *Session) WarningCount() uint16 { return uint16(min(len(s.lastWarnings), 65535)) }

// Close rolls back an open transaction and drops the session's temporary
// tables.
func (s *Session) Close() {
	_ = s.finish(context.Background(), false)
	s.dropAllTemp()
	s.e.unregister(s)
}

// currentSchema returns the schema of the open transaction or the latest one.
func (s *Session) currentSchema(ctx context.Context) (*catalog.Schema, error) {
	if s.txn != nil && s.schema != nil {
		return s.schema, nil
	}
	txn, schema, err := s.e.beginTxn(ctx, kv.TxnOptions{})
	if err != nil {
		return nil, err
	}
	txn.Rollback(ctx)
	return s.withTemp(schema), nil
}

// begin opens the session's transaction if none is open and loads its schema.
func (s *Session) begin(ctx context.Context) error {
	if s.txn != nil {
		return nil
	}
	opts := s.txnOptions()
	txn, schema, err := s.e.beginTxn(ctx, opts)
	if err != nil {
		return err
	}
	s.txn, s.schema, s.txnOpts = txn, s.withTemp(schema), opts
	s.nextIsolation = ""
	return nil
}

// finish ends the transaction: commit (rollback when it wrote nothing).
//
// A transaction that wrote passes the engine's commit check first: it
// fails with 8028 when a table it writes changed under it by more than
// the one schema version an engine may lag, and with 8027 when the
// engine's schema lease expired.
func (s *Session) finish(ctx context.Context, commit bool) error {
	txn, pin := s.txn, s.pin
	s.txn, s.explicit, s.schema, s.pin, s.beginMode = nil, false, nil, nil, ""
	s.x.savepoints = nil
	if txn == nil {
		return nil
	}
	defer s.e.unpin(pin)
	if commit && txn.Len() > 0 {
		if pin != nil {
			err := s.e.commitCheck(pin)
			if err == errSchemaExpired && s.e.ensureLease(ctx) == nil {
				// Renewed (after a long pause, say): the transaction
				// commits if nothing it writes changed meanwhile.
				err = s.e.commitCheck(pin)
			}
			if err != nil {
				txn.Rollback(ctx)
				return err
			}
		}
		err := txn.Commit(ctx)
		s.commitMods(err == nil)
		return err
	}
	s.commitMods(false)
	return txn.Rollback(ctx)
}

// pinWrites records the tables the transaction's statement writes (see
// Engine.pinTables); it costs no lock when they are recorded already. A
// table whose writes a DDL job stopped (catalog.TableInfo.WriteBarrier)
// makes the statement wait for the job's next version and fail with 8028,
// which an autocommit statement meets by running again under it.
func (s *Session) pinWrites(ctx context.Context, tables []int64) error {
	for _, id := range tables {
		if t := s.schema.TableByID(id); t != nil && t.WriteBarrier {
			s.e.waitBarrier(ctx, id)
			return errSchemaChanged
		}
	}
	if p := s.pin; p != nil {
		all := true
		for _, id := range tables {
			if !containsID(p.tables, id) {
				all = false
				break
			}
		}
		if all {
			return nil
		}
	}
	return s.e.pinTables(&s.pin, &s.pinBuf, s.schema.Version, tables)
}

// writeTables appends the ids of the tables c writes to buf.
func (c *compiled) writeTables(buf []int64) []int64 {
	switch {
	case c.insert != nil:
		buf = append(buf, c.insert.Table.ID)
	case c.update != nil:
		if len(c.update.Multi) == 0 {
			buf = append(buf, c.update.Table.ID)
		}
		for _, tg := range c.update.Multi {
			buf = append(buf, tg.Table.ID)
		}
	case c.delete != nil:
		if len(c.delete.Multi) == 0 {
			buf = append(buf, c.delete.Table.ID)
		}
		for _, tg := range c.delete.Multi {
			buf = append(buf, tg.Table.ID)
		}
	}
	return buf
}

// autocommitStmt reports whether the next statement is its own transaction.
func (s *Session) autocommitStmt() bool { return s.autocommit && !s.explicit }

// Execute runs every statement of query and returns one Result per
// statement; on the first error it stops and returns the results so far.
func (s *Session) Execute(ctx context.Context, query string) (res []*Result, err error) {
	if ctx, err = s.startStatement(ctx, query); err != nil {
		return nil, err
	}
	defer func() { err = s.endStatement(ctx, err) }()
	if r, ok, err := s.runCachedInsert(ctx, query); ok {
		if err != nil {
			return []*Result{}, err
		}
		return []*Result{r}, nil
	}
	stmts, err := parseSQL(s.parser, query)
	if err != nil {
		return nil, err
	}
	if len(stmts) == 0 {
		if strings.TrimSpace(query) != "" {
			return []*Result{}, nil // only comments: OK, as MySQL answers
		}
		return nil, sqlerr.New(1065, "42000", "Query was empty")
	}
	results := make([]*Result, 0, len(stmts))
	for _, st := range stmts {
		r, err := s.run(ctx, st, nil, nil)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, nil
}

// parseView parses the stored SELECT of a view.
func parseView(sql string) (ast.ResultSetNode, error) {
	stmts, err := parseSQL(parser.New(), sql)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "view definition is not a query")
	}
	st := stmts[0]
	rs, ok := st.(ast.ResultSetNode)
	if !ok {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "view definition is not a query")
	}
	return rs, nil
}

// errParserPanic answers a statement the parser panicked on. The known
// cause is a numeric literal of more digits than its decimal type holds
// (found by FuzzExecute): the parser's decimal conversion panics instead
// of returning an error.
var errParserPanic = sqlerr.New(sqlerr.ErParse, "42000",
	"You have an error in your SQL syntax; the statement holds a value the parser cannot represent (for example a number of more than 65 digits)")

// parseSQL parses query into statements. A syntax error is rendered the
// way MySQL words it; a panic inside the parser becomes errParserPanic
// instead of costing the connection.
func parseSQL(p *parser.Parser, query string) (stmts []ast.StmtNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			stmts, err = nil, errParserPanic
		}
	}()
	stmts, _, err = p.ParseSQL(query)
	if err != nil {
		if q, ok := quoteTreeFormat(query); ok {
			if st, _, err2 := p.ParseSQL(q); err2 == nil {
				return st, nil
			}
		}
		if name, ok := unsupportedStatement(query); ok {
			return nil, notSupported(name)
		}
		return nil, parseError(err)
	}
	return stmts, nil
}

// parserPosition matches the TiDB parser's syntax error text.
var parserPosition = regexp.MustCompile(`(?s)^line (\d+) column \d+ near "(.*)"\s*$`)

// parseError renders a syntax error the way MySQL words it (1064).
func parseError(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, "]"); strings.HasPrefix(msg, "[") && i > 0 {
		msg = msg[i+1:]
	}
	if m := parserPosition.FindStringSubmatch(msg); m != nil {
		return sqlerr.New(sqlerr.ErParse, "42000", "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '%s' at line %s", m[2], m[1])
	}
	msg = strings.Replace(msg, "TiDB version", "MySQL server version", 1)
	return sqlerr.New(sqlerr.ErParse, "42000", "%s", msg)
}

// run executes one statement with statement-level retry for autocommit.
func (s *Session) run(ctx context.Context, st ast.StmtNode, params []types.Datum, p *prepared) (_ *Result, err error) {
	if s.e.audit != nil {
		if class := auditClass(st); class != "" {
			defer func() { s.auditStatement(st, class, err) }()
		}
	}
	s.warnings = s.warnings[:0]
	if _, ok := st.(*ast.ShowStmt); !ok {
		defer func() { s.lastWarnings = append(s.lastWarnings[:0], s.warnings...) }()
	}
	defer func() { s.autoPessimistic = false }()
	if tctx, cancel := s.withMaxExecutionTime(ctx, st); cancel != nil {
		defer cancel()
		ctx = tctx
	}
	for attempt := 0; ; attempt++ {
		// An autocommit statement runs optimistically first, then
		// pessimistically (txnmode.go).
		s.autoPessimistic = attempt > 0
		r, err := s.runOnce(ctx, st, params, p)
		if err == nil {
			r.Warnings = uint16(min(len(s.warnings), 65535))
			s.noteCounts(st, r)
			return r, nil
		}
		var re *kv.RetryableError
		retryable := (errors.As(err, &re) && !re.LockWaitTimeout) || err == errSchemaChanged
		if retryable && s.txn == nil && s.autocommitStmt() && attempt < autocommitRetries && isDML(st) {
			s.warnings = s.warnings[:0]
			continue
		}
		if (isDeadlock(err) || isAborted(err)) && s.txn != nil {
			// InnoDB rolls back the victim of a deadlock; a transaction
			// whose write conflicts with a row committed after its
			// snapshot is rolled back the same way.
			_ = s.finish(ctx, false)
		}
		if ctx.Err() != nil {
			return nil, interruptedError(context.Cause(ctx))
		}
		return nil, toSQLError(err)
	}
}

func isDML(st ast.StmtNode) bool {
	switch st.(type) {
	case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt, *ast.SelectStmt, *ast.SetOprStmt:
		return true
	}
	return false
}

func (s *Session) runOnce(ctx context.Context, st ast.StmtNode, params []types.Datum, p *prepared) (*Result, error) {
	switch n := st.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt, *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt:
		return s.runDML(ctx, st, params, p)
	case *ast.BeginStmt:
		if s.txn != nil {
			if err := s.finish(ctx, true); err != nil {
				return nil, err
			}
		}
		s.explicit, s.beginMode = true, n.Mode
		if err := s.begin(ctx); err != nil {
			s.explicit, s.beginMode = false, ""
			return nil, err
		}
		s.startReadOnly(n.ReadOnly)
		return &Result{}, nil
	case *ast.CommitStmt:
		return &Result{}, s.finish(ctx, true)
	case *ast.RollbackStmt:
		if n.SavepointName != "" {
			return &Result{}, s.rollbackTo(n.SavepointName)
		}
		return &Result{}, s.finish(ctx, false)
	case *ast.KillStmt:
		return s.runKill(n)
	case *ast.UseStmt:
		return &Result{}, s.UseDB(n.DBName)
	case *ast.SetStmt:
		if err := s.checkStmt(ctx, st); err != nil {
			return nil, err
		}
		return s.runSet(ctx, n)
	case *ast.ShowStmt:
		return s.runShow(ctx, n)
	case *ast.ExplainStmt:
		return s.runExplain(ctx, n)
	case *ast.AdminStmt:
		if err := s.checkStmt(ctx, st); err != nil {
			return nil, err
		}
		return s.runAdmin(ctx, n)
	case *ast.SplitRegionStmt:
		return s.runSplit(ctx, n)
	case *ast.AnalyzeTableStmt:
		if err := s.checkStmt(ctx, st); err != nil {
			return nil, err
		}
		return s.runAnalyze(ctx, n)
	case *ast.CreateDatabaseStmt, *ast.DropDatabaseStmt, *ast.CreateTableStmt, *ast.DropTableStmt,
		*ast.CreateIndexStmt, *ast.DropIndexStmt, *ast.TruncateTableStmt, *ast.CreateViewStmt, *ast.AlterTableStmt:
		if err := s.checkStmt(ctx, st); err != nil {
			return nil, err
		}
		return s.runDDL(ctx, st)
	}
	if err := s.checkStmt(ctx, st); err != nil {
		return nil, err
	}
	if r, ok, err := s.runDCL(ctx, st); ok {
		return r, err
	}
	if n, ok := st.(*ast.LoadDataStmt); ok {
		return s.loadData(ctx, n)
	}
	if r, ok, err := s.runExtra(ctx, st); ok {
		return r, err
	}
	return nil, notSupported(stmtName(st))
}

// memQuota is the per-statement memory quota in bytes
// (tidb_mem_quota_query, default 1 GiB).
func (s *Session) memQuota() int64 {
	return s.execSettings().quota
}

func (s *Session) evalContext(params []types.Datum) *expr.EvalContext {
	return &expr.EvalContext{
		Params: params, Vars: s, Warnings: &s.warnings, Now: time.Now(), Database: s.db,
		User: s.userHost, CurrentUser: s.auth.account.User + "@" + s.auth.account.Host, ConnectionID: uint64(s.connID), LastInsertID: s.lastInsertID,
		RowCount: s.x.rowCount, FoundRows: s.x.foundRows,
	}
}

// compile plans a statement against the transaction's schema.
func (s *Session) compile(st ast.StmtNode) (*compiled, error) {
	b := plan.NewBuilder(s.schema, s.db)
	b.ParseView = parseView
	b.Cluster = s.e.cluster
	b.OnlyFullGroupBy = s.sqlModeHas("ONLY_FULL_GROUP_BY")
	b.NoCoprocessor = s.copConcurrency() == 0
	b.Processes = func() [][]types.Datum { return processRows(s.visibleProcesses(), true) }
	b.Privileges = s.privilegeRows
	b.Visible = infoVisibility{s}
	b.Stats = s.e.stats.Load()
	c := &compiled{version: s.schema.Version, tempVersion: s.x.tempVersion, stats: b.Stats}
	var err error
	switch n := st.(type) {
	case *ast.SelectStmt:
		c.query, err = b.BuildQuery(n)
		c.forUpdate = n.LockInfo != nil && n.LockInfo.LockType != ast.SelectLockNone
	case *ast.SetOprStmt:
		c.query, err = b.BuildQuery(n)
	case *ast.InsertStmt:
		c.insert, err = b.BuildInsert(n)
	case *ast.UpdateStmt:
		c.update, err = b.BuildUpdate(n)
	case *ast.DeleteStmt:
		c.delete, err = b.BuildDelete(n)
	default:
		err = notSupported(stmtName(st))
	}
	if err != nil {
		return nil, s.deniedFirst(st, err)
	}
	c.subqueries = b.Subqueries
	c.needs = s.dmlNeeds(st)
	if c.query != nil {
		c.columns = resultColumns(c.query.Columns())
	}
	return c, nil
}

func (s *Session) runDML(ctx context.Context, st ast.StmtNode, params []types.Datum, p *prepared) (res *Result, err error) {
	var pre *compiled
	if s.txn == nil && s.autocommitStmt() {
		pre = s.beginLatest(ctx, st, p) // latest.go
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	auto := s.autocommitStmt()
	var ec *exec.Context
	lastInsertID := s.lastInsertID
	defer func() {
		if auto {
			if err != nil {
				s.finish(ctx, false)
			} else if cerr := s.finish(ctx, true); cerr != nil {
				// A key the statement left to the commit to check
				// was taken: the statement's duplicate-key error.
				if ec != nil {
					cerr = ec.DeferredDup.Err(cerr)
				}
				res.Close()
				res, err = nil, cerr
				s.lastInsertID = lastInsertID
			}
		}
	}()
	var c *compiled
	if s.planFits(pre, s.schema) {
		c = pre
	} else if p != nil && s.planFits(p.cached, s.schema) {
		c = p.cached
	} else {
		if c, err = s.compile(st); err != nil {
			return nil, err
		}
		if p != nil {
			p.cached = c
		}
	}
	if err := s.checkCompiled(c); err != nil {
		return nil, err
	}
	// A statement that reads to write locks what it writes, in a
	// pessimistic transaction, and runs again when its locks find rows
	// committed after it read them (txnmode.go).
	forUpdate := s.txnOpts.Pessimistic && (c.query == nil || c.forUpdate)
	for attempt := 0; ; attempt++ {
		if err := s.beginStatement(ctx, forUpdate, attempt > 0); err != nil {
			return nil, err
		}
		res, ec, err = s.execStmt(ctx, c, params, auto, forUpdate)
		if err != nil && forUpdate && isPessimisticConflict(err) && attempt < maxPessimisticRetries {
			s.warnings = s.warnings[:0]
			continue
		}
		return res, err
	}
}

// planFits reports whether c (nil: no plan) was planned against schema,
// the session's temporary tables and the table statistics in force now.
func (s *Session) planFits(c *compiled, schema *catalog.Schema) bool {
	return c != nil && c.version == schema.Version && c.tempVersion == s.x.tempVersion && c.stats == s.e.stats.Load()
}

// execStmt runs a compiled statement once in the session's transaction.
func (s *Session) execStmt(ctx context.Context, c *compiled, params []types.Datum, auto, forUpdate bool) (*Result, *exec.Context, error) {
	set := s.execSettings()
	ec := &exec.Context{
		Ctx: ctx, Txn: s.txn, Eval: s.evalContext(params), IDs: s.e.ids,
		Mem: exec.NewMemTracker(set.quota), TmpDir: s.e.tmpDir, NoSpill: !set.spill, Concurrency: set.concurrency, MaxRecursion: set.recursion, NoVec: set.noVec,
		Schema: s.schema, FKChecks: !s.x.fkOff, NonStrict: s.x.nonStrict, FoundRows: s.x.clientFoundRows,
		// A statement that is its own transaction, with nothing written
		// before it: its commit follows at once, so an INSERT may leave
		// its primary key check to it.
		DeferDupCheck:  auto && s.txn.Len() == 0,
		CopConcurrency: s.copConcurrency(),
	}
	ec.Eval.Ctx = ctx
	if len(c.subqueries) > 0 {
		// Subqueries run plans on the statement's shared state: no
		// parallel workers (exec/parallel.go).
		ec.Concurrency = 1
	}
	exec.BindSubqueries(ec, c.subqueries)
	// Spill files and parallel workers end with the statement.
	defer ec.Close()
	if c.query != nil {
		if s.spoolResults {
			rows, sp, err := exec.QuerySpooled(ec, c.query)
			if err != nil {
				return nil, ec, err
			}
			return &Result{Columns: typedColumns(c.columns, rows), Rows: rows, spool: sp}, ec, nil
		}
		rows, err := exec.Query(ec, c.query)
		if err != nil {
			return nil, ec, err
		}
		return &Result{Columns: typedColumns(c.columns, rows), Rows: rows}, ec, nil
	}
	if err := s.writeRefused(); err != nil {
		return nil, ec, err
	}
	var tables [4]int64
	if err := s.pinWrites(ctx, c.writeTables(tables[:0])); err != nil {
		return nil, ec, err
	}
	ec.Writes = exec.NewStmtBuffer(s.txn)
	var err error
	switch {
	case c.insert != nil:
		err = exec.RunInsert(ec, c.insert)
	case c.update != nil:
		err = exec.RunUpdate(ec, c.update)
	case c.delete != nil:
		err = exec.RunDelete(ec, c.delete)
	}
	if err != nil {
		return nil, ec, err
	}
	if err := s.pinWrites(ctx, ec.Writes.Tables()); err != nil {
		return nil, ec, err
	}
	if forUpdate {
		if err := s.lockWrites(ctx, ec.Writes.Keys()); err != nil {
			return nil, ec, err
		}
	}
	written := ec.Writes.Tables()
	if err := ec.Writes.Flush(); err != nil {
		return nil, ec, err
	}
	s.noteMods(written, ec.AffectedRows)
	if ec.LastInsertID != 0 {
		s.lastInsertID = ec.LastInsertID
	}
	insertID := ec.LastInsertID
	if insertID == 0 {
		insertID = ec.ExplicitInsertID
	}
	return &Result{AffectedRows: ec.AffectedRows, LastInsertID: insertID}, ec, nil
}

// typedColumns returns cols with each column whose type is known only at
// run time (a variable, a ? parameter) typed after its first non-NULL
// value, so that `SELECT @@autocommit` is an integer column as in MySQL and
// drivers decode it as a number. cols itself is returned when every type
// is known (the usual case, at the cost of one loop).
func typedColumns(cols []*Column, rows [][]types.Datum) []*Column {
	var out []*Column
	for i, c := range cols {
		if c.Type == nil || c.Type.GetType() != mysql.TypeUnspecified {
			continue
		}
		for _, r := range rows {
			if i < len(r) && !r[i].IsNull() {
				if out == nil {
					out = append([]*Column(nil), cols...)
				}
				cc := *c
				cc.Type = types.DefaultFieldTypeFor(r[i])
				out[i] = &cc
				break
			}
		}
	}
	if out == nil {
		return cols
	}
	return out
}

func resultColumns(cols []*plan.Column) []*Column {
	out := make([]*Column, len(cols))
	for i, c := range cols {
		out[i] = &Column{Name: c.Name, OrgName: c.OrgName, Table: c.Table, OrgTable: c.OrgTable, Database: c.DB, Type: c.Type}
	}
	return out
}

// Prepare parses and plans a statement for repeated execution.
func (s *Session) Prepare(ctx context.Context, query string) (*PreparedStmt, error) {
	stmts, err := parseSQL(s.parser, query)
	if err != nil {
		return nil, err
	}
	if len(stmts) != 1 {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "can not prepare multiple statements")
	}
	st := stmts[0]
	n := expr.NumberParams(st)
	s.nextStmt++
	p := &prepared{info: PreparedStmt{ID: s.nextStmt, ParamCount: n}, stmt: st, text: query}
	if isDML(st) {
		hadTxn := s.txn != nil
		if err := s.begin(ctx); err != nil {
			return nil, toSQLError(err)
		}
		c, err := s.compile(st)
		if !hadTxn {
			s.finish(ctx, false)
		}
		if err != nil {
			return nil, toSQLError(err)
		}
		p.cached = c
		p.info.Columns = c.columns
	}
	s.prepared[p.info.ID] = p
	info := p.info
	return &info, nil
}

// ExecutePrepared runs a prepared statement with parameter values.
func (s *Session) ExecutePrepared(ctx context.Context, id uint32, params []types.Datum) (*Result, error) {
	p := s.prepared[id]
	if p == nil {
		return nil, sqlerr.New(1243, "HY000", "Unknown prepared statement handler (%d) given to mysqld_stmt_execute", id)
	}
	if len(params) != p.info.ParamCount {
		return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to mysqld_stmt_execute")
	}
	ctx, err := s.startStatement(ctx, p.text)
	if err != nil {
		return nil, err
	}
	r, err := s.run(ctx, p.stmt, params, p)
	return r, s.endStatement(ctx, err)
}

// ClosePrepared forgets a prepared statement.
func (s *Session) ClosePrepared(id uint32) { delete(s.prepared, id) }

// toSQLError classifies any error for the client.
func toSQLError(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlerr.Error
	if errors.As(err, &se) {
		return se
	}
	var re *kv.RetryableError
	if errors.As(err, &re) {
		return retryableSQLError(re)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return sqlerr.New(sqlerr.ErQueryInterrupted, "70100", "Query execution was interrupted")
	}
	return sqlerr.New(sqlerr.ErUnknown, "HY000", "%s", redactKeys(err.Error()))
}
