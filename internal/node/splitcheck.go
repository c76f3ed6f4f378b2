package node

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/kvserver"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/kvpb"
)

// Automatic splits. Every SplitCheckInterval the node looks at each data
// region it leads:
//
//   - by size: when its size (as last measured, or Pebble's estimate,
//     whichever is larger) plus the bytes written to it since pass
//     RegionMaxSize (the estimate misses what is still in the memtable),
//     it measures the region (mvcc.SampleSizes, a scan of its records)
//     and, above RegionMaxSize, splits it at the key where half of the
//     bytes lie below; each half starts from half the measured size. A
//     region not measured on this node yet (it just took its leadership
//     over, or started) is measured too, one per round. Otherwise a
//     region well below the limit is never scanned, and one near it about
//     once per RegionMaxSize written to it;
//   - by load (TiKV's load-base split; in a cluster of more than one
//     node): when its queries per second stayed above RegionSplitQPS for
//     two checks in a row, it splits it at the
//     median of the request keys it sampled, if that leaves at least a
//     fifth of them on each side (one hot key cannot be split);
//   - at table boundaries: a split key is moved to the start of a table
//     when the region holds several tables' rows (the boundary nearest the
//     chosen key), and with SplitTable every table gets regions of its own.
//
// Split keys are whole user keys (a row's record key, an index entry), so
// a row or an index entry is never cut: a record key is cut back to
// t{table}_r{handle}.

// DefaultRegionMaxSize is --region-max-size's default.
const DefaultRegionMaxSize = 96 << 20

// DefaultRegionSplitQPS is --region-split-qps's default.
const DefaultRegionSplitQPS = 3000

const defaultSplitCheckInterval = 10 * time.Second

// splitState is what the checker knows of one region.
type splitState struct {
	written   uint64 // bytes written since the region was last measured
	size      uint64 // last measured (0: not yet)
	keys      uint64
	estimate  uint64 // Pebble's estimate at the last check
	estimated bool   // estimate was taken (or size measured)
	queries   uint64 // since the last check
	interval  time.Duration
	samples   [][]byte // request keys sampled since the last check
	hotChecks int      // consecutive checks above RegionSplitQPS
	version   uint64   // the region's epoch version when measured
}

type splitChecker struct {
	mu      sync.Mutex
	regions map[uint64]*splitState
	// loadAlone lets a single node split by load (tests).
	loadAlone atomic.Bool
}

func (c *splitChecker) state(id uint64) *splitState {
	if c.regions == nil {
		c.regions = map[uint64]*splitState{}
	}
	st := c.regions[id]
	if st == nil {
		st = &splitState{}
		c.regions[id] = st
	}
	return st
}

// observeFlow records a leader's traffic of one heartbeat interval.
func (c *splitChecker) observeFlow(id uint64, f kvserver.Flow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state(id)
	st.written += f.WriteBytes
	st.queries += f.ReadQueries + f.WriteQueries
	st.interval += f.Interval
	st.samples = append(st.samples, f.Samples...)
	if len(st.samples) > 4*256 {
		st.samples = st.samples[len(st.samples)-4*256:]
	}
}

// sizeOf returns the region's size and keys as last measured or
// estimated.
func (c *splitChecker) sizeOf(id uint64) (size, keys uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.regions[id]; st != nil {
		if st.size > 0 {
			return max(st.size, st.estimate), st.keys
		}
		if st.estimated {
			return max(st.estimate, 1), 0
		}
	}
	return 0, 0
}

// reportedSize returns region r's size and keys for its report to PD:
// as last measured or estimated, else Pebble's estimate now (a region
// whose leadership just came here). The size is at least 1 byte once
// known: PD reads 0 as unknown (pd.MergeCheck does not merge a region of
// unknown size, which may be large).
func (n *Node) reportedSize(r *kvpb.Region) (size, keys uint64) {
	if size, keys = n.split.sizeOf(r.Id); size > 0 {
		return size, keys
	}
	est, err := n.store.ApproximateSize(r)
	if err != nil {
		return 0, 0
	}
	n.split.mu.Lock()
	defer n.split.mu.Unlock()
	st := n.split.state(r.Id)
	if !st.estimated {
		st.estimate, st.estimated = est, true
	}
	return max(st.estimate, 1), 0
}

func (n *Node) regionMaxSize() uint64 {
	if n.cfg.RegionMaxSize > 0 {
		return uint64(n.cfg.RegionMaxSize)
	}
	return DefaultRegionMaxSize
}

func (n *Node) splitCheckLoop(interval time.Duration) {
	defer n.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		// A stopping node does not wait for a round (a split waits for
		// its new region's leader, PD's allocator).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		done := make(chan struct{})
		go func() {
			select {
			case <-n.stop:
				cancel()
			case <-done:
			}
		}()
		n.checkSplits(ctx)
		close(done)
		cancel()
	}
}

// checkSplits runs one round of the split checker over the data regions
// this store leads.
func (n *Node) checkSplits(ctx context.Context) {
	led := map[uint64]bool{}
	// One region this node has not measured yet (it just took over its
	// leadership, or just started) is measured per round: Pebble's
	// estimate misses the memtable, and the bytes written before this
	// node led it were counted by another.
	unknown := 1
	for _, p := range n.store.Peers() {
		if ctx.Err() != nil {
			return
		}
		r := p.Region()
		if r.Id == pd.SystemRegionID || !p.Initialized() || !p.IsLeaderReady() {
			continue
		}
		led[r.Id] = true
		if key, why, size := n.splitKey(p, r, &unknown); key != nil {
			left, right, err := n.SplitRegion(ctx, key)
			if err != nil {
				n.log.Info("automatic split failed", "region", r.Id, "reason", why, "err", err)
				continue
			}
			n.log.Info("region split", "region", r.Id, "reason", why, "key", string(key))
			// Each half of a split by size holds about half of what was
			// measured: the next checks start from that, so that a half
			// still too big is measured (and split) again.
			led[right.Id] = true
			n.split.mu.Lock()
			for _, half := range []*kvpb.Region{left, right} {
				st := n.split.state(half.Id)
				st.version, st.size, st.written = half.Epoch.GetVersion(), size/2, 0
			}
			n.split.mu.Unlock()
		}
	}
	n.split.mu.Lock()
	for id := range n.split.regions {
		if !led[id] {
			delete(n.split.regions, id)
			n.kv.ForgetFlow(id) // no longer led here: its counters are another leader's now
		}
	}
	n.split.mu.Unlock()
}

// splitKey decides whether region r needs a split now, and where; size
// is the region's measured size when it measured it.
func (n *Node) splitKey(p *raftstore.Peer, r *kvpb.Region, unknown *int) (key []byte, why string, size uint64) {
	maxSize := n.regionMaxSize()
	est, _ := n.store.ApproximateSize(r)
	n.split.mu.Lock()
	st := n.split.state(r.Id)
	if v := r.Epoch.GetVersion(); v != st.version {
		st.version, st.size, st.keys = v, 0, 0 // changed since: Pebble's estimate is all we know
	}
	st.estimate, st.estimated = est, true
	// Pebble's estimate misses the memtable; the bytes written since the
	// last measure (or since the region was first seen here) cover it.
	measure := max(st.size, est)+st.written > maxSize
	if !measure && st.size == 0 && *unknown > 0 {
		measure = true
		*unknown--
	}
	queries, interval, samples := st.queries, st.interval, st.samples
	st.queries, st.interval, st.samples = 0, 0, nil
	n.split.mu.Unlock()

	if measure {
		sz, err := mvcc.SampleSizes(n.store.Engine(), r.StartKey, r.EndKey, max(maxSize/256, 1024))
		if err == nil {
			n.split.mu.Lock()
			st.size, st.keys, st.written = max(sz.Bytes, 1), sz.Keys, 0
			n.split.mu.Unlock()
			if sz.Bytes > maxSize {
				key, why, size = sz.MiddleKey(r.StartKey), "size", sz.Bytes
			}
		}
	}
	// A split by load helps only where there is another store to take
	// a half's leadership; on a single node it would only turn one-phase
	// commits into two-phase ones.
	if key == nil && n.cfg.RegionSplitQPS >= 0 && interval > 0 && (len(n.pd.Stores()) > 1 || n.split.loadAlone.Load()) {
		limit := float64(n.cfg.RegionSplitQPS)
		if limit == 0 {
			limit = DefaultRegionSplitQPS
		}
		qps := float64(queries) / interval.Seconds()
		n.split.mu.Lock()
		if qps >= limit {
			st.hotChecks++
		} else {
			st.hotChecks = 0
		}
		hot := st.hotChecks >= 2
		n.split.mu.Unlock()
		if hot {
			key, why = loadSplitKey(samples, r), "load"
		}
	}
	if key == nil && n.cfg.SplitTable {
		key, why = n.tableBoundary(r), "table"
	}
	if key == nil {
		return nil, "", 0
	}
	key = rowBoundary(key)
	if why != "table" {
		key = n.nearTableBoundary(r, key)
	}
	if !inside(r, key) {
		return nil, "", 0
	}
	return key, why, size
}

// loadSplitKey is the median of the sampled keys inside r, if at least a
// fifth of them lie on each side of it.
func loadSplitKey(samples [][]byte, r *kvpb.Region) []byte {
	var in [][]byte
	for _, k := range samples {
		if inside(r, k) || bytes.Equal(k, r.StartKey) {
			in = append(in, k)
		}
	}
	if len(in) < 16 {
		return nil
	}
	sort.Slice(in, func(i, j int) bool { return bytes.Compare(in[i], in[j]) < 0 })
	mid := rowBoundary(in[len(in)/2])
	below := sort.Search(len(in), func(i int) bool { return bytes.Compare(in[i], mid) >= 0 })
	if below*5 < len(in) || (len(in)-below)*5 < len(in) {
		return nil
	}
	return mid
}

// inside: key lies strictly inside r (a split at it leaves both sides
// non-empty ranges).
func inside(r *kvpb.Region, key []byte) bool {
	return len(key) > 0 && bytes.Compare(key, r.StartKey) > 0 && (len(r.EndKey) == 0 || bytes.Compare(key, r.EndKey) < 0)
}

// rowBoundary cuts a record key back to t{table}_r{handle}; other keys
// (index entries, other data) are whole keys already.
func rowBoundary(key []byte) []byte {
	n := len(tablecodec.RecordKey(0, 0))
	if tid, ok := tablecodec.TableIDOf(key); ok && len(key) > n && bytes.HasPrefix(key, tablecodec.RecordPrefix(tid)) {
		return key[:n:n]
	}
	return key
}

// tableBoundary returns the start of the last table whose keys r holds
// when r holds another table's (or other) keys before it.
func (n *Node) tableBoundary(r *kvpb.Region) []byte {
	first, last, err := mvcc.FirstAndLastKeys(n.store.Engine(), r.StartKey, r.EndKey)
	if err != nil || first == nil {
		return nil
	}
	lt, ok := tablecodec.TableIDOf(last)
	if !ok {
		return nil
	}
	if ft, ok := tablecodec.TableIDOf(first); ok && ft == lt {
		return nil
	}
	return tablecodec.TablePrefix(lt)
}

// nearTableBoundary moves a split key to the start of its table when r
// holds keys of that table's predecessors too, so that a table's rows
// begin a region; the key stays when its table starts r already.
func (n *Node) nearTableBoundary(r *kvpb.Region, key []byte) []byte {
	tid, ok := tablecodec.TableIDOf(key)
	if !ok {
		return key
	}
	prefix := tablecodec.TablePrefix(tid)
	if !inside(r, prefix) {
		return key
	}
	first, _, err := mvcc.FirstAndLastKeys(n.store.Engine(), r.StartKey, prefix)
	if err != nil || first == nil {
		return key // nothing below the table's start: keep the key
	}
	return prefix
}
