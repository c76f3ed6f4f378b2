package raftstore

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/strata-db/strata/kvpb"
)

// overlap.go: which local replica holds data a region's range covers.
//
// A message to a region this store has no replica of is checked against
// every initialized replica (peerFor: an older replica of the range means
// the store has not applied the split that made the region yet), and so
// is every snapshot (snapshotOverlaps). A store behind on a region that
// was split into thousands gets a message per tick from each new region's
// leader; scanning every replica for each of them, under the store's
// lock, left one node of a 3-node cluster with 1,000-2,000 regions unable
// to catch up (its receive queue full, the store loop waiting for the
// lock). The replicas' spans are kept sorted instead, rebuilt only when a
// replica is added, removed or changes its range.

// overlapIndex is every initialized replica's data spans, sorted by start.
type overlapIndex struct {
	gen    uint64
	starts [][]byte
	ends   [][]byte // ends[i]: the span's end; nil: unbounded
	maxEnd [][]byte // maxEnd[i]: the greatest end among spans 0..i (nil: unbounded)
	peers  []*Peer
}

// overlapState is the store's index and what invalidates it.
type overlapState struct {
	gen   atomic.Uint64 // bumped after any change to the replicas' ranges
	idx   atomic.Pointer[overlapIndex]
	build sync.Mutex
}

// layoutChanged invalidates the overlap index: a replica was added or
// removed, got its range or was initialized. Called after the change is
// visible (peerSnap, Peer.region, Peer.initialized).
func (s *Store) layoutChanged() { s.overlap.gen.Add(1) }

// endAfter reports whether end (nil: unbounded) lies after key.
func endAfter(end, key []byte) bool { return len(end) == 0 || bytes.Compare(end, key) > 0 }

// overlapIndexNow returns an index as of the current replicas.
func (s *Store) overlapIndexNow() *overlapIndex {
	gen := s.overlap.gen.Load()
	if idx := s.overlap.idx.Load(); idx != nil && idx.gen == gen {
		return idx
	}
	s.overlap.build.Lock()
	defer s.overlap.build.Unlock()
	gen = s.overlap.gen.Load()
	if idx := s.overlap.idx.Load(); idx != nil && idx.gen == gen {
		return idx
	}
	type ent struct {
		start, end []byte
		p          *Peer
	}
	var ents []ent
	for _, p := range *s.peerSnap.Load() {
		if !p.Initialized() || p.removed.Load() {
			continue
		}
		for _, sp := range s.obs.Spans(p.Region()) {
			ents = append(ents, ent{sp.Start, sp.End, p})
		}
	}
	slices.SortFunc(ents, func(a, b ent) int { return bytes.Compare(a.start, b.start) })
	idx := &overlapIndex{
		gen:    gen,
		starts: make([][]byte, len(ents)),
		ends:   make([][]byte, len(ents)),
		maxEnd: make([][]byte, len(ents)),
		peers:  make([]*Peer, len(ents)),
	}
	var max []byte
	for i, e := range ents {
		idx.starts[i], idx.ends[i], idx.peers[i] = e.start, e.end, e.p
		if i == 0 || max != nil && (len(e.end) == 0 || bytes.Compare(e.end, max) > 0) {
			max = e.end
		}
		idx.maxEnd[i] = max
	}
	s.overlap.idx.Store(idx)
	return idx
}

// overlappingPeer returns an initialized local replica, other than region
// except's, whose data shares engine keys with r's (see dataOverlaps), or
// nil. It does not take s.mu.
func (s *Store) overlappingPeer(r *kvpb.Region, except uint64) *Peer {
	idx := s.overlapIndexNow()
	for _, y := range s.obs.Spans(r) {
		// Spans starting before y ends; of those, the ones ending after
		// y starts overlap it. maxEnd bounds how far back to look.
		i, _ := slices.BinarySearchFunc(idx.starts, y.End, func(a, end []byte) int {
			if len(end) == 0 {
				return -1 // an unbounded end: every span starts before it
			}
			return bytes.Compare(a, end)
		})
		for j := i - 1; j >= 0 && endAfter(idx.maxEnd[j], y.Start); j-- {
			q := idx.peers[j]
			if q.regionID == except || q.removed.Load() || !endAfter(idx.ends[j], y.Start) {
				continue
			}
			return q
		}
	}
	return nil
}
