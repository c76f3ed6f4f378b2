package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// maxTSOBatch bounds how many waiting callers one Tso RPC serves.
const maxTSOBatch = 10000

// tsoRPCTimeout bounds one Tso RPC; callers' own contexts bound their wait.
const tsoRPCTimeout = 5 * time.Second

var errClientClosed = errors.New("client: closed")

// tsoRequest is one caller waiting for a timestamp. ready has capacity one so
// the batcher never blocks on a caller that gave up.
type tsoRequest struct {
	ready chan struct{}
	ts    uint64
	err   error
}

var tsoRequestPool = sync.Pool{New: func() any {
	return &tsoRequest{ready: make(chan struct{}, 1)}
}}

// tsoBatcher turns many concurrent timestamp requests into few PD round
// trips. One goroutine owns the PD stream: it takes every request queued so
// far, asks PD for that many consecutive timestamps in one Tso RPC, and hands
// them out in queue order. Only one RPC is in flight at a time; callers that
// arrive meanwhile queue up and form the next batch.
//
// Timestamps handed out are strictly increasing across batches; a PD answer
// that would go backwards is refused (the callers get an error) rather than
// breaking snapshot isolation.
type tsoBatcher struct {
	pd      PD
	queue   chan *tsoRequest
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	// Owned by the run goroutine: the last timestamp handed out, and the
	// request message, reused because one RPC is in flight at a time.
	last uint64
	req  kvpb.TsoRequest
}

func newTSOBatcher(pd PD) *tsoBatcher {
	b := &tsoBatcher{
		pd:      pd,
		queue:   make(chan *tsoRequest, maxTSOBatch),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go b.run()
	return b
}

// getTS returns one fresh timestamp.
func (b *tsoBatcher) getTS(ctx context.Context) (uint64, error) {
	r := tsoRequestPool.Get().(*tsoRequest)
	select {
	case b.queue <- r:
	case <-b.stop:
		tsoRequestPool.Put(r)
		return 0, errClientClosed
	case <-ctx.Done():
		tsoRequestPool.Put(r)
		return 0, ctx.Err()
	}
	select {
	case <-r.ready:
		ts, err := r.ts, r.err
		r.ts, r.err = 0, nil
		tsoRequestPool.Put(r)
		return ts, err
	case <-b.stopped:
		// The request may have been served just before the batcher
		// stopped; it is not returned to the pool because the batcher
		// may still hold it.
		return 0, errClientClosed
	case <-ctx.Done():
		// Abandoned: the batcher will still fill r.ready (buffered), and
		// r is garbage collected afterwards.
		return 0, ctx.Err()
	}
}

func (b *tsoBatcher) close() {
	b.once.Do(func() { close(b.stop) })
	<-b.stopped
}

func (b *tsoBatcher) run() {
	defer close(b.stopped)
	batch := make([]*tsoRequest, 0, 64)
	for {
		select {
		case r := <-b.queue:
			batch = append(batch, r)
		case <-b.stop:
			b.failQueued()
			return
		}
	collect:
		for len(batch) < maxTSOBatch {
			select {
			case r := <-b.queue:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		b.serve(batch)
		clear(batch)
		batch = batch[:0]
	}
}

func (b *tsoBatcher) failQueued() {
	for {
		select {
		case r := <-b.queue:
			r.err = errClientClosed
			r.ready <- struct{}{}
		default:
			return
		}
	}
}

// serve fetches len(batch) consecutive timestamps and distributes them.
func (b *tsoBatcher) serve(batch []*tsoRequest) {
	n := uint64(len(batch))
	first, err := b.fetch(n)
	for i, r := range batch {
		if err != nil {
			r.err = err
		} else {
			r.ts = first + uint64(i)
		}
		r.ready <- struct{}{}
	}
}

func (b *tsoBatcher) fetch(n uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tsoRPCTimeout)
	defer cancel()
	b.req.Count = uint32(n)
	resp, err := b.pd.Tso(ctx, &b.req)
	if err != nil {
		return 0, fmt.Errorf("client: tso: %w", err)
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("client: tso: %s", resp.Error.Message)
	}
	if resp.Count != 0 && uint64(resp.Count) != n {
		return 0, fmt.Errorf("client: tso: asked for %d timestamps, got %d", n, resp.Count)
	}
	last := resp.Timestamp
	if last < n {
		return 0, fmt.Errorf("client: tso: invalid timestamp %d for a batch of %d", last, n)
	}
	first := last - n + 1
	if first <= b.last {
		return 0, fmt.Errorf("client: tso: timestamp went backwards (%d after %d)", first, b.last)
	}
	b.last = last
	return first, nil
}
