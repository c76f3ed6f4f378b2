package node

import (
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
		if err != nil || resp.Error != nil || resp.Region == nil {
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
