package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// render prints a command as its quoted arguments, one string per command.
func render(args [][]byte) string {
	var sb strings.Builder
	for i, a := range args {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.Quote(string(a)))
	}
	return sb.String()
}

// readAll reads commands from r until an error and returns them with the
// error's text ("EOF", "unexpected EOF" or a protocol error's message).
// check, if set, is called after each command.
func readAll(r *Reader, check func([][]byte)) ([]string, string) {
	var cmds []string
	for {
		args, err := r.ReadCommand()
		if err != nil {
			return cmds, err.Error()
		}
		if len(args) == 0 {
			panic("ReadCommand returned a command without arguments")
		}
		if check != nil {
			check(args)
		}
		cmds = append(cmds, render(args))
	}
}

// chunkReader returns its input in the given pieces, one per Read.
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	return n, nil
}

type readerCase struct {
	name string
	in   string
	want []string // rendered commands
	err  string   // what ReadCommand returns after them
}

var readerCases = []readerCase{
	{name: "multibulk", in: "*1\r\n$4\r\nPING\r\n", want: []string{`"PING"`}, err: "EOF"},
	{name: "empty argument", in: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", want: []string{`"SET" "k" ""`}, err: "EOF"},
	{name: "binary argument", in: "*2\r\n$4\r\nECHO\r\n$7\r\na\r\n\x00\xff\"*\r\n",
		want: []string{`"ECHO" "a\r\n\x00\xff\"*"`}, err: "EOF"},
	{name: "empty and null arrays are skipped", in: "*0\r\n*-1\r\n*-5\r\n*-9223372036854775808\r\n*1\r\n$4\r\nPING\r\n*0\r\n",
		want: []string{`"PING"`}, err: "EOF"},
	{name: "bytes after a header's CR and after bulk data are not checked", in: "*2\rX$4\r\nECHOxy$3\r\rabc\n\n",
		want: []string{`"ECHO" "abc"`}, err: "EOF"},
	{name: "a header needs its CR", in: "*1\n$4\nPING\n", err: "unexpected EOF"},
	{name: "truncated bulk", in: "*1\r\n$4\r\nPING", err: "unexpected EOF"},
	{name: "truncated after the data", in: "*1\r\n$4\r\nPING\r", err: "unexpected EOF"},
	{name: "nothing", in: "", err: "EOF"},
	{name: "inline", in: "PING\r\nSET k v\nGET k\r\n", want: []string{`"PING"`, `"SET" "k" "v"`, `"GET" "k"`}, err: "EOF"},
	{name: "empty inline lines are skipped", in: "\r\n\n  \t\r\n\v\f\nPING\r\n\n", want: []string{`"PING"`}, err: "EOF"},
	{name: "inline without newline", in: "PING", err: "unexpected EOF"},
	{name: "inline and multibulk mixed", in: "ECHO a\r\n*2\r\n$4\r\nECHO\r\n$1\r\nb\r\nECHO c\n",
		want: []string{`"ECHO" "a"`, `"ECHO" "b"`, `"ECHO" "c"`}, err: "EOF"},
	{name: "a $ line is an inline command", in: "$4\r\nPING\r\n", want: []string{`"$4"`, `"PING"`}, err: "EOF"},
	{name: "largest multibulk count is accepted", in: "*1048576\r\n", err: "unexpected EOF"},
	{name: "a 64 KiB count line is read (and is no number)",
		in:  "*" + strings.Repeat("1", maxLine-1) + "\r\n",
		err: "Protocol error: invalid multibulk length"},
	{name: "64 KiB inline line", in: strings.Repeat("a", maxLine) + "\n",
		want: []string{strconv.Quote(strings.Repeat("a", maxLine))}, err: "EOF"},
	{name: "64 KiB inline line and CR: the CR counts", in: strings.Repeat("a", maxLine) + "\r\n",
		err: "Protocol error: too big inline request"},
	{name: "64 KiB without terminator is still waiting", in: "*1\r\n$" + strings.Repeat("1", maxLine-1), err: "unexpected EOF"},
}

var errorCases = []readerCase{
	{name: "empty count", in: "*\r\n"},
	{name: "non-numeric count", in: "*abc\r\n"},
	{name: "leading zero", in: "*01\r\n"},
	{name: "plus sign", in: "*+1\r\n"},
	{name: "minus zero", in: "*-0\r\n"},
	{name: "space in count", in: "*1 \r\n"},
	{name: "count above 1024*1024", in: "*1048577\r\n"},
	{name: "count overflows int64", in: "*99999999999999999999\r\n"},
	{name: "count underflows int64", in: "*-9223372036854775809\r\n"},
	{name: "count with NUL", in: "*1\x00\r\n"},
	{name: "not a bulk", in: "*1\r\nx\r\n"},
	{name: "empty element line", in: "*1\r\n\r\n"},
	{name: "newline where a bulk belongs", in: "*1\r\n\n\r\n"},
	{name: "integer element", in: "*2\r\n$4\r\nECHO\r\n:1\r\n"},
	{name: "high byte element", in: "*1\r\n\xff\r\n"},
	{name: "null bulk in a request", in: "*1\r\n$-1\r\n"},
	{name: "non-numeric bulk length", in: "*1\r\n$abc\r\n"},
	{name: "empty bulk length", in: "*1\r\n$\r\n"},
	{name: "bulk length with leading zero", in: "*1\r\n$04\r\nPING\r\n"},
	{name: "bulk length above the limit", in: "*1\r\n$1025\r\n"},
	{name: "too big mbulk count string", in: "*" + strings.Repeat("1", maxLine)},
	{name: "too big bulk count string", in: "*1\r\n$" + strings.Repeat("1", maxLine)},
	{name: "too big bulk line that is not a bulk", in: "*1\r\n" + strings.Repeat("x", maxLine+10) + "\r\n"},
	{name: "too big inline request", in: strings.Repeat("a", maxLine+1)},
	{name: "too big inline request, newline too late", in: strings.Repeat("a", maxLine+1) + "\n"},
	{name: "unterminated double quote", in: "ECHO \"abc\r\n"},
	{name: "unterminated single quote", in: "ECHO 'abc\r\n"},
	{name: "text after closing quote", in: "ECHO \"abc\"def\r\n"},
	{name: "quote after closing quote", in: "ECHO \"a\"'b'\r\n"},
	{name: "quote inside an argument", in: "ECHO a\"b c\"d\r\n"},
	{name: "escaped closing quote", in: "ECHO \"abc\\\"\r\n"},
	{name: "backslash at end of line", in: "ECHO \"abc\\\r\n"},
	{name: "after good commands", in: "PING\r\n*1\r\n$4\r\nPING\r\n*1\r\nx\r\nPING\r\n"},
}

var errorWant = map[string]string{
	"empty count":                              "invalid multibulk length",
	"non-numeric count":                        "invalid multibulk length",
	"leading zero":                             "invalid multibulk length",
	"plus sign":                                "invalid multibulk length",
	"minus zero":                               "invalid multibulk length",
	"space in count":                           "invalid multibulk length",
	"count above 1024*1024":                    "invalid multibulk length",
	"count overflows int64":                    "invalid multibulk length",
	"count underflows int64":                   "invalid multibulk length",
	"count with NUL":                           "invalid multibulk length",
	"not a bulk":                               "expected '$', got 'x'",
	"empty element line":                       "expected '$', got ' '",
	"newline where a bulk belongs":             "expected '$', got ' '",
	"integer element":                          "expected '$', got ':'",
	"high byte element":                        "expected '$', got '\xff'",
	"null bulk in a request":                   "invalid bulk length",
	"non-numeric bulk length":                  "invalid bulk length",
	"empty bulk length":                        "invalid bulk length",
	"bulk length with leading zero":            "invalid bulk length",
	"bulk length above the limit":              "invalid bulk length",
	"too big mbulk count string":               "too big mbulk count string",
	"too big bulk count string":                "too big bulk count string",
	"too big bulk line that is not a bulk":     "too big bulk count string",
	"too big inline request":                   "too big inline request",
	"too big inline request, newline too late": "too big inline request",
	"unterminated double quote":                "unbalanced quotes in request",
	"unterminated single quote":                "unbalanced quotes in request",
	"text after closing quote":                 "unbalanced quotes in request",
	"quote after closing quote":                "unbalanced quotes in request",
	"quote inside an argument":                 "unbalanced quotes in request",
	"escaped closing quote":                    "unbalanced quotes in request",
	"backslash at end of line":                 "unbalanced quotes in request",
	"after good commands":                      "expected '$', got 'x'",
}

const testMaxBulk = 1024

func TestReaderCommands(t *testing.T) {
	for _, tc := range readerCases {
		t.Run(tc.name, func(t *testing.T) {
			cmds, err := readAll(NewReader(strings.NewReader(tc.in), testMaxBulk), nil)
			if fmt.Sprint(cmds) != fmt.Sprint(tc.want) || err != tc.err {
				t.Fatalf("got %q, %q\nwant %q, %q", cmds, err, tc.want, tc.err)
			}
		})
	}
}

// TestReaderProtocolErrors: every malformed input gets Redis's message, after
// the commands before it, and the error sticks.
func TestReaderProtocolErrors(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.in), testMaxBulk)
			cmds, err := readAll(r, nil)
			want := "Protocol error: " + errorWant[tc.name]
			if err != want {
				t.Fatalf("error %q, want %q", err, want)
			}
			if tc.name == "after good commands" && fmt.Sprint(cmds) != `["PING" "PING"]` {
				t.Fatalf("commands before the error: %q", cmds)
			}
			_, again := r.ReadCommand()
			var pe *ProtocolError
			if !errors.As(again, &pe) || pe.Msg != want {
				t.Fatalf("second call: %v, want the same protocol error", again)
			}
		})
	}
}

func TestReaderBulkLimit(t *testing.T) {
	ok := "*2\r\n$4\r\nECHO\r\n$1024\r\n" + strings.Repeat("v", 1024) + "\r\n"
	cmds, err := readAll(NewReader(strings.NewReader(ok), 1024), nil)
	if len(cmds) != 1 || err != "EOF" {
		t.Fatalf("1024-byte argument with limit 1024: %d commands, %s", len(cmds), err)
	}
	_, err = readAll(NewReader(strings.NewReader("*2\r\n$4\r\nECHO\r\n$1025\r\n"), 1024), nil)
	if err != "Protocol error: invalid bulk length" {
		t.Fatalf("1025-byte argument with limit 1024: %s", err)
	}
	if r := NewReader(strings.NewReader(""), 0); r.maxBulk != DefaultMaxBulk {
		t.Fatalf("default limit %d", r.maxBulk)
	}
}

func TestReaderInline(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string
	}{
		{`SET k "v w"`, `"SET" "k" "v w"`},
		{`ECHO "a\x41\n"`, `"ECHO" "aA\n"`},
		{`ECHO "\xaB\a\b\t\r"`, `"ECHO" "\xab\a\b\t\r"`},
		{`ECHO "\xZZ"`, `"ECHO" "xZZ"`},
		{`ECHO "\x4"`, `"ECHO" "x4"`},
		{`ECHO "\q\\\""`, `"ECHO" "q\\\""`},
		{`ECHO 'a\'b'`, `"ECHO" "a'b"`},
		{`ECHO 'a\nb"'`, `"ECHO" "a\\nb\""`},
		{`ECHO "" ''`, `"ECHO" "" ""`},
		{"ECHO \"a\"\t", `"ECHO" "a"`},
		{"ECHO \"a\"\v", `"ECHO" "a"`},
		{"ECHO 'a'\f", `"ECHO" "a"`},
		{"ECHO a\vb", `"ECHO" "a\vb"`},
		{"ECHO \vx", `"ECHO" "x"`},
		{"ECHO\tx", `"ECHO" "x"`},
		{"ECHO x\ry", `"ECHO" "x" "y"`},
		{`ECHO a"b c"`, `"ECHO" "ab c"`},
		{`ECHO a'b c'`, `"ECHO" "ab c"`},
		{"  lead   trail  ", `"lead" "trail"`},
		{"PING\r", `"PING"`},
		{"ECHO a\x00b", `"ECHO" "a\x00b"`},
		{"ECHO \"\x00\"", `"ECHO" "\x00"`},
		{`"quoted command" x`, `"quoted command" "x"`},
	} {
		cmds, err := readAll(NewReader(strings.NewReader(tc.line+"\r\n"), testMaxBulk), nil)
		if len(cmds) != 1 || cmds[0] != tc.want || err != "EOF" {
			t.Errorf("%q: got %q, %s; want %s", tc.line, cmds, err, tc.want)
		}
	}
}

// pipeline is a mix of everything a client may send, parsed alike whatever
// the packet boundaries.
const pipeline = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$10\r\nva\r\nl\x00ue\xff!\r\n" +
	"*0\r\n" +
	"GET key\r\n" +
	"\r\n" +
	"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n" +
	"*-1\r\n" +
	"SET \"k y\" 'v\\'w' \"\\x41\\n\"\n" +
	"*1\r\n$4\r\nPING\r\n" +
	"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n" +
	"  MGET a   b\tc  \r\n"

var pipelineWant = []string{
	`"SET" "key" "va\r\nl\x00ue\xff!"`,
	`"GET" "key"`,
	`"GET" "key"`,
	`"SET" "k y" "v'w" "A\n"`,
	`"PING"`,
	`"ECHO" ""`,
	`"MGET" "a" "b" "c"`,
}

func TestReaderSplitAnywhere(t *testing.T) {
	in := []byte(pipeline)
	check := func(t *testing.T, what string, rd io.Reader, withBuffered bool) {
		t.Helper()
		r := NewReader(rd, testMaxBulk)
		cmds, err := readAll(r, func([][]byte) {
			if withBuffered {
				r.Buffered()
			}
		})
		if fmt.Sprint(cmds) != fmt.Sprint(pipelineWant) || err != "EOF" {
			t.Fatalf("%s: got %q, %s", what, cmds, err)
		}
	}
	check(t, "whole", bytes.NewReader(in), false)
	check(t, "one byte at a time", iotest.OneByteReader(bytes.NewReader(in)), false)
	check(t, "one byte at a time, Buffered after each command", iotest.OneByteReader(bytes.NewReader(in)), true)
	for i := 1; i < len(in); i++ {
		check(t, fmt.Sprintf("split at %d", i), &chunkReader{chunks: [][]byte{in[:i:i], in[i:]}}, i%2 == 0)
	}
	// Errors, too, come out the same however the bytes arrive.
	for _, tc := range append(errorCases, readerCases...) {
		whole, werr := readAll(NewReader(strings.NewReader(tc.in), testMaxBulk), nil)
		bytewise, berr := readAll(NewReader(iotest.OneByteReader(strings.NewReader(tc.in)), testMaxBulk), nil)
		if fmt.Sprint(whole) != fmt.Sprint(bytewise) || werr != berr {
			t.Errorf("%s: whole %q %s, one byte at a time %q %s", tc.name, whole, werr, bytewise, berr)
		}
	}
}

func TestReaderAliasing(t *testing.T) {
	r := NewReader(strings.NewReader("*3\r\n$4\r\nECHO\r\n$1\r\na\r\n$1\r\nb\r\nECHO \"x\\x41\"\r\n"), testMaxBulk)
	args, err := r.ReadCommand()
	if err != nil {
		t.Fatal(err)
	}
	if cap(args[1]) != 1 {
		t.Fatalf("argument capacity %d, want 1 (an append must not overwrite the next argument)", cap(args[1]))
	}
	_ = append(args[1], 'Z')
	if string(args[2]) != "b" {
		t.Fatalf("append to one argument changed the next: %q", args[2])
	}
	// Buffered parses the next (inline) command in place; the current one
	// stays intact until the next ReadCommand.
	if r.Buffered() == 0 {
		t.Fatal("a complete command is buffered")
	}
	if render(args) != `"ECHO" "a" "b"` {
		t.Fatalf("Buffered disturbed the current command: %s", render(args))
	}
	args, err = r.ReadCommand()
	if err != nil || render(args) != `"ECHO" "xA"` {
		t.Fatalf("%q %v", args, err)
	}
}

func TestReaderBuffered(t *testing.T) {
	for _, tc := range []struct {
		in    string
		after int // Buffered after the first command: 0, or >0 as 1
	}{
		{"PING\r\nPING\r\n", 1},
		{"PING\r\n", 0},
		{"PING\r\n*1\r\n$4\r\nPI", 0}, // only part of the next command: flush now
		{"PING\r\nPI", 0},
		{"PING\r\n*0\r\n\r\n", 0}, // nothing that makes a command
		{"PING\r\n*x\r\n", 1},     // malformed: ReadCommand reports it at once
	} {
		r := NewReader(strings.NewReader(tc.in), testMaxBulk)
		if _, err := r.ReadCommand(); err != nil {
			t.Fatal(err)
		}
		got := r.Buffered()
		if (got > 0) != (tc.after > 0) {
			t.Errorf("%q: Buffered %d after the first command", tc.in, got)
		}
	}
	r := NewReader(strings.NewReader("PING\r\nPING\r\n"), testMaxBulk)
	r.ReadCommand()
	if got := r.Buffered(); got != 6 {
		t.Errorf("Buffered %d, want the 6 bytes of the next command", got)
	}
}

// TestReaderUnauthenticated: Redis 7's lower limits before AUTH, lifted by
// AUTH even for a command pipelined behind it.
func TestReaderUnauthenticated(t *testing.T) {
	auth := "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
	big := "*2\r\n$4\r\nECHO\r\n$20000\r\n" + strings.Repeat("x", 20000) + "\r\n"
	many := "*11\r\n" + strings.Repeat("$1\r\na\r\n", 11)

	for _, tc := range []struct {
		in   string
		auth bool // call SetUnauthenticated(false) after the first command
		want string
	}{
		{big, false, "Protocol error: unauthenticated bulk length"},
		{many, false, "Protocol error: unauthenticated multibulk length"},
		{"*10\r\n" + strings.Repeat("$1\r\na\r\n", 10), false, "EOF"},
		{"*1\r\n$16384\r\n" + strings.Repeat("x", 16384) + "\r\n", false, "EOF"},
		{auth + big, true, "EOF"},
		{auth + many, true, "EOF"},
		{auth + big, false, "Protocol error: unauthenticated bulk length"},
	} {
		r := NewReader(strings.NewReader(tc.in), 0)
		r.SetUnauthenticated(true)
		var err error
		for i := 0; ; i++ {
			if _, err = r.ReadCommand(); err != nil {
				break
			}
			// The server asks before running the command; AUTH has not run
			// yet, so the lookahead must not fail the pipelined command.
			r.Buffered()
			if i == 0 && tc.auth {
				r.SetUnauthenticated(false)
			}
		}
		if err.Error() != tc.want {
			t.Errorf("%.30q auth=%v: %v, want %s", tc.in, tc.auth, err, tc.want)
		}
	}
}

// stallReader hands out what it is given and reports errStall when it has
// nothing, like a connection with a read deadline.
type stallReader struct{ data []byte }

var errStall = errors.New("stall")

func (s *stallReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, errStall
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

// TestReaderMemoryFollowsData: a header announcing 60 MiB allocates as the
// bytes arrive, not up front; afterwards the buffer shrinks back.
func TestReaderMemoryFollowsData(t *testing.T) {
	const size = 60 << 20
	src := &stallReader{data: []byte("*2\r\n$3\r\nSET\r\n$" + strconv.Itoa(size) + "\r\n")}
	r := NewReader(src, 0)
	received, sent := len(src.data), 0
	chunk := bytes.Repeat([]byte{'v'}, 1<<20)
	for {
		if _, err := r.ReadCommand(); err != errStall {
			t.Fatalf("got %v before the value arrived", err)
		}
		if limit := max(readBufSize, 2*received); len(r.buf) > limit {
			t.Fatalf("buffer %d bytes after %d received", len(r.buf), received)
		}
		if r.Buffered() != 0 {
			t.Fatal("Buffered reports a complete command")
		}
		if sent == size {
			break
		}
		src.data = chunk[:min(len(chunk), size-sent)]
		sent += len(src.data)
		received += len(src.data)
	}
	src.data = []byte("\r\nPING\r\n")
	args, err := r.ReadCommand()
	if err != nil || len(args) != 2 || len(args[1]) != size {
		t.Fatalf("%v, %d args", err, len(args))
	}
	if len(r.buf) > 2*size {
		t.Fatalf("buffer %d for a %d-byte command", len(r.buf), size)
	}
	if args, err = r.ReadCommand(); err != nil || render(args) != `"PING"` {
		t.Fatalf("%q %v", args, err)
	}
	if len(r.buf) != readBufSize {
		t.Fatalf("buffer still %d bytes after the large command", len(r.buf))
	}
}

// TestReaderResumesAfterReadError: a read error (a deadline) does not lose
// the part of a command already read.
func TestReaderResumesAfterReadError(t *testing.T) {
	src := &stallReader{data: []byte("*2\r\n$4\r\nECHO\r\n$5\r\nhe")}
	r := NewReader(src, 0)
	if _, err := r.ReadCommand(); err != errStall {
		t.Fatal(err)
	}
	src.data = []byte("llo\r\n")
	args, err := r.ReadCommand()
	if err != nil || render(args) != `"ECHO" "hello"` {
		t.Fatalf("%q %v", args, err)
	}
}

type writerCase struct {
	name   string
	write  func(w *Writer)
	resp2  string
	resp3  string
	hasRaw bool
}

var writerCases = []writerCase{
	{"simple", func(w *Writer) { w.WriteSimple("OK") }, "+OK\r\n", "+OK\r\n", false},
	{"simple with line breaks", func(w *Writer) { w.WriteSimple("a\r\nb") }, "+a  b\r\n", "+a  b\r\n", false},
	{"error", func(w *Writer) { w.WriteError("WRONGTYPE Operation against a key holding the wrong kind of value") },
		"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
		"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", false},
	{"error with line breaks", func(w *Writer) { w.WriteError("ERR a\nb\r") }, "-ERR a b \r\n", "-ERR a b \r\n", false},
	{"error with its dash", func(w *Writer) { w.WriteError("-ERR x") }, "-ERR x\r\n", "-ERR x\r\n", false},
	{"int", func(w *Writer) { w.WriteInt(-42) }, ":-42\r\n", ":-42\r\n", false},
	{"int min", func(w *Writer) { w.WriteInt(math.MinInt64) }, ":-9223372036854775808\r\n", ":-9223372036854775808\r\n", false},
	{"bulk", func(w *Writer) { w.WriteBulk([]byte("a\r\nb")) }, "$4\r\na\r\nb\r\n", "$4\r\na\r\nb\r\n", false},
	{"empty bulk", func(w *Writer) { w.WriteBulk(nil) }, "$0\r\n\r\n", "$0\r\n\r\n", false},
	{"bulk string", func(w *Writer) { w.WriteBulkString("héllo") }, "$6\r\nhéllo\r\n", "$6\r\nhéllo\r\n", false},
	{"null", func(w *Writer) { w.WriteNull() }, "$-1\r\n", "_\r\n", false},
	{"null array", func(w *Writer) { w.WriteNullArray() }, "*-1\r\n", "_\r\n", false},
	{"array", func(w *Writer) { w.WriteArrayLen(2); w.WriteInt(1); w.WriteBulkString("x") }, "*2\r\n:1\r\n$1\r\nx\r\n", "*2\r\n:1\r\n$1\r\nx\r\n", false},
	{"empty array", func(w *Writer) { w.WriteArrayLen(0) }, "*0\r\n", "*0\r\n", false},
	{"map", func(w *Writer) { w.WriteMapLen(1); w.WriteBulkString("f"); w.WriteBulkString("v") },
		"*2\r\n$1\r\nf\r\n$1\r\nv\r\n", "%1\r\n$1\r\nf\r\n$1\r\nv\r\n", false},
	{"set", func(w *Writer) { w.WriteSetLen(2); w.WriteBulkString("a"); w.WriteBulkString("b") },
		"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "~2\r\n$1\r\na\r\n$1\r\nb\r\n", false},
	{"double", func(w *Writer) { w.WriteDouble(1.5) }, "$3\r\n1.5\r\n", ",1.5\r\n", false},
	{"double integer", func(w *Writer) { w.WriteDouble(3) }, "$1\r\n3\r\n", ",3\r\n", false},
	{"double inf", func(w *Writer) { w.WriteDouble(math.Inf(-1)) }, "$4\r\n-inf\r\n", ",-inf\r\n", false},
	{"double nan", func(w *Writer) { w.WriteDouble(math.NaN()) }, "$3\r\nnan\r\n", ",nan\r\n", false},
	{"bool", func(w *Writer) { w.WriteBool(true); w.WriteBool(false) }, ":1\r\n:0\r\n", "#t\r\n#f\r\n", false},
	{"verbatim", func(w *Writer) { w.WriteVerbatim("txt", "a\r\nb") }, "$4\r\na\r\nb\r\n", "=8\r\ntxt:a\r\nb\r\n", false},
	{"verbatim bad format", func(w *Writer) { w.WriteVerbatim("markdown", "x") }, "$1\r\nx\r\n", "=5\r\ntxt:x\r\n", false},
	{"raw", func(w *Writer) { w.WriteRaw([]byte("+QUEUED\r\n:1\r\n")) }, "+QUEUED\r\n:1\r\n", "+QUEUED\r\n:1\r\n", true},
}

func TestWriterReplies(t *testing.T) {
	for _, tc := range writerCases {
		for _, proto := range []int{2, 3} {
			var out bytes.Buffer
			w := NewWriter(&out)
			if w.Proto() != 2 {
				t.Fatalf("default protocol %d", w.Proto())
			}
			w.SetProto(proto)
			tc.write(w)
			if w.Buffered() == 0 || out.Len() != 0 {
				t.Fatalf("%s: a small reply must stay buffered until Flush", tc.name)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			want := tc.resp2
			if proto == 3 {
				want = tc.resp3
			}
			if out.String() != want {
				t.Errorf("%s RESP%d: %q, want %q", tc.name, proto, out.String(), want)
			}
		}
	}
	w := NewWriter(io.Discard)
	for _, v := range []int{3, 2, 0, 4} {
		w.SetProto(v)
		want := 2
		if v == 3 {
			want = 3
		}
		if w.Proto() != want {
			t.Errorf("SetProto(%d): Proto %d", v, w.Proto())
		}
	}
}

// TestWriterRepliesParse: every RESP2 reply the Writer produces is read back
// by a strict RESP parser (the framing a client relies on).
func TestWriterRepliesParse(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	for _, tc := range writerCases {
		if !tc.hasRaw {
			tc.write(w)
		}
	}
	w.Flush()
	br := bufio.NewReader(&out)
	for br.Buffered() > 0 || out.Len() > 0 {
		if err := skipReply(br); err != nil {
			t.Fatalf("reply stream does not parse: %v (rest %q)", err, out.String())
		}
	}
}

// skipReply reads one RESP2 reply strictly.
func skipReply(br *bufio.Reader) error {
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasSuffix(line, "\r\n") || len(line) < 3 {
		return fmt.Errorf("bad line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-':
		if strings.ContainsAny(body, "\r\n") {
			return fmt.Errorf("line break in %q", line)
		}
		return nil
	case ':':
		_, err := strconv.ParseInt(body, 10, 64)
		return err
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return fmt.Errorf("bad bulk header %q", line)
		}
		if n == -1 {
			return nil
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(br, data); err != nil {
			return err
		}
		if string(data[n:]) != "\r\n" {
			return fmt.Errorf("bulk not terminated: %q", data)
		}
		return nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return fmt.Errorf("bad array header %q", line)
		}
		for range n {
			if err := skipReply(br); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown reply type %q", line)
}

// countWriter records each Write.
type countWriter struct {
	bytes.Buffer
	writes int
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

func TestWriterLargeAndBuffering(t *testing.T) {
	var out countWriter
	w := NewWriter(&out)
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	w.WriteSimple("OK")
	w.WriteBulk(big)
	w.WriteInt(7)
	if w.Buffered() > writeBufSize {
		t.Fatalf("large bulk copied into the buffer: %d buffered", w.Buffered())
	}
	w.Flush()
	want := "+OK\r\n$1000000\r\n" + string(big) + "\r\n:7\r\n"
	if out.String() != want {
		t.Fatal("large bulk garbled")
	}

	// Many small replies: the buffer is written out as it fills, and stays bounded.
	out.Reset()
	out.writes = 0
	for i := range 10_000 {
		w.WriteBulkString("value")
		w.WriteInt(int64(i))
		if w.Buffered() > writeBufSize+64 {
			t.Fatalf("buffer grew to %d", w.Buffered())
		}
	}
	w.Flush()
	if out.writes < 2 || out.writes > 20 {
		t.Fatalf("%d writes for ~140 KB of small replies", out.writes)
	}

	// WriteRaw of a large pre-encoded block (a committed transaction's replies).
	out.Reset()
	var block bytes.Buffer
	bw := NewWriter(&block)
	for range 5000 {
		bw.WriteBulkString("queued reply")
	}
	bw.Flush()
	w.WriteSimple("x")
	w.WriteRaw(block.Bytes())
	w.Flush()
	if out.String() != "+x\r\n"+block.String() {
		t.Fatal("WriteRaw garbled")
	}
}

// TestWriterReset: Reset drops what an aborted transaction attempt wrote and
// keeps the protocol; Flush then goes to the new destination.
func TestWriterReset(t *testing.T) {
	var first, second bytes.Buffer
	w := NewWriter(&first)
	w.SetProto(3)
	w.WriteSimple("attempt 1")
	w.Reset(&second)
	w.WriteNull()
	w.Flush()
	if first.Len() != 0 || second.String() != "_\r\n" {
		t.Fatalf("first %q, second %q", first.String(), second.String())
	}
}

type failWriter struct{ err error }

func (f failWriter) Write(p []byte) (int, error) { return 0, f.err }

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestWriterErrors(t *testing.T) {
	boom := errors.New("boom")
	w := NewWriter(failWriter{boom})
	w.WriteSimple("OK")
	if err := w.Flush(); err != boom {
		t.Fatalf("Flush: %v", err)
	}
	w.WriteBulk(make([]byte, 100_000))
	for range 10_000 {
		w.WriteSimple("dropped")
	}
	if w.Buffered() > writeBufSize || w.Flush() != boom {
		t.Fatalf("after an error: %d buffered, Flush %v", w.Buffered(), w.Flush())
	}
	w.Reset(io.Discard)
	w.WriteSimple("OK")
	if err := w.Flush(); err != nil {
		t.Fatalf("Reset keeps the error: %v", err)
	}
	w = NewWriter(shortWriter{})
	w.WriteSimple("OK")
	if err := w.Flush(); err != io.ErrShortWrite {
		t.Fatalf("short write: %v", err)
	}
}

// TestAppendDouble: Redis 7.2's d2string: integers as integers within ±2^62,
// otherwise the shortest digits in fpconv_dtoa's layout.
func TestAppendDouble(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "-0"},
		{math.NaN(), "nan"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
		{1, "1"},
		{-1, "-1"},
		{10000000, "10000000"},
		{1 << 62, "4611686018427387904"},
		{-(1 << 62), "-4611686018427387904"},
		{1 << 63, "9223372036854776000"}, // beyond the integer path: 16 digits and 3 zeros
		{1.5, "1.5"},
		{-1.5, "-1.5"},
		{0.1, "0.1"},
		{-0.1, "-0.1"},
		{0.5, "0.5"},
		{100.25, "100.25"},
		{1.0 / 3, "0.3333333333333333"},
		{2.0 / 3, "0.6666666666666666"},
		{3.14159, "3.14159"},
		{12345678.9, "12345678.9"},
		{1e15 + 0.5, "1000000000000000.5"},
		{0.0001, "0.0001"},
		{0.00001, "0.00001"},
		{1e-6, "0.000001"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{-1.5e-7, "-1.5e-7"},
		{0.001234, "0.001234"},
		{0.0001234, "1.234e-4"}, // 7 places after the point: exponent form
		{1e20, "1e+20"},
		{1e21, "1e+21"},
		{1.5e20, "1.5e+20"}, // 19 trailing zeros: exponent form
		{1.2345678901234568e20, "123456789012345680000"},       // 4: plain
		{-1.2932734519210961e+23, "-129327345192109610000000"}, // 7: plain
		{1.293273451921096e+24, "1.293273451921096e+24"},       // 8: exponent form
		{1e100, "1e+100"},
		{1.5e300, "1.5e+300"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{5e-324, "5e-324"},
		{-2.2250738585072014e-308, "-2.2250738585072014e-308"},
	} {
		got := string(AppendDouble(nil, tc.f))
		if got != tc.want {
			t.Errorf("%v: %q, want %q", tc.f, got, tc.want)
		}
	}
}

// TestAppendDoubleRoundTrips: the text reads back as the same double, for
// random bit patterns and random decimals.
func TestAppendDoubleRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		var f float64
		if i%2 == 0 {
			f = math.Float64frombits(rng.Uint64())
		} else {
			f = float64(rng.IntN(2_000_000)-1_000_000) / math.Pow10(rng.IntN(12))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s := string(AppendDouble(nil, f))
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(back) != math.Float64bits(f) {
			t.Fatalf("%v (bits %x) -> %q -> %v %v", f, math.Float64bits(f), s, back, err)
		}
		if len(s) > 25 {
			t.Fatalf("%v -> %q: longer than the longest layout (sign, 17 digits, 7 zeros)", f, s)
		}
	}
}

// TestAgainstRedis sends the same bytes to a real redis-server and to this
// codec (driving ECHO, PING and AUTH the way Redis runs them) and compares
// the reply streams and whether the connection was closed. It runs only
// where redis-server is installed.
func TestAgainstRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	const password = "pw"
	addr := startRedis(t, bin, "--requirepass", password, "--proto-max-bulk-len", "1mb")

	auth := "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
	cases := []string{
		"*1\r\n$4\r\nPING\r\n",
		"*-1\r\n*-5\r\n*0\r\n*1\r\n$4\r\nPING\r\n",
		"*\r\n", "*abc\r\n", "*01\r\n", "*+1\r\n", "*-0\r\n", "*1 \r\n", "*2147483648\r\n",
		"*99999999999999999999\r\n",
		"*1\r\nx\r\n", "*1\r\n\r\n", "*1\r\n\n\r\n", "*1\r\n\xff\r\n", "*2\r\n$4\r\nECHO\r\n:1\r\n",
		"*1\r\n$-1\r\n", "*1\r\n$abc\r\n", "*1\r\n$\r\n", "*1\r\n$04\r\n",
		"*1\r\n$1048577\r\n", "*1\r\n$1048576\r\n", "*1048576\r\n",
		"*2\r\n$4\r\nECHO\r\n$3\r\nabcXY*1\rX$4\r\nPING\r\n",
		"*1\r\n$4\r\nPING\r\n*1\r\n*3\r\n",
		"PING\r\n", "PING\n", "\r\n\n  \r\n\v\r\nPING\r\n", "PING",
		"ECHO \"a\\x41\\n\"\r\n", "ECHO 'a\\'b'\r\n", "ECHO \"\\q\\\\\"\r\n", "ECHO \"\\x4\"\r\n",
		"ECHO \"\\xZZ\\xaB\\a\\b\\t\\r\"\r\n", "ECHO a\vb\r\n", "ECHO \vx\r\n", "ECHO\tx\r\n",
		"ECHO \"a\"\t\r\n", "ECHO \"\"\r\n", "ECHO a\"b c\"\r\n", "ECHO 'a\\nb'\r\n",
		"ECHO \"abc\r\n", "ECHO 'abc\r\n", "ECHO \"abc\"def\r\n", "ECHO \"abc\\\"\r\n", "ECHO \"a\"'b'\r\n",
		"ECHO a\"b c\"d\r\n",
		strings.Repeat("a", maxLine+1),
		strings.Repeat("a", maxLine),
		"ECHO " + strings.Repeat("a", maxLine-6) + "\n",
		"*" + strings.Repeat("1", maxLine),
		"*" + strings.Repeat("1", maxLine-1),
		"*1\r\n$" + strings.Repeat("1", maxLine),
		"*1\r\n$" + strings.Repeat("1", maxLine-2),
		"*11\r\n",
		"*1\r\n$20000\r\n",
	}
	type run struct {
		in, got, want string
		gotClosed     bool
		wantClosed    bool
	}
	var runs []*run
	for _, c := range cases {
		runs = append(runs, &run{in: auth + c})
	}
	// Before AUTH: Redis 7's lower limits, and NOAUTH for commands.
	for _, c := range []string{
		"*11\r\n", "*10\r\n", "*1\r\n$16385\r\n", "*1\r\n$16384\r\n", "*1\r\n$4\r\nPING\r\n", "*-1\r\n",
		auth + "*2\r\n$4\r\nECHO\r\n$20000\r\n" + strings.Repeat("x", 20000) + "\r\n",
	} {
		runs = append(runs, &run{in: c})
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		r.want, r.wantClosed = modelServer(r.in, password)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.got, r.gotClosed = sendRaw(t, addr, r.in)
		}()
	}
	wg.Wait()
	for _, r := range runs {
		if r.got != r.want || r.gotClosed != r.wantClosed {
			t.Errorf("input %.80q\nredis: %.200q closed=%v\ncodec: %.200q closed=%v",
				r.in, r.got, r.gotClosed, r.want, r.wantClosed)
		}
	}
}

// modelServer runs in through a Reader and Writer the way the gateway does,
// for the commands AUTH, PING and ECHO. It returns the reply stream and
// whether the server would close the connection.
func modelServer(in, password string) (string, bool) {
	var out bytes.Buffer
	w := NewWriter(&out)
	r := NewReader(strings.NewReader(in), 1<<20)
	authed := false
	r.SetUnauthenticated(true)
	for {
		args, err := r.ReadCommand()
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				w.WriteError("ERR " + pe.Msg)
				w.Flush()
				return out.String(), true
			}
			w.Flush()
			return out.String(), false
		}
		name := strings.ToLower(string(args[0]))
		switch {
		case name == "auth" && len(args) == 2 && string(args[1]) == password:
			authed = true
			r.SetUnauthenticated(false)
			w.WriteSimple("OK")
		case !authed:
			w.WriteError("NOAUTH Authentication required.")
		case name == "ping" && len(args) == 1:
			w.WriteSimple("PONG")
		case name == "echo" && len(args) == 2:
			w.WriteBulk(args[1])
		default:
			panic(fmt.Sprintf("model has no reply for %q", args))
		}
		if r.Buffered() == 0 {
			w.Flush()
		}
	}
}

func sendRaw(t *testing.T, addr, in string) (string, bool) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return "", false
	}
	defer c.Close()
	if _, err := c.Write([]byte(in)); err != nil {
		t.Error(err)
		return "", false
	}
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return string(got), false
	}
	return string(got), true
}

// startRedis runs redis-server on a free loopback port for the test.
func startRedis(t *testing.T, bin string, args ...string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--daemonize", "no"}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := "127.0.0.1:" + port
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
	}
	t.Fatal("redis-server did not start")
	return ""
}

// cycleReader repeats data forever without allocating.
type cycleReader struct {
	data []byte
	off  int
}

func (c *cycleReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], c.data[c.off:])
		n += k
		c.off = (c.off + k) % len(c.data)
	}
	return n, nil
}

// BenchmarkReadCommand parses pipelined GET and SET commands of typical
// size (16-byte keys, 64-byte values); steady state allocates nothing.
func BenchmarkReadCommand(b *testing.B) {
	var in bytes.Buffer
	val := strings.Repeat("v", 64)
	for i := range 100 {
		key := fmt.Sprintf("key:%012d", i)
		if i%2 == 0 {
			fmt.Fprintf(&in, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
		} else {
			fmt.Fprintf(&in, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(val), val)
		}
	}
	r := NewReader(&cycleReader{data: in.Bytes()}, 0)
	b.SetBytes(int64(in.Len() / 100))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := r.ReadCommand(); err != nil {
			b.Fatal(err)
		}
		r.Buffered()
	}
}

// BenchmarkReadCommandInline is the same for inline commands (redis-cli
// --pipe, telnet).
func BenchmarkReadCommandInline(b *testing.B) {
	r := NewReader(&cycleReader{data: []byte("SET key:000000000001 \"some value\"\r\nGET key:000000000001\r\n")}, 0)
	b.ReportAllocs()
	for range b.N {
		if _, err := r.ReadCommand(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriter writes a mix of replies in RESP3, flushing every 64.
func BenchmarkWriter(b *testing.B) {
	w := NewWriter(io.Discard)
	w.SetProto(3)
	val := bytes.Repeat([]byte("v"), 64)
	b.ReportAllocs()
	for i := range b.N {
		switch i % 6 {
		case 0:
			w.WriteBulk(val)
		case 1:
			w.WriteSimple("OK")
		case 2:
			w.WriteInt(int64(i))
		case 3:
			w.WriteNull()
		case 4:
			w.WriteMapLen(1)
			w.WriteBulkString("field")
			w.WriteBulk(val)
		case 5:
			w.WriteDouble(float64(i) / 7)
		}
		if i%64 == 63 {
			w.Flush()
		}
	}
}

// TestReaderRefusesCommandsAboveTheSizeLimit: arguments that are each under
// the limit but together far above it are refused once they add up, before
// their bytes are read, so one connection cannot make the server hold many
// maximum-size values.
func TestReaderRefusesCommandsAboveTheSizeLimit(t *testing.T) {
	const maxBulk = 2 << 20
	val := strings.Repeat("x", maxBulk)
	in := "*3\r\n$4\r\nMSET\r\n$" + strconv.Itoa(maxBulk) + "\r\n" + val + "\r\n$" + strconv.Itoa(maxBulk) + "\r\n"
	r := NewReader(strings.NewReader(in), maxBulk)
	_, err := r.ReadCommand()
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Msg != "Protocol error: command larger than the maximum value size" {
		t.Fatalf("got %v, want the command-size protocol error", err)
	}
	// One value of the largest size with a key is fine.
	in = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + strconv.Itoa(maxBulk) + "\r\n" + val + "\r\n"
	args, err := NewReader(strings.NewReader(in), maxBulk).ReadCommand()
	if err != nil || len(args) != 3 || len(args[2]) != maxBulk {
		t.Fatalf("SET of a maximum-size value: %v", err)
	}
}
