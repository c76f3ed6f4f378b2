package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/dolthub/vitess/go/mysql"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"

	"github.com/strata-db/strata/internal/audit"
	"github.com/strata-db/strata/internal/loginguard"
	"github.com/strata-db/strata/internal/sql/privilege"
)

// rootUser is the account a new cluster starts with.
const rootUser = "root"

// accounts authenticates clients against the cluster's accounts
// (package privilege) with the account's plugin:
//
//   - caching_sha2_password (MySQL 8's default). The client sends
//     XOR(SHA256(pw), SHA256(SHA256(SHA256(pw)), salt)). The fast path
//     checks it against SHA256(SHA256(pw)) kept in memory after an earlier
//     full authentication of the same password; the stored hash is salted
//     PBKDF2, which a scramble cannot be checked against, so a miss asks
//     for the full path: the password itself, in the clear over TLS, or
//     RSA-OAEP encrypted with the server's public key (sent on request)
//     over plaintext. The password is then checked against the stored
//     hash and the fast-path entry made.
//   - mysql_native_password: the client's SHA1 scramble is checked
//     against the stored SHA1(SHA1(pw)).
//
// A client that asks for the other plugin than its account's is switched
// to the account's by the protocol library. An account without a password
// accepts an empty answer under either plugin, but root without a password
// only from a loopback address (and only when allowEmptyRoot is set).
//
// Then the account's own rules apply: ACCOUNT LOCK, REQUIRE SSL / X509,
// require_secure_transport, and FAILED_LOGIN_ATTEMPTS with
// PASSWORD_LOCK_TIME, counted per account on this node. Every failure is
// counted in strata_mysql_login_failures_total and logged, and after
// loginguard.Threshold consecutive failures of a user from one address
// every further attempt of that pair is delayed (Config.LoginFailureDelay).
type accounts struct {
	snapshot       func() *privilege.Snapshot
	allowEmptyRoot bool
	requireSecure  bool
	key            *rsa.PrivateKey
	pubPEM         []byte
	log            *slog.Logger
	audit          *audit.Logger
	guard          *loginguard.Guard
	now            func() time.Time

	mu       sync.Mutex
	fast     map[privilege.Identity]fastEntry
	failures map[privilege.Identity]*failState
}

// fastEntry is a caching_sha2_password fast-path digest, valid while the
// account's stored hash is auth.
type fastEntry struct {
	auth   string
	digest []byte
}

// failState counts an account's consecutive failed logins. It belongs to
// the account as it was (fingerprint); an ALTER USER that changes the
// password or the lock options starts it afresh.
type failState struct {
	fingerprint string
	count       int64
	lockedUntil time.Time // zero: not locked
	forever     bool
}

func newAccounts(cfg Config, snapshot func() *privilege.Snapshot, log *slog.Logger) (*accounts, error) {
	a := &accounts{snapshot: snapshot, allowEmptyRoot: cfg.AllowEmptyRootPassword, requireSecure: cfg.RequireSecureTransport,
		log: log, audit: cfg.Audit, guard: loginguard.New(cfg.LoginFailureDelay, "mysql"), now: time.Now, fast: map[privilege.Identity]fastEntry{}, failures: map[privilege.Identity]*failState{}}
	a.key = cfg.RSAKey
	if a.key == nil {
		rsaOnce.Do(func() { rsaKey, rsaErr = rsa.GenerateKey(rand.Reader, 2048) })
		if rsaErr != nil {
			return nil, rsaErr
		}
		a.key = rsaKey
	}
	der, err := x509.MarshalPKIXPublicKey(&a.key.PublicKey)
	if err != nil {
		return nil, err
	}
	a.pubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return a, nil
}

// The process's caching_sha2_password RSA key, made on first use: clients
// fetch the public key on each connection that needs it, so it need not
// outlive the process.
var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
	rsaErr  error
)

// staticAccounts is the account list of a server without an engine
// (tests): root with every privilege and cfg.RootPassword.
func staticAccounts(cfg Config) func() *privilege.Snapshot {
	root := privilege.Root()
	if cfg.RootPassword != "" {
		h, err := privilege.Hash(privilege.PluginSHA2, cfg.RootPassword)
		if err != nil {
			panic(err)
		}
		root.Auth = h
	}
	snap := privilege.NewSnapshot(1, []*privilege.Account{root})
	return func() *privilege.Snapshot { return snap }
}

// AuthMethods implements mysql.AuthServer.
func (a *accounts) AuthMethods() []mysql.AuthMethod {
	return []mysql.AuthMethod{&sha2Method{a}, &nativeMethod{a}}
}

// DefaultAuthMethodDescription implements mysql.AuthServer: MySQL 8's.
func (a *accounts) DefaultAuthMethodDescription() mysql.AuthMethodDescription {
	return mysql.CachingSha2Password
}

// account is the account a login of user from addr uses, or nil.
func (a *accounts) account(user string, addr net.Addr) *privilege.Account {
	return a.snapshot().Match(user, hostOf(addr), isLoopback(addr))
}

// handles says whether a plugin may authenticate user: the account's own
// plugin, or either for an account without a password. Logins with no
// account are handled by mysql_native_password, to fail there.
func (a *accounts) handles(plugin, user string, addr net.Addr) bool {
	acct := a.account(user, addr)
	if acct == nil {
		return plugin == privilege.PluginNative
	}
	return acct.Auth == "" || acct.Plugin == plugin || (acct.Plugin == "" && plugin == privilege.PluginSHA2)
}

// authenticatedUser is what the protocol library keeps as Conn.UserData.
type authenticatedUser struct {
	name         string
	usedPassword bool
}

func (u authenticatedUser) Get() *querypb.VTGateCallerID {
	return &querypb.VTGateCallerID{Username: u.name}
}

// finish applies the account rules to a login whose password check gave
// ok, counts and logs a failure, and returns the library's answer.
func (a *accounts) finish(c *mysql.Conn, acct *privilege.Account, user string, ok, usedPassword bool) (mysql.Getter, error) {
	addr := c.RemoteAddr()
	host := hostOf(addr)
	deny := func(reason string, err error) (mysql.Getter, error) {
		metricLoginFailures.WithLabelValues(reason).Inc()
		a.log.Warn("login failed", "user", user, "host", host, "reason", reason)
		if reason == "wrong_password" || reason == "unknown_user" {
			a.guard.Failed(user, host)
		}
		code := 0
		if se, ok := err.(*mysql.SQLError); ok {
			code = se.Num
		}
		a.audit.Log(audit.Event{Event: "login", Protocol: "mysql", User: user, Host: host, ConnID: uint64(c.ConnectionID),
			Outcome: "failure", ErrorCode: code, Reason: reason})
		return nil, err
	}
	accessDenied := func() error {
		using := "NO"
		if usedPassword {
			using = "YES"
		}
		return mysql.NewSQLError(mysql.ERAccessDeniedError, mysql.SSAccessDeniedError,
			"Access denied for user '%s'@'%s' (using password: %s)", user, host, using)
	}
	if acct == nil {
		return deny("unknown_user", accessDenied())
	}
	if acct.Locked {
		return deny("account_locked", mysql.NewSQLError(3118, mysql.SSAccessDeniedError,
			"Access denied for user '%s'@'%s'. Account is locked.", user, host))
	}
	if err := a.lockedOut(acct, user, host); err != nil {
		return deny("blocked_after_failures", err)
	}
	if ok && acct.Auth == "" && acct.User == rootUser && (!a.allowEmptyRoot || !isLoopback(addr)) {
		ok = false
	}
	if !ok {
		a.recordFailure(acct)
		return deny("wrong_password", accessDenied())
	}
	cc, _ := c.Conn.(*clientConn)
	secure := cc != nil && cc.TLSState() != nil || isUnix(addr)
	if (a.requireSecure || acct.RequireSSL) && !secure {
		if a.requireSecure {
			return deny("insecure_transport", mysql.NewSQLError(3159, "HY000",
				"Connections using insecure transport are prohibited while --require_secure_transport=ON."))
		}
		return deny("ssl_required", accessDenied())
	}
	if acct.RequireX509 && (cc == nil || cc.TLSState() == nil || len(cc.TLSState().VerifiedChains) == 0) {
		return deny("x509_required", accessDenied())
	}
	a.mu.Lock()
	delete(a.failures, acct.Identity)
	a.mu.Unlock()
	metricLogins.Inc()
	a.guard.Succeeded(user, host)
	a.audit.Log(audit.Event{Event: "login", Protocol: "mysql", User: user, Host: host, ConnID: uint64(c.ConnectionID), Outcome: "success"})
	return authenticatedUser{name: user, usedPassword: usedPassword}, nil
}

func fingerprint(acct *privilege.Account) string {
	return fmt.Sprintf("%s|%d|%d|%d", acct.Auth, acct.FailedLoginAttempts, acct.PasswordLockDays, acct.Unlocks)
}

// lockedOut reports the 3955 error of an account blocked by
// FAILED_LOGIN_ATTEMPTS.
func (a *accounts) lockedOut(acct *privilege.Account, user, host string) error {
	if acct.FailedLoginAttempts <= 0 || acct.PasswordLockDays == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.failures[acct.Identity]
	if st == nil || st.fingerprint != fingerprint(acct) {
		return nil
	}
	if !st.forever && (st.lockedUntil.IsZero() || a.now().After(st.lockedUntil)) {
		if !st.lockedUntil.IsZero() {
			delete(a.failures, acct.Identity) // the lock expired
		}
		return nil
	}
	days, remaining := "unlimited", "unlimited"
	if !st.forever {
		days = fmt.Sprint(acct.PasswordLockDays)
		remaining = fmt.Sprint(int64(st.lockedUntil.Sub(a.now()).Hours()/24) + 1)
	}
	return mysql.NewSQLError(3955, mysql.SSAccessDeniedError,
		"Access denied for user '%s'@'%s'. Account is blocked for %s day(s) (%s day(s) remaining) due to %d consecutive failed logins.",
		user, host, days, remaining, st.count)
}

func (a *accounts) recordFailure(acct *privilege.Account) {
	if acct.FailedLoginAttempts <= 0 || acct.PasswordLockDays == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fp := fingerprint(acct)
	st := a.failures[acct.Identity]
	if st == nil || st.fingerprint != fp {
		st = &failState{fingerprint: fp}
		a.failures[acct.Identity] = st
	}
	st.count++
	if st.count >= acct.FailedLoginAttempts {
		if acct.PasswordLockDays < 0 {
			st.forever = true
		} else {
			st.lockedUntil = a.now().Add(time.Duration(acct.PasswordLockDays) * 24 * time.Hour)
		}
	}
}

var contextBackground = context.Background()

// emptyAnswer reports whether a client's auth data says "no password".
func emptyAnswer(b []byte) bool { return len(b) == 0 || (len(b) == 1 && b[0] == 0) }

type nativeMethod struct{ a *accounts }

func (m *nativeMethod) Name() mysql.AuthMethodDescription { return mysql.MysqlNativePassword }
func (m *nativeMethod) HandleUser(c *mysql.Conn, user string) bool {
	return m.a.handles(privilege.PluginNative, user, c.RemoteAddr())
}
func (m *nativeMethod) AllowClearTextWithoutTLS() bool { return true }
func (m *nativeMethod) AuthPluginData() ([]byte, error) {
	salt, err := mysql.NewSalt()
	return append(salt, 0), err
}

func (m *nativeMethod) HandleAuthPluginData(c *mysql.Conn, user string, serverData, clientData []byte, addr net.Addr) (mysql.Getter, error) {
	salt := serverData[:len(serverData)-1]
	m.a.guard.Wait(user, hostOf(addr))
	acct := m.a.account(user, addr)
	used := !emptyAnswer(clientData)
	ok := false
	if acct != nil {
		if acct.Auth == "" {
			ok = !used
		} else if acct.Plugin == privilege.PluginNative && used {
			if stage2, err := privilege.NativeStage2(acct.Auth); err == nil {
				ok = mysql.VerifyHashedMysqlNativePassword(clientData, salt, stage2)
			}
		}
	}
	return m.a.finish(c, acct, user, ok, used)
}

type sha2Method struct{ a *accounts }

// The caching_sha2_password protocol's bytes.
const (
	authMoreData    = 0x01
	requestPubKey   = 0x02
	fastAuthSuccess = 0x03
	performFullAuth = 0x04
)

func (m *sha2Method) Name() mysql.AuthMethodDescription { return mysql.CachingSha2Password }
func (m *sha2Method) HandleUser(c *mysql.Conn, user string) bool {
	return m.a.handles(privilege.PluginSHA2, user, c.RemoteAddr())
}
func (m *sha2Method) AllowClearTextWithoutTLS() bool { return true }
func (m *sha2Method) AuthPluginData() ([]byte, error) {
	salt, err := mysql.NewSalt()
	return append(salt, 0), err
}

func (m *sha2Method) HandleAuthPluginData(c *mysql.Conn, user string, serverData, clientData []byte, addr net.Addr) (mysql.Getter, error) {
	salt := serverData[:len(serverData)-1]
	a := m.a
	// Before any costly work (RSA, PBKDF2): a client guessing passwords
	// waits here instead of spending the server's CPU (loginguard).
	a.guard.Wait(user, hostOf(addr))
	acct := a.account(user, addr)
	if emptyAnswer(clientData) {
		return a.finish(c, acct, user, acct != nil && acct.Auth == "", false)
	}
	if acct == nil || acct.Auth == "" {
		return a.finish(c, acct, user, false, true)
	}
	cc, _ := c.Conn.(*clientConn)
	if cc == nil {
		return a.finish(c, acct, user, false, true)
	}
	a.mu.Lock()
	entry, cached := a.fast[acct.Identity]
	a.mu.Unlock()
	if cached && entry.auth == acct.Auth {
		ok := mysql.VerifyHashedCachingSha2Password(clientData, salt, entry.digest)
		if ok {
			if err := cc.writeAuthPacket([]byte{authMoreData, fastAuthSuccess}); err != nil {
				return nil, err
			}
		}
		return a.finish(c, acct, user, ok, true)
	}
	// Full authentication: the client sends the password itself.
	if err := cc.writeAuthPacket([]byte{authMoreData, performFullAuth}); err != nil {
		return nil, err
	}
	password, err := m.readPassword(c, cc, salt)
	if err != nil {
		return nil, err
	}
	ok := privilege.VerifyPassword(acct, password)
	if ok {
		a.mu.Lock()
		a.fast[acct.Identity] = fastEntry{auth: acct.Auth, digest: privilege.FastDigest(password)}
		a.mu.Unlock()
	}
	return a.finish(c, acct, user, ok, true)
}

// readPassword reads the password of a full authentication: in the clear
// over TLS; over plaintext RSA-encrypted, sending the public key first
// when the client asks for it.
func (m *sha2Method) readPassword(c *mysql.Conn, cc *clientConn, salt []byte) (string, error) {
	data, err := c.ReadPacket(contextBackground)
	if err != nil {
		return "", err
	}
	if cc.TLSState() != nil {
		if n := len(data); n > 0 && data[n-1] == 0 {
			data = data[:n-1]
		}
		return string(data), nil
	}
	if len(data) == 1 && data[0] == requestPubKey {
		if err := cc.writeAuthPacket(append([]byte{authMoreData}, m.a.pubPEM...)); err != nil {
			return "", err
		}
		if data, err = c.ReadPacket(contextBackground); err != nil {
			return "", err
		}
	}
	plain, err := rsa.DecryptOAEP(sha1.New(), rand.Reader, m.a.key, data, nil)
	if err != nil {
		// Not encrypted with our key (or cleartext over plaintext, which
		// is refused): a wrong password, as far as the client knows.
		return "\x00invalid", nil
	}
	for i := range plain {
		plain[i] ^= salt[i%len(salt)]
	}
	if n := len(plain); n > 0 && plain[n-1] == 0 {
		plain = plain[:n-1]
	}
	return string(plain), nil
}

// tlsVersionName is the TLS version as SHOW STATUS LIKE 'Ssl_version'
// shows it.
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS10:
		return "TLSv1"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS13:
		return "TLSv1.3"
	}
	return ""
}

func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	ip := net.ParseIP(hostOf(addr))
	return ip != nil && ip.IsLoopback()
}

func isUnix(addr net.Addr) bool {
	_, ok := addr.(*net.UnixAddr)
	return ok
}

// hostOf is the client host as MySQL prints it in account names.
func hostOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	if _, ok := addr.(*net.UnixAddr); ok {
		return "localhost"
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}
