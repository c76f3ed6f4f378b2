package sql

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Running statements: SHOW PROCESSLIST, KILL, max_execution_time, clients
// that go away, shutdown.
//
// Every statement a session runs (Execute, ExecutePrepared) runs under a
// context the session can cancel: the engine keeps a list of its
// sessions, KILL [QUERY] id cancels the statement of session id (and KILL
// CONNECTION closes its connection), max_execution_time bounds a SELECT,
// the MySQL server cancels the statement of a client whose socket closed,
// and Engine.Close cancels every statement and waits for them before the
// storage underneath is closed. A cancelled statement stops at its next
// read from storage or its next batch of rows and fails with 1317 (3024
// for max_execution_time); its transaction stays open, as in MySQL.
//
// The context is created once per session and reused until a
// cancellation consumes it, so a statement that is not cancelled costs no
// allocation.

// Why a statement was cancelled.
var (
	errKilled      = errors.New("statement killed")
	errClientGone  = errors.New("client went away")
	errShutdown    = errors.New("server shutting down")
	errMaxExecTime = errors.New("maximum statement execution time exceeded")
)

// ErrClientGone is the cause the MySQL server gives Kill when it finds
// that the client of a running statement closed its connection.
var ErrClientGone = errClientGone

// processList is the engine's sessions, by connection id.
type processList struct {
	mu       sync.Mutex
	sessions map[uint32]*Session
	closing  bool
	running  int           // statements in flight
	idle     chan struct{} // closed when running drops to zero while closing
}

// procState is what others may read or change of a session while it runs:
// guarded by mu.
type procState struct {
	mu      sync.Mutex
	running bool
	since   time.Time // when the current statement, or the idle period, began
	info    string    // the running statement's text
	db      string
	// ctx is the statements' cancellable context (a child of parent),
	// nil once a cancellation consumed it.
	ctx    context.Context
	parent context.Context
	cancel context.CancelCauseFunc
	// closeConn, set by the server, closes the client's connection
	// (KILL CONNECTION).
	closeConn func()
}

func (e *Engine) register(s *Session) {
	e.procs.mu.Lock()
	if e.procs.sessions == nil {
		e.procs.sessions = map[uint32]*Session{}
	}
	e.procs.sessions[s.connID] = s
	e.procs.mu.Unlock()
	s.proc.since = time.Now()
}

func (e *Engine) unregister(s *Session) {
	e.procs.mu.Lock()
	delete(e.procs.sessions, s.connID)
	e.procs.mu.Unlock()
}

// SetConnCloser gives the session the function that closes its client's
// connection, for KILL CONNECTION.
func (s *Session) SetConnCloser(fn func()) {
	s.proc.mu.Lock()
	s.proc.closeConn = fn
	s.proc.mu.Unlock()
}

// ConnectionID is the session's id (CONNECTION_ID(), SHOW PROCESSLIST).
func (s *Session) ConnectionID() uint32 { return s.connID }

// RunningFor is how long the current statement has run; zero when the
// session is idle.
func (s *Session) RunningFor() time.Duration {
	s.proc.mu.Lock()
	defer s.proc.mu.Unlock()
	if !s.proc.running {
		return 0
	}
	return time.Since(s.proc.since)
}

// IdleFor is how long the session has waited for its client's next
// statement (0 while one runs).
func (s *Session) IdleFor() time.Duration {
	s.proc.mu.Lock()
	defer s.proc.mu.Unlock()
	if s.proc.running {
		return 0
	}
	return time.Since(s.proc.since)
}

// WaitTimeout is the session's wait_timeout: how long the server lets its
// connection sit idle before it closes it.
func (s *Session) WaitTimeout() time.Duration {
	return time.Duration(s.waitTimeout.Load()) * time.Second
}

// startStatement registers a statement of text as running and returns the
// context it must run under.
func (s *Session) startStatement(ctx context.Context, text string) (context.Context, error) {
	pl := &s.e.procs
	pl.mu.Lock()
	if pl.closing {
		pl.mu.Unlock()
		return nil, sqlerr.New(1053, "08S01", "Server shutdown in progress")
	}
	pl.running++
	pl.mu.Unlock()
	p := &s.proc
	p.mu.Lock()
	if p.ctx == nil || p.parent != ctx {
		p.ctx, p.cancel = context.WithCancelCause(ctx)
		p.parent = ctx
	}
	p.running, p.since, p.info, p.db = true, time.Now(), text, s.db
	sctx := p.ctx
	p.mu.Unlock()
	return sctx, nil
}

// endStatement marks the session idle and maps an error of a cancelled
// statement to its MySQL error.
func (s *Session) endStatement(ctx context.Context, err error) error {
	p := &s.proc
	p.mu.Lock()
	p.running, p.since, p.info, p.db = false, time.Now(), "", s.db
	p.mu.Unlock()
	pl := &s.e.procs
	pl.mu.Lock()
	pl.running--
	if pl.running == 0 && pl.idle != nil {
		close(pl.idle)
		pl.idle = nil
	}
	pl.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return interruptedError(context.Cause(ctx))
	}
	return err
}

// interruptedError is the error of a statement cancelled for cause.
func interruptedError(cause error) error {
	switch {
	case errors.Is(cause, errMaxExecTime):
		return sqlerr.New(3024, "HY000", "Query execution was interrupted, maximum statement execution time exceeded")
	case errors.Is(cause, errShutdown):
		return sqlerr.New(1053, "08S01", "Server shutdown in progress")
	}
	return sqlerr.New(sqlerr.ErQueryInterrupted, "70100", "Query execution was interrupted")
}

// Kill cancels the session's running statement, if any, for cause; the
// next statement gets a fresh context. It is safe to call from any
// goroutine.
func (s *Session) Kill(cause error) {
	p := &s.proc
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running && p.cancel != nil {
		p.cancel(cause)
		p.ctx = nil
	}
}

// killConnection cancels the session's statement and closes its client's
// connection; the server then closes the session.
func (s *Session) killConnection() {
	s.Kill(errKilled)
	s.proc.mu.Lock()
	closeConn := s.proc.closeConn
	s.proc.mu.Unlock()
	if closeConn != nil {
		closeConn()
	}
}

// withMaxExecutionTime bounds a SELECT by max_execution_time (ms; 0: no
// bound), as MySQL does for read-only SELECTs.
func (s *Session) withMaxExecutionTime(ctx context.Context, st ast.StmtNode) (context.Context, context.CancelFunc) {
	sel, ok := st.(*ast.SelectStmt)
	if !ok || (sel.LockInfo != nil && sel.LockInfo.LockType != ast.SelectLockNone) {
		return ctx, nil
	}
	ms := int64(0)
	for _, h := range sel.TableHints {
		if h.HintName.L == "max_execution_time" {
			if v, ok := h.HintData.(uint64); ok {
				ms = int64(v)
			}
		}
	}
	if ms == 0 {
		v, _ := s.GetVar("max_execution_time", true, "")
		ms, _ = v.ToInt64()
	}
	if ms <= 0 {
		return ctx, nil
	}
	return context.WithTimeoutCause(ctx, time.Duration(ms)*time.Millisecond, errMaxExecTime)
}

// runKill runs KILL [CONNECTION | QUERY] id.
func (s *Session) runKill(n *ast.KillStmt) (*Result, error) {
	s.e.procs.mu.Lock()
	target := s.e.procs.sessions[uint32(n.ConnectionID)]
	s.e.procs.mu.Unlock()
	if target == nil || uint64(uint32(n.ConnectionID)) != n.ConnectionID {
		return nil, sqlerr.New(1094, "HY000", "Unknown thread id: %d", n.ConnectionID)
	}
	if target.user != s.user && s.privs().Global&privilege.Super == 0 {
		return nil, sqlerr.New(1095, "HY000", "You are not owner of thread %d", n.ConnectionID)
	}
	if n.Query {
		target.Kill(errKilled)
		return &Result{}, nil
	}
	if target == s {
		// Killing one's own connection: the client gets the error of
		// this statement and then finds the connection closed.
		go s.killConnection()
		return nil, sqlerr.New(sqlerr.ErQueryInterrupted, "70100", "Query execution was interrupted")
	}
	target.killConnection()
	return &Result{}, nil
}

// Process is a row of SHOW PROCESSLIST / INFORMATION_SCHEMA.PROCESSLIST.
type Process struct {
	ID             uint32
	User, Host, DB string
	Command        string // Query or Sleep
	Time           int64  // seconds in the current state
	State, Info    string // the running statement
}

// Processes lists the engine's sessions, by id.
func (e *Engine) Processes() []Process {
	e.procs.mu.Lock()
	sessions := make([]*Session, 0, len(e.procs.sessions))
	for _, s := range e.procs.sessions {
		sessions = append(sessions, s)
	}
	e.procs.mu.Unlock()
	out := make([]Process, 0, len(sessions))
	now := time.Now()
	for _, s := range sessions {
		s.proc.mu.Lock()
		p := Process{ID: s.connID, User: s.user, Host: s.host, DB: s.proc.db, Command: "Sleep",
			Time: int64(now.Sub(s.proc.since) / time.Second)}
		if s.proc.running {
			p.Command, p.State, p.Info = "Query", "executing", s.proc.info
		}
		s.proc.mu.Unlock()
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// processRows renders Processes as SHOW PROCESSLIST rows; full keeps whole
// statement texts (SHOW FULL PROCESSLIST), otherwise the first 100
// characters.
func processRows(ps []Process, full bool) [][]types.Datum {
	rows := make([][]types.Datum, 0, len(ps))
	for _, p := range ps {
		info := types.Null
		if p.Info != "" {
			text := p.Info
			if !full && len(text) > 100 {
				text = text[:100]
			}
			info = types.NewString(text)
		}
		db := types.Null
		if p.DB != "" {
			db = types.NewString(p.DB)
		}
		rows = append(rows, []types.Datum{types.NewUint(uint64(p.ID)), types.NewString(p.User), types.NewString(p.Host),
			db, types.NewString(p.Command), types.NewInt(p.Time), types.NewString(p.State), info})
	}
	return rows
}

// shutdownStatements refuses new statements, cancels the running ones and
// waits for them (at most wait).
func (e *Engine) shutdownStatements(wait time.Duration) {
	pl := &e.procs
	pl.mu.Lock()
	pl.closing = true
	sessions := make([]*Session, 0, len(pl.sessions))
	for _, s := range pl.sessions {
		sessions = append(sessions, s)
	}
	var idle chan struct{}
	if pl.running > 0 {
		idle = make(chan struct{})
		pl.idle = idle
	}
	pl.mu.Unlock()
	for _, s := range sessions {
		s.Kill(errShutdown)
	}
	if idle != nil {
		select {
		case <-idle:
		case <-time.After(wait):
		}
	}
}

// processRows are INFORMATION_SCHEMA.PROCESSLIST's rows.
func (e *Engine) processRows() [][]types.Datum { return processRows(e.Processes(), true) }

// processColumns are SHOW PROCESSLIST's columns.
func processColumns() []*Column {
	cols := textColumns("Id", "User", "Host", "db", "Command", "Time", "State", "Info")
	for _, i := range []int{0, 5} {
		ft := ptypes.NewFieldType(mysql.TypeLonglong)
		ft.SetFlen(21)
		cols[i].Type = ft
	}
	return cols
}
