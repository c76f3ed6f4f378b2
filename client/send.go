package client

import (
	"github.com/strata-db/strata/kvpb"
)

// regionResponse is every KV response: each may carry a region error.
type regionResponse interface {
	GetRegionError() *kvpb.RegionError
}

// sendRequest is the one send / region-error / retry loop of the client
// (TiKV client-go's RegionRequestSender): it finds the region a request
// goes to (locate, typically the region cache's lookup of a key), sends
// the request to that region's leader (call), and retries within bo's
// budget when the store cannot be reached (the next replica is tried; it
// serves or names the leader) or answers with a region error (the cache
// is corrected from the error and the request rebuilt for the region's
// current shape). It returns the first response without a region error,
// and the region entry it was sent with.
func sendRequest[R regionResponse](c *Client, bo *backoffer, locate func() (*regionEntry, error), call func(kvc kvpb.KvClient, e *regionEntry) (R, error)) (R, *regionEntry, error) {
	var zero R
	for {
		e, err := locate()
		if err != nil {
			return zero, nil, err
		}
		kvc, err := c.kvClient(e)
		if err != nil {
			if err := c.onSendFailure(bo, e, err); err != nil {
				return zero, nil, err
			}
			continue
		}
		resp, err := call(kvc, e)
		if err != nil {
			if err := c.onSendFailure(bo, e, err); err != nil {
				return zero, nil, err
			}
			continue
		}
		if re := resp.GetRegionError(); re != nil {
			if err := c.onRegionError(bo, e, re); err != nil {
				return zero, nil, err
			}
			continue
		}
		return resp, e, nil
	}
}
