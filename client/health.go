package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-db/strata/kvpb"
)

// Store liveness. A store that stops answering (killed, paused with
// SIGSTOP, cut off by the network) must not hold requests until their
// deadlines: the other replicas elect a new leader within about a
// second, and requests should move there as soon as it exists. The
// router probes every remote store it talks to a few times a second with
// a request any store answers at once (a read of region 0, which no store
// has); after probeFailures consecutive unanswered probes the store is
// down: requests in flight to it are cancelled and new ones fail at once
// with Unavailable, which the client treats as any unreachable store (the
// next replica is tried, and names the new leader). The first answered
// probe brings it back.
//
// A store nobody sent a request to for probeIdleAfter is not probed (an
// idle cluster's nodes would otherwise ask each other eight times a
// second for nothing); the next request to it starts the probes again at
// once, so a store that died while idle is found down within
// probeFailures probes of that request, as one that dies under load. A
// store found down is probed until it answers.

const (
	probeInterval = 250 * time.Millisecond
	probeTimeout  = 600 * time.Millisecond
	probeFailures = 2
)

// probeIdleAfter: a variable for tests.
var probeIdleAfter = 10 * time.Second

type probeKey struct{}

type storeHealth struct {
	mu       sync.Mutex
	down     bool
	failures int
	// downCtx is cancelled when the store is found down; replaced when
	// it comes back.
	downCtx    context.Context
	cancelDown context.CancelFunc
	// lastUse: when a request last went to the store (unix ns); wake
	// starts the probes of an idle store again.
	lastUse atomic.Int64
	wake    chan struct{}
}

func newStoreHealth() *storeHealth {
	h := &storeHealth{wake: make(chan struct{}, 1)}
	h.downCtx, h.cancelDown = context.WithCancel(context.Background())
	h.lastUse.Store(time.Now().UnixNano())
	return h
}

// use records a request to the store, and wakes its probes if they
// stopped for idleness. A request's hot path: the clock is read, and the
// time stored only when it moved by a millisecond.
func (h *storeHealth) use() {
	now := time.Now().UnixNano()
	last := h.lastUse.Load()
	if now-last < int64(time.Millisecond) {
		return
	}
	h.lastUse.Store(now)
	if now-last >= int64(probeIdleAfter) {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// idle reports whether the store's probes may stop: no request for
// probeIdleAfter and not down.
func (h *storeHealth) idle(now time.Time) bool {
	if now.UnixNano()-h.lastUse.Load() < int64(probeIdleAfter) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.down
}

var errStoreDown = status.Error(codes.Unavailable, "client: store does not answer")

// intercept is the unary interceptor of a store's connection: it fails
// requests to a store that is down and cancels those in flight when it
// goes down.
func (h *storeHealth) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if ctx.Value(probeKey{}) != nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	h.use()
	h.mu.Lock()
	down, dctx := h.down, h.downCtx
	h.mu.Unlock()
	if down {
		return errStoreDown
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(dctx, cancel)
	defer stop()
	err := invoker(cctx, method, req, reply, cc, opts...)
	if err != nil && ctx.Err() == nil && dctx.Err() != nil {
		return errStoreDown
	}
	return err
}

// observe records a probe's outcome.
func (h *storeHealth) observe(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok {
		h.failures = 0
		if h.down {
			h.down = false
			h.downCtx, h.cancelDown = context.WithCancel(context.Background())
		}
		return
	}
	h.failures++
	if h.failures >= probeFailures && !h.down {
		h.down = true
		h.cancelDown()
	}
}

// probe checks a store's liveness until the router closes.
func (r *GRPCRouter) probe(conn *grpc.ClientConn, h *storeHealth) {
	defer r.wg.Done()
	kv := kvpb.NewKvClient(conn)
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		if h.idle(time.Now()) {
			r.probesIdle.Add(1)
			select {
			case <-r.stop:
				return
			case <-h.wake:
			}
			r.probesIdle.Add(-1)
		}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), probeKey{}, true), probeTimeout)
		_, err := kv.KvGet(ctx, &kvpb.GetRequest{Context: &kvpb.Context{}})
		cancel()
		h.observe(err == nil)
	}
}

// isDown reports whether the store is down now (a request is about to
// go to it).
func (h *storeHealth) isDown() bool {
	h.use()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// downContext is cancelled when the store is next found down.
func (h *storeHealth) downContext() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downCtx
}
