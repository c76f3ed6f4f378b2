// Package cli is the command line of `strata workload`: it parses the
// subcommand and flags, opens the driver, and runs the load and measured
// phases of package workload. cmd/strata only hands it os.Args.
//
//	strata workload init ycsb|kv [flags]    create the table (sql) and load the records
//	strata workload run  ycsb|kv [flags]    run the workload (--init loads first)
//	strata workload init|run|check tpcc [flags]   TPC-C (tpcc.go)
//	strata workload init|run|check tpch [flags]   TPC-H (tpch.go)
//
// Errors are returned with a message for the user; Main returns ErrUsage
// (already explained on stderr) for malformed command lines.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/strata-db/strata/internal/workload"
	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/kv"
	"github.com/strata-db/strata/internal/workload/ycsb"
)

// ErrUsage means the command line was wrong; the usage has been printed.
var ErrUsage = errors.New("usage error")

// ErrAllFailed means a run made no successful operation but had errors.
var ErrAllFailed = errors.New("every operation failed")

const usageText = `Usage:
  strata workload init ycsb|kv [flags]   create the table (sql driver) and load the records
  strata workload run  ycsb|kv [flags]   run the workload; --init loads first
  strata workload init|run|check tpcc    TPC-C over the MySQL protocol ('strata workload run tpcc -h')
  strata workload init|run|check tpch    TPC-H's 22 queries over the MySQL protocol ('strata workload run tpch -h')

Examples:
  strata workload run ycsb --workload a --init --records 100000 --duration 60s --threads 64
  strata workload run ycsb --workload c --driver etcd --endpoints 127.0.0.1:2379 --init
  strata workload run ycsb --workload e --driver sql --addr 127.0.0.1:4000 --init
  strata workload run kv --read-percent 95 --driver resp --addr 127.0.0.1:6379 --init
  strata workload run ycsb --workload a --driver strata --addr 127.0.0.1:20160 --init

Every display interval a row per operation type: errors so far, throughput over
the interval and since the start, interval avg/p95/p99/max latency. At the end a
table of the whole run, the error messages, and one line for scripts:
  _summary workload=ycsb-a driver=resp ... ops=N errors=N ops/sec=X avg_ms=X p95_ms=X p99_ms=X ...
The exit status is 1 when every operation failed.

Flags:
`

// Invocation is a parsed command line.
type Invocation struct {
	Command  string // "init" or "run"
	Workload string // "ycsb" or "kv"
	Init     bool   // load before running (always for init)
	Drop     bool   // delete the workload's records first
	Driver   driver.Config
	Options  workload.Options
	YCSB     ycsb.Config
	KV       kv.Config
}

// Parse reads `strata workload` arguments (after "workload"). Flag errors
// are printed to stderr with the usage.
func Parse(args []string, stderr io.Writer) (*Invocation, error) {
	usage := func(fs *flag.FlagSet) {
		fmt.Fprint(stderr, usageText)
		if fs != nil {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fs, _ := newFlagSet(&Invocation{})
		usage(fs)
		return nil, ErrUsage
	}
	inv := &Invocation{Command: args[0]}
	if inv.Command != "init" && inv.Command != "run" {
		fmt.Fprintf(stderr, "strata workload: unknown command %q (want init or run)\n\n", inv.Command)
		usage(nil)
		return nil, ErrUsage
	}
	if len(args) < 2 || strings.HasPrefix(args[1], "-") {
		fmt.Fprintf(stderr, "strata workload %s: name the workload: ycsb or kv\n\n", inv.Command)
		usage(nil)
		return nil, ErrUsage
	}
	inv.Workload = args[1]
	if inv.Workload != "ycsb" && inv.Workload != "kv" {
		fmt.Fprintf(stderr, "strata workload %s: unknown workload %q (want ycsb or kv)\n\n", inv.Command, inv.Workload)
		usage(nil)
		return nil, ErrUsage
	}
	fs, v := newFlagSet(inv)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs)
			return nil, ErrUsage
		}
		fmt.Fprintf(stderr, "strata workload %s %s: %v\n", inv.Command, inv.Workload, err)
		fmt.Fprintf(stderr, "run 'strata workload help' for the flags\n")
		return nil, ErrUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata workload %s %s: unexpected argument %q\n", inv.Command, inv.Workload, fs.Arg(0))
		return nil, ErrUsage
	}
	if err := inv.finish(v); err != nil {
		return nil, err
	}
	return inv, nil
}

// flagValues holds flags that need post-processing.
type flagValues struct {
	endpoints string
	database  string
	addr      string
	dist      string
	conns     int
}

func newFlagSet(inv *Invocation) (*flag.FlagSet, *flagValues) {
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	v := &flagValues{}
	d, o := &inv.Driver, &inv.Options

	// Where and how to connect.
	fs.StringVar(&d.Driver, "driver", "resp", "client protocol: resp (Redis), sql (MySQL), etcd, or strata (Strata's Go client: each request to its region's leader over gRPC)")
	fs.StringVar(&v.addr, "addr", "", "host:port of the server (default: 127.0.0.1:6380 for resp, 127.0.0.1:4000 for sql, 127.0.0.1:2379 for etcd, 127.0.0.1:20160 for strata: a node's --grpc-addr); resp: several, comma-separated, for the nodes of one cluster, visited in turn; strata: several to connect through whichever answers")
	fs.StringVar(&v.endpoints, "endpoints", "", "etcd endpoints (strata: nodes' gRPC addresses), comma-separated (default --addr)")
	fs.StringVar(&d.User, "user", "", "user name (sql: default root; resp: ACL user for AUTH; etcd: etcd user)")
	fs.StringVar(&d.Password, "password", "", "password (sql, resp AUTH, etcd)")
	fs.StringVar(&v.database, "database", "", "sql database holding the table (default: ycsb or kv)")
	fs.StringVar(&d.RESPRecords, "resp-records", "value", "resp record layout: value (one string per record, as etcd) or hash (HSET/HGETALL)")
	fs.IntVar(&v.conns, "conns", 0, "connections: for resp and sql the pool size (default one per thread), for etcd the number of gRPC clients (default one per 16 threads); strata: one client, its connections one per node")
	fs.DurationVar(&d.Timeout, "timeout", 10*time.Second, "timeout of each operation and of connecting")

	// The run.
	fs.IntVar(&o.Threads, "threads", 8, "concurrent workers (each has one operation in flight)")
	fs.DurationVar(&o.Duration, "duration", 0, "run for this long (0: until --operations or interrupted)")
	fs.Uint64Var(&o.Operations, "operations", 0, "stop after this many operations (0: no limit)")
	fs.DurationVar(&o.DisplayEvery, "display-every", time.Second, "interval of the periodic report and the load progress line")
	fs.Uint64Var(&o.Seed, "seed", 0, "random seed; 0 takes one from the clock (the seed is printed in the summary)")
	fs.BoolVar(&inv.Init, "init", false, "run: load the records before running")
	fs.BoolVar(&inv.Drop, "drop", false, "with init: delete the workload's existing records (sql: drop the table) first")
	fs.IntVar(&o.LoadBatch, "load-batch", 100, "records per insert batch while loading")

	// ycsb
	fs.StringVar(&inv.YCSB.Workload, "workload", "a", "ycsb: core workload a, b, c, d, e or f")
	fs.Uint64Var(&inv.YCSB.Records, "records", 10000, "ycsb: records to load (recordcount)")
	fs.IntVar(&inv.YCSB.Fields, "fields", 10, "ycsb: fields per record (fieldcount)")
	fs.IntVar(&inv.YCSB.FieldLength, "field-length", 100, "ycsb: bytes per field (fieldlength)")
	fs.StringVar(&v.dist, "distribution", "", "request distribution: ycsb uniform, zipfian or latest (default: the workload's: latest for d, zipfian otherwise); kv uniform or zipfian (default uniform)")
	fs.IntVar(&inv.YCSB.MaxScanLength, "max-scan-length", 0, "ycsb: longest scan (default 1000; 100 for workload e)")
	fs.BoolVar(&inv.YCSB.WriteAllFields, "write-all-fields", false, "ycsb: updates write every field (writeallfields)")

	// kv
	fs.IntVar(&inv.KV.ReadPercent, "read-percent", 0, "kv: percentage of reads (95 for KV95)")
	fs.Uint64Var(&inv.KV.Keys, "keys", 100000, "kv: size of the key space, all loaded by init")
	fs.IntVar(&inv.KV.ValueSize, "value-size", 100, "kv: bytes per value")
	return fs, v
}

func (inv *Invocation) finish(v *flagValues) error {
	d, o := &inv.Driver, &inv.Options
	switch d.Driver {
	case "resp", "sql", "etcd", "strata":
	default:
		return fmt.Errorf("unknown --driver %q (want resp, sql, etcd or strata)", d.Driver)
	}
	d.Addr = v.addr
	if d.Addr == "" {
		d.Addr = driver.DefaultAddr(d.Driver)
	}
	if v.endpoints != "" {
		if d.Driver != "etcd" && d.Driver != "strata" {
			return fmt.Errorf("--endpoints is for --driver etcd or strata; use --addr for %s", d.Driver)
		}
		for _, e := range strings.Split(v.endpoints, ",") {
			if e = strings.TrimSpace(e); e != "" {
				d.Endpoints = append(d.Endpoints, e)
			}
		}
	} else if d.Driver == "etcd" || d.Driver == "strata" {
		d.Endpoints = strings.Split(d.Addr, ",")
	}
	if d.RESPRecords != "value" && d.RESPRecords != "hash" {
		return fmt.Errorf("--resp-records must be value or hash, not %q", d.RESPRecords)
	}
	if o.Threads < 1 {
		return fmt.Errorf("--threads must be at least 1")
	}
	if o.DisplayEvery <= 0 {
		return fmt.Errorf("--display-every must be positive")
	}
	if o.Duration < 0 {
		return fmt.Errorf("--duration must not be negative")
	}
	if o.LoadBatch < 1 {
		return fmt.Errorf("--load-batch must be at least 1")
	}
	if v.conns < 0 {
		return fmt.Errorf("--conns must not be negative")
	}
	d.Conns = v.conns
	if d.Conns == 0 {
		if d.Driver == "etcd" {
			d.Conns = (o.Threads + 15) / 16
		} else {
			d.Conns = o.Threads
		}
	}
	if d.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if inv.Command == "init" {
		inv.Init = true
	}
	if inv.Drop && !inv.Init {
		return fmt.Errorf("--drop deletes the records before loading them: use it with init or run --init")
	}
	d.Database = v.database
	if d.Database == "" {
		d.Database = inv.Workload
	}
	switch inv.Workload {
	case "ycsb":
		inv.YCSB.Distribution = v.dist
		inv.YCSB.Operations = o.Operations
		if _, err := ycsb.New(inv.YCSB); err != nil {
			return err
		}
	case "kv":
		inv.KV.Distribution = v.dist
		if _, err := kv.New(inv.KV); err != nil {
			return err
		}
	}
	return nil
}

// scanner is implemented by workloads that scan ranges.
type scanner interface{ NeedsScans() bool }

// Main runs `strata workload` with args (after "workload"). The report goes
// to stdout, progress and error messages to stderr. Cancelling ctx stops a
// run gracefully (the final report is still printed) and interrupts a load.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) >= 2 && args[1] == "tpcc" {
		switch args[0] {
		case "init", "run", "check":
			return tpccMain(ctx, args[0], args[2:], stdout, stderr)
		}
	}
	if len(args) >= 2 && args[1] == "tpch" {
		switch args[0] {
		case "init", "run", "check":
			return tpchMain(ctx, args[0], args[2:], stdout, stderr)
		}
	}
	inv, err := Parse(args, stderr)
	if err != nil {
		return err
	}
	return inv.Execute(ctx, stdout, stderr)
}

// Execute carries out a parsed invocation.
func (inv *Invocation) Execute(ctx context.Context, stdout, stderr io.Writer) error {
	var w workload.Workload
	switch inv.Workload {
	case "ycsb":
		y, err := ycsb.New(inv.YCSB)
		if err != nil {
			return err
		}
		w = y
	case "kv":
		k, err := kv.New(inv.KV)
		if err != nil {
			return err
		}
		w = k
	}
	if s, ok := w.(scanner); ok && s.NeedsScans() && inv.Command == "run" {
		if err := driver.OrderedScans(inv.Driver); err != nil {
			return fmt.Errorf("workload %s scans ranges: %w", w.Name(), err)
		}
	}
	o := inv.Options
	o.Out, o.Log = stdout, stderr
	o.Labels = []string{"driver=" + inv.Driver.Driver, fmt.Sprintf("threads=%d", o.Threads), fmt.Sprintf("seed=%d", o.Seed)}

	openCtx, cancel := context.WithTimeout(ctx, inv.Driver.Timeout)
	store, err := driver.Open(openCtx, inv.Driver, w.Schema())
	cancel()
	if err != nil {
		return err
	}
	defer store.Close()

	if inv.Init {
		if err := store.Init(ctx, inv.Drop); err != nil {
			return err
		}
		begin := time.Now()
		if err := workload.Load(ctx, w, store, o); err != nil {
			return err
		}
		el := time.Since(begin)
		fmt.Fprintf(stderr, "loaded %d records into %s in %s (%.0f records/s)\n",
			w.LoadCount(), w.Schema().Table, el.Round(time.Millisecond), float64(w.LoadCount())/el.Seconds())
	}
	if inv.Command == "init" {
		return nil
	}
	if err := store.Check(ctx); err != nil {
		return fmt.Errorf("%w: load it with 'strata workload init %s' or 'run --init'", err, inv.Workload)
	}
	res := workload.Run(ctx, w, store, o)
	if res.Ops == 0 && res.Errors > 0 {
		return fmt.Errorf("%w (%d errors)", ErrAllFailed, res.Errors)
	}
	return nil
}
