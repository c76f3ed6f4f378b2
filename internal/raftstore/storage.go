package raftstore

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// peerStorage is the raft.Storage of one replica. The durable copy of the
// log lives in Pebble; every entry after the truncated index is also kept
// in memory, because the log is truncated often (see Store.maybeTruncate)
// and raft reads recent entries on every Ready.
//
// Writes go through the store loop only (append, setHardState, truncate);
// raft reads through the raft.Storage methods under the same mutex.
type peerStorage struct {
	regionID uint64

	mu        sync.Mutex
	hard      *pb.HardState
	conf      *pb.ConfState
	apply     engine.ApplyState
	ents      []*pb.Entry // ents[i].Index == apply.TruncatedIndex+1+i
	entsBytes uint64      // total payload of ents
	persisted bool        // hard state was ever written
}

func loadPeerStorage(eng engine.Engines, regionID uint64, conf *pb.ConfState) (*peerStorage, error) {
	ps := &peerStorage{regionID: regionID, conf: conf, hard: &pb.HardState{}}
	if v, ok, err := engine.GetCopy(eng.Raft, engine.HardStateKey(regionID)); err != nil {
		return nil, err
	} else if ok {
		if err := proto.Unmarshal(v, ps.hard); err != nil {
			return nil, fmt.Errorf("raftstore: region %d: corrupt hard state: %w", regionID, err)
		}
		ps.persisted = true
	}
	v, ok, err := engine.GetCopy(eng.KV, engine.ApplyStateKey(regionID))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("raftstore: region %d has no apply state", regionID)
	}
	if ps.apply.AppliedIndex, err = engine.DecodeAppliedIndex(v); err != nil {
		return nil, fmt.Errorf("raftstore: region %d: %w", regionID, err)
	}
	// The truncated state lives in the Raft engine, next to the log.
	v, ok, err = engine.GetCopy(eng.Raft, engine.TruncatedStateKey(regionID))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("raftstore: region %d has no truncated state", regionID)
	}
	if ps.apply.TruncatedIndex, ps.apply.TruncatedTerm, err = engine.DecodeTruncatedState(v); err != nil {
		return nil, fmt.Errorf("raftstore: region %d: %w", regionID, err)
	}
	if ps.apply.AppliedIndex < ps.apply.TruncatedIndex {
		return nil, fmt.Errorf("raftstore: region %d: applied index %d below truncated index %d: the log was truncated past durable state",
			regionID, ps.apply.AppliedIndex, ps.apply.TruncatedIndex)
	}
	// Entries are applied as soon as they are durable and committed, which
	// can be before the HardState recording that commit index is synced.
	// Applied entries are known committed, so the commit index is at least
	// the applied index.
	if ps.hard.GetCommit() < ps.apply.AppliedIndex {
		ps.hard.Commit = proto.Uint64(ps.apply.AppliedIndex)
	}
	iter, err := eng.Raft.NewIter(&pebble.IterOptions{
		LowerBound: engine.RaftLogKey(regionID, ps.apply.TruncatedIndex+1),
		UpperBound: engine.RaftLogEnd(regionID),
	})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	prefixLen := len(engine.RaftLogKey(regionID, 0)) - 8
	next := ps.apply.TruncatedIndex + 1
	for iter.First(); iter.Valid(); iter.Next() {
		k := iter.Key()
		if len(k) != prefixLen+8 {
			break
		}
		idx := binary.BigEndian.Uint64(k[prefixLen:])
		if idx != next {
			return nil, fmt.Errorf("raftstore: region %d: log hole at %d (found %d)", regionID, next, idx)
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(iter.Value(), e); err != nil {
			return nil, fmt.Errorf("raftstore: region %d: corrupt log entry %d: %w", regionID, idx, err)
		}
		ps.ents = append(ps.ents, e)
		ps.entsBytes += uint64(len(e.Data))
		next++
	}
	return ps, iter.Error()
}

// InitialState implements raft.Storage.
func (ps *peerStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return proto.Clone(ps.hard).(*pb.HardState), proto.Clone(ps.conf).(*pb.ConfState), nil
}

// Entries implements raft.Storage.
func (ps *peerStorage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	first := ps.apply.TruncatedIndex + 1
	if lo < first {
		return nil, raft.ErrCompacted
	}
	last := first + uint64(len(ps.ents)) - 1
	if hi > last+1 {
		return nil, raft.ErrUnavailable
	}
	var size uint64
	out := make([]*pb.Entry, 0, hi-lo)
	for i := lo; i < hi; i++ {
		e := ps.ents[i-first]
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// Term implements raft.Storage.
func (ps *peerStorage) Term(i uint64) (uint64, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if i == ps.apply.TruncatedIndex {
		return ps.apply.TruncatedTerm, nil
	}
	first := ps.apply.TruncatedIndex + 1
	if i < first {
		return 0, raft.ErrCompacted
	}
	if i-first >= uint64(len(ps.ents)) {
		return 0, raft.ErrUnavailable
	}
	return ps.ents[i-first].GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (ps *peerStorage) LastIndex() (uint64, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.apply.TruncatedIndex + uint64(len(ps.ents)), nil
}

// FirstIndex implements raft.Storage.
func (ps *peerStorage) FirstIndex() (uint64, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.apply.TruncatedIndex + 1, nil
}

// Snapshot implements raft.Storage. Snapshots are only needed to catch up a
// follower whose log was truncated; a store whose regions have one voter
// never sends one.
// TODO(replication): stream a Pebble snapshot of the region's spans as SSTs.
func (ps *peerStorage) Snapshot() (*pb.Snapshot, error) {
	return nil, raft.ErrSnapshotTemporarilyUnavailable
}

// stageAppend writes entries and the hard state of a Ready into b and
// updates the in-memory log. Entries may overwrite an uncommitted suffix.
func (ps *peerStorage) stageAppend(b *pebble.Batch, ents []*pb.Entry, hs *pb.HardState) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ents) > 0 {
		first := ps.apply.TruncatedIndex + 1
		oldLast := first + uint64(len(ps.ents)) - 1
		start := ents[0].GetIndex()
		if start < first {
			return fmt.Errorf("raftstore: region %d: append at %d below first index %d", ps.regionID, start, first)
		}
		if start > oldLast+1 {
			return fmt.Errorf("raftstore: region %d: append at %d leaves a gap after %d", ps.regionID, start, oldLast)
		}
		for _, e := range ents {
			data, err := proto.Marshal(e)
			if err != nil {
				return err
			}
			if err := b.Set(engine.RaftLogKey(ps.regionID, e.GetIndex()), data, nil); err != nil {
				return err
			}
		}
		newLast := ents[len(ents)-1].GetIndex()
		if newLast < oldLast {
			if err := b.DeleteRange(engine.RaftLogKey(ps.regionID, newLast+1), engine.RaftLogKey(ps.regionID, oldLast+1), nil); err != nil {
				return err
			}
		}
		for _, e := range ps.ents[start-first:] {
			ps.entsBytes -= uint64(len(e.Data))
		}
		for _, e := range ents {
			ps.entsBytes += uint64(len(e.Data))
		}
		ps.ents = append(ps.ents[:start-first], ents...)
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		data, err := proto.Marshal(hs)
		if err != nil {
			return err
		}
		if err := b.Set(engine.HardStateKey(ps.regionID), data, nil); err != nil {
			return err
		}
		ps.hard = proto.Clone(hs).(*pb.HardState)
	}
	return nil
}

// setApplied records the applied index in memory (the caller wrote it to
// the apply batch).
func (ps *peerStorage) applyState() engine.ApplyState {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.apply
}

func (ps *peerStorage) setApplied(index uint64) {
	ps.mu.Lock()
	ps.apply.AppliedIndex = index
	ps.mu.Unlock()
}

// truncateTo records that the log up to index (of term) was deleted and
// drops those entries from memory.
func (ps *peerStorage) truncateTo(index, term uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if index <= ps.apply.TruncatedIndex {
		return
	}
	drop := min(index-ps.apply.TruncatedIndex, uint64(len(ps.ents)))
	for _, e := range ps.ents[:drop] {
		ps.entsBytes -= uint64(len(e.Data))
	}
	ps.ents = append([]*pb.Entry(nil), ps.ents[drop:]...)
	ps.apply.TruncatedIndex, ps.apply.TruncatedTerm = index, term
}

// logSize is the number of entries and payload bytes in the log.
func (ps *peerStorage) logSize() (n, bytes uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return uint64(len(ps.ents)), ps.entsBytes
}

// lastIndex is the index of the last entry in the durable log.
func (ps *peerStorage) lastIndex() uint64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.apply.TruncatedIndex + uint64(len(ps.ents))
}

// termAt returns the term of a live entry (for truncation bookkeeping).
func (ps *peerStorage) termAt(i uint64) uint64 {
	t, _ := ps.Term(i)
	return t
}
