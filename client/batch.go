package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/strata-db/strata/kvpb"
)

// Batched requests to a remote store. Every request the client has in
// flight to one store goes on one KvBatchCommands stream: a sender
// goroutine takes whatever is queued (up to maxBatchRequests) and sends
// it as one message, and a receiver hands each response to its caller by
// id. Under load many requests share a message and a system call; alone,
// a request goes out at once. A broken stream fails the requests in
// flight on it as unreachable (the caller's retry logic takes over) and
// is reopened on the next request; a store found down (health.go) does
// the same at once.

const (
	maxBatchRequests = 128
	batchQueue       = 4096
)

type batchCall struct {
	id     uint64
	method string
	req    []byte
	done   chan batchResult
}

type batchResult struct {
	resp []byte
	err  error
}

// batchConn is the batch stream to one store address.
type batchConn struct {
	conn   *grpc.ClientConn
	health *storeHealth
	queue  chan *batchCall
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]*batchCall
	stream  kvpb.Kv_KvBatchCommandsClient
	cancel  context.CancelFunc
	closed  bool
	// gen counts streams: a failure of an older one does not fail calls
	// of the current one.
	gen uint64
}

func newBatchConn(conn *grpc.ClientConn, h *storeHealth) *batchConn {
	return &batchConn{conn: conn, health: h, queue: make(chan *batchCall, batchQueue), pending: map[uint64]*batchCall{}}
}

var errBatchClosed = status.Error(codes.Unavailable, "client: batch stream closed")

// call sends one request and waits for its response.
func (b *batchConn) call(ctx context.Context, method string, req, resp proto.Message) error {
	if b.health.isDown() {
		return errStoreDown
	}
	data, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	c := &batchCall{id: b.nextID.Add(1), method: method, req: data, done: make(chan batchResult, 1)}
	if err := b.register(c); err != nil {
		return err
	}
	select {
	case b.queue <- c:
	case <-ctx.Done():
		b.forget(c.id)
		return ctx.Err()
	}
	select {
	case r := <-c.done:
		if r.err != nil {
			return r.err
		}
		return proto.Unmarshal(r.resp, resp)
	case <-ctx.Done():
		b.forget(c.id)
		return ctx.Err()
	}
}

func (b *batchConn) forget(id uint64) {
	b.mu.Lock()
	delete(b.pending, id)
	b.mu.Unlock()
}

// register opens the stream if none is open and records c as in flight
// on it.
func (b *batchConn) register(c *batchCall) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ensureStreamLocked(); err != nil {
		return err
	}
	b.pending[c.id] = c
	return nil
}

// ensureStreamLocked opens the stream if none is open. b.mu held.
func (b *batchConn) ensureStreamLocked() error {
	if b.closed {
		return errBatchClosed
	}
	if b.stream != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	// A store found down ends the stream at once.
	stop := context.AfterFunc(b.health.downContext(), cancel)
	st, err := kvpb.NewKvClient(b.conn).KvBatchCommands(ctx)
	if err != nil {
		stop()
		cancel()
		return status.Error(codes.Unavailable, err.Error())
	}
	b.stream, b.cancel = st, func() { stop(); cancel() }
	b.gen++
	go b.send(st, b.gen)
	go b.recv(st, b.gen)
	return nil
}

// fail ends stream gen and fails every call in flight on it.
func (b *batchConn) fail(gen uint64, err error) {
	b.mu.Lock()
	if gen != b.gen || b.stream == nil {
		b.mu.Unlock()
		return
	}
	b.stream = nil
	b.cancel()
	pending := b.pending
	b.pending = map[uint64]*batchCall{}
	b.mu.Unlock()
	if s, ok := status.FromError(err); !ok || s.Code() != codes.Unavailable {
		err = status.Error(codes.Unavailable, err.Error())
	}
	for _, c := range pending {
		c.done <- batchResult{err: err}
	}
}

func (b *batchConn) send(st kvpb.Kv_KvBatchCommandsClient, gen uint64) {
	ctx := st.Context()
	for {
		var first *batchCall
		select {
		case <-ctx.Done():
			b.fail(gen, errStoreDown)
			return
		case first = <-b.queue:
		}
		req := &kvpb.BatchRequest{}
		add := func(c *batchCall) {
			// A call whose stream failed (its caller was told) or whose
			// caller gave up is not sent.
			b.mu.Lock()
			_, live := b.pending[c.id]
			b.mu.Unlock()
			if live {
				req.Entries = append(req.Entries, &kvpb.BatchRequestEntry{Id: c.id, Method: c.method, Request: c.req})
			}
		}
		add(first)
	fill:
		for len(req.Entries) < maxBatchRequests {
			select {
			case c := <-b.queue:
				add(c)
			default:
				break fill
			}
		}
		if len(req.Entries) == 0 {
			continue
		}
		if err := st.Send(req); err != nil {
			b.fail(gen, err)
			return
		}
	}
}

func (b *batchConn) recv(st kvpb.Kv_KvBatchCommandsClient, gen uint64) {
	for {
		resp, err := st.Recv()
		if err != nil {
			b.fail(gen, err)
			return
		}
		b.mu.Lock()
		for _, e := range resp.Entries {
			c, ok := b.pending[e.Id]
			if !ok {
				continue // its caller gave up
			}
			delete(b.pending, e.Id)
			r := batchResult{resp: e.Response}
			if e.Error != "" {
				r.err = status.Error(codes.Unknown, e.Error)
			}
			c.done <- r
		}
		b.mu.Unlock()
	}
}

func (b *batchConn) close() {
	b.mu.Lock()
	b.closed = true
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// batchKv is a kvpb.KvClient that sends every request through a store's
// batch stream.
type batchKv struct{ b *batchConn }

func call[Resp proto.Message](b *batchConn, ctx context.Context, method string, req proto.Message, resp Resp) (Resp, error) {
	if err := b.call(ctx, method, req, resp); err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}

func (k batchKv) KvGet(ctx context.Context, in *kvpb.GetRequest, _ ...grpc.CallOption) (*kvpb.GetResponse, error) {
	return call(k.b, ctx, "KvGet", in, &kvpb.GetResponse{})
}
func (k batchKv) KvBatchGet(ctx context.Context, in *kvpb.BatchGetRequest, _ ...grpc.CallOption) (*kvpb.BatchGetResponse, error) {
	return call(k.b, ctx, "KvBatchGet", in, &kvpb.BatchGetResponse{})
}
func (k batchKv) KvScan(ctx context.Context, in *kvpb.ScanRequest, _ ...grpc.CallOption) (*kvpb.ScanResponse, error) {
	return call(k.b, ctx, "KvScan", in, &kvpb.ScanResponse{})
}
func (k batchKv) KvPrewrite(ctx context.Context, in *kvpb.PrewriteRequest, _ ...grpc.CallOption) (*kvpb.PrewriteResponse, error) {
	return call(k.b, ctx, "KvPrewrite", in, &kvpb.PrewriteResponse{})
}
func (k batchKv) KvCommit(ctx context.Context, in *kvpb.CommitRequest, _ ...grpc.CallOption) (*kvpb.CommitResponse, error) {
	return call(k.b, ctx, "KvCommit", in, &kvpb.CommitResponse{})
}
func (k batchKv) KvBatchRollback(ctx context.Context, in *kvpb.BatchRollbackRequest, _ ...grpc.CallOption) (*kvpb.BatchRollbackResponse, error) {
	return call(k.b, ctx, "KvBatchRollback", in, &kvpb.BatchRollbackResponse{})
}
func (k batchKv) KvCheckTxnStatus(ctx context.Context, in *kvpb.CheckTxnStatusRequest, _ ...grpc.CallOption) (*kvpb.CheckTxnStatusResponse, error) {
	return call(k.b, ctx, "KvCheckTxnStatus", in, &kvpb.CheckTxnStatusResponse{})
}
func (k batchKv) KvResolveLock(ctx context.Context, in *kvpb.ResolveLockRequest, _ ...grpc.CallOption) (*kvpb.ResolveLockResponse, error) {
	return call(k.b, ctx, "KvResolveLock", in, &kvpb.ResolveLockResponse{})
}
func (k batchKv) KvPessimisticLock(ctx context.Context, in *kvpb.PessimisticLockRequest, _ ...grpc.CallOption) (*kvpb.PessimisticLockResponse, error) {
	return call(k.b, ctx, "KvPessimisticLock", in, &kvpb.PessimisticLockResponse{})
}
func (k batchKv) KvPessimisticRollback(ctx context.Context, in *kvpb.PessimisticRollbackRequest, _ ...grpc.CallOption) (*kvpb.PessimisticRollbackResponse, error) {
	return call(k.b, ctx, "KvPessimisticRollback", in, &kvpb.PessimisticRollbackResponse{})
}
func (k batchKv) KvTxnHeartBeat(ctx context.Context, in *kvpb.TxnHeartBeatRequest, _ ...grpc.CallOption) (*kvpb.TxnHeartBeatResponse, error) {
	return call(k.b, ctx, "KvTxnHeartBeat", in, &kvpb.TxnHeartBeatResponse{})
}
func (k batchKv) KvDestroyRange(ctx context.Context, in *kvpb.DestroyRangeRequest, _ ...grpc.CallOption) (*kvpb.DestroyRangeResponse, error) {
	return call(k.b, ctx, "KvDestroyRange", in, &kvpb.DestroyRangeResponse{})
}
func (k batchKv) KvImport(ctx context.Context, in *kvpb.ImportRequest, _ ...grpc.CallOption) (*kvpb.ImportResponse, error) {
	return call(k.b, ctx, "KvImport", in, &kvpb.ImportResponse{})
}
func (k batchKv) KvCoprocessor(ctx context.Context, in *kvpb.CopRequest, _ ...grpc.CallOption) (*kvpb.CopResponse, error) {
	return call(k.b, ctx, "KvCoprocessor", in, &kvpb.CopResponse{})
}
func (k batchKv) KvScanLock(ctx context.Context, in *kvpb.ScanLockRequest, _ ...grpc.CallOption) (*kvpb.ScanLockResponse, error) {
	return call(k.b, ctx, "KvScanLock", in, &kvpb.ScanLockResponse{})
}
func (k batchKv) KvBatchCommands(ctx context.Context, _ ...grpc.CallOption) (kvpb.Kv_KvBatchCommandsClient, error) {
	return nil, errors.New("client: batch streams do not nest")
}
