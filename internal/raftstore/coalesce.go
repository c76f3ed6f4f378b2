package raftstore

import (
	pb "go.etcd.io/raft/v3/raftpb"
)

// Coalescing the messages of one Ready before they are sent.
//
// etcd raft emits a MsgApp per follower for every proposal (bcastAppend
// on each MsgProp) and another, empty one, every time the commit index
// moves (bcastAppend after maybeCommit); a follower answers every MsgApp
// with its own MsgAppResp. Under a write load a leader's Ready therefore
// holds several MsgApps to the same follower that continue one another,
// and a follower's Ready several acknowledgements to its leader, and each
// costs an encoding, a step on the other side and, for every MsgApp, one
// more MsgAppResp (which, if it moves the commit index, makes the leader
// broadcast again). With three nodes and one entry per MsgApp that was 8
// messages per replicated write.
//
// coalesce merges, per destination, a message into the one sent just
// before it to the same peer when the two say nothing the merged one does
// not:
//
//   - MsgApp then MsgApp of the same term whose entries continue the
//     first's (second.Index is the first's last index, second.LogTerm that
//     entry's term): one MsgApp with the first's (Index, LogTerm), both
//     entry lists, and the later commit index. raft-rs does the same
//     (Config::batch_append). The follower appends the same entries and
//     learns the same commit; the leader's in-flight tracking frees both
//     on the one acknowledgement of the last index (Inflights.FreeLE).
//   - MsgAppResp then MsgAppResp of the same term, neither a rejection:
//     acknowledgements are cumulative (the leader takes the highest index
//     it hears, Progress.MaybeUpdate), so only the later is kept when its
//     index is not lower; otherwise the earlier one.
//
// Only the message immediately before, among those to the same peer, is
// a merge target, so messages to one peer keep their order. Dropping or
// merging messages never endangers safety in Raft (the network may lose
// any message); durability is untouched: a follower's acknowledgements
// still leave only after its fsync (loop.go).

// maxCoalescedBytes bounds the entry payload of a merged MsgApp, so the
// batches the transport sends stay well under gRPC's message limit.
const maxCoalescedBytes = 1 << 20

// coalesce returns msgs with mergeable messages merged (see above). It
// never modifies the messages or the entry slices it is given (they
// belong to raft's log): a merged message is a new one.
func coalesce(msgs []*pb.Message) []*pb.Message {
	if len(msgs) < 2 {
		return msgs
	}
	out := make([]*pb.Message, 0, len(msgs))
	last := make(map[uint64]int, 2) // destination -> index in out of the last message to it
	for _, m := range msgs {
		to := m.GetTo()
		if i, ok := last[to]; ok {
			if merged := merge(out[i], m); merged != nil {
				out[i] = merged
				continue
			}
		}
		last[to] = len(out)
		out = append(out, m)
	}
	return out
}

// merge returns the one message that says what a and then b say, or nil
// when they cannot be merged.
func merge(a, b *pb.Message) *pb.Message {
	if a.GetType() != b.GetType() || a.GetTerm() != b.GetTerm() || a.GetFrom() != b.GetFrom() {
		return nil
	}
	switch a.GetType() {
	case pb.MessageType_MsgApp:
		return mergeApp(a, b)
	case pb.MessageType_MsgAppResp:
		if a.GetReject() || b.GetReject() {
			return nil
		}
		if b.GetIndex() >= a.GetIndex() {
			return b
		}
		return a
	}
	return nil
}

func mergeApp(a, b *pb.Message) *pb.Message {
	ae := a.GetEntries()
	lastIndex, lastTerm := a.GetIndex(), a.GetLogTerm()
	if n := len(ae); n > 0 {
		lastIndex, lastTerm = ae[n-1].GetIndex(), ae[n-1].GetTerm()
	}
	if b.GetIndex() != lastIndex || b.GetLogTerm() != lastTerm {
		return nil
	}
	if len(a.Context) > 0 || len(b.Context) > 0 || a.Snapshot != nil || b.Snapshot != nil {
		return nil
	}
	be := b.GetEntries()
	if len(be) > 0 && len(ae) > 0 && entriesSize(ae)+entriesSize(be) > maxCoalescedBytes {
		return nil
	}
	ents := ae
	if len(be) > 0 {
		ents = make([]*pb.Entry, 0, len(ae)+len(be))
		ents = append(append(ents, ae...), be...)
	}
	commit := max(a.GetCommit(), b.GetCommit())
	return &pb.Message{
		Type:    a.Type,
		To:      a.To,
		From:    a.From,
		Term:    a.Term,
		LogTerm: a.LogTerm,
		Index:   a.Index,
		Entries: ents,
		Commit:  &commit,
	}
}

func entriesSize(ents []*pb.Entry) int {
	n := 0
	for _, e := range ents {
		n += len(e.Data)
	}
	return n
}
