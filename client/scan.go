package client

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// snapshotScanner reads committed data in [start, end) at view.ts, region by
// region, batchSize entries per request, ascending or descending. Locks
// met on the way are resolved (waiting for live transactions) and the
// batch is fetched again.
type snapshotScanner struct {
	c          *Client
	view       readView
	start, end []byte // end nil: +infinity
	reverse    bool
	batchSize  int

	// cursor is where the next request starts: going forward, the first
	// key to read (inclusive); going backward, the upper bound (exclusive,
	// nil = +infinity).
	cursor    []byte
	exhausted bool

	pairs []*kvpb.KvPair
	pos   int
}

func newSnapshotScanner(c *Client, view readView, start, end []byte, reverse bool, batchSize int) *snapshotScanner {
	s := &snapshotScanner{c: c, view: view, start: start, end: end, reverse: reverse, batchSize: batchSize}
	if reverse {
		s.cursor = end
	} else {
		s.cursor = start
	}
	return s
}

// current returns the entry under the scanner; ok is false at the end.
func (s *snapshotScanner) current() (*kvpb.KvPair, bool) {
	if s.pos < len(s.pairs) {
		return s.pairs[s.pos], true
	}
	return nil, false
}

func (s *snapshotScanner) next(ctx context.Context) error {
	s.pos++
	if s.pos < len(s.pairs) {
		return nil
	}
	return s.fill(ctx)
}

// fill fetches batches until one is non-empty or the range is exhausted.
func (s *snapshotScanner) fill(ctx context.Context) error {
	s.pairs, s.pos = nil, 0
	bo := newBackoffer(ctx, s.c.opts.BackoffBudget)
	for !s.exhausted && len(s.pairs) == 0 {
		if err := s.fetch(&bo); err != nil {
			return err
		}
	}
	return nil
}

// fetch sends one scan request to the region at the cursor and advances the
// regionScanRequest builds the request for the part of [start, end) that
// the region at cursor holds: going forward, cursor is the first key to
// read; backward, the exclusive upper bound (nil: +infinity) and the
// region is the one that ends there.
func (c *Client) regionScanRequest(ctx context.Context, start, end, cursor []byte, reverse bool, limit int, ts uint64) (*regionEntry, *kvpb.ScanRequest, error) {
	req := &kvpb.ScanRequest{Limit: uint32(limit), Version: ts, Reverse: reverse}
	if reverse {
		e, err := c.regions.locateEndKey(ctx, start, cursor)
		if err != nil {
			return nil, nil, err
		}
		req.Context, req.StartKey, req.EndKey = e.rpcCtx, start, cursor
		if bytes.Compare(e.startKey(), start) > 0 {
			req.StartKey = e.startKey()
		}
		return e, req, nil
	}
	e, err := c.regions.locate(ctx, cursor)
	if err != nil {
		return nil, nil, err
	}
	req.Context, req.StartKey, req.EndKey = e.rpcCtx, cursor, end
	if regionEnd := e.endKey(); len(regionEnd) > 0 && (end == nil || bytes.Compare(regionEnd, end) < 0) {
		req.EndKey = regionEnd
	}
	return e, req, nil
}

// cursor past what it returned.
func (s *snapshotScanner) fetch(bo *backoffer) error {
	e, req, err := s.c.regionScanRequest(bo.ctx, s.start, s.end, s.cursor, s.reverse, s.batchSize, s.view.ts)
	if err != nil {
		return err
	}
	resp, outcome, err := sendOnce(s.c, bo, e, func(kvc kvpb.KvClient) (*kvpb.ScanResponse, error) {
		return kvc.KvScan(bo.ctx, req)
	})
	if err != nil || outcome != sent {
		return err // the caller fetches again from the same cursor
	}
	if ke := resp.Error; ke != nil {
		if ke.Locked != nil {
			return s.c.resolver.waitForLocks(bo, s.view.ts, s.view.startTS, []*kvpb.LockInfo{ke.Locked})
		}
		return keyErrorAsError(ke)
	}
	locks, ke := pairLocks(resp.Pairs)
	if ke != nil {
		return keyErrorAsError(ke)
	}
	if len(locks) > 0 {
		// Resolve and fetch the same batch again: the cursor stays.
		return s.c.resolver.waitForLocks(bo, s.view.ts, s.view.startTS, locks)
	}
	pairs := resp.Pairs
	if len(pairs) > s.batchSize {
		return fmt.Errorf("client: scan of region %d returned %d entries, limit was %d", e.region.Id, len(pairs), s.batchSize)
	}
	for i, p := range pairs {
		if !inRequest(req, p.Key) || (i > 0 && !inOrder(pairs[i-1].Key, p.Key, s.reverse)) {
			return fmt.Errorf("client: scan of region %d returned key %q out of order or range", e.region.Id, p.Key)
		}
	}
	if len(pairs) < s.batchSize {
		s.cursor, s.exhausted = nextRegionCursor(req, s.start, s.end)
	} else {
		s.cursor = resumeKey(pairs[len(pairs)-1].Key, s.reverse)
	}
	s.pairs = pairs
	return nil
}

// pairLocks returns the locks the pairs of a scan response report, or the
// first other error a pair carries.
func pairLocks(pairs []*kvpb.KvPair) ([]*kvpb.LockInfo, *kvpb.KeyError) {
	var locks []*kvpb.LockInfo
	for _, p := range pairs {
		if p.Error != nil {
			if p.Error.Locked == nil {
				return nil, p.Error
			}
			locks = append(locks, p.Error.Locked)
		}
	}
	return locks, nil
}

// inRequest reports whether key is in the range of a scan request.
func inRequest(req *kvpb.ScanRequest, key []byte) bool {
	return bytes.Compare(key, req.StartKey) >= 0 && (len(req.EndKey) == 0 || bytes.Compare(key, req.EndKey) < 0)
}

// inOrder reports whether key follows prev in scan order.
func inOrder(prev, key []byte, reverse bool) bool {
	if reverse {
		return bytes.Compare(prev, key) > 0
	}
	return bytes.Compare(prev, key) < 0
}

// resumeKey is where a scan resumes after handing over last: going
// forward, the first key after it; backward, last itself (an exclusive
// upper bound).
func resumeKey(last []byte, reverse bool) []byte {
	if reverse {
		return bytes.Clone(last)
	}
	return append(bytes.Clone(last), 0)
}

// nextRegionCursor is where a scan of [start, end) goes on once the region
// of req has nothing more in range, and whether that was the last region.
func nextRegionCursor(req *kvpb.ScanRequest, start, end []byte) (cursor []byte, done bool) {
	if req.Reverse {
		return req.StartKey, bytes.Compare(req.StartKey, start) <= 0
	}
	return req.EndKey, len(req.EndKey) == 0 || bytes.Equal(req.EndKey, end)
}

// txnIterator merges a transaction's buffered writes over its snapshot:
// a buffered value shadows the committed one, a buffered delete hides it.
// It implements kv.Iterator.
type txnIterator struct {
	snap    *snapshotScanner
	buf     *bufferCursor
	reverse bool

	key, value []byte
	valid      bool
	closed     bool
	// advanceSnap and advanceBuf record which sources the current entry
	// came from; they move on at the next settle.
	advanceSnap, advanceBuf bool
}

var _ kv.Iterator = (*txnIterator)(nil)

func newTxnIterator(ctx context.Context, t *Txn, start, end []byte, reverse bool, batchSize int) (*txnIterator, error) {
	if end != nil && bytes.Compare(start, end) >= 0 {
		return &txnIterator{closed: true}, nil
	}
	it := &txnIterator{
		snap:    newSnapshotScanner(t.c, t.rangeView(), start, end, reverse, batchSize),
		buf:     newBufferCursor(t.buf.snapshot(), start, end, reverse),
		reverse: reverse,
	}
	if err := it.snap.fill(ctx); err != nil {
		return nil, err
	}
	if err := it.settle(ctx); err != nil {
		return nil, err
	}
	return it, nil
}

// before reports whether a comes before b in iteration order.
func (it *txnIterator) before(a, b []byte) bool {
	c := bytes.Compare(a, b)
	if it.reverse {
		return c > 0
	}
	return c < 0
}

// settle positions the iterator on the next visible entry. Sources are
// advanced lazily, at the start of the following settle, so that reading
// the last entry a caller wants never triggers a fetch it does not need.
func (it *txnIterator) settle(ctx context.Context) error {
	for {
		if it.advanceSnap {
			it.advanceSnap = false
			if err := it.snap.next(ctx); err != nil {
				it.valid = false
				return err
			}
		}
		if it.advanceBuf {
			it.advanceBuf = false
			it.buf.next()
		}
		p, snapOK := it.snap.current()
		b, bufOK := it.buf.current()
		switch {
		case !snapOK && !bufOK:
			it.valid, it.key, it.value = false, nil, nil
			return nil
		case bufOK && (!snapOK || !it.before(p.Key, b.key)):
			// The buffer is at or before the snapshot: it wins, and a
			// snapshot entry with the same key is shadowed.
			it.advanceBuf = true
			it.advanceSnap = snapOK && bytes.Equal(p.Key, b.key)
			if b.deleted {
				continue
			}
			it.valid, it.key, it.value = true, b.key, b.value
			return nil
		default:
			it.advanceSnap = true
			it.valid, it.key, it.value = true, p.Key, p.Value
			return nil
		}
	}
}

func (it *txnIterator) Valid() bool   { return it.valid && !it.closed }
func (it *txnIterator) Key() []byte   { return it.key }
func (it *txnIterator) Value() []byte { return it.value }

// Next advances to the next entry.
func (it *txnIterator) Next(ctx context.Context) error {
	if it.closed || !it.valid {
		return nil
	}
	return it.settle(ctx)
}

func (it *txnIterator) Close() {
	it.closed = true
	it.valid = false
	it.snap, it.buf = nil, nil
}
