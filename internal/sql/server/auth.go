package server

import (
	"crypto/sha1"
	"crypto/x509"
	"net"

	"github.com/dolthub/vitess/go/mysql"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
)

// rootUser is the only account until the SQL layer grows user management.
const rootUser = "root"

// accounts authenticates clients with mysql_native_password. A client that
// asks for another plugin (MySQL 8 clients default to caching_sha2_password)
// is switched to mysql_native_password by the protocol library.
//
// Rules: root with a configured password may connect from anywhere with
// that password; root without a configured password may connect only from
// a loopback address, only with an empty password, and only when
// Config.AllowEmptyRootPassword is set.
type accounts struct {
	allowEmptyRoot bool
	// rootHash is SHA1(SHA1(password)), nil when no password is set.
	rootHash []byte
}

func newAccounts(cfg Config) *accounts {
	a := &accounts{allowEmptyRoot: cfg.AllowEmptyRootPassword}
	if cfg.RootPassword != "" {
		stage1 := sha1.Sum([]byte(cfg.RootPassword))
		stage2 := sha1.Sum(stage1[:])
		a.rootHash = stage2[:]
	}
	return a
}

// AuthMethods implements mysql.AuthServer.
func (a *accounts) AuthMethods() []mysql.AuthMethod {
	return []mysql.AuthMethod{mysql.NewMysqlNativeAuthMethod(a, a)}
}

// DefaultAuthMethodDescription implements mysql.AuthServer.
func (a *accounts) DefaultAuthMethodDescription() mysql.AuthMethodDescription {
	return mysql.MysqlNativePassword
}

// HandleUser implements mysql.UserValidator: it only says whether the
// native-password method may handle the user. Unknown users are still
// "handled" so that they fail with a proper access-denied error.
func (a *accounts) HandleUser(user string, remoteAddr net.Addr) bool { return true }

// UserEntryWithHash implements mysql.HashStorage.
func (a *accounts) UserEntryWithHash(_ []*x509.Certificate, salt []byte, user string, authResponse []byte, remoteAddr net.Addr) (mysql.Getter, error) {
	usedPassword := len(authResponse) > 0
	if user == rootUser {
		if a.rootHash != nil {
			if usedPassword && mysql.VerifyHashedMysqlNativePassword(authResponse, salt, a.rootHash) {
				return authenticatedUser{user}, nil
			}
		} else if a.allowEmptyRoot && !usedPassword && isLoopback(remoteAddr) {
			return authenticatedUser{user}, nil
		}
	}
	using := "NO"
	if usedPassword {
		using = "YES"
	}
	return nil, mysql.NewSQLError(mysql.ERAccessDeniedError, mysql.SSAccessDeniedError,
		"Access denied for user '%s'@'%s' (using password: %s)", user, hostOf(remoteAddr), using)
}

// authenticatedUser is what the protocol library keeps as Conn.UserData.
type authenticatedUser struct{ name string }

func (u authenticatedUser) Get() *querypb.VTGateCallerID {
	return &querypb.VTGateCallerID{Username: u.name}
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
