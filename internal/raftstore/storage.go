package raftstore

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// maxCachedLogBytes bounds the log entries a replica keeps in memory. The
// newest entries are what raft reads on every Ready (to apply and to
// replicate to followers that keep up); older ones, which only a lagging
// follower asks for, are read back from the Raft engine.
var maxCachedLogBytes uint64 = 4 << 20

// peerStorage is the raft.Storage of one replica. Its job: the durable
// log, HardState and truncation point of the replica in the Raft engine,
// with the log's newest entries cached in memory.
//
// Writes go through the store loop only (stageAppend, stageSnapshot,
// truncateTo, evict); raft reads through the raft.Storage methods under
// the same mutex.
type peerStorage struct {
	regionID uint64
	raftDB   *pebble.DB

	mu    sync.Mutex
	hard  *pb.HardState
	conf  *pb.ConfState
	apply engine.ApplyState
	last  uint64 // index of the last entry in the log (TruncatedIndex when empty)
	// ents caches the log's suffix: ents[i].Index == cacheFirst+i, and
	// ents ends at last. Entries from TruncatedIndex+1 to cacheFirst-1 are
	// only in the Raft engine.
	ents       []*pb.Entry
	cacheFirst uint64
	entsBytes  uint64 // payload of ents
	logBytes   uint64 // payload of the whole live log (approximate after a restart)
	// snapshot is the newest snapshot this replica generated (leaders),
	// handed to raft by Snapshot.
	snapshot *pb.Snapshot
	// snapshotRequested is set when raft asked for a snapshot that is not
	// ready; the store loop starts generating one. Atomic: the loop checks
	// every replica each round.
	snapshotRequested atomic.Bool
}

// newPeerStorage is the storage of a replica with nothing persisted yet
// (created by a leader's message, waiting for a snapshot).
func newPeerStorage(eng engine.Engines, regionID uint64) *peerStorage {
	return &peerStorage{regionID: regionID, raftDB: eng.Raft, hard: &pb.HardState{}, conf: &pb.ConfState{}, cacheFirst: 1}
}

func loadPeerStorage(eng engine.Engines, regionID uint64, conf *pb.ConfState) (*peerStorage, error) {
	ps := &peerStorage{regionID: regionID, raftDB: eng.Raft, conf: conf, hard: &pb.HardState{}}
	if v, ok, err := engine.GetCopy(eng.Raft, engine.HardStateKey(regionID)); err != nil {
		return nil, err
	} else if ok {
		if err := proto.Unmarshal(v, ps.hard); err != nil {
			return nil, fmt.Errorf("raftstore: region %d: corrupt hard state: %w", regionID, err)
		}
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
	ps.last = ps.apply.TruncatedIndex
	ps.cacheFirst = ps.last + 1
	for iter.First(); iter.Valid(); iter.Next() {
		k := iter.Key()
		if len(k) != prefixLen+8 {
			break
		}
		idx := binary.BigEndian.Uint64(k[prefixLen:])
		if idx != ps.last+1 {
			return nil, fmt.Errorf("raftstore: region %d: log hole at %d (found %d)", regionID, ps.last+1, idx)
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(iter.Value(), e); err != nil {
			return nil, fmt.Errorf("raftstore: region %d: corrupt log entry %d: %w", regionID, idx, err)
		}
		ps.last = idx
		ps.logBytes += uint64(len(e.Data))
		// Keep only the newest entries in memory: the applied ones at the
		// front are evicted once the cache is over its budget.
		ps.ents = append(ps.ents, e)
		ps.entsBytes += uint64(len(e.Data))
		for ps.entsBytes > maxCachedLogBytes && len(ps.ents) > 1 && ps.ents[0].GetIndex() <= ps.apply.AppliedIndex {
			ps.entsBytes -= uint64(len(ps.ents[0].Data))
			ps.ents = ps.ents[1:]
			ps.cacheFirst++
		}
	}
	if len(ps.ents) > 0 {
		ps.ents = append([]*pb.Entry(nil), ps.ents...)
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
	if lo <= ps.apply.TruncatedIndex {
		return nil, raft.ErrCompacted
	}
	if hi > ps.last+1 {
		return nil, raft.ErrUnavailable
	}
	var size uint64
	out := make([]*pb.Entry, 0, min(hi-lo, 64))
	add := func(e *pb.Entry) bool {
		size += uint64(proto.Size(e))
		if len(out) > 0 && size > maxSize {
			return false
		}
		out = append(out, e)
		return true
	}
	i := lo
	if i < ps.cacheFirst {
		end := min(hi, ps.cacheFirst)
		full, err := ps.readLog(i, end, add)
		if err != nil {
			return nil, err
		}
		if !full {
			return out, nil
		}
		i = end
	}
	for ; i < hi; i++ {
		if !add(ps.ents[i-ps.cacheFirst]) {
			break
		}
	}
	return out, nil
}

// readLog reads entries [lo, hi) from the Raft engine, handing each to add
// until it returns false; it reports whether all were taken. ps.mu held.
func (ps *peerStorage) readLog(lo, hi uint64, add func(*pb.Entry) bool) (bool, error) {
	iter, err := ps.raftDB.NewIter(&pebble.IterOptions{
		LowerBound: engine.RaftLogKey(ps.regionID, lo),
		UpperBound: engine.RaftLogKey(ps.regionID, hi),
	})
	if err != nil {
		return false, err
	}
	defer iter.Close()
	next := lo
	for iter.First(); iter.Valid(); iter.Next() {
		e := &pb.Entry{}
		if err := proto.Unmarshal(iter.Value(), e); err != nil {
			return false, fmt.Errorf("raftstore: region %d: corrupt log entry: %w", ps.regionID, err)
		}
		if e.GetIndex() != next {
			return false, fmt.Errorf("raftstore: region %d: log hole at %d", ps.regionID, next)
		}
		next++
		if !add(e) {
			return false, nil
		}
	}
	if err := iter.Error(); err != nil {
		return false, err
	}
	if next != hi {
		return false, fmt.Errorf("raftstore: region %d: log ends at %d, want %d", ps.regionID, next, hi)
	}
	return true, nil
}

// Term implements raft.Storage.
func (ps *peerStorage) Term(i uint64) (uint64, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.termLocked(i)
}

func (ps *peerStorage) termLocked(i uint64) (uint64, error) {
	if i == ps.apply.TruncatedIndex {
		return ps.apply.TruncatedTerm, nil
	}
	if i < ps.apply.TruncatedIndex {
		return 0, raft.ErrCompacted
	}
	if i > ps.last {
		return 0, raft.ErrUnavailable
	}
	if i >= ps.cacheFirst {
		return ps.ents[i-ps.cacheFirst].GetTerm(), nil
	}
	v, ok, err := engine.GetCopy(ps.raftDB, engine.RaftLogKey(ps.regionID, i))
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("raftstore: region %d: log entry %d missing", ps.regionID, i)
	}
	e := &pb.Entry{}
	if err := proto.Unmarshal(v, e); err != nil {
		return 0, err
	}
	return e.GetTerm(), nil
}

// LastIndex implements raft.Storage.
func (ps *peerStorage) LastIndex() (uint64, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.last, nil
}

// FirstIndex implements raft.Storage.
func (ps *peerStorage) FirstIndex() (uint64, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.apply.TruncatedIndex + 1, nil
}

// Snapshot implements raft.Storage: the newest snapshot this replica
// generated, if it is recent enough for raft (at or after the truncated
// index, which is all a follower below it could need). Otherwise it asks
// the store loop to generate one (snapshot.go) and reports it temporarily
// unavailable; raft asks again later.
func (ps *peerStorage) Snapshot() (*pb.Snapshot, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if s := ps.snapshot; s != nil && s.GetMetadata().GetIndex() >= ps.apply.TruncatedIndex {
		return s, nil
	}
	ps.snapshotRequested.Store(true)
	return nil, raft.ErrSnapshotTemporarilyUnavailable
}

// takeSnapshotRequest reports (and clears) whether raft asked for a
// snapshot it could not have.
func (ps *peerStorage) takeSnapshotRequest() bool {
	return ps.snapshotRequested.Load() && ps.snapshotRequested.Swap(false)
}

func (ps *peerStorage) setSnapshot(s *pb.Snapshot) {
	ps.mu.Lock()
	ps.snapshot = s
	ps.mu.Unlock()
}

// stageAppend writes entries and the hard state of a Ready into b and
// updates the in-memory log. Entries may overwrite an uncommitted suffix.
func (ps *peerStorage) stageAppend(b *pebble.Batch, ents []*pb.Entry, hs *pb.HardState) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ents) > 0 {
		first := ps.apply.TruncatedIndex + 1
		start := ents[0].GetIndex()
		if start < first {
			return fmt.Errorf("raftstore: region %d: append at %d below first index %d", ps.regionID, start, first)
		}
		if start > ps.last+1 {
			return fmt.Errorf("raftstore: region %d: append at %d leaves a gap after %d", ps.regionID, start, ps.last)
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
		if newLast < ps.last {
			if err := b.DeleteRange(engine.RaftLogKey(ps.regionID, newLast+1), engine.RaftLogKey(ps.regionID, ps.last+1), nil); err != nil {
				return err
			}
		}
		if start < ps.cacheFirst {
			// Overwriting entries that were evicted (uncommitted ones are
			// never evicted, so this only happens right after a restart
			// that kept little in memory): restart the cache here.
			ps.ents, ps.entsBytes, ps.cacheFirst = nil, 0, start
		}
		for _, e := range ps.ents[start-ps.cacheFirst:] {
			ps.entsBytes -= uint64(len(e.Data))
			ps.logBytes -= min(ps.logBytes, uint64(len(e.Data)))
		}
		for _, e := range ents {
			ps.entsBytes += uint64(len(e.Data))
			ps.logBytes += uint64(len(e.Data))
		}
		ps.ents = append(ps.ents[:start-ps.cacheFirst], ents...)
		ps.last = newLast
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

// stageSnapshot writes into b the Raft state of a replica that received
// snap: the log is replaced by the snapshot's index (everything before and
// after it is deleted), and the snapshot's header is recorded as pending
// until its data is durable in the KV engine (snapshot.go).
func (ps *peerStorage) stageSnapshot(b *pebble.Batch, snap *pb.Snapshot) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	md := snap.GetMetadata()
	idx, term := md.GetIndex(), md.GetTerm()
	if err := b.DeleteRange(engine.RaftLogKey(ps.regionID, 0), engine.RaftLogEnd(ps.regionID), nil); err != nil {
		return err
	}
	if err := b.Set(engine.TruncatedStateKey(ps.regionID), engine.EncodeTruncatedState(idx, term), nil); err != nil {
		return err
	}
	pending, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	if err := b.Set(engine.PendingSnapshotKey(ps.regionID), pending, nil); err != nil {
		return err
	}
	ps.ents, ps.entsBytes, ps.logBytes = nil, 0, 0
	ps.apply.TruncatedIndex, ps.apply.TruncatedTerm = idx, term
	ps.last, ps.cacheFirst = idx, idx+1
	ps.conf = proto.Clone(md.GetConfState()).(*pb.ConfState)
	return nil
}

// applyState returns what the replica has applied and truncated.
func (ps *peerStorage) applyState() engine.ApplyState {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.apply
}

// setApplied records the applied index in memory (the caller wrote it to
// the apply batch) and evicts applied entries from the cache while it is
// over budget.
func (ps *peerStorage) setApplied(index uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.apply.AppliedIndex = index
	drop := 0
	for ps.entsBytes > maxCachedLogBytes && drop < len(ps.ents)-1 && ps.ents[drop].GetIndex() <= index {
		ps.entsBytes -= uint64(len(ps.ents[drop].Data))
		drop++
	}
	ps.dropCached(drop)
}

// dropCached evicts the n oldest cached entries. The slice moves forward
// over its backing array (the dropped slots are cleared so the entries can
// be collected); append reallocates it, copying only the live entries, once
// the array's end is reached. Copying the whole cache on every eviction
// cost 7% of a 3-node insert workload's CPU: with the cache full, every
// apply round evicted a few entries and copied the thousands left.
func (ps *peerStorage) dropCached(n int) {
	if n <= 0 {
		return
	}
	clear(ps.ents[:n])
	ps.ents = ps.ents[n:]
	ps.cacheFirst += uint64(n)
}

// setConf records the replica's configuration after a membership change.
func (ps *peerStorage) setConf(cs *pb.ConfState) {
	ps.mu.Lock()
	ps.conf = proto.Clone(cs).(*pb.ConfState)
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
	if index >= ps.cacheFirst {
		drop := min(index-ps.cacheFirst+1, uint64(len(ps.ents)))
		for _, e := range ps.ents[:drop] {
			ps.entsBytes -= uint64(len(e.Data))
		}
		ps.dropCached(int(drop))
	}
	// logBytes is approximate: what the truncated part held is estimated
	// from its share of the entries.
	if n := ps.last - ps.apply.TruncatedIndex; n > 0 {
		gone := min(index, ps.last) - ps.apply.TruncatedIndex
		ps.logBytes -= ps.logBytes * gone / n
	}
	ps.apply.TruncatedIndex, ps.apply.TruncatedTerm = index, term
}

// logSize is the number of entries and payload bytes in the live log.
func (ps *peerStorage) logSize() (n, bytes uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.last - ps.apply.TruncatedIndex, ps.logBytes
}

// lastIndex is the index of the last entry in the durable log.
func (ps *peerStorage) lastIndex() uint64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.last
}

// termAt returns the term of a live entry (0 when it is not in the log).
func (ps *peerStorage) termAt(i uint64) uint64 {
	t, _ := ps.Term(i)
	return t
}

// termVote returns the persisted HardState's term and vote.
func (ps *peerStorage) termVote() (term, vote uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.hard.GetTerm(), ps.hard.GetVote()
}
