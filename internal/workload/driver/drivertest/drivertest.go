// Package drivertest starts the real servers the workload drivers talk to
// (redis-server, etcd) for tests, and holds the behaviour every driver.Store
// must show (Conformance), run against each of them and against Strata.
//
// Servers are the Debian binaries (apt-get install redis-server
// etcd-server); a test that needs one that is not installed is skipped with
// a message naming the package. Each server is a child of the test process
// on free loopback ports with its own data directory, killed by PID when
// the test ends.
package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Server is a running child process.
type Server struct {
	Addr string // client address, host:port
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func lookBinary(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if _, serr := os.Stat("/usr/bin/" + name); serr == nil {
			return "/usr/bin/" + name
		}
		t.Skipf("%s is not installed (apt-get install %s): skipping", name, pkg)
	}
	return p
}

// startOnFreePorts starts bin with the arguments args returns for n free
// loopback addresses and waits until it listens on the first. A port found
// free can be taken by another process before the server binds it, so when
// the server exits during startup it is tried again on other ports.
func startOnFreePorts(t testing.TB, bin string, n int, args func(addrs []string) []string) *Server {
	t.Helper()
	const attempts = 5
	for i := 1; ; i++ {
		addrs := make([]string, n)
		for j := range addrs {
			addrs[j] = FreeAddr(t)
		}
		s, exited := start(t, addrs[0], bin, args(addrs)...)
		if !exited {
			return s
		}
		if i == attempts {
			t.Fatalf("%s exited during startup %d times; last output:\n%s", bin, attempts, s.log.String())
		}
		t.Logf("%s exited during startup; trying other ports. Output:\n%s", bin, s.log.String())
	}
}

// start runs bin and waits until it listens on addr. It reports exited when
// the process ended before that.
func start(t testing.TB, addr string, bin string, args ...string) (s *Server, exited bool) {
	t.Helper()
	s = &Server{Addr: addr, done: make(chan struct{}), log: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), s.log.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s, false
		}
		select {
		case <-s.done:
			return s, true
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s: %v\n%s", bin, addr, err, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL (by its PID) and waits for it.
func (s *Server) Kill() {
	if s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// StartRedis starts redis-server with its default (no fsync) persistence
// off entirely: no RDB snapshots, no AOF.
func StartRedis(t testing.TB) *Server {
	t.Helper()
	bin := lookBinary(t, "redis-server", "redis-server")
	dir := t.TempDir()
	return startOnFreePorts(t, bin, 1, func(addrs []string) []string {
		_, port, _ := net.SplitHostPort(addrs[0])
		return []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no"}
	})
}

// StartEtcd starts a single-member etcd.
func StartEtcd(t testing.TB) *Server {
	t.Helper()
	bin := lookBinary(t, "etcd", "etcd-server")
	return startOnFreePorts(t, bin, 2, func(addrs []string) []string {
		client, peer := addrs[0], addrs[1]
		// A fresh data directory each time: etcd remembers its URLs.
		return []string{"--name", "e1", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
			"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
			"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
			"--initial-cluster", "e1=http://" + peer}
	})
}

// Context is a test's context with a deadline well inside go test's.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Fields makes n field values of length l whose bytes say which record and
// version they are.
func Fields(n, l int, tag string) [][]byte {
	f := make([][]byte, n)
	for i := range f {
		v := []byte(fmt.Sprintf("%s-f%d-", tag, i))
		for len(v) < l {
			v = append(v, 'x')
		}
		f[i] = v[:l]
	}
	return f
}
