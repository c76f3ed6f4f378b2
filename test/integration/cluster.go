package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cluster is several strata processes on loopback forming one cluster:
// the first started without --join (it bootstraps), the others with
// --join to it, as a user starts them.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
}

// StartCluster starts n nodes and waits until every region has a replica
// on min(n, 3) of them (the default replication factor).
func StartCluster(t testing.TB, n int, extraArgs ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for i := 0; i < n; i++ {
		args := append([]string(nil), extraArgs...)
		if i > 0 {
			args = append(args, "--join", c.Nodes[0].GRPCAddr)
		}
		node := startNodeIn(t, filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)), args)
		c.Nodes = append(c.Nodes, node)
	}
	c.WaitReplicated(60 * time.Second)
	return c
}

// startNodeIn is StartNodeWith for a node whose files live in dir.
func startNodeIn(t testing.TB, dir string, extraArgs []string) *Node {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Node{t: t, Bin: Binary(t), DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "strata.log"),
		User: "root", ExtraArgs: extraArgs}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", n.LogPath, tail(n.LogPath, 30))
		}
		n.Kill()
		keepLog(t, n.LogPath, filepath.Base(dir))
	})
	for i := 1; ; i++ {
		n.SQLAddr, n.RESPAddr = pickAddr(t), pickAddr(t)
		n.HTTPAddr, n.GRPCAddr = pickAddr(t), pickAddr(t)
		err := n.start()
		if err == nil {
			return n
		}
		if i < 5 && errors.Is(err, errAddrInUse) {
			os.RemoveAll(n.DataDir)
			continue
		}
		t.Fatalf("node did not become ready: %v\nlog:\n%s", err, tail(n.LogPath, 40))
	}
}

// Status is the cluster's state as a node's /status reports it.
type Status struct {
	PDLeaderStore uint64 `json:"pd_leader_store"`
	Nodes         []struct {
		ID         uint64 `json:"id"`
		SQLAddress string `json:"sql_address"`
		Up         bool   `json:"up"`
	} `json:"nodes"`
	Regions []struct {
		ID              uint64 `json:"id"`
		LeaderStore     uint64 `json:"leader_store"`
		System          bool   `json:"system"`
		UnderReplicated bool   `json:"under_replicated"`
		Peers           []struct {
			Store uint64 `json:"store"`
			Role  string `json:"role"`
			Lag   uint64 `json:"lag"`
		} `json:"peers"`
	} `json:"regions"`
}

// Status asks any running node for the cluster's state.
func (c *Cluster) Status() (*Status, error) {
	last := errors.New("no node is running")
	cl := &http.Client{Timeout: 3 * time.Second}
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		resp, err := cl.Get("http://" + n.HTTPAddr + "/status")
		if err != nil {
			last = err
			continue
		}
		var st Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("/status: %s %v", resp.Status, err)
			continue
		}
		return &st, nil
	}
	return nil, last
}

// WaitReplicated waits until every region has a voter on min(nodes, 3)
// nodes and none is in a joint configuration or lagging.
func (c *Cluster) WaitReplicated(timeout time.Duration) {
	c.t.Helper()
	want := min(len(c.Nodes), 3)
	deadline := time.Now().Add(timeout)
	for {
		st, err := c.Status()
		ok := err == nil && len(st.Regions) > 0
		if ok {
			for _, r := range st.Regions {
				voters := 0
				for _, p := range r.Peers {
					if p.Role == "voter" {
						voters++
					}
				}
				if voters != want || r.LeaderStore == 0 {
					ok = false
				}
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not replicated after %v: %+v (%v)", timeout, st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// NodeOfStore maps a store id from /status to the node serving it.
func (c *Cluster) NodeOfStore(st *Status, store uint64) *Node {
	for _, sn := range st.Nodes {
		if sn.ID != store {
			continue
		}
		for _, n := range c.Nodes {
			if n.SQLAddr == sn.SQLAddress {
				return n
			}
		}
	}
	return nil
}

// PDLeader waits until /status names PD's leader and that node is running,
// and returns it. Right after a failover or a restart /status can report
// no leader for a moment; callers that kill PD's leader need a real one.
func (c *Cluster) PDLeader(timeout time.Duration) *Node {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := c.Status()
		if err == nil {
			if n := c.NodeOfStore(st, st.PDLeaderStore); n != nil && n.PID() != 0 {
				return n
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("PD has no running leader after %s (status error: %v)", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pause stops the node's process with SIGSTOP; Resume continues it.
func (n *Node) Pause()  { n.signal(syscall.SIGSTOP) }
func (n *Node) Resume() { n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) {
	if pid := n.PID(); pid != 0 {
		_ = syscall.Kill(pid, sig)
	}
}

// addrFree reports whether a loopback address can be listened on now.
func addrFree(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// keepLog copies a failed test's node log to $STRATA_TEST_LOGS/<test>/<name>.log
// when that variable is set, since the test's own directory is removed
// (every test's with STRATA_TEST_LOGS_ALL=1).
func keepLog(t testing.TB, path, name string) {
	dir := os.Getenv("STRATA_TEST_LOGS")
	if dir == "" || !t.Failed() && os.Getenv("STRATA_TEST_LOGS_ALL") == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".log"), data, 0o644)
		if err == nil {
			t.Logf("node log kept as %s", filepath.Join(dir, name+".log"))
		}
	}
}
