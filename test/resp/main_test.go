package resp

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/test/integration"
)

// sharedMaxValueSize is the value size limit of the shared target: the
// shared strata node is started with --max-value-size of this, and a real
// Redis gets it as proto-max-bulk-len (Redis's smallest allowed setting), so
// the limit tests need to send only a little over 1 MiB.
const sharedMaxValueSize = 1 << 20

// target is the server every test of the package talks to: a real
// redis-server when REDIS_COMPAT_ADDR is set, otherwise one strata node
// shared by the tests (FLUSHALL between tests keeps them independent).
type target struct {
	addr  string
	redis bool              // a real redis-server
	node  *integration.Node // the shared strata node (nil for Redis)
}

var shared struct {
	once sync.Once
	tgt  *target
	err  error
	tb   *mainTB
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.tgt != nil && shared.tgt.redis {
		restoreRedis(shared.tgt.addr)
	}
	if shared.tb != nil {
		shared.tb.cleanup()
	}
	integration.CleanupBinary()
	os.Exit(code)
}

// compatRedis reports whether the tests run against a real redis-server.
func compatRedis() bool { return os.Getenv("REDIS_COMPAT_ADDR") != "" }

// strataOnly skips a test that can only run against strata (kill -9,
// region splits).
func strataOnly(t *testing.T) {
	t.Helper()
	if compatRedis() {
		t.Skip("strata-only test: REDIS_COMPAT_ADDR points at a real redis-server")
	}
}

// fresh returns the shared target with an empty keyspace: every test that
// uses the shared target starts with it.
func fresh(t testing.TB) *target {
	t.Helper()
	tg := tgt(t)
	flushAll(t, tg.addr, "")
	return tg
}

// tgt returns the shared target, starting the strata node on first use.
func tgt(t testing.TB) *target {
	t.Helper()
	shared.once.Do(func() {
		if addr := os.Getenv("REDIS_COMPAT_ADDR"); addr != "" {
			shared.tgt, shared.err = &target{addr: addr, redis: true}, configureRedis(addr)
			return
		}
		shared.tb = &mainTB{}
		shared.err = shared.tb.run(func() {
			n := integration.StartNodeWith(shared.tb, "", []string{
				"--max-value-size", fmt.Sprint(sharedMaxValueSize)})
			if err := waitRESP(n.RESPAddr, 15*time.Second); err != nil {
				shared.tb.Fatalf("strata node (log %s) does not answer PING on its RESP address %s: %v",
					n.LogPath, n.RESPAddr, err)
			}
			shared.tgt = &target{addr: n.RESPAddr, node: n}
		})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.tgt
}

// configureRedis gives a real Redis the shared size limit and checks that it
// was started as doc.go says (one database, so that SELECT 1 fails as it
// does on strata).
func configureRedis(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "proto-max-bulk-len", fmt.Sprint(sharedMaxValueSize)).Err(); err != nil {
		return fmt.Errorf("redis at %s: CONFIG SET proto-max-bulk-len: %w", addr, err)
	}
	dbs, err := c.ConfigGet(ctx, "databases").Result()
	if err != nil {
		return fmt.Errorf("redis at %s: CONFIG GET databases: %w", addr, err)
	}
	if dbs["databases"] != "1" {
		return fmt.Errorf("redis at %s has %s databases; start it with --databases 1 (strata has only db 0)",
			addr, dbs["databases"])
	}
	return nil
}

// restoreRedis puts back Redis's default proto-max-bulk-len.
func restoreRedis(addr string) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	c.ConfigSet(context.Background(), "proto-max-bulk-len", "512mb")
}

// waitRESP waits until a PING on a new connection to addr gets +PONG.
func waitRESP(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		last = pingOnce(addr, "")
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// pingOnce opens a connection, authenticates with password when it is not
// empty, and expects +PONG to a PING.
func pingOnce(addr, password string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := "*1\r\n$4\r\nPING\r\n"
	want := "+PONG\r\n"
	if password != "" {
		req = encodeCommand("AUTH", password) + req
		want = "+OK\r\n" + want
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return err
	}
	buf := make([]byte, len(want))
	if _, err := readFull(c, buf); err != nil {
		return err
	}
	if string(buf) != want {
		return fmt.Errorf("PING answered %q, want %q", buf, want)
	}
	return nil
}

func readFull(c net.Conn, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// flushAll empties the keyspace of the server at addr.
func flushAll(t testing.TB, addr, password string) {
	t.Helper()
	w := dialWireAddr(t, addr)
	defer w.close()
	if password != "" {
		w.expect(t, "+OK", "AUTH", password)
	}
	w.expect(t, "+OK", "FLUSHALL")
}

// mainTB lets the shared node outlive a single test: it is the testing.TB the
// harness gets when TestMain's first user starts the node. Fatal stops the
// start by panicking with mainTBFatal, which run turns into an error; the
// cleanups run at the end of TestMain.
type mainTB struct {
	testing.TB // nil: only the methods below are used by the harness

	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	failed   bool
	msgs     []string
}

type mainTBFatal struct{}

func (m *mainTB) run(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(mainTBFatal); !ok {
				panic(r)
			}
			err = fmt.Errorf("starting the shared strata node: %s", strings.Join(m.msgs, "\n"))
		}
	}()
	f()
	return nil
}

func (m *mainTB) cleanup() {
	for i := len(m.cleanups) - 1; i >= 0; i-- {
		m.cleanups[i]()
	}
	for _, d := range m.dirs {
		os.RemoveAll(d)
	}
}

func (m *mainTB) Helper()      {}
func (m *mainTB) Name() string { return "TestMain" }
func (m *mainTB) Cleanup(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanups = append(m.cleanups, f)
}
func (m *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "strata-resp-test-")
	if err != nil {
		m.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs = append(m.dirs, d)
	return d
}
func (m *mainTB) Failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}
func (m *mainTB) Log(args ...any) { fmt.Fprintln(os.Stderr, args...) }
func (m *mainTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
func (m *mainTB) Error(args ...any) { m.fail(fmt.Sprint(args...)) }
func (m *mainTB) Errorf(format string, args ...any) {
	m.fail(fmt.Sprintf(format, args...))
}
func (m *mainTB) Fatal(args ...any) {
	m.fail(fmt.Sprint(args...))
	panic(mainTBFatal{})
}
func (m *mainTB) Fatalf(format string, args ...any) {
	m.fail(fmt.Sprintf(format, args...))
	panic(mainTBFatal{})
}

func (m *mainTB) fail(msg string) {
	fmt.Fprintln(os.Stderr, "shared strata node:", msg)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = true
	m.msgs = append(m.msgs, msg)
}
