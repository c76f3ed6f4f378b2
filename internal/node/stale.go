package node

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// Stale replicas the raft store cannot find by itself (raftstore/stale.go):
// a replica removed from its region while it could not hear of it, which
// sends nothing (a learner never campaigns) and is never given a newer
// replica on this store. Every staleCheckInterval, each initialized
// replica that has not heard from a leader for staleAfter is looked up in
// PD's region directory; when PD's descriptor, at a newer conf version,
// does not list it, it is destroyed. PD's directory is what leaders
// reported, so a descriptor there with a newer conf version was
// committed; peer ids are never reused.
//
// A replica of a region PD no longer knows at all may be a merge's source
// (frozen by PrepareMerge) whose target replica on this store was removed
// before it took the source in: no leader will ever speak to it again, and
// it would keep its range from every snapshot of the merged region. It is
// destroyed when mergedAway says nothing here can still need it.

const (
	staleCheckInterval = 5 * time.Second
	// staleAfter: well above an election timeout (1 s), so that a live
	// follower is never looked up.
	staleAfter = 10 * time.Second
	// staleAfterAsleep: the same for a hibernating replica.
	staleAfterAsleep = 5 * time.Minute
	// staleLookups bounds the PD lookups of one round.
	staleLookups = 64
)

func (n *Node) staleCheckLoop() {
	defer n.wg.Done()
	t := time.NewTicker(staleCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), staleCheckInterval)
		n.checkStale(ctx)
		cancel()
	}
}

// checkStale looks up the silent replicas in PD and destroys those PD's
// descriptor shows removed; it returns how many it destroyed.
func (n *Node) checkStale(ctx context.Context) int {
	destroyed, lookups := 0, 0
	for _, p := range n.store.Peers() {
		// A hibernating replica hears nothing by design: it is looked
		// up rarely.
		if !p.Initialized() || p.SilentFor() < staleAfter || p.Asleep() && p.SilentFor() < staleAfterAsleep {
			continue
		}
		if lookups++; lookups > staleLookups || ctx.Err() != nil {
			break
		}
		resp, err := n.pd.GetRegionByID(ctx, &kvpb.GetRegionByIDRequest{RegionId: p.RegionID()})
		if err != nil {
			continue
		}
		if resp.Region == nil {
			if n.checkMergedAway(ctx, p.Region()) && n.store.DestroyMergedAway(p.RegionID(), p.ID()) {
				n.log.Info("destroying a replica of a region merged away", "region", p.RegionID(), "peer", p.ID())
				destroyed++
			}
			continue
		}
		r := resp.Region
		if slices.ContainsFunc(r.Peers, func(rp *kvpb.Peer) bool { return rp.Id == p.ID() }) {
			p.MarkHeard() // a member: not looked up again for a while
			continue
		}
		if n.store.DestroyStale(p.RegionID(), p.ID(), r.Epoch.GetConfVer()) {
			n.log.Info("destroying a replica PD's region descriptor no longer lists", "region", p.RegionID(),
				"peer", p.ID(), "conf_version", r.Epoch.GetConfVer())
			destroyed++
		}
	}
	return destroyed
}

// checkMergedAway gathers what mergedAway decides on for local, the
// descriptor of a replica here whose region PD's directory does not hold:
// the region PD has at local's start key, this store's other initialized
// replicas, and PD's descriptors of those next to local.
func (n *Node) checkMergedAway(ctx context.Context, local *kvpb.Region) bool {
	resp, err := n.pd.GetRegion(ctx, &kvpb.GetRegionRequest{Key: local.StartKey})
	if err != nil || resp.Region == nil {
		return false
	}
	var replicas []*kvpb.Region
	for _, p := range n.store.Peers() {
		if p.RegionID() != local.Id && p.Initialized() {
			replicas = append(replicas, p.Region())
		}
	}
	return mergedAway(local, resp.Region, replicas, func(id uint64) *kvpb.Region {
		r, err := n.pd.GetRegionByID(ctx, &kvpb.GetRegionByIDRequest{RegionId: id})
		if err != nil {
			return nil
		}
		return r.Region
	})
}

// mergedAway reports whether this store's replica of region local, which
// PD's directory no longer holds, belongs to a region merged into others
// and nothing on this store can still need it. covering is PD's region at
// local's start key; replicas are this store's other initialized
// replicas; pdRegion looks a region up in PD (nil: unknown).
//
// Region versions only grow along a key range's history, and PD keeps a
// descriptor only while no newer one overlaps it. So a region other than
// local's at local's start key with a newer version than local's replica
// means local's range has moved on, and PD not knowing local's id means
// the region is gone (merged), not just changed. The replica may still
// be needed only by a replica here that is to take it in by applying the
// merge: one of covering's region, or a neighbour that has not caught up
// with PD's descriptor of it (a target applies CommitMerge with the
// source replica of its own store). A replica that needs it would be
// initialized; an uninitialized one waits for a snapshot, which brings
// the data.
func mergedAway(local, covering *kvpb.Region, replicas []*kvpb.Region, pdRegion func(id uint64) *kvpb.Region) bool {
	if covering == nil || covering.Id == local.Id || covering.Epoch.GetVersion() <= local.Epoch.GetVersion() {
		return false
	}
	for _, r := range replicas {
		if r.Id == covering.Id {
			return false
		}
		adjacent := (len(r.EndKey) > 0 && bytes.Equal(r.EndKey, local.StartKey)) ||
			(len(local.EndKey) > 0 && bytes.Equal(r.StartKey, local.EndKey))
		if !adjacent {
			continue
		}
		if pd := pdRegion(r.Id); pd == nil || pd.Epoch.GetVersion() != r.Epoch.GetVersion() {
			return false // may be the target, behind its merge
		}
	}
	return true
}
