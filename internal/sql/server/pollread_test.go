package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// noClients waits until the connections of earlier tests are closed (their
// handlers close them asynchronously).
func noClients(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for openConns.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := openConns.Load(); n != 0 {
		t.Fatalf("%d connections still count as open: a connection that closed was not uncounted", n)
	}
}

func polls() (data, idle, other float64) {
	return testutil.ToFloat64(pollData), testutil.ToFloat64(pollIdle), testutil.ToFloat64(pollOther)
}

// A lone client's request that arrives while the server polls is read by
// the poll; one that comes later is read by the ordinary wait; with a
// second client open nobody polls; the end of the stream reads as io.EOF.
func TestPollReader(t *testing.T) {
	if !pollSupported {
		t.Skip("no polling on this platform")
	}
	noClients(t)
	client, server := tcpPair(t)
	r := newPollReader(server)
	openConns.Add(1) // as the handler's NewConnection does
	defer openConns.Add(-1)
	if r.raw == nil {
		t.Fatal("a TCP connection offers no raw access")
	}
	buf := make([]byte, 64)

	// A request already there when the server reads is taken by the
	// poll's first try.
	d0, _, _ := polls()
	if _, err := client.Write([]byte("zeroth")); err != nil {
		t.Fatal(err)
	}
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "zeroth" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if d, _, _ := polls(); d != d0+1 {
		t.Fatalf("a waiting request was not read by a poll (data polls %v -> %v)", d0, d)
	}

	// The client answers well within pollFor. Whether its goroutine runs
	// in time is up to the scheduler of a possibly busy machine, so a few
	// tries are allowed; one must be read by the poll.
	polled := false
	for try := 0; try < 20 && !polled; try++ {
		d0, _, _ := polls()
		go func() {
			time.Sleep(10 * time.Microsecond)
			client.Write([]byte("first"))
		}()
		n, err := r.Read(buf)
		if err != nil || string(buf[:n]) != "first" {
			t.Fatalf("Read = %q, %v", buf[:n], err)
		}
		d, _, _ := polls()
		polled = d == d0+1
	}
	if !polled {
		t.Fatal("in 20 tries, no request sent 10 us into the poll was read by it")
	}

	// The client takes longer than pollFor: the poll gives up, the wait
	// returns the request. (The client writes once the poll has given up,
	// however long a busy machine takes to get there.)
	_, i0, _ := polls()
	go func() {
		for _, i, _ := polls(); i == i0; _, i, _ = polls() {
			time.Sleep(pollFor)
		}
		client.Write([]byte("second"))
	}()
	n, err = r.Read(buf)
	if err != nil || string(buf[:n]) != "second" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if _, i, _ := polls(); i != i0+1 {
		t.Fatalf("idle polls %v -> %v, want one more", i0, i)
	}

	// While another client is connected, nobody polls.
	openConns.Add(1)
	d1, i1, o1 := polls()
	go client.Write([]byte("third"))
	n, err = r.Read(buf)
	if err != nil || string(buf[:n]) != "third" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if d, i, o := polls(); d != d1 || i != i1 || o != o1 {
		t.Fatal("a connection polled while another was open")
	}
	openConns.Add(-1)

	// The end of the stream, whether the poll or the wait sees it first.
	client.Close()
	if n, err = r.Read(buf); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the client closed: Read = %d, %v", n, err)
	}
}

// A client connection counts as open from the handler's NewConnection to
// its ConnectionClosed, once.
func TestOpenConnsFollowsConnections(t *testing.T) {
	ts := startDefaultServer(t)
	noClients(t)
	db := ts.openDB(t, "root", "test", "")
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	if got := openConns.Load(); got != 1 {
		t.Fatalf("open connections %d with one client, want 1", got)
	}
	db.Close()
	noClients(t)
}

// Large reads through the poll keep the bytes in order.
func TestPollReaderStream(t *testing.T) {
	client, server := tcpPair(t)
	r := newPollReader(server)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	go func() {
		for off := 0; off < len(want); off += 1000 {
			client.Write(want[off:min(off+1000, len(want))])
		}
		client.Close()
	}()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(want))
	}
}
