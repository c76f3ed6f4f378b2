package raftstore

import (
	"slices"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// Stale replicas. A replica removed from its region learns of it by
// applying the membership change that removes it. When the change commits
// without it (it was partitioned, lagging, or had just been created by a
// split and was removed before it caught up: PD moves replicas in tens
// of milliseconds), the leader stops sending to it and it never learns.
// Such a replica must go, as TiKV's do, or it blocks its store:
//
//   - a new replica of the region on this store (PD adds one back, with a
//     new peer id) is refused while the old one is there;
//   - a snapshot of a region split off it overlaps its range and is
//     refused;
//   - a stale voter campaigns forever and never has a leader, so the node
//     never reports ready (/healthz).
//
// Four ways find it, each proof that it was removed (peer ids are never
// reused, and a configuration that does not list a peer was committed
// after the peer's removal when its conf version is newer):
//
//  1. a message to a newer replica of the same region on this store
//     (a larger peer id) proves the local one was removed;
//  2. a replica that gets a message from a peer it does not list, at an
//     older conf version than its own, answers with a tombstone message
//     (RaftMessage.is_tombstone, carrying its epoch); the stale replica
//     destroys itself on it (a stale voter's vote requests reach the
//     live replicas this way);
//  3. the layer above asks PD about replicas that have not heard from a
//     leader for a while (a stale learner sends nothing) and calls
//     DestroyStale when PD's descriptor, at a newer conf version, does not
//     list them;
//  4. a replica of a region PD no longer knows, whose range PD shows in a
//     newer region with no replica here that could still take it in (a
//     merge's source whose store missed the CommitMerge and then lost its
//     target replica): the layer above calls DestroyMergedAway.
//
// The store loop destroys them (destroyPeer), between rounds.

// staleRequest asks the store loop to destroy a replica: p, if it is still
// the region's replica here, and (confVer > 0) its conf version is still
// below confVer.
type staleRequest struct {
	p       *Peer
	confVer uint64
	why     string
}

// queueStale hands a stale replica to the store loop.
func (s *Store) queueStale(p *Peer, confVer uint64, why string) {
	s.staleMu.Lock()
	for _, q := range s.stale {
		if q.p == p {
			s.staleMu.Unlock()
			return
		}
	}
	s.stale = append(s.stale, staleRequest{p: p, confVer: confVer, why: why})
	s.staleMu.Unlock()
	s.wake()
}

// destroyStale destroys the replicas queueStale collected. Store loop.
func (s *Store) destroyStale() error {
	s.staleMu.Lock()
	reqs := s.stale
	s.stale = nil
	s.staleMu.Unlock()
	for _, q := range reqs {
		p := q.p
		if cur, ok := s.Peer(p.regionID); !ok || cur != p || p.removed.Load() {
			continue
		}
		p.mu.Lock()
		leader := p.isLeader
		p.mu.Unlock()
		if leader {
			continue // a leader learns of its removal from its own log
		}
		if q.confVer > 0 && p.Initialized() && p.Region().Epoch.GetConfVer() >= q.confVer {
			continue
		}
		s.log.Info("raftstore: destroying a stale replica", "region", p.regionID, "peer", p.id, "why", q.why)
		if err := s.destroyPeer(p); err != nil {
			return err
		}
	}
	return nil
}

// tombstoneFor answers a message from a peer that p's region does not list
// at a newer conf version than the sender's: it tells the sender it was
// removed. It reports whether it did (the message is then dropped).
func (s *Store) tombstoneFor(p *Peer, env *kvpb.RaftMessage) bool {
	if !p.Initialized() || s.transport == nil {
		return false
	}
	r := p.Region()
	from := env.FromPeer.GetId()
	// An uninitialized sender (conf version 0) only answers a leader that
	// lists it, may be one this replica has not applied yet, and holds
	// nothing: it is left alone.
	if from == 0 || env.RegionEpoch.GetConfVer() == 0 || env.RegionEpoch.GetConfVer() >= r.Epoch.GetConfVer() ||
		slices.ContainsFunc(r.Peers, func(rp *kvpb.Peer) bool { return rp.Id == from }) {
		return false
	}
	s.transport.Send([]*kvpb.RaftMessage{{
		RegionId:    p.regionID,
		FromPeer:    &kvpb.Peer{Id: p.id, StoreId: s.storeID},
		ToPeer:      env.FromPeer,
		RegionEpoch: r.Epoch,
		StartKey:    r.StartKey,
		EndKey:      r.EndKey,
		IsTombstone: true,
	}})
	return true
}

// receiveTombstone handles a tombstone message: the addressed replica, if
// it is still here and older than the sender's configuration, is
// destroyed.
func (s *Store) receiveTombstone(env *kvpb.RaftMessage) {
	p, ok := s.Peer(env.RegionId)
	if !ok || p.id != env.ToPeer.GetId() || p.removed.Load() {
		return
	}
	cv := env.RegionEpoch.GetConfVer()
	if p.Initialized() && p.Region().Epoch.GetConfVer() >= cv {
		return
	}
	s.queueStale(p, cv, "a replica at a newer configuration does not list it")
}

// DestroyStale destroys the replica of a region on this store if it is
// peer id and its region's conf version is below confVer: the caller
// learned (from PD) that the region at confVer does not list it. It
// reports whether a destruction was queued.
func (s *Store) DestroyStale(regionID, peerID, confVer uint64) bool {
	p, ok := s.Peer(regionID)
	if !ok || p.id != peerID || p.removed.Load() || confVer == 0 {
		return false
	}
	if p.Initialized() && p.Region().Epoch.GetConfVer() >= confVer {
		return false
	}
	s.queueStale(p, confVer, "the placement driver's descriptor does not list it")
	return true
}

// DestroyMergedAway destroys the replica of region regionID on this store
// if it is peer peerID: the caller learned from PD that the region was
// merged away and that no replica here will take it in (a merge's source
// whose target replica here was removed before it applied the merge). It
// reports whether a destruction was queued.
func (s *Store) DestroyMergedAway(regionID, peerID uint64) bool {
	p, ok := s.Peer(regionID)
	if !ok || p.id != peerID || p.removed.Load() || !p.Initialized() {
		return false
	}
	s.queueStale(p, 0, "its region was merged into one with no replica here")
	return true
}

// MarkHeard restarts SilentFor: the caller learned the replica is a
// member of its region.
func (p *Peer) MarkHeard() { p.heardAt.Store(time.Now().UnixNano()) }

// SilentFor is how long the replica has gone without a message from a
// leader (or, for a leader, 0): a replica silent for long may be stale.
func (p *Peer) SilentFor() time.Duration {
	p.mu.Lock()
	leader := p.isLeader
	p.mu.Unlock()
	if leader {
		return 0
	}
	return time.Duration(time.Now().UnixNano() - p.heardAt.Load())
}
