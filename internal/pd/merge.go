package pd

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/strata-db/strata/kvpb"
)

// The merge checker: which small, cold regions should merge into a
// neighbour (after a DELETE, a DROP TABLE or a load that moved on), as
// TiKV's PD merge checker decides it. It is a pure function like the
// schedulers, pinned by testdata/scheduler/merge.
//
// The server runs it on a store's patrols when Config.Merge is set
// (scheduler.go, mergeLocked) and hands a Merge operator to the source's
// leader, which carries it out through the raft store (raftstore/merge.go).
//
// A region is a merge source when it is
//
//   - stable (no operator in flight, voters only, nothing to repair,
//     a leader), not PD's own region;
//   - at least MinAge old (a region just split off is not merged back:
//     TiKV's split-merge-interval);
//   - small: below MaxSize bytes and MaxKeys keys (approximate), and
//     measured: a report of 0 bytes means the leader's node has not
//     measured or estimated the region yet (it just took the leadership
//     over; a measured empty region reports at least 1), and it may be
//     large;
//   - cold: read and written bytes/s together below MaxRate.
//
// Its target is the left or right neighbour (the region whose range
// touches its own) that is stable, at least MinAge old, measured, and with which
// the merged region stays below the split thresholds (MaxMergedSize,
// MaxMergedKeys), so the split checker does not cut it again; a boundary
// the split checker always splits at (Boundary, a table boundary) is never
// merged across. Of two targets the smaller is taken, the left one on a
// tie.
//
// Merging needs a replica of both regions on the same stores. When the
// source's stores differ from the target's, the checker first moves a
// source replica from a store the target does not use to one it uses
// (one move at a time; the repair scheduler finishes each move as it
// does a balancing one). Only once the stores match is the pair a Merge.

// MergeConfig holds the merge checker's thresholds.
type MergeConfig struct {
	MaxSize       uint64
	MaxKeys       uint64
	MaxMergedSize uint64
	MaxMergedKeys uint64
	// MaxRate: bytes/s read and written above which a region is not cold.
	MaxRate float64
	MinAge  time.Duration
	// Boundary reports whether the split checker always splits at key
	// (nil: no such keys).
	Boundary func(key []byte) bool
}

// DefaultMergeConfig returns TiKV's defaults: regions under 20 MiB and
// 200,000 keys merge, into at most the split size (96 MiB, 960,000 keys),
// an hour after they were split.
func DefaultMergeConfig() MergeConfig {
	return MergeConfig{MaxSize: 20 << 20, MaxKeys: 200_000, MaxMergedSize: 96 << 20, MaxMergedKeys: 960_000,
		MaxRate: 64 << 10, MinAge: time.Hour}
}

// MergeDecision is the checker's answer for one source region: Target
// when source and target are ready to merge (Move nil), or the replica
// move (Move) that brings the source's replicas to the target's stores
// first.
type MergeDecision struct {
	Source, Target uint64
	Move           *Decision
	Reason         string
}

// MergeCheck returns the merges (and the replica moves that prepare them)
// of one round. ages gives each region's age (time since PD first saw it
// with its current range); a region without one is taken as new. Each
// region takes part in one decision at most, and a move counts against
// the store limits as a balancing one does.
func MergeCheck(c *Cluster, cfg MergeConfig, ages map[uint64]time.Duration) []MergeDecision {
	byStart := make([]*kvpb.RegionStat, 0, len(c.Regions))
	for _, r := range c.Regions {
		if r.Region.Id != SystemRegionID {
			byStart = append(byStart, r)
		}
	}
	sort.Slice(byStart, func(i, j int) bool { return bytes.Compare(byStart[i].Region.StartKey, byStart[j].Region.StartKey) < 0 })
	used := map[uint64]bool{}
	old := func(r *kvpb.RegionStat) bool { a, ok := ages[r.Region.Id]; return ok && a >= cfg.MinAge }
	eligible := func(r *kvpb.RegionStat) bool { return !used[r.Region.Id] && old(r) && c.stable(r) }
	var out []MergeDecision
	for i, r := range byStart {
		if !eligible(r) || r.ApproximateSize == 0 || r.ApproximateSize >= cfg.MaxSize || r.ApproximateKeys >= cfg.MaxKeys {
			continue
		}
		if rd, wr := RegionRate(r); rd+wr >= cfg.MaxRate {
			continue
		}
		fits := func(t *kvpb.RegionStat, boundary []byte) bool {
			return eligible(t) && t.ApproximateSize > 0 && r.ApproximateSize+t.ApproximateSize < cfg.MaxMergedSize &&
				r.ApproximateKeys+t.ApproximateKeys < cfg.MaxMergedKeys &&
				(cfg.Boundary == nil || !cfg.Boundary(boundary))
		}
		var target *kvpb.RegionStat
		if i > 0 {
			if p := byStart[i-1]; bytes.Equal(p.Region.EndKey, r.Region.StartKey) && fits(p, r.Region.StartKey) {
				target = p
			}
		}
		if i+1 < len(byStart) && len(r.Region.EndKey) > 0 {
			if n := byStart[i+1]; bytes.Equal(n.Region.StartKey, r.Region.EndKey) && fits(n, r.Region.EndKey) &&
				(target == nil || n.ApproximateSize < target.ApproximateSize) {
				target = n
			}
		}
		if target == nil {
			continue
		}
		d := MergeDecision{Source: r.Region.Id, Target: target.Region.Id}
		if move := c.alignMove(r, target); move != nil {
			d.Move = move
			d.Reason = fmt.Sprintf("merge into region %d: a replica to store %d first", target.Region.Id, move.Op.Peer.StoreId)
		} else if !sameStores(r.Region, target.Region) {
			continue // no room to move a replica now
		} else {
			d.Reason = fmt.Sprintf("%d bytes and %d keys, cold; region %d has %d bytes and %d keys",
				r.ApproximateSize, r.ApproximateKeys, target.Region.Id, target.ApproximateSize, target.ApproximateKeys)
		}
		used[r.Region.Id], used[target.Region.Id] = true, true
		out = append(out, d)
	}
	return out
}

// alignMove returns the replica move that brings source's replicas one
// store closer to target's, or nil when they match or the stores have no
// room (StoreLimit).
func (c *Cluster) alignMove(source, target *kvpb.RegionStat) *Decision {
	if sameStores(source.Region, target.Region) {
		return nil
	}
	var from, to uint64
	for _, p := range source.Region.Peers {
		if !onStore(target.Region, p.StoreId) {
			from = p.StoreId
			break
		}
	}
	for _, p := range target.Region.Peers {
		if s := c.Stores[p.StoreId]; !onStore(source.Region, p.StoreId) && s != nil && s.serving() && s.Ops < c.StoreLimit {
			to = p.StoreId
			break
		}
	}
	if from == 0 || to == 0 {
		return nil
	}
	if s := c.Stores[from]; s == nil || s.Ops >= c.StoreLimit {
		return nil
	}
	d := c.commit(Decision{Op: op(source.Region, kvpb.OperatorKind_AddLearner,
		&kvpb.Peer{StoreId: to, Role: kvpb.PeerRole_Learner},
		fmt.Sprintf("merge into region %d, whose replicas are on store %d", target.Region.Id, to)), MoveFrom: from})
	return &d
}

// sameStores: a and b have replicas on the same set of stores.
func sameStores(a, b *kvpb.Region) bool {
	if len(a.Peers) != len(b.Peers) {
		return false
	}
	for _, p := range a.Peers {
		if !onStore(b, p.StoreId) {
			return false
		}
	}
	return true
}
