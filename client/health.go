package client

import (
	"context"
	"sync"
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

const (
	probeInterval = 250 * time.Millisecond
	probeTimeout  = 600 * time.Millisecond
	probeFailures = 2
)

type probeKey struct{}

type storeHealth struct {
	mu       sync.Mutex
	down     bool
	failures int
	// downCtx is cancelled when the store is found down; replaced when
	// it comes back.
	downCtx    context.Context
	cancelDown context.CancelFunc
}

func newStoreHealth() *storeHealth {
	h := &storeHealth{}
	h.downCtx, h.cancelDown = context.WithCancel(context.Background())
	return h
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
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), probeKey{}, true), probeTimeout)
		_, err := kv.KvGet(ctx, &kvpb.GetRequest{Context: &kvpb.Context{}})
		cancel()
		h.observe(err == nil)
	}
}

// isDown reports whether the store is down now.
func (h *storeHealth) isDown() bool {
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
