package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/strata-db/strata/internal/workload/tpcc"
)

const tpccUsage = `Usage:
  strata workload init  tpcc --warehouses N [flags]   create the database and load N warehouses
  strata workload run   tpcc --warehouses N [flags]   run the five transactions; --init loads first
  strata workload check tpcc [flags]                  check the consistency conditions (clause 3.3.2)

Example:
  strata workload run tpcc --warehouses 4 --init --threads 16 --duration 5m --addr 127.0.0.1:4000

The run prints per transaction type, every display interval, the throughput and
latencies, then the final table, tpmC (New-Orders per minute), the efficiency
(tpmC against 12.86 per warehouse, the most the spec's keying and think times
allow; --wait turns those on) and a line for scripts:
  _summary workload=tpcc warehouses=N threads=N tpmC=X efficiency=X retries=N ...

Flags:
`

// tpccMain runs `strata workload <command> tpcc ...`.
func tpccMain(ctx context.Context, command string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tpcc", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := tpcc.Config{}
	var duration, display time.Duration
	var initFirst, drop bool
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:4000", "host:port of the MySQL-protocol server")
	fs.StringVar(&cfg.User, "user", "root", "user name")
	fs.StringVar(&cfg.Password, "password", "", "password")
	fs.StringVar(&cfg.Database, "database", "tpcc", "database holding the tables")
	fs.IntVar(&cfg.Warehouses, "warehouses", 1, "warehouses to load (init) or to drive (run)")
	fs.IntVar(&cfg.Threads, "threads", 0, "terminals (run; default 10 per warehouse) or loaders (init; default 4)")
	fs.DurationVar(&duration, "duration", 0, "run for this long (0: until interrupted)")
	fs.DurationVar(&display, "display-every", 10*time.Second, "interval of the periodic report")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "timeout of connecting")
	fs.BoolVar(&cfg.Wait, "wait", false, "run with the spec's keying and think times")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "random seed; 0 takes one from the clock")
	fs.BoolVar(&initFirst, "init", false, "run: load the warehouses first")
	fs.BoolVar(&drop, "drop", false, "with init: drop the database first")
	fs.IntVar(&cfg.Scale, "scale", 1, "divide the item, customer and order counts by this (tests only: the data is no longer TPC-C's)")
	if err := parseSQLWorkloadFlags(fs, args, tpccUsage, "tpcc", command, stderr); err != nil {
		return err
	}
	if cfg.Warehouses < 1 {
		return fmt.Errorf("--warehouses must be at least 1")
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if display <= 0 {
		return fmt.Errorf("--display-every must be positive")
	}
	if command == "init" || initFirst {
		lcfg := cfg
		if lcfg.Threads <= 0 {
			lcfg.Threads = 4
		}
		if err := tpcc.Init(ctx, lcfg, drop, stderr); err != nil {
			return err
		}
	} else if drop {
		return fmt.Errorf("--drop drops the database before loading: use it with init or run --init")
	}
	switch command {
	case "init":
		return nil
	case "check":
		return tpcc.Check(ctx, cfg, stdout)
	}
	if cfg.Threads <= 0 {
		cfg.Threads = 10 * cfg.Warehouses
	}
	res, err := tpcc.Run(ctx, cfg, duration, display, stdout)
	if err != nil {
		return err
	}
	if res.NewOrders == 0 && res.Errors > 0 {
		return fmt.Errorf("%w (%d errors)", ErrAllFailed, res.Errors)
	}
	return nil
}

// parseSQLWorkloadFlags parses the flags of `strata workload COMMAND
// NAME` (tpcc, tpch): on an error or -h it prints the usage text and the
// flags to stderr and returns ErrUsage; so it does for a stray argument.
func parseSQLWorkloadFlags(fs *flag.FlagSet, args []string, usage, name, command string, stderr io.Writer) error {
	if err := fs.Parse(args); err != nil {
		fmt.Fprint(stderr, usage)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "\nstrata workload %s %s: %v\n", command, name, err)
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "strata workload %s %s: unexpected argument %q\n", command, name, fs.Arg(0))
		return ErrUsage
	}
	return nil
}
