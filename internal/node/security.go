package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/strata-db/strata/internal/certs"
	"github.com/strata-db/strata/internal/sql/privilege"
)

// A node's security settings (docs/security.md):
//
//   - The MySQL and Redis ports offer TLS with Config.TLSCert/TLSKey, else with
//     CertsDir's node certificate, else with a self-signed certificate
//     generated into DataDir/tls on first start.
//   - With CertsDir, node-to-node gRPC (Raft, KV, PD, join) is mutual TLS:
//     both ends present a certificate the cluster CA signed, and a peer
//     without one is refused during the TLS handshake.
//   - A listener beyond loopback needs certificates (CertsDir, or
//     TLSCert/TLSKey for the client ports) or Insecure; root without a
//     password is accepted only from loopback either way.
//   - Unless bound to loopback, the HTTP port serves only HTTPS (with the
//     client ports' certificate) and its /admin/ and /debug/ endpoints
//     need HTTP basic authentication as a SQL account with SUPER.

// httpTLS reports whether the HTTP port serves HTTPS: when it listens
// beyond loopback.
func (n *Node) httpTLS() bool { return n.cfg.HTTPAddr != "" && !isLoopbackAddr(n.cfg.HTTPAddr) }

// isLoopbackAddr reports whether a listen address binds loopback only.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkExposure refuses a configuration that listens beyond loopback
// without certificates, unless Insecure says so.
func (c *Config) checkExposure() error {
	if c.Insecure {
		return nil
	}
	clientCerts := c.TLSCert != "" || c.CertsDir != ""
	for _, l := range []struct {
		flag, addr string
		ok         bool
	}{
		{"--sql-addr", c.SQLAddr, clientCerts},
		{"--resp-addr", c.RESPAddr, clientCerts},
		{"--http-addr", c.HTTPAddr, true}, // authenticated instead
		{"--grpc-addr", c.GRPCAddr, c.CertsDir != ""},
	} {
		if l.addr != "" && !isLoopbackAddr(l.addr) && !l.ok {
			return fmt.Errorf("%s %s listens beyond loopback without certificates: give --certs-dir (see `strata cert`), or --tls-cert and --tls-key for the client ports, or --insecure to accept an unencrypted, unauthenticated cluster", l.flag, l.addr)
		}
	}
	return nil
}

// clientTLS returns the TLS configuration of the MySQL and Redis ports.
func (n *Node) clientTLS() (*tls.Config, error) {
	cert, key, ca := n.cfg.TLSCert, n.cfg.TLSKey, n.cfg.TLSCA
	if cert == "" && n.cfg.CertsDir != "" {
		cert, key = filepath.Join(n.cfg.CertsDir, "node.crt"), filepath.Join(n.cfg.CertsDir, "node.key")
	}
	if ca == "" && n.cfg.CertsDir != "" {
		ca = filepath.Join(n.cfg.CertsDir, "ca.crt")
	}
	if cert == "" {
		if n.cfg.InMemory {
			dir, err := os.MkdirTemp("", "strata-tls")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			c, k, err := certs.SelfSigned(dir, []string{n.cfg.SQLAddr, n.cfg.RESPAddr, n.cfg.HTTPAddr})
			if err != nil {
				return nil, err
			}
			return certs.ServerTLS(c, k, ca)
		}
		var err error
		if cert, key, err = certs.SelfSigned(filepath.Join(n.cfg.DataDir, "tls"), []string{n.cfg.SQLAddr, n.cfg.RESPAddr, n.cfg.HTTPAddr, n.cfg.AdvertiseAddr}); err != nil {
			return nil, fmt.Errorf("node: make a self-signed certificate: %w", err)
		}
	}
	return certs.ServerTLS(cert, key, ca)
}

// grpcCredentials returns the server option and dial option of mutual
// TLS between nodes, or nothing without CertsDir.
func (n *Node) grpcCredentials() ([]grpc.ServerOption, []grpc.DialOption, error) {
	if n.cfg.CertsDir == "" {
		return nil, nil, nil
	}
	srv, cli, err := certs.MutualTLS(n.cfg.CertsDir)
	if err != nil {
		return nil, nil, err
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(srv))},
		[]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cli))}, nil
}

// requireAdmin wraps the HTTP endpoints that change the cluster or expose
// its internals: beyond loopback they need basic authentication as a SQL
// account holding SUPER.
func (n *Node) requireAdmin(h http.Handler) http.Handler {
	if isLoopbackAddr(n.cfg.HTTPAddr) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if ok && n.sql != nil {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			ip := net.ParseIP(host)
			snap := n.sql.Privileges()
			acct := snap.Match(user, host, ip != nil && ip.IsLoopback())
			if acct != nil && !acct.Locked && (acct.Auth != "" || ip != nil && ip.IsLoopback()) &&
				privilege.VerifyPassword(acct, pass) && snap.Effective(acct, acct.DefaultRoles).Global&privilege.Super != 0 {
				h.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="strata admin"`)
		http.Error(w, "authentication required: a SQL account with the SUPER privilege", http.StatusUnauthorized)
	})
}
