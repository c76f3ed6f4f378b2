// Package node assembles one Strata node: engines, Raft store, transport,
// placement driver, KV service, client library, SQL engine and the MySQL,
// Redis, gRPC and HTTP listeners.
//
// A node is a store of a cluster. The first node, started without Join,
// bootstraps the cluster: a random cluster id, store id 1, and two
// regions with this store as their only voter, the system region holding
// PD's state and one data region spanning the whole keyspace. A node
// started with Join (the gRPC addresses of other nodes) asks the cluster
// for a store id and starts empty; PD's scheduler then gives it replicas
// (a learner that catches up by snapshot, then a voter) until every region
// has as many as the replication factor. A restarted node comes back with
// its identity from its data directory; with Join, it checks that the
// addresses belong to its own cluster.
//
// A single node is a cluster of one: SQL runs through the client library
// to the region leader exactly as in a cluster; the only shortcut is that
// the client calls the local KV service as a function instead of over
// gRPC.
//
// In the background the node reports itself and the regions it leads to
// PD once a second and carries out the operators PD answers with
// (cluster.go), garbage-collects old MVCC versions (gc.go), and its SQL
// engine destroys the data of dropped tables once the GC safe point
// passes the drop.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/strata-db/strata/client"
	"github.com/strata-db/strata/internal/audit"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/kvserver"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/resp"
	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/server"
	"github.com/strata-db/strata/internal/transport"
	"github.com/strata-db/strata/kvpb"
)

// Config configures a node.
type Config struct {
	DataDir string
	SQLAddr string // MySQL protocol; empty disables
	// RESPAddr is the Redis protocol listener; empty disables.
	RESPAddr string
	// RESPPassword, when set, is the Redis default user's password (AUTH),
	// unless ACL SETUSER default stored another.
	RESPPassword string
	// MaxValueSize bounds a Redis argument and a stored value (default 64 MiB).
	MaxValueSize int
	HTTPAddr     string // /healthz, /status, /metrics, /debug/pprof; empty disables
	// GRPCAddr is where the node listens for the KV, PD and Raft services
	// of other nodes and external clients; empty disables (a single node
	// that no one else reaches).
	GRPCAddr string
	// AdvertiseAddr is the gRPC address other nodes dial (default
	// GRPCAddr).
	AdvertiseAddr string
	// Join lists the gRPC addresses of nodes of the cluster to join. Empty
	// on the first node, which bootstraps a cluster if its data directory
	// is new.
	Join []string
	// Replicas is the replication factor of a cluster this node
	// bootstraps (default 3; a cluster with fewer nodes runs with what it
	// has). Ignored once the cluster exists.
	Replicas int
	// RootPassword, when set, becomes root's password in the cluster's
	// accounts. Without one root has none and logs in from loopback only.
	RootPassword string
	// TLSCert and TLSKey are the certificate of the MySQL port (and the
	// HTTP port beyond loopback); empty: CertsDir's node certificate, or
	// a self-signed one generated into DataDir/tls on first start. TLSCA
	// verifies client certificates (REQUIRE X509; default CertsDir's
	// ca.crt).
	TLSCert, TLSKey, TLSCA string
	// CertsDir holds the cluster CA's ca.crt and this node's node.crt and
	// node.key (`strata cert`): gRPC between nodes is then mutual TLS.
	CertsDir string
	// RequireSecureTransport refuses MySQL logins and Redis connections
	// over plaintext TCP.
	RequireSecureTransport bool
	// AuditLog, when set, is the file of the audit log (package audit):
	// logins and DDL/DCL statements, rotated at AuditLogMaxSizeMB keeping
	// AuditLogMaxBackups files.
	AuditLog           string
	AuditLogMaxSizeMB  int
	AuditLogMaxBackups int
	// LoginFailureDelay is the step of the delay of repeated failed logins
	// of a user from one address on the MySQL and Redis ports (package
	// loginguard); 0 disables it.
	LoginFailureDelay time.Duration
	// Insecure allows listening beyond loopback without certificates
	// (security.go).
	Insecure bool
	Logger   *slog.Logger
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
	// CacheBytes is the KV engine's block cache, in bytes (0: the
	// engine's default, 256 MiB).
	CacheBytes int64
	// VersionCacheSize is the memory, in bytes, of the cache of each
	// key's newest MVCC version (mvcc.VersionCache), which answers point
	// reads without the LSM. 0 means DefaultVersionCacheSize; negative
	// disables the cache.
	VersionCacheSize int64
	// Version is reported to the cluster (strata status).
	Version string
	// TestClockRate makes the node's lease clock run at this rate of real
	// time (fault tests only; 0 or 1: real time).
	TestClockRate float64

	// RegionMaxSize: a region larger than this (bytes) is split in two
	// (default DefaultRegionMaxSize). splitcheck.go.
	RegionMaxSize int64
	// RegionSplitQPS: a region serving more queries per second than this
	// for two split checks in a row is split by load (default
	// DefaultRegionSplitQPS; negative disables).
	RegionSplitQPS int
	// SplitCheckInterval is how often the split checker looks at the
	// regions this node leads (default 10s; negative disables automatic
	// splits).
	SplitCheckInterval time.Duration
	// SplitTable gives every table regions of its own (a split at each
	// table's first key).
	SplitTable bool
	// DownAfter: the replicas of a node without a heartbeat for this long
	// are replaced on other nodes (default 5 minutes; PD's leader's
	// setting is the one in force).
	DownAfter time.Duration
	// ScheduleLimit bounds the balancing operators in flight per node
	// (replica moves and their snapshots; default 4).
	ScheduleLimit int
	// HibernateRegions: regions without traffic stop ticking
	// (raftstore/hibernate.go).
	HibernateRegions bool
	// MaxMergeRegionSize and MaxMergeRegionKeys: a cold region below both
	// merges into a neighbour (PD's merge checker, raftstore/merge.go;
	// defaults 20 MiB and 200,000 keys; a negative size disables merges).
	// SplitMergeInterval: a region is merged no sooner than this after its
	// range last changed (default 1 hour). PD's leader's settings are the
	// ones in force.
	MaxMergeRegionSize int64
	MaxMergeRegionKeys int64
	SplitMergeInterval time.Duration
}

// DefaultVersionCacheSize is the version cache's default memory: enough
// for sysbench's 4 x 100,000 rows and their index entries (about 180 MiB
// with the cache's overhead per entry).
const DefaultVersionCacheSize = 256 << 20

// Node is a running Strata node.
type Node struct {
	cfg       Config
	log       *slog.Logger
	audit     *audit.Logger // nil without Config.AuditLog
	eng       engine.Engines
	clusterID uint64
	storeID   uint64
	store     *raftstore.Store
	transport *transport.Transport
	pd        *pd.Server
	kv        *kvserver.Server
	locks     *mvcc.LockSet // the store's lock index, fed by the apply path
	client    *client.Client
	router    *client.GRPCRouter
	sql       *sql.Engine

	mysql *server.Server
	redis *resp.Server
	grpc  *grpc.Server
	http  *http.Server
	lns   []net.Listener
	// grpcLn is the gRPC listener, opened before the store so that other
	// nodes can reach this one while it waits for the cluster.
	grpcLn net.Listener
	// sqlLn, respLn and httpLn are the client and HTTP ports, bound with
	// grpcLn before the node joins a cluster (so a port taken by another
	// process fails the start before the cluster records a store that will
	// never serve) and served by listen.
	sqlLn, respLn, httpLn net.Listener

	started   time.Time
	storeInfo *kvpb.Store
	ops       operators    // cluster.go
	split     splitChecker // splitcheck.go
	// pdReady is pd once it exists, for callbacks of the store that may
	// run before (onLeaderChange).
	pdReady atomic.Pointer[pd.Server]
	// storeReady is store once Open returned, for the same callbacks.
	storeReady atomic.Pointer[raftstore.Store]
	hbNow      chan struct{}
	// sleepStats: the last report of each region whose leader hibernates
	// (cluster.go regionStat).
	sleepStats struct {
		sync.Mutex
		m map[uint64]sleepStat
	}
	// reports: what the heartbeats reported of each region (report.go).
	reports regionReports
	stop    chan struct{}
	// grpcServerOpts and dialOpts carry the cluster's mutual TLS
	// (security.go).
	grpcServerOpts []grpc.ServerOption
	dialOpts       []grpc.DialOption
	wg             sync.WaitGroup
}

// maxSQLCleanupInterval bounds how long the SQL engine waits between looks
// for dropped data whose range the GC safe point has passed.
const maxSQLCleanupInterval = 5 * time.Second

const (
	firstStoreID  = 1
	dataRegionID  = 2
	systemPeerID  = 1
	dataPeerID    = 2
	heartbeatTick = time.Second
	// clusterWait bounds how long a starting node waits for the cluster
	// (a leader of PD, the regions it needs) before it gives up.
	clusterWait = 2 * time.Minute
)

// Start opens (bootstrapping or joining if new) and starts a node.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	n := &Node{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), hbNow: make(chan struct{}, 1), started: time.Now()}
	if n.log == nil {
		n.log = slog.Default()
	}
	if n.cfg.AdvertiseAddr == "" {
		n.cfg.AdvertiseAddr = n.cfg.GRPCAddr
	}
	if err := n.cfg.checkExposure(); err != nil {
		return nil, err
	}
	var err error
	if n.grpcServerOpts, n.dialOpts, err = n.grpcCredentials(); err != nil {
		return nil, err
	}
	n.grpcServerOpts = append(n.grpcServerOpts, client.WindowServerOptions()...)
	n.dialOpts = append(n.dialOpts, client.WindowDialOptions()...)
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
	eng, err := engine.OpenEngines(n.cfg.DataDir, engine.Options{InMemory: n.cfg.InMemory, CacheBytes: n.cfg.CacheBytes})
	if err != nil {
		if isLocked(err) {
			return fmt.Errorf("data directory %s is in use by another strata process", n.cfg.DataDir)
		}
		return err
	}
	n.eng = eng
	if n.cfg.GRPCAddr != "" {
		// Listen before anything waits for the cluster: the other nodes
		// must reach this one to elect leaders and send it data.
		ln, err := net.Listen("tcp", n.cfg.GRPCAddr)
		if err != nil {
			return fmt.Errorf("node: grpc listen: %w", err)
		}
		n.grpcLn = ln
		n.lns = append(n.lns, ln)
		if n.cfg.AdvertiseAddr == n.cfg.GRPCAddr {
			n.cfg.AdvertiseAddr = ln.Addr().String()
		}
	}
	for _, b := range []struct {
		addr, what string
		ln         *net.Listener
	}{{n.cfg.SQLAddr, "mysql", &n.sqlLn}, {n.cfg.RESPAddr, "redis", &n.respLn}, {n.cfg.HTTPAddr, "http", &n.httpLn}} {
		if b.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			return fmt.Errorf("node: %s listen: %w", b.what, err)
		}
		*b.ln = ln
	}
	n.storeInfo = n.describeStore()
	if err := n.identify(ctx); err != nil { // cluster.go
		return err
	}
	n.storeInfo.Id = n.storeID
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
	// Pessimistic locks live in the leaders' memory (mvcc.PessimisticLocks);
	// a replica that stops leading drops its region's (onLeaderChange).
	locks.SetPessimisticLocks(mvcc.NewPessimisticLocks(0))
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
	registerKVEngineMetrics(eng.KV)
	resolver := &storeResolver{}
	n.transport = transport.New(n.clusterID, n.storeID, resolver, n.log, n.dialOpts...)
	store, err := raftstore.Open(eng, raftstore.Config{StoreID: n.storeID, Logger: n.log,
		Observer: storeObserver{locks}, Transport: n.transport, OnLeaderChange: n.onLeaderChange,
		OnMergeCommitted: n.onMergeCommitted,
		ClockRate:        n.cfg.TestClockRate, Hibernate: n.cfg.HibernateRegions,
		AlwaysAwake: func(id uint64) bool { return id == pd.SystemRegionID }})
	if err != nil {
		return err
	}
	n.store = store
	n.storeReady.Store(store)
	n.transport.SetStore(store)
	n.transport.SetSplitter(n.splitForPeer) // admin.go
	n.pd = pd.New(store, pd.Config{Join: n.cfg.Join, Logger: n.log, DialOptions: n.dialOpts,
		Schedule: pd.ScheduleConfig{DownAfter: n.cfg.DownAfter, StoreLimit: n.cfg.ScheduleLimit}, Merge: n.mergeConfig()})
	n.pdReady.Store(n.pd)
	resolver.pd.Store(n.pd)
	n.kv = kvserver.New(store, locks, n.pd.NextTimestampAnywhere)
	// Lock waiters ask the cluster's deadlock detector, which PD's leader
	// keeps (pd/deadlock.go).
	n.kv.SetDeadlockDetector(n.pd)
	if n.grpcLn != nil {
		n.grpc = grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20)}, n.grpcServerOpts...)...)
		kvpb.RegisterKvServer(n.grpc, n.kv)
		kvpb.RegisterPDServer(n.grpc, n.pd)
		kvpb.RegisterDeadlockDetectorServer(n.grpc, n.pd.DeadlockService())
		kvpb.RegisterRaftServer(n.grpc, n.transport)
		go n.grpc.Serve(n.grpcLn)
	}
	n.wg.Add(1)
	go n.heartbeatLoop() // cluster.go

	localPD := client.LocalPD(n.pd)
	router := client.NewGRPCRouter(localPD, n.dialOpts...)
	router.SetLocal(n.storeID, client.LocalKv(n.kv))
	n.router = router
	n.client = client.New(localPD, router, client.Options{})
	if err := n.waitCluster(ctx); err != nil { // cluster.go
		return err
	}
	// The SQL engine destroys dropped tables' data once PD's safe point
	// passes the drop; it looks as often as the safe point moves, at
	// least every few seconds. It is named after the store, so that a
	// restart after a crash takes its old schema lease over instead of
	// leaving DDL to wait for that lease to expire.
	if n.cfg.AuditLog != "" && n.audit == nil {
		n.audit = audit.Open(audit.Config{Path: n.cfg.AuditLog, MaxSizeMB: n.cfg.AuditLogMaxSizeMB, MaxBackups: n.cfg.AuditLogMaxBackups})
	}
	sqlOpts := sql.Options{SafePoint: pdSafePoint{n.pd}, Cluster: n.clusterInfo, Regions: regionAdmin{n}, ID: fmt.Sprintf("store-%d", n.storeID),
		Addr: n.cfg.SQLAddr, Audit: n.audit}
	if n.cfg.DataDir != "" {
		// Statements past their memory quota spill here.
		sqlOpts.TmpDir = filepath.Join(n.cfg.DataDir, "tmp")
	}
	if iv := n.cfg.GCInterval; iv > 0 {
		sqlOpts.CleanupInterval = min(iv, maxSQLCleanupInterval)
	}
	// The SQL engine reads (or creates) the catalog: while the cluster is
	// still settling (a region's leader being elected, PD's leader moving)
	// that can fail; it is retried for as long as the node waits for the
	// cluster.
	deadline := time.Now().Add(clusterWait)
	for {
		n.sql, err = sql.NewEngine(ctx, n.client, sqlOpts)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("node: start SQL engine: %w", err)
		}
		n.log.Info("waiting for the cluster to start the SQL engine", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	if interval := n.cfg.GCInterval; interval >= 0 {
		if interval == 0 {
			interval = defaultGCInterval
		}
		n.wg.Add(1)
		go n.gcLoop(interval) // gc.go
	}
	n.wg.Add(1)
	go n.staleCheckLoop() // stale.go
	if interval := n.cfg.SplitCheckInterval; interval >= 0 {
		if interval == 0 {
			interval = defaultSplitCheckInterval
		}
		n.wg.Add(1)
		go n.splitCheckLoop(interval) // splitcheck.go
	}
	return nil
}

// isLocked reports whether opening an engine failed because another
// process (or this one) holds its lock file.
func isLocked(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) ||
		strings.Contains(err.Error(), "resource temporarily unavailable") || strings.Contains(err.Error(), "lock held")
}

// storeResolver resolves store addresses for the transport through PD's
// store directory (set once PD's server exists).
type storeResolver struct{ pd atomic.Pointer[pd.Server] }

func (r *storeResolver) StoreAddress(ctx context.Context, id uint64) (string, error) {
	p := r.pd.Load()
	if p == nil {
		return "", errors.New("node: starting")
	}
	return p.StoreAddress(ctx, id)
}

func (n *Node) listen() error {
	// One TLS configuration for the client ports (security.go).
	var tlsCfg *tls.Config
	if n.cfg.SQLAddr != "" || n.cfg.RESPAddr != "" || n.httpTLS() {
		var err error
		if tlsCfg, err = n.clientTLS(); err != nil {
			return err
		}
	}
	if n.httpLn != nil {
		ln := n.httpLn
		if n.httpTLS() {
			// Beyond loopback the port speaks only HTTPS, so basic-auth
			// credentials never cross the network in the clear.
			c := tlsCfg.Clone()
			c.NextProtos = []string{"http/1.1"}
			ln = tls.NewListener(ln, c)
		}
		n.lns = append(n.lns, ln)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /{$}", n.handleConsole) // console.go
		mux.HandleFunc("/healthz", n.handleHealth)  // status.go
		mux.HandleFunc("/status", n.handleStatus)
		mux.Handle("/metrics", promhttp.Handler())
		admin := http.NewServeMux()
		n.registerAdmin(admin) // admin.go: /admin/split, /admin/regions
		admin.HandleFunc("/debug/pprof/", pprof.Index)
		admin.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		admin.HandleFunc("/debug/pprof/profile", pprof.Profile)
		admin.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		admin.HandleFunc("/debug/pprof/trace", pprof.Trace)
		// The LSM shape of both engines (levels, files, compactions, write
		// amplification): Pebble's own metrics report.
		admin.HandleFunc("/debug/lsm", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "KV engine (%s/kv)\n%s\n", n.cfg.DataDir, n.eng.KV.Metrics())
			fmt.Fprintf(w, "Raft engine (%s/raft)\n%s\n", n.cfg.DataDir, n.eng.Raft.Metrics())
		})
		guarded := n.requireAdmin(admin) // security.go
		mux.Handle("/admin/", guarded)
		mux.Handle("/debug/", guarded)
		n.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go n.http.Serve(ln)
	}
	if n.sqlLn != nil {
		if err := n.sql.SetRootPassword(context.Background(), n.cfg.RootPassword); err != nil {
			return fmt.Errorf("node: set root's password: %w", err)
		}
		srv, err := server.New(server.Config{
			Addr:                   n.cfg.SQLAddr,
			Listener:               n.sqlLn,
			AllowEmptyRootPassword: true, // from loopback only
			TLS:                    tlsCfg,
			RequireSecureTransport: n.cfg.RequireSecureTransport,
			Audit:                  n.audit,
			LoginFailureDelay:      n.cfg.LoginFailureDelay,
			Logger:                 n.log,
		}, n.sql)
		if err != nil {
			return fmt.Errorf("node: mysql listen: %w", err)
		}
		n.mysql = srv
	}
	// Both client ports are bound before either serves: a node that
	// cannot bind one exits without having answered on the other.
	if n.respLn != nil {
		srv, err := resp.New(resp.Config{
			Addr:              n.cfg.RESPAddr,
			Listener:          n.respLn,
			Password:          n.cfg.RESPPassword,
			TLS:               tlsCfg,
			RequireTLS:        n.cfg.RequireSecureTransport,
			Audit:             n.audit,
			LoginFailureDelay: n.cfg.LoginFailureDelay,
			MaxValueSize:      n.cfg.MaxValueSize,
			Logger:            n.log,
		}, n.client)
		if err != nil {
			return fmt.Errorf("node: redis listen: %w", err)
		}
		n.redis = srv
	}
	if srv := n.mysql; srv != nil {
		go func() {
			if err := srv.Serve(); err != nil {
				n.log.Info("mysql server stopped", "err", err)
			}
		}()
	}
	if srv := n.redis; srv != nil {
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
	} else if n.grpcLn != nil {
		n.grpcLn.Close()
	}
	if n.http != nil {
		n.http.Close()
	}
	// Ports bound by open that no server took over (a start that failed).
	for _, ln := range []net.Listener{n.sqlLn, n.respLn, n.httpLn} {
		if ln != nil {
			ln.Close()
		}
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
	if n.pd != nil {
		n.pd.Close()
	}
	if n.transport != nil {
		n.transport.Close()
	}
	if n.store != nil {
		n.store.Close()
	}
	if n.locks != nil {
		n.locks.VersionCache().Close()
	}
	n.audit.Close()
	if n.eng.KV != nil {
		// Entries applied without fsync are covered by the synced Raft log;
		// flush so a clean restart replays nothing.
		n.eng.KV.Flush()
		return n.eng.Close()
	}
	return nil
}
