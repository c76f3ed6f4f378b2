// Command strata-chaos runs Strata's fault-injection tests (package
// test/chaos): real strata processes, a workload, a seeded schedule of
// faults, and checkers over the recorded history.
//
//	strata-chaos run --workload list-append --nemesis kill,pause --nodes 1 --seed 7 --time 60s
//	strata-chaos check --workload list-append runs/<run>/history.jsonl
//
// Exit status: 0 valid, 1 an anomaly was found, 2 unknown (the run could not
// decide, or could not run at all), 3 a usage error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/strata-db/strata/test/chaos"
	"github.com/strata-db/strata/test/chaos/checker"
	"github.com/strata-db/strata/test/chaos/history"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(3)
	}
	switch os.Args[1] {
	case "run":
		os.Exit(runCmd(os.Args[2:]))
	case "check":
		os.Exit(checkCmd(os.Args[2:]))
	case "table":
		os.Exit(tableCmd(os.Args[2:]))
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "strata-chaos: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(3)
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, `strata-chaos: Jepsen-style fault tests of Strata.

  strata-chaos run [flags]                      one run; 'strata-chaos run -h' lists the flags
  strata-chaos check --workload W HISTORY       check a recorded history.jsonl again
  strata-chaos table RUNDIR...                  summary table of runs (from their results.json)

Workloads: %s
Nemeses:   mixed, none, %s
Exit status: 0 valid, 1 anomaly, 2 unknown, 3 usage.
`, strings.Join(chaos.WorkloadNames, ", "), strings.Join(chaos.FamilyNames(), ", "))
}

func runCmd(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var o chaos.Options
	nemesis := fs.String("nemesis", "mixed", "comma-separated fault families, or mixed (all that can run here), or none")
	fs.StringVar(&o.Bin, "bin", "", "strata binary (default: build ./cmd/strata into the runs directory)")
	fs.StringVar(&o.Workload, "workload", "list-append", "workload: "+strings.Join(chaos.WorkloadNames, ", "))
	fs.IntVar(&o.Nodes, "nodes", 1, "number of strata processes (more than 1 needs the cluster: start --join)")
	fs.Int64Var(&o.Seed, "seed", time.Now().UnixNano()%1000000, "seed of the fault schedule and the operations")
	fs.DurationVar(&o.Time, "time", 60*time.Second, "how long the workload runs under faults")
	fs.DurationVar(&o.Interval, "interval", 8*time.Second, "mean quiet time between faults")
	fs.DurationVar(&o.FaultTime, "fault-time", 6*time.Second, "mean time a fault is held")
	fs.DurationVar(&o.Recovery, "recovery", 10*time.Second, "workload time after the final heal")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "client workers (default 2 per node, at least 6)")
	fs.Float64Var(&o.Rate, "rate", 150, "target operations per second, all workers together")
	fs.DurationVar(&o.OpTimeout, "op-timeout", 5*time.Second, "a client gives up on an operation after this (outcome unknown)")
	fs.StringVar(&o.Net, "net", "auto", "auto (network namespaces when root, else loopback), netns or loopback")
	fs.StringVar(&o.RunsDir, "runs", "runs", "directory that receives one directory per run")
	fs.BoolVar(&o.KeepData, "keep-data", false, "keep the nodes' data directories of a valid run (an invalid one always keeps them)")
	if err := fs.Parse(args); err != nil {
		return 3
	}
	o.Nemesis = strings.Split(*nemesis, ",")
	if o.Bin == "" {
		bin, err := buildStrata(o.RunsDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "strata-chaos:", err)
			return 2
		}
		o.Bin = bin
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata-chaos:", err)
		if res != nil {
			fmt.Fprintf(os.Stderr, "run directory: %s\n", res.Dir)
		}
		return 2
	}
	return res.ExitCode()
}

// buildStrata builds ./cmd/strata of the module in the working directory.
func buildStrata(runs string) (string, error) {
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return "", err
	}
	out, err := filepath.Abs(filepath.Join(runs, "strata"))
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/strata")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/strata (run from the repository, or pass --bin): %v", err)
	}
	return out, nil
}

func checkCmd(args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	workload := fs.String("workload", "list-append", "which checker: "+strings.Join(chaos.WorkloadNames, ", "))
	model := fs.String("model", checker.SnapshotIsolation, "list-append: snapshot-isolation or serializable")
	accounts := fs.Int("accounts", 8, "bank: number of accounts")
	total := fs.Int64("total", 800, "bank: sum of the balances")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: strata-chaos check [--workload W] HISTORY.jsonl")
		return 3
	}
	path := fs.Arg(0)
	ops, err := history.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "strata-chaos:", err)
		return 3
	}
	var rs []*checker.Result
	switch *workload {
	case "list-append":
		ours := checker.CheckListAppend(ops, checker.ListAppendOptions{Model: *model})
		rs = []*checker.Result{ours, checker.CheckAdya(path, *model)}
	case "bank":
		rs = []*checker.Result{checker.CheckBank(ops, checker.BankOptions{Accounts: *accounts, Total: *total})}
	case "register":
		rs = []*checker.Result{checker.CheckRegister(ops, checker.RegisterOptions{VisualizePath: filepath.Join(filepath.Dir(path), "register.html")})}
	case "set":
		rs = []*checker.Result{checker.CheckSet(ops)}
	case "long-fork":
		rs = []*checker.Result{checker.CheckLongFork(ops)}
	case "monotonic":
		rs = []*checker.Result{checker.CheckMonotonic(ops)}
	default:
		fmt.Fprintf(os.Stderr, "unknown workload %q\n", *workload)
		return 3
	}
	var vs []checker.Verdict
	for _, r := range rs {
		fmt.Println(r.Summary())
		for _, a := range r.Anomalies {
			fmt.Printf("  %s: %s\n", a.Type, a.Explanation)
		}
		for _, n := range r.Notes {
			fmt.Printf("  note: %s\n", n)
		}
		vs = append(vs, r.Verdict)
	}
	switch checker.Worst(vs...) {
	case checker.Valid:
		return 0
	case checker.Invalid:
		return 1
	}
	return 2
}

// tableCmd prints one row per workload x nemesis over the given run
// directories: runs, verdicts, faults injected, anomalies, lost writes and
// the longest unavailability (no ok operation) seen in any of them.
func tableCmd(args []string) int {
	type row struct {
		runs, valid, invalid, unknown, faults, anomalies, lost int
		gap, recovery                                          time.Duration
	}
	rows := map[[2]string]*row{}
	for _, dir := range args {
		b, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			continue
		}
		var res chaos.Result
		if json.Unmarshal(b, &res) != nil {
			continue
		}
		tb, _ := os.ReadFile(filepath.Join(dir, "test.json"))
		var test struct {
			Workload string   `json:"workload"`
			Nemesis  []string `json:"nemesis"`
		}
		json.Unmarshal(tb, &test)
		k := [2]string{test.Workload, strings.Join(test.Nemesis, ",")}
		r := rows[k]
		if r == nil {
			r = &row{}
			rows[k] = r
		}
		r.runs++
		switch res.Verdict {
		case checker.Valid:
			r.valid++
		case checker.Invalid:
			r.invalid++
		default:
			r.unknown++
		}
		for _, n := range res.Faults {
			r.faults += n
		}
		for _, c := range res.Checkers {
			if c.Verdict == checker.Invalid {
				for _, n := range c.Found {
					r.anomalies += n
				}
			}
		}
		r.lost += res.LostWrites
		if d, err := time.ParseDuration(res.LongestGap); err == nil && d > r.gap {
			r.gap = d
		}
		for _, v := range res.Recovery {
			if d, err := time.ParseDuration(v); err == nil && d > r.recovery {
				r.recovery = d
			}
		}
	}
	var keys [][2]string
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	fmt.Println("| workload | nemesis | runs | valid | anomalous | unknown | faults injected | anomalies | lost writes | longest unavailability | longest recovery after heal |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	bad := false
	for _, k := range keys {
		r := rows[k]
		fmt.Printf("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %v | %v |\n", k[0], k[1], r.runs, r.valid, r.invalid, r.unknown,
			r.faults, r.anomalies, r.lost, r.gap.Round(time.Millisecond), r.recovery.Round(time.Millisecond))
		bad = bad || r.invalid > 0 || r.lost > 0
	}
	if bad {
		return 1
	}
	return 0
}
