package resp

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/strata-db/strata/internal/kv/kvtest"
)

// TestCommands runs the command scripts in testdata/commands. Directives:
//
//	run [conn=NAME]      each input line is sent as an inline command on
//	                     connection NAME (default "a"); the replies are
//	                     printed the way redis-cli prints them
//	advance ms=N         moves the server's clock forward
//	reap                 runs one pass of the expired-key reaper
//
// The server runs on the in-memory kv test double (snapshot isolation,
// first-committer-wins), so the scripts test command semantics; the wire
// tests in test/resp run the same commands against a real node.
func TestCommands(t *testing.T) {
	datadriven.Walk(t, "testdata/commands", func(t *testing.T, path string) {
		clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
		srv, err := New(Config{Addr: "127.0.0.1:0", Now: clock.Now, ReapInterval: time.Hour, MaxValueSize: 1 << 10}, kvtest.NewMemStorage())
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve()
		defer srv.Close()
		conns := map[string]*testConn{}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "run":
				name := "a"
				if d.HasArg("conn") {
					d.ScanArgs(t, "conn", &name)
				}
				c := conns[name]
				if c == nil {
					c = dialTest(t, srv.Addr().String())
					conns[name] = c
				}
				var out strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					if strings.TrimSpace(line) == "" {
						continue
					}
					fmt.Fprintf(&out, "> %s\n", line)
					if _, err := c.Write([]byte(line + "\r\n")); err != nil {
						return fmt.Sprintf("write: %v", err)
					}
					reply, err := readReply(c.r, "")
					if err != nil {
						fmt.Fprintf(&out, "connection: %v\n", err)
						delete(conns, name)
						break
					}
					out.WriteString(reply)
				}
				return out.String()
			case "advance":
				var ms int
				d.ScanArgs(t, "ms", &ms)
				clock.Advance(time.Duration(ms) * time.Millisecond)
				return ""
			case "reap":
				n, err := srv.reapOnce()
				if err != nil {
					return "error: " + err.Error()
				}
				return fmt.Sprintf("looked at %d expiry entries", n)
			}
			t.Fatalf("unknown directive %s", d.Cmd)
			return ""
		})
	})
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type testConn struct {
	net.Conn
	r *bufio.Reader
}

func dialTest(t *testing.T, addr string) *testConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &testConn{Conn: c, r: bufio.NewReader(c)}
}

// readReply reads one RESP2/RESP3 reply and renders it like redis-cli.
func readReply(r *bufio.Reader, indent string) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body + "\n", nil
	case '-':
		return "(error) " + body + "\n", nil
	case ':':
		return "(integer) " + body + "\n", nil
	case ',':
		return "(double) " + body + "\n", nil
	case '#':
		return map[string]string{"t": "(true)\n", "f": "(false)\n"}[body], nil
	case '_':
		return "(nil)\n", nil
	case '$', '=':
		n, err := strconv.Atoi(body)
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "(nil)\n", nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		s := string(buf[:n])
		if line[0] == '=' {
			return "(verbatim) " + strconv.Quote(s) + "\n", nil
		}
		return strconv.Quote(s) + "\n", nil
	case '*', '~', '%':
		n, err := strconv.Atoi(body)
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "(nil array)\n", nil
		}
		if n == 0 {
			return map[byte]string{'*': "(empty array)\n", '~': "(empty set)\n", '%': "(empty map)\n"}[line[0]], nil
		}
		items := n
		if line[0] == '%' {
			items = 2 * n
		}
		var b strings.Builder
		for i := 0; i < items; i++ {
			s, err := readReply(r, indent+"   ")
			if err != nil {
				return "", err
			}
			prefix := fmt.Sprintf("%d) ", i+1)
			if line[0] == '%' {
				prefix = fmt.Sprintf("%d# ", i/2+1)
				if i%2 == 1 {
					prefix = "   => "
				}
			}
			if i > 0 {
				b.WriteString(indent)
			}
			b.WriteString(prefix + s)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unknown reply type %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
