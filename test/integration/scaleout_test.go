package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// scaleStatus is what the scale-out test reads of /status.
type scaleStatus struct {
	Nodes []struct {
		ID         uint64 `json:"id"`
		SQLAddress string `json:"sql_address"`
		Up         bool   `json:"up"`
		State      string `json:"state"`
	} `json:"nodes"`
	Regions []struct {
		ID          uint64 `json:"id"`
		LeaderStore uint64 `json:"leader_store"`
		System      bool   `json:"system"`
		Peers       []struct {
			Store uint64 `json:"store"`
			Role  string `json:"role"`
		} `json:"peers"`
	} `json:"regions"`
}

func (c *Cluster) scaleStatus(t *testing.T) *scaleStatus {
	t.Helper()
	cl := &http.Client{Timeout: 3 * time.Second}
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		resp, err := cl.Get("http://" + n.HTTPAddr + "/status")
		if err != nil {
			continue
		}
		var st scaleStatus
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return &st
		}
	}
	return nil
}

// logStatus logs the raw /status of the first node that answers: the
// regions' peers and PD's operator log, to tell why a wait failed.
func (c *Cluster) logStatus(t *testing.T) {
	t.Helper()
	cl := &http.Client{Timeout: 3 * time.Second}
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		resp, err := cl.Get("http://" + n.HTTPAddr + "/status")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("/status of %s:\n%s", n.HTTPAddr, body)
		return
	}
}

// counts returns each store's voters and leaders over all regions.
func (st *scaleStatus) counts() (replicas, leaders map[uint64]int) {
	replicas, leaders = map[uint64]int{}, map[uint64]int{}
	for _, n := range st.Nodes {
		replicas[n.ID], leaders[n.ID] = 0, 0
	}
	for _, r := range st.Regions {
		for _, p := range r.Peers {
			replicas[p.Store]++
		}
		if r.LeaderStore != 0 {
			leaders[r.LeaderStore]++
		}
	}
	return replicas, leaders
}

// within reports whether every store of stores has within tol of the
// mean of counts over those stores.
func within(counts map[uint64]int, stores []uint64, tol float64) bool {
	total := 0
	for _, s := range stores {
		total += counts[s]
	}
	mean := float64(total) / float64(len(stores))
	for _, s := range stores {
		if math.Abs(float64(counts[s])-mean) > tol*mean {
			return false
		}
	}
	return true
}

// fullyReplicated: every region has 3 voters, all on live stores, no
// learner or joint state, and a leader.
func (st *scaleStatus) fullyReplicated(dead map[uint64]bool) bool {
	for _, r := range st.Regions {
		voters := 0
		for _, p := range r.Peers {
			if p.Role != "voter" || dead[p.Store] {
				return false
			}
			voters++
		}
		if voters != 3 || r.LeaderStore == 0 {
			return false
		}
	}
	return true
}

// The process test: regions split by size while a table loads
// into 3 nodes; 2 nodes join and replicas and leaders spread within 20% of
// even; a node is killed and, after --down-after, every region has 3
// replicas on live nodes again; a node is drained and ends with no
// replica. Reads and writes go on throughout.
func TestScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("a 5-node cluster for a minute or two")
	}
	args := []string{"--region-max-size", "48KiB", "--split-check-interval", "300ms", "--down-after", "6s",
		"--region-split-qps", "-1", "--schedule-limit", "8", "--log-level", "info"}
	c := StartCluster(t, 3, args...)
	db := c.Nodes[0].DB(t, "")
	mustExec := func(q string, a ...any) {
		t.Helper()
		if _, err := db.Exec(q, a...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec("CREATE DATABASE scale")
	mustExec("CREATE TABLE scale.t (id BIGINT PRIMARY KEY, v VARCHAR(600))")
	pad := strings.Repeat("x", 500)
	const rows = 4000
	for i := 0; i < rows; i += 100 {
		var vals []string
		for j := i; j < i+100; j++ {
			vals = append(vals, fmt.Sprintf("(%d, '%s')", j, pad))
		}
		mustExec("INSERT INTO scale.t VALUES " + strings.Join(vals, ","))
	}
	deadline := time.Now().Add(40 * time.Second)
	for {
		st := c.scaleStatus(t)
		if st != nil && len(st.Regions) >= 24 {
			t.Logf("%d regions after loading %d rows", len(st.Regions), rows)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the table did not split into dozens of regions: %d", len(st.Regions))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Foreground traffic for the rest of the test: a writer and a reader
	// on node 1, with retries as a client makes them. The longest time
	// without a success is checked at the end.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writes, reads atomic.Int64
	var worstGap atomic.Int64
	traffic := func(name string, op func(i int) error, count *atomic.Int64) {
		defer wg.Done()
		last := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			if err := op(i); err == nil {
				count.Add(1)
				if g := time.Since(last); int64(g) > worstGap.Load() {
					worstGap.Store(int64(g))
				}
				last = time.Now()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wg.Add(2)
	go traffic("writer", func(i int) error {
		_, err := db.ExecContext(ctx, "UPDATE scale.t SET v = ? WHERE id = ?", fmt.Sprintf("w%d", i), (i*37)%rows)
		return err
	}, &writes)
	go traffic("reader", func(i int) error {
		var v string
		return db.QueryRowContext(ctx, "SELECT v FROM scale.t WHERE id = ?", (i*53)%rows).Scan(&v)
	}, &reads)
	defer func() { stop(); wg.Wait() }()

	// Two nodes join: replicas and leaders spread over all five.
	for i := 0; i < 2; i++ {
		c.Nodes = append(c.Nodes, startNodeIn(t, filepath.Join(t.TempDir(), fmt.Sprintf("n%d", len(c.Nodes)+1)),
			append(append([]string(nil), args...), "--join", c.Nodes[0].GRPCAddr)))
	}
	waitFor := func(what string, d time.Duration, ok func(st *scaleStatus) bool) *scaleStatus {
		t.Helper()
		start := time.Now()
		var st *scaleStatus
		for time.Since(start) < d {
			if st = c.scaleStatus(t); st != nil && ok(st) {
				t.Logf("%s after %v", what, time.Since(start).Round(100*time.Millisecond))
				return st
			}
			time.Sleep(250 * time.Millisecond)
		}
		reps, leads := st.counts()
		c.logStatus(t)
		t.Fatalf("%s: not within %v: replicas %v leaders %v", what, d, reps, leads)
		return nil
	}
	all := func(st *scaleStatus, except map[uint64]bool) []uint64 {
		var out []uint64
		for _, n := range st.Nodes {
			if !except[n.ID] {
				out = append(out, n.ID)
			}
		}
		return out
	}
	st := waitFor("replicas and leaders within 20% of even on 5 nodes", 60*time.Second, func(st *scaleStatus) bool {
		reps, leads := st.counts()
		stores := all(st, nil)
		return len(stores) == 5 && st.fullyReplicated(nil) && within(reps, stores, 0.2) && within(leads, stores, 0.2)
	})
	reps, leads := st.counts()
	t.Logf("replicas %v leaders %v", reps, leads)

	// Kill a node: after --down-after its replicas are made again on the
	// others.
	victim := c.Nodes[2]
	var victimID uint64
	for _, n := range st.Nodes {
		if n.SQLAddress == victim.SQLAddr {
			victimID = n.ID
		}
	}
	victim.Kill()
	dead := map[uint64]bool{victimID: true}
	waitFor(fmt.Sprintf("every region has 3 replicas again after node %d was killed", victimID), 60*time.Second,
		func(st *scaleStatus) bool { return st.fullyReplicated(dead) })

	// Drain a node: it ends with no replica.
	drained := c.Nodes[1]
	var drainedID uint64
	for _, n := range st.Nodes {
		if n.SQLAddress == drained.SQLAddr {
			drainedID = n.ID
		}
	}
	out, err := exec.Command(Binary(t), "node", "drain", fmt.Sprint(drainedID), "--host", c.Nodes[0].HTTPAddr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "draining") {
		t.Fatalf("strata node drain %d: %v\n%s", drainedID, err, out)
	}
	dead[drainedID] = true
	st = waitFor(fmt.Sprintf("node %d drained", drainedID), 60*time.Second, func(st *scaleStatus) bool {
		reps, _ := st.counts()
		return reps[drainedID] == 0 && st.fullyReplicated(dead)
	})
	for _, n := range st.Nodes {
		if n.ID == drainedID && n.State != "draining" {
			t.Fatalf("node %d state %q", drainedID, n.State)
		}
	}

	stop()
	wg.Wait()
	if writes.Load() < 50 || reads.Load() < 50 {
		t.Fatalf("foreground traffic stalled: %d writes, %d reads", writes.Load(), reads.Load())
	}
	if gap := time.Duration(worstGap.Load()); gap > 15*time.Second {
		t.Fatalf("foreground traffic stopped for %v", gap)
	}
	t.Logf("%d writes and %d reads during the test; longest pause %v", writes.Load(), reads.Load(),
		time.Duration(worstGap.Load()).Round(time.Millisecond))
	// The same picture in SQL: the drained node holds nothing.
	var drainedReplicas int
	var placement string
	if err := db.QueryRow("SELECT replicas, placement_state FROM information_schema.cluster_nodes WHERE node_id = ?", drainedID).
		Scan(&drainedReplicas, &placement); err != nil || placement != "draining" {
		t.Fatalf("cluster_nodes for node %d: %d replicas, %q, %v", drainedID, drainedReplicas, placement, err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM scale.t").Scan(&n); err != nil || n != rows {
		t.Fatalf("rows after it all: %d, %v", n, err)
	}
}
