package client

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// ScanFunc implements kv.FuncScanner: a cursor over [start, end) at the
// transaction's snapshot (end nil: no upper bound), ascending or, with
// reverse, descending. It returns no cursor when the transaction has
// buffered writes in the range: only Iter merges them in. Like an
// iterator's, the cursor's view is fixed when it is made.
func (t *Txn) ScanFunc(ctx context.Context, start, end []byte, reverse bool) (kv.ScanCursor, error) {
	if t.finished {
		return nil, ErrTxnFinished
	}
	if t.buf.hasIn(start, end) {
		return nil, nil
	}
	cur := &funcCursor{c: t.c, view: t.rangeView(), start: start, end: end, reverse: reverse, cursor: start}
	if reverse {
		cur.cursor = end
	}
	cur.done = end != nil && bytes.Compare(start, end) >= 0
	cur.last = cur.lastBuf[:0]
	cur.check = cur.checkAndHand
	return cur, nil
}

// funcCursor reads committed data in key order, region by region,
// handing each entry to the caller's function. With the region's leader in
// this process the entries come straight from the server's read of the
// engine (kvserver.Server.KvScanFunc): no response is built and nothing is
// copied on the way.
type funcCursor struct {
	c          *Client
	view       readView
	start, end []byte // end nil: +infinity
	reverse    bool
	// cursor is where the next request starts: going forward, the first
	// key it reads; going backward, its exclusive upper bound (nil:
	// +infinity).
	cursor []byte
	done   bool
	last   []byte // the last key handed to the caller
	// The request in flight: what check hands over (check is bound once,
	// so a request allocates no closure).
	req     *kvpb.ScanRequest
	region  uint64
	fn      func(key, value []byte) error
	got     int
	fnErr   error
	check   func(key, value []byte) error
	lastBuf [48]byte
}

var _ kv.ScanCursor = (*funcCursor)(nil)

// Visit implements kv.ScanCursor.
func (s *funcCursor) Visit(ctx context.Context, limit int, fn func(key, value []byte) error) (bool, error) {
	if limit <= 0 {
		return false, fmt.Errorf("client: scan visit of %d entries", limit)
	}
	s.fn = fn
	defer func() { s.fn, s.req = nil, nil }()
	bo := newBackoffer(ctx, s.c.opts.BackoffBudget)
	for n := 0; !s.done && n < limit; {
		if s.reverse && s.cursor != nil && bytes.Compare(s.cursor, s.start) <= 0 ||
			!s.reverse && s.end != nil && bytes.Compare(s.cursor, s.end) >= 0 {
			s.done = true // the last visit stopped at the range's end
			break
		}
		e, req, err := s.c.regionScanRequest(bo.ctx, s.start, s.end, s.cursor, s.reverse, limit-n, s.view.ts)
		if err != nil {
			return false, err
		}
		kvc, err := s.c.kvClient(e)
		if err != nil {
			if err := s.c.onSendFailure(&bo, e, err); err != nil {
				return false, err
			}
			continue
		}
		s.req, s.region, s.got, s.fnErr = req, e.region.Id, 0, nil
		resp, locks, err := scanFunc(kvc, bo.ctx, req, s.check)
		got := s.got
		n += got
		switch {
		case s.fnErr != nil:
			return false, s.fnErr
		case err != nil:
			if got > 0 {
				return false, err
			}
			if err := s.c.onSendFailure(&bo, e, err); err != nil {
				return false, err
			}
			continue
		case resp.RegionError != nil:
			// Refused before reading (the region check), so got is 0.
			if err := s.c.onRegionError(&bo, e, resp.RegionError); err != nil {
				return false, err
			}
			continue
		case resp.Error != nil && resp.Error.Locked != nil:
			// The entries before the lock were good: resolve it and go on
			// from the first key after them.
			locks = []*kvpb.LockInfo{resp.Error.Locked}
		case resp.Error != nil:
			return false, keyErrorAsError(resp.Error)
		}
		if got > 0 && (len(locks) > 0 || got == int(req.Limit)) {
			s.cursor = resumeKey(s.last, s.reverse)
		}
		if len(locks) > 0 {
			if err := s.c.resolver.waitForLocks(&bo, s.view.ts, s.view.startTS, locks); err != nil {
				return false, err
			}
			continue
		}
		if got < int(req.Limit) {
			// This region has nothing more in range: move to the next one.
			s.cursor, s.done = nextRegionCursor(req, s.start, s.end)
		}
	}
	return s.done, nil
}

// checkAndHand hands an entry of the request in flight to the caller's
// function after checking that it is in the request's range, after the
// previous one in scan order and within the limit.
func (s *funcCursor) checkAndHand(key, value []byte) error {
	req := s.req
	if !inRequest(req, key) || (s.got > 0 && !inOrder(s.last, key, s.reverse)) || s.got == int(req.Limit) {
		s.fnErr = fmt.Errorf("client: scan of region %d returned key %q out of order or range", s.region, key)
		return s.fnErr
	}
	s.got++
	s.last = append(s.last[:0], key...)
	if err := s.fn(key, value); err != nil {
		s.fnErr = err
		return err
	}
	return nil
}

// funcScanServer is a KV server that can hand a scan's pairs to a
// function as it reads them (kvserver.Server).
type funcScanServer interface {
	KvScanFunc(ctx context.Context, req *kvpb.ScanRequest, fn func(key, value []byte) error) (*kvpb.ScanResponse, error)
}

// scanFunc sends a scan request and hands the pairs to fn: as the server
// reads them when it is in this process and can (see
// kvserver.Server.KvScanFunc for what fn has seen when the response holds
// an error), else from the response. locks are the locks a response's
// pairs reported; fn then saw nothing.
func scanFunc(kvc kvpb.KvClient, ctx context.Context, req *kvpb.ScanRequest, fn func(key, value []byte) error) (*kvpb.ScanResponse, []*kvpb.LockInfo, error) {
	if l, ok := kvc.(localKv); ok {
		if fs, ok := l.srv.(funcScanServer); ok {
			resp, err := fs.KvScanFunc(ctx, req, fn)
			return resp, nil, err
		}
	}
	resp, err := kvc.KvScan(ctx, req)
	if err != nil || resp.RegionError != nil || resp.Error != nil {
		return resp, nil, err
	}
	locks, ke := pairLocks(resp.Pairs)
	if ke != nil {
		return &kvpb.ScanResponse{Error: ke}, nil, nil
	}
	if len(locks) > 0 {
		return resp, locks, nil
	}
	for _, p := range resp.Pairs {
		if err := fn(p.Key, p.Value); err != nil {
			return resp, nil, err
		}
	}
	return resp, nil, nil
}
