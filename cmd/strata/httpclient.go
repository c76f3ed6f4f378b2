package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// httpFlags are the flags of the commands that call a node's HTTP port,
// which serves HTTPS when it listens beyond loopback (docs/security.md).
type httpFlags struct {
	certsDir, caCert string
	skipVerify       bool
}

func (f *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.certsDir, "certs-dir", "", "verify the node's HTTPS certificate against this directory's ca.crt (from strata cert)")
	fs.StringVar(&f.caCert, "ca-cert", "", "verify the node's HTTPS certificate against this CA file (a node without certificates: its DATA_DIR/tls/server.crt)")
	fs.BoolVar(&f.skipVerify, "insecure-skip-verify", false, "use HTTPS without verifying the node's certificate")
}

func (f *httpFlags) client() (*http.Client, error) {
	cfg := &tls.Config{InsecureSkipVerify: f.skipVerify}
	ca := f.caCert
	if ca == "" && f.certsDir != "" {
		ca = filepath.Join(f.certsDir, "ca.crt")
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", ca)
		}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// get fetches path from host ("addr:port", or a URL with its scheme).
// Without a scheme it speaks HTTPS, and plain HTTP to a node that
// answers in HTTP (one bound to loopback).
func (f *httpFlags) get(host, path string) (*http.Response, error) {
	cl, err := f.client()
	if err != nil {
		return nil, err
	}
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil {
			return nil, err
		}
		return f.explain(cl.Get(u.JoinPath(path).String()))
	}
	resp, err := cl.Get((&url.URL{Scheme: "https", Host: host, Path: path}).String())
	if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return cl.Get((&url.URL{Scheme: "http", Host: host, Path: path}).String())
	}
	return f.explain(resp, err)
}

func (f *httpFlags) explain(resp *http.Response, err error) (*http.Response, error) {
	var unknown x509.UnknownAuthorityError
	var invalid x509.HostnameError
	if errors.As(err, &unknown) || errors.As(err, &invalid) {
		return nil, fmt.Errorf("%v: verify the node's certificate with --certs-dir or --ca-cert (DATA_DIR/tls/server.crt of a node without certificates), or skip that with --insecure-skip-verify", err)
	}
	return resp, err
}
