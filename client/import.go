package client

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

var _ kv.Importer = (*Client)(nil)

// importRequestBytes bounds the keys and values one import request (one
// Raft proposal) carries.
const importRequestBytes = 512 << 10

// Import writes pairs as Puts committed at their versions, without locks
// or a two-phase commit (kv.Importer; the KV service's KvImport). pairs
// must be sorted by key without duplicates. They go in key order, one
// request per region and at most importRequestBytes of keys and values
// each; a region error (a split, a leader change) re-routes the rest, and
// a request whose answer was lost is sent again, which writes the same
// records. A version at or below the GC safe point fails the import.
func (c *Client) Import(ctx context.Context, pairs []kv.VersionedKeyValue) error {
	for i := 1; i < len(pairs); i++ {
		if bytes.Compare(pairs[i-1].Key, pairs[i].Key) >= 0 {
			return fmt.Errorf("client: import: pairs %d and %d are not in ascending key order", i-1, i)
		}
	}
	for len(pairs) > 0 {
		bo := newBackoffer(ctx, c.opts.BackoffBudget)
		n := 0
		resp, e, err := sendRequest(c, &bo,
			func() (*regionEntry, error) { return c.regions.locate(bo.ctx, pairs[0].Key) },
			func(kvc kvpb.KvClient, e *regionEntry) (*kvpb.ImportResponse, error) {
				n = importChunk(pairs, e.endKey())
				req := &kvpb.ImportRequest{Context: e.rpcCtx, Pairs: make([]*kvpb.ImportPair, n)}
				for i := range req.Pairs {
					p := &pairs[i]
					req.Pairs[i] = &kvpb.ImportPair{Key: p.Key, Value: p.Value, Version: p.Version}
				}
				return kvc.KvImport(bo.ctx, req)
			})
		if err != nil {
			return err
		}
		if resp.Error != "" {
			return fmt.Errorf("client: import into region %d: %s", e.region.Id, resp.Error)
		}
		pairs = pairs[n:]
	}
	return nil
}

// importChunk returns how many of pairs, from the first, one request to
// the region ending at end (empty: the keyspace's end) carries: those
// below end, up to importRequestBytes; always the first (the region was
// located by its key; if the cache was wrong, the store says so).
func importChunk(pairs []kv.VersionedKeyValue, end []byte) int {
	size := 0
	for i, p := range pairs {
		size += len(p.Key) + len(p.Value)
		if i > 0 && (len(end) > 0 && bytes.Compare(p.Key, end) >= 0 || size > importRequestBytes) {
			return i
		}
	}
	return len(pairs)
}
