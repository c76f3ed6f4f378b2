package pd

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// Scheduling. scheduleRegion is a pure function from what PD knows of the
// cluster (the stores, their liveness and replica counts, the replication
// factor) and what a region's leader reported (its peers and their
// progress) to the one change that region needs next, in TiKV's order:
//
//  1. a region left in a joint configuration leaves it;
//  2. a learner that has caught up with its leader's log (a snapshot and
//     the entries after it) is promoted, through joint consensus, while
//     the region has fewer voters than the replication factor, and is
//     removed otherwise;
//  3. a region with fewer replicas than the replication factor gets a
//     learner on the up store that holds no replica of it and the fewest
//     replicas overall.
//
// One change at a time per region: an operator handed out is remembered
// until the region's reported conf version moves past it, or until
// operatorTimeout (a leader that lost the operator, or a leader change).
// Balancing, repair of down stores and decommissioning come later
// (they add rules here, not mechanisms).

// caughtUpLag is how far behind its leader's commit index a learner may
// be and still count as caught up.
const caughtUpLag = 64

// operatorTimeout: an operator not seen done by then may be handed out
// again.
var operatorTimeout = 10 * time.Second

type inflightOp struct {
	op *kvpb.Operator
	at time.Time
}

// storeView is what the scheduler knows of one store.
type storeView struct {
	up       bool
	replicas int
}

// clusterView is what the scheduler knows of the cluster.
type clusterView struct {
	replicas int
	stores   map[uint64]storeView
}

// scheduleRegion returns the next change region r needs, or nil. An
// AddLearner operator's peer has no id yet (the caller allocates one).
func scheduleRegion(v clusterView, r *kvpb.RegionStat) *kvpb.Operator {
	region := r.Region
	op := func(kind kvpb.OperatorKind, peer *kvpb.Peer, reason string) *kvpb.Operator {
		return &kvpb.Operator{RegionId: region.Id, Epoch: region.Epoch, Kind: kind, Peer: peer, Reason: reason}
	}
	voters, learners := 0, 0
	for _, p := range region.Peers {
		switch p.Role {
		case kvpb.PeerRole_IncomingVoter, kvpb.PeerRole_DemotingVoter:
			return op(kvpb.OperatorKind_LeaveJoint, nil, "the membership is in a joint configuration")
		case kvpb.PeerRole_Voter:
			voters++
		case kvpb.PeerRole_Learner:
			learners++
		}
	}
	match := map[uint64]uint64{}
	for _, pr := range r.Progress {
		match[pr.PeerId] = pr.Match
	}
	for _, p := range region.Peers {
		if p.Role != kvpb.PeerRole_Learner {
			continue
		}
		m := match[p.Id]
		if m == 0 || m+caughtUpLag < r.CommitIndex || !v.stores[p.StoreId].up {
			continue
		}
		if voters < v.replicas {
			return op(kvpb.OperatorKind_PromoteLearner, p, fmt.Sprintf("%d of %d voters and the learner caught up", voters, v.replicas))
		}
		return op(kvpb.OperatorKind_RemovePeer, p, fmt.Sprintf("already %d voters", voters))
	}
	if voters+learners >= v.replicas {
		return nil
	}
	holds := map[uint64]bool{}
	for _, p := range region.Peers {
		holds[p.StoreId] = true
	}
	var best uint64
	for id, sv := range v.stores {
		if !sv.up || holds[id] {
			continue
		}
		if best == 0 || sv.replicas < v.stores[best].replicas || (sv.replicas == v.stores[best].replicas && id < best) {
			best = id
		}
	}
	if best == 0 {
		return nil
	}
	return op(kvpb.OperatorKind_AddLearner, &kvpb.Peer{StoreId: best, Role: kvpb.PeerRole_Learner},
		fmt.Sprintf("%d of %d replicas", voters+learners, v.replicas))
}

// schedule decides the operators for the regions one store reported.
func (s *Server) schedule(ctx context.Context, st *leaderState, regions []*kvpb.RegionStat, now time.Time) []*kvpb.Operator {
	st.storesMu.Lock()
	v := clusterView{replicas: int(st.replicas), stores: map[uint64]storeView{}}
	for id, ss := range st.stores {
		v.stores[id] = storeView{up: ss.up, replicas: int(ss.replicaCount)}
	}
	st.storesMu.Unlock()
	var out []*kvpb.Operator
	sort.Slice(regions, func(i, j int) bool { return regions[i].Region.Id < regions[j].Region.Id })
	for _, r := range regions {
		st.storesMu.Lock()
		inf, busy := st.ops[r.Region.Id]
		if busy && (r.Region.Epoch.GetConfVer() > inf.op.Epoch.GetConfVer() || now.Sub(inf.at) > operatorTimeout) {
			delete(st.ops, r.Region.Id)
			busy = false
		}
		st.storesMu.Unlock()
		if busy {
			continue
		}
		op := scheduleRegion(v, r)
		if op == nil {
			continue
		}
		if op.Kind == kvpb.OperatorKind_AddLearner {
			id, err := st.allocIDs(ctx, s, 1)
			if err != nil {
				s.log.Warn("pd: cannot allocate a peer id", "err", err)
				continue
			}
			op.Peer.Id = id
			sv := v.stores[op.Peer.StoreId]
			sv.replicas++
			v.stores[op.Peer.StoreId] = sv
		}
		st.storesMu.Lock()
		st.ops[r.Region.Id] = &inflightOp{op: op, at: now}
		st.storesMu.Unlock()
		s.log.Info("pd: operator", "region", op.RegionId, "kind", op.Kind.String(), "peer", op.Peer.GetId(),
			"store", op.Peer.GetStoreId(), "reason", op.Reason)
		out = append(out, op)
	}
	return out
}
