package pd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// A PD server (a real one, on a one-store raft store) fed store heartbeats
// of four stores that hold four regions, one led by each: as the stores
// report only the regions whose report changed (node/report.go), PD keeps
// the others' last reports and runs its checkers over every region a
// store leads only on a patrol.

type hbCluster struct {
	t   *testing.T
	s   *Server
	led map[uint64][]*kvpb.RegionStat // by leader store
}

// testRegion: region id on the stores, led by the first one's peer.
func testRegion(id uint64, stores ...uint64) *kvpb.RegionStat {
	r := &kvpb.Region{Id: id, StartKey: []byte(fmt.Sprintf("k%03d", id)), EndKey: []byte(fmt.Sprintf("k%03d", id+1)),
		Epoch: &kvpb.RegionEpoch{ConfVer: 5, Version: 5}}
	st := &kvpb.RegionStat{Region: r, Term: 6, CommitIndex: 10, AppliedIndex: 10, ApproximateSize: 1 << 10, ApproximateKeys: 7}
	for _, s := range stores {
		p := &kvpb.Peer{Id: id*10 + s, StoreId: s}
		r.Peers = append(r.Peers, p)
		st.Progress = append(st.Progress, &kvpb.PeerProgress{PeerId: p.Id, Match: 10, Active: true})
	}
	st.Leader = r.Peers[0]
	return st
}

func startHBCluster(t *testing.T, cfg Config) *hbCluster {
	s, stop := openPDWith(t, t.TempDir(), true, cfg)
	t.Cleanup(stop)
	c := &hbCluster{t: t, s: s, led: map[uint64][]*kvpb.RegionStat{
		1: {testRegion(SystemRegionID, 1, 2, 3), testRegion(100, 1, 2, 3)},
		2: {testRegion(101, 2, 1, 4)},
		3: {testRegion(102, 3, 1, 4)},
		4: {testRegion(103, 4, 2, 3)},
	}}
	// A first heartbeat without every region: PD asks for them all.
	for store := uint64(1); store <= 4; store++ {
		if resp := c.heartbeat(store, false); !resp.ReportAllRegions {
			t.Fatalf("PD without a complete report from store %d did not ask for one", store)
		}
	}
	for store := uint64(4); store >= 1; store-- {
		resp := c.heartbeat(store, true, c.led[store]...)
		if resp.ReportAllRegions || len(resp.Operators) > 0 {
			t.Fatalf("store %d's complete report: %v", store, resp)
		}
	}
	return c
}

func (c *hbCluster) heartbeat(store uint64, complete bool, regions ...*kvpb.RegionStat) *kvpb.StoreHeartbeatResponse {
	c.t.Helper()
	resp, err := c.s.StoreHeartbeat(context.Background(), &kvpb.StoreHeartbeatRequest{
		Store:   &kvpb.Store{Id: store, Address: fmt.Sprintf("127.0.0.1:%d", 1000+store)},
		Regions: regions, RegionsComplete: complete, LeaderCount: uint32(len(c.led[store])), ReplicaCount: 3})
	if err != nil || resp.Error != nil {
		c.t.Fatalf("heartbeat of store %d: %v %v", store, err, resp.GetError())
	}
	return resp
}

func (c *hbCluster) status() *kvpb.ClusterStatusResponse {
	c.t.Helper()
	resp, err := c.s.ClusterStatus(context.Background(), &kvpb.ClusterStatusRequest{})
	if err != nil || resp.Error != nil {
		c.t.Fatalf("cluster status: %v %v", err, resp.GetError())
	}
	return resp
}

func (c *hbCluster) lead() *leaderState {
	c.s.leadMu.Lock()
	defer c.s.leadMu.Unlock()
	return c.s.lead
}

func opsString(ops []*kvpb.Operator) string {
	out := ""
	for _, op := range ops {
		out += fmt.Sprintf("[region %d %s store %d] ", op.RegionId, op.Kind, op.Peer.GetStoreId())
	}
	return out
}

// Heartbeats that report no region keep the directory's reports: the
// regions, their leaders, sizes and keys stay in the cluster status, and
// the leader counts are the stores' own.
func TestHeartbeatWithoutRegionsKeepsReports(t *testing.T) {
	c := startHBCluster(t, Config{})
	for store := uint64(1); store <= 4; store++ {
		if resp := c.heartbeat(store, false); resp.ReportAllRegions || len(resp.Operators) > 0 {
			t.Fatalf("store %d's heartbeat without regions: %v", store, resp)
		}
	}
	st := c.status()
	if len(st.Regions) != 5 {
		t.Fatalf("%d regions in the status, want 5", len(st.Regions))
	}
	for _, r := range st.Regions {
		found := false
		for _, w := range c.led[r.Leader.GetStoreId()] {
			found = found || w.Region.Id == r.Region.Id
		}
		if !found || r.ApproximateSize != 1<<10 || r.ApproximateKeys != 7 || r.CommitIndex != 10 || len(r.Progress) != 3 {
			t.Fatalf("region %d in the status: %v", r.Region.Id, r)
		}
	}
	for _, ss := range st.Stores {
		if int(ss.LeaderCount) != len(c.led[ss.Store.Id]) || !ss.Up {
			t.Fatalf("store %d in the status: %v", ss.Store.Id, ss)
		}
	}
	// A region's traffic is reported while it lasts, and its end.
	hot := testRegion(100, 1, 2, 3)
	hot.ReadBytes, hot.ReadQueries, hot.IntervalMs = 4000, 10, 1000
	c.heartbeat(1, true, hot)
	if r := c.status().Regions[1]; r.Region.Id != 100 || r.ReadBytesPerSec != 4000 || r.ReadQps != 10 {
		t.Fatalf("region with traffic: %v", r)
	}
	c.heartbeat(1, true, testRegion(100, 1, 2, 3))
	c.heartbeat(1, false)
	if r := c.status().Regions[1]; r.Region.Id != 100 || r.ReadBytesPerSec != 0 || r.ReadQps != 0 {
		t.Fatalf("region whose traffic ended: %v", r)
	}
}

// A settled cluster's checkers run over the regions nobody reported only
// every patrolInterval: a region that needs a replica, known to the
// directory but not in the heartbeat, gets its operator at the next
// patrol, not before.
func TestPatrolRunsOnTimer(t *testing.T) {
	c := startHBCluster(t, Config{})
	// Region 100 as if its report had lost a replica (a report the
	// heartbeat did not carry).
	c.lead().dir.update(testRegion(100, 1, 2))
	if resp := c.heartbeat(1, false); len(resp.Operators) > 0 {
		t.Fatalf("operators before the patrol was due: %s", opsString(resp.Operators))
	}
	c.lead().storesMu.Lock()
	c.lead().stores[1].lastPatrol = time.Now().Add(-patrolInterval)
	c.lead().storesMu.Unlock()
	resp := c.heartbeat(1, false)
	if len(resp.Operators) != 1 || resp.Operators[0].RegionId != 100 || resp.Operators[0].Kind != kvpb.OperatorKind_AddLearner {
		t.Fatalf("patrol: %s, want a learner for region 100", opsString(resp.Operators))
	}
	// With an operator in flight every heartbeat patrols, and decides
	// no second one for the region.
	if resp := c.heartbeat(1, false); len(resp.Operators) > 0 {
		t.Fatalf("second operator: %s", opsString(resp.Operators))
	}
}

// A store down longer than DownAfter has its replicas replaced although no
// region's report changed: the stores' states changed, so the next
// heartbeat of each leader patrols its regions.
func TestDownStoreRepairedWithoutReports(t *testing.T) {
	downAfter := 2 * time.Second
	c := startHBCluster(t, Config{Schedule: ScheduleConfig{DownAfter: downAfter}})
	// Store 4 stops; the others keep heartbeating without regions.
	want := map[uint64]uint64{101: 3, 102: 2} // region -> the store that gets a learner
	deadline := time.Now().Add(4 * downAfter)
	for len(want) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no repair of %v", want)
		}
		for store := uint64(1); store <= 3; store++ {
			resp := c.heartbeat(store, false)
			for _, op := range resp.Operators {
				if op.Kind != kvpb.OperatorKind_AddLearner || want[op.RegionId] != op.Peer.GetStoreId() {
					t.Fatalf("store %d got %s", store, opsString(resp.Operators))
				}
				delete(want, op.RegionId)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := c.status()
	for _, ss := range st.Stores {
		if ss.Up != (ss.Store.Id != 4) {
			t.Fatalf("store %d up=%v", ss.Store.Id, ss.Up)
		}
	}
}

// Two small regions split apart merge back once they are MinAge old, at
// the first heartbeat after, not at the next timed patrol: the patrol is
// due when a region comes of age.
func TestMergeWhenRegionsComeOfAge(t *testing.T) {
	minAge := time.Second
	c := startHBCluster(t, Config{Merge: &MergeConfig{MaxSize: 1 << 20, MaxKeys: 1000, MaxMergedSize: 1 << 30,
		MaxMergedKeys: 1 << 20, MaxRate: 1 << 20, MinAge: minAge,
		// The test regions' own boundaries (k101...) are not merged across.
		Boundary: func(key []byte) bool { return len(key) == 4 }}})
	// The right half on other stores, led from store 2: the stores stay
	// balanced, and the merge's first step is a replica move.
	left, right := testRegion(100, 1, 2, 3), testRegion(110, 2, 1, 4)
	left.Region.EndKey, right.Region.StartKey, right.Region.EndKey = []byte("k1005"), []byte("k1005"), []byte("k101")
	left.Region.Epoch.Version, right.Region.Epoch.Version = 6, 6
	split := time.Now()
	c.heartbeat(1, false, left)
	c.heartbeat(2, false, right)
	for {
		resp := c.heartbeat(1, false)
		if len(resp.Operators) > 0 {
			op := resp.Operators[0]
			if len(resp.Operators) != 1 || op.RegionId != 100 || !strings.HasPrefix(op.Reason, "merge into region 110") {
				t.Fatalf("after the split: %s", opsString(resp.Operators))
			}
			if took := time.Since(split); took < minAge || took > minAge+patrolInterval/2 {
				t.Fatalf("merge decided %v after the split (MinAge %v)", took, minAge)
			}
			return
		}
		if time.Since(split) > minAge+patrolInterval {
			t.Fatal("no merge")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A report that says nothing new (a sleeping region's once-a-minute
// report) refreshes the directory without a scheduling round; a report
// with anything changed gets one.
func TestUnchangedReportsAreNotScheduled(t *testing.T) {
	c := startHBCluster(t, Config{})
	builds := func() int {
		c.lead().storesMu.Lock()
		defer c.lead().storesMu.Unlock()
		return c.lead().clusterBuilds
	}
	before := builds()
	again := testRegion(100, 1, 2, 3)
	again.IntervalMs = 60000
	c.heartbeat(1, true, testRegion(SystemRegionID, 1, 2, 3), again)
	if n := builds() - before; n != 0 {
		t.Fatalf("%d scheduling rounds for unchanged reports, want 0", n)
	}
	for _, change := range []func(*kvpb.RegionStat){
		func(r *kvpb.RegionStat) { r.ApproximateSize++ },
		func(r *kvpb.RegionStat) { r.CommitIndex++ },
		func(r *kvpb.RegionStat) { r.Progress[1].Match-- },
		func(r *kvpb.RegionStat) { r.Region.Epoch.ConfVer++ },
		func(r *kvpb.RegionStat) { r.WrittenKeys = 3 },
	} {
		r := testRegion(101, 2, 1, 4)
		change(r)
		before := builds()
		c.heartbeat(2, true, r)
		if n := builds() - before; n != 1 {
			t.Fatalf("%d scheduling rounds for a changed report %v, want 1", n, r)
		}
		c.heartbeat(2, true, testRegion(101, 2, 1, 4)) // back as it was
	}
}

// A store that stopped heartbeating a few seconds ago is not down yet (it
// may be restarting), but it takes no leaders: a region whose leader moved
// to a store killed a moment ago would stall for an election timeout.
// Store 4 dies; region 103, which it led, fails over to store 2, and the
// leader balancer, which would give the leaderless store 4 a leader, gives
// it none until it heartbeats again.
func TestSilentStoreTakesNoLeaders(t *testing.T) {
	c := startHBCluster(t, Config{})
	// Stores 1 to 3 lead every data region (store 4 none): unbalanced
	// enough that store 4 gets a leader once it is heard from.
	failedOver := testRegion(103, 2, 4, 3)
	failedOver.Region.Peers[0].Id, failedOver.Region.Peers[1].Id = 1034, 1032
	c.led[2], c.led[4] = append(c.led[2], failedOver, testRegion(104, 2, 4, 3)), nil
	c.lead().storesMu.Lock()
	c.lead().stores[4].lastHeartbeat = time.Now().Add(-silentAfter)
	c.lead().storesMu.Unlock()
	toStore4 := func(ops []*kvpb.Operator) bool {
		for _, op := range ops {
			if op.Peer.GetStoreId() == 4 {
				return true
			}
		}
		return false
	}
	for store := uint64(1); store <= 3; store++ {
		if resp := c.heartbeat(store, true, c.led[store]...); toStore4(resp.Operators) {
			t.Fatalf("store 4, silent for %v, got %s", silentAfter, opsString(resp.Operators))
		}
	}
	if st := c.status(); !st.Stores[3].Up {
		t.Fatalf("store 4 counted down after %v: %v", silentAfter, st.Stores[3])
	}
	// Store 4 is back: the balancer moves a leader to it.
	c.heartbeat(4, true)
	var moved *kvpb.Operator
	for store := uint64(1); store <= 3 && moved == nil; store++ {
		for _, op := range c.heartbeat(store, true, c.led[store]...).Operators {
			if op.Peer.GetStoreId() == 4 {
				moved = op
			}
		}
	}
	if moved == nil {
		t.Fatal("store 4, heard from again, got no leader")
	}
	// The region a balancer moved cools down: the balancers leave it
	// alone for BalanceCooldown.
	st := c.lead()
	st.storesMu.Lock()
	cooling := c.s.clusterLocked(st, time.Now()).Cooling[moved.RegionId]
	later := c.s.clusterLocked(st, time.Now().Add(DefaultScheduleConfig().BalanceCooldown)).Cooling[moved.RegionId]
	st.storesMu.Unlock()
	if !cooling || later {
		t.Fatalf("region %d cooling after its move: %v, after BalanceCooldown: %v", moved.RegionId, cooling, later)
	}
}
