package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/kvpb"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Proposals: what callers hand to a region's log, and how they learn the
// outcome. A proposer waits on its proposal's done channel; the apply
// path (apply.go) signals it once the entry is applied here or refused,
// and the store fails it when the replica loses leadership first.

type proposal struct {
	done chan error
	// at is the store clock when the entry was proposed: once a quorum
	// has it, no other replica can be elected before at plus the lease
	// (read.go).
	at time.Duration
	// regions is what an applied split or membership change produced;
	// set before done is signalled.
	regions []*kvpb.Region
	// early: done is signalled once the entry is committed, durable here
	// and certain to apply (ProposeCommitted); acked records that it was.
	early, acked bool
	// release, when set, runs once the entry is applied or the proposal
	// fails, after done is signalled (ProposeCommitted).
	release func()
}

// finish signals the proposer and runs release. p.mu held.
func (prop *proposal) finish(err error) {
	if !prop.acked {
		prop.done <- err
	}
	if prop.release != nil {
		prop.release()
		prop.release = nil
	}
}

// Propose replicates the writes in batch through the region's Raft group
// and returns once they are committed (fsynced on a quorum) and applied on
// this replica. epoch is the region epoch the batch was computed under
// (the one Check returned): if a split changes the region before the entry
// is applied, the entry is refused on every replica and Propose returns a
// *RegionErr with EpochNotMatch. The batch is not used after Propose
// returns.
func (s *Store) Propose(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, batch *pebble.Batch) error {
	return s.ProposeThen(ctx, p, epoch, batch, nil)
}

// ProposeThen is Propose that runs proposed (unless nil) once the entry
// has been handed to the region's Raft group, or could not be, before it
// waits for the entry: the caller's wake-ups of other goroutines then come
// last before it blocks, so the Go scheduler runs the goroutine woken
// last (the next owner of a hot row's lock) as soon as the proposer parks,
// instead of after the store loop and everything queued before it.
func (s *Store) ProposeThen(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, batch *pebble.Batch, proposed func()) error {
	if proposed != nil {
		defer func() {
			if proposed != nil {
				proposed()
			}
		}()
	}
	if s.closed.Load() {
		return ErrStopped
	}
	if r := p.Region(); epoch.GetVersion() != r.Epoch.GetVersion() {
		return &RegionErr{E: p.epochNotMatch(r)}
	} else if p.merge.Load() != nil {
		return &RegionErr{E: p.mergingError(r)}
	}
	id := s.nextProp.Add(1)
	prop, err := s.startProposal(p, id, encodeWrite(id, epoch.GetVersion(), batch.Repr()))
	if err != nil {
		return err
	}
	if proposed != nil {
		proposed()
		proposed = nil
	}
	return s.wait(ctx, prop)
}

// ProposeCommitted is Propose for a write whose effects no one can observe
// before release runs (the caller holds latches and in-memory locks over
// its keys until then): it returns once the entry is committed (durable
// on a quorum and on this replica) and nothing before it in the log can
// make its apply refuse it (no split is applied between its proposal and
// its apply), so the proposer's client hears of the write while it is
// being applied instead of after. release runs on the store loop once the
// entry is applied, or when the proposal fails; it always runs exactly
// once, also when ProposeCommitted returns an error before proposing. It
// must not block.
func (s *Store) ProposeCommitted(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, batch *pebble.Batch, release func()) error {
	return s.ProposeCommittedThen(ctx, p, epoch, batch, release, nil)
}

// ProposeCommittedThen is ProposeCommitted that runs proposed (unless nil)
// once the entry has been handed to the region's Raft group, or could not
// be (after release then), before it waits; see ProposeThen.
func (s *Store) ProposeCommittedThen(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, batch *pebble.Batch, release, proposed func()) error {
	if proposed != nil {
		defer func() {
			if proposed != nil {
				proposed()
			}
		}()
	}
	if s.closed.Load() {
		release()
		return ErrStopped
	}
	if r := p.Region(); epoch.GetVersion() != r.Epoch.GetVersion() {
		release()
		return &RegionErr{E: p.epochNotMatch(r)}
	} else if p.merge.Load() != nil {
		release()
		return &RegionErr{E: p.mergingError(r)}
	}
	id := s.nextProp.Add(1)
	prop := &proposal{done: make(chan error, 1), early: true, release: release}
	if err := s.register(p, id, prop, encodeWrite(id, epoch.GetVersion(), batch.Repr())); err != nil {
		release()
		return err
	}
	if proposed != nil {
		proposed()
		proposed = nil
	}
	return s.wait(ctx, prop)
}

// Split splits p's region at splitKey through its Raft log: once applied,
// the region keeps [start, splitKey) and a new region newRegionID gets
// [splitKey, end), both at epoch version+1; the new region's replica on
// store Peers[i].StoreId has id newPeerIDs[i]. The ids must be fresh (PD's
// allocator). epoch is the region epoch the caller decided the split under;
// if it changed by the time the split applies, nothing is split and a
// *RegionErr with EpochNotMatch is returned. Data does not move: both
// regions live in the same engine. Split returns the two regions as
// applied.
func (s *Store) Split(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, splitKey []byte, newRegionID uint64, newPeerIDs []uint64) (left, right *kvpb.Region, err error) {
	if s.closed.Load() {
		return nil, nil, ErrStopped
	}
	r := p.Region()
	if epoch.GetVersion() != r.Epoch.GetVersion() || epoch.GetConfVer() != r.Epoch.GetConfVer() {
		return nil, nil, &RegionErr{E: p.epochNotMatch(r)}
	}
	if err := validSplitKey(r, splitKey); err != nil {
		return nil, nil, err
	}
	if p.merge.Load() != nil {
		return nil, nil, &RegionErr{E: p.mergingError(r)}
	}
	cmd := &splitCmd{confVer: epoch.GetConfVer(), version: epoch.GetVersion(), newRegionID: newRegionID,
		newPeerIDs: newPeerIDs, splitKey: splitKey}
	// Refuse now what the apply would refuse, without a log entry.
	if _, _, err := splitRegion(r, cmd); err != nil {
		return nil, nil, err
	}
	if q, ok := s.Peer(newRegionID); ok && q.Initialized() {
		return nil, nil, fmt.Errorf("raftstore: split of region %d: region %d already exists", r.Id, newRegionID)
	}
	id := s.nextProp.Add(1)
	prop, err := s.startProposal(p, id, encodeSplit(id, cmd))
	if err != nil {
		return nil, nil, err
	}
	if err := s.wait(ctx, prop); err != nil {
		return nil, nil, err
	}
	return prop.regions[0], prop.regions[1], nil
}

// ChangePeers changes the membership of p's region through its log (see
// conf.go for the changes and their order). epoch is the region epoch the
// caller decided the change under; a change applied since makes this one
// fail with EpochNotMatch. It returns the region as the change left it.
// The leader refuses to remove or demote itself: transfer leadership
// first.
func (s *Store) ChangePeers(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, changes []PeerChange) (*kvpb.Region, error) {
	if s.closed.Load() {
		return nil, ErrStopped
	}
	r := p.Region()
	if epoch.GetVersion() != r.Epoch.GetVersion() || epoch.GetConfVer() != r.Epoch.GetConfVer() {
		return nil, &RegionErr{E: p.epochNotMatch(r)}
	}
	if p.merge.Load() != nil {
		return nil, &RegionErr{E: p.mergingError(r)}
	}
	for _, c := range changes {
		if c.Peer != nil && c.Peer.Id == p.id && (c.Kind == RemovePeer || c.Kind == DemoteVoter) {
			return nil, fmt.Errorf("%w: the leader of region %d cannot remove or demote itself; transfer leadership first", ErrInvalidConfChange, r.Id)
		}
	}
	cc, peers, err := buildConfChange(changes)
	if err != nil {
		return nil, err
	}
	id := s.nextProp.Add(1)
	cc.Context = encodeConfChangeContext(id, epoch.GetConfVer(), epoch.GetVersion(), peers)
	// Refuse now what the apply would refuse.
	cmd, _ := decodeConfChangeContext(cc.Context)
	if _, err := applyConfChangeToRegion(r, cc, cmd); err != nil {
		return nil, err
	}
	prop := &proposal{done: make(chan error, 1)}
	p.mu.Lock()
	if !p.isLeader {
		p.mu.Unlock()
		return nil, p.notLeaderError()
	}
	prop.at = s.now()
	p.proposals[id] = prop
	p.wakeLocked()
	p.touch()
	err = p.rn.ProposeConfChange(proto.Clone(cc).(*pb.ConfChangeV2))
	if err != nil {
		delete(p.proposals, id)
	}
	p.mu.Unlock()
	if errors.Is(err, raft.ErrProposalDropped) {
		return nil, p.notLeaderError()
	} else if err != nil {
		return nil, err
	}
	s.wake()
	// Raft may drop a change it finds racing another (it turns it into an
	// empty entry); its proposer would wait for nothing. A change is
	// applied within a few rounds or not at all.
	wctx, cancel := context.WithTimeout(ctx, confChangeTimeout)
	defer cancel()
	if err := s.wait(wctx, prop); err != nil {
		p.mu.Lock()
		delete(p.proposals, id)
		p.mu.Unlock()
		if ctx.Err() == nil && wctx.Err() != nil {
			return nil, fmt.Errorf("raftstore: membership change of region %d was not applied within %v (raft dropped it or lost quorum)", r.Id, confChangeTimeout)
		}
		return nil, err
	}
	return prop.regions[0], nil
}

// confChangeTimeout bounds how long ChangePeers waits for its change.
var confChangeTimeout = 10 * time.Second

// transferMaxLag: a leadership transfer goes to a replica at most this
// many entries behind the commit index.
const transferMaxLag = 128

// ErrTransfereeBehind: a leadership transfer refused because the
// transferee is not known to be live and caught up.
var ErrTransfereeBehind = errors.New("raftstore: the transferee is not replicating in step with the leader")

// TransferLeader asks p (the leader) to hand leadership to the replica
// with raft id to. It returns at once; the transfer completes (or is
// abandoned by raft after an election timeout) asynchronously. The lease
// is given up at once: the transferee may be elected without waiting for
// it (read.go). A transferee not replicating in step is refused
// (ErrTransfereeBehind; transferableLocked).
func (s *Store) TransferLeader(p *Peer, to uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := s.transferableLocked(p, to); err != nil {
		return err
	}
	p.revokeLeaseLocked()
	p.rn.TransferLeader(to)
	s.wake()
	return nil
}

// CheckTransfer reports whether TransferLeader(p, to) would go ahead now,
// without starting it (it wakes a hibernating leader, as TransferLeader
// does).
func (s *Store) CheckTransfer(p *Peer, to uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return s.transferableLocked(p, to)
}

// transferableLocked: p leads, to is one of its voters, and to is
// replicating in step: recently active, and within transferMaxLag entries
// of the commit index (at it, when probing). Raft drops every proposal while a transfer is in
// flight, for up to an election timeout if the transferee never answers:
// a replica this leader has not heard from lately (its store perhaps just
// killed), or one far behind, would stall the region. A hibernating
// leader wakes first: its view of the replicas' activity is as old as its
// sleep, and its heartbeats renew it for the caller's next try. p.mu held.
func (s *Store) transferableLocked(p *Peer, to uint64) error {
	if !p.isLeader {
		return p.notLeaderError()
	}
	found := false
	for _, rp := range p.Region().Peers {
		if rp.Id == to && IsVoter(rp) {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("raftstore: region %d has no voter %d", p.regionID, to)
	}
	p.wakeLocked()
	p.touch()
	commit, ready := p.rn.BasicStatus().HardState.GetCommit(), false
	p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id != to || !pr.RecentActive {
			return
		}
		switch pr.State {
		case tracker.StateReplicate:
			ready = pr.Match+transferMaxLag >= commit
		case tracker.StateProbe:
			// A replica that caught up by snapshot on an idle region stays
			// probing (nothing to append moves it on); one whose messages
			// failed (ReportUnreachable) probes too, and falls behind as
			// soon as anything is written.
			ready = pr.Match >= commit
		}
	})
	if !ready {
		s.wake()
		return fmt.Errorf("%w: region %d, replica %d", ErrTransfereeBehind, p.regionID, to)
	}
	return nil
}

// startProposal hands a command to p's RawNode and registers its waiter.
func (s *Store) startProposal(p *Peer, id uint64, data []byte) (*proposal, error) {
	prop := &proposal{done: make(chan error, 1)}
	if err := s.register(p, id, prop, data); err != nil {
		return nil, err
	}
	return prop, nil
}

// register hands a command to p's RawNode with prop as its waiter.
func (s *Store) register(p *Peer, id uint64, prop *proposal, data []byte) error {
	p.mu.Lock()
	if !p.isLeader || p.removed.Load() {
		p.mu.Unlock()
		return p.notLeaderError()
	}
	prop.at = s.now()
	p.proposals[id] = prop
	p.wakeLocked()
	p.touch()
	err := p.rn.Propose(data)
	if err != nil {
		delete(p.proposals, id)
	}
	p.mu.Unlock()
	if errors.Is(err, raft.ErrProposalDropped) {
		return p.notLeaderError()
	} else if err != nil {
		return err
	}
	s.wake()
	return nil
}

// wait blocks until prop's entry is applied (or refused) on this replica.
func (s *Store) wait(ctx context.Context, prop *proposal) error {
	start := time.Now()
	select {
	case err := <-prop.done:
		metricProposeSeconds.Observe(time.Since(start).Seconds())
		return err
	case <-s.stopped:
		return ErrStopped
	case <-ctx.Done():
		// The entry may still be applied; the caller reports an
		// indeterminate outcome.
		return ctx.Err()
	}
}
