package chaos

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from its listen address to a target and
// injects the link faults the kernel here cannot (there is no netem): added
// latency, a stall (bytes stop flowing but connections stay open, as a
// congested or paused link looks), and resetting every connection.
//
// Bytes keep their order; latency is added per chunk read, and the chunks
// of a connection are delivered in order no earlier than their read time
// plus the delay, so throughput is not capped by the delay.
type Proxy struct {
	Addr   string // listen address
	Target string

	nw *Network
	ln net.Listener

	mu      sync.Mutex
	delay   time.Duration
	stalled bool
	changed chan struct{} // closed and replaced when delay or stall change
	conns   map[net.Conn]struct{}
	closed  bool
}

// NewProxy listens on host:0 (in the client namespace) and forwards to target.
func NewProxy(nw *Network, host, target string) (*Proxy, error) {
	ln, err := nw.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), Target: target, nw: nw, ln: ln,
		changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	server, err := p.nw.DialContext(ctx, "tcp", p.Target)
	cancel()
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pump(server, client); done <- struct{}{} }()
	go func() { p.pump(client, server); done <- struct{}{} }()
	<-done
}

type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst through a queue that holds each chunk until its
// due time and while the proxy is stalled.
func (p *Proxy) pump(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				d := p.delay
				p.mu.Unlock()
				q <- chunk{buf[:n], time.Now().Add(d)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		for {
			p.mu.Lock()
			stalled, changed := p.stalled, p.changed
			p.mu.Unlock()
			wait := time.Until(c.due)
			if !stalled && wait <= 0 {
				break
			}
			var timer <-chan time.Time
			if !stalled {
				timer = time.After(wait)
			}
			select {
			case <-changed:
			case <-timer:
			}
		}
		if _, err := dst.Write(c.b); err != nil {
			go func() {
				for range q {
				}
			}()
			src.Close()
			return
		}
	}
}

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// SetDelay adds d of latency in each direction (0 removes it).
func (p *Proxy) SetDelay(d time.Duration) { p.set(func() { p.delay = d }) }

// Stall stops (true) or resumes (false) forwarding without closing anything.
func (p *Proxy) Stall(on bool) { p.set(func() { p.stalled = on }) }

// Reset closes every open connection; new ones are accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// Heal removes delay and stall.
func (p *Proxy) Heal() { p.set(func() { p.delay, p.stalled = 0, false }) }

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Heal()
	p.Reset()
}

var _ io.Closer = (*net.TCPConn)(nil)
