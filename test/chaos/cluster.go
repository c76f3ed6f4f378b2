package chaos

import (
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// Node is one strata process of the cluster, started and faulted by PID.
// Its data directory outlives every incarnation; each incarnation logs to
// nodes/<name>.<incarnation>.log in the run directory.
type Node struct {
	Name  string // n1, n2, ...
	Index int    // 0-based

	Host                                  string // address the node listens on
	SQLPort, RESPPort, HTTPPort, GRPCPort int
	// SQLAddr and RESPAddr are what clients dial: the node's listeners, or
	// the proxies in front of them when link faults are on.
	SQLAddr, RESPAddr string
	// Advertise is the gRPC address peers dial (a proxy in loopback mode
	// with link faults on).
	Advertise string

	DataDir string
	args    []string

	mu          sync.Mutex
	cmd         *exec.Cmd
	exited      chan struct{}
	exitStatus  string
	paused      bool
	incarnation int
	sqlProxy    *Proxy
	respProxy   *Proxy
	peerProxy   *Proxy
}

func (n *Node) listen(port int) string { return net.JoinHostPort(n.Host, strconv.Itoa(port)) }

// GRPCAddr is the node's own gRPC listen address.
func (n *Node) GRPCAddr() string { return n.listen(n.GRPCPort) }

// HTTPAddr is the node's HTTP address (/healthz, /status).
func (n *Node) HTTPAddr() string { return n.listen(n.HTTPPort) }

// PID is the running incarnation's process id, 0 when down.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether a process is up (paused or not).
func (n *Node) Running() bool { return n.PID() != 0 }

// Cluster is N strata processes and the network around them.
type Cluster struct {
	Bin   string
	Dir   string // run directory
	Nodes []*Node
	// Spare is a node laid out like the others but not started and never
	// dialled by clients: the membership nemesis adds it to the cluster so
	// that another node can be decommissioned. Nil unless asked for.
	Spare *Node
	Net   *Network
	// Flags are the start flags the binary knows (from `strata start -h`).
	Flags map[string]bool
	Log   func(format string, args ...any)

	httpc *http.Client
}

// rootPassword is given to every node: root without a password may only
// log in from loopback, and in netns mode clients come from another address.
const rootPassword = "chaos"

// ErrNoCluster is returned when more than one node is asked for and the
// binary cannot form a cluster.
var ErrNoCluster = errors.New("this strata binary has no `start --join`: the multi-node cluster has not landed in this build, so only --nodes 1 can run")

// httpURL is the URL of path on a node's HTTP port at addr: HTTPS unless
// the port is on loopback (where a node serves plain HTTP).
func httpURL(addr, path string) string {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err == nil && (host == "localhost" || (ip != nil && ip.IsLoopback())) {
		return "http://" + addr + path
	}
	return "https://" + addr + path
}

// StartFlags lists the flags `bin start` accepts, from its usage text.
func StartFlags(bin string) (map[string]bool, error) {
	out, _ := exec.Command(bin, "start", "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(strings.TrimSpace(line))
		if len(f) > 0 && strings.HasPrefix(f[0], "-") {
			flags[strings.TrimLeft(f[0], "-")] = true
		}
	}
	if !flags["data-dir"] {
		return nil, fmt.Errorf("%s start -h lists no --data-dir: not a strata binary? %s", bin, firstLines(string(out), 3))
	}
	return flags, nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// ClusterConfig says what to start.
type ClusterConfig struct {
	Bin   string
	Dir   string
	Nodes int
	Net   *Network
	// LinkProxies puts proxies in front of every node's client ports (and,
	// in loopback mode, its advertised peer address), for delay and stall.
	LinkProxies bool
	// Spare lays out one more node (Cluster.Spare) for the membership
	// nemesis; Net must know its name (SpareName).
	Spare     bool
	Log       func(format string, args ...any)
	ExtraArgs []string
}

// SpareName is the name of the spare node of a cluster of n nodes.
func SpareName(n int) string { return fmt.Sprintf("n%d", n+1) }

// NewCluster lays out the nodes (addresses, data directories, command
// lines) without starting them.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	flags, err := StartFlags(cfg.Bin)
	if err != nil {
		return nil, err
	}
	if cfg.Nodes > 1 && !flags["join"] {
		return nil, ErrNoCluster
	}
	c := &Cluster{Bin: cfg.Bin, Dir: cfg.Dir, Net: cfg.Net, Flags: flags, Log: cfg.Log,
		// A node's HTTP port beyond loopback speaks only HTTPS, with a
		// certificate the node made itself: the harness does not verify it.
		httpc: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: cfg.Net.DialContext, DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "nodes"), 0o755); err != nil {
		return nil, err
	}
	total := cfg.Nodes
	if cfg.Spare {
		total++
	}
	for i := 0; i < total; i++ {
		n := &Node{Name: fmt.Sprintf("n%d", i+1), Index: i, DataDir: filepath.Join(cfg.Dir, "data", fmt.Sprintf("n%d", i+1))}
		n.Host = cfg.Net.HostOf(n.Name)
		if cfg.Net.Mode == "netns" {
			n.SQLPort, n.RESPPort, n.HTTPPort, n.GRPCPort = 4000, 6380, 8080, 20160
		} else {
			ports, err := freePorts(4)
			if err != nil {
				return nil, err
			}
			n.SQLPort, n.RESPPort, n.HTTPPort, n.GRPCPort = ports[0], ports[1], ports[2], ports[3]
		}
		n.SQLAddr, n.RESPAddr, n.Advertise = n.listen(n.SQLPort), n.listen(n.RESPPort), n.GRPCAddr()
		if cfg.LinkProxies {
			host := cfg.Net.ClientHost()
			if n.sqlProxy, err = NewProxy(cfg.Net, host, n.SQLAddr); err != nil {
				return nil, err
			}
			if n.respProxy, err = NewProxy(cfg.Net, host, n.RESPAddr); err != nil {
				return nil, err
			}
			n.SQLAddr, n.RESPAddr = n.sqlProxy.Addr, n.respProxy.Addr
			if cfg.Net.Mode == "loopback" && cfg.Nodes > 1 && flags["advertise-addr"] {
				if n.peerProxy, err = NewProxy(cfg.Net, host, n.GRPCAddr()); err != nil {
					return nil, err
				}
				n.Advertise = n.peerProxy.Addr
			}
		}
		if i == cfg.Nodes {
			c.Spare = n
			continue
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.all() {
		n.args = []string{cfg.Bin, "start",
			"--data-dir", n.DataDir,
			"--sql-addr", n.listen(n.SQLPort),
			"--resp-addr", n.listen(n.RESPPort),
			"--http-addr", n.HTTPAddr(),
			"--grpc-addr", n.GRPCAddr()}
		if flags["advertise-addr"] {
			n.args = append(n.args, "--advertise-addr", n.Advertise)
		}
		if n.Index > 0 {
			var join []string
			for _, m := range c.Nodes[:min(n.Index, len(c.Nodes))] {
				join = append(join, m.Advertise)
			}
			n.args = append(n.args, "--join", strings.Join(join, ","))
		}
		n.args = append(n.args, "--root-password", rootPassword)
		if flags["insecure"] {
			// The nodes listen on the test network in their namespaces,
			// beyond loopback, without certificates: the run is about
			// faults, not transport security.
			n.args = append(n.args, "--insecure")
		}
		n.args = append(n.args, cfg.ExtraArgs...)
	}
	return c, nil
}

// all is the nodes and the spare, if any.
func (c *Cluster) all() []*Node {
	if c.Spare == nil {
		return c.Nodes
	}
	return append(append([]*Node(nil), c.Nodes...), c.Spare)
}

func freePorts(k int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < k; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Start starts every node (the first alone, which bootstraps; then the rest,
// which join it) and waits until each is ready.
func (c *Cluster) Start(ctx context.Context, timeout time.Duration) error {
	if len(c.Nodes) == 0 {
		return errors.New("no nodes")
	}
	if err := c.StartNode(ctx, c.Nodes[0], timeout); err != nil {
		return err
	}
	// One at a time: a node that joins while an earlier one is not yet
	// listening exits (its PD client dials every member it was told of).
	for _, n := range c.Nodes[1:] {
		if err := c.StartNode(ctx, n, timeout); err != nil {
			return err
		}
	}
	return nil
}

// StartNode starts a new incarnation of n on its data directory and waits up
// to timeout for it to be ready.
func (c *Cluster) StartNode(ctx context.Context, n *Node, timeout time.Duration) error {
	if err := c.spawn(n); err != nil {
		return err
	}
	return c.WaitReady(ctx, n, timeout)
}

func (c *Cluster) spawn(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	n.incarnation++
	path := filepath.Join(c.Dir, "nodes", fmt.Sprintf("%s.%d.log", n.Name, n.incarnation))
	logf, err := os.Create(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== chaos: %s incarnation %d at %s: %s\n", n.Name, n.incarnation, time.Now().Format(time.RFC3339Nano), strings.Join(n.args, " "))
	cmd := c.Net.Command(n.Name, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.paused = cmd, exited, false
	go func() {
		err := cmd.Wait()
		status := "exit 0"
		if err != nil {
			status = err.Error()
		}
		fmt.Fprintf(logf, "=== chaos: %s incarnation pid %d ended: %s\n", n.Name, cmd.Process.Pid, status)
		logf.Close()
		n.mu.Lock()
		n.exitStatus = status
		if n.cmd == cmd {
			n.cmd, n.exited = nil, nil
		}
		n.mu.Unlock()
		close(exited)
	}()
	c.Log("%s started (pid %d, incarnation %d)", n.Name, cmd.Process.Pid, n.incarnation)
	return nil
}

// LogPath is the log of n's current (or last) incarnation.
func (c *Cluster) LogPath(n *Node) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return filepath.Join(c.Dir, "nodes", fmt.Sprintf("%s.%d.log", n.Name, n.incarnation))
}

// WaitReady waits until n answers /healthz, a MySQL ping and a Redis PING.
func (c *Cluster) WaitReady(ctx context.Context, n *Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		n.mu.Lock()
		exited, status := n.exited, n.exitStatus
		n.mu.Unlock()
		if exited == nil {
			return fmt.Errorf("%s exited during startup (%s); log %s:\n%s", n.Name, status, c.LogPath(n), tailFile(c.LogPath(n), 15))
		}
		if last = c.probe(ctx, n); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %v: %v", n.Name, timeout, last)
}

func (c *Cluster) probe(ctx context.Context, n *Node) error {
	resp, err := c.httpc.Get(httpURL(n.HTTPAddr(), "/healthz"))
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/healthz: %s", resp.Status)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	db := c.SQLDB(n, 3*time.Second, "")
	defer db.Close()
	if err := db.PingContext(pctx); err != nil {
		return fmt.Errorf("mysql ping: %v", err)
	}
	rc := c.Redis(n, 3*time.Second)
	defer rc.Close()
	if err := rc.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("redis ping: %v", err)
	}
	return nil
}

var registerDialer sync.Once

// SQL opens a connection pool to n's SQL address (through its proxy, when
// there is one) with the given I/O timeout.
func (c *Cluster) SQL(n *Node, timeout time.Duration) *sql.DB { return c.SQLDB(n, timeout, "chaos") }

// SQLDB is SQL with a default database ("" for none).
func (c *Cluster) SQLDB(n *Node, timeout time.Duration, db string) *sql.DB {
	registerDialer.Do(func() {
		// The driver logs every connection a fault broke; the history
		// already records them.
		mysql.SetLogger(log.New(io.Discard, "", 0))
		mysql.RegisterDialContext("chaos", func(ctx context.Context, addr string) (net.Conn, error) {
			return c.Net.DialContext(ctx, "tcp", addr)
		})
	})
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Passwd = rootPassword
	cfg.Net = "chaos"
	cfg.Addr = n.SQLAddr
	cfg.DBName = db
	cfg.Timeout = timeout
	cfg.ReadTimeout = timeout
	cfg.WriteTimeout = timeout
	cfg.InterpolateParams = false
	cfg.AllowNativePasswords = true
	pool, _ := sql.Open("mysql", cfg.FormatDSN())
	return pool
}

// Redis opens a client to n's Redis address with the given timeout and no
// retries (a retried write would hide its outcome from the history).
func (c *Cluster) Redis(n *Node, timeout time.Duration) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.RESPAddr, Protocol: 2, PoolSize: 1, MaxRetries: -1,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		Dialer: c.Net.DialContext})
}

// Kill sends SIGKILL to n and waits until it is reaped.
func (c *Cluster) Kill(n *Node) error { return c.signalWait(n, syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM, then SIGKILL after timeout.
func (c *Cluster) Stop(n *Node, timeout time.Duration) error {
	c.Resume(n)
	if err := c.signalWait(n, syscall.SIGTERM, timeout); err != nil {
		return c.Kill(n)
	}
	return nil
}

func (c *Cluster) signalWait(n *Node, sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := syscall.Kill(cmd.Process.Pid, sig); err != nil {
		return err
	}
	if sig == syscall.SIGKILL {
		n.mu.Lock()
		n.paused = false
		n.mu.Unlock()
	}
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s (pid %d) still running %v after %v", n.Name, cmd.Process.Pid, timeout, sig)
	}
}

// Pause sends SIGSTOP.
func (c *Cluster) Pause(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is down", n.Name)
	}
	n.paused = true
	return syscall.Kill(n.cmd.Process.Pid, syscall.SIGSTOP)
}

// Resume sends SIGCONT to a paused node.
func (c *Cluster) Resume(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || !n.paused {
		return nil
	}
	n.paused = false
	return syscall.Kill(n.cmd.Process.Pid, syscall.SIGCONT)
}

// Shutdown stops every node (SIGCONT first, then SIGTERM) and closes the
// proxies.
func (c *Cluster) Shutdown() {
	var wg sync.WaitGroup
	for _, n := range c.all() {
		wg.Add(1)
		go func(n *Node) {
			defer wg.Done()
			c.Stop(n, 20*time.Second)
		}(n)
	}
	wg.Wait()
	for _, n := range c.all() {
		for _, p := range []*Proxy{n.sqlProxy, n.respProxy, n.peerProxy} {
			if p != nil {
				p.Close()
			}
		}
	}
}

// Proxies returns n's proxies (client links and, when present, the peer link).
func (n *Node) Proxies() []*Proxy {
	var ps []*Proxy
	for _, p := range []*Proxy{n.sqlProxy, n.respProxy, n.peerProxy} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// Status is what a node's GET /status reports, reduced to what the nemeses
// need: which node leads each region. Field names are read loosely, since
// the endpoint is young: a node is matched by any of its addresses.
type Status struct {
	Regions []RegionStatus
	Raw     json.RawMessage
}

// RegionStatus is one region and the node that leads it ("" when unknown).
type RegionStatus struct {
	ID       uint64
	System   bool // PD's own region
	Leader   string
	StartKey string
}

// Status asks any running node for /status. It fails when no node answers
// or the endpoint does not exist (a single-node build without it).
func (c *Cluster) Status() (*Status, error) {
	var last error = errors.New("no node running")
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		resp, err := c.httpc.Get(httpURL(n.HTTPAddr(), "/status"))
		if err != nil {
			last = err
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s /status: %s", n.Name, resp.Status)
			continue
		}
		return c.parseStatus(body)
	}
	return nil, last
}

func (c *Cluster) parseStatus(body []byte) (*Status, error) {
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("/status is not JSON: %v", err)
	}
	st := &Status{Raw: body}
	// Store id -> node, by any address string of the node entry.
	storeNode := map[string]string{}
	nodes, _ := raw["nodes"].([]any)
	for _, e := range nodes {
		m, _ := e.(map[string]any)
		id := fmt.Sprint(firstOf(m, "id", "store_id", "storeId", "node_id"))
		for _, v := range flatStrings(m) {
			for _, n := range c.all() {
				if v == n.Advertise || v == n.GRPCAddr() || v == n.listen(n.SQLPort) || v == n.HTTPAddr() {
					storeNode[id] = n.Name
				}
			}
		}
	}
	regions, _ := raw["regions"].([]any)
	for _, e := range regions {
		m, _ := e.(map[string]any)
		r := RegionStatus{}
		if f, ok := firstOf(m, "id", "region_id").(float64); ok {
			r.ID = uint64(f)
		}
		r.StartKey = fmt.Sprint(firstOf(m, "start_key", "startKey", "start"))
		if b, ok := firstOf(m, "system", "is_system", "pd").(bool); ok {
			r.System = b
		}
		leader := firstOf(m, "leader_store_id", "leader_store", "leaderStoreId", "leader")
		if lm, ok := leader.(map[string]any); ok {
			leader = firstOf(lm, "store_id", "store", "id")
		}
		if leader != nil {
			r.Leader = storeNode[fmt.Sprint(leader)]
		}
		st.Regions = append(st.Regions, r)
	}
	sort.Slice(st.Regions, func(i, j int) bool { return st.Regions[i].ID < st.Regions[j].ID })
	return st, nil
}

func firstOf(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return nil
}

func flatStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, flatStrings(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, flatStrings(e)...)
		}
		return out
	}
	return nil
}

// PDLeader is the node leading the system region (PD's Raft group): the
// region flagged system, else the first region.
func (s *Status) PDLeader() string {
	for _, r := range s.Regions {
		if r.System {
			return r.Leader
		}
	}
	if len(s.Regions) > 0 {
		return s.Regions[0].Leader
	}
	return ""
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
