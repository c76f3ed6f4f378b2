package resp

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// redisCLI returns the path of redis-cli, skipping the test when it is
// not installed (CI installs Debian's redis-tools, so there it runs).
func redisCLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not found: install Debian's redis-tools (apt-get install redis-tools) to run the redis-cli tests")
	}
	return p
}

// cli runs redis-cli against addr with args and stdin, and returns its
// standard output; a failure to run or a non-zero exit fails the test.
func cli(t *testing.T, addr, stdin string, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(redisCLI(t), append([]string{"-h", host, "-p", port}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("redis-cli %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.String(), errOut.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("redis-cli %q did not finish in 60s; stdout:\n%s", args, out.String())
	}
	return out.String()
}

func wantOutput(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: output\n%q\nwant\n%q", what, got, want)
	}
}

// TestRedisCLIScripted runs redis-cli the way scripts do: a command on the
// command line, commands on stdin, -x, --raw / --no-raw, -3, --scan.
func TestRedisCLIScripted(t *testing.T) {
	redisCLI(t)
	addr := fresh(t).addr
	wantOutput(t, "SET", cli(t, addr, "", "SET", "k", "v"), "OK\n")
	wantOutput(t, "GET", cli(t, addr, "", "GET", "k"), "v\n")
	wantOutput(t, "GET missing", cli(t, addr, "", "GET", "missing"), "\n")
	wantOutput(t, "INCR", cli(t, addr, "", "INCR", "n"), "1\n")
	wantOutput(t, "arity error", cli(t, addr, "", "GET"), "ERR wrong number of arguments for 'get' command\n\n")
	wantOutput(t, "unknown command", cli(t, addr, "", "FOO", "a"), "ERR unknown command 'FOO', with args beginning with: 'a' \n\n")
	wantOutput(t, "-n 0", cli(t, addr, "", "-n", "0", "PING"), "PONG\n")

	// (redis-cli prints an error reply followed by an empty line.)
	// Commands on stdin, one per line, as `redis-cli < script` runs them.
	script := "SET a 1\nINCR a\nGET a\nGET nope\nHSET h f v\nHGET h f\nFOO\nMGET a nope\nDEL a h\nEXISTS a h\n"
	wantOutput(t, "stdin script", cli(t, addr, script),
		"OK\n2\n2\n\n1\nv\nERR unknown command 'FOO', with args beginning with: \n\n2\n\n2\n0\n")
	wantOutput(t, "stdin script --no-raw", cli(t, addr, "SET b 1\nINCR b\nGET b\nGET nope\nMGET b nope\nGET\n", "--no-raw"),
		"OK\n(integer) 2\n\"2\"\n(nil)\n1) \"2\"\n2) (nil)\n(error) ERR wrong number of arguments for 'get' command\n")

	// -x: the last argument from stdin; --raw prints bytes as they are,
	// --no-raw quotes them.
	wantOutput(t, "-x", cli(t, addr, "line1\nline2", "-x", "SET", "multi"), "OK\n")
	wantOutput(t, "--raw GET", cli(t, addr, "", "--raw", "GET", "multi"), "line1\nline2\n")
	wantOutput(t, "--no-raw GET", cli(t, addr, "", "--no-raw", "GET", "multi"), "\"line1\\nline2\"\n")
	wantOutput(t, "--raw binary", cli(t, addr, "\x00\x01\xff", "-x", "SET", "bin"), "OK\n")
	wantOutput(t, "--no-raw binary", cli(t, addr, "", "--no-raw", "GET", "bin"), "\"\\x00\\x01\\xff\"\n")

	// -3: HELLO 3 first; maps print as pairs.
	cli(t, addr, "", "HSET", "hh", "f", "v", "g", "w")
	got := strings.Split(strings.TrimSpace(cli(t, addr, "", "-3", "HGETALL", "hh")), "\n")
	sort.Strings(got)
	wantOutput(t, "-3 HGETALL", strings.Join(got, "\n"), "f v\ng w")
	got = strings.Split(strings.TrimSpace(cli(t, addr, "", "-3", "--no-raw", "HGETALL", "hh")), "\n")
	for i := range got {
		got[i] = got[i][strings.Index(got[i], "#")+1:] // drop the "1#" numbering: order is the server's
	}
	sort.Strings(got)
	wantOutput(t, "-3 --no-raw HGETALL", strings.Join(got, "\n"), ` "f" => "v"`+"\n"+` "g" => "w"`)
	wantOutput(t, "-3 --no-raw GET missing", cli(t, addr, "", "-3", "--no-raw", "GET", "missing"), "(nil)\n")
	wantOutput(t, "-3 --no-raw INCRBYFLOAT", cli(t, addr, "", "-3", "--no-raw", "INCRBYFLOAT", "fl", "1.5"), "\"1.5\"\n")
	hello := cli(t, addr, "", "-3", "--no-raw", "HELLO", "3")
	if !strings.Contains(hello, `"proto" => (integer) 3`) {
		t.Errorf("-3 HELLO 3 output:\n%s", hello)
	}

	// --scan follows SCAN cursors.
	var keys []string
	for i := 0; i < 300; i++ {
		keys = append(keys, fmt.Sprintf("scan:%d", i))
	}
	var setScript strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&setScript, "SET %s x\n", k)
	}
	cli(t, addr, setScript.String())
	scanned := strings.Fields(cli(t, addr, "", "--scan", "--pattern", "scan:*"))
	sameSet(t, "--scan --pattern scan:*", scanned, keys)
}

// TestRedisCLIPipe feeds `redis-cli --pipe` a generated RESP file of
// 10,000 SETs (the mass-insertion recipe of the Redis documentation).
func TestRedisCLIPipe(t *testing.T) {
	redisCLI(t)
	addr := fresh(t).addr
	const n = 10000
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(encodeCommand("SET", fmt.Sprintf("pipe:%d", i), fmt.Sprintf("value %d", i)))
	}
	file := filepath.Join(t.TempDir(), "data.resp")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(redisCLI(t), "-h", host, "-p", port, "--pipe")
	cmd.Stdin = f
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --pipe: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("errors: 0, replies: %d", n)) {
		t.Fatalf("redis-cli --pipe output:\n%s\nwant errors: 0, replies: %d", out, n)
	}
	c := newClient(t, 2)
	eq(t, c.DBSize(t.Context()), int64(n))
	for start := 0; start < n; start += 1000 {
		var ks []string
		var want []any
		for i := start; i < start+1000; i++ {
			ks = append(ks, fmt.Sprintf("pipe:%d", i))
			want = append(want, fmt.Sprintf("value %d", i))
		}
		eq(t, c.MGet(t.Context(), ks...), want)
	}
}

// TestRedisCLIInteractive runs redis-cli on a pseudo-terminal, as a person
// at a terminal does: prompt, typed commands, human-readable replies, a
// MULTI block, and quit.
func TestRedisCLIInteractive(t *testing.T) {
	bin := redisCLI(t)
	addr := fresh(t).addr
	host, port, _ := net.SplitHostPort(addr)
	s := startOnPTY(t, bin, "-h", host, "-p", port)
	prompt, txPrompt := addr+"> ", addr+"(TX)> "
	s.waitFor(t, prompt)
	steps := []struct{ typed, want string }{
		{"SET greeting hello", "OK"},
		{"GET greeting", `"hello"`},
		{"INCR visits", "(integer) 1"},
		{"GET nothing", "(nil)"},
		{"HSET user name ann", "(integer) 1"},
		{"HGETALL user", "1) \"name\"\r\n2) \"ann\""},
		{"KEYS nomatch*", "(empty array)"},
		{"GET", "(error) ERR wrong number of arguments for 'get' command"},
		{"SELECT 0", "OK"},
		{"MULTI", "OK"}, // the prompt shows the open transaction
		{"INCR visits", "QUEUED"},
		{"EXEC", "1) (integer) 2"},
		{"PING", "PONG"},
	}
	inTx := false
	for _, st := range steps {
		s.send(t, st.typed+"\r")
		s.waitFor(t, st.want+"\r\n")
		switch st.typed {
		case "MULTI":
			inTx = true
		case "EXEC":
			inTx = false
		}
		if inTx {
			s.waitFor(t, txPrompt)
		} else {
			s.waitFor(t, prompt)
		}
	}
	s.send(t, "quit\r")
	s.waitExit(t)
	c := newClient(t, 2)
	eq(t, c.Get(t.Context(), "visits"), "2")
}

// ptySession is a process on a pseudo-terminal and everything it printed.
type ptySession struct {
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	seen   int // output before this was matched by waitFor already
	done   chan struct{}
}

func ioctl(fd, req, arg uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, req, arg); e != 0 {
		return e
	}
	return nil
}

// startOnPTY starts bin on a new pseudo-terminal (Linux /dev/ptmx) as the
// session leader, so that it sees a terminal on stdin and stdout.
func startOnPTY(t *testing.T, bin string, args ...string) *ptySession {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	if err := ioctl(master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	var n uint32
	if err := ioctl(master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.Env = append(os.Environ(), "TERM=dumb", "HOME="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	s := &ptySession{master: master, cmd: cmd, done: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			cmd.Process.Kill()
			<-s.done
		}
		master.Close()
	})
	return s
}

func (s *ptySession) send(t *testing.T, text string) {
	t.Helper()
	if _, err := s.master.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until the output after the last match contains want.
func (s *ptySession) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		out := s.out.String()
		s.mu.Unlock()
		if i := strings.Index(out[s.seen:], want); i >= 0 {
			s.seen += i + len(want)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-cli on a terminal did not print %q within 10s; it printed:\n%q", want, out[s.seen:])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *ptySession) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
		if !s.cmd.ProcessState.Success() {
			t.Errorf("redis-cli exited with %v", s.cmd.ProcessState)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("redis-cli did not exit after quit")
	}
}
