package raftstore

import (
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/kvpb"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// The store loop: one goroutine drives every replica of the store. Each
// round it
//
//  1. starts the ReadIndex rounds reads are waiting for, and the snapshot
//     generations raft asked for;
//  2. drains Ready from every replica that has one, looking only at the
//     replicas awake at the last tick or woken since and those something
//     queued work for (poke): a hibernating replica costs nothing;
//  3. writes all their entries and HardStates (and received snapshots'
//     Raft state) into ONE batch of the Raft engine and commits it with
//     ONE fsync (group commit); a leader's messages leave before that
//     fsync, every other message only after it (etcd raft's "persist
//     before you send" for votes and acknowledgements; a leader may
//     replicate while it writes its own log, since raft counts its own
//     copy only once Advance reports it durable);
//  4. applies committed entries of all replicas in one KV-engine batch
//     which also carries each replica's applied index, so applied data
//     and applied index move together (no double apply after a crash):
//     entries already durable locally while the fsync runs, the rest after
//     it; a received snapshot is ingested before the entries after it;
//  5. wakes the proposers whose entries were applied, then Advance; a
//     one-phase commit's proposer (ProposeCommitted) is woken as soon as
//     its entry is durable, committed and certain to apply.

type readyPeer struct {
	p  *Peer
	rd raft.Ready
	// early: the messages were sent before the fsync (a leader's).
	early bool
}

func (s *Store) run() {
	defer close(s.stopped)
	var tickC <-chan time.Time
	if !s.manualTicks {
		ticker := time.NewTicker(tickInterval)
		defer ticker.Stop()
		tickC = ticker.C
	}
	var readies []readyPeer
	var peers, handled []*Peer
	s.mu.RLock()
	for _, p := range s.peers {
		s.noteAwake(p)
		s.noteMerging(p)
	}
	s.mu.RUnlock()
	for {
		select {
		case <-s.stop:
			s.failAll(ErrStopped)
			return
		case <-tickC:
			s.tickAll()
		case <-s.tick:
			s.tickAll()
			s.ticks.Add(1)
		case <-s.notify:
		case <-s.flushDone:
			s.flushDone = nil
			s.obs.FlushDone(s.flushToken)
			s.flushes = s.db.Metrics().Flush.Count
			if err := s.truncateLogs(s.flushCompact); err != nil {
				s.fatal("truncating logs", err)
			}
		}
		if err := s.destroyStale(); err != nil {
			s.fatal("destroying a stale replica", err)
		}
		handled = handled[:0]
		for {
			peers = s.roundPeers(peers[:0], handled)
			s.looked.Add(uint64(len(peers)))
			readies = readies[:0]
			for _, p := range peers {
				if p.removed.Load() {
					continue
				}
				// A sleeping replica has no Ready unless something
				// stepped it or queued work for it (poke).
				if p.asleep.Load() && p.pokedAt != s.round {
					continue
				}
				p.mu.Lock()
				p.requestReadIndexLocked()
				if p.rn.HasReady() {
					readies = append(readies, readyPeer{p: p, rd: p.rn.Ready()})
				}
				p.mu.Unlock()
				if p.storage.takeSnapshotRequest() {
					s.generateSnapshot(p)
				}
			}
			if len(readies) == 0 {
				break
			}
			s.busy.Store(true)
			if err := s.handleReadies(readies); err != nil {
				s.fatal("store loop", err)
			}
			s.busy.Store(false)
			// Advance may leave more to do: the next pass looks at these
			// replicas again, asleep or not.
			handled = handled[:0]
			for _, r := range readies {
				handled = append(handled, r.p)
			}
		}
		s.maybeRequestFlush(peers)
	}
}

// roundPeers collects into visit the replicas a pass of the store loop
// looks at: those queued by poke (and handled, the replicas whose Ready
// the last pass handled), then those awake at the last tick or woken
// since, each once. Every round used to look at every replica, and with
// thousands of hibernating regions that walk was most of an idle
// store's loop; a sleeping replica now costs nothing until something
// queues it. Store loop.
func (s *Store) roundPeers(visit, handled []*Peer) []*Peer {
	s.round++
	s.pokeMu.Lock()
	poked := s.poked
	s.poked = nil
	s.pokeMu.Unlock()
	for _, list := range [2][]*Peer{poked, handled} {
		for _, p := range list {
			// Swap, not Store: a poke that found the flag set (and so
			// queued nothing) happened before this, and what it queued
			// is seen below under p.mu.
			p.poll.Swap(false)
			p.pokedAt = s.round
			s.noteAwake(p)
			s.noteMerging(p)
			if p.visitedAt != s.round {
				p.visitedAt = s.round
				visit = append(visit, p)
			}
		}
	}
	for _, p := range s.awake {
		if p.visitedAt != s.round {
			p.visitedAt = s.round
			visit = append(visit, p)
		}
	}
	return visit
}

// noteAwake adds p to the replicas every round looks at if it is awake.
// Store loop.
func (s *Store) noteAwake(p *Peer) {
	if !p.inAwake && !p.asleep.Load() {
		p.inAwake = true
		s.awake = append(s.awake, p)
	}
}

// fatal stops the process: a failed write or apply leaves this store's
// state unknown, and continuing could make replicas diverge.
func (s *Store) fatal(what string, err error) {
	s.log.Error("raftstore: fatal error", "in", what, "err", err)
	panic(err)
}

// idle reports whether the store loop has nothing to do right now: no
// round running, no replica with a Ready, no snapshot being generated,
// no read waiting to be sent (tests wait for it).
func (s *Store) idle() bool {
	if s.busy.Load() || len(s.notify) > 0 || len(s.tick) > 0 || s.mergeDrivers.Load() > 0 {
		return false
	}
	s.snapMu.Lock()
	gen := len(s.snapGen)
	s.snapMu.Unlock()
	if gen > 0 {
		return false
	}
	s.staleMu.Lock()
	stale := len(s.stale)
	s.staleMu.Unlock()
	if stale > 0 {
		return false
	}
	for _, p := range s.Peers() {
		p.mu.Lock()
		pending := !p.removed.Load() && (p.rn.HasReady() || len(p.reads.waiting) > 0 || p.reads.renew)
		p.mu.Unlock()
		if pending {
			return false
		}
	}
	return !s.busy.Load()
}

// fullTickEvery: every so many ticks tickAll looks at every replica, not
// only the awake set (a replica woken by a path that did not queue it
// ticks again within a second; the hibernation gauge is set then).
const fullTickEvery = 10

// tickAll ticks the awake replicas and drives the merges in flight. Every
// tick used to walk all replicas, sleeping ones included; it walks the
// awake set (noteAwake) and the merging replicas (noteMerging), and every
// fullTickEvery ticks all replicas, rebuilding both sets. Store loop.
func (s *Store) tickAll() {
	var out []*kvpb.RaftMessage
	s.tickCount++
	full := s.tickCount%fullTickEvery == 0
	var candidates []*Peer
	if full {
		s.mu.RLock()
		candidates = make([]*Peer, 0, len(s.peers))
		for _, p := range s.peers {
			candidates = append(candidates, p)
		}
		s.mu.RUnlock()
		for _, p := range s.merging {
			p.inMerging = false
		}
		clear(s.merging)
		s.merging = s.merging[:0]
	} else {
		candidates = append(s.tickSpare[:0], s.awake...)
	}
	// The awake set is rebuilt: replicas that fell asleep or were
	// removed leave it.
	for _, p := range s.awake {
		p.inAwake = false
	}
	clear(s.awake)
	s.awake = s.awake[:0]
	asleep := 0
	for _, p := range candidates {
		if full {
			s.noteMerging(p)
		}
		if p.asleep.Load() {
			asleep++
			continue
		}
		p.mu.Lock()
		out = append(out, s.tickLocked(p)...)
		p.mu.Unlock()
		if !p.removed.Load() {
			s.noteAwake(p)
		}
	}
	if !full {
		clear(candidates)
		s.tickSpare = candidates[:0]
	}
	if s.hibernate && full {
		metricAsleep.Set(float64(asleep))
	}
	if len(out) > 0 && s.transport != nil {
		s.transport.Send(out)
	}
	merging := s.merging[:0:0]
	keep := s.merging[:0]
	for _, p := range s.merging {
		if p.merge.Load() == nil || p.removed.Load() {
			p.inMerging = false
			continue
		}
		keep = append(keep, p)
		merging = append(merging, p)
	}
	clear(s.merging[len(keep):])
	s.merging = keep
	if len(merging) > 0 {
		s.checkMerges(merging)
	}
}

// noteMerging adds p to the replicas every tick drives the merge of, if
// a merge froze it. Store loop.
func (s *Store) noteMerging(p *Peer) {
	if !p.inMerging && p.merge.Load() != nil {
		p.inMerging = true
		s.merging = append(s.merging, p)
	}
}

func (s *Store) handleReadies(readies []readyPeer) error {
	// 1. Apply the committed entries that are already durable in the local
	// log, before the fsync of this round: their proposers need not wait
	// for the next batch's fsync. (Without async storage writes, raft may
	// hand out committed entries that are still in this Ready's unstable
	// Entries; those are applied after the fsync, in step 4.) After a
	// snapshot everything waits for it.
	pre := make([][]*pb.Entry, len(readies))
	post := make([][]*pb.Entry, len(readies))
	for i, r := range readies {
		ents := r.rd.CommittedEntries
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			post[i] = ents
			continue
		}
		persisted := r.p.storage.lastIndex()
		j := len(ents)
		for j > 0 && ents[j-1].GetIndex() > persisted {
			j--
		}
		pre[i], post[i] = ents[:j], ents[j:]
	}
	s.noteStates(readies)

	// 2. Persist entries, hard states and received snapshots of every
	// replica: one batch, one fsync, running while step 1 applies (the two
	// touch different engines, and what step 1 applies is durable
	// already), so the fsync of this round's proposals starts without
	// waiting for the last round's apply.
	wb := s.raftDB.NewBatch()
	defer wb.Close() // once handed to ApplyNoSyncWait, it is waited for (SyncWait) before any return
	nEntries := 0
	mustSync := false
	for i := range readies {
		r := &readies[i]
		prevTerm, prevVote := r.p.storage.termVote()
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			if err := r.p.storage.stageSnapshot(wb, r.rd.Snapshot); err != nil {
				return err
			}
		}
		if err := r.p.storage.stageAppend(wb, r.rd.Entries, r.rd.HardState); err != nil {
			return err
		}
		nEntries += len(r.rd.Entries)
		mustSync = mustSync || r.rd.MustSync
		hs := r.rd.HardState
		r.early = r.p.leading() && raft.IsEmptySnap(r.rd.Snapshot) &&
			(hs == nil || raft.IsEmptyHardState(hs) || (hs.GetTerm() == prevTerm && hs.GetVote() == prevVote))
		if r.early {
			s.send(r.p, r.rd.Messages)
		}
	}
	// The batch goes into the Raft engine's memtable and its WAL write is
	// queued; the store loop waits for the write only after step 1's
	// apply (Pebble's ApplyNoSyncWait, as CockroachDB does for its log),
	// without a goroutine and a channel hand-off per round.
	start := time.Now()
	synced := mustSync && !wb.Empty()
	var err error
	switch {
	case synced:
		err = s.raftDB.ApplyNoSyncWait(wb, pebble.Sync)
	case !wb.Empty():
		err = wb.Commit(pebble.NoSync)
	}
	if err != nil {
		return err
	}
	// 1, continued: apply while the batch is being made durable.
	s.ackCommitted(readies, pre)
	applyErr := s.applyRound(readies, pre)
	if synced {
		if err := wb.SyncWait(); err != nil {
			return err
		}
		metricFsyncSeconds.Observe(time.Since(start).Seconds())
		metricEntriesPerSync.Observe(float64(nEntries))
	}
	if applyErr != nil {
		return applyErr
	}

	// 3. Only now may the other messages leave the node.
	for _, r := range readies {
		if !r.early {
			s.send(r.p, r.rd.Messages)
		}
	}

	// 4. Ingest received snapshots, then apply what was committed but not
	// yet durable locally before step 2.
	for _, r := range readies {
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			if err := s.applySnapshot(r.p, r.rd.Snapshot); err != nil {
				return err
			}
		}
	}
	s.ackCommitted(readies, post)
	if err := s.applyRound(readies, post); err != nil {
		return err
	}
	for _, r := range readies {
		r.p.mu.Lock()
		if !r.p.removed.Load() {
			r.p.rn.Advance(r.rd)
			for _, fn := range r.p.afterAdvance {
				fn()
			}
			r.p.afterAdvance = nil
			if len(r.rd.ReadStates) > 0 {
				r.p.onReadStatesLocked(r.rd.ReadStates)
				r.p.releaseReadsLocked(r.p.storage.applyState().AppliedIndex)
			}
		}
		r.p.mu.Unlock()
	}

	// 5. Advance stepped the leader's acknowledgement of the entries this
	// round made durable; those it committed come back as CommittedEntries
	// of the next Ready and are applied there. Their ProposeCommitted
	// proposers are told now instead of after the next round's batch is
	// built and queued (about 25 us later under sysbench write load).
	for _, r := range readies {
		s.ackDurable(r)
	}
	return nil
}

// leading reports whether p is leader (p.mu not held).
func (p *Peer) leading() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isLeader
}

// ackDurable acknowledges the ProposeCommitted writes among r's new
// entries, just made durable here, that Advance committed, when every
// entry before them is applied (so no split can come between).
func (s *Store) ackDurable(r readyPeer) {
	ents := r.rd.Entries
	if len(ents) == 0 || r.p.removed.Load() {
		return
	}
	r.p.mu.Lock()
	st := r.p.rn.BasicStatus()
	r.p.mu.Unlock()
	if st.Applied+1 < ents[0].GetIndex() {
		return // committed entries before these are still to be applied
	}
	commit := st.HardState.GetCommit()
	n := len(ents)
	for n > 0 && ents[n-1].GetIndex() > commit {
		n--
	}
	s.ackEntries(r.p, ents[:n])
}

// ackCommitted signals the proposers of ProposeCommitted writes among
// ents[i] (committed entries of readies[i].p, durable here, about to be
// applied in order) whose apply cannot refuse them: a write is refused
// only when its epoch version is not the region's when it applies, and
// the version changes only by an applied split. So a write proposed under
// the region's current version, with no split (or membership change,
// which may remove this replica) before it among the entries still to
// apply, will apply.
func (s *Store) ackCommitted(readies []readyPeer, ents [][]*pb.Entry) {
	for i, r := range readies {
		s.ackEntries(r.p, ents[i])
	}
}

// ackEntries is ackCommitted for one replica's entries.
func (s *Store) ackEntries(p *Peer, ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	version := p.Region().Epoch.GetVersion()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range ents {
		if e.GetType() != pb.EntryType_EntryNormal {
			break // a membership change: later writes wait for their apply
		}
		if len(e.Data) < cmdHeaderLen {
			continue
		}
		kind := e.Data[0]
		if kind != cmdWrite && kind != cmdWriteBatch {
			break // a split or merge: later writes wait for their apply
		}
		if kind != cmdWrite || len(e.Data) < cmdHeaderLen+8 ||
			binary.BigEndian.Uint64(e.Data[cmdHeaderLen:]) != version {
			continue
		}
		prop, ok := p.proposals[binary.BigEndian.Uint64(e.Data[1:cmdHeaderLen])]
		if ok && prop.early && !prop.acked {
			prop.acked = true
			prop.done <- nil
		}
	}
}

// noteStates records leadership changes (SoftState) and the current term
// (HardState) of each Ready, before anything of the round is applied, so
// the leader-ready bit is computed against the right term.
func (s *Store) noteStates(readies []readyPeer) {
	for _, r := range readies {
		p := r.p
		p.mu.Lock()
		if r.rd.HardState != nil && !raft.IsEmptyHardState(r.rd.HardState) {
			p.term = r.rd.HardState.GetTerm()
		}
		if r.rd.SoftState != nil {
			wasLeader := p.isLeader
			p.isLeader = r.rd.SoftState.RaftState == raft.StateLeader
			p.leaderID.Store(r.rd.SoftState.Lead)
			if p.isLeader && !wasLeader {
				p.leaderSince = s.now()
				p.leaseUntil.Store(0)
			}
			if !p.isLeader {
				wasReady := p.leaderReady.Swap(false)
				p.leaseUntil.Store(0)
				if wasLeader {
					p.failProposalsLocked(p.notLeaderError())
					p.failReadsLocked(p.notLeaderError())
				}
				if wasReady && s.onLeader != nil {
					defer s.onLeader(p.regionID, false)
				}
			}
		}
		p.mu.Unlock()
	}
}

func (s *Store) failAll(err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.peers {
		p.mu.Lock()
		p.failProposalsLocked(err)
		p.failReadsLocked(err)
		p.mu.Unlock()
	}
}
