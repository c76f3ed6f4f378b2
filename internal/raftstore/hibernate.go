package raftstore

import (
	"time"

	"github.com/strata-db/strata/kvpb"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Hibernation (Config.Hibernate): a region nobody uses stops ticking, so
// thousands of idle regions cost neither ticks nor heartbeats. This is
// CockroachDB's quiescence, which TiKV calls hibernate regions:
//
//   - A leader with nothing to do (no proposal or read for sleepAfter,
//     every entry committed and applied, every replica's log matching its
//     own, no leadership transfer, no read waiting) for sleepTicks ticks
//     tells its followers (RaftMessage.hibernate_commit, its commit index)
//     and stops ticking: no heartbeats, no election timer.
//   - A follower whose leader is the sender and whose log ends at that
//     index stops ticking too; one that does not match goes on, times out
//     and asks for votes, which wakes the leader (it then heartbeats, and
//     the others, whose timers stood still, refuse the votes).
//   - Any raft message to a replica wakes it, and so does anything that
//     needs its raft: a proposal, a membership change, a leadership
//     transfer, a read that needs a ReadIndex round, a campaign; a request
//     that finds a follower not leading wakes it (Check), so a client
//     retrying on the followers of a dead leader starts an election.
//   - A follower's leader may die while both sleep: StoreLost wakes the
//     replicas led from a store the transport lost its connection to, or
//     that PD counts down (the node calls it with the heartbeat
//     response's down stores).
//
// A region Config.AlwaysAwake names never hibernates (PD's own region:
// PD is what tells a node that a store is down).
//
// A sleeping leader's lease runs out like any other (its reads then take
// a ReadIndex round, which wakes it); its followers' election timers stand
// still, so they elect no one earlier than they would awake, and leases
// stay safe.

// sleepTicks: idle ticks before a leader hibernates (2 s).
const sleepTicks = 2 * electionTicks

// sleepAfter: store-clock time without a proposal or read before a
// leader may start counting idle ticks.
const sleepAfter = 2 * electionTicks * tickInterval

// Asleep reports whether the replica is hibernating (ticks nothing).
func (p *Peer) Asleep() bool { return p.asleep.Load() }

// wakeLocked makes the replica tick again. p.mu held.
func (p *Peer) wakeLocked() {
	if p.asleep.Swap(false) {
		// The loop looks only at the replicas awake at its last tick
		// and those queued since.
		p.store.enqueue(p)
	}
	p.idleTicks = 0
}

// poke has the store loop look at p in its next round, asleep or not.
func (s *Store) poke(p *Peer) {
	s.enqueue(p)
	s.wake()
}

// enqueue queues p for the store loop's next round (without waking the
// loop), once until the loop takes it.
func (s *Store) enqueue(p *Peer) {
	if p.poll.Swap(true) {
		return
	}
	s.pokeMu.Lock()
	s.poked = append(s.poked, p)
	s.pokeMu.Unlock()
}

// touch records a proposal or read now (store clock): an active replica
// does not hibernate. It writes only when the recorded time is more than
// touchEvery old: every read of a busy region from every core would
// otherwise write the same cache line.
func (p *Peer) touch() {
	now := int64(p.store.now())
	if now-p.lastActive.Load() >= int64(touchEvery) {
		p.lastActive.Store(now)
	}
}

// touchEvery is the resolution of Peer.lastActive, far below sleepAfter.
const touchEvery = 50 * time.Millisecond

// tickLocked ticks an awake replica; a leader idle long enough hibernates
// (the messages to its followers are returned). Store loop, p.mu held.
func (s *Store) tickLocked(p *Peer) []*kvpb.RaftMessage {
	if p.asleep.Load() {
		return nil
	}
	// Decided before the tick, while the loop has drained the replica's
	// Ready: a tick may queue a heartbeat, which must not follow the
	// hibernation notice.
	if s.hibernate && p.isLeader && s.canSleepLocked(p) {
		p.idleTicks++
	} else {
		p.idleTicks = 0
	}
	if p.idleTicks < sleepTicks {
		p.rn.Tick()
		if !p.isLeader {
			p.leaderTicks++
			if p.lostLeader != 0 && p.leaderTicks > electionTicks {
				p.campaignEarlyLocked()
			}
		}
		return nil
	}
	p.asleep.Store(true)
	st := p.rn.BasicStatus()
	r := p.Region()
	var out []*kvpb.RaftMessage
	for _, rp := range r.Peers {
		if rp.Id == p.id {
			continue
		}
		out = append(out, &kvpb.RaftMessage{
			RegionId:        p.regionID,
			FromPeer:        &kvpb.Peer{Id: p.id, StoreId: s.storeID},
			ToPeer:          &kvpb.Peer{Id: rp.Id, StoreId: rp.StoreId},
			RegionEpoch:     r.Epoch,
			StartKey:        r.StartKey,
			EndKey:          r.EndKey,
			HibernateCommit: st.HardState.GetCommit(),
		})
	}
	return out
}

// canSleepLocked: p leads, has nothing in flight and every replica has
// its whole log. p.mu held.
func (s *Store) canSleepLocked(p *Peer) bool {
	if (s.alwaysAwake != nil && s.alwaysAwake(p.regionID)) || !p.leaderReady.Load() || len(p.proposals) > 0 || len(p.reads.waiting) > 0 || p.reads.renew ||
		int64(s.now())-p.lastActive.Load() < int64(sleepAfter) || p.rn.HasReady() {
		return false
	}
	st := p.rn.BasicStatus()
	last := p.storage.lastIndex()
	if st.LeadTransferee != 0 || st.HardState.GetCommit() != last || st.Applied != last {
		return false
	}
	for _, rp := range p.Region().Peers {
		if rp.Role == kvpb.PeerRole_IncomingVoter || rp.Role == kvpb.PeerRole_DemotingVoter {
			return false
		}
	}
	ok := true
	p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pr.Match != last {
			ok = false
		}
	})
	return ok
}

// receiveHibernate handles a leader's hibernation notice. p.mu held.
func (p *Peer) receiveHibernateLocked(env *kvpb.RaftMessage) {
	if p.isLeader {
		return
	}
	st := p.rn.BasicStatus()
	if st.Lead != env.FromPeer.GetId() || st.HardState.GetCommit() != env.HibernateCommit ||
		p.storage.lastIndex() != env.HibernateCommit {
		return
	}
	p.asleep.Store(true)
}

// wakeOnMessage wakes a replica a raft message reached, except a leader
// getting the answers to its last heartbeats or appends. p.mu held.
func (p *Peer) wakeOnMessageLocked(m *pb.Message) {
	if !p.asleep.Load() {
		return
	}
	if p.isLeader {
		switch m.GetType() {
		case pb.MessageType_MsgHeartbeatResp:
			return
		case pb.MessageType_MsgAppResp:
			if !m.GetReject() {
				return
			}
		}
	}
	p.wakeLocked()
}

// StoreLost is told that store is gone: the transport lost its
// connection to it, or PD counts it down. Every follower led from there
// wakes (a hibernating one would not notice the loss), and the first of
// each such region's other voters (lowest replica id) campaigns as soon
// as the others can vote for it (campaignEarlyLocked).
func (s *Store) StoreLost(store uint64) {
	woken, marked := 0, 0
	for _, p := range s.Peers() {
		p.mu.Lock()
		if !p.isLeader && p.storeOfLocked(p.rn.BasicStatus().Lead) == store {
			if p.asleep.Load() {
				p.wakeLocked()
				woken++
			}
			p.lostLeader = store
			marked++
		}
		p.mu.Unlock()
	}
	if woken > 0 {
		s.log.Info("raftstore: woke hibernating replicas led from a store that is gone", "store", store, "replicas", woken)
	}
	if marked > 0 {
		s.log.Debug("raftstore: leader's store lost", "store", store, "replicas", marked)
	}
}

// heardLeaderLocked notes a message from a leader. p.mu held.
func (p *Peer) heardLeaderLocked() {
	p.heardAt.Store(time.Now().UnixNano())
	p.leaderTicks = 0
	p.lostLeader = 0
}

// campaignEarlyLocked: this follower's leader is on a store that is gone,
// and electionTicks+1 ticks have passed since its last message. Without
// this the region waits for raft's randomized election timeout (one to
// two election timeouts) of whichever replica fires first. A vote is
// granted only by a replica whose own election timer has run out since
// it last heard from the leader (check-quorum: that is what keeps leases
// safe, read.go); the other replicas heard the leader's last message when
// this one did, so one tick past the timeout their timers have run out.
// Only the first of the other voters campaigns: two at once would split
// the vote. If the store is not gone after all, or a voter is still in
// its lease, the pre-vote fails and nothing changes (pre-vote disturbs
// no term). p.mu held.
func (p *Peer) campaignEarlyLocked() {
	lost := p.lostLeader
	p.lostLeader = 0
	st := p.rn.BasicStatus()
	if st.RaftState != raft.StateFollower || p.storeOfLocked(st.Lead) != lost {
		return
	}
	self := false
	for _, rp := range p.Region().Peers {
		if !IsVoter(rp) || rp.StoreId == lost {
			continue
		}
		if rp.Id < p.id {
			return
		}
		self = self || rp.Id == p.id
	}
	if self {
		p.store.log.Debug("raftstore: campaigning early: the leader's store is gone", "region", p.regionID, "store", lost)
		_ = p.rn.Campaign()
	}
}
