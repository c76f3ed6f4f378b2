package client

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strata-db/strata/kvpb"
)

// ScanLocks returns up to limit locks (0: all) in [start, end) of
// transactions that started at or below maxTS, across every region of
// the range, in key order: what GC resolves before it publishes a safe
// point. An empty end means the end of the keyspace.
func (c *Client) ScanLocks(ctx context.Context, start, end []byte, maxTS uint64, limit int) ([]*kvpb.LockInfo, error) {
	var out []*kvpb.LockInfo
	cursor := start
	for {
		bo := newBackoffer(ctx, c.opts.BackoffBudget)
		resp, e, err := sendRequest(c, &bo,
			func() (*regionEntry, error) { return c.regions.locate(bo.ctx, cursor) },
			func(kvc kvpb.KvClient, e *regionEntry) (*kvpb.ScanLockResponse, error) {
				req := &kvpb.ScanLockRequest{Context: e.rpcCtx, StartKey: cursor, EndKey: end, MaxVersion: maxTS}
				if limit > 0 {
					req.Limit = uint32(limit - len(out))
				}
				return kvc.KvScanLock(bo.ctx, req)
			})
		if err != nil {
			return nil, err
		}
		if resp.Error != "" {
			return nil, fmt.Errorf("client: scan locks in region %d: %s", e.region.Id, resp.Error)
		}
		out = append(out, resp.Locks...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		regionEnd := e.endKey()
		if len(regionEnd) == 0 || (len(end) > 0 && bytes.Compare(regionEnd, end) >= 0) {
			return out, nil
		}
		cursor = regionEnd
	}
}
