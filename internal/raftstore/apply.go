package raftstore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Applying committed entries happens in two steps. planApply decides, from
// the region descriptor and the entries alone, what each entry does: a
// write to merge, a split, a membership change, or a deterministic refusal
// (the same on every replica). It touches nothing and is tested alone
// (testdata/apply). The store then carries a round's plans out
// (applyRound): one KV-engine batch with every replica's effects and
// applied index, the observer's hooks around its commit, and the
// in-memory changes (new replicas, descriptors, raft configuration) after
// it.

// entryOutcome is what one committed entry does.
type entryOutcome struct {
	index uint64
	id    uint64 // proposal id (0 for raft's own empty entries)
	// err is a deterministic refusal, returned to the proposer.
	err error
	// repr is a write batch to merge into the engine.
	repr []byte
	// left, right are the regions an applied split produced;
	// rightExists is set when this store already holds an initialized
	// replica of right (it received a snapshot of it before applying the
	// split), which is then kept as it is.
	left, right *kvpb.Region
	rightExists bool
	// cc and conf are an applied membership change and the region it
	// left; removed is set when it removed this store's replica.
	cc      *pb.ConfChangeV2
	conf    *kvpb.Region
	removed bool
	// region is the descriptor a merge command (prepare, commit,
	// rollback) left; prepared is the merge state a PrepareMerge set,
	// commit the CommitMerge applied (merge.go).
	region   *kvpb.Region
	prepared *kvpb.MergeState
	commit   *commitMergeCmd
}

// applyPlan is what a run of committed entries does to one region.
type applyPlan struct {
	outcomes []entryOutcome
	// region is the descriptor after the entries (nil when unchanged).
	region *kvpb.Region
	// children are the regions split off in this run.
	children []*kvpb.Region
	// applied is the index of the last entry planned; after a removal of
	// the local replica nothing more is applied.
	applied uint64
	// removed: the local replica was removed by a membership change.
	removed bool
	writes  int
	// merge is the merge state after the entries; mergeSet reports that
	// the entries changed it (a PrepareMerge, a RollbackMerge).
	merge    *kvpb.MergeState
	mergeSet bool
}

// planApply decides what ents (committed, in order) do to region, on the
// replica of store; merge is the region's merge state (nil: not merging).
// exists reports whether a region id is already in use on the store (a
// split must create a new region).
func planApply(region *kvpb.Region, merge *kvpb.MergeState, store uint64, ents []*pb.Entry, exists func(uint64) bool) (applyPlan, error) {
	plan := applyPlan{merge: merge}
	created := map[uint64]bool{}
	for _, e := range ents {
		plan.applied = e.GetIndex()
		switch e.GetType() {
		case pb.EntryType_EntryNormal:
			if len(e.Data) == 0 {
				continue // a new leader's empty entry
			}
			cmd, err := decodeCommand(e.Data)
			if err != nil {
				return applyPlan{}, fmt.Errorf("region %d entry %d: %w", region.Id, e.GetIndex(), err)
			}
			out := entryOutcome{index: e.GetIndex(), id: cmd.id}
			switch cmd.kind {
			case cmdWrite, cmdWriteBatch:
				if cmd.kind == cmdWrite && cmd.version != region.Epoch.GetVersion() {
					out.err = errEpochChanged
					break
				}
				if merge != nil {
					out.err = errFrozen
					break
				}
				out.repr = cmd.repr
				plan.writes++
			case cmdPrepareMerge:
				r, ms, err := prepareMergeRegion(region, merge, cmd.prepare, e.GetIndex())
				if err != nil {
					out.err = err
					break
				}
				out.region, out.prepared = r, ms
				region, plan.region = r, r
				merge, plan.merge, plan.mergeSet = ms, ms, true
			case cmdRollbackMerge:
				r, err := rollbackMergeRegion(region, merge, cmd.rollback)
				if err != nil {
					out.err = err
					break
				}
				out.region = r
				region, plan.region = r, r
				merge, plan.merge, plan.mergeSet = nil, nil, true
			case cmdCommitMerge:
				r, err := commitMergeRegion(region, merge, cmd.commit)
				if err != nil {
					out.err = err
					break
				}
				out.region, out.commit = r, cmd.commit
				region, plan.region = r, r
			case cmdSplit:
				if merge != nil {
					out.err = errFrozen
					break
				}
				left, right, err := splitRegion(region, cmd.split)
				if err == nil && created[right.Id] {
					err = fmt.Errorf("raftstore: split of region %d: region %d already exists", region.Id, right.Id)
				}
				if err != nil {
					out.err = err
					break
				}
				created[right.Id] = true
				out.left, out.right, out.rightExists = left, right, exists(right.Id)
				region, plan.region = left, left
				if !out.rightExists {
					plan.children = append(plan.children, right)
				}
			}
			plan.outcomes = append(plan.outcomes, out)
		case pb.EntryType_EntryConfChangeV2, pb.EntryType_EntryConfChange:
			cc, err := decodeConfChangeEntry(e)
			if err != nil {
				return applyPlan{}, fmt.Errorf("region %d entry %d: %w", region.Id, e.GetIndex(), err)
			}
			cmd, err := decodeConfChangeContext(cc.Context)
			if err != nil {
				return applyPlan{}, fmt.Errorf("region %d entry %d: %w", region.Id, e.GetIndex(), err)
			}
			out := entryOutcome{index: e.GetIndex(), id: cmd.id}
			next, err := applyConfChangeToRegion(region, cc, cmd)
			if err == nil && merge != nil {
				err = errFrozen
			}
			if err != nil {
				out.err = err
			} else {
				out.cc, out.conf = cc, next
				region, plan.region = next, next
				if localPeer(next, store) == nil {
					out.removed, plan.removed = true, true
				}
			}
			plan.outcomes = append(plan.outcomes, out)
			if plan.removed {
				return plan, nil
			}
		}
	}
	return plan, nil
}

// decodeConfChangeEntry parses a conf change entry (ours are always V2).
func decodeConfChangeEntry(e *pb.Entry) (*pb.ConfChangeV2, error) {
	if e.GetType() == pb.EntryType_EntryConfChange {
		var cc pb.ConfChange
		if err := proto.Unmarshal(e.Data, &cc); err != nil {
			return nil, err
		}
		return cc.AsV2(), nil
	}
	cc := &pb.ConfChangeV2{}
	if err := proto.Unmarshal(e.Data, cc); err != nil {
		return nil, err
	}
	return cc, nil
}

// applyRound applies ents[i] to readies[i].p for every replica in one
// batch, together with each replica's new applied index, then wakes the
// proposers of the applied entries.
//
// A split's effects go into the same batch: the parent's shrunk
// descriptor, the new region's descriptor and applied index
// (raftInitIndex). Only the new region's initial Raft state lives in the
// Raft engine; it is written (synced) before the batch commits, and only
// if the region has none, so a split replayed after a crash keeps the log
// the new region wrote since. The new replica is created once the batch is
// committed. A membership change writes the new descriptor; raft's
// configuration follows it once the batch is committed.
func (s *Store) applyRound(readies []readyPeer, ents [][]*pb.Entry) error {
	ab := s.db.NewBatch()
	defer ab.Close()
	type applied struct {
		p        *Peer
		plan     applyPlan
		isLeader bool
		term     uint64
		// merged are the source replicas this plan's CommitMerges
		// took in, caughtUp the writes their catch-up staged.
		merged   []*Peer
		caughtUp [][]byte
	}
	var done []applied
	// planned: each replica's state as the plans so far leave it;
	// consumed: sources merged in this round, whose own entries are
	// not applied any more.
	planned := map[*Peer]plannedSource{}
	consumed := map[*Peer]bool{}
	var raftBatch *pebble.Batch // new regions' initial Raft state
	defer func() {
		if raftBatch != nil {
			raftBatch.Close()
		}
	}()
	exists := func(id uint64) bool {
		q, ok := s.Peer(id)
		return ok && q.Initialized()
	}
	for i, r := range readies {
		if len(ents[i]) == 0 || r.p.removed.Load() || consumed[r.p] {
			continue
		}
		r.p.mu.Lock()
		a := applied{p: r.p, isLeader: r.p.isLeader, term: r.p.term}
		r.p.mu.Unlock()
		region := r.p.Region()
		plan, err := planApply(region, r.p.merge.Load(), s.storeID, ents[i], exists)
		if err != nil {
			return err
		}
		a.plan = plan
		for _, out := range plan.outcomes {
			switch {
			case out.err != nil:
			case out.commit != nil:
				src, reprs, err := s.catchUpSource(ab, out.commit, planned)
				if err != nil {
					return err
				}
				consumed[src] = true
				a.merged = append(a.merged, src)
				a.caughtUp = append(a.caughtUp, reprs...)
				if err := stageRegion(ab, out.region); err != nil {
					return err
				}
			case out.prepared != nil:
				if err := stageRegion(ab, out.region); err != nil {
					return err
				}
				if err := stageMergeState(ab, region.Id, out.prepared); err != nil {
					return err
				}
			case out.region != nil: // a rollback
				if err := stageRegion(ab, out.region); err != nil {
					return err
				}
				if err := stageMergeState(ab, region.Id, nil); err != nil {
					return err
				}
			case out.repr != nil:
				if err := applyWriteBatch(ab, out.id, out.repr); err != nil {
					return fmt.Errorf("region %d entry %d: %w", region.Id, out.index, err)
				}
			case out.right != nil && out.rightExists:
				// Only the parent changes here; the split-off region's
				// replica came by snapshot and is newer than the split.
				if err := stageRegion(ab, out.left); err != nil {
					return err
				}
			case out.right != nil:
				if err := stageSplit(ab, out.left, out.right); err != nil {
					return err
				}
				if raftBatch == nil {
					raftBatch = s.raftDB.NewBatch()
				}
				if err := s.stageInitialRaftState(raftBatch, out.right.Id); err != nil {
					return err
				}
			case out.conf != nil && !out.removed:
				if err := stageRegion(ab, out.conf); err != nil {
					return err
				}
			}
		}
		if !plan.removed {
			if err := ab.Set(engine.ApplyStateKey(region.Id), engine.EncodeAppliedIndex(plan.applied), nil); err != nil {
				return err
			}
		}
		ps := plannedSource{region: region, merge: r.p.merge.Load(), applied: plan.applied}
		if plan.region != nil {
			ps.region = plan.region
		}
		if plan.mergeSet {
			ps.merge = plan.merge
		}
		planned[r.p] = ps
		done = append(done, a)
	}
	if len(done) == 0 {
		return nil
	}
	if raftBatch != nil && !raftBatch.Empty() {
		if err := raftBatch.Commit(pebble.Sync); err != nil {
			return err
		}
	}
	for _, a := range done {
		for _, repr := range a.caughtUp {
			if err := s.obs.BeforeApply(repr); err != nil {
				return err
			}
		}
		for _, out := range a.plan.outcomes {
			if out.repr != nil && out.err == nil {
				if err := s.obs.BeforeApply(out.repr); err != nil {
					return err
				}
			}
		}
	}
	if err := s.obs.BeforeCommit(ab); err != nil {
		return err
	}
	if err := ab.Commit(pebble.NoSync); err != nil {
		return err
	}
	s.memtableBytes += uint64(ab.Len())
	for _, a := range done {
		if a.p.removed.Load() {
			continue // a source a later plan of the round merged
		}
		for _, src := range a.merged {
			if err := s.destroyMergedSource(src); err != nil {
				return err
			}
			if s.onMergeCommitted != nil {
				s.onMergeCommitted(src.Region(), a.p.leaderReady.Load())
			}
		}
		for _, repr := range a.caughtUp {
			if err := s.obs.AfterApply(repr); err != nil {
				return err
			}
		}
		if err := s.finishApply(a.p, a.plan, a.isLeader, a.term); err != nil {
			return err
		}
	}
	return nil
}

// finishApply makes the in-memory state follow an applied plan and wakes
// its proposers. Store loop.
func (s *Store) finishApply(p *Peer, plan applyPlan, isLeader bool, term uint64) error {
	// The new regions are registered before the parent's range shrinks,
	// so a client sent away by the parent finds them.
	for _, child := range plan.children {
		if err := s.addSplitPeer(p, child, isLeader); err != nil {
			return err
		}
	}
	for _, out := range plan.outcomes {
		if out.cc == nil {
			continue
		}
		p.mu.Lock()
		cs := p.rn.ApplyConfChange(out.cc)
		p.revokeLeaseLocked()
		p.mu.Unlock()
		if !out.removed && !sameConfState(cs, confStateOf(out.conf)) {
			return fmt.Errorf("raftstore: region %d: raft configuration %v does not match the descriptor's %v", p.regionID, cs, confStateOf(out.conf))
		}
		p.storage.setConf(cs)
	}
	if plan.mergeSet {
		// Frozen (or unfrozen) before the new descriptor shows.
		p.merge.Store(plan.merge)
		s.noteMerging(p)
		if plan.merge != nil {
			p.mu.Lock()
			p.revokeLeaseLocked()
			p.mu.Unlock()
		}
	}
	for _, out := range plan.outcomes {
		if out.commit != nil && out.err == nil {
			// The source's keys join the range: the KV service syncs
			// its max_ts again before its next one-phase commit.
			p.maxTSTerm.Store(0)
		}
	}
	if plan.region != nil {
		p.region.Store(plan.region)
		s.layoutChanged()
		// A snapshot taken before carries the old descriptor: a replica
		// added since would not find itself in its configuration.
		p.storage.setSnapshot(nil)
	}
	for _, out := range plan.outcomes {
		if out.repr != nil && out.err == nil {
			if err := s.obs.AfterApply(out.repr); err != nil {
				return err
			}
		}
	}
	p.storage.setApplied(plan.applied)
	var stale *kvpb.RegionError
	p.mu.Lock()
	var latest = p.leaderSince
	for _, out := range plan.outcomes {
		prop, ok := p.proposals[out.id]
		if !ok {
			continue
		}
		delete(p.proposals, out.id)
		err := out.err
		if errors.Is(err, errEpochChanged) {
			if stale == nil {
				stale = p.epochNotMatch(p.Region())
			}
			err = &RegionErr{E: stale}
		} else if errors.Is(err, errFrozen) {
			err = &RegionErr{E: p.mergingError(p.Region())}
		}
		switch {
		case out.right != nil:
			prop.regions = []*kvpb.Region{out.left, out.right}
		case out.conf != nil:
			prop.regions = []*kvpb.Region{out.conf}
		case out.region != nil:
			prop.regions = []*kvpb.Region{out.region}
		}
		if prop.acked && err != nil {
			// ackCommitted promised this entry would apply.
			panic(fmt.Sprintf("raftstore: region %d: proposal %d acknowledged at commit was refused at apply: %v",
				p.regionID, out.id, err))
		}
		if err == nil && prop.at > latest {
			latest = prop.at
		}
		if out.cc != nil {
			// Raft counts the change applied only at Advance: a change
			// proposed before that (the next step of a promotion, say)
			// would be dropped as "one already pending". Its proposer
			// hears after Advance.
			p.afterAdvance = append(p.afterAdvance, func() { prop.finish(err) })
			continue
		}
		prop.finish(err)
	}
	if isLeader && p.isLeader && p.term == term {
		if !p.leaderReady.Load() && p.appliedOwnTermLocked(plan.applied) {
			p.leaderReady.Store(true)
			p.readyTerm.Store(term)
			if s.onLeader != nil {
				defer s.onLeader(p.regionID, true)
			}
		}
		if p.leaderReady.Load() {
			p.renewLeaseLocked(latest)
		}
	}
	p.releaseReadsLocked(plan.applied)
	p.mu.Unlock()
	metricProposals.Add(float64(plan.writes))
	if plan.removed {
		return s.destroyPeer(p)
	}
	return nil
}

// appliedOwnTermLocked reports whether the entry at applied belongs to the
// replica's current term: a new leader serves only once it has applied an
// entry of its own term, so every entry committed before it is applied.
// p.mu held.
func (p *Peer) appliedOwnTermLocked(applied uint64) bool {
	t, err := p.storage.Term(applied)
	return err == nil && t == p.term
}

// stageSplit writes a split's region descriptors and the new region's
// applied index into the apply batch.
func stageSplit(ab *pebble.Batch, left, right *kvpb.Region) error {
	for _, r := range []*kvpb.Region{left, right} {
		if err := stageRegion(ab, r); err != nil {
			return err
		}
	}
	return ab.Set(engine.ApplyStateKey(right.Id), engine.EncodeAppliedIndex(raftInitIndex), nil)
}

// stageRegion writes a region descriptor into the apply batch.
func stageRegion(ab *pebble.Batch, r *kvpb.Region) error {
	data, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	return ab.Set(engine.RegionStateKey(r.Id), data, nil)
}

// stageInitialRaftState writes the Raft state a region created by a split
// starts from (as if a snapshot at raftInitIndex, raftInitTerm had been
// applied), unless the Raft engine already holds a log for it: then the
// split is being replayed after a crash, and the region's log since then
// must be kept. A HardState an uninitialized replica of the region wrote
// (it voted before the split reached this store) is kept if its term is
// newer, so that it never votes twice in a term.
func (s *Store) stageInitialRaftState(b *pebble.Batch, regionID uint64) error {
	if _, ok, err := engine.GetCopy(s.raftDB, engine.TruncatedStateKey(regionID)); err != nil || ok {
		return err
	}
	hs := &pb.HardState{Term: proto.Uint64(raftInitTerm), Commit: proto.Uint64(raftInitIndex)}
	if v, ok, err := engine.GetCopy(s.raftDB, engine.HardStateKey(regionID)); err != nil {
		return err
	} else if ok {
		old := &pb.HardState{}
		if err := proto.Unmarshal(v, old); err != nil {
			return err
		}
		if old.GetTerm() > raftInitTerm {
			hs.Term, hs.Vote = old.Term, old.Vote
		}
	}
	data, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	if err := b.Set(engine.HardStateKey(regionID), data, nil); err != nil {
		return err
	}
	return b.Set(engine.TruncatedStateKey(regionID), engine.EncodeTruncatedState(raftInitIndex, raftInitTerm), nil)
}

// addSplitPeer creates and registers the local replica of a region split
// off parent (its state was just committed), replacing an uninitialized
// replica of it that a leader's message created first. It campaigns at
// once when the parent's replica here was the leader, as TiKV does, so
// the new region is served without waiting for an election timeout; a
// region whose only voter is this store campaigns in any case.
func (s *Store) addSplitPeer(parent *Peer, r *kvpb.Region, parentLeader bool) error {
	if old, ok := s.Peer(r.Id); ok && !old.Initialized() {
		old.removed.Store(true)
		old.mu.Lock()
		old.failProposalsLocked(ErrStopped)
		old.failReadsLocked(old.notLeaderError())
		old.mu.Unlock()
	}
	cp, err := s.newPeer(r)
	if err != nil {
		return fmt.Errorf("raftstore: create region %d split off region %d: %w", r.Id, parent.Region().Id, err)
	}
	s.addPeer(cp)
	var ids []uint64
	if old := parent.children.Load(); old != nil {
		ids = append(ids, *old...)
	}
	ids = append(ids, r.Id)
	if len(ids) > maxChildrenRemembered {
		ids = ids[len(ids)-maxChildrenRemembered:]
	}
	parent.children.Store(&ids)
	if parentLeader || onlyVoter(r, cp.id) {
		cp.mu.Lock()
		cp.wakeLocked()
		err = cp.rn.Campaign()
		cp.mu.Unlock()
	} else {
		// Votes its leader asked for before the split got here.
		for _, env := range s.takePendingVotes(r.Id) {
			m := &pb.Message{}
			if proto.Unmarshal(env.Message, m) != nil || env.ToPeer.GetId() != cp.id {
				continue
			}
			cp.mu.Lock()
			cp.peerStores[env.FromPeer.GetId()] = env.FromPeer.GetStoreId()
			_ = cp.rn.Step(m)
			cp.mu.Unlock()
		}
	}
	return err
}

// applyWriteBatch merges a proposal's writes into the apply batch. The
// representation is decoded in place: it belongs to the Raft entry (also
// held by the in-memory log) and must not be handed to a pooled Pebble
// batch, which would reuse it as a buffer.
func applyWriteBatch(ab *pebble.Batch, id uint64, repr []byte) error {
	h, ok := batchrepr.ReadHeader(repr)
	if !ok {
		return fmt.Errorf("raftstore: proposal %d: %w", id, pebble.ErrInvalidBatch)
	}
	r := batchrepr.Read(repr)
	var n uint32
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return fmt.Errorf("raftstore: proposal %d: %w", id, err)
		}
		if !ok {
			break
		}
		n++
		switch kind {
		case pebble.InternalKeyKindSet:
			err = ab.Set(k, v, nil)
		case pebble.InternalKeyKindDelete:
			err = ab.Delete(k, nil)
		case pebble.InternalKeyKindSingleDelete:
			err = ab.SingleDelete(k, nil)
		case pebble.InternalKeyKindDeleteSized:
			err = ab.Delete(k, nil)
		case pebble.InternalKeyKindRangeDelete:
			err = ab.DeleteRange(k, v, nil)
		case pebble.InternalKeyKindLogData:
		default:
			err = fmt.Errorf("raftstore: proposal %d: unsupported batch operation %v", id, kind)
		}
		if err != nil {
			return err
		}
	}
	if n != h.Count {
		return fmt.Errorf("raftstore: proposal %d: batch holds %d operations, header says %d", id, n, h.Count)
	}
	return nil
}
