//go:build linux

package server

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peekSocket peeks at c's unread bytes without blocking: n bytes were
// copied into buf, closed is set when the peer closed the connection (or
// it failed); ok is false when c cannot be peeked at.
func peekSocket(c net.Conn, buf []byte) (n int, closed, ok bool) {
	sc, isSys := c.(syscall.Conn)
	if !isSys {
		return 0, false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false, false
	}
	err = raw.Read(func(fd uintptr) bool {
		var rerr error
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case rerr == unix.EAGAIN || rerr == unix.EINTR:
			n = 0
		case rerr != nil:
			n, closed = 0, true
		case n == 0:
			closed = true // orderly shutdown
		}
		return true // never wait for readability
	})
	return n, closed, err == nil
}
