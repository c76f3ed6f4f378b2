package server

import (
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// pollReader reads a client's socket. When it is the server's only client
// connection, it first polls the socket for up to pollFor before waiting in
// Go's network poller.
//
// Why: a lone client that sends its next statement as soon as it has the
// last answer (a benchmark at one connection, an application's tight
// loop, a script) finds the server idle, and a goroutine parked in the
// poller is woken by the kernel waking an idle CPU. On the test VMs (KVM,
// haltpoll idle driver) sysbench oltp_point_select at one thread showed two
// latency peaks: about 17 us when the next request came while the server's
// thread still ran, 50-80 us when its CPU had gone idle; with both CPUs
// kept busy by niced spinning processes every request took the fast path
// (avg 0.05 -> 0.03 ms, p99 0.10 -> 0.08 ms). Polling keeps the CPU
// running through the client's turnaround.
//
// With more than one connection the server is rarely idle between
// requests, and polling measured slower (bench/ab.sh, oltp_update_index at
// 8 threads, when polls were allowed whenever no other connection was
// busy: median 0.91 of the unpolled throughput), so it is left to the
// lone client. Each round of a poll yields the processor to other
// goroutines and the CPU to other threads.
type pollReader struct {
	net.Conn
	raw syscall.RawConn // nil: never poll
}

// pollFor bounds one poll: longer than a client's turnaround on the same
// machine (10-20 us), short against anything a person notices.
const pollFor = 100 * time.Microsecond

// openConns counts the client connections open: the handler adds one in
// NewConnection and takes it away in ConnectionClosed.
var openConns atomic.Int64

func newPollReader(c net.Conn) *pollReader {
	r := &pollReader{Conn: c}
	if sc, ok := c.(syscall.Conn); ok && pollSupported {
		if raw, err := sc.SyscallConn(); err == nil {
			r.raw = raw
		}
	}
	return r
}

func (r *pollReader) Read(b []byte) (int, error) {
	if r.raw != nil && len(b) > 0 && openConns.Load() == 1 {
		if n := r.poll(b); n > 0 {
			return n, nil
		}
	}
	return r.Conn.Read(b)
}

// poll returns what a non-blocking read found within pollFor, or 0: then
// (nothing arrived, end of stream, an error) the caller reads normally,
// which waits or reports the condition the usual way.
func (r *pollReader) poll(b []byte) int {
	deadline := time.Now().Add(pollFor)
	for {
		n := 0
		var rerr error
		err := r.raw.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), b)
			return true // never wait in the poller here
		})
		if err == nil && rerr == nil && n > 0 {
			pollData.Inc()
			return n
		}
		if err != nil || (rerr != nil && rerr != syscall.EAGAIN && rerr != syscall.EINTR) || (rerr == nil && n == 0) ||
			openConns.Load() != 1 {
			pollOther.Inc()
			return 0
		}
		if time.Now().After(deadline) {
			pollIdle.Inc()
			return 0
		}
		runtime.Gosched()
		yieldCPU()
	}
}
