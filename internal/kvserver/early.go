package kvserver

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-db/strata/internal/mvcc"
)

// Early lock release.
//
// A commit (a one-phase commit, or the commit of prewritten keys) used to
// hold its keys' latches, and so keep its waiters parked, until its Raft
// entry was durable and applied: with one hot row (TPC-C's warehouse) every
// hand-over of the row cost an fsync. InnoDB releases a row lock at its
// in-memory commit, before the redo log is flushed. Strata does the same
// for pessimistic lock requests when a commit has waiters: once the commit
// has staged its batch and is about to be proposed, it records its commit
// records in the store's pending table, releases its latches and wakes the
// first waiter of each key. Until the entry is applied (or its proposal
// fails):
//
//   - a pessimistic lock request treats each pending key as committed by
//     it (mvcc.PessimisticLockPending): a for-update ts below the commit ts
//     is a write conflict (locked at the commit ts when the request asks
//     for lock-with-conflict), the returned value is the pending one, and
//     the response lists the keys locked over a pending put or delete
//     (PessimisticLockResponse.pending) with their values, which the
//     client serves its reads of those keys at or above the commit ts from
//     while it holds the lock;
//   - every other writer on a pending key (prewrite, one-phase commit,
//     commit, rollback, lock resolution, status checks, heartbeats, lock
//     hand-over) waits for the entry to be applied (acquire), so nothing is
//     decided from applied state that lacks it and the waiter's own
//     prewrite is proposed after the holder's entry;
//   - plain readers are unchanged: a one-phase commit's memory locks and a
//     prewritten key's lock stay until the apply, so no reader sees a value
//     whose entry may still be lost.
//
// The lock granted over a pending commit depends on it: if the entry never
// applies (its proposal failed, or it was lost with its leader), the value
// the waiter read never existed. The client sends the commit ts with its
// prewrite (PrewriteRequest.lock_pending_commit_ts), and the prewrite,
// which waits for the entry like every writer, fails with
// PessimisticLockNotFound unless the commit record is there, whether the
// lock is still held, was lost with the leader, or was taken again. The
// one effect of a lost commit a client can observe is therefore that a
// transaction that read its value in a statement fails at its commit.
type pendingTable struct {
	n  atomic.Int64 // entries in m; zero makes lookups free
	mu sync.Mutex
	m  map[string]pendingRef
}

type pendingRef struct {
	e *pendingEntry
	w *mvcc.PendingWrite
}

// pendingEntry is one proposed command's pending commit records.
type pendingEntry struct {
	writes []mvcc.PendingWrite
	done   chan struct{} // closed once applied or failed
}

func (t *pendingTable) add(writes []mvcc.PendingWrite) *pendingEntry {
	e := &pendingEntry{writes: writes, done: make(chan struct{})}
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]pendingRef)
	}
	for i := range e.writes {
		t.m[string(e.writes[i].Key)] = pendingRef{e: e, w: &e.writes[i]}
	}
	t.n.Store(int64(len(t.m)))
	t.mu.Unlock()
	return e
}

// finish removes e: its entry was applied, or its proposal failed.
func (t *pendingTable) finish(e *pendingEntry) {
	t.mu.Lock()
	for i := range e.writes {
		k := string(e.writes[i].Key)
		if ref, ok := t.m[k]; ok && ref.e == e {
			delete(t.m, k)
		}
	}
	t.n.Store(int64(len(t.m)))
	t.mu.Unlock()
	close(e.done)
}

// lookup returns key's pending commit record, or nil.
func (t *pendingTable) lookup(key []byte) *mvcc.PendingWrite {
	if t.n.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ref, ok := t.m[string(key)]; ok {
		return ref.w
	}
	return nil
}

// entryOn returns a pending entry on one of keys, or nil.
func (t *pendingTable) entryOn(keys [][]byte) *pendingEntry {
	if t.n.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if ref, ok := t.m[string(k)]; ok {
			return ref.e
		}
	}
	return nil
}

// acquire takes the latches of keys for a writer other than a pessimistic
// lock request, once no commit on them is pending: such a writer decides
// from applied state, which must hold the pending commit first.
func (s *Server) acquire(ctx context.Context, keys [][]byte) (*mvcc.Guard, error) {
	for {
		g := s.cm.Acquire(keys)
		e := s.pending.entryOn(keys)
		if e == nil {
			return g, nil
		}
		g.Release()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// releaseEarly is called by a commit that has staged b under guard and is
// about to propose it. When another transaction waits for a lock on one
// of keys, it records b's commit records as pending and releases the
// latches, and returns the pending entry, which the caller must finish
// once the entry is applied or its proposal failed; the caller then wakes
// the keys' first waiters once it has handed the entry to Raft (or failed
// to), right before it blocks (raftstore.Store.ProposeThen), so that the
// woken waiter, on the serial path of a hot row, is the goroutine the
// scheduler runs next. Otherwise, or if b commits nothing, it returns nil
// and the caller keeps its latches as before.
func (s *Server) releaseEarly(guard *mvcc.Guard, b *pebble.Batch, keys [][]byte) *pendingEntry {
	if !s.waiters.waiting(keys) {
		return nil
	}
	writes, err := mvcc.PendingWrites(s.db, b)
	if err != nil || len(writes) == 0 {
		return nil
	}
	e := s.pending.add(writes)
	guard.Release()
	metricEarlyReleases.Inc()
	return e
}

var metricEarlyReleases = prometheus.NewCounter(prometheus.CounterOpts{
	Namespace: "strata", Subsystem: "kv", Name: "early_lock_releases_total",
	Help: "Commits that released their keys' latches and woke their lock waiters at proposal instead of at apply.",
})

var metricPendingLocks = prometheus.NewCounter(prometheus.CounterOpts{
	Namespace: "strata", Subsystem: "kv", Name: "locks_over_pending_commits_total",
	Help: "Pessimistic locks granted on a key whose commit by another transaction was proposed but not yet applied.",
})

func init() { prometheus.MustRegister(metricEarlyReleases, metricPendingLocks) }
