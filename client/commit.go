package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// maxMutationsPerRequest splits a region's share of a large transaction
// into several prewrite/commit requests.
const maxMutationsPerRequest = 2048

// A transaction whose keys are all in one region is committed in one
// request (one-phase commit) up to these bounds, though 2PC would split it
// into several prewrites: a multi-row INSERT of a bulk load (sysbench's
// prepare sends about 512 KiB, 2,700 rows, per statement; mysqldump up to
// its max_allowed_packet) then writes its rows once, instead of a lock per
// key and later the commit records. Larger ones keep 2PC's bounded
// requests.
const (
	maxOnePCMutations = 4 * maxMutationsPerRequest
	maxOnePCBytes     = 4 << 20
)

// cleanupTimeout bounds work done after the outcome is decided (committing
// secondaries, rolling back a failed prewrite), which must not depend on
// the caller's context.
const cleanupTimeout = 30 * time.Second

// errOnePCDeclined means a one-phase commit attempt cannot proceed in one
// request (the region changed); the committer falls back to 2PC.
var errOnePCDeclined = errors.New("client: one-phase commit declined")

// Commit makes the buffered writes durable and visible atomically.
//
// A transaction whose keys are all in one region commits in one request
// (one-phase commit). Otherwise it runs Percolator two-phase commit: lock
// every key (prewrite), take a commit timestamp, commit the primary key (the
// commit point) and then the secondaries. A write conflict rolls back what
// was prewritten and returns a *kv.RetryableError; the transaction is never
// retried here.
func (t *Txn) Commit(ctx context.Context) error {
	if t.finished {
		return ErrTxnFinished
	}
	t.finished = true
	defer t.stopHeartbeat()
	if t.buf.len() == 0 {
		// Nothing to write; release the pessimistic locks, if any.
		return t.pessimisticRollback(ctx)
	}
	cm := newCommitter(t)
	return cm.execute(ctx)
}

// committer runs the commit protocol of one transaction.
type committer struct {
	c *Client
	t *Txn

	// keys, muts and pessimistic are parallel and sorted by key.
	keys        [][]byte
	muts        []*kvpb.Mutation
	pessimistic []bool // nil when no key is pessimistically locked
	// lockTS: for each pessimistic key, the for-update ts of its lock;
	// pendingTS: the commit ts of another transaction's commit of it that
	// was pending when it was locked (Txn.pending), or zero (nil: none).
	lockTS    []uint64
	pendingTS []uint64

	primary  []byte
	lockTTL  uint64
	commitTS uint64
}

func newCommitter(t *Txn) *committer {
	cm := &committer{c: t.c, t: t}
	n := t.buf.len() + len(t.locked)
	cm.muts = make([]*kvpb.Mutation, 0, n)
	t.buf.each(func(e bufEntry) bool {
		var m *kvpb.Mutation
		switch {
		case e.deleted && e.absent:
			// Inserted, then deleted: nothing to write, but the key
			// must still have had no value.
			m = &kvpb.Mutation{Op: kvpb.Op_CheckNotExists, Key: e.key}
		case e.deleted:
			m = &kvpb.Mutation{Op: kvpb.Op_Del, Key: e.key}
		case e.absent:
			m = &kvpb.Mutation{Op: kvpb.Op_Insert, Key: e.key, Value: e.value}
		default:
			m = &kvpb.Mutation{Op: kvpb.Op_Put, Key: e.key, Value: e.value}
		}
		cm.muts = append(cm.muts, m)
		return true
	})
	if len(t.locked) > 0 {
		// Keys locked but not written are prewritten as Lock so their
		// pessimistic locks are released at commit.
		added := false
		for k := range t.locked {
			if _, ok := t.buf.get([]byte(k)); !ok {
				cm.muts = append(cm.muts, &kvpb.Mutation{Op: kvpb.Op_Lock, Key: []byte(k)})
				added = true
			}
		}
		if added {
			sort.Slice(cm.muts, func(i, j int) bool { return bytes.Compare(cm.muts[i].Key, cm.muts[j].Key) < 0 })
		}
		cm.pessimistic = make([]bool, len(cm.muts))
		cm.lockTS = make([]uint64, len(cm.muts))
		for i, m := range cm.muts {
			cm.lockTS[i], cm.pessimistic[i] = t.locked[string(m.Key)]
			if pv, ok := t.pending[string(m.Key)]; ok && cm.pessimistic[i] {
				if cm.pendingTS == nil {
					cm.pendingTS = make([]uint64, len(cm.muts))
				}
				cm.pendingTS[i] = pv.commitTS
			}
		}
	}
	cm.keys = make([][]byte, len(cm.muts))
	for i, m := range cm.muts {
		cm.keys[i] = m.Key
	}
	cm.primary = t.primary
	if cm.primary == nil {
		cm.primary = cm.keys[0]
	}
	cm.lockTTL = uint64((time.Since(t.began) + t.c.opts.LockTTL).Milliseconds())
	return cm
}

// group splits keys[lo:hi] into per-region batches of bounded size.
func (cm *committer) group(bo *backoffer, lo, hi int) ([]regionBatch, error) {
	groups, err := cm.c.regions.groupSortedKeys(bo.ctx, cm.keys[lo:hi])
	if err != nil {
		return nil, err
	}
	var out []regionBatch
	for _, g := range groups {
		for s := lo + g.lo; s < lo+g.hi; s += maxMutationsPerRequest {
			out = append(out, regionBatch{entry: g.entry, lo: s, hi: min(s+maxMutationsPerRequest, lo+g.hi)})
		}
	}
	return out, nil
}

func (cm *committer) execute(ctx context.Context) error {
	bo := newBackoffer(ctx, cm.c.opts.BackoffBudget)
	batches, err := cm.group(&bo, 0, len(cm.keys))
	if err != nil {
		return err
	}
	if b, ok := cm.onePCBatch(batches); ok && !cm.c.opts.DisableOnePC {
		committed, err := cm.onePC(&bo, b)
		switch {
		case err == nil && committed:
			return nil
		case err == nil:
			// The store prewrote without committing: finish with 2PC.
			return cm.commitPhase(&bo)
		case !errors.Is(err, errOnePCDeclined):
			return err
		}
		if batches, err = cm.group(&bo, 0, len(cm.keys)); err != nil {
			cm.rollback(ctx)
			return err
		}
	}

	if cm.t.heartbeat == nil {
		cm.t.heartbeat = cm.c.startHeartbeat(cm.primary, cm.t.startTS, cm.t.began)
	}
	if err := forEachParallel(len(batches), func(i int) error {
		sub := bo.fork()
		return cm.prewrite(&sub, batches[i])
	}); err != nil {
		cm.rollback(ctx)
		return err
	}
	return cm.commitPhase(&bo)
}

// onePCBatch returns the whole transaction as one batch when batches (a
// grouping of it) all go to one region and it is within the one-phase
// commit bounds.
func (cm *committer) onePCBatch(batches []regionBatch) (regionBatch, bool) {
	if len(batches) == 1 {
		return batches[0], true
	}
	if len(batches) == 0 || len(cm.muts) > maxOnePCMutations {
		return regionBatch{}, false
	}
	for _, b := range batches[1:] {
		if b.entry != batches[0].entry {
			return regionBatch{}, false
		}
	}
	size := 0
	for _, m := range cm.muts {
		if size += len(m.Key) + len(m.Value); size > maxOnePCBytes {
			return regionBatch{}, false
		}
	}
	return regionBatch{entry: batches[0].entry, lo: 0, hi: len(cm.muts)}, true
}

// onePC sends the whole transaction in one prewrite with try_one_pc. It
// reports whether the store committed it; errOnePCDeclined asks for 2PC.
func (cm *committer) onePC(bo *backoffer, b regionBatch) (bool, error) {
	for {
		resp, outcome, err := sendOnce(cm.c, bo, b.entry, func(kvc kvpb.KvClient) (*kvpb.PrewriteResponse, error) {
			return kvc.KvPrewrite(bo.ctx, cm.prewriteRequest(b, true))
		})
		switch {
		case outcome == lost:
			// The store may have committed before the reply was lost.
			return false, fmt.Errorf("%w: one-phase commit of txn %d: %v", ErrResultUndetermined, cm.t.startTS, err)
		case err != nil:
			return false, err
		case outcome == resend:
			// Nothing was done: re-route through 2PC's retry logic.
			return false, errOnePCDeclined
		}
		retry, err := cm.handlePrewriteErrors(bo, resp.Errors)
		if err != nil {
			cm.rollback(bo.ctx)
			return false, err
		}
		if retry {
			continue
		}
		if resp.OnePcCommitTs != 0 {
			cm.commitTS = resp.OnePcCommitTs
			return true, nil
		}
		return false, nil
	}
}

func (cm *committer) prewriteRequest(b regionBatch, onePC bool) *kvpb.PrewriteRequest {
	req := &kvpb.PrewriteRequest{
		Context:      b.entry.rpcCtx,
		Mutations:    cm.muts[b.lo:b.hi],
		PrimaryLock:  cm.primary,
		StartVersion: cm.t.startTS,
		LockTtl:      cm.lockTTL,
		TxnSize:      uint64(len(cm.muts)),
		TryOnePc:     onePC,
	}
	if cm.pessimistic != nil {
		req.IsPessimisticLock = cm.pessimistic[b.lo:b.hi]
		req.LockForUpdateTs = cm.lockTS[b.lo:b.hi]
		req.ForUpdateTs = cm.t.forUpdateTS
		if cm.pendingTS != nil {
			req.LockPendingCommitTs = cm.pendingTS[b.lo:b.hi]
		}
	}
	return req
}

// handlePrewriteErrors resolves locks met by a prewrite (retry reports that
// the request should be sent again) and turns other key errors into the
// transaction's failure. A lock of a live transaction fails the commit at
// once, as in Percolator: whether that transaction commits (then ours
// conflicts with it) or not, waiting would rarely help and could stall for a
// long-lived pessimistic lock.
func (cm *committer) handlePrewriteErrors(bo *backoffer, errs []*kvpb.KeyError) (retry bool, err error) {
	var locks []*kvpb.LockInfo
	for _, ke := range errs {
		if ke == nil {
			continue
		}
		if ke.Locked == nil {
			return false, keyErrorAsError(ke)
		}
		locks = append(locks, ke.Locked)
	}
	if len(locks) == 0 {
		return false, nil
	}
	wait, err := cm.c.resolver.resolve(bo, cm.t.startTS, cm.t.startTS, locks)
	if err != nil {
		return false, err
	}
	l := locks[0]
	if wait > 0 {
		return false, retryable(fmt.Sprintf("write conflict: a row is locked by transaction %d", l.LockVersion), false)
	}
	if err := bo.afterResolve(fmt.Errorf("client: a key is locked by txn %d", l.LockVersion)); err != nil {
		return false, err
	}
	return true, nil
}

// prewrite locks the keys of b, re-routing if the region changed.
func (cm *committer) prewrite(bo *backoffer, b regionBatch) error {
	for {
		// Prewrite is idempotent for a given start ts: a lost one is sent
		// again.
		resp, outcome, err := sendOnce(cm.c, bo, b.entry, func(kvc kvpb.KvClient) (*kvpb.PrewriteResponse, error) {
			return kvc.KvPrewrite(bo.ctx, cm.prewriteRequest(b, false))
		})
		if err != nil {
			return err
		}
		if outcome != sent {
			return cm.regroup(bo, b, cm.prewrite)
		}
		retry, err := cm.handlePrewriteErrors(bo, resp.Errors)
		if err != nil {
			return err
		}
		if !retry {
			return nil
		}
	}
}

// regroup re-splits b's keys with the (refreshed) region cache and runs
// step on each part in order.
func (cm *committer) regroup(bo *backoffer, b regionBatch, step func(*backoffer, regionBatch) error) error {
	parts, err := cm.group(bo, b.lo, b.hi)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := step(bo, p); err != nil {
			return err
		}
	}
	return nil
}

// commitPhase takes the commit timestamp, commits the primary's batch (the
// commit point) and then the secondaries.
func (cm *committer) commitPhase(bo *backoffer) error {
	ts, err := cm.c.getTS(bo.ctx)
	if err != nil {
		cm.rollback(bo.ctx)
		return err
	}
	cm.commitTS = ts
	batches, err := cm.group(bo, 0, len(cm.keys))
	if err != nil {
		cm.rollback(bo.ctx)
		return err
	}
	primaryIdx := -1
	for i, b := range batches {
		if b.entry.contains(cm.primary) && cm.inBatch(b, cm.primary) {
			primaryIdx = i
			break
		}
	}
	if primaryIdx < 0 {
		return fmt.Errorf("client: primary key %q is not among the transaction's mutations", cm.primary)
	}
	uncertain := false
	if err := cm.commitPrimary(bo, batches[primaryIdx], &uncertain); err != nil {
		if uncertain {
			return fmt.Errorf("%w: commit of primary %q: %v", ErrResultUndetermined, cm.primary, err)
		}
		cm.rollback(bo.ctx)
		return err
	}
	cm.t.stopHeartbeat()

	// The transaction is committed. Secondaries are committed now so that
	// readers do not have to resolve their locks; a failure here is
	// repaired by lock resolution and does not fail the transaction.
	secondaries := make([]regionBatch, 0, len(batches)-1)
	secondaries = append(secondaries, batches[:primaryIdx]...)
	secondaries = append(secondaries, batches[primaryIdx+1:]...)
	if len(secondaries) > 0 {
		ctx, cancel := cleanupContext(bo.ctx, cleanupTimeout)
		defer cancel()
		sbo := newBackoffer(ctx, cm.c.opts.BackoffBudget)
		_ = forEachParallel(len(secondaries), func(i int) error {
			sub := sbo.fork()
			return cm.commitSecondary(&sub, secondaries[i])
		})
	}
	return nil
}

func (cm *committer) inBatch(b regionBatch, key []byte) bool {
	i := sort.Search(b.hi-b.lo, func(i int) bool { return bytes.Compare(cm.keys[b.lo+i], key) >= 0 })
	return i < b.hi-b.lo && bytes.Equal(cm.keys[b.lo+i], key)
}

// commitPrimary commits b, which holds the primary key. If the region
// changed, the part holding the primary is committed first. uncertain is set
// when a request may have reached the store without its reply reaching us.
func (cm *committer) commitPrimary(bo *backoffer, b regionBatch, uncertain *bool) error {
	// Commit is idempotent: a lost one is sent again, regrouped by the
	// corrected cache.
	resp, outcome, err := sendOnce(cm.c, bo, b.entry, func(kvc kvpb.KvClient) (*kvpb.CommitResponse, error) {
		return kvc.KvCommit(bo.ctx, cm.commitRequest(b))
	})
	if outcome == lost {
		*uncertain = true
	}
	if err != nil {
		return err
	}
	if outcome != sent {
		return cm.regroupPrimary(bo, b, uncertain)
	}
	if ke := resp.Error; ke != nil {
		// The store refused: the primary lock is gone (rolled back by a
		// reader after it expired), so the transaction did not commit and
		// may be run again.
		*uncertain = false
		return retryable(fmt.Sprintf("transaction %d could not commit: %v", cm.t.startTS, keyErrorAsError(ke)), false)
	}
	return nil
}

func (cm *committer) regroupPrimary(bo *backoffer, b regionBatch, uncertain *bool) error {
	parts, err := cm.group(bo, b.lo, b.hi)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if cm.inBatch(p, cm.primary) {
			if err := cm.commitPrimary(bo, p, uncertain); err != nil {
				return err
			}
		}
	}
	for _, p := range parts {
		if !cm.inBatch(p, cm.primary) {
			_ = cm.commitSecondary(bo, p)
		}
	}
	return nil
}

func (cm *committer) commitRequest(b regionBatch) *kvpb.CommitRequest {
	return &kvpb.CommitRequest{
		Context:       b.entry.rpcCtx,
		StartVersion:  cm.t.startTS,
		Keys:          cm.keys[b.lo:b.hi],
		CommitVersion: cm.commitTS,
	}
}

func (cm *committer) commitSecondary(bo *backoffer, b regionBatch) error {
	// Commit is idempotent: a lost one is sent again.
	resp, outcome, err := sendOnce(cm.c, bo, b.entry, func(kvc kvpb.KvClient) (*kvpb.CommitResponse, error) {
		return kvc.KvCommit(bo.ctx, cm.commitRequest(b))
	})
	if err != nil {
		return err
	}
	if outcome != sent {
		return cm.regroup(bo, b, cm.commitSecondary)
	}
	if resp.Error != nil {
		return keyErrorAsError(resp.Error)
	}
	return nil
}

// rollback removes the locks a failed commit may have left, best effort:
// whatever it misses expires and is rolled back by lock resolution.
func (cm *committer) rollback(ctx context.Context) {
	cm.t.stopHeartbeat()
	rctx, cancel := cleanupContext(ctx, cleanupTimeout)
	defer cancel()
	bo := newBackoffer(rctx, cm.c.opts.BackoffBudget)
	batches, err := cm.group(&bo, 0, len(cm.keys))
	if err == nil {
		_ = forEachParallel(len(batches), func(i int) error {
			sub := bo.fork()
			return cm.rollbackBatch(&sub, batches[i])
		})
	}
	// Pessimistic locks that were never prewritten are released too.
	_ = cm.t.pessimisticRollback(rctx)
}

func (cm *committer) rollbackBatch(bo *backoffer, b regionBatch) error {
	resp, outcome, err := sendOnce(cm.c, bo, b.entry, func(kvc kvpb.KvClient) (*kvpb.BatchRollbackResponse, error) {
		return kvc.KvBatchRollback(bo.ctx, &kvpb.BatchRollbackRequest{
			Context:      b.entry.rpcCtx,
			StartVersion: cm.t.startTS,
			Keys:         cm.keys[b.lo:b.hi],
		})
	})
	if err != nil {
		return err
	}
	if outcome != sent {
		return cm.regroup(bo, b, cm.rollbackBatch)
	}
	if resp.Error != nil {
		return keyErrorAsError(resp.Error)
	}
	return nil
}
