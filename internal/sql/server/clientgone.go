package server

import (
	"bytes"
	"time"

	"github.com/dolthub/vitess/go/mysql"

	strsql "github.com/strata-db/strata/internal/sql"
)

// A statement stops when its client goes away. While a statement runs, its
// connection's goroutine does not read the socket, so nothing notices a
// client that closed it (killed, timed out, Ctrl-C'd) until the result is
// written, which for a long query may be minutes of wasted work. The
// server therefore looks, every clientCheckInterval, at the sockets of
// statements that have run longer than that, without reading from them
// (peerClosed peeks), and cancels the statement of a client whose socket
// is closed. The same look closes the connections that sat idle longer than
// their session's wait_timeout.

const clientCheckInterval = 250 * time.Millisecond

// comQuitPacket is a client's goodbye: a client that sent it and closed
// has gone even though the closing is not visible behind it.
var comQuitPacket = []byte{1, 0, 0, 0, 1}

// idleSession is a session that knows how long it has waited for its
// client and how long it may (wait_timeout).
type idleSession interface {
	IdleFor() time.Duration
	WaitTimeout() time.Duration
}

func (h *handler) watchClients(stop <-chan struct{}) {
	t := time.NewTicker(clientCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		var gone []connSession
		var idle []*mysql.Conn
		for id, s := range h.sessions {
			c := h.conns[id]
			if c == nil {
				continue
			}
			if is, ok := s.(idleSession); ok && is.IdleFor() > is.WaitTimeout() {
				idle = append(idle, c)
				continue
			}
			if s.RunningFor() < clientCheckInterval {
				continue
			}
			if cc, ok := c.Conn.(*clientConn); ok && cc.peerClosed() {
				gone = append(gone, s)
			}
		}
		h.mu.Unlock()
		for _, s := range gone {
			s.Kill(strsql.ErrClientGone)
		}
		// MySQL closes a connection idle for longer than its session's
		// wait_timeout; the client finds it gone at its next statement.
		for _, c := range idle {
			metricConnectionsAborted.Inc()
			h.log.Info("connection idle past wait_timeout, closed", "conn", c.ConnectionID, "remote", remoteString(c))
			c.Close()
		}
	}
}

// peerClosed reports whether the client closed its end of the socket: a
// non-blocking peek finds end of stream (or an error), or only a
// COM_QUIT before it. It reads nothing.
func (p *clientConn) peerClosed() bool {
	buf := make([]byte, len(comQuitPacket)+1)
	n, closed, ok := peekSocket(p.Conn, buf)
	if !ok {
		return false
	}
	return closed || (n == len(comQuitPacket) && bytes.Equal(buf[:n], comQuitPacket))
}
