package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/strata-db/strata/test/chaos/history"
)

// A nemesis family is one kind of fault. Each start picks a variant and
// targets with the run's seeded random source and returns the heal that
// undoes it; the scheduler (Nemesis.Run) starts one fault every interval,
// holds it for a duration, heals it, and records both in the nemesis
// schedule (nemesis.jsonl, same clock as the history).
type family struct {
	name string
	// need says why the family cannot run on this cluster ("" when it can).
	need  func(c *Cluster) string
	start func(ctx context.Context, nm *Nemesis) (desc map[string]any, heal func() error, err error)
}

// Families, by name. "mixed" in a run's --nemesis means every family that
// can run on the cluster.
var families = []family{
	{"kill", always, startKill(targetRandom)},
	{"kill-leader", needStatus, startKill(targetRegionLeader)},
	{"kill-pd", needStatus, startKill(targetPDLeader)},
	{"kill-all", always, startKillAll},
	{"pause", always, startPause(targetRandom)},
	{"pause-leader", needStatus, startPause(targetRegionLeader)},
	{"partition", needPeersNetns, startPartition},
	{"loss", needPeersNetns, startLoss},
	{"delay", needProxies, startDelay},
	{"stall", needProxies, startStall},
	{"reset", needProxies, startReset},
	{"clock", needFlag("test-clock-rate"), startClock},
	{"membership", needSpare, startMembership},
}

// FamilyNames lists every family name.
func FamilyNames() []string {
	var out []string
	for _, f := range families {
		out = append(out, f.name)
	}
	return out
}

func always(*Cluster) string { return "" }

func needStatus(c *Cluster) string {
	if len(c.Nodes) < 2 {
		return "needs a cluster (a region leader is only worth singling out among peers)"
	}
	if _, err := c.Status(); err != nil {
		return fmt.Sprintf("needs GET /status on the nodes: %v", err)
	}
	return ""
}

func needPeersNetns(c *Cluster) string {
	if len(c.Nodes) < 2 {
		return "needs a cluster (peers to cut apart)"
	}
	if c.Net.Mode != "netns" {
		return "needs netns mode (iptables inside node namespaces)"
	}
	return ""
}

func needProxies(c *Cluster) string {
	if len(c.Nodes[0].Proxies()) == 0 {
		return "needs link proxies (started when a proxy family is asked for)"
	}
	return ""
}

func needFlag(flag string) func(c *Cluster) string {
	return func(c *Cluster) string {
		if !c.Flags[flag] {
			return fmt.Sprintf("needs `strata start --%s`, which this build does not have", flag)
		}
		return ""
	}
}

// Nemesis schedules faults.
type Nemesis struct {
	C        *Cluster
	Rand     *rand.Rand
	Rec      *history.Recorder // nemesis.jsonl
	Families []family
	Interval time.Duration // mean time between the end of one fault and the start of the next
	Duration time.Duration // mean time a fault is held
	Log      func(format string, args ...any)

	mu      sync.Mutex
	Faults  map[string]int // started, by family
	Windows []Window
}

// Window is one fault from start to heal, in run time (ns).
type Window struct {
	Family     string
	Start, End int64
}

// NewNemesis resolves the family names (and "mixed", "none") against the
// cluster. Families that cannot run are dropped with the reason in skipped.
func NewNemesis(c *Cluster, names []string, seed int64, rec *history.Recorder) (nm *Nemesis, skipped []string, err error) {
	nm = &Nemesis{C: c, Rand: rand.New(rand.NewSource(seed)), Rec: rec, Faults: map[string]int{}, Log: c.Log}
	want := map[string]bool{}
	mixed := false
	for _, name := range names {
		switch name {
		case "", "none":
		case "mixed":
			mixed = true
		default:
			found := false
			for _, f := range families {
				found = found || f.name == name
			}
			if !found {
				return nil, nil, fmt.Errorf("unknown nemesis %q (have: mixed, none, %s)", name, strings.Join(FamilyNames(), ", "))
			}
			want[name] = true
		}
	}
	for _, f := range families {
		if !mixed && !want[f.name] {
			continue
		}
		if f.start == nil {
			skipped = append(skipped, f.name+": not implemented until the cluster supports it")
			continue
		}
		if why := f.need(c); why != "" {
			skipped = append(skipped, f.name+": "+why)
			continue
		}
		if mixed && (f.name == "kill-all" || f.name == "membership") && !want[f.name] {
			// kill-all takes the whole database down, and a churn moves
			// every replica twice: in a mix either would dominate the
			// availability numbers and the run's length; ask by name.
			continue
		}
		nm.Families = append(nm.Families, f)
	}
	return nm, skipped, nil
}

func (nm *Nemesis) jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(nm.Rand.Int63n(int64(d)+1))
}

func (nm *Nemesis) record(typ, f string, value any, errText string) int64 {
	op := nm.Rec.Add(history.Op{Type: typ, F: f, Process: -1, Value: history.Value(value), Error: errText})
	return op.Time
}

// Run injects faults until ctx ends, then heals the last one.
func (nm *Nemesis) Run(ctx context.Context) {
	if len(nm.Families) == 0 {
		<-ctx.Done()
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(nm.jitter(nm.Interval)):
		}
		f := nm.Families[nm.Rand.Intn(len(nm.Families))]
		desc, heal, err := f.start(ctx, nm)
		if err != nil {
			nm.record(history.Info, "start-"+f.name, desc, err.Error())
			nm.Log("nemesis %s: %v", f.name, err)
			if heal != nil {
				heal()
			}
			continue
		}
		start := nm.record(history.Info, "start-"+f.name, desc, "")
		nm.Log("nemesis start %s %v", f.name, desc)
		nm.mu.Lock()
		nm.Faults[f.name]++
		nm.mu.Unlock()
		hold := nm.jitter(nm.Duration)
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
		herr := ""
		if heal != nil {
			if err := heal(); err != nil {
				herr = err.Error()
			}
		}
		end := nm.record(history.Info, "stop-"+f.name, desc, herr)
		nm.Log("nemesis stop %s %s", f.name, herr)
		nm.mu.Lock()
		nm.Windows = append(nm.Windows, Window{f.name, start, end})
		nm.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// HealAll undoes everything a nemesis may have left: resumes paused nodes,
// restarts dead ones, flushes iptables, clears the proxies.
func HealAll(ctx context.Context, c *Cluster) error {
	var errs []string
	for _, n := range c.Nodes {
		c.Resume(n)
		for _, p := range n.Proxies() {
			p.Heal()
		}
	}
	if c.Net.Mode == "netns" {
		if err := c.Net.Heal(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, n := range c.Nodes {
		if !n.Running() {
			if err := c.StartNode(ctx, n, 90*time.Second); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Targets.

type targeter func(nm *Nemesis) ([]*Node, string)

func targetRandom(nm *Nemesis) ([]*Node, string) {
	up := nm.running()
	if len(up) == 0 {
		return nil, "random"
	}
	return []*Node{up[nm.Rand.Intn(len(up))]}, "random"
}

func (nm *Nemesis) running() []*Node {
	var up []*Node
	for _, n := range nm.C.Nodes {
		if n.Running() {
			up = append(up, n)
		}
	}
	return up
}

func (nm *Nemesis) byName(name string) *Node {
	for _, n := range nm.C.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func targetRegionLeader(nm *Nemesis) ([]*Node, string) {
	st, err := nm.C.Status()
	if err != nil || len(st.Regions) == 0 {
		return nil, "leader of a region (status unavailable)"
	}
	r := st.Regions[nm.Rand.Intn(len(st.Regions))]
	if n := nm.byName(r.Leader); n != nil {
		return []*Node{n}, fmt.Sprintf("leader of region %d", r.ID)
	}
	return nil, fmt.Sprintf("leader of region %d (unknown)", r.ID)
}

func targetPDLeader(nm *Nemesis) ([]*Node, string) {
	st, err := nm.C.Status()
	if err != nil {
		return nil, "PD leader (status unavailable)"
	}
	if n := nm.byName(st.PDLeader()); n != nil {
		return []*Node{n}, "PD leader"
	}
	return nil, "PD leader (unknown)"
}

func names(ns []*Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

// Process faults.

func startKill(target targeter) func(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	return func(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
		ns, how := target(nm)
		// In a cluster of 5, sometimes two at once (still a minority).
		if how == "random" && len(nm.C.Nodes) >= 5 && nm.Rand.Intn(2) == 0 {
			for _, n := range nm.running() {
				if n != ns[0] {
					ns = append(ns, n)
					break
				}
			}
		}
		desc := map[string]any{"target": how, "nodes": names(ns)}
		if len(ns) == 0 {
			return desc, nil, fmt.Errorf("no target: %s", how)
		}
		for _, n := range ns {
			if err := nm.C.Kill(n); err != nil {
				return desc, nil, err
			}
		}
		return desc, func() error {
			for _, n := range ns {
				if err := nm.C.StartNode(ctx, n, 90*time.Second); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}
}

func startKillAll(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	ns := nm.running()
	desc := map[string]any{"nodes": names(ns)}
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Add(1)
		go func(n *Node) { defer wg.Done(); nm.C.Kill(n) }(n)
	}
	wg.Wait()
	return desc, func() error {
		// Restart in order so that the first node (which bootstrapped) is
		// up before the ones that name it in --join; each waits for ready
		// only after all are started (a cluster needs a quorum to serve).
		for _, n := range nm.C.Nodes {
			if err := nm.C.spawn(n); err != nil {
				return err
			}
		}
		for _, n := range nm.C.Nodes {
			if err := nm.C.WaitReady(ctx, n, 90*time.Second); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func startPause(target targeter) func(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	return func(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
		ns, how := target(nm)
		desc := map[string]any{"target": how, "nodes": names(ns)}
		if len(ns) == 0 {
			return desc, nil, fmt.Errorf("no target: %s", how)
		}
		for _, n := range ns {
			if err := nm.C.Pause(n); err != nil {
				return desc, nil, err
			}
		}
		return desc, func() error {
			for _, n := range ns {
				if err := nm.C.Resume(n); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}
}

// Network faults.

// grudge maps each node to the peers it must not hear from.
type grudge map[string][]string

func complete(a, b []*Node) grudge {
	g := grudge{}
	for _, x := range a {
		for _, y := range b {
			g[x.Name] = append(g[x.Name], y.Name)
			g[y.Name] = append(g[y.Name], x.Name)
		}
	}
	return g
}

func (nm *Nemesis) shuffled() []*Node {
	ns := append([]*Node(nil), nm.C.Nodes...)
	nm.Rand.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
	return ns
}

func startPartition(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	variants := []string{"isolate-one", "isolate-leader", "halves", "one-way"}
	if len(nm.C.Nodes) >= 5 {
		variants = append(variants, "majorities-ring", "bridge")
	}
	v := variants[nm.Rand.Intn(len(variants))]
	ns := nm.shuffled()
	var g grudge
	inboundOnly := false
	desc := map[string]any{"variant": v}
	switch v {
	case "isolate-one":
		g = complete(ns[:1], ns[1:])
		desc["isolated"] = ns[0].Name
	case "isolate-leader":
		t, how := targetRegionLeader(nm)
		if len(t) == 0 {
			t, how = ns[:1], "random (no leader known)"
		}
		var rest []*Node
		for _, n := range nm.C.Nodes {
			if n != t[0] {
				rest = append(rest, n)
			}
		}
		g = complete(t, rest)
		desc["isolated"], desc["target"] = t[0].Name, how
	case "halves":
		k := len(ns) / 2
		g = complete(ns[:k], ns[k:])
		desc["minority"], desc["majority"] = names(ns[:k]), names(ns[k:])
	case "one-way":
		// ns[0] stops hearing from everyone; everyone still hears it.
		g = grudge{ns[0].Name: names(ns[1:])}
		inboundOnly = true
		desc["deaf"] = ns[0].Name
	case "majorities-ring":
		// Each node sees its two ring neighbours and itself: a majority of
		// 5, but every two majorities differ (Jepsen's majorities-ring).
		g = grudge{}
		k := len(ns)
		for i, n := range ns {
			for j, m := range ns {
				d := (j - i + k) % k
				if d != 0 && d != 1 && d != k-1 {
					g[n.Name] = append(g[n.Name], m.Name)
				}
			}
		}
		desc["ring"] = names(ns)
	case "bridge":
		// Two halves joined by one node that sees both.
		g = complete(ns[:2], ns[3:])
		desc["bridge"], desc["sides"] = ns[2].Name, []any{names(ns[:2]), names(ns[3:])}
	}
	rules, err := nm.applyGrudge(g, inboundOnly, 1)
	desc["rules"] = rules
	return desc, nm.C.Net.Heal, err
}

func (nm *Nemesis) applyGrudge(g grudge, inboundOnly bool, p float64) ([]string, error) {
	var nodes []string
	for n := range g {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var rules []string
	for _, n := range nodes {
		r, err := nm.C.Net.Block(n, g[n], inboundOnly, p)
		rules = append(rules, r...)
		if err != nil {
			return rules, err
		}
	}
	return rules, nil
}

func startLoss(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	p := 0.1 + 0.4*nm.Rand.Float64()
	ns := nm.shuffled()
	// Loss on the links of one or two random pairs of nodes.
	g := grudge{}
	pairs := 1 + nm.Rand.Intn(2)
	var desc []string
	for i := 0; i < pairs && 2*i+1 < len(ns)+1; i++ {
		a, b := ns[i%len(ns)], ns[(i+1)%len(ns)]
		g[a.Name] = append(g[a.Name], b.Name)
		g[b.Name] = append(g[b.Name], a.Name)
		desc = append(desc, a.Name+"<->"+b.Name)
	}
	rules, err := nm.applyGrudge(g, false, p)
	return map[string]any{"p": fmt.Sprintf("%.2f", p), "links": desc, "rules": rules}, nm.C.Net.Heal, err
}

// Proxy faults: on the client links of one node (and its peer link, where
// the node is reached through a proxy).

func startDelay(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	n := nm.C.Nodes[nm.Rand.Intn(len(nm.C.Nodes))]
	d := time.Duration(50+nm.Rand.Intn(450)) * time.Millisecond
	for _, p := range n.Proxies() {
		p.SetDelay(d)
	}
	return map[string]any{"node": n.Name, "delay": d.String()}, func() error {
		for _, p := range n.Proxies() {
			p.Heal()
		}
		return nil
	}, nil
}

func startStall(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	n := nm.C.Nodes[nm.Rand.Intn(len(nm.C.Nodes))]
	for _, p := range n.Proxies() {
		p.Stall(true)
	}
	return map[string]any{"node": n.Name}, func() error {
		for _, p := range n.Proxies() {
			p.Heal()
		}
		return nil
	}, nil
}

func startReset(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	n := nm.C.Nodes[nm.Rand.Intn(len(nm.C.Nodes))]
	for _, p := range n.Proxies() {
		p.Reset()
	}
	return map[string]any{"node": n.Name}, nil, nil
}

// startClock restarts one node with its clock running at a skewed rate
// (the test-only flag proposed for leases; see docs/reliability.md), and
// heals by restarting it at the normal rate.
func startClock(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	n := nm.C.Nodes[nm.Rand.Intn(len(nm.C.Nodes))]
	rate := []string{"0.5", "0.9", "1.1", "2"}[nm.Rand.Intn(4)]
	base := n.args
	restart := func(extra ...string) error {
		if err := nm.C.Kill(n); err != nil {
			return err
		}
		n.args = append(append([]string(nil), base...), extra...)
		return nm.C.StartNode(ctx, n, 90*time.Second)
	}
	err := restart("--test-clock-rate", rate)
	return map[string]any{"node": n.Name, "rate": rate}, func() error {
		err := restart()
		n.args = base
		return err
	}, err
}
