// Package node assembles one Strata node: engine, Raft store, placement
// driver, KV service, client library, SQL engine and the MySQL, gRPC and
// HTTP listeners.
//
// A single node is a cluster of one. It bootstraps two regions on first
// start: the system region holding PD state and one data region spanning
// the whole keyspace, each a Raft group with this store as the only voter.
// SQL runs through the client library to the region leader exactly as it
// would in a cluster; the only shortcut is that the client calls the local
// KV service as a function instead of over gRPC.
//
// In the background the node garbage-collects old MVCC versions of the
// regions it leads (gc.go), its SQL engine destroys the data of dropped
// tables once the GC safe point passes the drop, and it reports its
// regions to PD.
package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/strata-db/strata/client"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/kvserver"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/resp"
	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/server"
	"github.com/strata-db/strata/kvpb"
)

// Config configures a node.
type Config struct {
	DataDir string
	SQLAddr string // MySQL protocol; empty disables
	// RESPAddr is the Redis protocol listener; empty disables.
	RESPAddr string
	// RESPPassword, when set, must be given with AUTH by Redis clients.
	RESPPassword string
	// MaxValueSize bounds a Redis argument and a stored value (default 64 MiB).
	MaxValueSize int
	HTTPAddr     string // /healthz, /metrics, /debug/pprof; empty disables
	GRPCAddr     string // KV and PD services for other nodes and external clients; empty disables
	// RootPassword, when set, is required for root. Empty allows root
	// without a password from loopback only.
	RootPassword string
	Logger       *slog.Logger
	// InMemory keeps all data in memory (tests only; nothing is durable).
	InMemory bool
	// GCInterval is how often old MVCC versions are garbage-collected
	// (default 1 minute; negative: never in the background, RunGC only).
	// The data of dropped tables is destroyed only once the GC safe point
	// passes the drop, so with GC disabled it is kept.
	GCInterval time.Duration
	// GCLifeTime is how long versions stay readable after they are
	// overwritten (default 10 minutes, the client's MaxTxnLifetime): a
	// transaction older than this fails its reads.
	GCLifeTime time.Duration
	// VersionCacheSize is the memory, in bytes, of the cache of each
	// key's newest MVCC version (mvcc.VersionCache), which answers point
	// reads without the LSM. 0 means DefaultVersionCacheSize; negative
	// disables the cache.
	VersionCacheSize int64
}

// DefaultVersionCacheSize is the version cache's default memory: enough
// for sysbench's 4 x 100,000 rows and their index entries (about 180 MiB
// with the cache's overhead per entry).
const DefaultVersionCacheSize = 256 << 20

// Node is a running Strata node.
type Node struct {
	cfg    Config
	log    *slog.Logger
	eng    engine.Engines
	store  *raftstore.Store
	pd     *pd.Server
	kv     *kvserver.Server
	locks  *mvcc.LockSet // the store's lock index, fed by the apply path
	client *client.Client
	router *client.GRPCRouter
	sql    *sql.Engine

	mysql *server.Server
	redis *resp.Server
	grpc  *grpc.Server
	http  *http.Server
	lns   []net.Listener

	storeInfo *kvpb.Store
	stop      chan struct{}
	wg        sync.WaitGroup
}

// maxSQLCleanupInterval bounds how long the SQL engine waits between looks
// for dropped data whose range the GC safe point has passed.
const maxSQLCleanupInterval = 5 * time.Second

const (
	localStoreID  = 1
	dataRegionID  = 2
	systemPeerID  = 1
	dataPeerID    = 2
	heartbeatTick = time.Second
)

// Start opens (bootstrapping if new) and starts a node.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	n := &Node{cfg: cfg, log: cfg.Logger, stop: make(chan struct{})}
	if n.log == nil {
		n.log = slog.Default()
	}
	if err := n.open(ctx); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.listen(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) open(ctx context.Context) error {
	if !n.cfg.InMemory {
		if err := os.MkdirAll(n.cfg.DataDir, 0o755); err != nil {
			return err
		}
	}
	eng, err := engine.OpenEngines(n.cfg.DataDir, engine.Options{InMemory: n.cfg.InMemory})
	if err != nil {
		return err
	}
	n.eng = eng
	if err := bootstrapIfNew(eng); err != nil {
		return err
	}
	// The lock index is loaded before the store starts applying, so it
	// sees every lock change from then on.
	locks, err := mvcc.LoadLockSet(eng.KV)
	if err != nil {
		return err
	}
	n.locks = locks
	cacheSize := n.cfg.VersionCacheSize
	if cacheSize == 0 {
		cacheSize = DefaultVersionCacheSize
	}
	locks.SetVersionCache(mvcc.NewVersionCache(cacheSize))
	// The KV engine has no WAL, so its memtables are empty now and every
	// record they will hold passes the store's BeforeApply; the records
	// it holds are below the timestamp ceiling the apply path persisted.
	recent, err := mvcc.LoadRecentWrites(eng.KV)
	if err != nil {
		return err
	}
	locks.SetRecentWrites(recent)
	registerRecentWritesMetrics(locks.RecentWrites())
	registerVersionCacheMetrics(locks.VersionCache())
	store, err := raftstore.Open(eng, raftstore.Config{StoreID: localStoreID, Logger: n.log,
		BeforeApply: locks.BeforeApply, BeforeCommit: locks.BeforeCommit, OnApply: locks.Observe,
		ScannedKeys: locks.ScannedKeys, FlushStarting: recent.FlushStarting, FlushDone: recent.FlushDone})
	if err != nil {
		return err
	}
	n.store = store
	if err := n.waitLeaders(ctx); err != nil {
		return err
	}
	if n.pd, err = pd.New(store); err != nil {
		return err
	}
	n.storeInfo = &kvpb.Store{Id: localStoreID, Address: n.cfg.GRPCAddr}
	n.heartbeat()
	n.wg.Add(1)
	go n.heartbeatLoop()

	n.kv = kvserver.New(store, locks)
	localPD := client.LocalPD(n.pd)
	router := client.NewGRPCRouter(localPD)
	router.SetLocal(localStoreID, client.LocalKv(n.kv))
	n.router = router
	n.client = client.New(localPD, router, client.Options{})
	// The SQL engine destroys dropped tables' data once PD's safe point
	// passes the drop; it looks as often as the safe point moves, at
	// least every few seconds.
	sqlOpts := sql.Options{SafePoint: pdSafePoint{n.pd}}
	if iv := n.cfg.GCInterval; iv > 0 {
		sqlOpts.CleanupInterval = min(iv, maxSQLCleanupInterval)
	}
	if n.sql, err = sql.NewEngine(ctx, n.client, sqlOpts); err != nil {
		return fmt.Errorf("node: start SQL engine: %w", err)
	}
	if interval := n.cfg.GCInterval; interval >= 0 {
		if interval == 0 {
			interval = defaultGCInterval
		}
		n.wg.Add(1)
		go n.gcLoop(interval) // gc.go
	}
	return nil
}

// bootstrapIfNew writes the store identity and the initial regions of a
// brand-new store: the system region (PD state) and one data region over
// the whole keyspace.
func bootstrapIfNew(eng engine.Engines) error {
	_, ok, err := engine.GetCopy(eng.KV, engine.StoreIdentKey())
	if err != nil || ok {
		return err
	}
	var clusterID [8]byte
	if _, err := rand.Read(clusterID[:]); err != nil {
		return err
	}
	epoch := func() *kvpb.RegionEpoch { return &kvpb.RegionEpoch{ConfVer: 1, Version: 1} }
	sys := &kvpb.Region{Id: pd.SystemRegionID, StartKey: []byte{}, EndKey: []byte{}, Epoch: epoch(),
		Peers: []*kvpb.Peer{{Id: systemPeerID, StoreId: localStoreID}}}
	data := &kvpb.Region{Id: dataRegionID, StartKey: []byte{}, EndKey: []byte{}, Epoch: epoch(),
		Peers: []*kvpb.Peer{{Id: dataPeerID, StoreId: localStoreID}}}
	for _, r := range []*kvpb.Region{sys, data} {
		if err := raftstore.BootstrapRegion(eng, r); err != nil {
			return err
		}
	}
	// The identity is written last: a crash before this point re-runs the
	// (idempotent) bootstrap on the next start.
	ident := binary.BigEndian.AppendUint64(clusterID[:], localStoreID)
	if err := eng.KV.Set(engine.StoreIdentKey(), ident, pebble.NoSync); err != nil {
		return err
	}
	return eng.KV.Flush() // the KV engine has no WAL
}

func (n *Node) waitLeaders(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := true
		for _, r := range n.store.Regions() {
			p, _ := n.store.Peer(r.Id)
			if p.CheckRequest(nil) != nil {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("node: regions did not elect a leader within 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (n *Node) heartbeat() {
	regions := n.store.Regions()
	leaders := make(map[uint64]*kvpb.Peer, len(regions))
	for _, r := range regions {
		p, _ := n.store.Peer(r.Id)
		if p.CheckRequest(nil) == nil {
			leaders[r.Id] = &kvpb.Peer{Id: p.ID(), StoreId: localStoreID}
		}
	}
	n.pd.Heartbeat(n.storeInfo, regions, leaders)
}

func (n *Node) heartbeatLoop() {
	defer n.wg.Done()
	t := time.NewTicker(heartbeatTick)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.heartbeat()
		}
	}
}

func (n *Node) listen() error {
	if n.cfg.GRPCAddr != "" {
		ln, err := net.Listen("tcp", n.cfg.GRPCAddr)
		if err != nil {
			return fmt.Errorf("node: grpc listen: %w", err)
		}
		n.lns = append(n.lns, ln)
		n.grpc = grpc.NewServer()
		kvpb.RegisterKvServer(n.grpc, n.kv)
		kvpb.RegisterPDServer(n.grpc, n.pd)
		// The deadlock detector of the cluster runs with the leader of the
		// first region; a single node leads every region.
		kvpb.RegisterDeadlockDetectorServer(n.grpc, n.kv.Detector())
		go n.grpc.Serve(ln)
	}
	if n.cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
		if err != nil {
			return fmt.Errorf("node: http listen: %w", err)
		}
		n.lns = append(n.lns, ln)
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			for _, reg := range n.store.Regions() {
				if p, ok := n.store.Peer(reg.Id); !ok || p.CheckRequest(nil) != nil {
					http.Error(w, fmt.Sprintf("region %d has no ready leader\n", reg.Id), http.StatusServiceUnavailable)
					return
				}
			}
			fmt.Fprintln(w, "ok")
		})
		mux.Handle("/metrics", promhttp.Handler())
		n.registerAdmin(mux) // admin.go: /admin/split, /admin/regions
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		// The LSM shape of both engines (levels, files, compactions, write
		// amplification): Pebble's own metrics report.
		mux.HandleFunc("/debug/lsm", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "KV engine (%s/kv)\n%s\n", n.cfg.DataDir, n.eng.KV.Metrics())
			fmt.Fprintf(w, "Raft engine (%s/raft)\n%s\n", n.cfg.DataDir, n.eng.Raft.Metrics())
		})
		n.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go n.http.Serve(ln)
	}
	if n.cfg.SQLAddr != "" {
		srv, err := server.New(server.Config{
			Addr:                   n.cfg.SQLAddr,
			RootPassword:           n.cfg.RootPassword,
			AllowEmptyRootPassword: n.cfg.RootPassword == "",
		}, n.sql)
		if err != nil {
			return fmt.Errorf("node: mysql listen: %w", err)
		}
		n.mysql = srv
		go func() {
			if err := srv.Serve(); err != nil {
				n.log.Info("mysql server stopped", "err", err)
			}
		}()
	}
	if n.cfg.RESPAddr != "" {
		srv, err := resp.New(resp.Config{
			Addr:         n.cfg.RESPAddr,
			Password:     n.cfg.RESPPassword,
			MaxValueSize: n.cfg.MaxValueSize,
			Logger:       n.log,
		}, n.client)
		if err != nil {
			return fmt.Errorf("node: redis listen: %w", err)
		}
		n.redis = srv
		go func() {
			if err := srv.Serve(); err != nil {
				n.log.Info("redis server stopped", "err", err)
			}
		}()
	}
	return nil
}

// RESPAddr returns the bound Redis-protocol address.
func (n *Node) RESPAddr() net.Addr {
	if n.redis == nil {
		return nil
	}
	return n.redis.Addr()
}

// SQLAddr returns the bound MySQL address.
func (n *Node) SQLAddr() net.Addr {
	if n.mysql == nil {
		return nil
	}
	return n.mysql.Addr()
}

// Storage returns the transactional client of this node.
func (n *Node) Storage() *client.Client { return n.client }

// SQL returns the node's SQL engine.
func (n *Node) SQL() *sql.Engine { return n.sql }

// Close stops listeners, then the store, then the engine.
func (n *Node) Close() error {
	select {
	case <-n.stop:
		return nil
	default:
		close(n.stop)
	}
	if n.mysql != nil {
		n.mysql.Close()
	}
	if n.redis != nil {
		n.redis.Close()
	}
	if n.grpc != nil {
		n.grpc.Stop()
	}
	if n.http != nil {
		n.http.Close()
	}
	n.wg.Wait()
	if n.sql != nil {
		// Stops background work (cleanup of dropped data) that writes
		// through the client.
		n.sql.Close()
	}
	if n.client != nil {
		n.client.Close()
	}
	if n.router != nil {
		n.router.Close()
	}
	if n.store != nil {
		n.store.Close()
	}
	if n.locks != nil {
		n.locks.VersionCache().Close()
	}
	if n.eng.KV != nil {
		// Entries applied without fsync are covered by the synced Raft log;
		// flush so a clean restart replays nothing.
		n.eng.KV.Flush()
		return n.eng.Close()
	}
	return nil
}
