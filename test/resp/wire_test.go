package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file is a small RESP2/RESP3 client over a raw net.Conn. Unlike
// go-redis it keeps the exact reply type (a status is not a bulk string, a
// RESP2 null bulk is not a null array), so the transcript and malformed-input
// tests can compare replies byte for byte with what Redis sends.

// reply is one decoded RESP value.
type reply struct {
	kind  byte   // the type byte: + - : $ * % ~ _ , # = ( > |
	str   string // payload of + - : $ , # = (
	null  bool   // $-1 or *-1 (RESP2 nulls)
	elems []reply
}

// errProtocol is returned by readReply for bytes that are not RESP.
var errProtocol = errors.New("malformed reply")

// readReply reads one RESP2 or RESP3 value.
func readReply(r *bufio.Reader) (reply, error) {
	line, err := readLine(r)
	if err != nil {
		return reply{}, err
	}
	if len(line) == 0 {
		return reply{}, fmt.Errorf("%w: empty line", errProtocol)
	}
	rep := reply{kind: line[0]}
	body := line[1:]
	switch rep.kind {
	case '+', '-', ':', ',', '#', '(':
		rep.str = body
		return rep, nil
	case '_':
		return rep, nil
	case '$', '=':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, fmt.Errorf("%w: bulk length %q", errProtocol, body)
		}
		if n < 0 {
			rep.null = true
			return rep, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return reply{}, err
		}
		if string(buf[n:]) != "\r\n" {
			return reply{}, fmt.Errorf("%w: bulk not followed by CRLF", errProtocol)
		}
		rep.str = string(buf[:n])
		return rep, nil
	case '*', '%', '~', '>', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, fmt.Errorf("%w: aggregate length %q", errProtocol, body)
		}
		if n < 0 {
			rep.null = true
			return rep, nil
		}
		if rep.kind == '%' || rep.kind == '|' {
			n *= 2
		}
		rep.elems = make([]reply, 0, n)
		for i := 0; i < n; i++ {
			e, err := readReply(r)
			if err != nil {
				return reply{}, err
			}
			rep.elems = append(rep.elems, e)
		}
		return rep, nil
	}
	return reply{}, fmt.Errorf("%w: unknown type byte in %q", errProtocol, line)
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("%w: line %q not ended by CRLF", errProtocol, line)
	}
	return line[:len(line)-2], nil
}

// String renders a reply on one line per value, nested values indented by
// two spaces, in a form close to the wire: +OK, -ERR ..., :1, "bulk", $-1,
// *-1, _, *2 followed by the elements, %1 followed by key and value lines.
func (r reply) String() string {
	var b strings.Builder
	r.render(&b, "")
	return strings.TrimSuffix(b.String(), "\n")
}

func (r reply) render(b *strings.Builder, indent string) {
	b.WriteString(indent)
	switch r.kind {
	case '$':
		if r.null {
			b.WriteString("$-1\n")
		} else {
			b.WriteString(strconv.Quote(r.str) + "\n")
		}
		return
	case '=':
		b.WriteString("=" + strconv.Quote(r.str) + "\n")
		return
	case '*', '%', '~', '>', '|':
		if r.null {
			b.WriteString(string(r.kind) + "-1\n")
			return
		}
		n := len(r.elems)
		if r.kind == '%' || r.kind == '|' {
			n /= 2
		}
		fmt.Fprintf(b, "%c%d\n", r.kind, n)
		for _, e := range r.elems {
			e.render(b, indent+"  ")
		}
		return
	case '_':
		b.WriteString("_\n")
		return
	}
	b.WriteString(string(r.kind) + r.str + "\n")
}

// sorted returns the reply with the elements of an array or set in the
// order of their rendering, and the pairs of a map by key; with pairs, an
// array is taken as key/value pairs (HGETALL in RESP2). It makes replies in
// hash order comparable.
func (r reply) sorted(pairs bool) reply {
	switch r.kind {
	case '%', '|':
		pairs = true
	case '*', '~':
	default:
		return r
	}
	out := r
	if !pairs {
		out.elems = append([]reply(nil), r.elems...)
		sort.Slice(out.elems, func(i, j int) bool { return out.elems[i].String() < out.elems[j].String() })
		return out
	}
	type kv struct{ k, v reply }
	var kvs []kv
	for i := 0; i+1 < len(r.elems); i += 2 {
		kvs = append(kvs, kv{r.elems[i], r.elems[i+1]})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].k.String() < kvs[j].k.String() })
	out.elems = nil
	for _, p := range kvs {
		out.elems = append(out.elems, p.k, p.v)
	}
	return out
}

// encodeCommand is the RESP multibulk encoding of a command.
func encodeCommand(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// wireConn is one raw connection. Every read has a deadline, so a server
// that does not answer fails the test instead of hanging it.
type wireConn struct {
	c net.Conn
	r *bufio.Reader
}

const wireTimeout = 10 * time.Second

func dialWire(t testing.TB) *wireConn {
	t.Helper()
	return dialWireAddr(t, tgt(t).addr)
}

func dialWireAddr(t testing.TB, addr string) *wireConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	w := &wireConn{c: c, r: bufio.NewReaderSize(c, 1<<16)}
	t.Cleanup(w.close)
	return w
}

func (w *wireConn) close() { w.c.Close() }

// write sends raw bytes.
func (w *wireConn) write(t testing.TB, raw string) {
	t.Helper()
	w.c.SetWriteDeadline(time.Now().Add(wireTimeout))
	if _, err := io.WriteString(w.c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// read reads one reply.
func (w *wireConn) read(t testing.TB) reply {
	t.Helper()
	rep, err := w.tryRead()
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return rep
}

func (w *wireConn) tryRead() (reply, error) {
	w.c.SetReadDeadline(time.Now().Add(wireTimeout))
	return readReply(w.r)
}

// do sends a command and reads its reply.
func (w *wireConn) do(t testing.TB, args ...string) reply {
	t.Helper()
	w.write(t, encodeCommand(args...))
	return w.read(t)
}

// expect sends a command and checks the rendered reply.
func (w *wireConn) expect(t testing.TB, want string, args ...string) {
	t.Helper()
	if got := w.do(t, args...).String(); got != want {
		t.Fatalf("%s: got\n%s\nwant\n%s", strings.Join(quoteArgs(args), " "), got, want)
	}
}

// expectClosed checks that the server closes the connection (after any
// replies already read): the next read ends with EOF or a reset, not a reply
// and not a timeout.
func (w *wireConn) expectClosed(t testing.TB) {
	t.Helper()
	w.c.SetReadDeadline(time.Now().Add(wireTimeout))
	rep, err := readReply(w.r)
	if err == nil {
		t.Fatalf("connection still open: got another reply %s", rep)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open: no reply and no close within %v", wireTimeout)
	}
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strconv.Quote(a)
	}
	return out
}

// splitCommand splits a transcript line into arguments: words separated by
// spaces, where a word starting with a double quote is a Go string literal
// ("a b", "\x00\xff").
func splitCommand(line string) ([]string, error) {
	var args []string
	for {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			return args, nil
		}
		if line[0] == '"' {
			lit, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, fmt.Errorf("bad quoted argument in %q: %v", line, err)
			}
			s, _ := strconv.Unquote(lit)
			args = append(args, s)
			line = line[len(lit):]
			if line != "" && line[0] != ' ' && line[0] != '\t' {
				return nil, fmt.Errorf("text right after a quoted argument: %q", line)
			}
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		args = append(args, line[:end])
		line = line[end:]
	}
}

func TestReplyReader(t *testing.T) {
	// The reader and renderer themselves: every RESP3 type, nesting, nulls.
	in := "+OK\r\n-ERR x\r\n:-3\r\n$3\r\na\r\n\r\n$-1\r\n*-1\r\n*2\r\n$1\r\nx\r\n*1\r\n:1\r\n" +
		"%1\r\n+k\r\n,1.5\r\n~1\r\n#t\r\n_\r\n=7\r\ntxt:abc\r\n(123\r\n>1\r\n+p\r\n"
	want := []string{"+OK", "-ERR x", ":-3", `"a\r\n"`, "$-1", "*-1", "*2\n  \"x\"\n  *1\n    :1",
		"%1\n  +k\n  ,1.5", "~1\n  #t", "_", `="txt:abc"`, "(123", ">1\n  +p"}
	r := bufio.NewReader(strings.NewReader(in))
	for i, w := range want {
		rep, err := readReply(r)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if rep.String() != w {
			t.Errorf("reply %d: got %q want %q", i, rep.String(), w)
		}
	}
	for _, bad := range []string{"?x\r\n", "$2\r\nabc\r\n", "+OK\n", "*x\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	got, err := splitCommand(`SET "a b" "\x00\xff" c`)
	if err != nil || len(got) != 4 || got[1] != "a b" || got[2] != "\x00\xff" || got[3] != "c" {
		t.Errorf("splitCommand: %q %v", got, err)
	}
	sortedRep := reply{kind: '*', elems: []reply{{kind: '$', str: "b"}, {kind: '$', str: "2"}, {kind: '$', str: "a"}, {kind: '$', str: "1"}}}
	if s := sortedRep.sorted(true).String(); s != "*4\n  \"a\"\n  \"1\"\n  \"b\"\n  \"2\"" {
		t.Errorf("sorted pairs: %q", s)
	}
}
