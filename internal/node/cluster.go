package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/kvserver"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/kvpb"
)

// The node's place in the cluster: its identity (bootstrap, join, or its
// data directory), its heartbeats to PD and the operators PD answers with.

// identify reads the node's identity from its data directory, or creates
// it: by bootstrapping a cluster (no Join) or joining one.
func (n *Node) identify(ctx context.Context) error {
	v, ok, err := engine.GetCopy(n.eng.KV, engine.StoreIdentKey())
	if err != nil {
		return err
	}
	if ok {
		if len(v) != 16 {
			return fmt.Errorf("data directory %s: corrupt store identity", n.cfg.DataDir)
		}
		n.clusterID, n.storeID = binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])
		if len(n.cfg.Join) > 0 {
			return n.checkCluster(ctx)
		}
		return nil
	}
	if len(n.cfg.Join) == 0 {
		return n.bootstrap()
	}
	return n.joinCluster(ctx)
}

// bootstrap writes the identity and the initial regions and PD state of a
// brand-new cluster whose first store this is.
func (n *Node) bootstrap() error {
	var id [8]byte
	for binary.BigEndian.Uint64(id[:]) == 0 {
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
	}
	n.clusterID, n.storeID = binary.BigEndian.Uint64(id[:]), firstStoreID
	epoch := func() *kvpb.RegionEpoch { return &kvpb.RegionEpoch{ConfVer: 1, Version: 1} }
	sys := &kvpb.Region{Id: pd.SystemRegionID, StartKey: []byte{}, EndKey: []byte{}, Epoch: epoch(),
		Peers: []*kvpb.Peer{{Id: systemPeerID, StoreId: firstStoreID}}}
	data := &kvpb.Region{Id: dataRegionID, StartKey: []byte{}, EndKey: []byte{}, Epoch: epoch(),
		Peers: []*kvpb.Peer{{Id: dataPeerID, StoreId: firstStoreID}}}
	for _, r := range []*kvpb.Region{sys, data} {
		if err := raftstore.BootstrapRegion(n.eng, r); err != nil {
			return err
		}
	}
	replicas := n.cfg.Replicas
	if replicas <= 0 {
		replicas = pd.DefaultReplicas
	}
	first := n.describeStore()
	first.Id = firstStoreID
	if err := pd.Bootstrap(n.eng, n.clusterID, uint32(replicas), first); err != nil {
		return err
	}
	// The identity is written last: a crash before this point re-runs the
	// (idempotent) bootstrap on the next start.
	return n.writeIdent()
}

func (n *Node) writeIdent() error {
	ident := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, n.clusterID), n.storeID)
	if err := n.eng.KV.Set(engine.StoreIdentKey(), ident, pebble.NoSync); err != nil {
		return err
	}
	return n.eng.KV.Flush() // the KV engine has no WAL
}

// askJoin sends a Join request to the join addresses in turn until one
// answers.
func (n *Node) askJoin(ctx context.Context, req *kvpb.JoinRequest) (*kvpb.JoinResponse, string, error) {
	var last error
	for _, addr := range n.cfg.Join {
		conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, n.dialOpts...)...)
		if err != nil {
			last = err
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := kvpb.NewPDClient(conn).Join(rctx, req)
		cancel()
		conn.Close()
		if err != nil {
			last = fmt.Errorf("%s: %w", addr, err)
			continue
		}
		if resp.Error != nil {
			if strings.Contains(resp.Error.Message, pd.ErrOtherCluster.Error()) {
				return resp, addr, fmt.Errorf("%s belongs to another cluster (%x) than this node's data directory %s (%x)",
					addr, resp.ClusterId, n.cfg.DataDir, req.ClusterId)
			}
			last = fmt.Errorf("%s: %s", addr, resp.Error.Message)
			continue
		}
		return resp, addr, nil
	}
	return nil, "", last
}

// joinCluster gets a store id from the cluster the join addresses belong
// to and records the identity.
func (n *Node) joinCluster(ctx context.Context) error {
	deadline := time.Now().Add(clusterWait)
	for attempt := 0; ; attempt++ {
		resp, addr, err := n.askJoin(ctx, &kvpb.JoinRequest{Store: n.storeInfo})
		if err == nil {
			n.clusterID, n.storeID = resp.ClusterId, resp.StoreId
			n.log.Info("joined the cluster", "via", addr, "cluster", fmt.Sprintf("%x", n.clusterID), "store", n.storeID)
			return n.writeIdent()
		}
		if resp != nil && resp.ClusterId != 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cannot join the cluster at %s: %v", strings.Join(n.cfg.Join, ","), err)
		}
		if attempt%10 == 0 {
			n.log.Info("waiting for the cluster to accept this node", "join", strings.Join(n.cfg.Join, ","), "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkCluster makes sure a restarted node's join addresses belong to its
// own cluster. Unreachable addresses are not an error (the other nodes
// may be restarting too); another cluster is.
func (n *Node) checkCluster(ctx context.Context) error {
	info := n.describeStore()
	info.Id = n.storeID
	resp, _, err := n.askJoin(ctx, &kvpb.JoinRequest{ClusterId: n.clusterID, Store: info})
	if err != nil && resp != nil && resp.ClusterId != 0 && resp.ClusterId != n.clusterID {
		return err
	}
	if err != nil {
		n.log.Info("could not reach the cluster yet; starting anyway", "join", strings.Join(n.cfg.Join, ","), "err", err)
	}
	return nil
}

// describeStore is what the node tells the cluster about itself.
func (n *Node) describeStore() *kvpb.Store {
	st := &kvpb.Store{Id: n.storeID, Address: n.cfg.AdvertiseAddr, Version: n.cfg.Version, StartUnixMs: n.started.UnixMilli()}
	if a := n.SQLAddr(); a != nil {
		st.SqlAddress = a.String()
	}
	if a := n.RESPAddr(); a != nil {
		st.RespAddress = a.String()
	}
	if n.http != nil && len(n.lns) > 0 {
		for _, ln := range n.lns {
			if ln != n.grpcLn {
				st.HttpAddress = ln.Addr().String()
			}
		}
	}
	return st
}

// waitCluster waits until the cluster serves this node: PD's leader is
// reachable and hands out timestamps.
func (n *Node) waitCluster(ctx context.Context) error {
	deadline := time.Now().Add(clusterWait)
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := n.pd.NextTimestampAnywhere(rctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node: the cluster did not answer within %v: %v", clusterWait, err)
		}
		if attempt > 0 && attempt%50 == 0 {
			n.log.Info("waiting for the cluster (a leader of the placement driver)", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// onLeaderChange is the raft store's callback: leadership of a local
// replica changed. PD learns of it at once (a heartbeat now, and its own
// leadership when the region is the system region).
func (n *Node) onLeaderChange(regionID uint64, leader bool) {
	// The store runs this on its loop, from before PD's server exists;
	// the server's own watcher notices a change this misses.
	if p := n.pdReady.Load(); regionID == pd.SystemRegionID && p != nil {
		p.LeaderChanged(leader)
	}
	if !leader && regionID != pd.SystemRegionID { // the system region holds no data
		// The region's pessimistic locks were this leader's memory; the
		// new leader does not know them, and kept here they would block
		// writers if the leadership came back (mvcc.PessimisticLocks).
		if s := n.storeReady.Load(); s != nil {
			if p, ok := s.Peer(regionID); ok {
				r := p.Region()
				n.locks.PessimisticLocks().DropRange(r.StartKey, r.EndKey)
			}
		}
	}
	n.triggerHeartbeat()
}

// persistLocks moves region regionID's in-memory pessimistic locks into the
// engine through Raft before this store hands the region's leadership over
// (kvserver.PersistPessimisticLocks). A failure only loses the locks, as the
// handover would have: their transactions re-check their keys at prewrite.
func (n *Node) persistLocks(ctx context.Context, regionID uint64) {
	moved, err := n.kv.PersistPessimisticLocks(ctx, regionID)
	if err != nil {
		n.log.Warn("pessimistic locks not persisted before a leadership handover", "region", regionID, "err", err)
	} else if moved > 0 {
		n.log.Debug("pessimistic locks persisted before a leadership handover", "region", regionID, "locks", moved)
	}
}

// onMergeCommitted is the raft store's callback: a local replica took
// region source in by a merge. The source's pessimistic locks this store
// holds (its leader was here) stay valid when this store leads the merged
// region; otherwise they go, as on a loss of leadership (a transaction that
// finds its lock gone re-checks the key at prewrite).
func (n *Node) onMergeCommitted(source *kvpb.Region, targetLeads bool) {
	if !targetLeads {
		n.locks.PessimisticLocks().DropRange(source.StartKey, source.EndKey)
	}
	n.triggerHeartbeat()
}

// mergeConfig is PD's merge checker configuration (nil: no merges).
func (n *Node) mergeConfig() *pd.MergeConfig {
	if n.cfg.MaxMergeRegionSize < 0 {
		return nil
	}
	cfg := pd.DefaultMergeConfig()
	if n.cfg.MaxMergeRegionSize > 0 {
		cfg.MaxSize = uint64(n.cfg.MaxMergeRegionSize)
	}
	if n.cfg.MaxMergeRegionKeys > 0 {
		cfg.MaxKeys = uint64(n.cfg.MaxMergeRegionKeys)
	}
	if n.cfg.SplitMergeInterval > 0 {
		cfg.MinAge = n.cfg.SplitMergeInterval
	}
	// The merged region must stay below what the split checker splits.
	maxSize := n.cfg.RegionMaxSize
	if maxSize <= 0 {
		maxSize = DefaultRegionMaxSize
	}
	cfg.MaxMergedSize = uint64(maxSize)
	if cfg.MaxSize > cfg.MaxMergedSize/2 {
		cfg.MaxSize = cfg.MaxMergedSize / 2
	}
	if n.cfg.SplitTable {
		cfg.Boundary = func(key []byte) bool {
			tid, ok := tablecodec.TableIDOf(key)
			return ok && bytes.Equal(key, tablecodec.TablePrefix(tid))
		}
	}
	return &cfg
}

func (n *Node) triggerHeartbeat() {
	select {
	case n.hbNow <- struct{}{}:
	default:
	}
}

func (n *Node) heartbeatLoop() {
	defer n.wg.Done()
	t := time.NewTicker(heartbeatTick)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-n.hbNow:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.heartbeat(ctx)
		cancel()
	}
}

// heartbeat reports this store and the regions it leads whose report
// changed (report.go) to PD, and starts the operators PD answers with.
func (n *Node) heartbeat(ctx context.Context) {
	info := n.describeStore()
	req := &kvpb.StoreHeartbeatRequest{ClusterId: n.clusterID, Store: info}
	var led []*kvpb.RegionStat
	for _, p := range n.store.Peers() {
		if !p.Initialized() {
			continue
		}
		req.ReplicaCount++
		if p.IsLeaderReady() {
			led = append(led, n.regionStat(p))
		}
	}
	now := time.Now()
	req.LeaderCount = uint32(len(led))
	req.Regions, req.RegionsComplete = n.reports.pick(led, now) // report.go
	resp, err := n.pd.StoreHeartbeat(ctx, req)
	if err != nil || resp.Error != nil {
		if err == nil {
			err = errors.New(resp.Error.Message)
		}
		n.log.Debug("heartbeat to PD failed", "err", err)
		return
	}
	n.reports.sent(req.Regions, led, now)
	if resp.ReportAllRegions {
		n.reports.reportAll()
		n.triggerHeartbeat()
	}
	n.pd.ObserveHeartbeat(resp)
	// Replicas whose leader's store is down elect another (hibernating
	// ones would not notice).
	for _, id := range resp.DownStores {
		n.store.StoreLost(id)
	}
	for _, op := range resp.Operators {
		n.runOperator(op)
	}
}

// regionStat is what a leader reports of its region: its Raft state, its
// size and its traffic since the previous report (which also feeds the
// load-based split checker).
//
// A hibernating leader's Raft state cannot change while it sleeps, so its
// last report is reused as it was while no traffic reached it, for up to
// sleepStatTTL (then it is read afresh, for the size): 2,000 idle regions
// cost the node a fifth of its idle CPU in Status otherwise
// (bench/idle.sh). The heartbeat then sends it only when it differs from
// the one last sent (report.go).
func (n *Node) regionStat(p *raftstore.Peer) *kvpb.RegionStat {
	r := p.Region()
	var f kvserver.Flow
	if r.Id != pd.SystemRegionID {
		f = n.kv.TakeFlow(r.Id)
		n.split.observeFlow(r.Id, f)
		if out := n.sleepingStat(p, r, f); out != nil {
			return out
		}
	}
	st := p.Status()
	out := &kvpb.RegionStat{Region: r, Term: st.Term, CommitIndex: st.Commit, AppliedIndex: st.Applied}
	if r.Id != pd.SystemRegionID {
		out.ReadBytes, out.WrittenBytes, out.ReadKeys, out.WrittenKeys = f.ReadBytes, f.WriteBytes, f.ReadKeys, f.WriteKeys
		out.ReadQueries, out.WriteQueries, out.IntervalMs = f.ReadQueries, f.WriteQueries, uint64(f.Interval.Milliseconds())
		out.ApproximateSize, out.ApproximateKeys = n.reportedSize(r)
	}
	for _, rp := range r.Peers {
		if rp.Id == p.ID() {
			out.Leader = rp
		}
	}
	for _, pr := range st.Progress {
		out.Progress = append(out.Progress, &kvpb.PeerProgress{PeerId: pr.PeerID, Match: pr.Match, Active: pr.Active})
	}
	n.sleepStats.Lock()
	if p.Asleep() {
		if n.sleepStats.m == nil {
			n.sleepStats.m = map[uint64]sleepStat{}
		}
		// Kept without this interval's traffic: it is sent again only
		// for intervals without any.
		c := &kvpb.RegionStat{Region: r, Leader: out.Leader, Term: out.Term, CommitIndex: out.CommitIndex,
			AppliedIndex: out.AppliedIndex, Progress: out.Progress,
			ApproximateSize: out.ApproximateSize, ApproximateKeys: out.ApproximateKeys}
		n.sleepStats.m[r.Id] = sleepStat{stat: c, at: time.Now()}
	} else {
		delete(n.sleepStats.m, r.Id)
	}
	n.sleepStats.Unlock()
	return out
}

// sleepStatTTL bounds how long a sleeping region's report is reused.
const sleepStatTTL = time.Minute

type sleepStat struct {
	stat *kvpb.RegionStat
	at   time.Time
}

// sleepingStat returns the report last made for p's region if its
// leader has slept since, with the same descriptor, and nothing was read
// or written in the interval f covers; nil otherwise.
func (n *Node) sleepingStat(p *raftstore.Peer, r *kvpb.Region, f kvserver.Flow) *kvpb.RegionStat {
	if !p.Asleep() || f.ReadQueries != 0 || f.WriteQueries != 0 || f.ReadBytes != 0 || f.WriteBytes != 0 || len(f.Samples) > 0 {
		return nil
	}
	n.sleepStats.Lock()
	defer n.sleepStats.Unlock()
	c, ok := n.sleepStats.m[r.Id]
	if !ok || c.stat.Region != r || time.Since(c.at) > sleepStatTTL {
		return nil
	}
	return c.stat
}

// operators tracks the operators running on this node, one per region,
// and the one to run next for a region whose operator is still running
// (PD decided it from a report that raced the running one's end).
type operators struct {
	mu      sync.Mutex
	running map[uint64]bool
	next    map[uint64]*kvpb.Operator
}

// runOperator carries out an operator PD handed this node for a region it
// leads, in the background; one at a time per region.
func (n *Node) runOperator(op *kvpb.Operator) {
	n.ops.mu.Lock()
	if n.ops.running == nil {
		n.ops.running, n.ops.next = map[uint64]bool{}, map[uint64]*kvpb.Operator{}
	}
	if n.ops.running[op.RegionId] {
		n.ops.next[op.RegionId] = op
		n.ops.mu.Unlock()
		return
	}
	n.ops.running[op.RegionId] = true
	n.ops.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() {
			n.ops.mu.Lock()
			delete(n.ops.running, op.RegionId)
			next := n.ops.next[op.RegionId]
			delete(n.ops.next, op.RegionId)
			n.ops.mu.Unlock()
			if next != nil {
				n.runOperator(next)
			}
			// Report the change at once: the next step (leaving a joint
			// configuration, the next learner) need not wait a second.
			n.triggerHeartbeat()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		go func() {
			select {
			case <-n.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := n.applyOperator(ctx, op); errors.Is(err, raftstore.ErrTransfereeBehind) {
			// PD decides again from the next reports.
			n.log.Info("leader transfer refused", "region", op.RegionId, "err", err)
		} else if err != nil {
			n.log.Warn("operator failed", "region", op.RegionId, "kind", op.Kind.String(), "err", err)
		}
	}()
}

// transferRetry: how long a leader transfer waits for its transferee to be
// replicating in step (raftstore.ErrTransfereeBehind) before it is given
// up: a hibernating region's first heartbeats, a follower catching up
// with a few entries. A transferee that is gone is given up for PD to
// decide again; nothing waits on the region meanwhile.
const transferRetry = 3 * time.Second

func (n *Node) transferLeader(ctx context.Context, p *raftstore.Peer, op *kvpb.Operator) error {
	deadline := time.Now().Add(transferRetry)
	for {
		err := n.store.CheckTransfer(p, op.Peer.GetId())
		if err == nil {
			n.persistLocks(ctx, op.RegionId) // the next leader has them
			return n.store.TransferLeader(p, op.Peer.GetId())
		}
		if !errors.Is(err, raftstore.ErrTransfereeBehind) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *Node) applyOperator(ctx context.Context, op *kvpb.Operator) error {
	p, ok := n.store.Peer(op.RegionId)
	if !ok || !p.IsLeaderReady() {
		return nil // no longer led here
	}
	r := p.Region()
	if op.Epoch.GetConfVer() != r.Epoch.GetConfVer() || op.Epoch.GetVersion() != r.Epoch.GetVersion() {
		return nil // decided on a region that has moved on
	}
	var kind raftstore.ChangeKind
	switch op.Kind {
	case kvpb.OperatorKind_Merge:
		if p.Merging() != nil {
			return nil // prepared already; the store finishes it
		}
		// The source's leadership may have to move to the target's
		// store, and a frozen source proposes nothing: its in-memory
		// locks go to the engine first, where the merge carries them.
		n.persistLocks(ctx, op.RegionId)
		err := n.store.PrepareMerge(ctx, p, r.Epoch, op.Target.GetId())
		if err == nil {
			n.log.Info("merging regions", "source", op.RegionId, "target", op.Target.GetId(), "reason", op.Reason)
		}
		return err
	case kvpb.OperatorKind_TransferLeader:
		return n.transferLeader(ctx, p, op)
	case kvpb.OperatorKind_AddLearner:
		kind = raftstore.AddLearner
	case kvpb.OperatorKind_PromoteLearner:
		kind = raftstore.PromoteLearner
	case kvpb.OperatorKind_DemoteVoter:
		kind = raftstore.DemoteVoter
	case kvpb.OperatorKind_RemovePeer:
		kind = raftstore.RemovePeer
	case kvpb.OperatorKind_LeaveJoint:
		kind = raftstore.LeaveJoint
	default:
		return fmt.Errorf("unknown operator %v", op.Kind)
	}
	change := raftstore.PeerChange{Kind: kind, Peer: op.Peer}
	if kind == raftstore.LeaveJoint {
		change.Peer = nil
	}
	_, err := n.store.ChangePeers(ctx, p, r.Epoch, []raftstore.PeerChange{change})
	if err == nil {
		n.log.Info("membership changed", "region", op.RegionId, "change", kind.String(), "peer", op.Peer.GetId(), "store", op.Peer.GetStoreId())
	}
	return err
}
