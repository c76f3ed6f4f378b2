package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/dolthub/vitess/go/vt/sqlparser"

	strsql "github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// maxPreparedParams is the most placeholders a prepared statement may
// have. MySQL allows 65535; the protocol library sizes the NULL bitmap of
// COM_STMT_EXECUTE with a 16-bit count plus 7, which wraps above 65528 and
// would make it index past the bitmap it read, so the statement is refused
// at prepare (with MySQL's 1390) instead.
const maxPreparedParams = 65528

// rowsPerPacketBatch bounds how many rows are converted to wire values
// before they are handed to the protocol library, so a large result set
// is not duplicated in memory all at once.
const rowsPerPacketBatch = 256

// handler implements mysql.Handler: one connState per client connection.
type handler struct {
	open sessionFactory
	log  *slog.Logger

	mu    sync.Mutex
	conns map[uint32]*mysql.Conn // open connections, closed by Server.Close
	// sessions are the connections' SQL sessions, for the watch on
	// clients that go away (clientgone.go).
	sessions map[uint32]connSession
}

func newHandler(open sessionFactory, logger *slog.Logger) *handler {
	return &handler{open: open, log: logger, conns: make(map[uint32]*mysql.Conn), sessions: make(map[uint32]connSession)}
}

// connState is the server's per-connection state, kept in Conn.ClientData.
type connState struct {
	sess session
	// stmts maps the statement ids vitess gives clients to the ids of the
	// session's prepared statements.
	stmts map[uint32]*strsql.PreparedStmt
	// fields are the column definitions sent for recent column lists: a
	// prepared statement's result columns are the same slice at every
	// execution, and a client alternates between several statements
	// (sysbench prepares its point select once per table).
	fields fieldCache
	// enc holds the buffers result rows are encoded in, reused from one
	// result to the next (see rowEncoder.bufs).
	enc encodeBuffers
}

// fieldCache remembers the wire column definitions of recent column
// lists, keyed by the address of the list's first element (its backing
// array) and checked by length.
type fieldCache struct {
	m map[**strsql.Column]cachedFields
}

type cachedFields struct {
	n      int
	fields []*querypb.Field
}

// maxCachedFieldLists bounds a connection's cache; it starts over when
// full (column lists of statements closed or re-planned stay otherwise).
const maxCachedFieldLists = 64

// get returns the definitions of cols, building them when cols is not a
// list the cache holds (the same backing array and length).
func (fc *fieldCache) get(cols []*strsql.Column) []*querypb.Field {
	if fc == nil || len(cols) == 0 {
		return wireFields(cols)
	}
	if e, ok := fc.m[&cols[0]]; ok && e.n == len(cols) {
		return e.fields
	}
	if fc.m == nil || len(fc.m) >= maxCachedFieldLists {
		fc.m = make(map[**strsql.Column]cachedFields)
	}
	fields := wireFields(cols)
	fc.m[&cols[0]] = cachedFields{n: len(cols), fields: fields}
	return fields
}

var _ mysql.Handler = (*handler)(nil)

// NewConnection implements mysql.Handler. The client is not authenticated
// yet; the session is opened on its first command.
func (h *handler) NewConnection(c *mysql.Conn) {
	c.StatusFlags |= mysql.ServerStatusAutocommit
	c.ClientData = &connState{stmts: make(map[uint32]*strsql.PreparedStmt)}
	metricConnectionsTotal.Inc()
	metricConnectionsOpen.Inc()
	openConns.Add(1)
	h.mu.Lock()
	h.conns[c.ConnectionID] = c
	h.mu.Unlock()
}

// ConnectionClosed implements mysql.Handler.
func (h *handler) ConnectionClosed(c *mysql.Conn) {
	h.mu.Lock()
	delete(h.conns, c.ConnectionID)
	delete(h.sessions, c.ConnectionID)
	h.mu.Unlock()
	metricConnectionsOpen.Dec()
	openConns.Add(-1)
	if st, ok := c.ClientData.(*connState); ok && st.sess != nil {
		st.sess.Close()
		st.sess = nil
	}
}

// ConnectionAborted implements mysql.Handler.
func (h *handler) ConnectionAborted(c *mysql.Conn, reason string) error {
	metricConnectionsAborted.Inc()
	h.log.Info("connection aborted", "conn", c.ConnectionID, "remote", remoteString(c), "reason", reason)
	return nil
}

func (h *handler) closeAll() {
	h.mu.Lock()
	conns := make([]*mysql.Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// state returns the connection's state with its session open.
func (h *handler) state(c *mysql.Conn) *connState {
	st, ok := c.ClientData.(*connState)
	if !ok {
		st = &connState{stmts: make(map[uint32]*strsql.PreparedStmt)}
		c.ClientData = st
	}
	if st.sess == nil {
		st.sess = h.open(c.User, hostOf(c.RemoteAddr()), c.ConnectionID)
		if ci, ok := st.sess.(interface {
			SetConnInfo(usedPassword bool, tlsVersion, tlsCipher string)
		}); ok {
			u, _ := c.UserData.(authenticatedUser)
			var version, cipher string
			if cc, ok := c.Conn.(*clientConn); ok {
				if ts := cc.TLSState(); ts != nil {
					version, cipher = tlsVersionName(ts.Version), tls.CipherSuiteName(ts.CipherSuite)
				}
			}
			ci.SetConnInfo(u.usedPassword, version, cipher)
		}
		if cs, ok := st.sess.(connSession); ok {
			cs.SetClientFoundRows(c.Capabilities&mysql.CapabilityClientFoundRows != 0)
			cs.SetConnCloser(c.Close)
			h.mu.Lock()
			h.sessions[c.ConnectionID] = cs
			h.mu.Unlock()
		}
		// A result larger than the statement's memory quota is sent
		// from a temporary file (sendResult closes it).
		if sp, ok := st.sess.(interface{ SetSpoolResults(bool) }); ok {
			sp.SetSpoolResults(true)
		}
		// LOAD DATA LOCAL INFILE asks the client for the file over this
		// connection (a client that refuses sends an empty file).
		if li, ok := st.sess.(interface {
			SetLocalInfile(func(string) (io.ReadCloser, error))
		}); ok {
			li.SetLocalInfile(c.LoadInfile)
		}
	}
	return st
}

// connSession is what a session of the SQL engine offers beyond session:
// *sql.Session implements it.
type connSession interface {
	SetClientFoundRows(bool)
	SetConnCloser(func())
	RunningFor() time.Duration
	Kill(cause error)
}

// recoverCommand turns a panic while serving a command into an error for
// the client and drops the connection: the session's state can no longer
// be trusted, so it is closed (rolling back its transaction).
func (h *handler) recoverCommand(c *mysql.Conn, errp *error) {
	r := recover()
	if r == nil {
		return
	}
	metricPanics.Inc()
	h.log.Error("panic while serving connection; closing it",
		"conn", c.ConnectionID, "remote", remoteString(c), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	if st, ok := c.ClientData.(*connState); ok && st.sess != nil {
		func() {
			defer func() { _ = recover() }()
			st.sess.Close()
		}()
		st.sess = nil
	}
	*errp = mysql.NewSQLError(sqlerr.ErUnknown, "HY000", "internal error: %v", r)
	c.Close()
}

// syncStatus copies the session's transaction state into the status flags
// the next OK/EOF packet carries.
func syncStatus(c *mysql.Conn, sess session) {
	flags := c.StatusFlags &^ (mysql.ServerInTransaction | mysql.ServerStatusAutocommit)
	if sess.InTxn() {
		flags |= mysql.ServerInTransaction
	}
	if sess.AutoCommit() {
		flags |= mysql.ServerStatusAutocommit
	}
	const noBackslashEscapes = 0x0200 // SERVER_STATUS_NO_BACKSLASH_ESCAPES
	flags &^= noBackslashEscapes
	if nb, ok := sess.(interface{ NoBackslashEscapes() bool }); ok && nb.NoBackslashEscapes() {
		flags |= noBackslashEscapes
	}
	c.StatusFlags = flags
}

// ComInitDB implements mysql.Handler (COM_INIT_DB and the database named
// in the handshake).
func (h *handler) ComInitDB(c *mysql.Conn, schemaName string) (err error) {
	defer func() { metricsInitDB.observe(err) }()
	defer h.recoverCommand(c, &err)
	st := h.state(c)
	if err := st.sess.UseDB(schemaName); err != nil {
		return wireError(err)
	}
	return nil
}

// ComQuery implements mysql.Handler for clients without multi-statements:
// a query holding several statements is a syntax error, as in MySQL.
func (h *handler) ComQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (err error) {
	defer func() { metricsQuery.observe(err) }()
	defer h.recoverCommand(c, &err)
	st := h.state(c)
	if first, rest := splitFirstStatement(query); rest != "" {
		return mysql.NewSQLError(sqlerr.ErParse, "42000",
			"You have an error in your SQL syntax; the query holds more than one statement (%q ...) but the client did not enable multi-statements", truncate(first, 64))
	}
	return h.runQuery(ctx, c, st, query, false, callback)
}

// ComMultiQuery implements mysql.Handler: it runs the first statement of
// query and returns the rest, which vitess hands back until it is empty.
// After an error the rest is dropped, as MySQL stops at the first failure.
func (h *handler) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, callback mysql.ResultSpoolFn) (rest string, err error) {
	defer func() { metricsQuery.observe(err) }()
	defer h.recoverCommand(c, &err)
	st := h.state(c)
	first, rest := splitFirstStatement(query)
	if err := h.runQuery(ctx, c, st, first, rest != "", callback); err != nil {
		return "", err
	}
	return rest, nil
}

func (h *handler) runQuery(ctx context.Context, c *mysql.Conn, st *connState, query string, more bool, callback mysql.ResultSpoolFn) error {
	results, err := st.sess.Execute(ctx, query)
	defer func() {
		for _, r := range results {
			r.Close()
		}
	}()
	syncStatus(c, st.sess)
	if err != nil {
		return wireError(err)
	}
	var res *strsql.Result
	switch len(results) {
	case 0:
		res = &strsql.Result{}
	case 1:
		res = results[0]
	default:
		// The query was checked to hold one statement; the session saw
		// more. Answer for the first, say so in the log.
		h.log.Warn("one statement produced several results; sending the first",
			"conn", c.ConnectionID, "results", len(results))
		res = results[0]
	}
	return sendResult(res, false, &st.fields, &st.enc, func(r *sqltypes.Result) error { return callback(r, more) })
}

// sendResult streams res to the protocol library: an OK packet when the
// statement returned no columns, otherwise the column definitions and rows
// in batches.
func sendResult(res *strsql.Result, binary bool, fc *fieldCache, reuse *encodeBuffers, send func(*sqltypes.Result) error) error {
	if res == nil {
		res = &strsql.Result{}
	}
	if len(res.Columns) == 0 {
		return send(&sqltypes.Result{RowsAffected: res.AffectedRows, InsertID: res.LastInsertID})
	}
	fields := fc.get(res.Columns)
	enc := newRowEncoder(res.Columns, fields, binary, reuse)
	if reuse != nil {
		defer reuse.release()
	}
	rows := res.Rows
	if len(rows) == 0 && !res.Spooled() {
		return send(&sqltypes.Result{Fields: fields})
	}
	for {
		if len(rows) == 0 && res.Spooled() {
			// A result larger than the statement's memory quota, read
			// back from its temporary file.
			var err error
			if rows, err = res.NextSpooled(); err != nil {
				return wireError(err)
			}
		}
		if len(rows) == 0 {
			return nil
		}
		n := min(len(rows), rowsPerPacketBatch)
		wire, err := enc.encode(rows[:n])
		if err != nil {
			return wireError(err)
		}
		if err := send(&sqltypes.Result{Fields: fields, Rows: wire}); err != nil {
			return err
		}
		rows = rows[n:]
	}
}

// ComPrepare implements mysql.Handler. query is the placeholder that
// clientConn substituted for the client's text (see clientconn.go);
// the parameter count and columns sent to the client are the SQL layer's.
func (h *handler) ComPrepare(ctx context.Context, c *mysql.Conn, query string, prepare *mysql.PrepareData) (fields []*querypb.Field, err error) {
	defer func() { metricsPrepare.observe(err) }()
	defer h.recoverCommand(c, &err)
	if capture, ok := c.Conn.(*clientConn); ok {
		if text, ok := capture.originalQuery(query); ok {
			query = text
			prepare.PrepareStmt = text
		}
	}
	st := h.state(c)
	h.releaseClosedStatements(c, st)
	ps, err := st.sess.Prepare(ctx, query)
	syncStatus(c, st.sess)
	if err != nil {
		return nil, wireError(err)
	}
	if ps.ParamCount > maxPreparedParams {
		st.sess.ClosePrepared(ps.ID)
		return nil, mysql.NewSQLError(1390, "HY000", "Prepared statement contains too many placeholders (%d; at most %d)", ps.ParamCount, maxPreparedParams)
	}
	st.stmts[prepare.StatementID] = ps
	prepare.ParamsCount = uint16(ps.ParamCount)
	prepare.ParamsType = make([]int32, ps.ParamCount)
	prepare.BindVars = make(map[string]*querypb.BindVariable, ps.ParamCount)
	if len(ps.Columns) == 0 {
		return nil, nil
	}
	return wireFields(ps.Columns), nil
}

// releaseClosedStatements closes the session's prepared statements whose
// client-side statement is gone. vitess handles COM_STMT_CLOSE by dropping
// its PrepareData without telling the handler, so the difference is found
// here, at the next prepare, before new statements pile up.
func (h *handler) releaseClosedStatements(c *mysql.Conn, st *connState) {
	for vid, ps := range st.stmts {
		if _, open := c.PrepareData[vid]; !open {
			st.sess.ClosePrepared(ps.ID)
			delete(st.stmts, vid)
		}
	}
}

// ComStmtExecute implements mysql.Handler.
func (h *handler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, callback func(*sqltypes.Result) error) (err error) {
	defer func() { metricsExecute.observe(err) }()
	defer h.recoverCommand(c, &err)
	st := h.state(c)
	ps, ok := st.stmts[prepare.StatementID]
	if !ok {
		return mysql.NewSQLError(sqlerr.ErUnknown, "HY000", "Unknown prepared statement handler (%d) given to mysqld_stmt_execute", prepare.StatementID)
	}
	params, err := bindParams(prepare, ps.ParamCount)
	if err != nil {
		return wireError(err)
	}
	res, err := st.sess.ExecutePrepared(ctx, ps.ID, params)
	defer res.Close()
	syncStatus(c, st.sess)
	if err != nil {
		return wireError(err)
	}
	// A server-side cursor's rows stay with the protocol library until the
	// client fetches them: they get buffers of their own.
	reuse := &st.enc
	if cc, ok := c.Conn.(*clientConn); !ok || cc.execCursor {
		reuse = nil
	}
	return sendResult(res, true, &st.fields, reuse, callback)
}

// WarningCount implements mysql.Handler.
func (h *handler) WarningCount(c *mysql.Conn) uint16 {
	if st, ok := c.ClientData.(*connState); ok && st.sess != nil {
		return st.sess.WarningCount()
	}
	return 0
}

// ComResetConnection implements mysql.Handler: the session is replaced by
// a fresh one (rolling back the old one's transaction and dropping its
// variables and prepared statements) that keeps the default database.
func (h *handler) ComResetConnection(c *mysql.Conn) (err error) {
	defer h.recoverCommand(c, &err)
	st := h.state(c)
	db := st.sess.CurrentDB()
	st.sess.Close()
	st.sess = nil
	st.stmts = make(map[uint32]*strsql.PreparedStmt)
	st = h.state(c)
	syncStatus(c, st.sess)
	if db != "" {
		if err := st.sess.UseDB(db); err != nil {
			return wireError(err)
		}
	}
	return nil
}

// ParserOptionsForConnection implements mysql.Handler. vitess's parser
// only ever sees clientConn's "SELECT <n>" placeholders (and prepares of
// 16 MiB or more); the SQL layer does the real parsing.
func (h *handler) ParserOptionsForConnection(c *mysql.Conn) (sqlparser.ParserOptions, error) {
	return sqlparser.ParserOptions{}, nil
}

func remoteString(c *mysql.Conn) string {
	if addr := c.RemoteAddr(); addr != nil {
		return addr.String()
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
