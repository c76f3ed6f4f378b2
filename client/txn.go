package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// ErrTxnFinished is returned by operations on a transaction after Commit or
// Rollback.
var ErrTxnFinished = errors.New("client: transaction already committed or rolled back")

// Txn is a snapshot-isolated transaction (see kv.Txn). Reads see the
// snapshot at StartTS (or at the latest RefreshSnapshot under read
// committed) plus the transaction's own buffered writes. Writes stay in
// memory until Commit. A Txn is used by one goroutine at a time.
type Txn struct {
	c       *Client
	opts    kv.TxnOptions
	startTS uint64
	// readTS is the snapshot the current statement's reads use: snapTS,
	// or a fresh timestamp in read-committed transactions and for a
	// pessimistic statement that may move the snapshot (BeginStatement).
	readTS uint64
	// snapTS is the transaction's snapshot under snapshot isolation:
	// startTS until a pessimistic transaction that has read nothing at it
	// moves it forward. snapRead records that a statement that does not
	// lock has read at it: from then on a row committed by another
	// transaction after snapTS cannot be locked without breaking snapshot
	// isolation (it would overwrite a write this transaction did not see),
	// so such a conflict aborts the transaction (first committer wins)
	// instead of running the statement again at a newer timestamp.
	snapTS   uint64
	snapRead bool
	// reads are the snapshot reads a refresh checks (refresh.go);
	// readDigest is the part of values the current reads use (nil: all).
	reads      readSet
	readDigest kv.ReadDigest
	began      time.Time
	buf        memBuffer

	// Pessimistic locks taken by LockKeys: each key with the for-update
	// ts its lock checked newer commits up to, the primary (the first key
	// ever locked) and the largest for_update_ts used.
	locked      map[string]uint64
	primary     []byte
	forUpdateTS uint64
	heartbeat   *heartbeat
	// pending: the keys locked while another transaction's commit of them
	// was proposed but not yet applied (the leader released that commit's
	// lock early), with the committed value. While the lock is held no
	// other transaction commits the key, so it is the key's value at every
	// ts at or above the commit's, and reads there are served from here
	// instead of waiting for the commit to apply. The commit ts goes with
	// the prewrite, which fails if that commit never applied.
	pending map[string]pendingValue

	// stmts counts BeginStatement calls; stmtForUpdateTS is the current
	// statement's for-update ts (zero when it does not read for update).
	stmts           int
	stmtForUpdateTS uint64

	// reread holds what point reads at readTS returned (see rereads.go).
	reread rereadCache

	finished bool
}

var _ kv.Txn = (*Txn)(nil)

func newTxn(c *Client, ts uint64, opts kv.TxnOptions) *Txn {
	return &Txn{c: c, opts: opts, startTS: ts, readTS: ts, snapTS: ts, began: time.Now()}
}

// readView is the snapshot a read uses: the timestamp to read at and the
// start timestamp of the transaction reading (whose own locks are not
// waited for).
type readView struct{ ts, startTS uint64 }

func (t *Txn) view() readView {
	if t.stmtForUpdateTS == 0 {
		t.snapRead = true
	}
	return readView{ts: t.readTS, startTS: t.startTS}
}

// StartTS is the transaction's start timestamp.
func (t *Txn) StartTS() uint64 { return t.startTS }

// Len is the number of buffered writes.
func (t *Txn) Len() int { return t.buf.len() }

// RefreshSnapshot moves the read snapshot of a read-committed transaction to
// a fresh timestamp; the SQL layer calls it before each statement. It is a
// no-op for snapshot-isolated transactions.
func (t *Txn) RefreshSnapshot(ctx context.Context) error {
	if t.finished {
		return ErrTxnFinished
	}
	if !t.opts.ReadCommitted {
		return nil
	}
	ts, err := t.c.getTS(ctx)
	if err != nil {
		return err
	}
	t.readTS = ts
	return nil
}

// BeginStatement implements kv.StatementTxn: it sets the timestamp the next
// statement reads at and, for a statement that reads for update, locks at.
//
// Under read committed every statement after the first reads (and locks)
// at a fresh timestamp. Under snapshot isolation plain reads stay at the
// transaction's snapshot; a statement that locks reads and locks at a
// fresh timestamp only while the transaction has read nothing at its
// snapshot (the snapshot then moves forward with it, as if the
// transaction had begun now), and at the snapshot after that, where a
// row committed since fails the transaction (see snapRead).
func (t *Txn) BeginStatement(ctx context.Context, forUpdate, retry bool) error {
	if t.finished {
		return ErrTxnFinished
	}
	first := t.stmts == 0
	t.stmts++
	ts := t.snapTS
	fresh := false
	switch {
	case t.opts.ReadCommitted:
		fresh = retry || !first
	case forUpdate:
		fresh = (retry || !first) && !t.snapRead
	}
	if fresh {
		var err error
		if ts, err = t.c.getTS(ctx); err != nil {
			return err
		}
		if !t.opts.ReadCommitted {
			t.snapTS = ts
		}
	}
	t.readTS = ts
	t.stmtForUpdateTS = 0
	if forUpdate {
		t.stmtForUpdateTS = ts
	}
	return nil
}

// lockConflict is the error of a pessimistic lock that found a row
// committed after the statement's for-update timestamp: the statement may
// run again at a newer one, unless the transaction has read at its
// snapshot under snapshot isolation, which must then abort.
func (t *Txn) lockConflict(reason string) error {
	if t.snapRead && !t.opts.ReadCommitted {
		return &kv.RetryableError{Aborted: true, Reason: reason}
	}
	return &kv.RetryableError{PessimisticConflict: true, Reason: reason}
}

// writable checks that a write of key may be buffered.
func (t *Txn) writable(key []byte) error {
	if t.finished {
		return ErrTxnFinished
	}
	if len(key) == 0 {
		return errors.New("client: empty key")
	}
	return nil
}

// Set buffers key = value until Commit.
func (t *Txn) Set(key, value []byte) error {
	if err := t.writable(key); err != nil {
		return err
	}
	t.buf.set(key, value, false)
	return nil
}

// Insert buffers key = value like Set; Commit checks, as it prewrites the
// key, that key has no committed value, and otherwise fails with a
// *kv.KeyExistsError and writes nothing (kv.Inserter). It saves the read
// a caller would make before a write that must not overwrite.
func (t *Txn) Insert(key, value []byte) error {
	if err := t.writable(key); err != nil {
		return err
	}
	if e, ok := t.buf.get(key); ok {
		if !e.deleted {
			return &kv.KeyExistsError{Key: bytes.Clone(key)}
		}
		t.buf.set(key, value, false) // the transaction deleted it
		return nil
	}
	t.buf.set(key, value, true)
	return nil
}

// Delete buffers the deletion of key until Commit.
func (t *Txn) Delete(key []byte) error {
	if err := t.writable(key); err != nil {
		return err
	}
	t.buf.delete(key)
	return nil
}

// Get returns the value of key visible to the transaction, or
// kv.ErrNotFound.
func (t *Txn) Get(ctx context.Context, key []byte) ([]byte, error) {
	if t.finished {
		return nil, ErrTxnFinished
	}
	if e, ok := t.buf.get(key); ok {
		if e.deleted {
			return nil, kv.ErrNotFound
		}
		return e.value, nil
	}
	if pv, ok := t.pendingAt(key); ok {
		t.view() // a read at the snapshot all the same
		if pv.deleted {
			t.notePoint(key, nil, false)
			return nil, kv.ErrNotFound
		}
		t.notePoint(key, pv.value, true)
		return pv.value, nil
	}
	view := t.view()
	if r, ok := t.reread.get(view.ts, key); ok {
		t.notePoint(key, r.value, r.found)
		if !r.found {
			return nil, kv.ErrNotFound
		}
		return r.value, nil
	}
	v, err := t.c.snapshotGet(ctx, view, key)
	switch {
	case err == nil:
		t.notePoint(key, v, true)
		t.reread.put(view.ts, key, v, true)
	case errors.Is(err, kv.ErrNotFound):
		t.notePoint(key, nil, false)
		t.reread.put(view.ts, key, nil, false)
	}
	return v, err
}

// snapshotGet reads the committed value of key in view.
func (c *Client) snapshotGet(ctx context.Context, view readView, key []byte) ([]byte, error) {
	bo := newBackoffer(ctx, c.opts.BackoffBudget)
	req := &kvpb.GetRequest{Key: key, Version: view.ts}
	for {
		resp, err := c.sendGet(&bo, req)
		if err != nil {
			return nil, err
		}
		if ke := resp.Error; ke != nil {
			if ke.Locked == nil {
				return nil, keyErrorAsError(ke)
			}
			if err := c.resolver.waitForLocks(&bo, view.ts, view.startTS, []*kvpb.LockInfo{ke.Locked}); err != nil {
				return nil, err
			}
			continue
		}
		if resp.NotFound {
			return nil, kv.ErrNotFound
		}
		return resp.Value, nil
	}
}

// sendGet sends req to the leader of req.Key's region, retrying (within
// bo) unreachable stores and region errors. The response it returns has no
// region error; a key error (a lock, a conflict) is the caller's to handle.
func (c *Client) sendGet(bo *backoffer, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	resp, _, err := sendRequest(c, bo,
		func() (*regionEntry, error) { return c.regions.locate(bo.ctx, req.Key) },
		func(kvc kvpb.KvClient, e *regionEntry) (*kvpb.GetResponse, error) {
			req.Context = e.rpcCtx
			return kvc.KvGet(bo.ctx, req)
		})
	return resp, err
}

// BatchGet returns the visible values of the keys that exist, keyed by
// string(key).
func (t *Txn) BatchGet(ctx context.Context, keys [][]byte) (map[string][]byte, error) {
	if t.finished {
		return nil, ErrTxnFinished
	}
	out := make(map[string][]byte, len(keys))
	remote := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if e, ok := t.buf.get(k); ok {
			if !e.deleted {
				out[string(k)] = e.value
			}
			continue
		}
		if pv, ok := t.pendingAt(k); ok {
			if !pv.deleted {
				out[string(k)] = pv.value
			}
			t.view()
			if t.recording() {
				t.notePoint(k, pv.value, !pv.deleted)
			}
			continue
		}
		remote = append(remote, k)
	}
	if len(remote) == 0 {
		return out, nil
	}
	sortKeys(remote)
	remote = dedupSorted(remote)
	view := t.view()
	fetch := remote
	if t.reread.holds(view.ts) {
		fetch = make([][]byte, 0, len(remote))
		for _, k := range remote {
			if r, ok := t.reread.get(view.ts, k); ok {
				if r.found {
					out[string(k)] = r.value
				}
				continue
			}
			fetch = append(fetch, k)
		}
	}
	if len(fetch) > 0 {
		var mu sync.Mutex
		bo := newBackoffer(ctx, t.c.opts.BackoffBudget)
		err := t.c.batchGet(&bo, view, fetch, func(k, v []byte) {
			mu.Lock()
			out[string(k)] = v
			mu.Unlock()
		})
		if err != nil {
			return nil, err
		}
		for _, k := range fetch {
			v, ok := out[string(k)]
			t.reread.put(view.ts, k, v, ok)
		}
	}
	if t.recording() {
		for _, k := range remote {
			v, ok := out[string(k)]
			t.notePoint(k, v, ok)
		}
	}
	return out, nil
}

// batchGet reads sorted keys in view, one request per region, regions in
// parallel, calling found for every key that exists.
func (c *Client) batchGet(bo *backoffer, view readView, keys [][]byte, found func(k, v []byte)) error {
	batches, err := c.regions.groupSortedKeys(bo.ctx, keys)
	if err != nil {
		return err
	}
	return forEachParallel(len(batches), func(i int) error {
		b := batches[i]
		sub := bo
		if len(batches) > 1 {
			f := bo.fork()
			sub = &f
		}
		return c.batchGetRegion(sub, view, b.entry, keys[b.lo:b.hi], found)
	})
}

func (c *Client) batchGetRegion(bo *backoffer, view readView, e *regionEntry, keys [][]byte, found func(k, v []byte)) error {
	resp, outcome, err := sendOnce(c, bo, e, func(kvc kvpb.KvClient) (*kvpb.BatchGetResponse, error) {
		return kvc.KvBatchGet(bo.ctx, &kvpb.BatchGetRequest{Context: e.rpcCtx, Keys: keys, Version: view.ts})
	})
	if err != nil {
		return err
	}
	if outcome != sent {
		// The region may have changed shape: regroup and retry.
		return c.batchGet(bo, view, keys, found)
	}
	var locks []*kvpb.LockInfo
	if ke := resp.Error; ke != nil {
		if ke.Locked == nil {
			return keyErrorAsError(ke)
		}
		locks = append(locks, ke.Locked)
	}
	for _, p := range resp.Pairs {
		if p.Error != nil {
			if p.Error.Locked == nil {
				return keyErrorAsError(p.Error)
			}
			locks = append(locks, p.Error.Locked)
			continue
		}
		found(p.Key, p.Value)
	}
	if len(locks) == 0 {
		return nil
	}
	if err := c.resolver.waitForLocks(bo, view.ts, view.startTS, locks); err != nil {
		return err
	}
	// Read the locked keys again; the others are done.
	retry := make([][]byte, len(locks))
	for i, l := range locks {
		retry[i] = l.Key
	}
	sortKeys(retry)
	return c.batchGet(bo, view, dedupSorted(retry), found)
}

// Scan returns up to limit visible entries of [start, end) in key order
// (descending when reverse); limit <= 0 means no limit.
func (t *Txn) Scan(ctx context.Context, start, end []byte, limit int, reverse bool) ([]kv.KeyValue, error) {
	if t.finished {
		return nil, ErrTxnFinished
	}
	batch := t.c.opts.ScanBatchSize
	if limit > 0 && limit < batch {
		batch = limit
	}
	it, err := newTxnIterator(ctx, t, start, end, reverse, batch)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []kv.KeyValue
	for it.Valid() {
		out = append(out, kv.KeyValue{Key: it.Key(), Value: it.Value()})
		if limit > 0 && len(out) == limit {
			break
		}
		if err := it.Next(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Iter returns an iterator over the visible entries of [start, end). It
// sees the buffered writes as of this call.
func (t *Txn) Iter(ctx context.Context, start, end []byte, reverse bool) (kv.Iterator, error) {
	return t.IterSized(ctx, start, end, reverse, 0)
}

// IterSized implements kv.SizedIterer: when the caller expects at most
// expect entries (0: no bound known), the iterator's first request asks for expect+1 (one
// more, so that a full answer still shows the range ends there), below
// the usual batch size.
func (t *Txn) IterSized(ctx context.Context, start, end []byte, reverse bool, expect int) (kv.Iterator, error) {
	if t.finished {
		return nil, ErrTxnFinished
	}
	batch := t.c.opts.ScanBatchSize
	if expect > 0 && expect < batch {
		batch = expect + 1
	}
	return newTxnIterator(ctx, t, start, end, reverse, batch)
}

// forEachParallel runs fn(0..n-1), concurrently when n > 1, and returns the
// first error.
func forEachParallel(n int, fn func(i int) error) error {
	switch n {
	case 0:
		return nil
	case 1:
		return fn(0)
	}
	// The last call runs on the caller's goroutine, which would otherwise
	// only wait: one goroutine fewer to start and schedule.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n-1; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	errs[n-1] = fn(n - 1)
	wg.Wait()
	return firstError(errs)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func sortKeys(keys [][]byte) {
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
}

func dedupSorted(keys [][]byte) [][]byte {
	if len(keys) < 2 {
		return keys
	}
	out := keys[:1]
	for _, k := range keys[1:] {
		if !bytes.Equal(k, out[len(out)-1]) {
			out = append(out, k)
		}
	}
	return out
}

// retryable builds the error the SQL layer maps to a MySQL retry hint.
func retryable(reason string, lockWaitTimeout bool) error {
	return &kv.RetryableError{Reason: reason, LockWaitTimeout: lockWaitTimeout}
}

func writeConflictError(wc *kvpb.WriteConflict) error {
	return retryable(fmt.Sprintf("write conflict: txn %d conflicts with txn %d (committed at %d)",
		wc.StartTs, wc.ConflictTs, wc.ConflictCommitTs), false)
}

// pendingValue is a key's value from a commit that was pending when this
// transaction locked the key (Txn.pending).
type pendingValue struct {
	commitTS uint64
	value    []byte
	deleted  bool
}

// pendingAt returns the value of a key locked over a pending commit, when
// the current read timestamp sees that commit.
func (t *Txn) pendingAt(key []byte) (pendingValue, bool) {
	if len(t.pending) == 0 {
		return pendingValue{}, false
	}
	pv, ok := t.pending[string(key)]
	if !ok || t.readTS < pv.commitTS {
		return pendingValue{}, false
	}
	return pv, true
}
