package client

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"

	"github.com/strata-db/strata/internal/kv"
)

// Snapshot refresh: a pessimistic transaction under snapshot isolation
// that has read at its snapshot may still move the snapshot forward when a
// lock finds a row committed after it, if every read it made would give
// the same answer at the newer timestamp: the transaction is then
// indistinguishable from one that began there, and the statement runs
// again instead of the transaction failing (CockroachDB refreshes its
// reads the same way). Only point reads are recorded, each as a hash of
// the value read; a range read, or more than maxRefreshKeys point reads,
// makes the snapshot final.

// maxRefreshKeys bounds the point reads a transaction remembers.
const maxRefreshKeys = 256

var refreshSeed = maphash.MakeSeed()

// pointRead is what a point read at the snapshot saw: the hash of the
// value, or digest's sum of it when digest is not nil.
type pointRead struct {
	hash   uint64
	found  bool
	digest kv.ReadDigest
}

// sum is the hash a point read records of value under digest d.
func sum(d kv.ReadDigest, value []byte) uint64 {
	if d != nil {
		return d.Sum(value)
	}
	return maphash.Bytes(refreshSeed, value)
}

// SetReadDigest implements kv.ReadDigester.
func (t *Txn) SetReadDigest(d kv.ReadDigest) { t.readDigest = d }

// readSet is the reads a refresh has to check.
type readSet struct {
	points map[string]pointRead
	// final: a range was read, or too many points: no refresh.
	final bool
}

// recording reports whether reads now are at the snapshot and matter to a
// refresh.
func (t *Txn) recording() bool {
	return t.opts.Pessimistic && !t.opts.ReadCommitted && t.stmtForUpdateTS == 0 && !t.reads.final
}

// notePoint records a point read at the snapshot.
func (t *Txn) notePoint(key, value []byte, found bool) {
	if !t.recording() {
		return
	}
	if t.reads.points == nil {
		t.reads.points = make(map[string]pointRead, 8)
	}
	d := t.readDigest
	if !found {
		d = nil
	}
	if r, ok := t.reads.points[string(key)]; ok {
		// Read again at the same snapshot, so the same value: when the two
		// reads used different parts of it, the whole value must stay.
		if r.digest != nil && (d == nil || !d.Same(r.digest)) {
			t.reads.points[string(key)] = pointRead{hash: sum(nil, value), found: found}
		}
		return
	}
	if len(t.reads.points) >= maxRefreshKeys {
		t.reads.final, t.reads.points = true, nil
		return
	}
	t.reads.points[string(key)] = pointRead{hash: sum(d, value), found: found, digest: d}
}

// rangeView is view for a range read, which makes the snapshot final.
func (t *Txn) rangeView() readView {
	if t.recording() {
		t.reads.final, t.reads.points = true, nil
	}
	return t.view()
}

// refreshAfterConflict turns a lock conflict that would abort the
// transaction (kv.RetryableError.Aborted) into one that runs the statement
// again, when the snapshot can move past it (refresh). Other errors, and
// conflicts that cannot be refreshed, are returned as they are.
func (t *Txn) refreshAfterConflict(ctx context.Context, err error) error {
	var re *kv.RetryableError
	if !errors.As(err, &re) || !re.Aborted || t.reads.final {
		return err
	}
	ok, rerr := t.refresh(ctx)
	if rerr != nil || !ok {
		return err
	}
	return &kv.RetryableError{PessimisticConflict: true, Reason: re.Reason}
}

// refresh moves the snapshot to a fresh timestamp if every recorded point
// read gives the same value there; it reports whether it did.
func (t *Txn) refresh(ctx context.Context) (bool, error) {
	ts, err := t.c.getTS(ctx)
	if err != nil {
		return false, err
	}
	keys := make([][]byte, 0, len(t.reads.points))
	for k := range t.reads.points {
		keys = append(keys, []byte(k))
	}
	sortKeys(keys)
	var mu sync.Mutex
	now := make(map[string]uint64, len(keys))
	if len(keys) > 0 {
		bo := newBackoffer(ctx, t.c.opts.BackoffBudget)
		err = t.c.batchGet(&bo, readView{ts: ts, startTS: t.startTS}, keys, func(k, v []byte) {
			h := sum(t.reads.points[string(k)].digest, v)
			mu.Lock()
			now[string(k)] = h
			mu.Unlock()
		})
		if err != nil {
			return false, err
		}
	}
	for k, r := range t.reads.points {
		h, found := now[k]
		if found != r.found || (found && h != r.hash) {
			return false, nil
		}
	}
	t.snapTS = ts
	return true, nil
}
