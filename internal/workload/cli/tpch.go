package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/internal/workload/tpch"
)

const tpchUsage = `Usage:
  strata workload init  tpch --scale-factor N [flags]   create the database and load scale factor N
  strata workload run   tpch --scale-factor N [flags]   run the 22 queries, printing each one's time
  strata workload check tpch --scale-factor N [flags]   check row counts and answers (--against: another server's)

Examples:
  strata workload init tpch --scale-factor 1 --addr 127.0.0.1:4000 --drop
  strata workload run tpch --scale-factor 1 --queries 1,6,14 --repeats 3
  strata workload check tpch --scale-factor 1 --addr 127.0.0.1:4000 --against 127.0.0.1:3307

The data is generated from --seed (the same for every load unless changed):
the same scale factor and seed give the same rows on every server. run
prints a line per query execution and, for scripts,
  _query q=N seconds=X rows=N
  _summary workload=tpch sf=N queries=N errors=N seconds=X
check compares row counts and the answers of Q1, Q4, Q6, Q12 and Q13 with
values computed from the generator, and with --against every answer with
the other server's (numbers rounded to hundredths).

Flags:
`

// tpchMain runs `strata workload <command> tpch ...`.
func tpchMain(ctx context.Context, command string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tpch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := tpch.Config{}
	var queries, against, againstUser, againstPassword string
	var repeats int
	var initFirst, drop bool
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:4000", "host:port of the MySQL-protocol server")
	fs.StringVar(&cfg.User, "user", "root", "user name")
	fs.StringVar(&cfg.Password, "password", "", "password")
	fs.StringVar(&cfg.Database, "database", "tpch", "database holding the tables")
	fs.Float64Var(&cfg.ScaleFactor, "scale-factor", 1, "scale factor: 1 is about 1 GB of data (8.7 million rows); fractions load less")
	fs.Uint64Var(&cfg.Seed, "seed", tpch.DefaultSeed, "random seed of the data")
	fs.IntVar(&cfg.Threads, "threads", 4, "init: concurrent loaders")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "timeout of connecting")
	fs.DurationVar(&cfg.QueryTimeout, "query-timeout", 0, "bound on each query (0: none)")
	fs.StringVar(&queries, "queries", "", "run, check --against: the queries to run, e.g. 1,3,5-7 (default all 22)")
	fs.IntVar(&repeats, "repeats", 1, "run: executions of each query")
	fs.BoolVar(&initFirst, "init", false, "run: load first")
	fs.BoolVar(&drop, "drop", false, "with init: drop the database first")
	fs.StringVar(&against, "against", "", "check: host:port of a second server loaded with the same data, to compare every answer with")
	fs.StringVar(&againstUser, "against-user", "", "check: user on the --against server (default --user)")
	fs.StringVar(&againstPassword, "against-password", "", "check: password on the --against server (default --password)")
	if err := parseSQLWorkloadFlags(fs, args, tpchUsage, "tpch", command, stderr); err != nil {
		return err
	}
	if cfg.ScaleFactor < 0.01 || cfg.ScaleFactor > 1000 {
		// Below 0.01 PARTSUPP's supplier formula repeats suppliers of a part.
		return fmt.Errorf("--scale-factor must be from 0.01 to 1000")
	}
	if cfg.Threads < 1 {
		return fmt.Errorf("--threads must be at least 1")
	}
	if repeats < 1 {
		return fmt.Errorf("--repeats must be at least 1")
	}
	qs, err := parseQueries(queries)
	if err != nil {
		return err
	}
	if command == "init" || initFirst {
		if err := tpch.Init(ctx, cfg, drop, stderr); err != nil {
			return err
		}
	} else if drop {
		return fmt.Errorf("--drop drops the database before loading: use it with init or run --init")
	}
	switch command {
	case "init":
		return nil
	case "check":
		var other *tpch.Config
		if against != "" {
			o := cfg
			o.Addr = against
			if againstUser != "" {
				o.User = againstUser
			}
			if againstPassword != "" {
				o.Password = againstPassword
			}
			other = &o
		}
		return tpch.Check(ctx, cfg, other, qs, stdout)
	}
	_, err = tpch.Run(ctx, cfg, qs, repeats, stdout)
	return err
}

// parseQueries reads a list like "1,3,5-7".
func parseQueries(s string) ([]int, error) {
	var qs []int
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 1 || b > tpch.NumQueries || a > b {
			return nil, fmt.Errorf("--queries: %q is not a query number or range within 1-%d", part, tpch.NumQueries)
		}
		for q := a; q <= b; q++ {
			qs = append(qs, q)
		}
	}
	return qs, nil
}
