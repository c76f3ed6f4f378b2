package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/kvpb"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// Peer is a replica of one region on this store. Its job: hold the
// replica's RawNode and the state requests are checked against (region
// descriptor, leadership, lease), and answer those checks.
type Peer struct {
	id       uint64
	regionID uint64
	storage  *peerStorage
	store    *Store

	region atomic.Pointer[kvpb.Region]
	// children are the ids of the latest regions split off this one; their
	// descriptors go into EpochNotMatch errors so that a client learns the
	// new layout without asking PD.
	children atomic.Pointer[[]uint64]

	// initialized is false for a replica created by a message from a
	// leader, before its first snapshot: it has no range and no data.
	initialized atomic.Bool
	// removed is set once the replica is destroyed (removed from the
	// region, or replaced); it serves nothing afterwards.
	removed atomic.Bool

	mu        sync.Mutex
	rn        *raft.RawNode
	proposals map[uint64]*proposal
	isLeader  bool
	term      uint64
	// leaderSince is when this replica last became leader (store clock);
	// its first lease starts there.
	leaderSince time.Duration
	reads       readQueue // read.go
	// afterAdvance runs after the replica's next Advance (store loop).
	afterAdvance []func()
	// peerStores maps the raft ids of this region's peers to their stores,
	// including peers not (or no longer) in the descriptor that sent us
	// messages.
	peerStores map[uint64]uint64

	// leaderReady is true while this replica is leader and has applied an
	// entry of its own term: only then does the applied state reflect every
	// committed write, so reads may be served from the engine.
	leaderReady atomic.Bool
	leaderID    atomic.Uint64
	// leaseUntil is the store-clock time (ns) until which this leader may
	// serve reads without a Raft round trip (read.go).
	leaseUntil atomic.Int64
	// readyTerm is the term in which leaderReady was last set; kvserver
	// compares it to decide whether its max_ts was synced for this term.
	readyTerm atomic.Uint64
	// maxTSTerm is the term for which the KV service raised its max_ts to
	// a fresh timestamp (SetMaxTSSynced).
	maxTSTerm atomic.Uint64
	// lastActive is the store-clock time of the last proposal or read on
	// this replica (hibernation and PD's load hints use it).
	lastActive atomic.Int64
	// heardAt is the wall-clock time (unix ns) of the last message from
	// a leader, or of the replica's creation (stale.go).
	heardAt atomic.Int64
	// asleep: the replica hibernates (hibernate.go); idleTicks counts a
	// leader's idle ticks (store loop, mu held).
	asleep atomic.Bool
	// poll: the replica is queued for the store loop's next round
	// (Store.poked), asleep or not; set by poke, cleared when the loop
	// takes the queue.
	poll      atomic.Bool
	idleTicks int
	// leaderTicks counts a follower's ticks since the last message from
	// a leader; lostLeader is the store of a leader the transport lost
	// (StoreLost), until this replica hears from a leader or decides on
	// an early campaign (hibernate.go). Store loop and Receive, mu held.
	leaderTicks int
	lostLeader  uint64
	// Store loop only: visitedAt and pokedAt are the loop rounds in which
	// the replica was last looked at and last taken from the queue;
	// inAwake and inMerging, that it is in Store.awake, Store.merging.
	visitedAt, pokedAt uint64
	inAwake, inMerging bool
	// merge is set while a merge freezes the region (merge.go);
	// driving while a merge driver runs for it.
	merge   atomic.Pointer[kvpb.MergeState]
	driving atomic.Bool
}

// Region returns the replica's current region descriptor (do not mutate).
func (p *Peer) Region() *kvpb.Region { return p.region.Load() }

// ID is the replica's raft peer id.
func (p *Peer) ID() uint64 { return p.id }

// RegionID is the id of the replica's region.
func (p *Peer) RegionID() uint64 { return p.regionID }

// LeaderOf returns the raft peer id this replica believes leads its region
// (0 when unknown).
func (p *Peer) LeaderOf() uint64 { return p.leaderID.Load() }

// IsLeaderReady reports whether this replica leads its region and has
// applied an entry of its own term.
func (p *Peer) IsLeaderReady() bool { return p.leaderReady.Load() }

// ReadyTerm is the term in which this replica last became a ready leader.
func (p *Peer) ReadyTerm() uint64 { return p.readyTerm.Load() }

// Initialized reports whether the replica holds its region's data (false
// while a replica created by a leader's message waits for its snapshot).
func (p *Peer) Initialized() bool { return p.initialized.Load() }

// Check validates a request against one snapshot of the replica's region
// and returns that snapshot: the client's epoch (when given) must be
// current, this replica must be the region's leader and ready to serve,
// and every key must be in the region. A caller that goes on to read or
// propose must use the returned region (its range for clipping, its epoch
// for Propose), not a later Region(), which a split may have changed. A
// read must also wait for ReadReady, which proves the leadership is
// still current.
func (p *Peer) Check(ctx *kvpb.Context, keys ...[]byte) (*kvpb.Region, *kvpb.RegionError) {
	if p.removed.Load() || !p.initialized.Load() {
		return nil, &kvpb.RegionError{Message: fmt.Sprintf("region %d not found", p.regionID),
			RegionNotFound: &kvpb.RegionNotFound{RegionId: p.regionID}}
	}
	if p.merge.Load() != nil {
		return nil, p.mergingError(p.Region())
	}
	r := p.Region()
	if ctx != nil && ctx.RegionEpoch != nil {
		e := r.Epoch
		if ctx.RegionEpoch.Version != e.GetVersion() || ctx.RegionEpoch.ConfVer != e.GetConfVer() {
			return nil, p.epochNotMatch(r)
		}
	}
	if !p.leaderReady.Load() {
		// A request for a region whose replicas sleep (hibernate.go)
		// wakes this one: if its leader is gone, it elects another.
		if p.asleep.Swap(false) {
			p.store.poke(p)
		}
		return nil, p.notLeader(r)
	}
	for _, k := range keys {
		if rerr := keyInRegion(r, k); rerr != nil {
			return nil, rerr
		}
	}
	return r, nil
}

// notLeader is the region error naming the replica this one believes leads r.
func (p *Peer) notLeader(r *kvpb.Region) *kvpb.RegionError {
	nl := &kvpb.NotLeader{RegionId: r.Id}
	if lid := p.leaderID.Load(); lid != 0 && lid != p.id {
		for _, rp := range r.Peers {
			if rp.Id == lid {
				nl.Leader = rp
			}
		}
	}
	return &kvpb.RegionError{Message: fmt.Sprintf("peer %d is not the ready leader of region %d", p.id, r.Id), NotLeader: nl}
}

// CheckRequest is Check without keys.
func (p *Peer) CheckRequest(ctx *kvpb.Context) *kvpb.RegionError {
	_, rerr := p.Check(ctx)
	return rerr
}

// CheckKey reports KeyNotInRegion when key is outside the region.
func (p *Peer) CheckKey(key []byte) *kvpb.RegionError { return keyInRegion(p.Region(), key) }

func keyInRegion(r *kvpb.Region, key []byte) *kvpb.RegionError {
	if bytes.Compare(key, r.StartKey) < 0 || (len(r.EndKey) > 0 && bytes.Compare(key, r.EndKey) >= 0) {
		return &kvpb.RegionError{
			Message:        fmt.Sprintf("key %q is not in region %d", key, r.Id),
			KeyNotInRegion: &kvpb.KeyNotInRegion{Key: key, RegionId: r.Id, StartKey: r.StartKey, EndKey: r.EndKey},
		}
	}
	return nil
}

// epochNotMatch is the error for a request or proposal made under an older
// epoch of r. It names r and the regions split off it (as they are now),
// which together cover the range an older epoch of r covered when r's
// only changes were splits.
func (p *Peer) epochNotMatch(r *kvpb.Region) *kvpb.RegionError {
	current := []*kvpb.Region{r}
	if ids := p.children.Load(); ids != nil && p.store != nil {
		for _, id := range *ids {
			if c, ok := p.store.Peer(id); ok && c.Initialized() {
				current = append(current, c.Region())
			}
		}
	}
	return &kvpb.RegionError{
		Message:       fmt.Sprintf("epoch not match for region %d (now version %d, conf version %d)", r.Id, r.Epoch.GetVersion(), r.Epoch.GetConfVer()),
		EpochNotMatch: &kvpb.EpochNotMatch{CurrentRegions: current},
	}
}

// notLeaderError builds the region error for a proposal that raft dropped.
func (p *Peer) notLeaderError() *RegionErr {
	return &RegionErr{E: p.notLeader(p.Region())}
}

// RegionErr wraps a region error returned from Propose.
type RegionErr struct{ E *kvpb.RegionError }

func (e *RegionErr) Error() string { return e.E.Message }

// storeOf returns the store holding raft peer id of this region (0 when
// unknown). p.mu held.
func (p *Peer) storeOfLocked(id uint64) uint64 {
	for _, rp := range p.Region().Peers {
		if rp.Id == id {
			return rp.StoreId
		}
	}
	return p.peerStores[id]
}

// failProposalsLocked fails every proposal that is not certain to apply.
// p.mu held.
func (p *Peer) failProposalsLocked(err error) {
	for id, prop := range p.proposals {
		if prop.acked && !errors.Is(err, ErrStopped) {
			// Committed: it will be applied here like every committed
			// entry, and release must wait for that.
			continue
		}
		delete(p.proposals, id)
		prop.finish(err)
	}
}

// ReplicaProgress is how far one replica of a region is known to its
// leader.
type ReplicaProgress struct {
	PeerID uint64
	Match  uint64
	Active bool // heard from within an election timeout
}

// RaftStatus is what the leader of a region knows of its replication.
type RaftStatus struct {
	Term, Commit, Applied uint64
	// Progress is every replica's (the leader's own included); empty on
	// a follower.
	Progress []ReplicaProgress
}

// Status returns the replica's raft status.
func (p *Peer) Status() RaftStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	// BasicStatus and WithProgress copy no progress map (Status does):
	// the node reports every region it leads each second.
	st := p.rn.BasicStatus()
	out := RaftStatus{Term: st.HardState.GetTerm(), Commit: st.HardState.GetCommit(), Applied: st.Applied}
	if st.RaftState == raft.StateLeader {
		p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			out.Progress = append(out.Progress, ReplicaProgress{PeerID: id, Match: pr.Match, Active: pr.RecentActive || id == p.id})
		})
	}
	sort.Slice(out.Progress, func(i, j int) bool { return out.Progress[i].PeerID < out.Progress[j].PeerID })
	return out
}

// MaxTSSyncedTerm is the last term SetMaxTSSynced recorded.
func (p *Peer) MaxTSSyncedTerm() uint64 { return p.maxTSTerm.Load() }

// SetMaxTSSynced records that the KV service synced its max_ts for this
// replica's leadership of term.
func (p *Peer) SetMaxTSSynced(term uint64) { p.maxTSTerm.Store(term) }
