package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// LockSet is an in-memory index of the user keys that hold a lock in the
// engine, so that a read of an unlocked key (nearly every read) skips the
// lock column family lookup.
//
// It is fed every applied write batch (Observe) after the batch is
// committed to the engine and before the batch's proposer is told. Why a
// reader may trust it:
//   - A lock added to the engine but not yet observed belongs to a
//     prewrite that has not been acknowledged, so its transaction has no
//     commit timestamp yet; that commit timestamp will be above the read
//     timestamp of any read already running, which therefore need not see
//     the lock.
//   - A lock removed from the engine (commit or rollback) is removed from
//     the set only after the removal is in the engine, so a reader never
//     skips a lock whose commit record it cannot yet see.
//
// When the set says a key may be locked, the reader looks in the engine as
// before. The index is rebuilt from the lock column family at start.
//
// The set also tracks the store's GC safe point, the other piece of
// applied state every read consults: the highest safe point any region of
// the store has recorded (PutGCSafePoint) or is about to apply
// (RaiseGCSafePoint). It only grows. A region split off a collected region
// shares its collected data, which is why the bound is per store and not
// per region.
//
// It owns the store's VersionCache (nil when there is none), which it
// feeds with every applied batch before its own locks, so that a reader
// that finds a key unlocked finds the key's commit in the cache too.
type LockSet struct {
	n  atomic.Int64
	mu sync.RWMutex
	m  map[string]struct{}

	gcSafePoint atomic.Uint64
	versions    *VersionCache
	recent      *RecentWrites
	pessimistic *PessimisticLocks
	scanned     atomic.Uint64 // keys read by Scan through Reader

	// engine is what the set was loaded from; a snapshot's locks are read
	// from it (SnapshotApplied).
	engine pebble.Reader
}

// LoadLockSet builds the set from the engine's lock column family.
func LoadLockSet(r pebble.Reader) (*LockSet, error) {
	ls := &LockSet{m: make(map[string]struct{}), engine: r}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{Prefix, lockCF}, UpperBound: []byte{Prefix, lockCF + 1}})
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		ls.m[string(it.Key()[2:])] = struct{}{}
	}
	ls.n.Store(int64(len(ls.m)))
	if err := it.Close(); err != nil {
		return nil, err
	}
	sp, err := loadGCSafePoint(r)
	if err != nil {
		return nil, err
	}
	ls.gcSafePoint.Store(sp)
	return ls, nil
}

// SetVersionCache makes c the cache of newest versions that readers from
// Reader consult. It must be called before the store applies anything.
func (ls *LockSet) SetVersionCache(c *VersionCache) { ls.versions = c }

// VersionCache returns the cache set by SetVersionCache, or nil.
func (ls *LockSet) VersionCache() *VersionCache { return ls.versions }

// SetPessimisticLocks makes p the table of in-memory pessimistic locks that
// the write functions of this package, reading through Reader, see and
// change (see PessimisticLocks). Without one, pessimistic locks go to the
// engine.
func (ls *LockSet) SetPessimisticLocks(p *PessimisticLocks) { ls.pessimistic = p }

// PessimisticLocks returns the table set by SetPessimisticLocks, or nil.
func (ls *LockSet) PessimisticLocks() *PessimisticLocks { return ls.pessimistic }

// SetRecentWrites makes rw the bound on recently applied records that
// prewrite checks of readers from Reader consult (see RecentWrites). It
// must be called before the store applies anything.
func (ls *LockSet) SetRecentWrites(rw *RecentWrites) { ls.recent = rw }

// RecentWrites returns the table set by SetRecentWrites, or nil.
func (ls *LockSet) RecentWrites() *RecentWrites { return ls.recent }

// ScannedKeys returns how many keys with committed versions Scan has read
// through the set's readers since it was loaded. The store flushes its
// memtable early only while it grows: see raftstore's memtableMaxAge.
func (ls *LockSet) ScannedKeys() uint64 { return ls.scanned.Load() }

// BeforeApply must see every batch representation Observe will see,
// before the batch commits to the engine (see VersionCache and
// RecentWrites).
func (ls *LockSet) BeforeApply(repr []byte) error {
	if (ls.versions == nil && ls.recent == nil) || len(repr) <= batchrepr.HeaderLen {
		return nil
	}
	ls.recent.startBatch()
	return eachWrite(repr, func(kind pebble.InternalKeyKind, k, _ []byte) error {
		ls.recent.beforeApply(kind, k)
		ls.versions.beforeApply(kind, k)
		return nil
	})
}

// BeforeCommit must be called with the apply batch after BeforeApply has
// seen every representation in it and before it commits: it may add the
// recent-write table's new ceiling to it (see RecentWrites).
func (ls *LockSet) BeforeCommit(ab *pebble.Batch) error { return ls.recent.BeforeCommit(ab) }

// GCSafePoint returns the store's GC safe point: versions a read below it
// would need may be gone, so such reads must fail (TooOldError).
func (ls *LockSet) GCSafePoint() uint64 { return ls.gcSafePoint.Load() }

// RaiseGCSafePoint raises the store's GC safe point to sp (a lower sp is
// ignored). The leader calls it before it proposes GC deletions at sp, so
// that no read below sp can start, or finish unnoticed (see
// CheckReadTS), while they are applied.
func (ls *LockSet) RaiseGCSafePoint(sp uint64) {
	for {
		cur := ls.gcSafePoint.Load()
		if sp <= cur || ls.gcSafePoint.CompareAndSwap(cur, sp) {
			return
		}
	}
}

// CheckReadTS returns *TooOldError when readTS is below the GC safe point.
// A reader calls it before and after it reads the engine: the second call
// catches a GC at a higher safe point that was applied during the read.
func (ls *LockSet) CheckReadTS(readTS uint64) error {
	if sp := ls.gcSafePoint.Load(); readTS < sp {
		return &TooOldError{ReadTS: readTS, SafePoint: sp}
	}
	return nil
}

// MayBeLocked reports whether key may hold a lock.
func (ls *LockSet) MayBeLocked(key []byte) bool {
	if ls.n.Load() == 0 {
		return false
	}
	ls.mu.RLock()
	_, ok := ls.m[string(key)]
	ls.mu.RUnlock()
	return ok
}

// maxLockSetScan is how many locks mayHaveLockIn looks at one by one;
// with more it answers true.
const maxLockSetScan = 64

// mayHaveLockIn reports whether a key in [start, end) may hold a lock (an
// empty end means no upper bound).
func (ls *LockSet) mayHaveLockIn(start, end []byte) bool {
	if ls.n.Load() == 0 {
		return false
	}
	ls.mu.RLock()
	defer ls.mu.RUnlock()
	if len(ls.m) > maxLockSetScan {
		return true
	}
	for k := range ls.m {
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			return true
		}
	}
	return false
}

// AfterApply records the lock puts, deletes and range deletions, and the GC
// safe point records, of an applied batch representation, and passes it
// to the version cache. It must be called after the batch is in the
// engine.
func (ls *LockSet) AfterApply(repr []byte) error {
	if len(repr) <= batchrepr.HeaderLen {
		return nil
	}
	// The cache first: once a lock leaves the set, its commit must be
	// visible to readers, in the cache as in the engine.
	if err := ls.versions.Observe(repr); err != nil {
		return err
	}
	r := batchrepr.Read(repr)
	locked := false
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if kind == pebble.InternalKeyKindRangeDelete {
			// A destroyed range (DestroyRange): its locks are gone from
			// the engine and must leave the set too, or every reader of
			// those keys would keep looking them up in the engine.
			lo, hi, ok := lockSpan(k, v)
			if !ok {
				continue
			}
			if !locked {
				ls.mu.Lock()
				locked = true
			}
			for key := range ls.m {
				if key >= lo && (hi == nil || key < *hi) {
					delete(ls.m, key)
				}
			}
			continue
		}
		if len(k) < 2 || k[0] != Prefix || (k[1] != lockCF && k[1] != gcCF) {
			continue
		}
		if k[1] == gcCF {
			if kind == pebble.InternalKeyKindSet {
				sp, err := decodeGCSafePoint(k, v)
				if err != nil {
					return err
				}
				ls.RaiseGCSafePoint(sp)
			}
			continue
		}
		if !locked {
			ls.mu.Lock()
			locked = true
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			ls.m[string(k[2:])] = struct{}{}
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
			delete(ls.m, string(k[2:]))
		}
	}
	if locked {
		ls.n.Store(int64(len(ls.m)))
		ls.mu.Unlock()
	}
	return nil
}

// lockSpan intersects the engine key range [start, end) of a range
// deletion with the lock column family and returns the user keys it
// covers, [lo, *hi) (hi nil: no upper bound); ok is false when the range
// holds no lock key.
func lockSpan(start, end []byte) (lo string, hi *string, ok bool) {
	cfLo, cfHi := []byte{Prefix, lockCF}, []byte{Prefix, lockCF + 1}
	if bytes.Compare(start, cfLo) < 0 {
		start = cfLo
	}
	if bytes.Compare(end, cfHi) > 0 {
		end = cfHi
	}
	if bytes.Compare(start, end) >= 0 {
		return "", nil, false
	}
	// Every engine key in [cfLo, cfHi) is 'z' 'l' + user key.
	lo = string(start[2:])
	if !bytes.Equal(end, cfHi) {
		h := string(end[2:])
		hi = &h
	}
	return lo, hi, true
}

// Reader wraps an engine reader so that point lookups of lock keys that
// the set knows to be absent return pebble.ErrNotFound without touching the
// engine. Every MVCC function reads locks through Get, so passing the
// wrapped reader makes reads and writes alike skip the lookup; Scan skips
// its lock iterator when the set has no lock in the range.
func (ls *LockSet) Reader(r pebble.Reader) pebble.Reader { return lockSetReader{Reader: r, ls: ls} }

type lockSetReader struct {
	pebble.Reader
	ls *LockSet
}

// versionCache lets point reads use the cache of newest versions.
func (r lockSetReader) versionCache() *VersionCache { return r.ls.versions }

// mayBeLocked lets getLock skip building the lock key (lockIndex).
func (r lockSetReader) mayBeLocked(key []byte) bool { return r.ls.MayBeLocked(key) }

// mayHaveLockIn lets Scan skip its lock iterator (lockIndex).
func (r lockSetReader) mayHaveLockIn(start, end []byte) bool { return r.ls.mayHaveLockIn(start, end) }

func (r lockSetReader) Get(key []byte) ([]byte, io.Closer, error) {
	if len(key) >= 2 && key[0] == Prefix && key[1] == lockCF && !r.ls.MayBeLocked(key[2:]) {
		return nil, nil, pebble.ErrNotFound
	}
	return r.Reader.Get(key)
}

// FlushStarting and FlushDone pass the store's flushes on to the
// recent-write table (RecentWrites.FlushStarting).
func (ls *LockSet) FlushStarting() uint64 { return ls.recent.FlushStarting() }

// FlushDone: see FlushStarting.
func (ls *LockSet) FlushDone(seq uint64) { ls.recent.FlushDone(seq) }

// SnapshotMeta is what a snapshot of this store's engine tells its
// receiver: a bound on the timestamps of its records and the store's GC
// safe point (SnapshotApplied).
func (ls *LockSet) SnapshotMeta() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), ls.recent.RecordBound())
	return binary.BigEndian.AppendUint64(b, ls.GCSafePoint())
}

// SnapshotApplied brings the set up to date after the engine spans were
// replaced by a snapshot's data, which did not pass the apply path: the
// locks in them are read again, the version cache forgets everything,
// the recent-write table's floor rises over the snapshot's records
// (persisting a ceiling in b, which the store commits before the
// snapshot counts as applied), and the GC safe point rises to the
// sender's, whose collection the data reflect. Apply path only.
func (ls *LockSet) SnapshotApplied(spans [][2][]byte, meta []byte, b *pebble.Batch) error {
	if len(meta) != 16 {
		return fmt.Errorf("mvcc: snapshot metadata of %d bytes", len(meta))
	}
	if err := ls.recent.Ingested(binary.BigEndian.Uint64(meta[:8]), b); err != nil {
		return err
	}
	ls.RaiseGCSafePoint(binary.BigEndian.Uint64(meta[8:]))
	if ls.versions != nil {
		ls.versions.clear()
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.dropLocksLocked(spans)
	for _, sp := range spans {
		lo, hi, ok := lockSpan(sp[0], sp[1])
		if !ok {
			continue
		}
		upper := []byte{Prefix, lockCF + 1}
		if hi != nil {
			upper = append([]byte{Prefix, lockCF}, *hi...)
		}
		it, err := ls.engine.NewIter(&pebble.IterOptions{LowerBound: append([]byte{Prefix, lockCF}, lo...), UpperBound: upper})
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			ls.m[string(it.Key()[2:])] = struct{}{}
		}
		if err := it.Close(); err != nil {
			return err
		}
	}
	ls.n.Store(int64(len(ls.m)))
	return nil
}

// SpansDestroyed forgets the locks of engine spans that were emptied (a
// removed replica's data) and empties the version cache.
func (ls *LockSet) SpansDestroyed(spans [][2][]byte) error {
	if ls.versions != nil {
		ls.versions.clear()
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.dropLocksLocked(spans)
	ls.n.Store(int64(len(ls.m)))
	return nil
}

// dropLocksLocked removes the set's locks in engine spans. ls.mu held.
func (ls *LockSet) dropLocksLocked(spans [][2][]byte) {
	for _, sp := range spans {
		lo, hi, ok := lockSpan(sp[0], sp[1])
		if !ok {
			continue
		}
		for key := range ls.m {
			if key >= lo && (hi == nil || key < *hi) {
				delete(ls.m, key)
			}
		}
	}
}

// RegionSpans are the engine spans that hold a data region's state: the
// MVCC records of its user keys [start, end) (EngineSpans) and the
// region's GC safe point record.
func RegionSpans(regionID uint64, start, end []byte) [][2][]byte {
	spans := EngineSpans(start, end)
	k := gcSafePointKey(regionID)
	return append(spans, [2][]byte{k, append(append([]byte(nil), k...), 0)})
}
