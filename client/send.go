package client

import (
	"github.com/strata-db/strata/kvpb"
)

// Sending requests to region leaders. Every KV request of the client goes
// through one of two functions here (TiKV client-go's RegionRequestSender):
//
//   - sendRequest, for a request about one key or range: it finds the
//     region, sends to its leader, and retries within the backoff budget
//     until a response without a region error comes back;
//   - sendOnce, for a batch of keys grouped by region: it sends once, and
//     on an unreachable store or a region error reports that the caller
//     must regroup its keys by the corrected cache (a batch may now span
//     regions) and send again.
//
// (The one exception is the scan cursor of scanfunc.go: its entries are
// handed to the caller as the store reads them, so a scan that fails after
// handing some over must not be sent again; it follows the same rules by
// hand.)
//
// Both handle the failures the same way: an unreachable store makes the
// next attempt go to the region's next replica, which serves it or names
// the leader (onSendFailure); a region error corrects the region cache
// from what the store said (onRegionError); both back off by the failure's
// kind.

// regionResponse is every KV response: each may carry a region error.
type regionResponse interface {
	GetRegionError() *kvpb.RegionError
}

// sendOutcome is what sendOnce's caller must do next.
type sendOutcome int

const (
	// sent: the response has no region error.
	sent sendOutcome = iota
	// resend: nothing was done (no store reached, or a region error);
	// the cache is corrected: regroup and send again.
	resend
	// lost: the request may have reached the store, but no response
	// came; the cache is corrected. Idempotent requests resend; others
	// report an undetermined outcome.
	lost
)

// sendOnce sends one request to e's leader.
func sendOnce[R regionResponse](c *Client, bo *backoffer, e *regionEntry, call func(kvc kvpb.KvClient) (R, error)) (R, sendOutcome, error) {
	var zero R
	kvc, err := c.kvClient(e)
	if err != nil {
		return zero, resend, c.onSendFailure(bo, e, err)
	}
	resp, err := call(kvc)
	if err != nil {
		return zero, lost, c.onSendFailure(bo, e, err)
	}
	if re := resp.GetRegionError(); re != nil {
		return zero, resend, c.onRegionError(bo, e, re)
	}
	return resp, sent, nil
}

// sendRequest finds the region a request goes to (locate, typically the
// region cache's lookup of a key), sends the request to its leader (call
// builds it for the entry it is given) and retries within bo's budget. It
// returns the first response without a region error, and the region
// entry it was sent with.
func sendRequest[R regionResponse](c *Client, bo *backoffer, locate func() (*regionEntry, error), call func(kvc kvpb.KvClient, e *regionEntry) (R, error)) (R, *regionEntry, error) {
	for {
		e, err := locate()
		if err != nil {
			var zero R
			return zero, nil, err
		}
		resp, outcome, err := sendOnce(c, bo, e, func(kvc kvpb.KvClient) (R, error) { return call(kvc, e) })
		if err != nil {
			return resp, nil, err
		}
		if outcome == sent {
			return resp, e, nil
		}
	}
}
