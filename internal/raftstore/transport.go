package raftstore

import (
	"fmt"

	"github.com/strata-db/strata/kvpb"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Transport carries Raft messages between stores. The store hands it the
// messages of each round (after it persisted what they acknowledge); Send
// must not block: a message that cannot be delivered is dropped, and raft
// sends it again. An implementation reports a peer it cannot reach
// (ReportUnreachable) and the outcome of every snapshot it streams
// (ReportSnapshot). Receiving stores get messages through Receive, in the
// order each sender sent them.
type Transport interface {
	Send(msgs []*kvpb.RaftMessage)
}

// send wraps p's raft messages in envelopes and hands them to the
// transport.
func (s *Store) send(p *Peer, msgs []*pb.Message) {
	if len(msgs) == 0 || s.transport == nil {
		return
	}
	if n := len(msgs); n > 1 {
		msgs = coalesce(msgs)
		metricCoalesced.Add(float64(n - len(msgs)))
	}
	r := p.Region()
	out := make([]*kvpb.RaftMessage, 0, len(msgs))
	p.mu.Lock()
	for _, m := range msgs {
		to := p.storeOfLocked(m.GetTo())
		if to == 0 {
			s.log.Warn("raftstore: message to a peer of unknown store", "region", p.regionID, "peer", m.GetTo())
			continue
		}
		data, err := proto.Marshal(m)
		if err != nil {
			s.log.Error("raftstore: cannot encode a raft message", "region", p.regionID, "err", err)
			continue
		}
		out = append(out, &kvpb.RaftMessage{
			RegionId:    p.regionID,
			FromPeer:    &kvpb.Peer{Id: p.id, StoreId: s.storeID},
			ToPeer:      &kvpb.Peer{Id: m.GetTo(), StoreId: to},
			RegionEpoch: r.Epoch,
			StartKey:    r.StartKey,
			EndKey:      r.EndKey,
			Message:     data,
			Snapshot:    m.GetType() == pb.MessageType_MsgSnap,
		})
	}
	p.mu.Unlock()
	if len(out) > 0 {
		s.transport.Send(out)
	}
}

// ErrStaleMessage is returned by Receive for a message to a replica that
// no longer exists here (or an older one than the store holds).
var ErrStaleMessage = fmt.Errorf("raftstore: message to a removed or replaced replica")

// Receive steps a message from another store into the addressed replica,
// creating an uninitialized replica when a leader addresses one this
// store does not have yet (it then waits for a snapshot). Messages to a
// removed replica are dropped. For a MsgSnap the snapshot's files must
// already be in ReceiveDir.
func (s *Store) Receive(env *kvpb.RaftMessage) error {
	if s.closed.Load() {
		return ErrStopped
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(env.Message, m); err != nil {
		return fmt.Errorf("raftstore: corrupt raft message: %w", err)
	}
	if env.ToPeer.GetStoreId() != s.storeID {
		return fmt.Errorf("raftstore: message for store %d reached store %d", env.ToPeer.GetStoreId(), s.storeID)
	}
	if env.IsTombstone {
		s.receiveTombstone(env)
		return nil
	}
	p, err := s.peerFor(env, m)
	if err != nil || p == nil {
		return err
	}
	if s.tombstoneFor(p, env) {
		return ErrStaleMessage
	}
	if m.GetType() == pb.MessageType_MsgSnap {
		h := &kvpb.SnapshotHeader{}
		if err := proto.Unmarshal(m.GetSnapshot().GetData(), h); err != nil {
			return fmt.Errorf("raftstore: corrupt snapshot header: %w", err)
		}
		if h.Region.GetId() != env.RegionId || s.snapshotOverlaps(h.Region) {
			s.destroyMergedAway(h.Region, false)
			return fmt.Errorf("raftstore: snapshot of region %d overlaps a local region; refused", env.RegionId)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed.Load() {
		return ErrStaleMessage
	}
	p.peerStores[env.FromPeer.GetId()] = env.FromPeer.GetStoreId()
	if env.HibernateCommit != 0 {
		p.heardLeaderLocked()
		p.receiveHibernateLocked(env)
		return nil
	}
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat, pb.MessageType_MsgSnap:
		p.heardLeaderLocked() // only a leader sends these
	}
	p.wakeOnMessageLocked(m)
	err = p.rn.Step(m)
	if err != nil && err != raft.ErrStepPeerNotFound && err != raft.ErrStepLocalMsg {
		return err
	}
	s.poke(p)
	return nil
}

// peerFor finds (or creates) the replica a message addresses.
func (s *Store) peerFor(env *kvpb.RaftMessage, m *pb.Message) (*Peer, error) {
	p, covering, err := s.findOrCreatePeer(env, m)
	if covering != nil {
		s.destroyMergedAway(covering, true)
	}
	return p, err
}

// findOrCreatePeer is peerFor; covering is set when a leader's message
// for a region this store has no replica of overlaps local replicas (see
// destroyMergedAway).
func (s *Store) findOrCreatePeer(env *kvpb.RaftMessage, m *pb.Message) (_ *Peer, covering *kvpb.Region, _ error) {
	toID := env.ToPeer.GetId()
	if p, ok := s.Peer(env.RegionId); ok && !p.removed.Load() {
		switch {
		case p.id == toID:
			return p, nil, nil
		case p.id > toID:
			return nil, nil, ErrStaleMessage
		}
		// A newer replica of the region is addressed: the local one was
		// removed without hearing of it. It is destroyed (stale.go), and
		// the leader's next message creates the new one.
		s.queueStale(p, 0, fmt.Sprintf("a message addressed peer %d of its region", toID))
		return nil, nil, ErrStaleMessage
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.peers[env.RegionId]; ok && !p.removed.Load() {
		if p.id == toID {
			return p, nil, nil
		}
		return nil, nil, ErrStaleMessage
	}
	if tomb, ok := s.tombstones[env.RegionId]; ok && toID <= tomb {
		return nil, nil, ErrStaleMessage
	}
	// A region this store holds an older version of (it has not applied
	// the split that made this one) gets its replica from that split.
	// The split-off region's leader campaigns as soon as it applied the
	// split on its store, usually before this store applies it: its
	// vote requests are kept and stepped into the replica the split
	// creates (addSplitPeer), as TiKV does, instead of leaving the new
	// region leaderless for an election timeout.
	probe := &kvpb.Region{Id: env.RegionId, StartKey: env.StartKey, EndKey: env.EndKey, Epoch: env.RegionEpoch}
	if q := s.overlappingPeer(probe, 0); q != nil {
		if isVote(m) && len(s.pendingVotes) < maxPendingVotes {
			s.pendingVotes = append(s.pendingVotes, env)
		}
		if isLeaderMessage(m) && coveredAtNewer(q.Region(), probe) && s.orphanedSourceLocked(q) {
			// A leader places a replica of a region here whose range
			// covers, at a newer version, a merge's source frozen here
			// whose target has no replica on this store to take it in
			// (it was removed before it applied the merge). The source
			// goes, and the leader's next message creates the replica,
			// which gets the data back by snapshot.
			return nil, probe, nil
		}
		return nil, nil, nil
	}
	if !isLeaderMessage(m) {
		return nil, nil, nil // only a leader creates replicas
	}
	p, err := s.newUninitializedPeer(env.RegionId, toID)
	if err != nil {
		return nil, nil, err
	}
	s.peers[env.RegionId] = p
	s.publishPeers()
	return p, nil, nil
}

// maxPendingVotes bounds the vote requests kept for regions a split has
// not created yet.
const maxPendingVotes = 256

// isLeaderMessage reports whether only a region's leader sends m.
func isLeaderMessage(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat, pb.MessageType_MsgSnap:
		return true
	}
	return false
}

func isVote(m *pb.Message) bool {
	return m.GetType() == pb.MessageType_MsgVote || m.GetType() == pb.MessageType_MsgPreVote
}

// takePendingVotes removes and returns the kept vote requests for a
// region. s.mu not held.
func (s *Store) takePendingVotes(regionID uint64) []*kvpb.RaftMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*kvpb.RaftMessage
	n := 0
	for _, env := range s.pendingVotes {
		if env.RegionId == regionID {
			out = append(out, env)
			continue
		}
		s.pendingVotes[n] = env
		n++
	}
	clear(s.pendingVotes[n:])
	s.pendingVotes = s.pendingVotes[:n]
	return out
}

// ReportUnreachable tells a region's raft that a peer could not be reached
// (the transport could not deliver to its store); raft then probes it
// instead of streaming entries at it.
func (s *Store) ReportUnreachable(regionID, peerID uint64) {
	if p, ok := s.Peer(regionID); ok {
		p.mu.Lock()
		p.rn.ReportUnreachable(peerID)
		p.mu.Unlock()
		s.enqueue(p)
	}
}

// ReportSnapshot tells a region's raft whether a snapshot reached a peer.
func (s *Store) ReportSnapshot(regionID, peerID uint64, ok bool) {
	if p, found := s.Peer(regionID); found {
		st := raft.SnapshotFinish
		if !ok {
			st = raft.SnapshotFailure
		}
		p.mu.Lock()
		p.rn.ReportSnapshot(peerID, st)
		p.mu.Unlock()
		s.poke(p)
	}
}
