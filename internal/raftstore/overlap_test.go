package raftstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/kvpb"
)

// twoSpanObserver gives each region two spans (its range under two
// prefixes), as the MVCC observer gives a region a span per column
// family, so the index is tested with interleaved spans of many regions.
type twoSpanObserver struct{ rawObserver }

func (twoSpanObserver) Spans(r *kvpb.Region) []Span {
	var out []Span
	for _, pre := range []byte{'a', 'b'} {
		sp := Span{Start: append([]byte{pre}, r.StartKey...), End: append([]byte{pre}, r.EndKey...)}
		if len(r.EndKey) == 0 {
			sp.End = []byte{pre + 1}
		}
		out = append(out, sp)
	}
	return out
}

// TestOverlapIndexAgreesWithScan checks overlappingPeer against the
// pairwise check over every replica, for random layouts (regions with
// gaps, uninitialized and removed replicas, unbounded ends) and random
// probes, and that the index follows changes (layoutChanged).
func TestOverlapIndexAgreesWithScan(t *testing.T) {
	for _, obs := range []Observer{rawObserver{}, twoSpanObserver{}} {
		for seed := range uint64(30) {
			r := rand.New(rand.NewPCG(seed, 7))
			s := &Store{obs: obs, peers: map[uint64]*Peer{}}
			key := func(n int) []byte { return []byte(fmt.Sprintf("k%04d", n)) }
			// Regions over [0, 1000) with random gaps; the last may be
			// unbounded.
			lo, id := 0, uint64(1)
			for lo < 1000 {
				hi := lo + 1 + r.IntN(60)
				reg := &kvpb.Region{Id: id, StartKey: key(lo), EndKey: key(hi)}
				if hi >= 1000 && r.IntN(2) == 0 {
					reg.EndKey = nil
				}
				p := &Peer{regionID: id}
				p.region.Store(reg)
				p.initialized.Store(r.IntN(8) != 0)
				p.removed.Store(r.IntN(10) == 0)
				s.peers[id] = p
				id++
				lo = hi + r.IntN(3)*r.IntN(20) // sometimes a gap
			}
			s.publishPeers()
			check := func(round int) {
				for range 200 {
					a := r.IntN(1100)
					probe := &kvpb.Region{Id: 0, StartKey: key(a), EndKey: key(a + 1 + r.IntN(80))}
					if r.IntN(10) == 0 {
						probe.EndKey = nil
					}
					var except uint64
					if r.IntN(3) == 0 {
						except = uint64(1 + r.IntN(int(id)))
					}
					want := false
					for _, q := range s.peers {
						if q.regionID != except && q.Initialized() && !q.removed.Load() && s.dataOverlaps(q.Region(), probe) {
							want = true
						}
					}
					got := s.overlappingPeer(probe, except)
					if (got != nil) != want {
						t.Fatalf("seed %d round %d: probe [%s,%s) except %d: got %v, want overlap %v", seed, round, probe.StartKey, probe.EndKey, except, got, want)
					}
					if got != nil && (got.regionID == except || !s.dataOverlaps(got.Region(), probe)) {
						t.Fatalf("seed %d: probe [%s,%s): returned region %d, which does not overlap it", seed, probe.StartKey, probe.EndKey, got.regionID)
					}
				}
			}
			check(0)
			// Change the layout: shrink some regions (a split), initialize
			// others, drop one; the index must follow.
			for _, p := range s.peers {
				switch r.IntN(4) {
				case 0:
					reg := p.Region()
					p.region.Store(&kvpb.Region{Id: reg.Id, StartKey: reg.StartKey, EndKey: append(append([]byte{}, reg.StartKey...), '5')})
					s.layoutChanged()
				case 1:
					p.initialized.Store(true)
					s.layoutChanged()
				case 2:
					delete(s.peers, p.regionID)
					s.publishPeers()
				}
			}
			check(1)
			// destroyPeer marks a replica removed before it leaves the
			// peer set: the index still lists it.
			for _, p := range s.peers {
				if r.IntN(3) == 0 {
					p.removed.Store(true)
				}
			}
			check(2)
		}
	}
}
