package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Membership churn. A fault adds a node and removes another, the way an
// operator replaces a machine: the spare joins, a random member is
// decommissioned (PD moves its replicas off: learner, snapshot, joint
// consensus, removal), stopped, and its data directory erased. Healing
// does it the other way round: the erased node joins again as a new
// member (a new node id), and the spare is decommissioned and stopped.
// Clients keep dialling the same addresses, so a removed node looks to
// them like a node that is down until it returns.

// membershipWait bounds each step (a join, a decommission) of a churn.
const membershipWait = 3 * time.Minute

// nodeEntry is one node of /status as the churn needs it.
type nodeEntry struct {
	ID       uint64
	Up       bool
	State    string
	Replicas int
}

// members lists /status's nodes whose addresses are n's.
func (c *Cluster) members(n *Node) ([]nodeEntry, error) {
	st, err := c.Status()
	if err != nil {
		return nil, err
	}
	var raw struct {
		Nodes []struct {
			ID       uint64 `json:"id"`
			Address  string `json:"address"`
			SQL      string `json:"sql_address"`
			Up       bool   `json:"up"`
			State    string `json:"state"`
			Replicas int    `json:"replicas"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(st.Raw, &raw); err != nil {
		return nil, fmt.Errorf("/status: %v", err)
	}
	var out []nodeEntry
	for _, e := range raw.Nodes {
		if e.Address == n.Advertise || e.Address == n.GRPCAddr() {
			out = append(out, nodeEntry{e.ID, e.Up, e.State, e.Replicas})
		}
	}
	return out, nil
}

// memberID is n's current node id: the entry with its address that is
// not decommissioned.
func (c *Cluster) memberID(n *Node) (uint64, error) {
	es, err := c.members(n)
	if err != nil {
		return 0, err
	}
	for _, e := range es {
		if e.State != "decommissioned" {
			return e.ID, nil
		}
	}
	return 0, fmt.Errorf("%s is not a member", n.Name)
}

// adminPost posts to a node's /admin path as root, trying every running
// node (one may be the one being removed, or down).
func (c *Cluster) adminPost(path string) error {
	var last error
	for _, m := range c.all() {
		if !m.Running() {
			continue
		}
		req, err := http.NewRequest(http.MethodPost, httpURL(m.HTTPAddr(), path), nil)
		if err != nil {
			return err
		}
		req.SetBasicAuth("root", rootPassword)
		resp, err := c.httpc.Do(req)
		if err != nil {
			last = err
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("%s %s: %s %s", m.Name, path, resp.Status, strings.TrimSpace(string(body)))
		if resp.StatusCode < 500 {
			return last
		}
	}
	return last
}

// decommission asks PD to move every replica off n, waits until PD has
// marked it decommissioned, stops it and erases its data directory. Its
// command line gains --join (to every other member) first, so that
// whatever starts it next joins as a new node instead of bootstrapping a
// second cluster.
func (c *Cluster) decommission(ctx context.Context, n *Node) error {
	id, err := c.memberID(n)
	if err != nil {
		return err
	}
	if err := c.adminPost(fmt.Sprintf("/admin/nodes/%d/decommission", id)); err != nil {
		return err
	}
	c.Log("%s (node %d) decommissioning", n.Name, id)
	deadline := time.Now().Add(membershipWait)
	for {
		es, err := c.members(n)
		done := false
		if err == nil {
			for _, e := range es {
				done = done || (e.ID == id && e.State == "decommissioned")
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (node %d) not decommissioned after %v: %+v %v", n.Name, id, membershipWait, es, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	c.Log("%s (node %d) decommissioned", n.Name, id)
	c.setJoin(n)
	if err := c.Stop(n, 20*time.Second); err != nil {
		return err
	}
	return os.RemoveAll(n.DataDir)
}

// setJoin makes n's command line join every other node of the cluster.
func (c *Cluster) setJoin(n *Node) {
	var join []string
	for _, m := range c.all() {
		if m != n {
			join = append(join, m.Advertise)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var args []string
	for i := 0; i < len(n.args); i++ {
		if n.args[i] == "--join" {
			i++
			continue
		}
		args = append(args, n.args[i])
	}
	n.args = append(args, "--join", strings.Join(join, ","))
}

// joinFresh starts n on an empty data directory and waits until it is
// ready and holds at least one replica.
func (c *Cluster) joinFresh(ctx context.Context, n *Node) error {
	c.setJoin(n)
	if err := os.RemoveAll(n.DataDir); err != nil {
		return err
	}
	if err := c.StartNode(ctx, n, 90*time.Second); err != nil {
		return err
	}
	deadline := time.Now().Add(membershipWait)
	for {
		es, err := c.members(n)
		for _, e := range es {
			if e.State == "serving" && e.Up && e.Replicas > 0 {
				c.Log("%s joined as node %d (%d replicas)", n.Name, e.ID, e.Replicas)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s joined but holds no replica after %v: %+v %v", n.Name, membershipWait, es, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func needSpare(c *Cluster) string {
	if len(c.Nodes) < 2 {
		return "needs a cluster"
	}
	if c.Spare == nil {
		return "needs a spare node (laid out when membership is asked for by name)"
	}
	return ""
}

// startMembership replaces a random running member by the spare; healing
// brings the member back as a new node and retires the spare. Steps run
// to the end even when the run's time is up (a half-done churn would
// leave the cluster a member short), bounded by membershipWait each.
func startMembership(ctx context.Context, nm *Nemesis) (map[string]any, func() error, error) {
	up := nm.running()
	if len(up) < len(nm.C.Nodes) {
		return map[string]any{}, nil, fmt.Errorf("a member is down: churn waits for a whole cluster")
	}
	victim := up[nm.Rand.Intn(len(up))]
	spare := nm.C.Spare
	desc := map[string]any{"add": spare.Name, "remove": victim.Name}
	bg := context.WithoutCancel(ctx)
	if err := nm.C.joinFresh(bg, spare); err != nil {
		return desc, func() error { return nm.C.decommission(bg, spare) }, err
	}
	if err := nm.C.decommission(bg, victim); err != nil {
		return desc, func() error { return nm.C.rejoin(bg, victim, spare) }, err
	}
	return desc, func() error { return nm.C.rejoin(bg, victim, spare) }, nil
}

// rejoin brings victim back (as a new node when it was removed) and
// retires spare.
func (c *Cluster) rejoin(ctx context.Context, victim, spare *Node) error {
	if !victim.Running() {
		if err := c.joinFresh(ctx, victim); err != nil {
			return err
		}
	} else if es, err := c.members(victim); err == nil {
		// A decommission that did not finish: the victim serves again.
		for _, e := range es {
			if e.State == "decommissioning" {
				if err := c.adminPost(fmt.Sprintf("/admin/nodes/%d/resume", e.ID)); err != nil {
					return err
				}
			}
		}
	}
	if !spare.Running() {
		return nil
	}
	return c.decommission(ctx, spare)
}
