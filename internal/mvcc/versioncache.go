package mvcc

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
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
// # Memory
//
// The cache holds no Go pointers per entry, so the garbage collector
// neither scans nor frees entries: each shard appends its entries to a
// ring of fixed-size segments (memory mapped once, outside the Go heap;
// pages are resident only once written) and indexes them by a 64-bit hash of the
// key in a map[uint64]uint32. An update appends the new record and leaves
// the old one as dead bytes. When the ring comes round to a segment again,
// the entries still indexed there are evicted (first in, first out) and
// the segment is reused. A hash collision evicts one of the two keys: a
// lookup compares the stored key and misses, which is always safe.
type VersionCache struct {
	shards    []versionShard
	shardMask uint64
	segSize   int
	seed      maphash.Seed
	// destroying counts range deletions between BeforeApply and Observe.
	destroying atomic.Int32

	hits, misses atomic.Uint64

	mem       []byte // every shard's ring, outside the Go heap (allocRing)
	closeOnce sync.Once
	closeErr  error
}

const (
	maxVersionCacheShards = 256
	segmentsPerShard      = 4
	// minSegmentSize holds an entry with the largest inlined value.
	minSegmentSize = 2*maxShortValue + 1024
)

type versionShard struct {
	mu      sync.Mutex
	gen     uint64
	pending int
	index   map[uint64]uint32 // key hash -> offset of its entry in ring
	ring    []byte            // segmentsPerShard segments of segSize bytes
	seg     int               // the segment being appended to
	used    [segmentsPerShard]int
	_       [40]byte // keep shards on separate cache lines
}

// Entry layout in a segment:
//
//	0  uint32 total length
//	4  uint64 key hash
//	12 uint16 key length
//	14 uint64 commit ts
//	22 uint64 start ts
//	30 byte   kind (0: the key has no record)
//	31 byte   flags (writeFlagOverlappedRollback, writeFlagHasValue)
//	32 key (the write-CF version prefix), then the inlined value
const entryHeader = 32

type cachedVersion struct {
	commitTS uint64
	w        write // w.value is a copy owned by the caller
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
	shards := maxVersionCacheShards
	for shards > 1 && capacity/int64(shards) < segmentsPerShard*minSegmentSize {
		shards /= 2
	}
	segSize := max(int(capacity/int64(shards)/segmentsPerShard), minSegmentSize)
	ring, err := allocRing(shards * segmentsPerShard * segSize)
	if err != nil {
		// Not enough address space or memory: run without a cache.
		return nil
	}
	c := &VersionCache{shards: make([]versionShard, shards), shardMask: uint64(shards - 1), segSize: segSize,
		seed: maphash.MakeSeed(), mem: ring}
	for i := range c.shards {
		c.shards[i].index = make(map[uint64]uint32)
		n := segmentsPerShard * segSize
		c.shards[i].ring = ring[i*n : (i+1)*n : (i+1)*n]
	}
	return c
}

// Close releases the cache's memory. Lookups after Close miss, and
// nothing is filled or updated; Close must not race with BeforeApply and
// Observe of a batch (the store is closed first).
func (c *VersionCache) Close() error {
	if c == nil {
		return nil
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.ring = nil
		clear(s.index)
		s.mu.Unlock()
	}
	c.closeOnce.Do(func() { c.closeErr = freeRing(c.mem) })
	return c.closeErr
}

// VersionCacheStats are counters for metrics.
type VersionCacheStats struct {
	Hits, Misses uint64
	Entries      int
	Bytes        int64 // bytes of the rings written so far (entries, dead ones included)
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
		st.Entries += len(s.index)
		for _, u := range s.used {
			st.Bytes += int64(u)
		}
		s.mu.Unlock()
	}
	return st
}

func (c *VersionCache) locate(prefix []byte) (uint64, *versionShard) {
	h := maphash.Bytes(c.seed, prefix)
	return h, &c.shards[(h>>56)&c.shardMask]
}

// find returns the offset of prefix's entry in s, if indexed. s.mu held.
func (s *versionShard) find(h uint64, prefix []byte) (int, bool) {
	off, ok := s.index[h]
	if !ok || s.ring == nil {
		return 0, false
	}
	e := s.ring[off:]
	klen := int(binary.LittleEndian.Uint16(e[12:]))
	if !bytes.Equal(e[entryHeader:entryHeader+klen], prefix) {
		return 0, false // another key with the same hash
	}
	return int(off), true
}

// read decodes the entry at off, copying its value. s.mu held.
func (s *versionShard) read(off int) cachedVersion {
	e := s.ring[off:]
	n := int(binary.LittleEndian.Uint32(e))
	klen := int(binary.LittleEndian.Uint16(e[12:]))
	v := cachedVersion{commitTS: binary.LittleEndian.Uint64(e[14:])}
	if e[30] == 0 {
		v.absent = true
		return v
	}
	v.w.kind = writeKind(e[30])
	v.w.startTS = binary.LittleEndian.Uint64(e[22:])
	v.w.overlappedRollback = e[31]&writeFlagOverlappedRollback != 0
	v.w.hasValue = e[31]&writeFlagHasValue != 0
	if v.w.hasValue {
		v.w.value = bytes.Clone(e[entryHeader+klen : n])
		if v.w.value == nil {
			v.w.value = []byte{}
		}
		v.w.owned = true
	}
	return v
}

// commitTSAt returns the commit ts of the entry at off. s.mu held.
func (s *versionShard) commitTSAt(off int) uint64 {
	return binary.LittleEndian.Uint64(s.ring[off+14:])
}

// append writes an entry for prefix and indexes it, evicting the oldest
// segment's entries when the ring comes round. s.mu held.
func (c *VersionCache) append(s *versionShard, h uint64, prefix []byte, commitTS uint64, w *write, absent bool) {
	n := entryHeader + len(prefix)
	if !absent && w.hasValue {
		n += len(w.value)
	}
	if s.ring == nil {
		return // closed
	}
	if len(prefix) > math.MaxUint16 || n > c.segSize {
		delete(s.index, h) // too big to cache; the old entry is stale
		return
	}
	if s.used[s.seg]+n > c.segSize {
		s.seg = (s.seg + 1) % segmentsPerShard
		c.recycle(s, s.seg)
	}
	off := s.seg*c.segSize + s.used[s.seg]
	e := s.ring[off : off+n]
	binary.LittleEndian.PutUint32(e, uint32(n))
	binary.LittleEndian.PutUint64(e[4:], h)
	binary.LittleEndian.PutUint16(e[12:], uint16(len(prefix)))
	binary.LittleEndian.PutUint64(e[14:], commitTS)
	if absent {
		binary.LittleEndian.PutUint64(e[22:], 0)
		e[30], e[31] = 0, 0
	} else {
		binary.LittleEndian.PutUint64(e[22:], w.startTS)
		e[30] = byte(w.kind)
		var flags byte
		if w.overlappedRollback {
			flags |= writeFlagOverlappedRollback
		}
		if w.hasValue {
			flags |= writeFlagHasValue
			copy(e[entryHeader+len(prefix):], w.value)
		}
		e[31] = flags
	}
	copy(e[entryHeader:], prefix)
	s.used[s.seg] += n
	s.index[h] = uint32(off)
}

// recycle evicts the entries of segment seg that are still indexed and
// empties it. s.mu held.
func (c *VersionCache) recycle(s *versionShard, seg int) {
	base := seg * c.segSize
	for off := base; off < base+s.used[seg]; {
		e := s.ring[off:]
		h := binary.LittleEndian.Uint64(e[4:])
		if cur, ok := s.index[h]; ok && int(cur) == off {
			delete(s.index, h)
		}
		off += int(binary.LittleEndian.Uint32(e))
	}
	s.used[seg] = 0
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
	h, s := c.locate(prefix)
	s.mu.Lock()
	if s.pending > 0 {
		s.mu.Unlock()
		c.misses.Add(1)
		return e, false, noFill
	}
	off, ok := s.find(h, prefix)
	if ok {
		e = s.read(off)
	}
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
	c.put(prefix, gen, commitTS, w, false)
}

// fillAbsent records that prefix's key has no write record, as read from
// an engine view opened after lookup returned gen.
func (c *VersionCache) fillAbsent(prefix []byte, gen uint64) {
	c.put(prefix, gen, 0, nil, true)
}

func (c *VersionCache) put(prefix []byte, gen, commitTS uint64, w *write, absent bool) {
	if gen == noFill || c.destroying.Load() > 0 {
		return
	}
	h, s := c.locate(prefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || s.pending > 0 {
		return
	}
	if _, ok := s.find(h, prefix); ok {
		return
	}
	c.append(s, h, prefix, commitTS, w, absent)
}

// beforeApply marks the key of one write-CF record of a batch about to be
// applied as pending (a range deletion: the whole cache). LockSet.BeforeApply
// calls it for every record before the batch commits to the engine, and
// Observe runs after.
func (c *VersionCache) beforeApply(kind pebble.InternalKeyKind, k []byte) {
	if c == nil {
		return
	}
	if kind == pebble.InternalKeyKindRangeDelete {
		c.destroying.Add(1)
		return
	}
	_, s := c.locate(k[:len(k)-8])
	s.mu.Lock()
	s.pending++
	s.gen++
	s.mu.Unlock()
}

// Observe applies the write-CF changes of a batch that BeforeApply saw
// and that is now in the engine, and ends their pending state.
func (c *VersionCache) Observe(repr []byte) error {
	if c == nil || len(repr) <= batchrepr.HeaderLen {
		return nil
	}
	return eachWrite(repr, func(kind pebble.InternalKeyKind, k, v []byte) error {
		if kind == pebble.InternalKeyKindRangeDelete {
			c.clear()
			c.destroying.Add(-1)
			return nil
		}
		prefix := k[:len(k)-8]
		commitTS := ^bigEndianTS(k[len(k)-8:])
		h, s := c.locate(prefix)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pending--
		s.gen++
		off, ok := s.find(h, prefix)
		if !ok || commitTS < s.commitTSAt(off) {
			return nil // not cached, or not the newest record
		}
		if kind != pebble.InternalKeyKindSet {
			// The newest record was deleted (GC): what is newest now is
			// not known here.
			delete(s.index, h)
			return nil
		}
		w, err := decodeWrite(v)
		if err != nil {
			delete(s.index, h)
			return err
		}
		c.append(s, h, prefix, commitTS, &w, false)
		return nil
	})
}

// eachWrite calls fn for every write-CF point operation and every range
// deletion overlapping the write CF in repr.
func eachWrite(repr []byte, fn func(kind pebble.InternalKeyKind, k, v []byte) error) error {
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
		clear(s.index)
		s.used = [segmentsPerShard]int{}
		s.seg = 0
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
