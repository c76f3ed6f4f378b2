package resp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/audit"
	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/loginguard"
	"github.com/strata-db/strata/internal/pace"
)

// Config configures the Redis gateway.
type Config struct {
	// Addr is the listen address (host:port).
	Addr string
	// Listener, when set, is used instead of listening on Addr (a node
	// binds its ports before it joins a cluster).
	Listener net.Listener
	// Password, when set, is the default user's password (unless ACL
	// SETUSER default stored another): it must be given with AUTH (or
	// HELLO ... AUTH) before any other command.
	Password string
	// TLS, when set, is offered on the same port: a connection whose first
	// byte opens a TLS handshake is served over TLS, any other in
	// plaintext unless RequireTLS.
	TLS        *tls.Config
	RequireTLS bool
	// Audit, when set, records logins (AUTH, HELLO AUTH) and ACL changes.
	Audit *audit.Logger
	// LoginFailureDelay is the step of the delay of repeated failed AUTHs
	// of a user from one address (package loginguard); 0 disables it.
	LoginFailureDelay time.Duration
	// MaxValueSize bounds a request argument and any value a command
	// writes. Default 64 MiB.
	MaxValueSize int
	// ReapInterval is how often expired keys are reclaimed while some
	// are due; it doubles, up to reapIdleInterval, while none is. Default
	// 100ms.
	ReapInterval time.Duration
	// CommandTimeout bounds one command (or EXEC), retries included.
	// Default 20s.
	CommandTimeout time.Duration
	Logger         *slog.Logger
	// BatchesInFlight is how many shared write batches (batch.go) may
	// execute at once. Default 1.
	BatchesInFlight int
	// Now is the clock TTLs are measured with (tests move it by hand).
	// Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxValueSize <= 0 {
		c.MaxValueSize = 64 << 20
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = 100 * time.Millisecond
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.BatchesInFlight <= 0 {
		c.BatchesInFlight = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Server is the Redis-protocol gateway of one node.
type Server struct {
	cfg     Config
	store   kv.Storage
	ln      net.Listener
	started time.Time

	nextClientID atomic.Int64
	mu           sync.Mutex
	sessions     map[*session]struct{}
	closed       bool

	cursors cursorTable
	// acl is the users as last loaded (acl_store.go); auth caches the
	// passwords that proved right.
	acl     atomic.Pointer[aclSnapshot]
	aclPace *pace.Pace
	auth    *authCache
	aclLog  aclLog // recent refusals (ACL LOG)
	guard   *loginguard.Guard
	// latest is store when it can read a key's newest committed value
	// outside a transaction; GET then needs no timestamp.
	latest LatestGetter
	batch  batcher
	stats  serverStats

	stop chan struct{}
	// ctx is cancelled by Close: every command and background round
	// derives its context from it, so a shutdown does not wait out a
	// request to a cluster that is going away with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type serverStats struct {
	connections atomic.Int64 // total accepted
	commands    atomic.Int64
	expired     atomic.Int64
	retries     atomic.Int64
}

// New listens on cfg.Addr. Serve must be called to accept clients.
func New(cfg Config, store kv.Storage) (*Server, error) {
	cfg = cfg.withDefaults()
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, store: store, ln: ln, started: time.Now(),
		sessions: map[*session]struct{}{}, stop: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.latest, _ = store.(LatestGetter)
	s.cursors.init()
	s.auth = newAuthCache()
	s.guard = loginguard.New(cfg.LoginFailureDelay, "redis")
	s.acl.Store(s.buildACLSnapshot(-1, nil))
	s.aclPace = pace.New(aclPoll, aclIdlePoll, aclHold)
	ctx, cancel := context.WithTimeout(s.ctx, cfg.CommandTimeout)
	_, err := s.loadACL(ctx)
	cancel()
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("resp: load ACL users: %w", err)
	}
	s.batch = batcher{srv: s, jobs: make(chan *job, maxBatch)}
	s.wg.Add(3)
	go s.reapLoop()
	go s.batch.loop()
	go s.aclLoop()
	return s, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve accepts clients until Close.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		sess := s.newSession(c)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.sessions[sess] = struct{}{}
		s.mu.Unlock()
		s.stats.connections.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if sess.start() {
				sess.serve()
			}
			s.mu.Lock()
			delete(s.sessions, sess)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection (commands in flight
// finish or fail first) and stops the reaper.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for sess := range s.sessions {
		sess.raw.Close()
	}
	s.mu.Unlock()
	close(s.stop)
	s.cancel()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// session is one client connection and its state.
type session struct {
	srv *Server
	// raw is the accepted connection, conn the one commands are read from
	// (raw, or TLS over it).
	raw     net.Conn
	conn    net.Conn
	r       *Reader
	w       *Writer
	id      int64
	created time.Time
	lastCmd string

	name    string
	authed  bool
	closing bool
	// user is the ACL user the connection is authenticated as (nil before
	// AUTH), compiled at ACL version aclVer; uname is its name for CLIENT
	// LIST on other connections.
	user   *aclCompiled
	aclVer int64
	uname  atomic.Pointer[string]

	// MULTI: queued commands (copied out of the reader's buffer) and
	// whether one of them was refused while queueing.
	inMulti  bool
	queued   []*call // w and ks are set when EXEC runs them
	queueErr bool
	watched  []watchedKey

	// attempt captures the replies of one transaction attempt; they reach
	// the client only if it commits.
	attempt  bytes.Buffer
	attemptW *Writer
	// pending are this connection's write commands queued in the batcher,
	// replies not yet written.
	pending []*job
}

func (s *Server) newSession(c net.Conn) *session {
	sess := &session{
		srv:     s,
		raw:     c,
		conn:    c,
		id:      s.nextClientID.Add(1),
		created: time.Now(),
	}
	sess.attemptW = NewWriter(&sess.attempt)
	return sess
}

// start sets the connection up: TLS if the client opens with a TLS
// handshake, then the default user if it needs no password. It reports
// whether to serve the connection.
func (sess *session) start() bool {
	if tlsCfg := sess.srv.cfg.TLS; tlsCfg != nil {
		var first [1]byte
		if _, err := io.ReadFull(sess.raw, first[:]); err != nil {
			sess.raw.Close()
			return false
		}
		pc := &prefixConn{Conn: sess.raw, prefix: first[:]}
		if first[0] == 0x16 { // a TLS handshake record
			tc := tls.Server(pc, tlsCfg)
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				sess.srv.cfg.Logger.Debug("resp: TLS handshake", "client", sess.raw.RemoteAddr().String(), "err", err)
				sess.raw.Close()
				return false
			}
			tc.SetDeadline(time.Time{})
			sess.conn = tc
		} else {
			if sess.srv.cfg.RequireTLS {
				io.WriteString(sess.raw, "-ERR connections without TLS are refused (--require-secure-transport)\r\n")
				sess.raw.Close()
				return false
			}
			sess.conn = pc
		}
	}
	sess.r = NewReader(sess.conn, sess.srv.cfg.MaxValueSize)
	sess.w = NewWriter(sess.conn)
	sess.initialUser()
	return true
}

// prefixConn is a connection whose first bytes were already read.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (sess *session) serve() {
	defer sess.conn.Close()
	for {
		args, err := sess.r.ReadCommand()
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				sess.w.WriteError("ERR " + pe.Msg)
				sess.w.Flush()
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				sess.srv.cfg.Logger.Debug("resp: read", "client", sess.id, "err", err)
			}
			return
		}
		sess.dispatch(args)
		if sess.closing || sess.r.Buffered() == 0 || sess.w.Buffered() > 64<<10 {
			sess.drain()
			if err := sess.w.Flush(); err != nil {
				return
			}
		}
		if sess.closing {
			return
		}
	}
}

// dispatch runs one command and writes its reply.
func (sess *session) dispatch(args [][]byte) {
	sess.srv.stats.commands.Add(1)
	metricCommands.Inc()
	cmd := lookupCommand(args[0])
	// Writes go to the shared batch; so do reads of named keys while this
	// connection has writes queued there (a pipeline mixing GET and SET),
	// which keeps its replies in order without waiting for each write.
	batched := cmd != nil && cmd.flags&flagData != 0 && !sess.inMulti && sess.authed && cmd.arityOK(len(args)) &&
		(cmd.flags&flagWrite != 0 || (len(sess.pending) > 0 && cmd.firstKey != 0))
	if len(sess.pending) > 0 && !batched {
		sess.drain()
	}
	if cmd == nil {
		if sess.inMulti {
			sess.queueErr = true
		}
		sess.w.WriteError(string(errUnknownCommand(args)))
		return
	}
	sess.lastCmd = cmd.name
	if !cmd.arityOK(len(args)) {
		if sess.inMulti && cmd.name == "exec" {
			// Redis discards the transaction when EXEC itself is refused.
			sess.endMulti()
			sess.w.WriteError("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(string(errArity(cmd.name)), "ERR "))
			return
		}
		if sess.inMulti {
			sess.queueErr = true
		}
		sess.w.WriteError(string(errArity(cmd.name)))
		return
	}
	if !sess.authed && cmd.flags&flagNoAuth == 0 {
		if sess.inMulti {
			sess.queueErr = true
		}
		sess.w.WriteError(string(errNoAuth))
		return
	}
	if cmd.flags&flagNoAuth == 0 {
		if snap := sess.srv.acl.Load(); snap.version != sess.aclVer && !sess.refreshUser(snap) {
			return // its user was deleted: the connection closes
		}
		if u := sess.user; u != nil && !(u.allCommands && u.allKeys) {
			if d := u.check(cmd, args); d != nil {
				sess.drain()
				if sess.inMulti {
					sess.queueErr = true
				}
				metricACLDenied.Inc()
				sess.logDenial(d, sess.inMulti)
				writeError(sess.w, d.err())
				return
			}
		}
	}
	if sess.inMulti && cmd.flags&flagNoQueue == 0 {
		sess.queued = append(sess.queued, &call{sess: sess, cmd: cmd, args: copyArgs(args)})
		sess.w.WriteSimple("QUEUED")
		return
	}
	if cmd.flags&flagLatest != 0 && sess.srv.latest != nil && !batched {
		sess.getLatest(args[1])
		return
	}
	if cmd.flags&flagData == 0 {
		x := &call{sess: sess, w: sess.w, args: args, cmd: cmd}
		if err := cmd.run(x); err != nil {
			sess.writeErr(sess.w, err)
		}
		return
	}
	if batched {
		args = copyArgs(args) // the reader's buffer moves on while the batch runs
		sess.runBatched(cmd.keys(args), false, func(ks *keyspace, w *Writer) error {
			return cmd.run(&call{sess: sess, ks: ks, w: w, args: args, cmd: cmd})
		})
		return
	}
	sess.runTxn(func(ks *keyspace, w *Writer) (bool, error) {
		x := &call{sess: sess, ks: ks, w: w, args: args, cmd: cmd}
		err := cmd.run(x)
		return err == nil, err
	})
}

func copyArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return out
}

// writeErr writes err as an error reply.
func (sess *session) writeErr(w *Writer, err error) { writeError(w, err) }

// writeError writes err as an error reply: Redis errors as they are,
// others prefixed with ERR.
func writeError(w *Writer, err error) {
	if re, ok := asReplyError(err); ok {
		w.WriteError(string(re))
		return
	}
	w.WriteError("ERR " + strings.ReplaceAll(err.Error(), "\n", " "))
}

// runBatched queues fn for the node's shared write batch (batch.go). Its
// reply is written by drain, so consecutive pipelined writes of one
// connection join batches without waiting for each other; any other
// command drains them first, which keeps replies in order and lets a read
// see the connection's earlier writes.
func (sess *session) runBatched(keys [][]byte, barrier bool, fn func(ks *keyspace, w *Writer) error) {
	j := newJob(sess, keys, barrier, fn)
	if err := sess.srv.batch.enqueue(j); err != nil {
		sess.drain()
		writeError(sess.w, err)
		return
	}
	sess.pending = append(sess.pending, j)
	if len(sess.pending) >= maxBatch {
		sess.drain()
	}
}

// drain waits for the connection's queued write commands and writes their
// replies in order.
func (sess *session) drain() {
	for i, j := range sess.pending {
		select {
		case <-j.done:
		case <-sess.srv.stop:
			<-j.done
		}
		sess.w.WriteRaw(j.buf.Bytes())
		sess.pending[i] = nil
	}
	sess.pending = sess.pending[:0]
}

// runTxn runs fn in a transaction and writes its replies. fn writes its
// replies to w and returns whether to commit; a replyError from fn is the
// reply (nothing is committed). A retryable failure (a write conflict with
// a concurrent command) runs fn again on a new snapshot: the client saw
// nothing of the failed attempt, so this is the same command, not a blind
// replay of a transaction whose reads it depended on.
func (sess *session) runTxn(fn func(ks *keyspace, w *Writer) (commit bool, err error)) {
	ctx, cancel := context.WithTimeout(sess.srv.ctx, sess.srv.cfg.CommandTimeout)
	defer cancel()
	w := sess.attemptW
	w.SetProto(sess.w.Proto())
	err := sess.srv.retry(ctx, func() error {
		sess.attempt.Reset()
		w.Reset(&sess.attempt)
		return sess.srv.attempt(ctx, func(ks *keyspace) (bool, error) { return fn(ks, w) })
	})
	if err != nil {
		sess.writeErr(sess.w, err)
		return
	}
	w.Flush()
	sess.w.WriteRaw(sess.attempt.Bytes())
}

// update runs fn in a transaction that commits what fn wrote, retrying on
// write conflicts like a command.
func (s *Server) update(ctx context.Context, fn func(ks *keyspace) error) error {
	return s.retry(ctx, func() error {
		return s.attempt(ctx, func(ks *keyspace) (bool, error) { return true, fn(ks) })
	})
}

// retry runs attempt until it succeeds, fails with a non-retryable error
// or ctx ends. Only whole attempts are retried, each on a fresh snapshot.
func (s *Server) retry(ctx context.Context, attempt func() error) error {
	backoff := time.Millisecond
	for {
		err := attempt()
		if err == nil || !kv.IsRetryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("gave up after %v of write conflicts: %w", s.cfg.CommandTimeout, err)
		}
		s.stats.retries.Add(1)
		metricRetries.Inc()
		d := backoff/2 + rand.N(backoff)
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		if backoff < 100*time.Millisecond {
			backoff *= 2
		}
	}
}

// attempt runs fn once in a new transaction and commits if fn asks to and
// wrote something.
func (s *Server) attempt(ctx context.Context, fn func(ks *keyspace) (bool, error)) error {
	txn, err := s.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	ks := &keyspace{ctx: ctx, txn: txn, now: s.cfg.Now().UnixMilli(), maxValue: s.cfg.MaxValueSize}
	commit, err := fn(ks)
	if err != nil || !commit || !ks.wrote {
		txn.Rollback(ctx)
		return err
	}
	return txn.Commit(ctx)
}

// LatestGetter reads a key's newest committed value without a transaction
// or a timestamp, linearizably for that one key (client.Client.GetLatest).
type LatestGetter interface {
	GetLatest(ctx context.Context, key []byte) ([]byte, error)
}

// getLatest serves GET from the newest committed value: a single-key read
// needs no snapshot, so it takes no timestamp from the TSO (in a cluster,
// a round trip to PD) and the region leader answers from applied state.
func (sess *session) getLatest(k []byte) {
	ctx, cancel := context.WithTimeout(sess.srv.ctx, sess.srv.cfg.CommandTimeout)
	defer cancel()
	b, err := sess.srv.latest.GetLatest(ctx, MetaKey(k))
	if errors.Is(err, kv.ErrNotFound) {
		sess.w.WriteNull()
		return
	}
	if err != nil {
		writeError(sess.w, err)
		return
	}
	m, err := decodeMeta(b)
	if err != nil {
		writeError(sess.w, err)
		return
	}
	writeGet(sess.w, m, !m.expired(sess.srv.cfg.Now().UnixMilli()))
}

// call is one command invocation as its handler sees it.
type call struct {
	sess *session
	cmd  *command
	ks   *keyspace // nil for commands without flagData
	w    *Writer
	args [][]byte
}
