package kvserver

import (
	"context"
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

// lockWaiters parks pessimistic lock requests that met another
// transaction's lock until a command that can release locks on the key
// (commit, rollback, lock resolution, pessimistic rollback, a one-phase
// commit, a status check that rolled its primary back) has finished. A
// woken request simply tries again; wake-ups that release nothing cost one
// retry. A waiter registers while its request still holds the key's
// latches, and every releasing command takes those latches before it
// decides and wakes after it has applied, so no release is missed.
type lockWaiters struct {
	n  atomic.Int64 // registered waiters; zero makes wake free
	mu sync.Mutex
	m  map[string][]*waiter
}

type waiter struct {
	key string
	ch  chan struct{} // closed by wake
}

func (lw *lockWaiters) add(key []byte) *waiter {
	w := &waiter{key: string(key), ch: make(chan struct{})}
	lw.mu.Lock()
	if lw.m == nil {
		lw.m = make(map[string][]*waiter)
	}
	lw.m[w.key] = append(lw.m[w.key], w)
	lw.n.Add(1)
	lw.mu.Unlock()
	return w
}

// remove unregisters w if wake has not already.
func (lw *lockWaiters) remove(w *waiter) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	ws := lw.m[w.key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			lw.n.Add(-1)
			break
		}
	}
	if len(ws) == 0 {
		delete(lw.m, w.key)
	} else {
		lw.m[w.key] = ws
	}
}

// wake wakes every waiter on the keys.
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
		for _, w := range ws {
			close(w.ch)
		}
		lw.n.Add(-int64(len(ws)))
		delete(lw.m, string(k))
	}
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
	waitWoken    waitOutcome = iota // a command that may have released the lock finished: try again
	waitTimedOut                    // the slice or the request's timeout passed
	waitDeadlock                    // waiting would close a cycle: the request fails
)

// waitForLock parks the request of transaction txn, registered as w while
// it held the latches, until the lock l may be released, for at most d. It
// first asks the deadlock detector whether the wait closes a cycle; then
// the returned *kvpb.Deadlock says which. A detector that cannot be
// reached does not stop the wait: a deadlock then ends in the lock wait
// timeout, as it would in InnoDB with innodb_deadlock_detect off.
func (s *Server) waitForLock(ctx context.Context, txn uint64, l *kvpb.LockInfo, w *waiter, d time.Duration) (waitOutcome, *kvpb.Deadlock, error) {
	defer s.waiters.remove(w)
	entry := &kvpb.WaitForEntry{Txn: txn, WaitForTxn: l.LockVersion, Key: l.Key, KeyHash: deadlock.KeyHash(l.Key)}
	det := s.deadlockService()
	resp, err := det.Detect(ctx, &kvpb.DeadlockRequest{Tp: kvpb.DeadlockRequestType_Detect, Entry: entry})
	if err == nil && resp.Entry != nil {
		return waitDeadlock, &kvpb.Deadlock{LockTs: l.LockVersion, LockKey: l.Key, DeadlockKeyHash: resp.DeadlockKeyHash, WaitChain: resp.WaitChain}, nil
	}
	if err == nil && resp.Error == "" {
		defer det.Detect(context.WithoutCancel(ctx), &kvpb.DeadlockRequest{Tp: kvpb.DeadlockRequestType_CleanUpWaitFor, Entry: entry})
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.ch:
		return waitWoken, nil, nil
	case <-t.C:
		return waitTimedOut, nil, nil
	case <-ctx.Done():
		return waitTimedOut, nil, ctx.Err()
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
