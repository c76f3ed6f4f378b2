// Package pace sets the interval of a polling loop that looks for changes
// made elsewhere (the schema version, accounts, Redis ACL users): short
// while things change, doubling while nothing does, so that an idle node
// does not read the cluster's system keys many times a second.
//
// A loop polls, reports what it saw (Next), and waits the interval Next
// returns or until Wake fires. Anything that makes a change likely soon (a
// change the node made itself, a statement waiting for other nodes) calls
// Touch: the interval snaps back to the minimum and the loop wakes at once.
// The interval stays at the minimum for Hold after the last change seen or
// touch, then doubles with every poll that finds nothing new, up to the
// maximum. A change made on another node while the loop is at its maximum
// is seen at most Max later.
package pace

import (
	"sync"
	"time"
)

// Pace is the interval of one polling loop. It is safe for concurrent use.
type Pace struct {
	min, max, hold time.Duration
	now            func() time.Time

	mu       sync.Mutex
	cur      time.Duration
	hotUntil time.Time
	wake     chan struct{}
}

// New returns a pace between lo and hi (hi below lo counts as lo)
// that holds the minimum for hold after a change. It starts at the
// minimum, held.
func New(lo, hi, hold time.Duration) *Pace {
	return newWithClock(lo, hi, hold, time.Now)
}

func newWithClock(lo, hi, hold time.Duration, now func() time.Time) *Pace {
	if lo <= 0 {
		lo = time.Millisecond
	}
	hi = max(hi, lo)
	return &Pace{min: lo, max: hi, hold: hold, now: now, cur: lo, hotUntil: now().Add(hold),
		wake: make(chan struct{}, 1)}
}

// Next records one poll, which saw a change or not, and returns how long
// to wait before the next.
func (p *Pace) Next(changed bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	switch {
	case changed:
		p.cur, p.hotUntil = p.min, now.Add(p.hold)
	case now.Before(p.hotUntil):
		p.cur = p.min
	default:
		p.cur = min(2*p.cur, p.max)
	}
	return p.cur
}

// Interval is the current interval, without recording a poll.
func (p *Pace) Interval() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now().Before(p.hotUntil) {
		return p.min
	}
	return p.cur
}

// Touch snaps the interval back to the minimum, held for Hold, and wakes
// the loop.
func (p *Pace) Touch() {
	p.mu.Lock()
	p.cur, p.hotUntil = p.min, p.now().Add(p.hold)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Wake fires after Touch (once for any number of touches while the loop
// was busy).
func (p *Pace) Wake() <-chan struct{} { return p.wake }

// Max is the longest interval.
func (p *Pace) Max() time.Duration { return p.max }
