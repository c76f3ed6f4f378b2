package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// resolvedCacheSize bounds the cache of finished transactions' outcomes.
const resolvedCacheSize = 4096

// resolvedCacheTTL is how long a finished transaction's outcome is reused.
// Outcomes never change once decided; the bound only keeps memory flat.
const resolvedCacheTTL = 30 * time.Second

// txnStatus is the outcome of CheckTxnStatus on a transaction's primary.
type txnStatus struct {
	// ttl is non-zero while the transaction is alive (milliseconds from
	// the physical part of its start ts).
	ttl uint64
	// commitTS is non-zero once the transaction committed.
	commitTS uint64
}

func (s txnStatus) alive() bool { return s.ttl != 0 && s.commitTS == 0 }

type resolvedTxn struct {
	status txnStatus
	at     time.Time
}

// lockResolver clears locks left in a reader's or writer's way. Percolator
// decides a transaction's fate at its primary lock: CheckTxnStatus there
// says committed (roll the lock forward), rolled back (remove it), or alive
// (wait). CheckTxnStatus also rolls back a primary whose TTL has expired,
// which is how the locks of a crashed coordinator are cleaned up.
type lockResolver struct {
	c *Client

	mu       sync.Mutex
	resolved map[uint64]resolvedTxn // by start ts of the lock owner
}

func newLockResolver(c *Client) *lockResolver {
	return &lockResolver{c: c, resolved: make(map[uint64]resolvedTxn)}
}

func (lr *lockResolver) cached(startTS uint64) (txnStatus, bool) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	r, ok := lr.resolved[startTS]
	if !ok || time.Since(r.at) > resolvedCacheTTL {
		return txnStatus{}, false
	}
	return r.status, true
}

func (lr *lockResolver) remember(startTS uint64, s txnStatus) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if len(lr.resolved) >= resolvedCacheSize {
		now := time.Now()
		for ts, r := range lr.resolved {
			if now.Sub(r.at) > resolvedCacheTTL {
				delete(lr.resolved, ts)
			}
		}
		if len(lr.resolved) >= resolvedCacheSize {
			clear(lr.resolved)
		}
	}
	lr.resolved[startTS] = resolvedTxn{status: s, at: time.Now()}
}

// resolve tries to clear locks met by a request at callerTS on behalf of
// the transaction that started at ownerTS (a lock of ownerTS is the
// caller's own and is never waited for). It returns how long to wait for the soonest-expiring lock of a live
// transaction, or zero when every lock was cleared; the caller retries its
// request after that wait.
func (lr *lockResolver) resolve(bo *backoffer, callerTS, ownerTS uint64, locks []*kvpb.LockInfo) (time.Duration, error) {
	var wait time.Duration
	for _, l := range locks {
		if l.LockVersion == ownerTS {
			return 0, fmt.Errorf("client: transaction %d blocked by its own lock", ownerTS)
		}
		status, expiresIn, err := lr.txnStatus(bo, callerTS, l)
		if err != nil {
			return 0, err
		}
		if status.alive() {
			if expiresIn <= 0 {
				expiresIn = time.Millisecond
			}
			if wait == 0 || expiresIn < wait {
				wait = expiresIn
			}
			continue
		}
		if err := lr.resolveLock(bo, l, status.commitTS); err != nil {
			return 0, err
		}
	}
	return wait, nil
}

// txnStatus asks the primary of l's transaction for its outcome. For a live
// transaction it also returns how long until its lock expires.
func (lr *lockResolver) txnStatus(bo *backoffer, callerTS uint64, l *kvpb.LockInfo) (txnStatus, time.Duration, error) {
	if s, ok := lr.cached(l.LockVersion); ok {
		return s, 0, nil
	}
	currentTS, err := lr.c.getTS(bo.ctx)
	if err != nil {
		return txnStatus{}, 0, err
	}
	// Only a lock that has itself expired may make the primary's absence
	// final: while it is young the primary's prewrite may still be in
	// flight, and rolling it back would abort a healthy transaction.
	rollbackIfNotExist := lockExpiresIn(l.LockVersion, l.LockTtl, currentTS) <= 0
	req := &kvpb.CheckTxnStatusRequest{
		PrimaryKey:         l.PrimaryLock,
		LockTs:             l.LockVersion,
		CallerStartTs:      callerTS,
		CurrentTs:          currentTS,
		RollbackIfNotExist: rollbackIfNotExist,
	}
	resp, _, err := sendRequest(lr.c, bo,
		func() (*regionEntry, error) { return lr.c.regions.locate(bo.ctx, l.PrimaryLock) },
		func(kvc kvpb.KvClient, e *regionEntry) (*kvpb.CheckTxnStatusResponse, error) {
			req.Context = e.rpcCtx
			return kvc.KvCheckTxnStatus(bo.ctx, req)
		})
	if err != nil {
		return txnStatus{}, 0, err
	}
	{
		if ke := resp.Error; ke != nil {
			if ke.TxnNotFound != nil && !rollbackIfNotExist {
				// The primary is not written yet: wait as for a
				// live lock, until the lock we met expires.
				return txnStatus{ttl: l.LockTtl}, lockExpiresIn(l.LockVersion, l.LockTtl, currentTS), nil
			}
			return txnStatus{}, 0, fmt.Errorf("client: check status of txn %d: %w", l.LockVersion, keyErrorAsError(ke))
		}
		s := txnStatus{ttl: resp.LockTtl, commitTS: resp.CommitVersion}
		if s.alive() {
			return s, lockExpiresIn(l.LockVersion, s.ttl, currentTS), nil
		}
		lr.remember(l.LockVersion, s)
		return s, 0, nil
	}
}

// resolveLock commits (commitTS > 0) or rolls back (commitTS == 0) the lock
// l on its key.
func (lr *lockResolver) resolveLock(bo *backoffer, l *kvpb.LockInfo, commitTS uint64) error {
	req := &kvpb.ResolveLockRequest{
		StartVersion:  l.LockVersion,
		CommitVersion: commitTS,
		Keys:          [][]byte{l.Key},
	}
	resp, _, err := sendRequest(lr.c, bo,
		func() (*regionEntry, error) { return lr.c.regions.locate(bo.ctx, l.Key) },
		func(kvc kvpb.KvClient, e *regionEntry) (*kvpb.ResolveLockResponse, error) {
			req.Context = e.rpcCtx
			return kvc.KvResolveLock(bo.ctx, req)
		})
	if err != nil {
		return err
	}
	{
		if resp.Error != nil {
			return fmt.Errorf("client: resolve lock of txn %d: %w", l.LockVersion, keyErrorAsError(resp.Error))
		}
		return nil
	}
}

// waitForLocks resolves locks and, when some belong to live transactions,
// sleeps until the first may have expired (bounded by the backoff schedule
// and budget). It returns nil when the caller should retry its request.
func (lr *lockResolver) waitForLocks(bo *backoffer, callerTS, ownerTS uint64, locks []*kvpb.LockInfo) error {
	wait, err := lr.resolve(bo, callerTS, ownerTS, locks)
	if err != nil {
		return err
	}
	l := locks[0]
	if wait == 0 {
		return bo.afterResolve(fmt.Errorf("client: a key is locked by txn %d", l.LockVersion))
	}
	return bo.backoffAtMost(boTxnLock, wait, fmt.Errorf("client: a key is locked by live txn %d", l.LockVersion))
}

// keyErrorAsError turns a KeyError that is not a lock into a Go error.
// Conflicts and deadlocks become *kv.RetryableError.
func keyErrorAsError(ke *kvpb.KeyError) error {
	switch {
	case ke.Conflict != nil:
		return writeConflictError(ke.Conflict)
	case ke.Deadlock != nil:
		return &kv.RetryableError{Deadlock: true, Reason: fmt.Sprintf("deadlock: waiting for a lock held by txn %d", ke.Deadlock.LockTs)}
	case ke.Retryable != "":
		return retryable("transaction must be retried", false)
	case ke.AlreadyExist != nil:
		return &kv.KeyExistsError{Key: ke.AlreadyExist.Key}
	case ke.TxnNotFound != nil:
		return fmt.Errorf("client: txn %d not found", ke.TxnNotFound.StartTs)
	case strings.HasPrefix(ke.Abort, kv.ErrTxnTooOld.Error()):
		return fmt.Errorf("client: transaction aborted: %w%s", kv.ErrTxnTooOld, strings.TrimPrefix(ke.Abort, kv.ErrTxnTooOld.Error()))
	case ke.Abort != "":
		return errors.New("client: transaction aborted: " + ke.Abort)
	case ke.Locked != nil:
		return fmt.Errorf("client: a key is locked by txn %d", ke.Locked.LockVersion)
	}
	return errors.New("client: unknown key error")
}

// cleanupContext derives a context for cleanup that must run even when the
// caller's context is already cancelled (rolling back, committing
// secondaries), bounded by d.
func cleanupContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// ResolveLocks settles the given locks (found by scanning a region's lock
// column family) the way a reader would: it asks each transaction's primary
// for its fate, rolling back one whose primary lock has expired, and then
// commits or rolls back the lock. Locks of live transactions are left in
// place and counted in live; they will commit above any timestamp taken
// now. The GC of a region resolves the locks of old transactions this way
// before collecting, so that no lock outlives its primary's commit record.
func (c *Client) ResolveLocks(ctx context.Context, locks []*kvpb.LockInfo) (live int, err error) {
	bo := newBackoffer(ctx, c.opts.BackoffBudget)
	for _, l := range locks {
		// The largest caller ts: ask for the fate without pushing the
		// transaction's min commit ts.
		status, _, err := c.resolver.txnStatus(&bo, math.MaxUint64, l)
		if err != nil {
			return live, err
		}
		if status.alive() {
			live++
			continue
		}
		if err := c.resolver.resolveLock(&bo, l, status.commitTS); err != nil {
			return live, err
		}
	}
	return live, nil
}
