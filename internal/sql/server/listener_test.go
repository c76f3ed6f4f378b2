package server

import (
	"errors"
	"log/slog"
	"net"
	"syscall"
	"testing"
)

// flakyListener fails a given number of accepts before handing out a
// connection, then reports itself closed.
type flakyListener struct {
	net.Listener
	failures int
	served   bool
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures > 0 {
		l.failures--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	if !l.served {
		l.served = true
		a, _ := net.Pipe()
		return a, nil
	}
	return nil, net.ErrClosed
}

func TestListenerRidesOutAcceptErrors(t *testing.T) {
	l := clientListener{Listener: &flakyListener{failures: 3}, log: slog.New(slog.DiscardHandler)}
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("accept after transient failures: %v", err)
	}
	if _, ok := c.(*clientConn); !ok {
		t.Fatalf("accepted connection is a %T, not wrapped for prepare capture", c)
	}
	c.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed listener: %v", err)
	}
}
