package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

var _ kv.RangeDestroyer = (*Client)(nil)

// DestroyRange deletes every record of every key in [start, end) (all
// versions, values and locks) outside MVCC: TiKV's UnsafeDestroyRange. It
// is for data that no transaction reading or writing at or above
// safePoint, PD's GC safe point, can need, such as the rows of a table
// dropped before it; the caller must know that, since nothing is checked.
// Stores raise their GC safe point to safePoint first, so an older read
// fails instead of finding the range empty.
//
// It walks the regions the range overlaps in key order; each deletes its
// part in one Raft proposal of range deletions. A region error (leader
// change, a split since the region cache was filled) re-routes the rest of
// the range, and an unanswered request is sent again: deleting a range
// twice is harmless. end must be above start: an unbounded range is
// refused, so a zero value cannot destroy the rest of the keyspace.
func (c *Client) DestroyRange(ctx context.Context, start, end []byte, safePoint uint64) error {
	if len(end) == 0 || bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("client: destroy range [%q, %q): the end must be above the start", start, end)
	}
	if safePoint == 0 {
		return errors.New("client: destroy range: no GC safe point")
	}
	cursor := start
	for {
		bo := newBackoffer(ctx, c.opts.BackoffBudget)
		e, err := c.destroyRegion(&bo, cursor, end, safePoint)
		if err != nil {
			return err
		}
		regionEnd := e.endKey()
		if len(regionEnd) == 0 || bytes.Compare(regionEnd, end) >= 0 {
			return nil
		}
		cursor = regionEnd
	}
}

// destroyRegion destroys the part of [start, end) in the region holding
// start and returns that region as the store accepted it.
func (c *Client) destroyRegion(bo *backoffer, start, end []byte, safePoint uint64) (*regionEntry, error) {
	resp, e, err := sendRequest(c, bo,
		func() (*regionEntry, error) { return c.regions.locate(bo.ctx, start) },
		func(kvc kvpb.KvClient, e *regionEntry) (*kvpb.DestroyRangeResponse, error) {
			req := &kvpb.DestroyRangeRequest{Context: e.rpcCtx, StartKey: start, EndKey: end, SafePoint: safePoint}
			if regionEnd := e.endKey(); len(regionEnd) > 0 && bytes.Compare(regionEnd, end) < 0 {
				req.EndKey = regionEnd
			}
			return kvc.KvDestroyRange(bo.ctx, req)
		})
	if err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("client: destroy range in region %d: %s", e.region.Id, resp.Error)
	}
	return e, nil
}
