package resp

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestTranscripts replays the files of testdata/transcripts over raw
// connections and compares every reply, rendered by reply.String, with the
// recorded one. The recorded replies were produced by a real redis-server
// 7.0 (REDIS_COMPAT_ADDR=... go test ./test/resp -run TestTranscripts
// -rewrite) and reviewed by hand, so against strata a difference is a
// departure from Redis: a wrong reply type, value or error text.
//
// Each file starts from an empty keyspace with no open connections.
// Directives:
//
//	run [conn=NAME] [sort|sortpairs] [pipe]
//	  each input line is one command (words, or Go-quoted strings for
//	  spaces and bytes); the output has one rendered reply per command.
//	  conn picks a connection (default "main"; opened on first use). sort
//	  orders the elements of array and set replies, and the pairs of maps,
//	  for replies in hash order (KEYS, HKEYS, HGETALL); sortpairs orders an
//	  array as key/value pairs (HGETALL in RESP2). pipe sends every command
//	  in one write before reading the replies.
//	hello [conn=NAME] [proto=3] [auth=PASSWORD]
//	  sends HELLO proto (with AUTH default PASSWORD) and prints the keys of
//	  the map or array it returns and the value of proto (the values of id
//	  and version differ between servers), or the error.
//	raw [partial]
//	  on a new connection, sends the input: every line is a Go string
//	  literal, and the lines are sent back to back in one write. Then it
//	  prints every reply up to the end of a sentinel ECHO sent after the
//	  input, and "open" (the server kept the connection), or "closed" when
//	  the server closed the connection before answering the sentinel. With
//	  partial no sentinel is sent: the output ends with "waiting" when the
//	  server, still expecting the rest of a command, sends nothing more for
//	  300ms. Either way the server must then answer PING on a new
//	  connection.
//	closed [conn=NAME]
//	  prints "closed" when the server has closed the connection, "open"
//	  when it is still open after a second with nothing to read.
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata/transcripts", func(t *testing.T, path string) {
		runTranscriptFile(t, path, fresh(t).addr)
	})
}

// TestMalformedInput replays testdata/malformed: raw bytes, including
// malformed requests, and how the server answers (the recorded answers are
// Redis 7.0's).
func TestMalformedInput(t *testing.T) {
	datadriven.Walk(t, "testdata/malformed", func(t *testing.T, path string) {
		runTranscriptFile(t, path, fresh(t).addr)
	})
}

// runTranscriptFile runs one transcript file against the server at addr.
func runTranscriptFile(t *testing.T, path, addr string) {
	conns := map[string]*wireConn{}
	conn := func(t *testing.T, d *datadriven.TestData) *wireConn {
		name := "main"
		d.MaybeScanArgs(t, "conn", &name)
		w, ok := conns[name]
		if !ok {
			w = dialWireAddr(t, addr)
			conns[name] = w
		}
		return w
	}
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		switch d.Cmd {
		case "run":
			return runTranscript(t, conn(t, d), d)
		case "hello":
			proto := "3"
			d.MaybeScanArgs(t, "proto", &proto)
			args := []string{"HELLO", proto}
			if d.HasArg("auth") {
				var pw string
				d.ScanArgs(t, "auth", &pw)
				args = append(args, "AUTH", "default", pw)
			}
			return renderHello(conn(t, d).do(t, args...))
		case "raw":
			return runRaw(t, addr, d)
		case "closed":
			w := conn(t, d)
			w.c.SetReadDeadline(time.Now().Add(time.Second))
			rep, err := readReply(w.r)
			var ne net.Error
			switch {
			case err == nil:
				return "open, and sent " + rep.String()
			case errors.As(err, &ne) && ne.Timeout():
				return "open"
			default:
				return "closed"
			}
		}
		t.Fatalf("unknown directive %q", d.Cmd)
		return ""
	})
}

func runTranscript(t *testing.T, w *wireConn, d *datadriven.TestData) string {
	var cmds [][]string
	for _, line := range strings.Split(d.Input, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		args, err := splitCommand(line)
		if err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		cmds = append(cmds, args)
	}
	var out []string
	add := func(rep reply) {
		if d.HasArg("sort") {
			rep = rep.sorted(false)
		} else if d.HasArg("sortpairs") {
			rep = rep.sorted(true)
		}
		out = append(out, rep.String())
	}
	if d.HasArg("pipe") {
		var all strings.Builder
		for _, args := range cmds {
			all.WriteString(encodeCommand(args...))
		}
		w.write(t, all.String())
		for range cmds {
			add(w.read(t))
		}
	} else {
		for _, args := range cmds {
			add(w.do(t, args...))
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// renderHello prints the reply to HELLO without the values that differ
// between servers and connections: its type, its keys and proto.
func renderHello(rep reply) string {
	if rep.kind != '%' && rep.kind != '*' {
		return rep.String()
	}
	var keys []string
	proto := ""
	for i := 0; i+1 < len(rep.elems); i += 2 {
		keys = append(keys, rep.elems[i].String())
		if rep.elems[i].str == "proto" {
			proto = rep.elems[i+1].String()
		}
	}
	sort.Strings(keys)
	return fmt.Sprintf("%c%d keys %s\nproto %s", rep.kind, len(keys), strings.Join(keys, " "), proto)
}

// rawSentinel is the ECHO a raw directive sends after its input.
var rawSentinel = encodeCommand("ECHO", "raw-sentinel")

func runRaw(t *testing.T, addr string, d *datadriven.TestData) string {
	var in strings.Builder
	for _, line := range strings.Split(d.Input, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			t.Fatalf("%s: input line %s is not a Go string literal: %v", d.Pos, line, err)
		}
		in.WriteString(s)
	}
	partial := d.HasArg("partial")
	if !partial {
		in.WriteString(rawSentinel)
	}
	w := dialWireAddr(t, addr)
	defer w.close()
	w.write(t, in.String())
	var out []string
	for {
		timeout := 5 * time.Second
		if partial {
			timeout = 300 * time.Millisecond
		}
		w.c.SetReadDeadline(time.Now().Add(timeout))
		rep, err := readReply(w.r)
		var ne net.Error
		switch {
		case err == nil && !partial && rep.kind == '$' && rep.str == "raw-sentinel":
			out = append(out, "open")
		case err == nil:
			out = append(out, rep.String())
			continue
		case errors.As(err, &ne) && ne.Timeout():
			out = append(out, "waiting")
		case errors.Is(err, errProtocol):
			t.Fatalf("%s: the server sent bytes that are not RESP: %v", d.Pos, err)
		default:
			out = append(out, "closed")
		}
		break
	}
	if err := pingOnce(addr, ""); err != nil {
		t.Fatalf("%s: after this input the server does not answer PING on a new connection: %v", d.Pos, err)
	}
	return strings.Join(out, "\n") + "\n"
}
