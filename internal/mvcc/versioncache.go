package mvcc

import (
	"bytes"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// VersionCache remembers, for recently read or written user keys, the
// newest write record in the engine: its commit ts, its kind and, for an
// inlined Put, the value; or that the key has none. A read whose timestamp is at or above that
// commit ts is answered from memory, without a Pebble iterator; so is a
// prewrite's check for newer commits when the newest record is below the
// transaction's start ts, and a commit's check for a record at its own
// commit ts. Everything else goes to the engine as before.
//
// The engine keeps every version of a key in an LSM, so finding "the
// newest version at or below ts" costs an iterator over every level
// that may hold the key (memtables, L0 sublevels, the levels below), each
// with its block-cache lookups; profiles of sysbench's point selects and
// of YCSB reads put that at 25-45% of the node's CPU. InnoDB answers from
// its buffer pool, RocksDB offers a row cache: this is the same idea for
// MVCC records.
//
// # Why an entry is exact
//
// An entry is the engine's newest record of its key at every moment a
// reader can see it:
//
//   - Changes come only from the apply path, which calls BeforeApply with
//     each batch before it commits to the engine and Observe after. From
//     BeforeApply to Observe the shards of the keys the batch writes are
//     pending: lookups there miss (the reader goes to the engine, which
//     is always right) and nothing is filled. Observe updates the entries
//     the batch changed and ends the pending state. So a reader never sees
//     an entry older than the engine (a later reader of the engine could
//     otherwise see a newer value than an earlier reader of the cache).
//   - A reader that missed fills the entry with the newest record it read
//     from the engine, but only if its shard's generation, read before it
//     opened its iterator, is unchanged and the shard is not pending: every
//     BeforeApply and Observe bumps the generation, so a fill from a view
//     that an apply may have overtaken is dropped.
//   - Observe only replaces an entry by a record at or above its commit
//     ts (a Rollback record can be written below the newest commit) and
//     never creates one: a write to an uncached key does not say whether a
//     newer record (a rollback at a later start ts) already exists.
//   - A deletion of the newest record (GC of a Delete or Rollback) drops
//     the entry; a range deletion (DestroyRange) empties the cache, and
//     while one is being applied nothing is served or filled.
//
// The LockSet owns the cache and observes it before its own locks, so a
// reader that finds a key unlocked also finds its commit in the cache.
//
// Memory is bounded: each of the shards evicts arbitrary entries past its
// share of the capacity.
type VersionCache struct {
	shards     [versionCacheShards]versionShard
	shardLimit int64
	seed       maphash.Seed
	// destroying counts range deletions between BeforeApply and Observe.
	destroying atomic.Int32

	hits, misses atomic.Uint64
}

const versionCacheShards = 256

// entryOverhead approximates the memory of an entry beyond its key and
// value bytes (map slot, string header, record).
const entryOverhead = 96

type versionShard struct {
	mu      sync.Mutex
	gen     uint64
	pending int
	bytes   int64
	m       map[string]cachedVersion
	_       [40]byte // keep shards on separate cache lines
}

type cachedVersion struct {
	commitTS uint64
	w        write // w.value is owned by the cache and never modified
	// absent: the key has no write record at all (commitTS is 0). Any
	// record Observe sees for the key is newer and replaces the entry.
	absent bool
}

// NewVersionCache returns a cache holding about capacity bytes of keys
// and values; nil (no cache) when capacity is not positive.
func NewVersionCache(capacity int64) *VersionCache {
	if capacity <= 0 {
		return nil
	}
	c := &VersionCache{shardLimit: max(capacity/versionCacheShards, 4<<10), seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]cachedVersion)
	}
	return c
}

// VersionCacheStats are counters for metrics.
type VersionCacheStats struct {
	Hits, Misses uint64
	Entries      int
	Bytes        int64
}

// Stats returns the cache's counters (zero for a nil cache).
func (c *VersionCache) Stats() VersionCacheStats {
	if c == nil {
		return VersionCacheStats{}
	}
	st := VersionCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Entries += len(s.m)
		st.Bytes += s.bytes
		s.mu.Unlock()
	}
	return st
}

func (c *VersionCache) shard(prefix []byte) *versionShard {
	return &c.shards[maphash.Bytes(c.seed, prefix)%versionCacheShards]
}

// noFill is the generation lookup returns when the reader must not fill.
const noFill = ^uint64(0)

// lookup returns the newest record of the key whose write-CF version
// prefix is prefix. On a miss it returns the generation a later fill must
// present (noFill when none may happen).
func (c *VersionCache) lookup(prefix []byte) (e cachedVersion, ok bool, gen uint64) {
	if c.destroying.Load() > 0 {
		c.misses.Add(1)
		return e, false, noFill
	}
	s := c.shard(prefix)
	s.mu.Lock()
	if s.pending > 0 {
		s.mu.Unlock()
		c.misses.Add(1)
		return e, false, noFill
	}
	e, ok = s.m[string(prefix)]
	gen = s.gen
	s.mu.Unlock()
	if ok {
		c.hits.Add(1)
		return e, true, noFill
	}
	c.misses.Add(1)
	return e, false, gen
}

// fill records w at commitTS as the newest record of prefix's key, read
// from an engine view opened after lookup returned gen.
func (c *VersionCache) fill(prefix []byte, gen, commitTS uint64, w *write) {
	e := cachedVersion{commitTS: commitTS, w: *w}
	e.w.value = bytes.Clone(w.value)
	c.put(prefix, gen, e)
}

// fillAbsent records that prefix's key has no write record, as read from
// an engine view opened after lookup returned gen.
func (c *VersionCache) fillAbsent(prefix []byte, gen uint64) {
	c.put(prefix, gen, cachedVersion{absent: true})
}

func (c *VersionCache) put(prefix []byte, gen uint64, e cachedVersion) {
	if gen == noFill || c.destroying.Load() > 0 {
		return
	}
	s := c.shard(prefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || s.pending > 0 {
		return
	}
	if _, ok := s.m[string(prefix)]; ok {
		return
	}
	s.m[string(prefix)] = e
	s.bytes += entrySize(prefix, &e)
	c.evict(s)
}

func entrySize(prefix []byte, e *cachedVersion) int64 {
	return int64(len(prefix)+len(e.w.value)) + entryOverhead
}

// evict drops arbitrary entries of s (map iteration order is random)
// until it is within its share of the capacity.
func (c *VersionCache) evict(s *versionShard) {
	if s.bytes <= c.shardLimit {
		return
	}
	for k, e := range s.m {
		delete(s.m, k)
		s.bytes -= entrySize([]byte(k), &e)
		if s.bytes <= c.shardLimit*7/8 {
			return
		}
	}
}

// BeforeApply marks the keys an applied batch writes as pending. It must
// be called before the batch commits to the engine, and Observe after.
func (c *VersionCache) BeforeApply(repr []byte) error {
	if c == nil || len(repr) <= batchrepr.HeaderLen {
		return nil
	}
	return c.eachWrite(repr, func(kind pebble.InternalKeyKind, k, _ []byte) error {
		if kind == pebble.InternalKeyKindRangeDelete {
			c.destroying.Add(1)
			return nil
		}
		s := c.shard(k[:len(k)-8])
		s.mu.Lock()
		s.pending++
		s.gen++
		s.mu.Unlock()
		return nil
	})
}

// Observe applies the write-CF changes of a batch that BeforeApply saw
// and that is now in the engine, and ends their pending state.
func (c *VersionCache) Observe(repr []byte) error {
	if c == nil || len(repr) <= batchrepr.HeaderLen {
		return nil
	}
	return c.eachWrite(repr, func(kind pebble.InternalKeyKind, k, v []byte) error {
		if kind == pebble.InternalKeyKindRangeDelete {
			c.clear()
			c.destroying.Add(-1)
			return nil
		}
		prefix := k[:len(k)-8]
		commitTS := ^bigEndianTS(k[len(k)-8:])
		s := c.shard(prefix)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pending--
		s.gen++
		e, ok := s.m[string(prefix)]
		if !ok || commitTS < e.commitTS {
			return nil // not cached, or not the newest record
		}
		s.bytes -= entrySize(prefix, &e)
		if kind != pebble.InternalKeyKindSet {
			// The newest record was deleted (GC): what is newest now is
			// not known here.
			delete(s.m, string(prefix))
			return nil
		}
		w, err := decodeWrite(v)
		if err != nil {
			delete(s.m, string(prefix))
			return err
		}
		e = cachedVersion{commitTS: commitTS, w: w}
		e.w.value = bytes.Clone(w.value)
		s.m[string(prefix)] = e
		s.bytes += entrySize(prefix, &e)
		c.evict(s)
		return nil
	})
}

// eachWrite calls fn for every write-CF point operation and every range
// deletion overlapping the write CF in repr.
func (c *VersionCache) eachWrite(repr []byte, fn func(kind pebble.InternalKeyKind, k, v []byte) error) error {
	r := batchrepr.Read(repr)
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		switch kind {
		case pebble.InternalKeyKindRangeDelete:
			if bytes.Compare(k, []byte{Prefix, writeCF + 1}) < 0 && bytes.Compare(v, []byte{Prefix, writeCF}) > 0 {
				if err := fn(kind, k, v); err != nil {
					return err
				}
			}
		case pebble.InternalKeyKindSet, pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete,
			pebble.InternalKeyKindDeleteSized:
			if len(k) > 2+8 && k[0] == Prefix && k[1] == writeCF {
				if err := fn(kind, k, v); err != nil {
					return err
				}
			}
		}
	}
}

func (c *VersionCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.bytes = 0
		s.gen++
		s.mu.Unlock()
	}
}

// versionCacher is implemented by readers of the live engine that carry
// the store's version cache (LockSet.Reader).
type versionCacher interface {
	versionCache() *VersionCache
}

func versionCacheOf(r pebble.Reader) *VersionCache {
	if vc, ok := r.(versionCacher); ok {
		return vc.versionCache()
	}
	return nil
}
