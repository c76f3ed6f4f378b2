package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Region merge, TiKV's protocol. A small region (the source) merges into
// an adjacent one (the target) whose replicas are on the same stores, so
// the data are in the same engines and nothing is copied.
//
//  1. PrepareMerge (Store.PrepareMerge, proposed by the source's leader)
//     freezes the source: from its apply on, the source takes no write,
//     split or membership change and serves no request (Check answers
//     ServerBusy), and its epoch's version and conf version move, so
//     writes proposed before it are refused at apply. The merge state
//     (the PrepareMerge index, the lowest index any replica had, the
//     target as it was) is written with the descriptor, in the same
//     apply batch, so a restart resumes the merge (kvpb.MergeState).
//  2. CommitMerge: the source's leader (driveMerge, on every tick) proposes
//     it through the target's leader on its own store, carrying the
//     source's frozen descriptor, the PrepareMerge index and the source's
//     log entries from the lowest index any source replica had. When the
//     target's leader is on another store, the source's leadership moves
//     there first.
//  3. Every target replica applies CommitMerge only with its store's
//     source replica at the PrepareMerge index: a source replica behind
//     it is caught up first, in the same apply batch, from its own log
//     and the entries the command carries (the source's leader may be
//     gone by then). The target's range then covers the source's, its
//     version is above both regions', and the source replica is
//     destroyed without its data (its descriptor, merge state and Raft
//     state go; the KV engine is flushed before its tombstone is written,
//     so a crash never finds a tombstone next to a descriptor, which
//     would delete the data).
//  4. RollbackMerge: when the target has moved on (its epoch at this
//     store is newer than the one recorded, it is merging itself, or its
//     replica here is gone), no CommitMerge under the recorded epoch can
//     ever apply, and the source's leader rolls the merge back: the
//     source unfreezes at version + 1.
//
// Replicas of a frozen source refuse requests, so nothing it served can
// be missed by the target's conflict checks. The in-memory pessimistic
// locks its leader took stay valid on a store that leads the merged
// region when CommitMerge applies there (nothing wrote the source's keys
// since, and the driver commits on the store of both leaders), and go
// on every other store (Config.OnMergeCommitted; a store that stops
// leading the source drops them as on any loss of leadership). A target
// replica that applied CommitMerge forgets its max_ts sync
// (SetMaxTSSynced(0)), so the KV service fetches a fresh timestamp before
// its next one-phase commit over the source's keys.

// ErrMerging is wrapped by the errors of proposals refused because the
// region is frozen by a merge.
var ErrMerging = errors.New("raftstore: region is merging")

// prepareMergeCmd freezes a source region for a merge into target.
type prepareMergeCmd struct {
	confVer, version uint64 // the source epoch it was proposed under
	minIndex         uint64
	target           *kvpb.Region
}

// commitMergeCmd merges source into the target region.
type commitMergeCmd struct {
	confVer, version uint64 // the target epoch it was proposed under
	prepareIndex     uint64
	source           *kvpb.Region
	entries          []*pb.Entry
}

func encodePrepareMerge(id uint64, c *prepareMergeCmd) ([]byte, error) {
	t, err := proto.Marshal(c.target)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, cmdHeaderLen+3*8+len(t))
	data = append(data, cmdPrepareMerge)
	data = binary.BigEndian.AppendUint64(data, id)
	data = binary.BigEndian.AppendUint64(data, c.confVer)
	data = binary.BigEndian.AppendUint64(data, c.version)
	data = binary.BigEndian.AppendUint64(data, c.minIndex)
	return append(data, t...), nil
}

func decodePrepareMerge(body []byte) (*prepareMergeCmd, error) {
	if len(body) < 3*8 {
		return nil, errors.New("truncated")
	}
	c := &prepareMergeCmd{confVer: binary.BigEndian.Uint64(body), version: binary.BigEndian.Uint64(body[8:]),
		minIndex: binary.BigEndian.Uint64(body[16:]), target: &kvpb.Region{}}
	if err := proto.Unmarshal(body[24:], c.target); err != nil {
		return nil, err
	}
	return c, nil
}

func encodeCommitMerge(id uint64, c *commitMergeCmd) ([]byte, error) {
	src, err := proto.Marshal(c.source)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, cmdHeaderLen+3*8+8+len(src))
	data = append(data, cmdCommitMerge)
	data = binary.BigEndian.AppendUint64(data, id)
	data = binary.BigEndian.AppendUint64(data, c.confVer)
	data = binary.BigEndian.AppendUint64(data, c.version)
	data = binary.BigEndian.AppendUint64(data, c.prepareIndex)
	data = binary.BigEndian.AppendUint32(data, uint32(len(src)))
	data = append(data, src...)
	data = binary.BigEndian.AppendUint32(data, uint32(len(c.entries)))
	for _, e := range c.entries {
		b, err := proto.Marshal(e)
		if err != nil {
			return nil, err
		}
		data = binary.BigEndian.AppendUint32(data, uint32(len(b)))
		data = append(data, b...)
	}
	return data, nil
}

func decodeCommitMerge(body []byte) (*commitMergeCmd, error) {
	short := errors.New("truncated")
	if len(body) < 3*8+4 {
		return nil, short
	}
	c := &commitMergeCmd{confVer: binary.BigEndian.Uint64(body), version: binary.BigEndian.Uint64(body[8:]),
		prepareIndex: binary.BigEndian.Uint64(body[16:]), source: &kvpb.Region{}}
	n := uint64(binary.BigEndian.Uint32(body[24:]))
	body = body[28:]
	if uint64(len(body)) < n+4 {
		return nil, short
	}
	if err := proto.Unmarshal(body[:n], c.source); err != nil {
		return nil, err
	}
	count := binary.BigEndian.Uint32(body[n:])
	body = body[n+4:]
	for i := uint32(0); i < count; i++ {
		if len(body) < 4 {
			return nil, short
		}
		l := uint64(binary.BigEndian.Uint32(body))
		if uint64(len(body)-4) < l {
			return nil, short
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(body[4:4+l], e); err != nil {
			return nil, err
		}
		c.entries = append(c.entries, e)
		body = body[4+l:]
	}
	return c, nil
}

func encodeRollbackMerge(id, prepareIndex uint64) []byte {
	data := make([]byte, 0, cmdHeaderLen+8)
	data = append(data, cmdRollbackMerge)
	data = binary.BigEndian.AppendUint64(data, id)
	return binary.BigEndian.AppendUint64(data, prepareIndex)
}

// mergeable reports why source cannot merge into target: they must be
// adjacent, out of any joint configuration, and have one voter each on
// the same stores.
func mergeable(source, target *kvpb.Region) error {
	adjacent := (len(source.EndKey) > 0 && bytes.Equal(source.EndKey, target.StartKey)) ||
		(len(target.EndKey) > 0 && bytes.Equal(target.EndKey, source.StartKey))
	if !adjacent {
		return fmt.Errorf("raftstore: regions %d and %d are not adjacent", source.Id, target.Id)
	}
	if source.Id == target.Id {
		return fmt.Errorf("raftstore: region %d cannot merge into itself", source.Id)
	}
	if len(source.Peers) != len(target.Peers) {
		return fmt.Errorf("raftstore: regions %d and %d have replicas on different stores", source.Id, target.Id)
	}
	for _, sp := range source.Peers {
		tp := localPeer(target, sp.StoreId)
		if tp == nil {
			return fmt.Errorf("raftstore: regions %d and %d have replicas on different stores", source.Id, target.Id)
		}
		if sp.Role != kvpb.PeerRole_Voter || tp.Role != kvpb.PeerRole_Voter {
			return fmt.Errorf("raftstore: regions %d and %d must have voters only to merge", source.Id, target.Id)
		}
	}
	return nil
}

// prepareMergeRegion is the source's descriptor and merge state once a
// PrepareMerge at index applies, or why it is refused. Deterministic.
func prepareMergeRegion(r *kvpb.Region, merge *kvpb.MergeState, c *prepareMergeCmd, index uint64) (*kvpb.Region, *kvpb.MergeState, error) {
	e := r.GetEpoch()
	if c.confVer != e.GetConfVer() || c.version != e.GetVersion() {
		return nil, nil, errEpochChanged
	}
	if merge != nil {
		return nil, nil, fmt.Errorf("%w: region %d is already merging into region %d", ErrMerging, r.Id, merge.Target.GetId())
	}
	if err := mergeable(r, c.target); err != nil {
		return nil, nil, err
	}
	out := proto.Clone(r).(*kvpb.Region)
	out.Epoch.Version++
	out.Epoch.ConfVer++
	return out, &kvpb.MergeState{PrepareIndex: index, MinIndex: c.minIndex, Target: c.target}, nil
}

// commitMergeRegion is the target's descriptor once a CommitMerge
// applies, or why it is refused. Deterministic.
func commitMergeRegion(t *kvpb.Region, merge *kvpb.MergeState, c *commitMergeCmd) (*kvpb.Region, error) {
	e := t.GetEpoch()
	if c.confVer != e.GetConfVer() || c.version != e.GetVersion() {
		return nil, errEpochChanged
	}
	if merge != nil {
		return nil, fmt.Errorf("%w: region %d cannot take region %d in: it is merging itself", ErrMerging, t.Id, c.source.Id)
	}
	if err := mergeable(c.source, t); err != nil {
		return nil, err
	}
	out := proto.Clone(t).(*kvpb.Region)
	if bytes.Equal(c.source.EndKey, t.StartKey) {
		out.StartKey = append([]byte(nil), c.source.StartKey...)
	} else {
		out.EndKey = append([]byte(nil), c.source.EndKey...)
	}
	out.Epoch.Version = max(t.Epoch.GetVersion(), c.source.Epoch.GetVersion()) + 1
	return out, nil
}

// rollbackMergeRegion is the source's descriptor once a RollbackMerge of
// the PrepareMerge at prepareIndex applies.
func rollbackMergeRegion(r *kvpb.Region, merge *kvpb.MergeState, prepareIndex uint64) (*kvpb.Region, error) {
	if merge == nil || merge.PrepareIndex != prepareIndex {
		return nil, fmt.Errorf("raftstore: region %d has no merge prepared at index %d to roll back", r.Id, prepareIndex)
	}
	out := proto.Clone(r).(*kvpb.Region)
	out.Epoch.Version++
	return out, nil
}

// Merging returns the merge the replica's region is frozen by (nil when
// it is not merging).
func (p *Peer) Merging() *kvpb.MergeState { return p.merge.Load() }

// mergingError is the region error of a request to a frozen source.
func (p *Peer) mergingError(r *kvpb.Region) *kvpb.RegionError {
	return &kvpb.RegionError{Message: fmt.Sprintf("region %d is merging", r.Id),
		ServerBusy: &kvpb.ServerBusy{Reason: "region is merging", BackoffMs: 50}}
}

// loadMergeState reads a replica's persisted merge state (nil: none).
func loadMergeState(db pebble.Reader, regionID uint64) (*kvpb.MergeState, error) {
	v, ok, err := engine.GetCopy(db, engine.MergeStateKey(regionID))
	if err != nil || !ok {
		return nil, err
	}
	ms := &kvpb.MergeState{}
	if err := proto.Unmarshal(v, ms); err != nil {
		return nil, fmt.Errorf("raftstore: region %d: corrupt merge state: %w", regionID, err)
	}
	return ms, nil
}

// PrepareMerge freezes p's region (the source; p must lead it) for a merge
// into its neighbour targetID, whose replica on this store must have the
// same stores and be current. epoch is the source epoch the caller decided
// under. It returns once PrepareMerge is applied here; the store then
// finishes the merge on its own (driveMerge), or rolls it back.
func (s *Store) PrepareMerge(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, targetID uint64) error {
	if s.closed.Load() {
		return ErrStopped
	}
	r := p.Region()
	if epoch.GetVersion() != r.Epoch.GetVersion() || epoch.GetConfVer() != r.Epoch.GetConfVer() {
		return &RegionErr{E: p.epochNotMatch(r)}
	}
	if m := p.merge.Load(); m != nil {
		return fmt.Errorf("%w: region %d is already merging into region %d", ErrMerging, r.Id, m.Target.GetId())
	}
	t, ok := s.Peer(targetID)
	if !ok || !t.Initialized() || t.removed.Load() {
		return fmt.Errorf("raftstore: merge of region %d: this store has no replica of region %d", r.Id, targetID)
	}
	if t.merge.Load() != nil {
		return fmt.Errorf("%w: merge of region %d: region %d is merging", ErrMerging, r.Id, targetID)
	}
	tr := t.Region()
	if err := mergeable(r, tr); err != nil {
		return err
	}
	// Every replica's log must hold what the catch-up needs: the entries
	// from the lowest matched index on, none of which may change the
	// region (the catch-up applies writes only).
	p.mu.Lock()
	if !p.isLeader {
		p.mu.Unlock()
		return p.notLeaderError()
	}
	st := p.rn.Status()
	p.mu.Unlock()
	last := p.storage.lastIndex()
	minMatch := last
	for _, rp := range r.Peers {
		pr, ok := st.Progress[rp.Id]
		if !ok {
			return fmt.Errorf("raftstore: merge of region %d: no progress of peer %d", r.Id, rp.Id)
		}
		if rp.Id != p.id && pr.Match < minMatch {
			minMatch = pr.Match
		}
	}
	if trunc := p.storage.applyState().TruncatedIndex; minMatch < trunc {
		return fmt.Errorf("raftstore: merge of region %d: a replica is at index %d, below the log's start %d", r.Id, minMatch, trunc+1)
	}
	if minMatch < last {
		ents, err := p.storage.Entries(minMatch+1, last+1, math.MaxUint64)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.GetType() != pb.EntryType_EntryNormal {
				return fmt.Errorf("raftstore: merge of region %d: a membership change is still being replicated", r.Id)
			}
			if len(e.Data) > 0 && e.Data[0] != cmdWrite && e.Data[0] != cmdWriteBatch {
				return fmt.Errorf("raftstore: merge of region %d: a split or merge command is still being replicated", r.Id)
			}
		}
	}
	cmd := &prepareMergeCmd{confVer: epoch.GetConfVer(), version: epoch.GetVersion(), minIndex: minMatch, target: tr}
	if _, _, err := prepareMergeRegion(r, nil, cmd, 0); err != nil {
		return err
	}
	id := s.nextProp.Add(1)
	data, err := encodePrepareMerge(id, cmd)
	if err != nil {
		return err
	}
	prop, err := s.startProposal(p, id, data)
	if err != nil {
		return err
	}
	if err := s.wait(ctx, prop); err != nil {
		return err
	}
	s.log.Info("raftstore: merge prepared", "source", r.Id, "target", targetID)
	return nil
}

// checkMerges starts driveMerge for every merging source this store leads
// that has no driver running. Store loop, on every tick.
func (s *Store) checkMerges(merging []*Peer) {
	for _, p := range merging {
		if !p.leaderReady.Load() || p.removed.Load() || !p.driving.CompareAndSwap(false, true) {
			continue
		}
		s.mergeDrivers.Add(1)
		go func() {
			defer s.mergeDrivers.Add(-1)
			defer p.driving.Store(false)
			if err := s.driveMerge(p); err != nil && !s.closed.Load() {
				s.log.Info("raftstore: merge not finished yet", "source", p.regionID, "err", err)
			}
		}()
	}
}

// mergeStep bounds each proposal of the merge driver.
var mergeStep = 5 * time.Second

// driveMerge takes a merging source (p leads it) one step on: CommitMerge
// through the target's leader here, a leadership transfer to the store of
// the target's leader, or RollbackMerge when the target moved on.
func (s *Store) driveMerge(p *Peer) error {
	ms := p.merge.Load()
	if ms == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), mergeStep)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	want := ms.Target.GetEpoch()
	t, ok := s.Peer(ms.Target.GetId())
	if !ok || t.removed.Load() || !t.Initialized() {
		s.mu.RLock()
		_, gone := s.tombstones[ms.Target.GetId()]
		s.mu.RUnlock()
		if gone {
			return s.rollbackMerge(ctx, p, ms, "the target's replica here is gone")
		}
		return errors.New("no replica of the target here yet")
	}
	tr := t.Region()
	src := p.Region()
	if keyInRegion(tr, src.StartKey) == nil {
		return nil // committed here: the source is being destroyed
	}
	e := tr.GetEpoch()
	switch {
	case e.GetVersion() == want.GetVersion() && e.GetConfVer() == want.GetConfVer():
	case e.GetVersion() < want.GetVersion() || (e.GetVersion() == want.GetVersion() && e.GetConfVer() < want.GetConfVer()):
		return errors.New("the target's replica here is behind")
	default:
		return s.rollbackMerge(ctx, p, ms, fmt.Sprintf("the target moved on to version %d, conf version %d", e.GetVersion(), e.GetConfVer()))
	}
	if t.merge.Load() != nil {
		return s.rollbackMerge(ctx, p, ms, "the target is merging itself")
	}
	if !t.IsLeaderReady() {
		// The source's leadership goes to the store of the target's
		// leader, whose source leader proposes there.
		lead := t.LeaderOf()
		for _, tp := range tr.Peers {
			if tp.Id == lead && tp.StoreId != s.storeID {
				if sp := localPeer(src, tp.StoreId); sp != nil {
					return s.TransferLeader(p, sp.Id)
				}
			}
		}
		return errors.New("the target has no leader here")
	}
	return s.commitMerge(ctx, p, t, ms, tr)
}

// commitMerge proposes CommitMerge of source p's region into t.
func (s *Store) commitMerge(ctx context.Context, p, t *Peer, ms *kvpb.MergeState, tr *kvpb.Region) error {
	p.mu.Lock()
	if !p.isLeader {
		p.mu.Unlock()
		return p.notLeaderError()
	}
	st := p.rn.Status()
	p.mu.Unlock()
	lo := ms.PrepareIndex + 1
	for _, pr := range st.Progress {
		lo = min(lo, pr.Match+1)
	}
	lo = max(lo, ms.MinIndex+1, p.storage.applyState().TruncatedIndex+1)
	var ents []*pb.Entry
	if lo <= ms.PrepareIndex {
		var err error
		if ents, err = p.storage.Entries(lo, ms.PrepareIndex+1, math.MaxUint64); err != nil {
			return err
		}
	}
	cmd := &commitMergeCmd{confVer: tr.Epoch.GetConfVer(), version: tr.Epoch.GetVersion(), prepareIndex: ms.PrepareIndex,
		source: p.Region(), entries: ents}
	id := s.nextProp.Add(1)
	data, err := encodeCommitMerge(id, cmd)
	if err != nil {
		return err
	}
	prop, err := s.startProposal(t, id, data)
	if err != nil {
		return err
	}
	if err := s.wait(ctx, prop); err != nil {
		t.mu.Lock()
		delete(t.proposals, id)
		t.mu.Unlock()
		return err
	}
	s.log.Info("raftstore: merge committed", "source", p.regionID, "target", t.regionID)
	return nil
}

// rollbackMerge proposes RollbackMerge on source p.
func (s *Store) rollbackMerge(ctx context.Context, p *Peer, ms *kvpb.MergeState, why string) error {
	id := s.nextProp.Add(1)
	prop, err := s.startProposal(p, id, encodeRollbackMerge(id, ms.PrepareIndex))
	if err != nil {
		return err
	}
	if err := s.wait(ctx, prop); err != nil {
		p.mu.Lock()
		delete(p.proposals, id)
		p.mu.Unlock()
		return err
	}
	s.log.Info("raftstore: merge rolled back", "source", p.regionID, "target", ms.Target.GetId(), "why", why)
	return nil
}

// plannedSource is a source replica's state as this apply round leaves it
// so far.
type plannedSource struct {
	region  *kvpb.Region
	merge   *kvpb.MergeState
	applied uint64
}

// catchUpSource brings the local replica of a CommitMerge's source to the
// PrepareMerge index, staging the writes it had not applied into ab (from
// its own log, or the entries the command carries), and checks that it is
// then the source the command names. It returns the replica and the
// writes it staged. Store loop; a failure means the merge protocol's
// invariants are broken, and the store stops.
func (s *Store) catchUpSource(ab *pebble.Batch, c *commitMergeCmd, planned map[*Peer]plannedSource) (*Peer, [][]byte, error) {
	src, ok := s.Peer(c.source.Id)
	if !ok || !src.Initialized() || src.removed.Load() {
		return nil, nil, fmt.Errorf("raftstore: merge of region %d: no initialized replica of it on store %d", c.source.Id, s.storeID)
	}
	cur := plannedSource{region: src.Region(), merge: src.merge.Load(), applied: src.storage.applyState().AppliedIndex}
	if pl, ok := planned[src]; ok {
		cur = pl
	}
	var reprs [][]byte
	if cur.applied < c.prepareIndex {
		carried := make(map[uint64]*pb.Entry, len(c.entries))
		for _, e := range c.entries {
			carried[e.GetIndex()] = e
		}
		ents := make([]*pb.Entry, 0, c.prepareIndex-cur.applied)
		for i := cur.applied + 1; i <= c.prepareIndex; i++ {
			if e, ok := carried[i]; ok {
				ents = append(ents, e)
				continue
			}
			own, err := src.storage.Entries(i, i+1, math.MaxUint64)
			if err != nil || len(own) != 1 {
				return nil, nil, fmt.Errorf("raftstore: merge of region %d: its entry %d is neither here nor carried: %v", c.source.Id, i, err)
			}
			ents = append(ents, own[0])
		}
		exists := func(uint64) bool { return true }
		plan, err := planApply(cur.region, cur.merge, s.storeID, ents, exists)
		if err != nil {
			return nil, nil, err
		}
		for _, out := range plan.outcomes {
			switch {
			case out.err != nil:
			case out.repr != nil:
				if err := applyWriteBatch(ab, out.id, out.repr); err != nil {
					return nil, nil, err
				}
				reprs = append(reprs, out.repr)
			case out.prepared != nil:
			default:
				return nil, nil, fmt.Errorf("raftstore: merge of region %d: its catch-up holds entry %d changing the region", c.source.Id, out.index)
			}
		}
		if plan.region != nil {
			cur.region = plan.region
		}
	}
	e := cur.region.GetEpoch()
	if e.GetVersion() != c.source.Epoch.GetVersion() || e.GetConfVer() != c.source.Epoch.GetConfVer() ||
		!bytes.Equal(cur.region.StartKey, c.source.StartKey) || !bytes.Equal(cur.region.EndKey, c.source.EndKey) {
		return nil, nil, fmt.Errorf("raftstore: merge of region %d: its replica here is at %s, not the frozen %s",
			c.source.Id, fmtEpoch(cur.region), fmtEpoch(c.source))
	}
	for _, k := range [][]byte{engine.RegionStateKey(src.regionID), engine.ApplyStateKey(src.regionID), engine.MergeStateKey(src.regionID)} {
		if err := ab.Delete(k, nil); err != nil {
			return nil, nil, err
		}
	}
	return src, reprs, nil
}

func fmtEpoch(r *kvpb.Region) string {
	return fmt.Sprintf("[%q, %q) v%d c%d", r.StartKey, r.EndKey, r.Epoch.GetVersion(), r.Epoch.GetConfVer())
}

// destroyMergedSource removes the replica of a region merged into another
// (its descriptor is already deleted in the committed apply batch): the
// KV engine is flushed so that deletion is durable, then its Raft state
// goes and a tombstone stays. Its data stay: they belong to the target
// now. Store loop.
func (s *Store) destroyMergedSource(p *Peer) error {
	p.removed.Store(true)
	p.mu.Lock()
	p.failProposalsLocked(&RegionErr{E: &kvpb.RegionError{Message: fmt.Sprintf("region %d not found (merged)", p.regionID),
		RegionNotFound: &kvpb.RegionNotFound{RegionId: p.regionID}}})
	p.failReadsLocked(p.notLeaderError())
	wasReady := p.leaderReady.Swap(false)
	p.mu.Unlock()
	s.mu.Lock()
	if s.peers[p.regionID] == p {
		delete(s.peers, p.regionID)
		s.publishPeers()
	}
	s.tombstones[p.regionID] = p.id
	s.mu.Unlock()
	if err := s.db.Flush(); err != nil {
		return err
	}
	if err := s.writeTombstone(p); err != nil {
		return err
	}
	if wasReady && s.onLeader != nil {
		s.onLeader(p.regionID, false)
	}
	return nil
}
