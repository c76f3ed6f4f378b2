package server

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"
)

// clientListener is the listener handed to the protocol library. It wraps
// every accepted connection in clientConn, and it rides out accept
// failures such as running out of file descriptors: the library's accept
// loop stops for good at the first error, which would silently take the
// SQL port down. Only closing the listener ends it.
type clientListener struct {
	net.Listener
	log              *slog.Logger
	handshakeTimeout time.Duration
	maxPacket        int
	tls              *tls.Config // offered to clients; nil: none
}

const maxAcceptBackoff = time.Second

func (l clientListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			cc := newClientConn(c, l.handshakeTimeout)
			cc.maxPacket = l.maxPacket
			cc.tlsConfig = l.tls
			return cc, nil
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		backoff = min(max(2*backoff, 5*time.Millisecond), maxAcceptBackoff)
		l.log.Warn("accepting a MySQL connection failed; retrying", "err", err, "backoff", backoff)
		time.Sleep(backoff)
	}
}
