package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/kvpb"
)

// LockKeys takes pessimistic locks on keys (DML and SELECT ... FOR UPDATE
// in a pessimistic transaction). The first key this transaction ever locks
// becomes its primary. The locks are taken at the statement's for-update
// timestamp (BeginStatement); without one, at the start timestamp, or at a
// fresh timestamp under read committed. A key committed by another
// transaction after that timestamp fails with a *kv.RetryableError: with
// PessimisticConflict set in a pessimistic transaction (the statement may
// run again at a newer timestamp), as a plain write conflict otherwise.
//
// A key locked by a live transaction is waited for, on the region leader,
// up to the lock wait timeout (TxnOptions.LockWaitTimeout, else
// Options.LockWaitTimeout) when the transaction is pessimistic, and fails
// at once otherwise; the failure then has LockWaitTimeout set. A wait that
// would close a cycle of waiting transactions fails at once with Deadlock
// set. Locks are released by Commit (they are committed as part of the
// transaction) or Rollback.
func (t *Txn) LockKeys(ctx context.Context, keys ...[]byte) error {
	return t.lockKeys(ctx, t.lockWait(), keys)
}

// LockKeysWith is LockKeys with one call's options (MySQL's NOWAIT, SKIP
// LOCKED and WAIT n). NoWait fails at once on a key another live
// transaction holds (stale locks are still resolved first). SkipLocked
// locks the keys one at a time without waiting and returns those another
// live transaction holds, unlocked; it costs a request per key, which
// suits its use, a queue's consumers each claiming a few rows.
func (t *Txn) LockKeysWith(ctx context.Context, opts kv.LockOptions, keys ...[]byte) ([][]byte, error) {
	wait := t.lockWait()
	if opts.Wait > 0 && t.opts.Pessimistic {
		wait = opts.Wait
	}
	if opts.NoWait || opts.SkipLocked {
		wait = 0
	}
	if !opts.SkipLocked {
		return nil, t.lockKeys(ctx, wait, keys)
	}
	// In key order, as LockKeys locks (a key already held is skipped by
	// lockKeys without a request).
	todo := slices.Clone(keys)
	sortKeys(todo)
	todo = dedupSorted(todo)
	var skipped [][]byte
	for _, k := range todo {
		err := t.lockKeys(ctx, 0, [][]byte{k})
		var re *kv.RetryableError
		if errors.As(err, &re) && re.LockWaitTimeout {
			skipped = append(skipped, k)
			continue
		}
		if err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// lockWait is how long LockKeys waits for a conflicting lock.
func (t *Txn) lockWait() time.Duration {
	if !t.opts.Pessimistic {
		return 0
	}
	if t.opts.LockWaitTimeout > 0 {
		return t.opts.LockWaitTimeout
	}
	return t.c.opts.LockWaitTimeout
}

// lockKeys is LockKeys waiting at most wait for conflicting locks.
func (t *Txn) lockKeys(ctx context.Context, wait time.Duration, keys [][]byte) error {
	if t.finished {
		return ErrTxnFinished
	}
	todo := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if len(k) == 0 {
			return fmt.Errorf("client: empty key")
		}
		if _, ok := t.locked[string(k)]; !ok {
			todo = append(todo, k)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	sortKeys(todo)
	todo = dedupSorted(todo)

	forUpdateTS := t.stmtForUpdateTS
	if forUpdateTS == 0 {
		forUpdateTS = t.startTS
		if t.opts.ReadCommitted {
			ts, err := t.c.getTS(ctx)
			if err != nil {
				return err
			}
			forUpdateTS = ts
		}
	}
	if forUpdateTS > t.forUpdateTS {
		t.forUpdateTS = forUpdateTS
	}
	if t.locked == nil {
		t.locked = make(map[string]uint64, len(todo))
	}

	pl := &pessimisticLocker{t: t, forUpdateTS: forUpdateTS, waitStart: time.Now(), waitTimeout: wait}
	bo := newBackoffer(ctx, t.c.opts.BackoffBudget)
	if t.primary == nil {
		// Lock the primary alone first: every other lock points at it,
		// and a reader meeting a secondary must find the primary.
		primary := bytes.Clone(todo[0])
		t.primary = primary
		if err := pl.lock(&bo, [][]byte{primary}); err != nil {
			if _, locked := t.locked[string(primary)]; !locked {
				t.primary = nil
				return err
			}
			// Locked with a conflict: the primary is held; the
			// statement runs again.
			t.heartbeat = t.c.startHeartbeat(primary, t.startTS, t.began)
			return t.refreshAfterConflict(ctx, err)
		}
		t.heartbeat = t.c.startHeartbeat(primary, t.startTS, t.began)
		todo = todo[1:]
		if len(todo) == 0 {
			return nil
		}
	}
	return t.refreshAfterConflict(ctx, pl.lock(&bo, todo))
}

// pessimisticLocker runs one LockKeys call.
type pessimisticLocker struct {
	t           *Txn
	forUpdateTS uint64
	waitStart   time.Time
	waitTimeout time.Duration // zero: fail at once on a live lock
	mu          sync.Mutex    // guards t.locked while regions lock in parallel
}

// lock locks sorted keys, one request per region, regions in parallel.
func (pl *pessimisticLocker) lock(bo *backoffer, keys [][]byte) error {
	groups, err := pl.t.c.regions.groupSortedKeys(bo.ctx, keys)
	if err != nil {
		return err
	}
	return forEachParallel(len(groups), func(i int) error {
		g := groups[i]
		sub := bo
		if len(groups) > 1 {
			f := bo.fork()
			sub = &f
		}
		return pl.lockRegion(sub, g.entry, keys[g.lo:g.hi])
	})
}

// quickReturn is how soon a response must come back for the client to
// assume the leader did not wait (the lock was met at once): it then backs
// off itself before it asks again, instead of spinning.
const quickReturn = 10 * time.Millisecond

func (pl *pessimisticLocker) lockRegion(bo *backoffer, e *regionEntry, keys [][]byte) error {
	t, c := pl.t, pl.t.c
	muts := make([]*kvpb.Mutation, len(keys))
	mutVals := make([]kvpb.Mutation, len(keys))
	for i, k := range keys {
		mutVals[i].Op, mutVals[i].Key = kvpb.Op_PessimisticLock, k
		muts[i] = &mutVals[i]
	}
	waitBo := newBackoffer(bo.ctx, pl.waitTimeout)
	for {
		remaining := pl.waitTimeout - time.Since(pl.waitStart)
		var waitMs int64
		if remaining > 0 {
			waitMs = max(remaining.Milliseconds(), 1)
		}
		sentAt := time.Now()
		resp, outcome, err := sendOnce(c, bo, e, func(kvc kvpb.KvClient) (*kvpb.PessimisticLockResponse, error) {
			return kvc.KvPessimisticLock(bo.ctx, &kvpb.PessimisticLockRequest{
				Context:       e.rpcCtx,
				Mutations:     muts,
				PrimaryLock:   t.primary,
				StartVersion:  t.startTS,
				LockTtl:       uint64((time.Since(t.began) + c.opts.LockTTL).Milliseconds()),
				ForUpdateTs:   pl.forUpdateTS,
				WaitTimeoutMs: waitMs,
				// A pessimistic statement runs again after a conflict;
				// it keeps the locks it won meanwhile (fair to waiters:
				// no one takes the row while it reads it again).
				LockWithConflict: t.opts.Pessimistic,
			})
		})
		if err != nil {
			return err
		}
		if outcome != sent {
			// Locking again is safe: a lock already held is held again.
			return pl.lock(bo, keys)
		}
		if len(resp.Pending) > 0 {
			pl.mu.Lock()
			if t.pending == nil {
				t.pending = make(map[string]pendingValue, len(resp.Pending))
			}
			for _, pv := range resp.Pending {
				t.pending[string(pv.Key)] = pendingValue{commitTS: pv.CommitTs, value: pv.Value, deleted: pv.Deleted}
			}
			pl.mu.Unlock()
		}
		if resp.LockedWithConflict {
			// Every key is locked; the conflicts say the statement read
			// stale rows. Locks are at the conflicting commits' ts: the
			// transaction's commit must land above them.
			// Each key's lock checked newer commits up to the
			// statement's for-update ts, or up to the commit it
			// conflicted with.
			pl.mu.Lock()
			conflictTS := uint64(0)
			for _, k := range keys {
				t.locked[string(k)] = pl.forUpdateTS
			}
			for _, ke := range resp.Errors {
				if ke != nil && ke.Conflict != nil {
					if _, ok := t.locked[string(ke.Conflict.Key)]; ok {
						t.locked[string(ke.Conflict.Key)] = max(pl.forUpdateTS, ke.Conflict.ConflictCommitTs)
					}
					conflictTS = max(conflictTS, ke.Conflict.ConflictCommitTs)
				}
			}
			t.forUpdateTS = max(t.forUpdateTS, conflictTS)
			pl.mu.Unlock()
			return t.lockConflict(fmt.Sprintf("rows were committed after transaction %d read them (locked now)", t.startTS))
		}
		var locks []*kvpb.LockInfo
		for _, ke := range resp.Errors {
			switch {
			case ke == nil:
			case ke.Locked != nil && ke.Locked.LockVersion == t.startTS:
				// already ours
			case ke.Locked != nil:
				locks = append(locks, ke.Locked)
			case ke.Deadlock != nil:
				return &kv.RetryableError{Deadlock: true,
					Reason: fmt.Sprintf("deadlock: transaction %d waited for a lock of transaction %d, which waits for it", t.startTS, ke.Deadlock.LockTs)}
			case ke.Conflict != nil && t.opts.Pessimistic:
				return t.lockConflict(fmt.Sprintf("transaction %d committed a row after transaction %d read it", ke.Conflict.ConflictTs, t.startTS))
			default:
				return keyErrorAsError(ke)
			}
		}
		if len(locks) == 0 {
			pl.mu.Lock()
			for _, k := range keys {
				t.locked[string(k)] = pl.forUpdateTS
			}
			pl.mu.Unlock()
			return nil
		}
		// The leader waited, or the wait is over: settle the locks of
		// finished or abandoned transactions and try again while time
		// remains.
		wait, err := c.resolver.resolve(bo, t.startTS, t.startTS, locks)
		if err != nil {
			return err
		}
		l := locks[0]
		if wait == 0 {
			// The locks were stale and are gone: try again.
			if err := bo.afterResolve(fmt.Errorf("lock of transaction %d", l.LockVersion)); err != nil {
				return err
			}
			continue
		}
		remaining = pl.waitTimeout - time.Since(pl.waitStart)
		if remaining <= 0 {
			return pl.timedOut(l)
		}
		if time.Since(sentAt) < quickReturn {
			if err := waitBo.backoffAtMost(boTxnLock, min(wait, remaining), fmt.Errorf("lock of transaction %d", l.LockVersion)); err != nil {
				if bo.ctx.Err() != nil {
					return bo.ctx.Err()
				}
				return pl.timedOut(l)
			}
		}
	}
}

func (pl *pessimisticLocker) timedOut(l *kvpb.LockInfo) error {
	return retryable(fmt.Sprintf("lock wait timeout exceeded: a row is locked by transaction %d", l.LockVersion), true)
}

// Rollback discards the buffered writes and releases pessimistic locks.
// Releasing is best effort: a lock it misses expires with its TTL.
func (t *Txn) Rollback(ctx context.Context) error {
	if t.finished {
		return nil
	}
	t.finished = true
	t.stopHeartbeat()
	return t.pessimisticRollback(ctx)
}

// pessimisticRollback releases the locks taken by LockKeys.
func (t *Txn) pessimisticRollback(ctx context.Context) error {
	if len(t.locked) == 0 {
		return nil
	}
	t.stopHeartbeat()
	keys := make([][]byte, 0, len(t.locked))
	for k := range t.locked {
		keys = append(keys, []byte(k))
	}
	sortKeys(keys)
	rctx, cancel := cleanupContext(ctx, cleanupTimeout)
	defer cancel()
	bo := newBackoffer(rctx, t.c.opts.BackoffBudget)
	return t.pessimisticRollbackKeys(&bo, keys)
}

func (t *Txn) pessimisticRollbackKeys(bo *backoffer, keys [][]byte) error {
	c := t.c
	groups, err := c.regions.groupSortedKeys(bo.ctx, keys)
	if err != nil {
		return err
	}
	return forEachParallel(len(groups), func(i int) error {
		g := groups[i]
		sub := bo.fork()
		e, part := g.entry, keys[g.lo:g.hi]
		resp, outcome, err := sendOnce(c, &sub, e, func(kvc kvpb.KvClient) (*kvpb.PessimisticRollbackResponse, error) {
			return kvc.KvPessimisticRollback(sub.ctx, &kvpb.PessimisticRollbackRequest{
				Context:      e.rpcCtx,
				StartVersion: t.startTS,
				ForUpdateTs:  t.forUpdateTS,
				Keys:         part,
			})
		})
		if err != nil {
			return err
		}
		if outcome != sent {
			return t.pessimisticRollbackKeys(&sub, part)
		}
		for _, ke := range resp.Errors {
			if ke != nil {
				return keyErrorAsError(ke)
			}
		}
		return nil
	})
}

func (t *Txn) stopHeartbeat() {
	if t.heartbeat != nil {
		t.heartbeat.stop()
		t.heartbeat = nil
	}
}

// heartbeat keeps a transaction's primary lock alive while its coordinator
// is: every third of the lock TTL it extends the TTL to (time since the
// transaction began + LockTTL). If the coordinator dies, heartbeats stop and
// the locks expire LockTTL later.
//
// It runs on a timer, not on a goroutine of its own: most transactions end
// long before the first beat (every pessimistic transaction starts one), and
// stopping a timer costs the committing goroutine no wait for another to be
// scheduled. A beat already under way when the transaction ends finds the
// lock gone, which is harmless.
type heartbeat struct {
	c       *Client
	primary []byte
	startTS uint64
	began   time.Time

	mu          sync.Mutex
	timer       *time.Timer
	stopped     bool
	established bool // a beat succeeded: "no such lock" now means finished
}

func (c *Client) startHeartbeat(primary []byte, startTS uint64, began time.Time) *heartbeat {
	h := &heartbeat{c: c, primary: primary, startTS: startTS, began: began}
	h.mu.Lock()
	h.timer = time.AfterFunc(c.opts.LockTTL/3, h.beat)
	h.mu.Unlock()
	return h
}

// stop ends the heartbeats; it does not wait for a beat under way.
func (h *heartbeat) stop() {
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	h.mu.Unlock()
}

func (h *heartbeat) beat() {
	c := h.c
	if c.closing.Err() != nil || time.Since(h.began) > c.opts.MaxTxnLifetime {
		return
	}
	ttl := uint64((time.Since(h.began) + c.opts.LockTTL).Milliseconds())
	switch c.sendHeartbeat(c.closing, h.primary, h.startTS, ttl) {
	case heartbeatOK:
		h.established = true
	case heartbeatLockGone:
		// Until a beat has succeeded, "no such lock" only means the
		// primary's prewrite has not landed yet.
		if h.established {
			return // committed or rolled back: nothing to keep alive
		}
	}
	h.mu.Lock()
	if !h.stopped {
		h.timer.Reset(c.opts.LockTTL / 3)
	}
	h.mu.Unlock()
}

type heartbeatResult uint8

const (
	heartbeatOK heartbeatResult = iota
	heartbeatFailed
	heartbeatLockGone
)

// sendHeartbeat extends the primary lock's TTL once.
func (c *Client) sendHeartbeat(ctx context.Context, primary []byte, startTS, ttl uint64) heartbeatResult {
	e, err := c.regions.locate(ctx, primary)
	if err != nil {
		return heartbeatFailed
	}
	kvc, err := c.kvClient(e)
	if err != nil {
		return heartbeatFailed
	}
	resp, err := kvc.KvTxnHeartBeat(ctx, &kvpb.TxnHeartBeatRequest{
		Context:       e.rpcCtx,
		PrimaryLock:   primary,
		StartVersion:  startTS,
		AdviseLockTtl: ttl,
	})
	switch {
	case err != nil:
		return heartbeatFailed
	case resp.RegionError != nil:
		c.regions.onRegionError(e, resp.RegionError)
		return heartbeatFailed
	case resp.Error != nil:
		return heartbeatLockGone
	}
	return heartbeatOK
}
