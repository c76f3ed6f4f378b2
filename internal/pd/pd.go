// Package pd is the placement driver: it allocates timestamps (the TSO)
// and ids, keeps the directory of stores and regions the client library
// routes by, and decides where regions' replicas go.
//
// Its durable state (the cluster id and replication factor, the TSO
// high-water mark, the id allocator's mark, the GC safe point, the store
// directory) lives in a Raft group of its own, the system region,
// replicated on up to three stores like any region. A Server runs on
// every node; the one whose replica of the system region leads it is PD's
// leader. That one serves; every other forwards each request to it
// (leader.go). On becoming leader, once its replica has applied every
// committed entry (raftstore's ready leader), a server loads the limits
// from the applied state before it hands anything out, so timestamps and
// ids stay strictly increasing across failovers; timestamps are handed
// out only while the replica holds its lease (raftstore/read.go), so an
// old leader that does not know it was replaced stops before a new one
// can start.
//
// The region directory is soft state: every store heartbeats once a
// second (StoreHeartbeat, one RPC per store, not per region) with the
// regions it leads whose report changed since it last sent one (an idle
// region's report stands until it changes, or for a minute), and a new
// leader seeds it from its own store's replicas and asks every store for
// a complete report. A region reported at a newer epoch replaces every
// entry it overlaps, so regions that no longer exist drop out; a report
// from an older Raft term than the entry's is ignored. The heartbeat
// response carries the operators the scheduler (scheduler.go) decided for
// the store's regions: add a learner, promote it, leave a joint
// configuration.
package pd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// SystemRegionID is the region that holds PD's own state.
const SystemRegionID = 1

var (
	tsoLimitKey    = engine.PDKey("tso-limit")
	idLimitKey     = engine.PDKey("id-limit")
	gcSafePointKey = engine.PDKey("gc-safe-point")
	clusterIDKey   = engine.PDKey("cluster-id")
	replicasKey    = engine.PDKey("replicas")
	storePrefix    = engine.PDKey("store/")
)

const idBatch = 1000

// ReservedIDs is the highest id the allocator never hands out: ids up to
// it are for what a node bootstraps before PD runs (its store, the system
// and first data region, their peers).
const ReservedIDs = 100

// DefaultReplicas is the replication factor of a new cluster.
const DefaultReplicas = 3

// ErrNotLeader is returned by a server that is not PD's leader and could
// not forward a request to it.
var ErrNotLeader = errors.New("pd: not the leader")

// Config configures a Server.
type Config struct {
	// Join lists gRPC addresses of other nodes, tried when this node does
	// not know PD's leader (it holds no replica of the system region).
	Join   []string
	Logger *slog.Logger
	// DialOptions are added to every connection PD makes to another node
	// (the cluster's mutual TLS credentials).
	DialOptions []grpc.DialOption
	// Schedule configures the schedulers (zero: DefaultScheduleConfig;
	// a zero field takes its default).
	Schedule ScheduleConfig
	// Merge, when set, runs the merge checker (merge.go) with these
	// thresholds on the stores' patrols (scheduler.go); nil: regions
	// never merge.
	Merge *MergeConfig
}

// Server implements kvpb.PDServer on one node.
type Server struct {
	kvpb.UnimplementedPDServer
	store *raftstore.Store
	log   *slog.Logger
	join  []string
	dial  []grpc.DialOption // Config.DialOptions
	sched ScheduleConfig
	merge *MergeConfig

	// lead is the state of this server while it is PD's leader; nil
	// otherwise.
	leadMu  sync.Mutex
	lead    *leaderState
	loading bool

	fwd forwarder // leader.go

	// stores caches the store directory (addresses), from the local
	// replica of the system region or from heartbeat responses.
	storesMu sync.RWMutex
	stores   map[uint64]*kvpb.Store

	stop, stopped chan struct{}
}

// New starts PD's server on the local store. It serves once the store's
// replica of the system region leads (LeaderChanged); until then it
// forwards.
func New(store *raftstore.Store, cfg Config) *Server {
	s := &Server{store: store, log: cfg.Logger, join: cfg.Join, dial: cfg.DialOptions, stores: map[uint64]*kvpb.Store{},
		sched: withDefaults(cfg.Schedule), merge: cfg.Merge}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.fwd.init(s)
	s.refreshStoresFromEngine()
	s.stop = make(chan struct{})
	s.stopped = make(chan struct{})
	go s.watch()
	return s
}

func withDefaults(c ScheduleConfig) ScheduleConfig {
	d := DefaultScheduleConfig()
	if c.DownAfter > 0 {
		d.DownAfter = c.DownAfter
	}
	if c.StoreLimit > 0 {
		d.StoreLimit = c.StoreLimit
	}
	if c.RepairLimit > 0 {
		d.RepairLimit = c.RepairLimit
	}
	if c.LeaderLimit > 0 {
		d.LeaderLimit = c.LeaderLimit
	}
	if c.Tolerance > 0 {
		d.Tolerance = c.Tolerance
	}
	if c.HotMinBytes > 0 {
		d.HotMinBytes = c.HotMinBytes
	}
	if c.BalanceCooldown > 0 {
		d.BalanceCooldown = c.BalanceCooldown
	}
	return d
}

// Close stops the server and releases the connections used to forward
// requests.
func (s *Server) Close() {
	close(s.stop)
	<-s.stopped
	s.fwd.close()
}

// Bootstrap writes the initial PD state of a new cluster into the KV
// engine of its first store, next to the system region's bootstrap state
// (before the store opens): the cluster id, the replication factor and
// the first store's entry in the directory.
func Bootstrap(eng engine.Engines, clusterID uint64, replicas uint32, first *kvpb.Store) error {
	b := eng.KV.NewBatch()
	defer b.Close()
	if err := b.Set(clusterIDKey, binary.BigEndian.AppendUint64(nil, clusterID), nil); err != nil {
		return err
	}
	if err := b.Set(replicasKey, binary.BigEndian.AppendUint64(nil, uint64(replicas)), nil); err != nil {
		return err
	}
	data, err := marshalStore(first)
	if err != nil {
		return err
	}
	if err := b.Set(storeKey(first.Id), data, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	return eng.KV.Flush() // the KV engine has no WAL
}

func readUint(db pebble.Reader, key []byte) (uint64, error) {
	v, ok, err := engine.GetCopy(db, key)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("pd: corrupt value at %q", key)
	}
	return binary.BigEndian.Uint64(v), nil
}

// persist writes key=value through the system region's log; only the
// leader can.
func (s *Server) persist(ctx context.Context, key, value []byte) error {
	p, ok := s.store.Peer(SystemRegionID)
	if !ok {
		return fmt.Errorf("pd: system region is not on this store")
	}
	b := s.store.Engine().NewBatch()
	defer b.Close()
	if err := b.Set(key, value, nil); err != nil {
		return err
	}
	return s.store.Propose(ctx, p, p.Region().Epoch, b)
}

func (s *Server) persistUint(ctx context.Context, key []byte, v uint64) error {
	return s.persist(ctx, key, binary.BigEndian.AppendUint64(nil, v))
}

func pdErr(err error) *kvpb.PDError { return &kvpb.PDError{Message: err.Error()} }

// Tso implements kvpb.PDServer.
func (s *Server) Tso(ctx context.Context, req *kvpb.TsoRequest) (*kvpb.TsoResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.TsoResponse, error) {
			return c.Tso(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.TsoResponse{Error: pdErr(err)}, nil
	}
	ts, err := st.tso.Next(ctx, req.Count)
	if err != nil {
		return &kvpb.TsoResponse{Error: pdErr(err)}, nil
	}
	return &kvpb.TsoResponse{Timestamp: ts, Count: req.Count}, nil
}

// NextTimestamp returns one timestamp when this server is PD's leader,
// for a client in this process (client.LocalPD), without the protobuf
// messages. On another node it fails at once with ErrNotLeader: the
// client then asks through its batching Tso path, which forwards one
// request for many transactions.
func (s *Server) NextTimestamp(ctx context.Context) (uint64, error) {
	st, err := s.leading(ctx)
	if err != nil {
		return 0, err
	}
	return st.tso.Next(ctx, 1)
}

// AllocIDs returns the first of count fresh ids (leader only).
func (s *Server) AllocIDs(ctx context.Context, count uint32) (uint64, error) {
	st, err := s.leading(ctx)
	if err != nil {
		resp, ferr := s.AllocID(ctx, &kvpb.AllocIDRequest{Count: count})
		if ferr != nil {
			return 0, ferr
		}
		if resp.Error != nil {
			return 0, errors.New(resp.Error.Message)
		}
		return resp.Id, nil
	}
	return st.allocIDs(ctx, s, count)
}

// AllocID implements kvpb.PDServer.
func (s *Server) AllocID(ctx context.Context, req *kvpb.AllocIDRequest) (*kvpb.AllocIDResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.AllocIDResponse, error) {
			return c.AllocID(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.AllocIDResponse{Error: pdErr(err)}, nil
	}
	id, err := st.allocIDs(ctx, s, max(req.Count, 1))
	if err != nil {
		return &kvpb.AllocIDResponse{Error: pdErr(err)}, nil
	}
	return &kvpb.AllocIDResponse{Id: id}, nil
}

// GCSafePoint implements kvpb.PDServer: it reads the GC safe point, or
// advances it (never backwards) when the request carries one, persisting
// the new value through the system region before answering.
func (s *Server) GCSafePoint(ctx context.Context, req *kvpb.GCSafePointRequest) (*kvpb.GCSafePointResponse, error) {
	st, err := s.leading(ctx)
	if err != nil {
		if resp, ferr := forward(s, ctx, func(ctx context.Context, c kvpb.PDClient) (*kvpb.GCSafePointResponse, error) {
			return c.GCSafePoint(ctx, req)
		}); ferr == nil {
			return resp, nil
		}
		return &kvpb.GCSafePointResponse{Error: pdErr(err)}, nil
	}
	sp, err := st.updateGCSafePoint(ctx, s, req.SafePoint)
	if err != nil {
		return &kvpb.GCSafePointResponse{Error: pdErr(err)}, nil
	}
	return &kvpb.GCSafePointResponse{SafePoint: sp}, nil
}

// SafePoint returns the GC safe point: no transaction may read below it.
func (s *Server) SafePoint(ctx context.Context) (uint64, error) {
	return s.UpdateGCSafePoint(ctx, 0)
}

// UpdateGCSafePoint advances the GC safe point to sp and returns the safe
// point in force, which is never below an earlier one: a lower sp changes
// nothing. The new value is persisted through the system region before it
// is returned, so it never goes back across restarts or failovers.
func (s *Server) UpdateGCSafePoint(ctx context.Context, sp uint64) (uint64, error) {
	resp, err := s.GCSafePoint(ctx, &kvpb.GCSafePointRequest{SafePoint: sp})
	if err != nil {
		return 0, err
	}
	if resp.Error != nil {
		return 0, errors.New(resp.Error.Message)
	}
	return resp.SafePoint, nil
}

// NextTimestampAnywhere returns one timestamp from PD's leader, wherever
// it is (forwarded when this node is not the leader).
func (s *Server) NextTimestampAnywhere(ctx context.Context) (uint64, error) {
	if ts, err := s.NextTimestamp(ctx); err == nil {
		return ts, nil
	}
	resp, err := s.Tso(ctx, &kvpb.TsoRequest{Count: 1})
	if err != nil {
		return 0, err
	}
	if resp.Error != nil {
		return 0, errors.New(resp.Error.Message)
	}
	return resp.Timestamp, nil
}

// ObserveHeartbeat takes from a heartbeat response what every node keeps:
// the store directory, and where PD's leader is.
func (s *Server) ObserveHeartbeat(resp *kvpb.StoreHeartbeatResponse) {
	s.setStores(resp.Stores)
	if resp.PdLeaderStore != 0 && resp.PdLeaderStore != s.store.StoreID() {
		if a := s.storeAddr(resp.PdLeaderStore); a != "" {
			s.fwd.setHint(a)
		}
	}
}
