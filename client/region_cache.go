package client

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"github.com/strata-db/strata/kvpb"
)

// pdRPCTimeout bounds one region-directory RPC to PD.
const pdRPCTimeout = 5 * time.Second

// scanRegionsLimit is how many regions one ScanRegions call asks for.
const scanRegionsLimit = 128

// regionEntry is one cached region and the replica we believe leads it.
// Entries are immutable: a leader change or a split replaces the entry, so a
// request in flight keeps a consistent (region, epoch, peer) triple.
type regionEntry struct {
	region *kvpb.Region
	leader *kvpb.Peer
	// rpcCtx routes requests to the leader. It is shared by every request
	// sent with this entry and must not be modified by anyone.
	rpcCtx *kvpb.Context
}

func newRegionEntry(region *kvpb.Region, leader *kvpb.Peer) *regionEntry {
	if leader == nil || !hasStore(region, leader.StoreId) {
		leader = nil
		if len(region.Peers) > 0 {
			leader = region.Peers[0]
		}
	}
	return &regionEntry{
		region: region,
		leader: leader,
		rpcCtx: &kvpb.Context{RegionId: region.Id, RegionEpoch: region.Epoch, Peer: leader},
	}
}

func hasStore(region *kvpb.Region, storeID uint64) bool {
	for _, p := range region.Peers {
		if p.StoreId == storeID {
			return true
		}
	}
	return false
}

// storeID is the store of the leader, or zero if the region has no peers.
func (e *regionEntry) storeID() uint64 {
	if e.leader == nil {
		return 0
	}
	return e.leader.StoreId
}

func (e *regionEntry) startKey() []byte { return e.region.StartKey }
func (e *regionEntry) endKey() []byte   { return e.region.EndKey }

// contains reports whether key is in [start, end).
func (e *regionEntry) contains(key []byte) bool {
	return bytes.Compare(key, e.region.StartKey) >= 0 &&
		(len(e.region.EndKey) == 0 || bytes.Compare(key, e.region.EndKey) < 0)
}

// containsEndKey reports whether the keys just below key belong to the
// region, i.e. start < key <= end. An empty key means +infinity.
func (e *regionEntry) containsEndKey(key []byte) bool {
	if len(key) == 0 {
		return len(e.region.EndKey) == 0
	}
	return bytes.Compare(e.region.StartKey, key) < 0 &&
		(len(e.region.EndKey) == 0 || bytes.Compare(key, e.region.EndKey) <= 0)
}

// regionItem is the btree element: regions ordered by start key. Cached
// regions never overlap.
type regionItem struct {
	start []byte
	entry *regionEntry
}

func regionItemLess(a, b regionItem) bool { return bytes.Compare(a.start, b.start) < 0 }

// regionCache maps keys to regions and their leaders, loading from PD on a
// miss and correcting itself from the RegionErrors stores send back. It is
// safe for concurrent use.
type regionCache struct {
	pd   PD
	mu   sync.Mutex // held by writers of tree
	tree *btree.BTreeG[regionItem]
	// snap is a read-only clone of tree, replaced after every change, so
	// that lookups (every request makes one) take no lock: a shared
	// RWMutex's reader count bounced between the cores on every read.
	snap atomic.Pointer[btree.BTreeG[regionItem]]
}

func newRegionCache(pd PD) *regionCache {
	c := &regionCache{pd: pd, tree: btree.NewG(32, regionItemLess)}
	c.snap.Store(c.tree.Clone())
	return c
}

// publish makes the current tree what lookups see. c.mu held.
func (c *regionCache) publish() { c.snap.Store(c.tree.Clone()) }

// lookup finds the cached region containing key, without I/O.
func (c *regionCache) lookup(key []byte) *regionEntry {
	var found *regionEntry
	c.snap.Load().DescendLessOrEqual(regionItem{start: key}, func(it regionItem) bool {
		found = it.entry
		return false
	})
	if found != nil && found.contains(key) {
		return found
	}
	return nil
}

// lookupEndKey finds the cached region holding the keys just below key
// (start < key <= end); an empty key means the last region.
func (c *regionCache) lookupEndKey(key []byte) *regionEntry {
	var found *regionEntry
	tree := c.snap.Load()
	if len(key) == 0 {
		if it, ok := tree.Max(); ok {
			found = it.entry
		}
	} else {
		tree.DescendLessOrEqual(regionItem{start: key}, func(it regionItem) bool {
			if bytes.Equal(it.start, key) {
				return true // starts at key: the one before it is wanted
			}
			found = it.entry
			return false
		})
	}
	if found != nil && found.containsEndKey(key) {
		return found
	}
	return nil
}

// locate returns the region containing key, asking PD on a cache miss.
func (c *regionCache) locate(ctx context.Context, key []byte) (*regionEntry, error) {
	if e := c.lookup(key); e != nil {
		return e, nil
	}
	return c.load(ctx, key)
}

// regionMissWait bounds how long load waits for PD to know the region of
// a key: right after a split PD may have the left region's report (its
// range shrunk) before the right one's, a gap of up to a heartbeat.
const regionMissWait = 3 * time.Second

func (c *regionCache) load(ctx context.Context, key []byte) (*regionEntry, error) {
	var resp *kvpb.GetRegionResponse
	deadline := time.Now().Add(regionMissWait)
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		rctx, cancel := context.WithTimeout(ctx, pdRPCTimeout)
		r, err := c.pd.GetRegion(rctx, &kvpb.GetRegionRequest{Key: key})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("client: pd GetRegion: %w", err)
		}
		resp = r
		if resp.Error == nil && resp.Region != nil || time.Now().After(deadline) ||
			resp.Error != nil && !strings.Contains(resp.Error.Message, "no region for key") {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("client: pd GetRegion: %s", resp.Error.Message)
	}
	if resp.Region == nil {
		return nil, fmt.Errorf("client: pd has no region for key %q", key)
	}
	e := newRegionEntry(resp.Region, resp.Leader)
	if !e.contains(key) {
		return nil, fmt.Errorf("client: pd returned region %d [%q, %q) for key %q",
			resp.Region.Id, resp.Region.StartKey, resp.Region.EndKey, key)
	}
	c.insert(e)
	return e, nil
}

// locateEndKey returns the region holding the keys just below key (an empty
// key means +infinity), asking PD on a miss. lower bounds how far back the
// PD scan may have to start; regions it returns on the way warm the cache
// for the rest of a reverse scan.
func (c *regionCache) locateEndKey(ctx context.Context, lower, key []byte) (*regionEntry, error) {
	if e := c.lookupEndKey(key); e != nil {
		return e, nil
	}
	if len(key) > 0 {
		e, err := c.load(ctx, key)
		if err != nil {
			return nil, err
		}
		if e.containsEndKey(key) {
			return e, nil
		}
		// key is the region's start key: the region ending at key is the
		// one wanted, and PD can find it only by scanning up to key.
	}
	from := lower
	for {
		rctx, cancel := context.WithTimeout(ctx, pdRPCTimeout)
		resp, err := c.pd.ScanRegions(rctx, &kvpb.ScanRegionsRequest{StartKey: from, EndKey: key, Limit: scanRegionsLimit})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("client: pd ScanRegions: %w", err)
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("client: pd ScanRegions: %s", resp.Error.Message)
		}
		if len(resp.Regions) == 0 {
			return nil, fmt.Errorf("client: pd has no region ending at %q", key)
		}
		var last *regionEntry
		for i, r := range resp.Regions {
			var leader *kvpb.Peer
			if i < len(resp.Leaders) {
				leader = resp.Leaders[i]
			}
			last = newRegionEntry(r, leader)
			c.insert(last)
		}
		if last.containsEndKey(key) {
			return last, nil
		}
		end := last.endKey()
		if len(end) == 0 || bytes.Compare(end, from) <= 0 || (len(key) > 0 && bytes.Compare(end, key) >= 0) {
			return nil, fmt.Errorf("client: pd ScanRegions did not reach %q", key)
		}
		from = end
	}
}

// insert adds e, evicting every cached region it overlaps.
func (c *regionCache) insert(e *regionEntry) {
	start, end := e.startKey(), e.endKey()
	c.mu.Lock()
	defer c.mu.Unlock()
	var stale []regionItem
	c.tree.DescendLessOrEqual(regionItem{start: start}, func(it regionItem) bool {
		if !bytes.Equal(it.start, start) && it.entry.contains(start) {
			stale = append(stale, it)
		}
		return false
	})
	c.tree.AscendGreaterOrEqual(regionItem{start: start}, func(it regionItem) bool {
		if len(end) > 0 && bytes.Compare(it.start, end) >= 0 {
			return false
		}
		stale = append(stale, it)
		return true
	})
	for _, it := range stale {
		c.tree.Delete(it)
	}
	c.tree.ReplaceOrInsert(regionItem{start: start, entry: e})
	c.publish()
}

// invalidate drops e if it is still the cached entry for its range.
func (c *regionCache) invalidate(e *regionEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if it, ok := c.tree.Get(regionItem{start: e.startKey()}); ok && it.entry == e {
		c.tree.Delete(it)
		c.publish()
	}
}

// replace swaps old for repl if old is still the cached entry; a concurrent
// refresh that already replaced old wins.
func (c *regionCache) replace(old, repl *regionEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if it, ok := c.tree.Get(regionItem{start: old.startKey()}); ok && it.entry == old {
		c.tree.ReplaceOrInsert(regionItem{start: repl.startKey(), entry: repl})
		c.publish()
	}
}

// onRegionError corrects the cache after a store rejected a request sent
// with e, and tells the caller how to back off before retrying.
func (c *regionCache) onRegionError(e *regionEntry, re *kvpb.RegionError) (backoffKind, time.Duration) {
	switch {
	case re.NotLeader != nil:
		l := re.NotLeader.Leader
		if l != nil && l.StoreId != 0 && hasStore(e.region, l.StoreId) && l.StoreId != e.storeID() {
			c.replace(e, newRegionEntry(e.region, l))
		} else {
			// No usable hint (an election is running, or the hint is
			// the replica we just asked): PD may know better.
			c.invalidate(e)
		}
		return boRegionMiss, 0
	case re.EpochNotMatch != nil:
		c.invalidate(e)
		for _, r := range re.EpochNotMatch.CurrentRegions {
			leader := e.leader
			if leader != nil && !hasStore(r, leader.StoreId) {
				leader = nil
			} else if leader != nil {
				leader = peerOnStore(r, leader.StoreId)
			}
			c.insert(newRegionEntry(r, leader))
		}
		return boRegionMiss, 0
	case re.ServerBusy != nil:
		return boServerBusy, time.Duration(re.ServerBusy.BackoffMs) * time.Millisecond
	default:
		// KeyNotInRegion, RegionNotFound, or an error we do not know:
		// forget the region and ask PD again.
		c.invalidate(e)
		return boRegionMiss, 0
	}
}

func peerOnStore(r *kvpb.Region, storeID uint64) *kvpb.Peer {
	for _, p := range r.Peers {
		if p.StoreId == storeID {
			return p
		}
	}
	return nil
}

// regionErrorString describes a RegionError for error messages.
func regionErrorString(re *kvpb.RegionError) string {
	switch {
	case re.NotLeader != nil:
		return fmt.Sprintf("not leader of region %d", re.NotLeader.RegionId)
	case re.EpochNotMatch != nil:
		return "region epoch does not match"
	case re.KeyNotInRegion != nil:
		return fmt.Sprintf("key %q not in region %d", re.KeyNotInRegion.Key, re.KeyNotInRegion.RegionId)
	case re.ServerBusy != nil:
		return "server busy: " + re.ServerBusy.Reason
	case re.RegionNotFound != nil:
		return fmt.Sprintf("region %d not found", re.RegionNotFound.RegionId)
	}
	return "region error: " + re.Message
}

// regionBatch is a run of sorted keys that fall in one region: keys[lo:hi]
// of the slice it was made from.
type regionBatch struct {
	entry  *regionEntry
	lo, hi int
}

// groupSortedKeys splits sorted keys into per-region runs.
func (c *regionCache) groupSortedKeys(ctx context.Context, keys [][]byte) ([]regionBatch, error) {
	var out []regionBatch
	for i := 0; i < len(keys); {
		e, err := c.locate(ctx, keys[i])
		if err != nil {
			return nil, err
		}
		j := i + 1
		for j < len(keys) && e.contains(keys[j]) {
			j++
		}
		out = append(out, regionBatch{entry: e, lo: i, hi: j})
		i = j
	}
	return out, nil
}
