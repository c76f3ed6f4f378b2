package kvserver

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/deadlock"
	"github.com/strata-db/strata/kvpb"
)

// waitSlice bounds one wait of a pessimistic lock request on the leader
// (TiKV's wait-for-lock-timeout). After it the request returns the lock to
// the client, which checks the owner's status at its primary (rolling back
// one whose coordinator died, which no release would ever wake us for) and
// sends the request again with the rest of its lock wait timeout. Each
// slice renews the waiter's edge in the deadlock detector, so it must stay
// well below deadlock.DefaultTTL.
const waitSlice = time.Second

// wakeUpDelay is how long the waiters on a key other than the one woken
// first wait at most after a release before they try again themselves
// (TiKV's wake-up-delay-duration). Only the oldest waiter is woken at once:
// waking all of them would have all but one find the key locked again,
// costing each a latch round, a deadlock-detector round and a wait while
// the winner's statement waits for a processor behind them. The others
// look again after this delay, which keeps their wait-for edges in the
// deadlock detector current (the key may now be held by the waiter woken
// first) and bounds the cost of a wake-up that was not passed on.
const wakeUpDelay = 20 * time.Millisecond

// lockWaiters parks pessimistic lock requests that met another
// transaction's lock until a command that can release locks on the key
// (commit, rollback, lock resolution, pessimistic rollback, a one-phase
// commit, a status check that rolled its primary back) has finished.
//
// The waiters of a key queue oldest transaction first. A release wakes the
// first of them, which tries again; the others are told to try again
// within wakeUpDelay. A woken request that does not then take the key's
// lock (it gave up, failed, or waits for another key now) passes the
// wake-up on to the next waiter. Wake-ups that release nothing cost one
// retry. A waiter registers while its request still holds the key's
// latches, and every releasing command takes those latches before it
// decides and wakes after it has applied (a commit with waiters: once it
// has recorded its pending writes and released the latches, early.go), so
// no release is missed.
type lockWaiters struct {
	n  atomic.Int64 // registered waiters; zero makes wake free
	mu sync.Mutex
	m  map[string][]*waiter // per key, by txn, oldest first
}

type waiter struct {
	key  string
	txn  uint64        // start ts of the waiting transaction
	ch   chan struct{} // closed by wake: this waiter was woken first
	soon chan struct{} // closed by wake: another was woken first; try again within wakeUpDelay

	// Guarded by lockWaiters.mu.
	chosen   bool // ch is closed
	soonSent bool // soon is closed
}

func (lw *lockWaiters) add(key []byte, txn uint64) *waiter {
	w := &waiter{key: string(key), txn: txn, ch: make(chan struct{}), soon: make(chan struct{})}
	lw.mu.Lock()
	if lw.m == nil {
		lw.m = make(map[string][]*waiter)
	}
	ws := lw.m[w.key]
	i := len(ws)
	for i > 0 && ws[i-1].txn > txn {
		i--
	}
	lw.m[w.key] = slices.Insert(ws, i, w)
	lw.n.Add(1)
	lw.mu.Unlock()
	return w
}

// remove unregisters w if wake has not already, and reports whether wake
// chose w first (its caller then owes the key's next waiter a wake-up
// unless it takes the lock).
func (lw *lockWaiters) remove(w *waiter) (chosen bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if w.chosen {
		return true
	}
	ws := lw.m[w.key]
	if i := slices.Index(ws, w); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
		lw.n.Add(-1)
	}
	if len(ws) == 0 {
		delete(lw.m, w.key)
	} else {
		lw.m[w.key] = ws
	}
	return false
}

// wake wakes the first waiter on each of the keys and tells the others to
// try again within wakeUpDelay.
func (lw *lockWaiters) wake(keys ...[]byte) {
	if lw.n.Load() == 0 {
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, k := range keys {
		ws, ok := lw.m[string(k)]
		if !ok {
			continue
		}
		first := ws[0]
		first.chosen = true
		close(first.ch)
		lw.n.Add(-1)
		ws = ws[1:]
		for _, w := range ws {
			if !w.soonSent {
				w.soonSent = true
				close(w.soon)
			}
		}
		if len(ws) == 0 {
			delete(lw.m, string(k))
		} else {
			lw.m[string(k)] = ws
		}
	}
}

// waiting reports whether a request waits for a lock on one of keys.
func (lw *lockWaiters) waiting(keys [][]byte) bool {
	if lw.n.Load() == 0 {
		return false
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, k := range keys {
		if _, ok := lw.m[string(k)]; ok {
			return true
		}
	}
	return false
}

// waitingKeys returns, per key, the number of waiters (for tests and
// metrics).
func (lw *lockWaiters) waitingKeys() map[string]int {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	out := make(map[string]int, len(lw.m))
	for k, ws := range lw.m {
		out[k] = len(ws)
	}
	return out
}

// waitOutcome is how one wait ended.
type waitOutcome int

const (
	waitWoken    waitOutcome = iota // woken first after a release: try again, and pass the wake-up on unless the lock is taken
	waitRecheck                     // another waiter was woken first and wakeUpDelay passed: try again
	waitTimedOut                    // the slice or the request's timeout passed
	waitDeadlock                    // waiting would close a cycle: the request fails
)

// waitForLock parks the request of transaction txn, registered as w while
// it held the latches, until the lock l may be released, for at most d. It
// first asks the deadlock detector whether the wait closes a cycle; then
// the returned *kvpb.Deadlock says which. A detector that cannot be
// reached does not stop the wait: a deadlock then ends in the lock wait
// timeout, as it would in InnoDB with innodb_deadlock_detect off.
func (s *Server) waitForLock(ctx context.Context, txn uint64, l *kvpb.LockInfo, w *waiter, d time.Duration) (outcome waitOutcome, _ *kvpb.Deadlock, _ error) {
	defer func() {
		// Woken first, but leaving for another reason (the wake-up
		// raced the timer, or the wait ends in a deadlock): the next
		// waiter gets the wake-up.
		if s.waiters.remove(w) && outcome != waitWoken {
			s.waiters.wake(l.Key)
		}
	}()
	entry := &kvpb.WaitForEntry{Txn: txn, WaitForTxn: l.LockVersion, Key: l.Key, KeyHash: deadlock.KeyHash(l.Key)}
	det := s.deadlockService()
	resp, err := det.Detect(ctx, &kvpb.DeadlockRequest{Tp: kvpb.DeadlockRequestType_Detect, Entry: entry})
	if err == nil && resp.Entry != nil {
		return waitDeadlock, &kvpb.Deadlock{LockTs: l.LockVersion, LockKey: l.Key, DeadlockKeyHash: resp.DeadlockKeyHash, WaitChain: resp.WaitChain}, nil
	}
	if err == nil && resp.Error == "" {
		defer det.Detect(context.WithoutCancel(ctx), &kvpb.DeadlockRequest{Tp: kvpb.DeadlockRequestType_CleanUpWaitFor, Entry: entry})
	}
	deadline := time.Now().Add(d)
	t := time.NewTimer(d)
	defer t.Stop()
	soon, recheck := w.soon, false
	for {
		select {
		case <-w.ch:
			return waitWoken, nil, nil
		case <-soon:
			soon = nil
			if time.Until(deadline) > wakeUpDelay {
				t.Reset(wakeUpDelay)
				recheck = true
			}
		case <-t.C:
			if recheck {
				return waitRecheck, nil, nil
			}
			return waitTimedOut, nil, nil
		case <-ctx.Done():
			return waitTimedOut, nil, ctx.Err()
		}
	}
}

// SetDeadlockDetector makes the lock waiters of this store consult d, the
// cluster's detector (a node passes its PD server, which forwards to PD's
// leader), instead of a detector of this store's own. Call it before
// serving.
func (s *Server) SetDeadlockDetector(d deadlock.Service) { s.detectorSvc.Store(&d) }

// Detector is this store's own deadlock detector: the one its waiters use
// unless SetDeadlockDetector says otherwise.
func (s *Server) Detector() *deadlock.Detector { return s.detector }

func (s *Server) deadlockService() deadlock.Service {
	if p := s.detectorSvc.Load(); p != nil {
		return *p
	}
	return s.detector
}
