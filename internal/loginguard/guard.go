// Package loginguard slows password guessing down, as MySQL's
// connection_control plugin does: after Threshold consecutive failed
// logins of one user from one source address, every further attempt of
// that pair waits before its password is checked, one Step longer per
// failure beyond the threshold, at most MaxSteps steps. A successful login
// ends the delays of its pair.
//
// The wait comes before the server does the expensive part of a login
// (RSA decryption, PBKDF2), so a client guessing passwords in a loop costs
// the server a sleeping goroutine per connection instead of CPU time, and
// other clients do not slow down. Clients of other users, or from other
// addresses, are not delayed. Failures are forgotten Forget after the
// last one.
//
// A nil *Guard delays nothing.
package loginguard

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// Threshold is the number of consecutive failures allowed without delay
	// (connection_control_failed_connections_threshold's default).
	Threshold = 3
	// MaxSteps bounds the delay at MaxSteps × step: with the default step
	// of 1s, 5s, half of the MySQL port's handshake timeout (10s), so a
	// delayed login still gets its answer.
	MaxSteps = 5
	// Forget is how long failures of a pair are remembered.
	Forget = 15 * time.Minute
	// maxPairs bounds the memory of the table; past it, forgotten pairs
	// are swept, and if that is not enough, the table starts afresh.
	maxPairs = 100_000
)

var metricDelays = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "strata", Name: "login_delays_total",
	Help: "Login attempts delayed after repeated failures of the same user from the same address.",
}, []string{"protocol"})

func init() { prometheus.MustRegister(metricDelays) }

// Guard counts failed logins per (user, source address).
type Guard struct {
	step     time.Duration
	protocol string
	now      func() time.Time
	sleep    func(time.Duration)

	mu    sync.Mutex
	pairs map[pair]*record
}

type pair struct{ user, host string }

type record struct {
	failures int
	last     time.Time
}

// New returns a guard that delays by step per failure beyond the
// threshold, or nil (no delays) when step is 0. protocol labels the
// metric.
func New(step time.Duration, protocol string) *Guard {
	if step <= 0 {
		return nil
	}
	return &Guard{step: step, protocol: protocol, now: time.Now, sleep: time.Sleep, pairs: map[pair]*record{}}
}

// Delay is how long an attempt of user from host waits now.
func (g *Guard) Delay(user, host string) time.Duration {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.pairs[pair{user, host}]
	if r == nil || r.failures < Threshold || g.now().Sub(r.last) > Forget {
		return 0
	}
	return g.step * time.Duration(min(r.failures-Threshold+1, MaxSteps))
}

// Wait sleeps for Delay(user, host) and returns it.
func (g *Guard) Wait(user, host string) time.Duration {
	d := g.Delay(user, host)
	if d > 0 {
		metricDelays.WithLabelValues(g.protocol).Inc()
		g.sleep(d)
	}
	return d
}

// Failed records a failed login of user from host.
func (g *Guard) Failed(user, host string) {
	if g == nil {
		return
	}
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	k := pair{user, host}
	r := g.pairs[k]
	if r == nil || now.Sub(r.last) > Forget {
		if len(g.pairs) >= maxPairs {
			g.sweep(now)
		}
		r = &record{}
		g.pairs[k] = r
	}
	r.failures++
	r.last = now
}

// Succeeded ends the delays of user from host.
func (g *Guard) Succeeded(user, host string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.pairs, pair{user, host})
	g.mu.Unlock()
}

func (g *Guard) sweep(now time.Time) {
	for k, r := range g.pairs {
		if now.Sub(r.last) > Forget {
			delete(g.pairs, k)
		}
	}
	if len(g.pairs) >= maxPairs {
		clear(g.pairs)
	}
}
