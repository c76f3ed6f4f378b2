// Package certs makes and loads the certificates Strata's listeners use:
// a self-signed certificate generated into the data directory on a node's
// first start (so that MySQL clients can ask for TLS out of the box), and
// a cluster CA with node and client certificates signed by it (`strata
// cert create-ca / create-node / create-client`, as `cockroach cert`),
// which the nodes use for mutual TLS between them.
//
// Files, in a certificates directory (the CockroachDB layout):
//
//	ca.crt, ca.key            the cluster CA (keep ca.key off the nodes)
//	node.crt, node.key        a node's certificate: server and client use,
//	                          its addresses as SANs
//	client.USER.crt/.key      a client certificate whose CN is USER
//
// Keys are ECDSA P-256, written with mode 0600.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity of generated certificates.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 5 * 365 * 24 * time.Hour
)

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) }

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// sans splits hosts into DNS names and IP addresses.
func sans(tmpl *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
}

// SelfSigned returns the certificate and key files in dir, creating a
// self-signed pair for hosts (plus localhost and the loopback addresses)
// the first time.
func SelfSigned(dir string, hosts []string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	key, err := newKey()
	if err != nil {
		return "", "", err
	}
	sn, err := serial()
	if err != nil {
		return "", "", err
	}
	name, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: "Strata self-signed", Organization: []string{"Strata"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(leafValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	sans(tmpl, append([]string{"localhost", "127.0.0.1", "::1", name}, hosts...))
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	if err := writeKey(keyFile, key); err != nil {
		return "", "", err
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// CreateCA writes ca.crt and ca.key into dir; it refuses to overwrite.
func CreateCA(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); err == nil {
		return fmt.Errorf("%s already holds a CA key; remove it first to make a new CA", dir)
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: "Strata CA", Organization: []string{"Strata"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(caValidity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "ca.key"), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", der, 0o644)
}

func loadCA(caDir string) (*x509.Certificate, any, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(caDir, "ca.crt"), filepath.Join(caDir, "ca.key"))
	if err != nil {
		return nil, nil, fmt.Errorf("load the CA from %s: %w", caDir, err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	return ca, pair.PrivateKey, nil
}

// sign writes a certificate signed by the CA in caDir into dir as
// name.crt / name.key.
func sign(dir, caDir, name string, tmpl *x509.Certificate) error {
	ca, caKey, err := loadCA(caDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return err
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(leafValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, name+".key"), key); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	if dir != caDir {
		// The node needs the CA certificate (not its key) beside its own.
		crt, err := os.ReadFile(filepath.Join(caDir, "ca.crt"))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "ca.crt"), crt, 0o644)
	}
	return nil
}

// CreateNode writes node.crt / node.key for the given addresses (host
// names or IPs; localhost and the loopback addresses are added), usable as
// server and as client between nodes.
func CreateNode(dir, caDir string, hosts []string) error {
	if len(hosts) == 0 {
		return errors.New("name at least one address of the node")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "node", Organization: []string{"Strata"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	sans(tmpl, append(hosts, "localhost", "127.0.0.1", "::1"))
	return sign(dir, caDir, "node", tmpl)
}

// CreateClient writes client.USER.crt / .key, a client certificate whose
// common name is the SQL user (REQUIRE X509 accounts log in with it).
func CreateClient(dir, caDir, user string) error {
	if user == "" {
		return errors.New("name the user")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: []string{"Strata"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return sign(dir, caDir, "client."+user, tmpl)
}

// ServerTLS loads a server certificate; with caFile, client certificates
// signed by that CA are verified when a client presents one (REQUIRE X509
// then sees a verified chain).
func ServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the TLS certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("load the CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// MutualTLS is the configuration of the node-to-node gRPC services in a
// certificates directory: each side presents node.crt and accepts only a
// peer whose certificate the cluster CA (ca.crt) signed.
func MutualTLS(dir string) (server, client *tls.Config, err error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"))
	if err != nil {
		return nil, nil, fmt.Errorf("load the node certificate: %w", err)
	}
	pool, err := loadPool(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client, nil
}
