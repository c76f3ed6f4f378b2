package server

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/dolthub/vitess/go/mysql"

	"github.com/strata-db/strata/internal/audit"
	strsql "github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/types"
)

// ServerVersion is the version string sent in the handshake; it is the SQL
// layer's, so that @@version and the handshake agree. The "8.0.11" prefix
// makes drivers enable MySQL 8 behaviour.
const ServerVersion = strsql.ServerVersion

// DefaultMaxAllowedPacket is max_allowed_packet's default (MySQL 8's).
const DefaultMaxAllowedPacket = 64 << 20

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on, e.g. "127.0.0.1:4000". Port 0
	// picks a free port (see Server.Addr).
	Addr string
	// Listener, when set, is used instead of listening on Addr (a node
	// binds its ports before it joins a cluster).
	Listener net.Listener
	// AllowEmptyRootPassword lets root log in with an empty password from
	// a loopback address when RootPassword is empty. Node assembly sets it
	// for the default single-node setup; without it and without a
	// RootPassword nobody can log in.
	AllowEmptyRootPassword bool
	// RootPassword is root's password for a server without an engine
	// (tests); with an engine, accounts are the cluster's (the node sets
	// root's password in them).
	RootPassword string
	// TLS, when set, is offered to clients (they opt in, as with MySQL's
	// --ssl-mode=PREFERRED); with ClientCAs set, client certificates are
	// verified for REQUIRE X509.
	TLS *tls.Config
	// RequireSecureTransport refuses logins over plaintext TCP
	// (require_secure_transport).
	RequireSecureTransport bool
	// RSAKey is the key caching_sha2_password clients encrypt their
	// password with over plaintext; nil generates one.
	RSAKey *rsa.PrivateKey
	// Audit, when set, records every login, successful or not.
	Audit *audit.Logger
	// LoginFailureDelay is the step of the delay of repeated failed logins
	// (package loginguard); 0 disables it.
	LoginFailureDelay time.Duration
	// MaxConnections bounds concurrently served connections; further
	// clients wait up to ConnWaitTimeout, then are refused. 0 is unlimited.
	MaxConnections int
	// ConnWaitTimeout is how long a client beyond MaxConnections waits
	// (default 10s).
	ConnWaitTimeout time.Duration
	// HandshakeTimeout bounds the time from connect to authenticated
	// (default 10s, MySQL's connect_timeout); a client that stalls in the
	// handshake is disconnected. Authenticated connections have no idle
	// limit.
	HandshakeTimeout time.Duration
	// MaxAllowedPacket bounds a client's command, in bytes (MySQL's
	// max_allowed_packet, default 64 MiB): a larger one gets error 1153
	// and its connection is closed before the command is read into
	// memory.
	MaxAllowedPacket int
	// Logger receives connection-level events (panics, aborted
	// handshakes). Defaults to slog.Default().
	Logger *slog.Logger
}

// session is what the server needs from a SQL session. *sql.Session
// implements it; tests substitute their own.
type session interface {
	Execute(ctx context.Context, query string) ([]*strsql.Result, error)
	Prepare(ctx context.Context, query string) (*strsql.PreparedStmt, error)
	ExecutePrepared(ctx context.Context, id uint32, params []types.Datum) (*strsql.Result, error)
	ClosePrepared(id uint32)
	CurrentDB() string
	UseDB(name string) error
	InTxn() bool
	AutoCommit() bool
	WarningCount() uint16
	Close()
}

// sessionFactory opens a session for an authenticated user.
// sessionFactory opens the session of a client connection; connID is
// the id the handshake gave the client, which the session reports
// (CONNECTION_ID(), SHOW PROCESSLIST) and KILL takes.
type sessionFactory func(user, host string, connID uint32) session

// Server serves the MySQL protocol on one listener.
type Server struct {
	listener *mysql.Listener
	handler  *handler
	log      *slog.Logger

	closeOnce sync.Once
	closed    chan struct{}
}

// New listens on cfg.Addr and returns a server whose connections run on
// sessions of engine. Call Serve to accept connections.
func New(cfg Config, engine *strsql.Engine) (*Server, error) {
	if engine == nil {
		return nil, errors.New("server: nil engine")
	}
	return newServer(cfg, func(user, host string, connID uint32) session {
		return engine.NewClientSession(user, host, connID)
	}, engine.Privileges)
}

func newServer(cfg Config, open sessionFactory, snapshot func() *privilege.Snapshot) (*Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "mysql")
	routeVitessLog(logger)
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("server: listen on %s: %w", cfg.Addr, err)
		}
	}
	if snapshot == nil {
		snapshot = staticAccounts(cfg)
	}
	auth, err := newAccounts(cfg, snapshot, logger)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	h := newHandler(open, logger)
	waitTimeout := cfg.ConnWaitTimeout
	if waitTimeout <= 0 {
		waitTimeout = 10 * time.Second
	}
	handshakeTimeout := cfg.HandshakeTimeout
	if handshakeTimeout <= 0 {
		handshakeTimeout = 10 * time.Second
	}
	maxPacket := cfg.MaxAllowedPacket
	if maxPacket <= 0 {
		maxPacket = DefaultMaxAllowedPacket
	}
	var maxConns uint64
	var maxWait uint32
	if cfg.MaxConnections > 0 {
		maxConns = uint64(cfg.MaxConnections)
		maxWait = uint32(cfg.MaxConnections)
	}
	l, err := mysql.NewListenerWithConfig(mysql.ListenerConfig{
		Listener:            clientListener{Listener: ln, log: logger, handshakeTimeout: handshakeTimeout, maxPacket: maxPacket, tls: cfg.TLS},
		AuthServer:          auth,
		Handler:             h,
		ConnReadBufferSize:  mysql.DefaultConnBufferSize,
		MaxConns:            maxConns,
		MaxWaitConns:        maxWait,
		MaxWaitConnsTimeout: waitTimeout,
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	l.ServerVersion = ServerVersion
	srv := &Server{listener: l, handler: h, log: logger, closed: make(chan struct{})}
	go h.watchClients(srv.closed)
	return srv, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// Serve accepts and serves connections until Close is called, then
// returns nil.
func (s *Server) Serve() error {
	s.log.Info("serving MySQL protocol", "addr", s.Addr().String())
	s.listener.Accept()
	select {
	case <-s.closed:
		return nil
	default:
		return errors.New("server: listener stopped unexpectedly")
	}
}

// Close stops accepting connections and closes the open ones; their
// sessions are closed, which rolls back open transactions.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.listener.Close()
		s.handler.closeAll()
	})
	return nil
}
