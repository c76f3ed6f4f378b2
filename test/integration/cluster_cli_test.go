package integration

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The cluster as an operator sees it: `strata status`, /status and the
// INFORMATION_SCHEMA tables agree on three up nodes holding every region.
func TestClusterStatusEverywhere(t *testing.T) {
	c := StartCluster(t, 3)
	out, err := exec.Command(Binary(t), "status", "--host", c.Nodes[1].HTTPAddr).CombinedOutput()
	if err != nil {
		t.Fatalf("strata status: %v\n%s", err, out)
	}
	text := string(out)
	if strings.Count(text, " up ") != 3 || !strings.Contains(text, "0 under-replicated") {
		t.Fatalf("strata status does not show 3 up nodes and full replication:\n%s", text)
	}
	db := c.Nodes[2].DB(t, "")
	var up int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.cluster_nodes WHERE state = 'Up'").Scan(&up); err != nil || up != 3 {
		t.Fatalf("cluster_nodes: %d up, %v", up, err)
	}
	var regions, full int
	if err := db.QueryRow("SELECT COUNT(*), SUM(under_replicated = 'NO') FROM information_schema.regions").Scan(&regions, &full); err != nil {
		t.Fatal(err)
	}
	if regions < 2 || full != regions {
		t.Fatalf("regions: %d, fully replicated %d", regions, full)
	}
	rows, err := db.Query("SELECT peers FROM information_schema.regions")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var peers string
		rows.Scan(&peers)
		if strings.Count(peers, ":voter") != 3 {
			t.Fatalf("a region's peers: %q", peers)
		}
	}
	rows.Close()
}

// Wrong input at start gets one clear line: a data directory another
// process uses, a join address of another cluster.
func TestClusterStartMistakes(t *testing.T) {
	a := StartNode(t)
	cmd := exec.Command(Binary(t), "start", "--data-dir", a.DataDir, "--sql-addr", pickAddr(t), "--resp-addr", "",
		"--http-addr", pickAddr(t), "--grpc-addr", pickAddr(t))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another strata process") {
		t.Fatalf("a second process on a data directory in use: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "goroutine ") {
		t.Fatalf("a stack instead of one line:\n%s", out)
	}
	// A node of cluster A restarted with --join pointing at cluster B.
	b := StartNode(t)
	a.Stop()
	cmd = exec.Command(Binary(t), "start", "--data-dir", a.DataDir, "--sql-addr", a.SQLAddr, "--resp-addr", "",
		"--http-addr", a.HTTPAddr, "--grpc-addr", a.GRPCAddr, "--join", b.GRPCAddr)
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "belongs to another cluster") {
		t.Fatalf("a restart joining another cluster: %v\n%s", err, out)
	}
	lines := strings.Count(strings.TrimSpace(lastStrataLine(string(out))), "\n")
	if lines != 0 {
		t.Fatalf("want one line of error:\n%s", out)
	}
	// Bad flags.
	out, err = exec.Command(Binary(t), "start", "--replicas", "9").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--replicas must be between 1 and 7") {
		t.Fatalf("--replicas 9: %v\n%s", err, out)
	}
}

// A node that cannot bind one of its ports fails before it joins: the
// cluster records no store for it, where it used to keep a store that
// never served (PD placed replicas on it, and the cluster stayed under-
// replicated until the store was declared down).
func TestJoinWithTakenPortLeavesNoStore(t *testing.T) {
	c := StartCluster(t, 1)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	out, err := exec.Command(Binary(t), "start", "--data-dir", t.TempDir(), "--sql-addr", taken.Addr().String(),
		"--resp-addr", "", "--http-addr", pickAddr(t), "--grpc-addr", pickAddr(t), "--join", c.Nodes[0].GRPCAddr).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("a node whose SQL port is taken: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "joined the cluster") {
		t.Fatalf("it joined before binding its ports:\n%s", out)
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 1 {
		t.Fatalf("the cluster knows %d stores after a start that failed, want 1: %+v", len(st.Nodes), st.Nodes)
	}
}

func lastStrataLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "strata:") {
			return l
		}
	}
	return out
}

// `strata demo --nodes 3` runs a local cluster in the foreground, prints
// every node's addresses and a ready mysql line, serves SQL on every node
// and stops every node on Ctrl-C (SIGINT), within seconds.
func TestDemo(t *testing.T) {
	base := 0
	for _, p := range []int{41000, 42000, 43000, 44000, 45000} {
		if portsFree(p, 4*3) {
			base = p
			break
		}
	}
	if base == 0 {
		t.Skip("no free port range for the demo")
	}
	dir := t.TempDir()
	cmd := exec.Command(Binary(t), "demo", "--nodes", "3", "--data-dir", filepath.Join(dir, "demo"),
		"--sql-port", fmt.Sprint(base), "--resp-port", fmt.Sprint(base+10), "--http-port", fmt.Sprint(base+20),
		"--grpc-port", fmt.Sprint(base+30))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	t.Cleanup(func() { cmd.Process.Kill() })
	printed := make(chan string, 1)
	go func() {
		var all strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Press Ctrl-C") {
				printed <- all.String()
			}
		}
		io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	var text string
	select {
	case text = <-printed:
	case <-time.After(90 * time.Second):
		t.Fatalf("demo printed no addresses; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(text, fmt.Sprintf("mysql -h 127.0.0.1 -P %d -u root", base)) {
		t.Fatalf("no ready mysql line:\n%s", text)
	}
	for i := 0; i < 3; i++ {
		db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", base+i))
		if err != nil {
			t.Fatal(err)
		}
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		db.Close()
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo exited with %v after Ctrl-C; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		// The nodes stop together; a node must not wait out request
		// timeouts against a cluster that is stopping with it.
		t.Fatal("demo did not stop within 10s of Ctrl-C")
	}
	if _, err := os.Stat(filepath.Join(dir, "demo", "node1")); err != nil {
		t.Fatalf("--data-dir not used: %v", err)
	}
}

func portsFree(base, n int) bool {
	for i := 0; i < 40; i++ {
		if !addrFree(fmt.Sprintf("127.0.0.1:%d", base+i)) {
			return false
		}
	}
	return true
}

// Clients we did not write work against any node of a cluster: sysbench
// prepares through one node and runs through all three at once, and
// redis-cli writes through one node and reads through another.
func TestClusterSysbenchAndRedisCLI(t *testing.T) {
	c := StartCluster(t, 3)
	if sysbench, err := exec.LookPath("sysbench"); err == nil {
		mustExec(t, c.Nodes[0].DB(t, ""), "CREATE DATABASE sbtest")
		var hosts, ports []string
		for _, n := range c.Nodes {
			h, p, _ := strings.Cut(n.SQLAddr, ":")
			hosts, ports = append(hosts, h), append(ports, p)
		}
		base := []string{"oltp_read_write", "--tables=1", "--table-size=1000", "--mysql-user=root", "--mysql-db=sbtest"}
		for _, step := range []struct {
			phase string
			args  []string
		}{
			{"prepare", []string{"--mysql-host=" + hosts[1], "--mysql-port=" + ports[1]}},
			{"run", []string{"--threads=3", "--time=5", "--mysql-host=" + strings.Join(hosts, ","), "--mysql-port=" + strings.Join(ports, ",")}},
		} {
			out, err := exec.Command(sysbench, append(append(append([]string(nil), base...), step.args...), step.phase)...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "FATAL") {
				t.Fatalf("sysbench %s across the cluster: %v\n%s", step.phase, err, out)
			}
			if step.phase == "run" {
				if m := sysbenchTransactions.FindStringSubmatch(string(out)); m == nil || m[1] == "0" {
					t.Fatalf("sysbench committed nothing:\n%s", out)
				}
			}
		}
	} else {
		t.Log("sysbench is not on PATH; skipping its part")
	}
	if cli, err := exec.LookPath("redis-cli"); err == nil {
		port := func(n *Node) string { _, p, _ := strings.Cut(n.RESPAddr, ":"); return p }
		if out, err := exec.Command(cli, "-p", port(c.Nodes[2]), "SET", "greeting", "hello").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "OK" {
			t.Fatalf("redis-cli SET through node 3: %v %s", err, out)
		}
		out, err := exec.Command(cli, "-p", port(c.Nodes[0]), "GET", "greeting").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "hello" {
			t.Fatalf("redis-cli GET through node 1: %v %q", err, out)
		}
	} else {
		t.Log("redis-cli is not on PATH; skipping its part")
	}
}
