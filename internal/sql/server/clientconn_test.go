package server

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func packet(seq byte, payload string) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

func TestPrepareCaptureRewritesOnlyPrepareCommands(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	capture := newClientConn(server, 0)
	defer capture.Close()

	prepareFirst := "SELECT * FROM t WHERE a = ? FOR SHARE"
	prepareSecond := "SELECT ? + ? FOR UPDATE NOWAIT"
	var stream []byte
	stream = append(stream, packet(1, "\x16handshake response, not a command")...)
	stream = append(stream, packet(0, "\x03SELECT 1")...)
	stream = append(stream, packet(0, "\x16"+prepareFirst)...)
	stream = append(stream, packet(1, "\x16continuation-like packet, not a command")...)
	stream = append(stream, packet(0, "\x16"+prepareSecond)...)
	stream = append(stream, packet(0, "")...)
	go func() {
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(stream)
	}()

	var want []byte
	want = append(want, packet(1, "\x16handshake response, not a command")...)
	want = append(want, packet(0, "\x03SELECT 1")...)
	want = append(want, packet(0, "\x16SELECT 0")...)
	want = append(want, packet(1, "\x16continuation-like packet, not a command")...)
	want = append(want, packet(0, "\x16SELECT 1")...)
	want = append(want, packet(0, "")...)
	got := make([]byte, len(want))
	// Small reads exercise packets returned in pieces.
	for off := 0; off < len(got); {
		n, err := capture.Read(got[off:min(off+7, len(got))])
		if err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("rewritten stream\n got %q\nwant %q", got, want)
	}

	// The second placeholder reached the handler first: the first one's
	// prepare was answered by the library itself and is dropped.
	if text, ok := capture.originalQuery("SELECT 1"); !ok || text != prepareSecond {
		t.Fatalf("placeholder 1 -> %q, %v", text, ok)
	}
	if _, ok := capture.originalQuery("SELECT 0"); ok {
		t.Fatal("placeholder 0 should have been dropped")
	}
	if _, ok := capture.originalQuery("SELECT c FROM t"); ok {
		t.Fatal("a statement that is not a placeholder was mapped")
	}
}

// COM_PROCESS_KILL, which the protocol library does not know, reaches
// it as the query KILL id (PyMySQL's Connection.kill sends it).
func TestProcessKillBecomesAKillQuery(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	capture := newClientConn(server, 0)
	defer capture.Close()
	stream := append(packet(0, "\x0c\x55\x02\x00\x00"), packet(0, "\x03SELECT 1")...)
	go func() {
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(stream)
	}()
	want := append(packet(0, "\x03KILL 597"), packet(0, "\x03SELECT 1")...)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(capture, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("rewritten stream\n got %q\nwant %q", got, want)
	}
}

func TestPrepareCaptureReportsTruncatedPackets(t *testing.T) {
	client, server := net.Pipe()
	capture := newClientConn(server, 0)
	defer capture.Close()
	go func() {
		client.Write([]byte{10, 0, 0, 0, 0x16, 'S'})
		client.Close()
	}()
	_, err := io.ReadAll(capture)
	if err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Fatalf("truncated packet read as %v", err)
	}
}

func TestStatementsVitessCannotParseCanBePrepared(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "parseTime=true")
	query := "SELECT * FROM typed WHERE i32 = ? FOR SHARE NOWAIT"
	checkTypedRows(t, db, query, 1)
	ts.backend.mu.Lock()
	prepares := append([]string(nil), ts.backend.prepares...)
	ts.backend.mu.Unlock()
	if len(prepares) != 1 || prepares[0] != query {
		t.Fatalf("session was asked to prepare %q", prepares)
	}
}

func TestPrepareCaptureLeavesMultiPacketPreparesAlone(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	capture := newClientConn(server, 0)
	defer capture.Close()
	// A 16 MiB prepare (a full-size packet and a continuation) is passed
	// through untouched; the small prepare after it is rewritten.
	huge := append(packet(0, "\x16SELECT '"+strings.Repeat("x", maxPacketPayload-9)), packet(1, "'")...)
	small := packet(0, "\x16SELECT ?")
	go func() { client.Write(append(append([]byte(nil), huge...), small...)) }()

	got := make([]byte, len(huge))
	if _, err := io.ReadFull(capture, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, huge) {
		t.Fatal("multi-packet prepare was modified")
	}
	want := packet(0, "\x16SELECT 0")
	got = make([]byte, len(want))
	if _, err := io.ReadFull(capture, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("following prepare became %q", got)
	}
	if cap(capture.buf) > retainedBufferLimit {
		t.Fatalf("capture retains a %d-byte buffer after a small packet", cap(capture.buf))
	}
}

func TestHandshakeWatchFindsTheAuthenticationOK(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	conn := newClientConn(server, 0)
	defer conn.Close()
	go io.Copy(io.Discard, client)
	write := func(chunks ...string) {
		t.Helper()
		for _, ch := range chunks {
			if _, err := conn.Write([]byte(ch)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Greeting and an auth-switch request, header and body written apart,
	// the greeting's body in two pieces.
	greeting := string(packet(0, "\x0a8.0.11-strata\x00\x00salt"))
	write(greeting[:4], greeting[4:9], greeting[9:])
	authSwitch := string(packet(2, "\xfemysql_native_password\x00salt"))
	write(authSwitch[:4], authSwitch[4:])
	if conn.authenticated {
		t.Fatal("authenticated before the OK")
	}
	ok := string(packet(4, "\x00\x00\x00\x02\x00\x00\x00"))
	write(ok[:4], ok[4:])
	if !conn.authenticated {
		t.Fatal("the OK packet was not recognized")
	}
}

func TestStalledHandshakeIsDisconnected(t *testing.T) {
	ts := startServer(t, Config{AllowEmptyRootPassword: true, HandshakeTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	readPacket(t, c) // greeting; then say nothing
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("server sent data instead of closing a stalled handshake")
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("stalled client was kept for %v", waited)
	}

	// An authenticated connection may idle past the handshake timeout.
	c2, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(5 * time.Second))
	login(t, c2)
	time.Sleep(500 * time.Millisecond)
	writePacket(t, c2, 0, append([]byte{0x03}, "SELECT 1"...))
	if p := readPacket(t, c2); len(p) != 1 || p[0] != 1 {
		t.Fatalf("idle authenticated connection answered %q", p)
	}
}

// recordingConn reads a fixed input and records each write the way the
// socket would see it.
type recordingConn struct {
	bytesConn
	writes [][]byte
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), b...))
	return len(b), nil
}

func TestPrepareAnswerIsOneWrite(t *testing.T) {
	in := append(packet(0, "\x16SELECT c FROM t WHERE a = ? AND b = ?"), packet(0, "\x03SELECT 1")...)
	in = append(in, packet(0, "\x0e")...)
	sock := &recordingConn{bytesConn: bytesConn{r: bytes.NewReader(in)}}
	c := newClientConn(sock, 0)
	c.authenticated = true
	readPacket := func() []byte {
		t.Helper()
		hdr := make([]byte, 4)
		if _, err := io.ReadFull(c, hdr); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
		if _, err := io.ReadFull(c, body); err != nil {
			t.Fatal(err)
		}
		return body
	}
	// The library's answer to a prepare: header and body of each packet
	// written apart.
	answer := [][]byte{packet(1, "\x00ok"), packet(2, "param a"), packet(3, "param b"), packet(4, "column c")}
	writeAnswer := func() {
		t.Helper()
		for _, p := range answer {
			for _, part := range [][]byte{p[:4], p[4:]} {
				if _, err := c.Write(part); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	if got := readPacket(); got[0] != comStmtPrepare {
		t.Fatalf("first command %q", got)
	}
	writeAnswer()
	if len(sock.writes) != 0 {
		t.Fatalf("%d writes reached the socket before the answer was complete", len(sock.writes))
	}
	// Reading the next command sends the whole answer, in order, at once.
	if got := readPacket(); string(got) != "\x03SELECT 1" {
		t.Fatalf("second command %q", got)
	}
	if want := bytes.Join(answer, nil); len(sock.writes) != 1 || !bytes.Equal(sock.writes[0], want) {
		t.Fatalf("socket writes %q, want one write %q", sock.writes, want)
	}
	// Other commands' writes go straight through (the library buffers
	// those itself).
	writeAnswer()
	if len(sock.writes) != 1+2*len(answer) {
		t.Fatalf("%d socket writes after a query's answer, want %d", len(sock.writes), 1+2*len(answer))
	}
	// An answer larger than coalesceLimit is not held back whole.
	sock.writes = nil
	if got := readPacket(); got[0] != 0x0e {
		t.Fatalf("third command %q", got)
	}
	c.coalesce = true
	big := make([]byte, coalesceLimit)
	for range 3 {
		if _, err := c.Write(big[:coalesceLimit/2+1]); err != nil {
			t.Fatal(err)
		}
	}
	if len(sock.writes) != 2 {
		t.Fatalf("%d socket writes for three half-limit writes, want 2", len(sock.writes))
	}
}
