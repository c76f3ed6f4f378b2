package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"
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
//
// A table loaded from the engine (LoadRecentWrites) also knows a floor:
// every write-CF record the engine held when it opened has a timestamp
// below it. The apply path keeps a ceiling above every record it applies
// persisted in the same engine batch as the records (BeforeCommit), and
// the ceiling found at open is the floor. When the key's bound is below ts
// and the floor is at or below ts, no record of the key at or above ts
// exists anywhere in the engine, and the check reads nothing at all.
// Records that reach the engine other than through the apply path, the
// SSTs of a Raft snapshot the store ingests, raise the floor above
// themselves (Ingested, called through LockSet.SnapshotApplied with the
// sender's RecordBound) and the persisted ceiling with it, before the
// snapshot counts as applied.
//
// The table also knows which keys may have records in the memtables at
// all (see mayBeInMemtables): every apply batch gets a sequence number,
// each slot keeps the number of the last batch that wrote a record of a
// key hashing there, and the store reports the number its last completed
// flush covers (FlushStarting, FlushDone).
type RecentWrites struct {
	slots []atomic.Uint64
	mask  uint64
	seed  maphash.Seed

	// Memtable residency, in apply-batch sequence numbers: seq is the
	// number of the batch being applied (the last one, between batches);
	// written[i] the number of the last batch that wrote a write-CF record
	// of a key in slot i; rangeDel that of the last batch with a range
	// deletion over the write CF; flushed the number up to which every
	// batch is in the SSTs.
	written                  []atomic.Uint64
	seq, rangeDel, flushed   atomic.Uint64
	memtableSkips, fullReads atomic.Uint64

	// floor: every write-CF record the engine held at open, or that a
	// snapshot ingested since, is below it; math.MaxUint64 when unknown
	// (an engine written before ceilings were kept, or a table from
	// NewRecentWrites). Read by prewrite checks, raised by the apply path.
	floor atomic.Uint64
	// recordBound is at or above every write-CF record in the engine
	// (math.MaxUint64 when unknown): what a snapshot of this engine
	// tells its receiver (RecordBound).
	recordBound atomic.Uint64
	// keepCeiling is whether BeforeCommit persists ceilings (the floor of
	// the next open). ceiling is the persisted one; pending the highest
	// timestamp passed to beforeApply since the last BeforeCommit. Only
	// the apply path touches them.
	keepCeiling      bool
	ceiling, pending uint64
	anyPending       bool
	window           uint64 // ceilingWindow; tests make it small

	sstOnly, full, bounded atomic.Uint64
}

// ceilingWindow is how far above the highest applied timestamp a new
// ceiling is set, so that one is written about once per second of TSO
// time under a steady write load. A smaller window means more ceiling
// writes; a larger one a higher floor after a restart, which keeps the
// checks of transactions started in the first window after it on the
// SSTs.
const ceilingWindow = 1000 << logicalBits // 1 s

// The ceiling record: 'z' 't' -> 8-byte timestamp. Like the GC safe point
// record it is outside the lock, write and data families, so range
// operations on user keys never see it.
const tsCeilingCF byte = 't'

var tsCeilingKey = []byte{Prefix, tsCeilingCF}

// recentWriteSlots is the table size. A check falls back to the full view
// only when some key sharing its key's slot was written at or above its
// start ts, i.e. during the transaction's life: with this many slots that
// is rare at any write rate a node sustains.
const recentWriteSlots = 1 << 18

// NewRecentWrites returns an empty table. It must be attached (through
// LockSet.SetRecentWrites) before the store applies anything, and the KV
// engine's memtables must then be empty: an engine without a WAL opens
// with none.
//
// Its floor is unknown, so checks still read the SSTs; LoadRecentWrites
// returns a table that knows it.
func NewRecentWrites() *RecentWrites {
	rw := &RecentWrites{
		slots:   make([]atomic.Uint64, recentWriteSlots),
		written: make([]atomic.Uint64, recentWriteSlots),
		mask:    recentWriteSlots - 1,
		seed:    maphash.MakeSeed(),
		window:  ceilingWindow,
	}
	rw.floor.Store(math.MaxUint64)
	rw.recordBound.Store(math.MaxUint64)
	return rw
}

// LoadRecentWrites returns an empty table whose floor is the ceiling the
// engine r persisted, and which persists ceilings from now on (through
// BeforeCommit). An engine that holds write-CF records but no ceiling was
// written before ceilings were kept: its floor stays unknown and no
// ceiling is ever written to it, since one would not cover its older
// records. The same conditions as NewRecentWrites hold: the KV engine's
// memtables must be empty, and the table attached before the store applies
// anything.
func LoadRecentWrites(r pebble.Reader) (*RecentWrites, error) {
	rw := NewRecentWrites()
	v, closer, err := r.Get(tsCeilingKey)
	switch {
	case err == nil:
		defer closer.Close()
		if len(v) != 8 {
			return nil, fmt.Errorf("mvcc: corrupt timestamp ceiling record %x", v)
		}
		rw.ceiling = binary.BigEndian.Uint64(v)
		rw.keepCeiling = true
		rw.floor.Store(rw.ceiling)
		rw.recordBound.Store(rw.ceiling)
		return rw, nil
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, err
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{Prefix, writeCF}, UpperBound: []byte{Prefix, writeCF + 1}})
	if err != nil {
		return nil, err
	}
	empty := !it.First()
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	if empty {
		rw.keepCeiling = true
		rw.floor.Store(0)
		rw.recordBound.Store(0)
	}
	return rw, nil
}

// Floor returns the table's floor (math.MaxUint64 when unknown): every
// write-CF record the engine held when it opened is below it.
func (rw *RecentWrites) Floor() uint64 { return rw.floor.Load() }

// RecordBound returns a timestamp at or above every write-CF record in
// the engine, or math.MaxUint64 when none is known. A snapshot carries it
// to its receiver (Ingested). Safe for concurrent use.
func (rw *RecentWrites) RecordBound() uint64 {
	if rw == nil {
		return math.MaxUint64
	}
	return rw.recordBound.Load()
}

// Ingested raises the floor over the records a snapshot brought into the
// engine without passing the apply path: bound is at or above all of
// them (the sender's RecordBound). b is committed, and the engine flushed,
// before the snapshot counts as applied, so the ceiling it persists
// covers the ingested records at the next open; an unknown bound
// (math.MaxUint64) makes the floor unknown from now on, and removes the
// ceiling so that the next open knows it is unknown too. Apply path only.
func (rw *RecentWrites) Ingested(bound uint64, b *pebble.Batch) error {
	if rw == nil {
		return nil
	}
	if bound == math.MaxUint64 {
		rw.keepCeiling = false
		rw.floor.Store(math.MaxUint64)
		rw.recordBound.Store(math.MaxUint64)
		return b.Delete(tsCeilingKey, nil)
	}
	if bound > rw.floor.Load() {
		rw.floor.Store(bound)
	}
	if !rw.keepCeiling {
		return nil
	}
	if bound > rw.ceiling {
		rw.ceiling = bound
		rw.recordBound.Store(bound)
		return b.Set(tsCeilingKey, binary.BigEndian.AppendUint64(nil, bound), nil)
	}
	return nil
}

// BeforeCommit adds to ab, the apply batch whose records beforeApply has
// seen since the last call, a new ceiling when one of them reached the
// persisted one. The ceiling thus commits atomically with the records it
// covers: every state the engine can reopen in has its records below its
// ceiling.
func (rw *RecentWrites) BeforeCommit(ab *pebble.Batch) error {
	if rw == nil {
		return nil
	}
	if !rw.keepCeiling || !rw.anyPending || rw.pending < rw.ceiling {
		rw.pending, rw.anyPending = 0, false
		return nil
	}
	next := rw.pending + rw.window
	if next < rw.pending {
		next = math.MaxUint64
	}
	if err := ab.Set(tsCeilingKey, binary.BigEndian.AppendUint64(nil, next), nil); err != nil {
		return err
	}
	rw.ceiling = next
	rw.recordBound.Store(next)
	rw.pending, rw.anyPending = 0, false
	return nil
}

func (rw *RecentWrites) slotIndex(prefix []byte) uint64 {
	return maphash.Bytes(rw.seed, prefix) & rw.mask
}

func (rw *RecentWrites) slot(prefix []byte) *atomic.Uint64 {
	return &rw.slots[rw.slotIndex(prefix)]
}

// raise notes a record of prefix's key at ts, written by the current apply
// batch.
func (rw *RecentWrites) raise(prefix []byte, ts uint64) {
	i := rw.slotIndex(prefix)
	rw.written[i].Store(rw.seq.Load())
	s := &rw.slots[i]
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
	if rw == nil {
		return
	}
	if kind == pebble.InternalKeyKindRangeDelete {
		rw.rangeDel.Store(rw.seq.Load())
		return
	}
	ts := ^bigEndianTS(k[len(k)-8:])
	rw.raise(k[:len(k)-8], ts)
	rw.pending, rw.anyPending = max(rw.pending, ts), true
}

// startBatch gives the apply batch about to be seen by beforeApply its
// sequence number. Only the apply path calls it, between batches.
func (rw *RecentWrites) startBatch() {
	if rw != nil {
		rw.seq.Add(1)
	}
}

// FlushStarting returns the sequence number a KV-engine flush started now
// covers: the store calls it on its apply goroutine between two apply
// batches, right before it asks the engine to flush, so every batch up to
// the number is in the memtables that flush writes out. It hands the
// number to FlushDone once the flush has completed.
func (rw *RecentWrites) FlushStarting() uint64 {
	if rw == nil {
		return 0
	}
	return rw.seq.Load()
}

// FlushDone records that every apply batch up to seq (a FlushStarting
// result) is in the SSTs. Flushes the engine starts on its own are not
// reported; they only move records to the SSTs sooner.
func (rw *RecentWrites) FlushDone(seq uint64) {
	if rw == nil {
		return
	}
	for {
		cur := rw.flushed.Load()
		if seq <= cur || rw.flushed.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// mayBeInMemtables reports whether some memtable of the KV engine may hold
// a write-CF record of a key in slot (slotIndex), or a range deletion that covers one:
// false when the last batch that wrote a key of its slot, and the last
// batch with a range deletion over the write CF, are both covered by a
// completed flush. The KV engine has no write-ahead log, so at open its
// memtables are empty and every record since passed through the apply
// path. A read that finds false may read the SSTs alone
// (OnlyReadGuaranteedDurable) and see exactly what the full view shows,
// provided it asks again after opening its iterator (sstOnlyVersionIter):
// a batch applied in between raised the slot before it reached the engine.
func (rw *RecentWrites) mayBeInMemtables(slot uint64) bool {
	f := rw.flushed.Load()
	return rw.written[slot].Load() > f || rw.rangeDel.Load() > f
}

// sstOnlyVersionIter returns an iterator over the versions of prefix's key
// (the bounds of opts) that reads the KV engine's SSTs alone, or nil when
// the memtables may hold some of them: the version reads of a prewrite's
// existence check, and of a point read the version cache missed, then do
// without a memtable search (a skiplist of up to 64 MiB, ~20 cache
// misses, and no bloom filter).
func sstOnlyVersionIter(r pebble.Reader, prefix []byte, opts *pebble.IterOptions) *pebble.Iterator {
	db, rw, ok := liveEngine(r)
	if !ok {
		return nil
	}
	slot := rw.slotIndex(prefix)
	if rw.mayBeInMemtables(slot) {
		rw.fullReads.Add(1)
		return nil
	}
	o := *opts
	o.OnlyReadGuaranteedDurable = true
	it, err := db.NewIter(&o)
	if err != nil {
		return nil
	}
	var full *pebble.Iterator // invariants: the full view, opened before the check below
	if invariantsEnabled {
		if full, err = db.NewIter(opts); err != nil {
			panic(err)
		}
		defer full.Close()
	}
	// The iterator's view is fixed now. A batch that reached the engine
	// before that raised the slot (or the range-deletion mark) first.
	if rw.mayBeInMemtables(slot) {
		it.Close()
		rw.fullReads.Add(1)
		return nil
	}
	rw.memtableSkips.Add(1)
	if invariantsEnabled {
		checkSameVersions(prefix, it, full)
	}
	return it
}

// checkSameVersions panics unless the two iterators hold the same records
// of prefix's key; it leaves sstOnly unpositioned.
func checkSameVersions(prefix []byte, sstOnly, full *pebble.Iterator) {
	render := func(it *pebble.Iterator) (out []string) {
		for ok := it.SeekPrefixGE(appendInvertedTS(prefix, math.MaxUint64)); ok; ok = it.Next() {
			out = append(out, fmt.Sprintf("%x=%x", it.Key(), it.Value()))
		}
		if err := it.Error(); err != nil {
			panic(err)
		}
		return out
	}
	a, b := render(sstOnly), render(full)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		panic(fmt.Sprintf("mvcc: %q was judged absent from the memtables, but the SSTs hold %v and the full view %v", prefix, a, b))
	}
}

// RecentWritesStats counts newer-write checks by the view that answered.
type RecentWritesStats struct {
	// Bounded checks found no newer record without reading the engine
	// (the key's bound and the floor were below the timestamp); SSTOnly
	// checks found none without reading the memtables; Full checks read
	// them (the bound was too high, or the SSTs held a record at or above
	// the timestamp).
	Bounded, SSTOnly, Full uint64
	// MemtableSkips counts version reads (after a version cache miss) that
	// read the SSTs alone because no memtable could hold the key;
	// FullReads those that read the memtables too.
	MemtableSkips, FullReads uint64
}

// Stats returns the counters (zero for a nil table).
func (rw *RecentWrites) Stats() RecentWritesStats {
	if rw == nil {
		return RecentWritesStats{}
	}
	return RecentWritesStats{Bounded: rw.bounded.Load(), SSTOnly: rw.sstOnly.Load(), Full: rw.full.Load(),
		MemtableSkips: rw.memtableSkips.Load(), FullReads: rw.fullReads.Load()}
}

// liveEngine returns the engine and the recent-write table behind a
// reader of the live engine (LockSet.Reader over the DB itself). Only the
// live engine: a batch or snapshot view may hold or lack records the
// table does not describe, and OnlyReadGuaranteedDurable needs the DB.
func liveEngine(r pebble.Reader) (*pebble.DB, *RecentWrites, bool) {
	lr, ok := r.(lockSetReader)
	if !ok || lr.ls.recent == nil {
		return nil, nil, false
	}
	db, ok := lr.Reader.(*pebble.DB)
	return db, lr.ls.recent, ok
}

// noRecordSince reports whether key certainly has no write record at or
// above ts, reading nothing (the bound and the floor rule one out) or only
// the KV engine's SSTs. false means "unknown": the caller reads the full
// view. Callers ask only after the version cache missed the key (a hit
// answers without any engine read).
func noRecordSince(r pebble.Reader, key []byte, ts uint64) bool {
	db, rw, ok := liveEngine(r)
	if !ok {
		return false
	}
	lr := r.(lockSetReader)
	var buf [64]byte
	prefix := appendEscaped(append(buf[:0], Prefix, writeCF), key)
	if rw.bound(prefix) >= ts {
		rw.full.Add(1)
		return false
	}
	if rw.floor.Load() <= ts {
		// Records applied since open are at or below the bound, older
		// ones below the floor.
		rw.bounded.Add(1)
		if invariantsEnabled {
			checkNoRecordSince(lr, prefix, ts)
		}
		return true
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
