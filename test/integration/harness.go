// Package integration runs the strata binary as users run it and talks to it
// the way applications do: over the MySQL protocol with
// github.com/go-sql-driver/mysql.
//
// The harness in this file builds cmd/strata once per test process (or uses
// $STRATA_BIN), starts nodes on free loopback ports with their own data
// directories, waits until /healthz says ok and the MySQL port answers, and
// stops them by PID (SIGTERM, or SIGKILL for crash tests). Every process a
// test starts is killed in that test's cleanup, so a failing test never
// leaves a server behind. Other test packages may use it.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// strataBinary is the strata executable shared by the tests of this process.
var strataBinary struct {
	once sync.Once
	path string
	dir  string // temporary build directory, removed by CleanupBinary
	err  error
}

// Binary returns the path of a strata executable: $STRATA_BIN when set,
// otherwise cmd/strata built once into a temporary directory.
func Binary(t testing.TB) string {
	t.Helper()
	strataBinary.once.Do(func() {
		if p := os.Getenv("STRATA_BIN"); p != "" {
			strataBinary.path = p
			return
		}
		root, err := moduleRoot()
		if err != nil {
			strataBinary.err = err
			return
		}
		dir, err := os.MkdirTemp("", "strata-integration-bin-")
		if err != nil {
			strataBinary.err = err
			return
		}
		strataBinary.dir = dir
		out := filepath.Join(dir, "strata")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/strata")
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			strataBinary.err = fmt.Errorf("go build ./cmd/strata: %v\n%s", err, msg)
			return
		}
		strataBinary.path = out
	})
	if strataBinary.err != nil {
		t.Fatal(strataBinary.err)
	}
	return strataBinary.path
}

// CleanupBinary removes the binary built by Binary. Call it from TestMain
// after the tests ran.
func CleanupBinary() {
	if strataBinary.dir != "" {
		os.RemoveAll(strataBinary.dir)
	}
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the strata module")
	}
	return filepath.Dir(gomod), nil
}

// Node is one strata process. Its data directory outlives the process, so
// a node can be killed and started again on the same data.
type Node struct {
	t        testing.TB
	Bin      string
	DataDir  string
	SQLAddr  string
	RESPAddr string // Redis protocol
	HTTPAddr string
	GRPCAddr string
	LogPath  string // stdout and stderr of every run, appended
	// ExtraArgs are appended to "strata start" (e.g. --root-password).
	ExtraArgs []string
	// User and Password are the credentials DSN uses (root, no password by
	// default).
	User, Password string
	// TLS is the go-sql-driver tls parameter DSN uses ("": plaintext);
	// a node started with --require-secure-transport gets skip-verify.
	TLS string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process has been reaped
}

// StartNode starts a single-node database on free loopback ports with a
// fresh data directory and waits until it serves SQL.
func StartNode(t testing.TB) *Node {
	t.Helper()
	return StartNodeWith(t, "", nil)
}

// StartNodeWith is StartNode with a root password (passed as
// --root-password and used by DSN; "" for none) and extra arguments for
// "strata start".
func StartNodeWith(t testing.TB, rootPassword string, extraArgs []string) *Node {
	t.Helper()
	dir := t.TempDir()
	n := &Node{
		t:        t,
		Bin:      Binary(t),
		DataDir:  filepath.Join(dir, "data"),
		LogPath:  filepath.Join(dir, "strata.log"),
		User:     "root",
		Password: rootPassword,
	}
	if rootPassword != "" {
		n.ExtraArgs = append(n.ExtraArgs, "--root-password", rootPassword)
	}
	n.ExtraArgs = append(n.ExtraArgs, extraArgs...)
	for _, a := range extraArgs {
		if a == "--require-secure-transport" {
			n.TLS = "skip-verify"
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the node log %s:\n%s", n.LogPath, tail(n.LogPath, 40))
		}
		n.Kill()
	})
	// A port found free can be taken by another test process before the
	// node binds it. The first start therefore retries on fresh ports when
	// the process exits because an address was in use, on an emptied data
	// directory, so no address of the failed run is remembered.
	const attempts = 5
	for i := 1; ; i++ {
		n.SQLAddr, n.RESPAddr = pickAddr(t), pickAddr(t)
		n.HTTPAddr, n.GRPCAddr = pickAddr(t), pickAddr(t)
		err := n.start()
		if err == nil {
			return n
		}
		if i < attempts && errors.Is(err, errAddrInUse) {
			t.Logf("start attempt %d: %v; retrying on other ports", i, err)
			if err := os.RemoveAll(n.DataDir); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Fatalf("node did not become ready: %v\nlog:\n%s", err, tail(n.LogPath, 40))
	}
}

// errAddrInUse is returned by start when the process exited during startup
// and its log says a listen address was taken.
var errAddrInUse = errors.New("process exited during startup: address already in use")

// Start runs the process (again) on the node's data directory and ports and
// waits until it is ready.
func (n *Node) Start() {
	n.t.Helper()
	if err := n.start(); err != nil {
		n.t.Fatalf("node did not become ready: %v\nlog:\n%s", err, tail(n.LogPath, 40))
	}
}

func (n *Node) start() error {
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return errors.New("node already running")
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)
	fmt.Fprintf(logf, "=== harness: starting %s at %s\n", n.Bin, time.Now().Format(time.RFC3339Nano))
	args := []string{"start",
		"--data-dir", n.DataDir,
		"--sql-addr", n.SQLAddr,
		"--resp-addr", n.RESPAddr,
		"--http-addr", n.HTTPAddr,
		"--grpc-addr", n.GRPCAddr}
	cmd := exec.Command(n.Bin, append(args, n.ExtraArgs...)...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.mu.Unlock()
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	err = n.waitReady(60 * time.Second)
	if errors.Is(err, errExited) {
		<-exited
		n.mu.Lock()
		if n.cmd == cmd {
			n.cmd, n.exited = nil, nil
		}
		n.mu.Unlock()
		if run, rerr := os.ReadFile(n.LogPath); rerr == nil && logStart <= int64(len(run)) &&
			bytes.Contains(run[logStart:], []byte("address already in use")) {
			return errAddrInUse
		}
	}
	return err
}

var errExited = errors.New("process exited during startup")

// PID is the process id of the running process, 0 when stopped.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		n.mu.Lock()
		exited := n.exited
		n.mu.Unlock()
		select {
		case <-exited:
			return errExited
		default:
		}
		last = n.probe(client)
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", timeout, last)
}

// HTTPURL is the URL of path on the node's HTTP port: HTTPS when the port
// listens beyond loopback (then verify with DataDir/tls/server.crt).
func (n *Node) HTTPURL(path string) string {
	host, _, _ := net.SplitHostPort(n.HTTPAddr)
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return "http://" + n.HTTPAddr + path
	}
	return "https://" + n.HTTPAddr + path
}

func (n *Node) probe(client *http.Client) error {
	// Readiness only: the certificate is the tests' business.
	client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	resp, err := client.Get(n.HTTPURL("/healthz"))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz: %s", resp.Status)
	}
	db, err := sql.Open("mysql", n.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// Kill sends SIGKILL to the process (by its PID) and waits until it is
// reaped. It is a no-op when the node is not running.
func (n *Node) Kill() {
	n.signalAndWait(syscall.SIGKILL, 10*time.Second)
}

// Stop asks the process to shut down with SIGTERM and waits up to 30s,
// then kills it.
func (n *Node) Stop() {
	if !n.signalAndWait(syscall.SIGTERM, 30*time.Second) {
		n.t.Errorf("node did not stop within 30s of SIGTERM; killing it")
		n.Kill()
	}
}

func (n *Node) signalAndWait(sig syscall.Signal, timeout time.Duration) bool {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return true
	}
	_ = syscall.Kill(cmd.Process.Pid, sig)
	select {
	case <-exited:
		n.mu.Lock()
		if n.cmd == cmd {
			n.cmd, n.exited = nil, nil
		}
		n.mu.Unlock()
		return true
	case <-time.After(timeout):
		return false
	}
}

// DSN is a go-sql-driver DSN for the node's user (root) on this node.
// interpolateParams is off, so statements with arguments are prepared on
// the server.
func (n *Node) DSN(db string) string {
	return n.DSNAs(n.User, n.Password, db)
}

// DSNAs is DSN with explicit credentials.
func (n *Node) DSNAs(user, password, db string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = n.SQLAddr
	cfg.DBName = db
	cfg.Timeout = 5 * time.Second
	cfg.ReadTimeout = 60 * time.Second
	cfg.WriteTimeout = 60 * time.Second
	cfg.InterpolateParams = false
	cfg.ParseTime = true
	cfg.TLSConfig = n.TLS
	return cfg.FormatDSN()
}

// DB opens a connection pool to db (may be "") that is closed when the test
// ends.
func (n *Node) DB(t testing.TB, db string) *sql.DB {
	t.Helper()
	pool, err := sql.Open("mysql", n.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// pickAddr chooses the listen addresses of new nodes; tests of the harness
// replace it.
var pickAddr = freeAddr

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
