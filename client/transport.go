package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/kvpb"
)

// PD is the part of the placement driver API the client uses. A
// kvpb.PDClient (gRPC) satisfies it, and so does LocalPD for a PD in the
// same process.
type PD interface {
	Tso(ctx context.Context, in *kvpb.TsoRequest, opts ...grpc.CallOption) (*kvpb.TsoResponse, error)
	GetRegion(ctx context.Context, in *kvpb.GetRegionRequest, opts ...grpc.CallOption) (*kvpb.GetRegionResponse, error)
	ScanRegions(ctx context.Context, in *kvpb.ScanRegionsRequest, opts ...grpc.CallOption) (*kvpb.ScanRegionsResponse, error)
	GetStore(ctx context.Context, in *kvpb.GetStoreRequest, opts ...grpc.CallOption) (*kvpb.GetStoreResponse, error)
}

// Router finds the KV service of a store. The client asks it for every
// request, so it must be cheap and safe for concurrent use.
type Router interface {
	KvClient(storeID uint64) (kvpb.KvClient, error)
}

// storeInvalidator is implemented by routers that cache store addresses;
// the client calls it when an RPC to the store fails, so that a store that
// moved is looked up again.
type storeInvalidator interface {
	InvalidateStore(storeID uint64)
}

// LocalKv adapts a KV server in the same process to kvpb.KvClient. Calls
// are plain function calls: no serialization, no copies. Request messages
// are therefore shared with the server, which must treat them as read-only
// (the client reuses parts of them, such as the routing Context, across
// requests); responses are owned by the client once returned.
func LocalKv(srv kvpb.KvServer) kvpb.KvClient { return localKv{srv: srv} }

type localKv struct{ srv kvpb.KvServer }

func (l localKv) KvGet(ctx context.Context, in *kvpb.GetRequest, _ ...grpc.CallOption) (*kvpb.GetResponse, error) {
	return l.srv.KvGet(ctx, in)
}

func (l localKv) KvBatchGet(ctx context.Context, in *kvpb.BatchGetRequest, _ ...grpc.CallOption) (*kvpb.BatchGetResponse, error) {
	return l.srv.KvBatchGet(ctx, in)
}

func (l localKv) KvScan(ctx context.Context, in *kvpb.ScanRequest, _ ...grpc.CallOption) (*kvpb.ScanResponse, error) {
	return l.srv.KvScan(ctx, in)
}

func (l localKv) KvPrewrite(ctx context.Context, in *kvpb.PrewriteRequest, _ ...grpc.CallOption) (*kvpb.PrewriteResponse, error) {
	return l.srv.KvPrewrite(ctx, in)
}

func (l localKv) KvCommit(ctx context.Context, in *kvpb.CommitRequest, _ ...grpc.CallOption) (*kvpb.CommitResponse, error) {
	return l.srv.KvCommit(ctx, in)
}

func (l localKv) KvBatchRollback(ctx context.Context, in *kvpb.BatchRollbackRequest, _ ...grpc.CallOption) (*kvpb.BatchRollbackResponse, error) {
	return l.srv.KvBatchRollback(ctx, in)
}

func (l localKv) KvCheckTxnStatus(ctx context.Context, in *kvpb.CheckTxnStatusRequest, _ ...grpc.CallOption) (*kvpb.CheckTxnStatusResponse, error) {
	return l.srv.KvCheckTxnStatus(ctx, in)
}

func (l localKv) KvResolveLock(ctx context.Context, in *kvpb.ResolveLockRequest, _ ...grpc.CallOption) (*kvpb.ResolveLockResponse, error) {
	return l.srv.KvResolveLock(ctx, in)
}

func (l localKv) KvPessimisticLock(ctx context.Context, in *kvpb.PessimisticLockRequest, _ ...grpc.CallOption) (*kvpb.PessimisticLockResponse, error) {
	return l.srv.KvPessimisticLock(ctx, in)
}

func (l localKv) KvPessimisticRollback(ctx context.Context, in *kvpb.PessimisticRollbackRequest, _ ...grpc.CallOption) (*kvpb.PessimisticRollbackResponse, error) {
	return l.srv.KvPessimisticRollback(ctx, in)
}

func (l localKv) KvTxnHeartBeat(ctx context.Context, in *kvpb.TxnHeartBeatRequest, _ ...grpc.CallOption) (*kvpb.TxnHeartBeatResponse, error) {
	return l.srv.KvTxnHeartBeat(ctx, in)
}

func (l localKv) KvDestroyRange(ctx context.Context, in *kvpb.DestroyRangeRequest, _ ...grpc.CallOption) (*kvpb.DestroyRangeResponse, error) {
	return l.srv.KvDestroyRange(ctx, in)
}

func (l localKv) KvImport(ctx context.Context, in *kvpb.ImportRequest, _ ...grpc.CallOption) (*kvpb.ImportResponse, error) {
	return l.srv.KvImport(ctx, in)
}

func (l localKv) KvCoprocessor(ctx context.Context, in *kvpb.CopRequest, _ ...grpc.CallOption) (*kvpb.CopResponse, error) {
	return l.srv.KvCoprocessor(ctx, in)
}

// LocalPD adapts a placement driver in the same process to kvpb.PDClient,
// with the same sharing rules as LocalKv.
func LocalPD(srv kvpb.PDServer) kvpb.PDClient { return localPD{srv: srv} }

type localPD struct{ srv kvpb.PDServer }

func (l localPD) Tso(ctx context.Context, in *kvpb.TsoRequest, _ ...grpc.CallOption) (*kvpb.TsoResponse, error) {
	return l.srv.Tso(ctx, in)
}

func (l localPD) GetRegion(ctx context.Context, in *kvpb.GetRegionRequest, _ ...grpc.CallOption) (*kvpb.GetRegionResponse, error) {
	return l.srv.GetRegion(ctx, in)
}

func (l localPD) GetRegionByID(ctx context.Context, in *kvpb.GetRegionByIDRequest, _ ...grpc.CallOption) (*kvpb.GetRegionResponse, error) {
	return l.srv.GetRegionByID(ctx, in)
}

func (l localPD) ScanRegions(ctx context.Context, in *kvpb.ScanRegionsRequest, _ ...grpc.CallOption) (*kvpb.ScanRegionsResponse, error) {
	return l.srv.ScanRegions(ctx, in)
}

func (l localPD) GetStore(ctx context.Context, in *kvpb.GetStoreRequest, _ ...grpc.CallOption) (*kvpb.GetStoreResponse, error) {
	return l.srv.GetStore(ctx, in)
}

func (l localPD) AllocID(ctx context.Context, in *kvpb.AllocIDRequest, _ ...grpc.CallOption) (*kvpb.AllocIDResponse, error) {
	return l.srv.AllocID(ctx, in)
}

// GRPCRouter routes to stores over gRPC, resolving store addresses through
// PD and keeping one connection per address. Stores registered with
// SetLocal are served in-process instead (see LocalKv). It is safe for
// concurrent use.
type GRPCRouter struct {
	pd       PD
	dialOpts []grpc.DialOption

	// local is read by every request: a copy-on-write map, no lock.
	local atomic.Pointer[map[uint64]kvpb.KvClient]

	mu      sync.RWMutex
	clients map[uint64]kvpb.KvClient // by store id
	addrs   map[uint64]string        // store id -> address
	conns   map[string]*grpc.ClientConn
	health  map[string]*storeHealth // by address
	batches map[string]*batchConn   // by address
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
	// probesIdle counts the stores whose probes stopped for idleness.
	probesIdle atomic.Int64
}

// NewGRPCRouter returns a router that dials stores with insecure transport
// credentials and fixed flow-control windows (WindowDialOptions) plus
// dialOpts.
func NewGRPCRouter(pd PD, dialOpts ...grpc.DialOption) *GRPCRouter {
	opts := append(append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, WindowDialOptions()...), dialOpts...)
	return &GRPCRouter{
		pd:       pd,
		dialOpts: opts,
		clients:  make(map[uint64]kvpb.KvClient),
		addrs:    make(map[uint64]string),
		conns:    make(map[string]*grpc.ClientConn),
		health:   make(map[string]*storeHealth),
		batches:  make(map[string]*batchConn),
		stop:     make(chan struct{}),
	}
}

// SetLocal serves storeID with kv (typically LocalKv of this process's
// store) instead of dialing it.
func (r *GRPCRouter) SetLocal(storeID uint64, kv kvpb.KvClient) {
	r.mu.Lock()
	local := map[uint64]kvpb.KvClient{storeID: kv}
	if old := r.local.Load(); old != nil {
		for id, c := range *old {
			if id != storeID {
				local[id] = c
			}
		}
	}
	r.local.Store(&local)
	r.mu.Unlock()
}

// KvClient implements Router.
func (r *GRPCRouter) KvClient(storeID uint64) (kvpb.KvClient, error) {
	if local := r.local.Load(); local != nil {
		if c, ok := (*local)[storeID]; ok {
			return c, nil
		}
	}
	r.mu.RLock()
	c, ok := r.clients[storeID]
	closed := r.closed
	r.mu.RUnlock()
	if ok {
		return c, nil
	}
	if closed {
		return nil, errClientClosed
	}
	return r.connect(storeID)
}

func (r *GRPCRouter) connect(storeID uint64) (kvpb.KvClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pdRPCTimeout)
	defer cancel()
	resp, err := r.pd.GetStore(ctx, &kvpb.GetStoreRequest{StoreId: storeID})
	if err != nil {
		return nil, fmt.Errorf("client: pd GetStore %d: %w", storeID, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("client: pd GetStore %d: %s", storeID, resp.Error.Message)
	}
	if resp.Store == nil || resp.Store.Address == "" {
		return nil, fmt.Errorf("client: pd has no address for store %d", storeID)
	}
	addr := resp.Store.Address

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClientClosed
	}
	if c, ok := r.clients[storeID]; ok {
		return c, nil // another goroutine connected first
	}
	conn, ok := r.conns[addr]
	if !ok {
		// grpc.NewClient does not dial; the connection is established on
		// the first RPC and re-established by gRPC after failures.
		h := newStoreHealth()
		conn, err = grpc.NewClient(addr, append(r.dialOpts, grpc.WithUnaryInterceptor(h.intercept))...)
		if err != nil {
			return nil, fmt.Errorf("client: connect to store %d at %s: %w", storeID, addr, err)
		}
		r.conns[addr] = conn
		r.health[addr] = h
		r.wg.Add(1)
		go r.probe(conn, h)
	}
	bc, ok := r.batches[addr]
	if !ok {
		bc = newBatchConn(conn, r.health[addr])
		r.batches[addr] = bc
	}
	c := batchKv{b: bc}
	r.clients[storeID] = c
	r.addrs[storeID] = addr
	return c, nil
}

// InvalidateStore forgets storeID's address so that the next request looks
// it up in PD again. The connection stays open for other stores sharing the
// address and is closed by Close.
func (r *GRPCRouter) InvalidateStore(storeID uint64) {
	r.mu.Lock()
	delete(r.clients, storeID)
	delete(r.addrs, storeID)
	r.mu.Unlock()
}

// Close closes every connection. KvClient fails afterwards for remote
// stores.
func (r *GRPCRouter) Close() error {
	r.mu.Lock()
	if !r.closed {
		close(r.stop)
	}
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	for _, bc := range r.batches {
		bc.close()
	}
	for addr, conn := range r.conns {
		if err := conn.Close(); err != nil && first == nil {
			first = err
		}
		delete(r.conns, addr)
	}
	clear(r.clients)
	clear(r.addrs)
	return first
}

func (l localPD) Join(ctx context.Context, in *kvpb.JoinRequest, _ ...grpc.CallOption) (*kvpb.JoinResponse, error) {
	return l.srv.Join(ctx, in)
}

func (l localPD) StoreHeartbeat(ctx context.Context, in *kvpb.StoreHeartbeatRequest, _ ...grpc.CallOption) (*kvpb.StoreHeartbeatResponse, error) {
	return l.srv.StoreHeartbeat(ctx, in)
}

func (l localPD) ClusterStatus(ctx context.Context, in *kvpb.ClusterStatusRequest, _ ...grpc.CallOption) (*kvpb.ClusterStatusResponse, error) {
	return l.srv.ClusterStatus(ctx, in)
}

func (l localPD) GCSafePoint(ctx context.Context, in *kvpb.GCSafePointRequest, _ ...grpc.CallOption) (*kvpb.GCSafePointResponse, error) {
	return l.srv.GCSafePoint(ctx, in)
}

func (l localPD) SetStoreState(ctx context.Context, in *kvpb.SetStoreStateRequest, _ ...grpc.CallOption) (*kvpb.SetStoreStateResponse, error) {
	return l.srv.SetStoreState(ctx, in)
}

func (l localKv) KvBatchCommands(ctx context.Context, _ ...grpc.CallOption) (kvpb.Kv_KvBatchCommandsClient, error) {
	return nil, fmt.Errorf("client: batch streams are for remote stores")
}

func (l localKv) KvScanLock(ctx context.Context, in *kvpb.ScanLockRequest, _ ...grpc.CallOption) (*kvpb.ScanLockResponse, error) {
	return l.srv.KvScanLock(ctx, in)
}
