package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// backoffKind names why a request is being retried. Each kind has its own
// exponential schedule, so a burst of stale-region retries does not inflate
// the wait before the first lock-resolution retry, and vice versa.
type backoffKind uint8

const (
	// boRegionMiss: the region cache was stale (NotLeader, EpochNotMatch,
	// KeyNotInRegion, RegionNotFound). The cache is already fixed, so the
	// first retries are almost immediate.
	boRegionMiss backoffKind = iota
	// boServerBusy: the store asked us to slow down.
	boServerBusy
	// boStoreRPC: the RPC itself failed (store down, connection refused).
	boStoreRPC
	// boTxnLock: a live transaction's lock is in the way.
	boTxnLock
	// boPD: the placement driver failed to answer.
	boPD
	numBackoffKinds
)

// The ceilings of the kinds a failover causes (region miss while a region
// elects a leader, store RPC to the node that died, PD while its own
// region elects) are short: a request waits at most that long after the
// cluster can serve it again. With ceilings of 0.5-1 s, transactions
// blocked through a 1 s election came back spread over the next second.
// A retry is one cheap RPC; the budget bounds the total wait either way.
var backoffSchedule = [numBackoffKinds]struct {
	base, ceiling time.Duration
	name          string
}{
	boRegionMiss: {base: 2 * time.Millisecond, ceiling: 100 * time.Millisecond, name: "region miss"},
	boServerBusy: {base: 20 * time.Millisecond, ceiling: 2 * time.Second, name: "server busy"},
	boStoreRPC:   {base: 10 * time.Millisecond, ceiling: 200 * time.Millisecond, name: "store rpc"},
	boTxnLock:    {base: 5 * time.Millisecond, ceiling: 500 * time.Millisecond, name: "txn lock"},
	boPD:         {base: 10 * time.Millisecond, ceiling: 200 * time.Millisecond, name: "pd"},
}

// backoffer sleeps between retries of one logical operation. Sleeps grow
// exponentially per kind with equal jitter; the sum of all sleeps is bounded
// by budget, and every sleep ends early when ctx is done. A backoffer is
// owned by one goroutine; fork it for parallel sub-requests.
type backoffer struct {
	ctx      context.Context
	budget   time.Duration
	slept    time.Duration
	attempts [numBackoffKinds]uint8
	// resolved counts retries made right after clearing locks.
	resolved int
}

func newBackoffer(ctx context.Context, budget time.Duration) backoffer {
	return backoffer{ctx: ctx, budget: budget}
}

// fork returns a backoffer for a parallel sub-request that shares the
// remaining budget but counts its own attempts.
func (b *backoffer) fork() backoffer {
	return backoffer{ctx: b.ctx, budget: b.budget - b.slept}
}

// backoff sleeps before the next retry because of cause. It returns an error
// wrapping cause when the budget is spent, or the context error when ctx is
// done.
func (b *backoffer) backoff(kind backoffKind, cause error) error {
	return b.backoffAtLeast(kind, 0, cause)
}

// afterResolve is called before retrying a request whose locks were all
// cleared. The first retry is immediate; if locks keep coming back (a
// resolution that did not stick), later ones back off, so the loop is
// bounded by the budget.
func (b *backoffer) afterResolve(cause error) error {
	b.resolved++
	if b.resolved == 1 {
		return nil
	}
	return b.backoff(boTxnLock, cause)
}

// backoffAtLeast is backoff with a lower bound on the sleep suggested by the
// server (ServerBusy.backoff_ms) but never more than the kind's ceiling.
func (b *backoffer) backoffAtLeast(kind backoffKind, hint time.Duration, cause error) error {
	d := b.nextSleep(kind)
	if hint > d {
		d = min(hint, backoffSchedule[kind].ceiling)
	}
	return b.sleep(kind, d, cause)
}

// backoffAtMost is backoff capped at limit: used when waiting for a lock
// whose remaining TTL is known, so we wake up right when it expires.
func (b *backoffer) backoffAtMost(kind backoffKind, limit time.Duration, cause error) error {
	d := b.nextSleep(kind)
	if limit > 0 && limit < d {
		d = limit
	}
	return b.sleep(kind, d, cause)
}

func (b *backoffer) nextSleep(kind backoffKind) time.Duration {
	s := backoffSchedule[kind]
	n := b.attempts[kind]
	if n < 30 {
		b.attempts[kind]++
	}
	d := s.base << n
	if d > s.ceiling || d <= 0 {
		d = s.ceiling
	}
	// Equal jitter: half fixed, half random, so concurrent clients that hit
	// the same stale region do not retry in lockstep.
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

func (b *backoffer) sleep(kind backoffKind, d time.Duration, cause error) error {
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("%w (while retrying after: %v)", err, cause)
	}
	if b.slept+d > b.budget {
		return &backoffExhaustedError{kind: kind, slept: b.slept, cause: cause}
	}
	b.slept += d
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-b.ctx.Done():
		return fmt.Errorf("%w (while retrying after: %v)", b.ctx.Err(), cause)
	}
}

// backoffExhaustedError reports that an operation kept failing for its whole
// backoff budget; it wraps the last failure.
type backoffExhaustedError struct {
	kind  backoffKind
	slept time.Duration
	cause error
}

func (e *backoffExhaustedError) Error() string {
	return fmt.Sprintf("client: gave up after %v of backoff (%s): %v",
		e.slept.Round(time.Millisecond), backoffSchedule[e.kind].name, e.cause)
}

func (e *backoffExhaustedError) Unwrap() error { return e.cause }
