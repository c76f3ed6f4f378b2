// Package chaos is Strata's fault-injection test harness, after Jepsen: it
// starts real strata processes (one, or a cluster), runs a workload against
// them from clients outside the nodes while a nemesis kills, pauses,
// partitions and slows them on a seeded random schedule, heals everything,
// reads the final state through every node, and checks the recorded history
// with the checkers of package checker.
//
// Every run writes one directory: test.json (what ran: seed, nodes,
// workload, faults, binary), history.jsonl (every client operation),
// nemesis.jsonl (the fault schedule, same clock), nodes/<node>.<incarnation>.log
// (every process's output), results.json (each checker's verdict, counts,
// latencies, unavailability windows) and, for the register workload when it
// fails, porcupine's register.html. The verdict is the exit status of
// `strata-chaos run`: 0 valid, 1 an anomaly, 2 unknown (nothing to judge,
// the database never recovered, or a checker gave up). A failing run prints
// its seed and the command that replays the same fault schedule and
// operation sequence.
//
// Files: network.go (loopback or network namespaces, iptables), proxy.go
// (userspace TCP proxy for delay and stall), cluster.go (processes,
// readiness, /status), nemesis.go (fault families and the scheduler),
// workloads.go (bank, register, list-append, set, long-fork, monotonic).
package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-db/strata/test/chaos/checker"
	"github.com/strata-db/strata/test/chaos/history"
)

// Options describe one run.
type Options struct {
	Bin         string        // strata binary
	Workload    string        // one of WorkloadNames
	Nemesis     []string      // family names, "mixed" or "none"
	Nodes       int           // 1, 3 or 5
	Seed        int64         //
	Time        time.Duration // how long the workload runs with faults
	Interval    time.Duration // mean quiet time between faults
	FaultTime   time.Duration // mean time a fault is held
	Recovery    time.Duration // workload time after the final heal
	Concurrency int           // workers (client processes)
	Rate        float64       // target operations per second, all workers together
	OpTimeout   time.Duration // a client gives up on an operation after this (info)
	Net         string        // "auto", "netns" or "loopback"
	RunsDir     string        // parent of the run directory
	Stdout      io.Writer     // progress lines
	// LivenessLimit: no ok operation for this long after the final heal
	// makes the verdict unknown (the database did not recover).
	LivenessLimit time.Duration
	// KeepData keeps the nodes' data directories of a valid run (a run
	// that is not valid always keeps them, for its post-mortem). Each
	// run's directories take hundreds of MB; a soak would fill the disk.
	KeepData bool
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Time == 0 {
		o.Time = 60 * time.Second
	}
	if o.Interval == 0 {
		o.Interval = 8 * time.Second
	}
	if o.FaultTime == 0 {
		o.FaultTime = 6 * time.Second
	}
	if o.Recovery == 0 {
		o.Recovery = 10 * time.Second
	}
	if o.Concurrency == 0 {
		o.Concurrency = 2 * max(o.Nodes, 3)
	}
	if o.Rate == 0 {
		o.Rate = 150
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.Net == "" {
		o.Net = "auto"
	}
	if o.RunsDir == "" {
		o.RunsDir = "runs"
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.LivenessLimit == 0 {
		o.LivenessLimit = max(o.Recovery, 10*time.Second)
	}
}

// ReplayCommand is the command line that runs the same test again.
func (o *Options) ReplayCommand() string {
	return fmt.Sprintf("go run ./cmd/strata-chaos run --workload %s --nemesis %s --nodes %d --seed %d --time %s --interval %s --fault-time %s --recovery %s --concurrency %d --rate %g --net %s",
		o.Workload, strings.Join(o.Nemesis, ","), o.Nodes, o.Seed, o.Time, o.Interval, o.FaultTime, o.Recovery, o.Concurrency, o.Rate, o.Net)
}

// Result is what a run concluded, as written to results.json.
type Result struct {
	Dir      string            `json:"dir"`
	Verdict  checker.Verdict   `json:"verdict"`
	Checkers []*checker.Result `json:"checkers"`
	Network  string            `json:"network"`
	Skipped  []string          `json:"nemeses_skipped,omitempty"`
	Faults   map[string]int    `json:"faults"`
	Ops      map[string]int    `json:"ops"`
	Latency  map[string]string `json:"latency"`
	// LongestGap is the longest time with no ok operation while the
	// workload ran; Recovery is the longest time from a heal to the next
	// ok operation, by nemesis family.
	LongestGap string            `json:"longest_unavailability"`
	Recovery   map[string]string `json:"recovery_after_heal"`
	LostWrites int               `json:"lost_writes"`
	Problems   []string          `json:"problems,omitempty"`
	Replay     string            `json:"replay"`
	Seconds    float64           `json:"seconds"`
	// RecoveryMax is Recovery as durations, for the soak's table.
	RecoveryMax map[string]time.Duration `json:"-"`
}

// ExitCode maps the verdict to the process exit status.
func (r *Result) ExitCode() int {
	switch r.Verdict {
	case checker.Valid:
		return 0
	case checker.Invalid:
		return 1
	}
	return 2
}

// Run runs one test. An error means the run could not be carried out (no
// binary, no cluster); a verdict of unknown with problems means it ran but
// the database did not let the checkers decide.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	began := time.Now()
	wl, err := NewWorkload(o.Workload)
	if err != nil {
		return nil, err
	}
	nemName := strings.Join(o.Nemesis, "+")
	if nemName == "" {
		nemName = "none"
	}
	dir := filepath.Join(o.RunsDir, fmt.Sprintf("%s-%s-%s-n%d-seed%d", began.UTC().Format("20060102T150405"), o.Workload, nemName, o.Nodes, o.Seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	res := &Result{Dir: dir, Verdict: checker.Unknown, Faults: map[string]int{}, Ops: map[string]int{}, Latency: map[string]string{},
		Recovery: map[string]string{}, RecoveryMax: map[string]time.Duration{}, Replay: o.ReplayCommand()}
	var logMu sync.Mutex
	progress, _ := os.Create(filepath.Join(dir, "run.log"))
	defer progress.Close()
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		line := fmt.Sprintf("[%7.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
		io.WriteString(o.Stdout, line)
		io.WriteString(progress, line)
	}
	defer func() {
		res.Seconds = time.Since(began).Seconds()
		writeJSON(filepath.Join(dir, "results.json"), res)
	}()

	var nodeNames []string
	for i := 1; i <= o.Nodes; i++ {
		nodeNames = append(nodeNames, fmt.Sprintf("n%d", i))
	}
	spare := false
	for _, n := range o.Nemesis {
		spare = spare || n == "membership"
	}
	if spare && o.Nodes > 1 {
		nodeNames = append(nodeNames, SpareName(o.Nodes))
	}
	nw, err := NewNetwork(o.Net, nodeNames)
	if err != nil {
		return res, err
	}
	defer nw.Close()
	res.Network = nw.Describe()
	logf("network: %s", res.Network)

	linkFaults := false
	for _, n := range o.Nemesis {
		linkFaults = linkFaults || n == "mixed" || n == "delay" || n == "stall" || n == "reset"
	}
	c, err := NewCluster(ClusterConfig{Bin: o.Bin, Dir: dir, Nodes: o.Nodes, Net: nw, LinkProxies: linkFaults, Spare: spare && o.Nodes > 1, Log: logf})
	if err != nil {
		return res, err
	}
	writeJSON(filepath.Join(dir, "test.json"), testRecord(o, c, nw))
	defer c.Shutdown()
	if err := c.Start(ctx, 90*time.Second); err != nil {
		return res, fmt.Errorf("starting %d node(s): %w", o.Nodes, err)
	}
	logf("%d node(s) ready", o.Nodes)

	if err := setup(ctx, c, wl); err != nil {
		return res, err
	}

	histFile, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return res, err
	}
	defer histFile.Close()
	nemFile, err := os.Create(filepath.Join(dir, "nemesis.jsonl"))
	if err != nil {
		return res, err
	}
	defer nemFile.Close()
	start := time.Now()
	rec := history.NewRecorder(start, histFile)
	nemRec := history.NewRecorder(start, nemFile)

	nm, skipped, err := NewNemesis(c, o.Nemesis, o.Seed, nemRec)
	if err != nil {
		return res, err
	}
	nm.Interval, nm.Duration = o.Interval, o.FaultTime
	res.Skipped = skipped
	for _, s := range skipped {
		logf("nemesis skipped: %s", s)
	}
	var fams []string
	for _, f := range nm.Families {
		fams = append(fams, f.name)
	}
	logf("workload %s, %d workers, nemesis families %v, seed %d", o.Workload, o.Concurrency, fams, o.Seed)

	// Workers run through the fault phase and the recovery phase.
	wctx, stopWorkers := context.WithCancel(ctx)
	gen := &generator{wl: wl, r: rand.New(rand.NewSource(o.Seed))}
	var wg sync.WaitGroup
	for w := 0; w < o.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			worker(wctx, c, wl, gen, rec, w, o)
		}(w)
	}
	nctx, stopNemesis := context.WithTimeout(ctx, o.Time)
	nm.Run(nctx)
	stopNemesis()
	logf("healing")
	if err := HealAll(ctx, c); err != nil {
		res.Problems = append(res.Problems, err.Error())
		logf("%v", err)
	}
	healed := rec.Since(time.Now())
	nemRec.Add(history.Op{Type: history.Info, F: "heal-all", Process: -1})
	select {
	case <-ctx.Done():
	case <-time.After(o.Recovery):
	}
	stopWorkers()
	wg.Wait()

	// Final reads through every node, each retried until it succeeds.
	final := o.Concurrency * 1000
	wl.Final(ctx, c, func(n *Node, f string, value any) {
		cl := wl.NewClient(c, n, 10*time.Second)
		defer cl.Close()
		deadline := time.Now().Add(60 * time.Second)
		for {
			p := final
			final++
			inv := rec.Add(history.Op{Type: history.Invoke, F: f, Process: p, Value: history.Value(value), Node: n.Name})
			typ, out, err := cl.Invoke(ctx, f, value)
			op := history.Op{Type: typ, F: f, Process: p, Value: history.Value(out), Node: n.Name}
			if err != nil {
				op.Error = err.Error()
			}
			rec.Add(op)
			_ = inv
			if typ == history.OK || time.Now().After(deadline) || ctx.Err() != nil {
				if typ != history.OK {
					res.Problems = append(res.Problems, fmt.Sprintf("final %s on %s never succeeded: %v", f, n.Name, err))
				}
				return
			}
			time.Sleep(time.Second)
		}
	})
	rec.Flush()
	nemRec.Flush()
	for _, n := range c.Nodes {
		if !n.Running() {
			res.Problems = append(res.Problems, fmt.Sprintf("%s is down at the end: %s", n.Name, n.exitStatus))
		}
	}
	c.Shutdown()

	ops := rec.Ops()
	summarize(res, ops, nm, healed, o)
	logf("checking %d history records", len(ops))
	res.Checkers = wl.Check(ops, dir)
	var vs []checker.Verdict
	for _, r := range res.Checkers {
		vs = append(vs, r.Verdict)
		res.LostWrites += r.Counts["lost writes"]
		logf("%s", r.Summary())
		for _, a := range r.Anomalies {
			logf("  %s: %s", a.Type, a.Explanation)
		}
		for _, n := range r.Notes {
			logf("  note: %s", n)
		}
	}
	res.Verdict = checker.Worst(vs...)
	if res.Verdict == checker.Valid && len(res.Problems) > 0 {
		res.Verdict = checker.Unknown
	}
	for _, p := range res.Problems {
		logf("problem: %s", p)
	}
	logf("verdict: %s (%s)", res.Verdict, dir)
	if res.Verdict != checker.Valid {
		logf("seed %d; replay with:\n  %s", o.Seed, o.ReplayCommand())
	} else if !o.KeepData {
		os.RemoveAll(filepath.Join(dir, "data"))
	}
	return res, nil
}

// generator hands out operations from the workload in one seeded sequence.
type generator struct {
	mu sync.Mutex
	wl Workload
	r  *rand.Rand
}

func (g *generator) next() (string, any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.wl.Next(g.r)
}

// worker is one client bound to one node. Its process id changes after
// every info outcome, since the old operation may still take effect.
// A worker waits about infoBackoffMin (half to all of it, at random)
// after its first indeterminate operation in a row, twice as long after
// each further one, at most infoBackoffMax: short enough that the
// recovery after a heal is still measured to within half a second.
const (
	infoBackoffMin = 100 * time.Millisecond
	infoBackoffMax = 500 * time.Millisecond
)

func worker(ctx context.Context, c *Cluster, wl Workload, gen *generator, rec *history.Recorder, w int, o Options) {
	n := c.Nodes[w%len(c.Nodes)]
	process := w
	cl := wl.NewClient(c, n, o.OpTimeout)
	defer func() { cl.Close() }()
	r := rand.New(rand.NewSource(o.Seed*1000 + int64(w)))
	pause := time.Duration(float64(o.Concurrency) / o.Rate * float64(time.Second))
	// backoff grows while operations end indeterminate (the node is down
	// or unreachable), as a real client's reconnect loop does: every such
	// operation may still take effect at any later time, and a checker
	// must consider each possible order of them, so a worker that retried
	// at full rate through an outage would give porcupine a search it
	// cannot finish.
	var backoff time.Duration
	for ctx.Err() == nil {
		f, value := gen.next()
		rec.Add(history.Op{Type: history.Invoke, F: f, Process: process, Value: history.Value(value), Node: n.Name})
		typ, out, err := cl.Invoke(ctx, f, value)
		if out == nil && typ != history.OK {
			out = value
		}
		op := history.Op{Type: typ, F: f, Process: process, Value: history.Value(out), Node: n.Name}
		if err != nil {
			op.Error = err.Error()
		}
		rec.Add(op)
		wait := time.Duration(r.Int63n(int64(2*pause) + 1))
		if typ == history.Info {
			process += o.Concurrency
			cl.Close()
			cl = wl.NewClient(c, n, o.OpTimeout)
			backoff = min(max(2*backoff, infoBackoffMin), infoBackoffMax)
			wait = max(wait, backoff/2+time.Duration(r.Int63n(int64(backoff/2)+1)))
		} else if typ == history.OK {
			backoff = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// setup creates the database and the workload's tables through the first
// node, retrying while the database is still electing leaders.
func setup(ctx context.Context, c *Cluster, wl Workload) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		last = func() error {
			db := c.SQLDB(c.Nodes[0], 10*time.Second, "")
			defer db.Close()
			if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS chaos"); err != nil {
				return err
			}
			cdb := c.SQL(c.Nodes[0], 10*time.Second)
			defer cdb.Close()
			return wl.Setup(ctx, cdb, c)
		}()
		if last == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("setting up the %s workload: %w", wl.Name(), last)
}

func summarize(res *Result, ops []history.Op, nm *Nemesis, healed int64, o Options) {
	nm.mu.Lock()
	for f, k := range nm.Faults {
		res.Faults[f] = k
	}
	windows := append([]Window(nil), nm.Windows...)
	nm.mu.Unlock()
	var okTimes []int64
	lat := map[string][]time.Duration{}
	for _, p := range history.Pairs(ops) {
		res.Ops[p.Invoke.F+" "+p.Complete.Type]++
		if p.Complete.Type == history.OK {
			okTimes = append(okTimes, p.Complete.Time)
			lat[p.Invoke.F] = append(lat[p.Invoke.F], time.Duration(p.Complete.Time-p.Invoke.Time))
		}
	}
	sort.Slice(okTimes, func(i, j int) bool { return okTimes[i] < okTimes[j] })
	for f, ds := range lat {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		q := func(x float64) time.Duration { return ds[int(x*float64(len(ds)-1))] }
		res.Latency[f] = fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(ds), q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond), ds[len(ds)-1].Round(time.Microsecond))
	}
	var gap int64
	for i := 1; i < len(okTimes); i++ {
		gap = max(gap, okTimes[i]-okTimes[i-1])
	}
	res.LongestGap = time.Duration(gap).Round(time.Millisecond).String()
	firstOKAfter := func(t int64) (int64, bool) {
		i := sort.Search(len(okTimes), func(i int) bool { return okTimes[i] > t })
		if i == len(okTimes) {
			return 0, false
		}
		return okTimes[i], true
	}
	for _, w := range windows {
		d := time.Duration(0)
		if t, ok := firstOKAfter(w.End); ok {
			d = time.Duration(t - w.End)
		} else {
			d = time.Duration(1<<62 - 1)
		}
		if d > res.RecoveryMax[w.Family] {
			res.RecoveryMax[w.Family] = d
		}
	}
	for f, d := range res.RecoveryMax {
		if d == time.Duration(1<<62-1) {
			res.Recovery[f] = "never"
		} else {
			res.Recovery[f] = d.Round(time.Millisecond).String()
		}
	}
	if t, ok := firstOKAfter(healed); !ok || time.Duration(t-healed) > o.LivenessLimit {
		res.Problems = append(res.Problems, fmt.Sprintf("no operation succeeded within %v of the final heal: the database did not recover", o.LivenessLimit))
	}
}

func testRecord(o Options, c *Cluster, nw *Network) map[string]any {
	sum := ""
	if f, err := os.Open(o.Bin); err == nil {
		h := sha256.New()
		io.Copy(h, f)
		f.Close()
		sum = hex.EncodeToString(h.Sum(nil))
	}
	version, _ := exec.Command(o.Bin, "version").Output()
	var nodes []map[string]any
	for _, n := range c.Nodes {
		nodes = append(nodes, map[string]any{"name": n.Name, "args": n.args, "sql": n.SQLAddr, "resp": n.RESPAddr})
	}
	return map[string]any{
		"seed": o.Seed, "nodes": o.Nodes, "workload": o.Workload, "nemesis": o.Nemesis,
		"time": o.Time.String(), "interval": o.Interval.String(), "fault_time": o.FaultTime.String(),
		"recovery": o.Recovery.String(), "concurrency": o.Concurrency, "rate": o.Rate, "op_timeout": o.OpTimeout.String(),
		"network": nw.Describe(), "binary": o.Bin, "binary_sha256": sum, "version": strings.TrimSpace(string(version)),
		"node_commands": nodes, "replay": o.ReplayCommand(),
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ErrUsage marks errors in the options.
var ErrUsage = errors.New("usage")
