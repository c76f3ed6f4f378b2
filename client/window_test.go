package client

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/kvpb"
)

// frameCounter counts the HTTP/2 frames of one direction of a connection
// by type, from the bytes as they pass (9-byte frame headers: a 24-bit
// length, then the type).
type frameCounter struct {
	mu     sync.Mutex
	skip   int // bytes of the client preface still to skip
	buf    []byte
	counts map[byte]int
}

const http2FramePing = 0x6

func (f *frameCounter) add(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.skip > 0 {
		n := min(f.skip, len(p))
		f.skip -= n
		p = p[n:]
	}
	f.buf = append(f.buf, p...)
	for len(f.buf) >= 9 {
		size := int(f.buf[0])<<16 | int(f.buf[1])<<8 | int(f.buf[2])
		if len(f.buf) < 9+size {
			break
		}
		f.counts[f.buf[3]]++
		f.buf = f.buf[9+size:]
	}
}

func (f *frameCounter) count(typ byte) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[typ]
}

// countingListener hands out connections whose reads and writes pass
// through two frame counters (what the server reads, what it writes).
type countingListener struct {
	net.Listener
	in, out *frameCounter
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.in.add(p[:n])
	return n, err
}

func (c countingConn) Write(p []byte) (int, error) {
	c.l.out.add(p)
	return c.Conn.Write(p)
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, l: l}, nil
}

// pingsPerRoundTrips runs n KvGet round trips between a server and a
// client built with the given options and returns the PING frames that
// crossed the connection in either direction.
func pingsPerRoundTrips(t *testing.T, n int, srvOpts []grpc.ServerOption, dialOpts []grpc.DialOption) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: lis,
		in:  &frameCounter{skip: len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), counts: map[byte]int{}},
		out: &frameCounter{counts: map[byte]int{}}}
	srv := grpc.NewServer(srvOpts...)
	kvpb.RegisterKvServer(srv, &countingKv{})
	go func() { _ = srv.Serve(cl) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := kvpb.NewKvClient(conn)
	for i := 0; i < n; i++ {
		if _, err := kv.KvGet(context.Background(), &kvpb.GetRequest{Key: []byte("k")}); err != nil {
			t.Fatal(err)
		}
	}
	return cl.in.count(http2FramePing) + cl.out.count(http2FramePing)
}

// With the windows fixed, request and response round trips cost no PING
// frames (grpc-go's bandwidth estimator is off). The same exchange with
// grpc-go's defaults shows what that saves, and that the count works.
func TestFixedWindowsSendNoPings(t *testing.T) {
	const rounds = 200
	if got := pingsPerRoundTrips(t, rounds, WindowServerOptions(), WindowDialOptions()); got != 0 {
		t.Fatalf("%d PING frames in %d round trips with fixed windows, want 0", got, rounds)
	}
	if got := pingsPerRoundTrips(t, rounds, nil, nil); got < rounds/4 {
		t.Fatalf("only %d PING frames in %d round trips with grpc-go's default windows: the frame count is broken", got, rounds)
	}
}
