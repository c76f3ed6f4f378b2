package client

import (
	"context"
	"fmt"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// GetLatest returns the newest committed value of key, or kv.ErrNotFound,
// outside any transaction and without a timestamp from the TSO. It is
// linearizable for a single key: the region leader answers from applied
// state, and every write acknowledged before the call was applied there
// or left a lock whose transaction committed, which GetLatest resolves
// (commits) before reading again. A lock of a transaction that has not
// committed is read past: its write is not acknowledged, so the read
// orders before it. Reads of several keys that must agree with each other
// need a transaction (a snapshot) instead.
func (c *Client) GetLatest(ctx context.Context, key []byte) ([]byte, error) {
	bo := newBackoffer(ctx, c.opts.BackoffBudget)
	req := &kvpb.GetRequest{Key: key, Latest: true}
	for {
		resp, err := c.sendGet(&bo, req)
		if err != nil {
			return nil, err
		}
		if ke := resp.Error; ke != nil {
			if ke.Locked == nil {
				return nil, keyErrorAsError(ke)
			}
			l := ke.Locked
			// Caller ts 0: asking must not push the transaction's min
			// commit ts (there is no read timestamp to protect).
			status, _, err := c.resolver.txnStatus(&bo, 0, l)
			if err != nil {
				return nil, err
			}
			if status.alive() {
				req.BypassLocks = append(req.BypassLocks, l.LockVersion)
				continue
			}
			if err := c.resolver.resolveLock(&bo, l, status.commitTS); err != nil {
				return nil, err
			}
			if err := bo.afterResolve(fmt.Errorf("client: a key is locked by txn %d", l.LockVersion)); err != nil {
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
