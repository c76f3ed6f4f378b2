package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

// Options tunes a Client. The zero value is the production default.
type Options struct {
	// LockTTL is how long a transaction's locks outlive a coordinator that
	// stops heart-beating (crashes) before other transactions may roll
	// them back. Default 3s.
	LockTTL time.Duration
	// LockWaitTimeout bounds how long LockKeys waits for a conflicting
	// lock in a pessimistic transaction. Default 50s.
	LockWaitTimeout time.Duration
	// BackoffBudget bounds the total time one operation sleeps while
	// retrying region errors, unreachable stores and readers blocked by
	// live locks. Default 20s.
	BackoffBudget time.Duration
	// ScanBatchSize is how many entries an iterator fetches per request.
	// Default 256.
	ScanBatchSize int
	// MaxTxnLifetime stops heart-beating a transaction's primary lock
	// after this long, so a leaked transaction cannot hold locks forever.
	// Default 10m.
	MaxTxnLifetime time.Duration
	// DisableOnePC always uses two-phase commit, even when every key of a
	// transaction is in one region.
	DisableOnePC bool
}

func (o Options) withDefaults() Options {
	if o.LockTTL <= 0 {
		o.LockTTL = 3 * time.Second
	}
	if o.LockWaitTimeout <= 0 {
		o.LockWaitTimeout = 50 * time.Second
	}
	if o.BackoffBudget <= 0 {
		o.BackoffBudget = 20 * time.Second
	}
	if o.ScanBatchSize <= 0 {
		o.ScanBatchSize = 256
	}
	if o.MaxTxnLifetime <= 0 {
		o.MaxTxnLifetime = 10 * time.Minute
	}
	return o
}

// ErrResultUndetermined is wrapped by Commit errors when the client cannot
// tell whether the transaction committed (the commit RPC was lost). Such an
// error is not retryable: running the transaction again might apply it
// twice.
var ErrResultUndetermined = errors.New("client: transaction result undetermined")

// Client is a transactional key-value client. It implements kv.Storage and
// is safe for concurrent use; Close it when done.
type Client struct {
	pd      PD
	router  Router
	regions *regionCache
	tso     *tsoBatcher
	// localPD is set when PD runs in this process (LocalPD): timestamps
	// are then a method call, and batching them through the batcher's
	// goroutine would only add two goroutine hand-offs per transaction.
	localPD kvpb.PDServer
	// localTS is localPD's protobuf-free timestamp method, when it has one
	// (the node's PD does): two fewer allocations per transaction.
	localTS  func(ctx context.Context) (uint64, error)
	resolver *lockResolver
	opts     Options

	// closing is cancelled by Close; background work (heartbeats) ends
	// with it.
	closing context.Context
	close   context.CancelFunc
	// closers release what Connect opened, after the client closes.
	closers []func()
}

var _ kv.Storage = (*Client)(nil)

// New returns a client that takes timestamps and region routes from pd and
// reaches stores through router.
func New(pd PD, router Router, opts Options) *Client {
	c := &Client{
		pd:      pd,
		router:  router,
		regions: newRegionCache(pd),
		tso:     newTSOBatcher(pd),
		opts:    opts.withDefaults(),
	}
	if lp, ok := pd.(localPD); ok {
		c.localPD = lp.srv
		if d, ok := lp.srv.(interface {
			NextTimestamp(context.Context) (uint64, error)
		}); ok {
			c.localTS = d.NextTimestamp
		}
	}
	c.resolver = newLockResolver(c)
	c.closing, c.close = context.WithCancel(context.Background())
	return c
}

// Close stops the timestamp batcher and the heartbeats of open
// transactions. Transactions in flight fail. The router is not closed: it
// belongs to the caller.
func (c *Client) Close() {
	c.close()
	c.tso.close()
	for _, fn := range c.closers {
		fn()
	}
	c.closers = nil
}

// Begin implements kv.Storage.
func (c *Client) Begin(ctx context.Context, opts kv.TxnOptions) (kv.Txn, error) {
	ts, err := c.getTS(ctx)
	if err != nil {
		return nil, err
	}
	return newTxn(c, ts, opts), nil
}

// getTS returns a fresh timestamp, retrying PD failures within the backoff
// budget.
func (c *Client) getTS(ctx context.Context) (uint64, error) {
	if c.localTS != nil {
		ts, err := c.localTS(ctx)
		if err == nil {
			return ts, nil
		}
	} else if c.localPD != nil {
		resp, err := c.localPD.Tso(ctx, &kvpb.TsoRequest{Count: 1})
		if err == nil && resp.Error != nil {
			err = fmt.Errorf("client: pd: %s", resp.Error.Message)
		}
		if err == nil {
			return resp.Timestamp, nil
		}
	}
	ts, err := c.tso.getTS(ctx)
	if err == nil {
		return ts, nil
	}
	bo := newBackoffer(ctx, c.opts.BackoffBudget)
	for {
		if errors.Is(err, errClientClosed) || ctx.Err() != nil {
			return 0, err
		}
		if berr := bo.backoff(boPD, err); berr != nil {
			return 0, berr
		}
		if ts, err = c.tso.getTS(ctx); err == nil {
			return ts, nil
		}
	}
}

// kvClient returns the KV service of e's leader.
func (c *Client) kvClient(e *regionEntry) (kvpb.KvClient, error) {
	if e.leader == nil {
		return nil, fmt.Errorf("client: region %d has no peers", e.region.Id)
	}
	return c.router.KvClient(e.leader.StoreId)
}

// onSendFailure handles a request to e that got no response (or a router
// failure). The next attempt goes to another replica of the region, which
// either serves it or names the leader. It returns nil when the caller
// should retry.
func (c *Client) onSendFailure(bo *backoffer, e *regionEntry, err error) error {
	if cerr := bo.ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, errClientClosed) {
		return err
	}
	if inv, ok := c.router.(storeInvalidator); ok && e.leader != nil {
		inv.InvalidateStore(e.leader.StoreId)
	}
	if next := nextPeer(e); next != nil {
		c.regions.replace(e, newRegionEntry(e.region, next))
	} else {
		c.regions.invalidate(e)
	}
	return bo.backoff(boStoreRPC, fmt.Errorf("client: rpc to store %d (region %d): %w", e.storeID(), e.region.Id, err))
}

// nextPeer is the replica after e's leader, or nil if there is no other.
func nextPeer(e *regionEntry) *kvpb.Peer {
	peers := e.region.Peers
	if len(peers) < 2 || e.leader == nil {
		return nil
	}
	for i, p := range peers {
		if p.StoreId == e.leader.StoreId {
			return peers[(i+1)%len(peers)]
		}
	}
	return peers[0]
}

// onRegionError fixes the region cache after a RegionError and backs off.
// It returns nil when the caller should retry.
func (c *Client) onRegionError(bo *backoffer, e *regionEntry, re *kvpb.RegionError) error {
	kind, hint := c.regions.onRegionError(e, re)
	return bo.backoffAtLeast(kind, hint, fmt.Errorf("client: region %d: %s", e.region.Id, regionErrorString(re)))
}
