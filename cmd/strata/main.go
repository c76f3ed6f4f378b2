// Command strata is the Strata database: one binary for every node.
//
//	strata start [--data-dir DIR] [--join ADDR,...] [--sql-addr ADDR] [--resp-addr ADDR] [--http-addr ADDR] [--grpc-addr ADDR] ...
//	strata demo [--nodes N]
//	strata status [--host ADDR]
//	strata workload ...
//	strata version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/node"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "0.1.0-dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = start(os.Args[2:])
	case "demo":
		err = demo(os.Args[2:])
	case "status":
		err = status(os.Args[2:])
	case "cert":
		err = certCommand(os.Args[2:])
	case "workload":
		err = workloadCommand(os.Args[2:])
	case "node":
		err = nodeCommand(os.Args[2:])
	case "version", "--version", "-v":
		fmt.Println(versionString())
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `Strata: a distributed SQL database speaking the MySQL protocol.

Usage:
  strata start [flags]      start a node: a single-node database with no flags,
                            a node of a cluster with --join
  strata demo [--nodes N]   run a local cluster of N nodes (default 3) in the foreground
  strata status [--host H]  show a cluster's nodes and regions (H: any node's --http-addr;
                            HTTPS beyond loopback: --certs-dir, --ca-cert or --insecure-skip-verify)
  strata node drain|decommission|resume N [--host H]
                            move every replica and leader off node N (decommission:
                            for good), or let it take them again
  strata workload ...       built-in load generator: YCSB and KV over Redis, MySQL or etcd
  strata cert ...           make a cluster CA and node and client certificates (mutual TLS)
  strata version            print the version
  strata help               this text

Run 'strata <command> --help' for a command's flags.
`)
}

func versionString() string {
	commit := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return fmt.Sprintf("strata %s (commit %s, MySQL protocol 8.0.11-strata)", Version, commit)
}

// parseSize reads a byte size: a number with an optional KiB, MiB or GiB
// (or KB, MB, GB, K, M, G: all powers of 1024) suffix.
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return v * mult, nil
}

// minCacheSize is the smallest block cache --cache may ask for, and the
// size a share of RAM falls back to where RAM is unknown is
// fallbackCacheSize.
const (
	minCacheSize      = 8 << 20
	fallbackCacheSize = 256 << 20
)

// parseCacheSize reads --cache: a byte size (parseSize) or a share of ram,
// the machine's memory, as a percentage ("25%") or a fraction (".25").
func parseCacheSize(s string, ram int64) (int64, error) {
	t := strings.TrimSpace(s)
	share := -1.0
	if pct, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil {
			return 0, fmt.Errorf("want a size such as 4GiB or a share of RAM such as 25%%, not %q", s)
		}
		share = v / 100
	} else if strings.Contains(t, ".") {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return 0, fmt.Errorf("want a size such as 4GiB or a share of RAM such as .25, not %q", s)
		}
		share = v
	}
	if share >= 0 {
		if share <= 0 || share > 0.9 {
			return 0, fmt.Errorf("a share of RAM must be above 0 and at most 90%%, not %q", s)
		}
		if ram <= 0 {
			return fallbackCacheSize, nil
		}
		return max(int64(float64(ram)*share), minCacheSize), nil
	}
	n, err := parseSize(t)
	if err != nil || n < minCacheSize {
		return 0, fmt.Errorf("want a size of at least 8MiB such as 4GiB, or a share of RAM such as 25%%, not %q", s)
	}
	return n, nil
}

// versionCacheSize maps the flag (0 disables) to node.Config (0 is the
// default there, negative disables).
func versionCacheSize(flagValue int64) int64 {
	if flagValue <= 0 {
		return -1
	}
	return flagValue
}

func start(args []string) error {
	fs := flag.NewFlagSet("start", flag.ExitOnError)
	dataDir := fs.String("data-dir", "./strata-data", "directory for all persistent data")
	sqlAddr := fs.String("sql-addr", "127.0.0.1:4000", "MySQL protocol listen address")
	respAddr := fs.String("resp-addr", "127.0.0.1:6380", "Redis protocol (RESP2/RESP3) listen address; empty disables")
	respPassword := fs.String("resp-password", os.Getenv("STRATA_RESP_PASSWORD"),
		"password of the Redis default user, given with AUTH (default empty: no AUTH needed); more users with ACL SETUSER")
	maxValueSize := fs.Int("max-value-size", 64<<20, "largest value (bytes) a Redis command may write or send")
	gcInterval := fs.Duration("gc-interval", time.Minute, "how often old MVCC versions are garbage-collected (negative disables, and keeps the data of dropped tables)")
	gcLifeTime := fs.Duration("gc-life-time", 10*time.Minute, "how long old versions are kept: the longest a transaction may run")
	cache := fs.String("cache", "25%", "size of the storage engine's block cache: bytes (with KiB, MiB, GiB) or a share of the machine's RAM (25%, .25)")
	versionCache := fs.Int64("version-cache-size", node.DefaultVersionCacheSize,
		"bytes of memory for the cache of each key's newest version, which answers point reads without the LSM (0 disables)")
	httpAddr := fs.String("http-addr", "127.0.0.1:8080", "HTTP address for /healthz, /metrics and /debug/pprof")
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:20160", "gRPC listen address of the KV, PD and Raft services (other nodes and clients)")
	advertiseAddr := fs.String("advertise-addr", "", "gRPC address other nodes dial to reach this one (default: --grpc-addr)")
	join := fs.String("join", "", "comma-separated --grpc-addr (or --advertise-addr) of nodes of the cluster to join; empty on the first node")
	testClockRate := fs.Float64("test-clock-rate", 1, "fault tests only: run this node's lease clock at this rate of real time")
	replicas := fs.Int("replicas", 3, "replication factor of a new cluster (1..7); set on the node that bootstraps it")
	rootPassword := fs.String("root-password", os.Getenv("STRATA_ROOT_PASSWORD"),
		"password of the root user (default empty: root may log in without a password from loopback only)")
	tlsCert := fs.String("tls-cert", "", "PEM certificate of the MySQL port (default: --certs-dir's node.crt, else a self-signed one generated into the data directory)")
	tlsKey := fs.String("tls-key", "", "PEM private key of --tls-cert")
	tlsCA := fs.String("tls-ca", "", "PEM CA certificate that signs client certificates (REQUIRE X509; default: --certs-dir's ca.crt)")
	certsDir := fs.String("certs-dir", "", "directory of ca.crt, node.crt and node.key (strata cert): mutual TLS between nodes, and the client ports' certificate")
	insecure := fs.Bool("insecure", false, "allow listening beyond loopback without certificates (unencrypted, unauthenticated node-to-node traffic)")
	requireSecure := fs.Bool("require-secure-transport", false, "refuse MySQL logins and Redis connections over plaintext TCP")
	auditLog := fs.String("audit-log", "", "append an audit log (JSON lines: logins and DDL/DCL statements) to this file; empty: none")
	auditMaxSize := fs.Int("audit-log-max-size", 100, "megabytes at which the audit log is rotated")
	auditMaxBackups := fs.Int("audit-log-max-backups", 10, "rotated audit logs kept")
	loginDelay := fs.Duration("login-failure-delay", time.Second, "after 3 failed logins in a row of one user from one address, delay each further attempt of that pair by this much more per failure (at most 5 times it) before checking its password; 0 disables")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	gogc := fs.Int("gogc", defaultGOGC, "Go collector heap growth target in percent (the GOGC environment variable overrides it)")
	memoryLimit := fs.Int64("memory-limit", 0,
		"soft limit in bytes on the Go heap, past which the collector works harder (0: a quarter of RAM, at least 2 GiB and at most half of RAM; negative: none; GOMEMLIMIT overrides it)")
	walProc := fs.Bool("wal-proc", true,
		"run one more Go processor than cores while durable Raft log writes keep a thread blocked (GOMAXPROCS in the environment overrides it)")
	regionMaxSize := fs.String("region-max-size", "96MiB", "a region larger than this is split in two (bytes, or with KiB, MiB, GiB)")
	regionSplitQPS := fs.Int("region-split-qps", node.DefaultRegionSplitQPS, "a region serving more queries per second than this is split by load (negative disables)")
	splitCheckInterval := fs.Duration("split-check-interval", 10*time.Second, "how often regions are checked for a split (negative disables automatic splits)")
	splitTable := fs.Bool("split-table", false, "give every table regions of its own (split at each table's first key)")
	downAfter := fs.Duration("down-after", 5*time.Minute, "a node without a heartbeat for this long has its replicas replaced on other nodes")
	scheduleLimit := fs.Int("schedule-limit", 4, "balancing operators (replica moves) in flight per node")
	maxMergeSize := fs.String("max-merge-region-size", "20MiB", "a cold region smaller than this (and than --max-merge-region-keys) merges into a neighbour (bytes, or with KiB, MiB, GiB; 0 disables merges)")
	maxMergeKeys := fs.Int64("max-merge-region-keys", 200000, "a cold region with fewer keys than this (and smaller than --max-merge-region-size) merges into a neighbour")
	splitMergeInterval := fs.Duration("split-merge-interval", time.Hour, "a region merges no sooner than this after its range last changed (a split, a merge)")
	hibernate := fs.Bool("hibernate-regions", true, "regions without traffic stop ticking and heartbeating until a request or message wakes them")
	mutexProfile := fs.Int("mutex-profile-fraction", 0, "sample 1 in this many mutex contention events for /debug/pprof/mutex (0: off)")
	blockProfile := fs.Duration("block-profile-rate", 0, "sample blocking events for /debug/pprof/block, about one per this much time blocked (0: off; 1ns: every event)")
	fs.Parse(args)
	runtime.SetMutexProfileFraction(*mutexProfile)
	if *blockProfile > 0 {
		runtime.SetBlockProfileRate(int(*blockProfile))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	maxSize, err := parseSize(*regionMaxSize)
	if err != nil || maxSize < 1024 {
		return fmt.Errorf("--region-max-size: want a size of at least 1KiB such as 96MiB, not %q", *regionMaxSize)
	}
	cacheBytes, err := parseCacheSize(*cache, physicalMemory())
	if err != nil {
		return fmt.Errorf("--cache: %w", err)
	}
	mergeSize, err := parseSize(*maxMergeSize)
	if err != nil {
		return fmt.Errorf("--max-merge-region-size: want a size such as 20MiB (0 disables merges), not %q", *maxMergeSize)
	}
	if mergeSize == 0 {
		mergeSize = -1
	}
	if *maxMergeKeys < 1 {
		return fmt.Errorf("--max-merge-region-keys must be at least 1, not %d", *maxMergeKeys)
	}
	if *splitMergeInterval < time.Second {
		return fmt.Errorf("--split-merge-interval must be at least 1s, not %v", *splitMergeInterval)
	}
	if *downAfter < time.Second {
		return fmt.Errorf("--down-after must be at least 1s, not %v", *downAfter)
	}
	if *replicas < 1 || *replicas > 7 {
		return fmt.Errorf("--replicas must be between 1 and 7, not %d", *replicas)
	}
	joinAddrs, err := parseJoin(*join)
	if err != nil {
		return err
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("bad --log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	if err := configureGC(logger, *gogc, *memoryLimit); err != nil {
		return err
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	begin := time.Now()
	n, err := node.Start(ctx, node.Config{
		DataDir:                *dataDir,
		SQLAddr:                *sqlAddr,
		RESPAddr:               *respAddr,
		RESPPassword:           *respPassword,
		MaxValueSize:           *maxValueSize,
		GCInterval:             *gcInterval,
		GCLifeTime:             *gcLifeTime,
		CacheBytes:             cacheBytes,
		VersionCacheSize:       versionCacheSize(*versionCache),
		HTTPAddr:               *httpAddr,
		GRPCAddr:               *grpcAddr,
		AdvertiseAddr:          *advertiseAddr,
		Join:                   joinAddrs,
		Replicas:               *replicas,
		RootPassword:           *rootPassword,
		TLSCert:                *tlsCert,
		TLSKey:                 *tlsKey,
		TLSCA:                  *tlsCA,
		CertsDir:               *certsDir,
		Insecure:               *insecure,
		RequireSecureTransport: *requireSecure,
		AuditLog:               *auditLog,
		AuditLogMaxSizeMB:      *auditMaxSize,
		AuditLogMaxBackups:     *auditMaxBackups,
		LoginFailureDelay:      *loginDelay,
		Logger:                 logger,
		Version:                Version,
		TestClockRate:          *testClockRate,

		RegionMaxSize:      maxSize,
		RegionSplitQPS:     *regionSplitQPS,
		SplitCheckInterval: *splitCheckInterval,
		SplitTable:         *splitTable,
		DownAfter:          *downAfter,
		ScheduleLimit:      *scheduleLimit,
		HibernateRegions:   *hibernate,
		MaxMergeRegionSize: mergeSize,
		MaxMergeRegionKeys: *maxMergeKeys,
		SplitMergeInterval: *splitMergeInterval,
	})
	if err != nil {
		return err
	}
	if *walProc {
		go walProcs(ctx, logger, engine.WALWriteTime)
	}
	logger.Info("strata started", "version", Version, "data-dir", *dataDir, "sql-addr", *sqlAddr,
		"resp-addr", *respAddr, "http-addr", *httpAddr, "grpc-addr", *grpcAddr, "startup", time.Since(begin).Round(time.Millisecond))
	<-ctx.Done()
	logger.Info("shutting down")
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		logger.Info("stopped cleanly")
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("shutdown did not finish within 30s")
	}
}
