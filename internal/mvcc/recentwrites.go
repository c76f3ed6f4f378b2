package mvcc

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// RecentWrites bounds, for every user key, the timestamps of the write-CF
// records the store has applied since its KV engine opened: Bound(key) is
// at or above the timestamp of each such record of key. It is a table of
// slots indexed by a hash of the key, each holding the highest timestamp
// of any record applied to a key that hashes there, so keys sharing a slot
// only make the bound higher (looser), never lower.
//
// Why: a prewrite checks each key for a record at or above its start ts
// (checkNewerWrites). For a key the version cache does not hold (sysbench
// oltp_update_index's new index entry, oltp_insert's new row) that check
// seeks the memtables, which have no bloom filters: a 64 MiB skiplist
// search is ~20 cache misses, and profiles of update_index put the
// memtable seeks at ~19% of the node's CPU. The SSTs below are guarded by
// bloom filters and cheap to rule out. The KV engine has no write-ahead
// log, so its memtables hold only what the apply path wrote since the
// engine opened, and every such record passed through BeforeApply. So when
// Bound(key) is below the start ts, no memtable holds a record of key at
// or above it, and the check can read the SSTs alone
// (pebble.IterOptions.OnlyReadGuaranteedDurable, which skips memtables on
// an engine without a WAL).
//
// Soundness rests on three facts: BeforeApply raises the slots of a batch's
// keys before the batch reaches the engine; slots never go down; and the
// SST-only view can hold records the full view has deleted (a memtable
// tombstone hides them) but never lacks one at or above the start ts when
// the bound is below it. So only a "no such record" answer from the SSTs
// is trusted; anything else is re-checked on the full view.
type RecentWrites struct {
	slots []atomic.Uint64
	mask  uint64
	seed  maphash.Seed

	sstOnly, full atomic.Uint64
}

// recentWriteSlots is the table size. A check falls back to the full view
// only when some key sharing its key's slot was written at or above its
// start ts, i.e. during the transaction's life: with this many slots that
// is rare at any write rate a node sustains.
const recentWriteSlots = 1 << 18

// NewRecentWrites returns an empty table. It must be attached (through
// LockSet.SetRecentWrites) before the store applies anything, and the KV
// engine's memtables must then be empty: an engine without a WAL opens
// with none.
func NewRecentWrites() *RecentWrites {
	return &RecentWrites{
		slots: make([]atomic.Uint64, recentWriteSlots),
		mask:  recentWriteSlots - 1,
		seed:  maphash.MakeSeed(),
	}
}

func (rw *RecentWrites) slot(prefix []byte) *atomic.Uint64 {
	return &rw.slots[maphash.Bytes(rw.seed, prefix)&rw.mask]
}

// raise notes a record of prefix's key at ts.
func (rw *RecentWrites) raise(prefix []byte, ts uint64) {
	s := rw.slot(prefix)
	for {
		cur := s.Load()
		if ts <= cur || s.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// bound is at or above the timestamp of every record of prefix's key
// applied since the engine opened.
func (rw *RecentWrites) bound(prefix []byte) uint64 { return rw.slot(prefix).Load() }

// beforeApply raises the bound of the key of one write-CF record (a put
// or a deletion) of a batch about to be applied; LockSet.BeforeApply calls
// it for every record before the batch commits to the engine. A range
// deletion raises nothing: it only hides records, which the SST-only view
// may still show (and then the full view decides).
func (rw *RecentWrites) beforeApply(kind pebble.InternalKeyKind, k []byte) {
	if rw == nil || kind == pebble.InternalKeyKindRangeDelete {
		return
	}
	rw.raise(k[:len(k)-8], ^bigEndianTS(k[len(k)-8:]))
}

// RecentWritesStats counts newer-write checks by the view that answered.
type RecentWritesStats struct {
	// SSTOnly checks found no newer record without reading the memtables;
	// Full checks read them (the bound was too high, or the SSTs held a
	// record at or above the start ts).
	SSTOnly, Full uint64
}

// Stats returns the counters (zero for a nil table).
func (rw *RecentWrites) Stats() RecentWritesStats {
	if rw == nil {
		return RecentWritesStats{}
	}
	return RecentWritesStats{SSTOnly: rw.sstOnly.Load(), Full: rw.full.Load()}
}

// noRecordSince reports whether key certainly has no write record at or
// above ts, reading only the KV engine's SSTs. false means "unknown": the
// caller reads the full view. Callers ask only after the version cache
// missed the key (a hit answers without any engine read).
func noRecordSince(r pebble.Reader, key []byte, ts uint64) bool {
	lr, ok := r.(lockSetReader)
	if !ok || lr.ls.recent == nil {
		return false
	}
	db, ok := lr.Reader.(*pebble.DB) // OnlyReadGuaranteedDurable needs the DB itself
	if !ok {
		return false
	}
	rw := lr.ls.recent
	var buf [64]byte
	prefix := appendEscaped(append(buf[:0], Prefix, writeCF), key)
	if rw.bound(prefix) >= ts {
		rw.full.Add(1)
		return false
	}
	absent := sstNewestBelow(db, prefix, ts)
	// An apply that raced the read raised the bound before its batch
	// reached the engine; then the full view decides.
	if absent && rw.bound(prefix) >= ts {
		absent = false
	}
	if !absent {
		rw.full.Add(1)
		return false
	}
	rw.sstOnly.Add(1)
	if invariantsEnabled {
		checkNoRecordSince(lr, prefix, ts)
	}
	return true
}

// sstNewestBelow reports whether the SSTs hold no record of prefix's key
// at or above ts (false also on a read error: the caller reads again).
func sstNewestBelow(db *pebble.DB, stackPrefix []byte, ts uint64) bool {
	prefix := append([]byte(nil), stackPrefix...)
	it, err := db.NewIter(&pebble.IterOptions{
		LowerBound:                prefix,
		UpperBound:                versionPrefixEnd(prefix),
		OnlyReadGuaranteedDurable: true,
	})
	if err != nil {
		return false
	}
	defer it.Close()
	if !it.SeekPrefixGE(appendInvertedTS(prefix, math.MaxUint64)) {
		return it.Error() == nil
	}
	k := it.Key()
	return len(k) == len(prefix)+8 && ^binary.BigEndian.Uint64(k[len(prefix):]) < ts
}
