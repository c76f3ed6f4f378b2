package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/kvpb"
)

// scanSlab is how many result pairs a scan allocates at once.
const scanSlab = 128

// arenaCopy copies v into arena (starting a new one of size bytes, or
// len(v) if more, when full) and returns the copy, which stays valid when
// the arena is later replaced.
func arenaCopy(arena, v []byte, size int) ([]byte, []byte) {
	if cap(arena)-len(arena) < len(v) {
		arena = make([]byte, 0, max(size, len(v)))
	}
	n := len(arena)
	arena = append(arena, v...)
	return arena[n:len(arena):len(arena)], arena
}

// arenaSize is the size of a scan's next arena. The first one is sized for
// the pairs the scan may still return, at the size of the pair at hand,
// up to 32 KiB: a scan whose limit fits its range (the SQL layer's
// kv.SizedIterer) then copies its result into one allocation of about its
// size. Later arenas are 16 KiB.
func arenaSize(arena []byte, pairBytes, pairsLeft int) int {
	if arena != nil || pairsLeft <= 0 {
		return 16 << 10
	}
	return min(pairBytes*pairsLeft, 32<<10)
}

// maxVersionSteps is how many versions a scan steps over with Next before
// it seeks instead (seeks cost several times a Next).
const maxVersionSteps = 8

// getLock returns the lock on key, or nil.
func getLock(r pebble.Reader, key []byte) (*lock, error) {
	if li, ok := r.(lockIndex); ok && !li.mayBeLocked(key) {
		return nil, nil // without building the lock key
	}
	v, closer, err := r.Get(lockKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeLock(v)
}

// getWriteAt returns the write record of key at exactly commitTS, if any.
func getWriteAt(r pebble.Reader, key []byte, commitTS uint64) (*write, error) {
	if vc := versionCacheOf(r); vc != nil {
		// Usually commitTS is above every record of the key (a new
		// commit), which the key's newest record shows.
		if e, ok, _ := vc.lookup(versionPrefix(writeCF, key)); ok {
			switch {
			case e.absent || e.commitTS < commitTS:
				return nil, nil
			case e.commitTS == commitTS:
				w := e.w
				w.value = slices.Clone(w.value)
				return &w, nil
			}
		}
	}
	if noRecordSince(r, key, commitTS) {
		return nil, nil // and the memtables were not searched
	}
	v, closer, err := r.Get(writeKey(key, commitTS))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	w, err := decodeWrite(v)
	if err != nil {
		return nil, err
	}
	w.value = slices.Clone(w.value)
	return &w, nil
}

// forEachVersion calls fn with key's write records whose commitTS <= maxTS,
// newest first, until fn returns false. w.value is valid only during fn.
//
// When r carries a VersionCache (LockSet.Reader), the newest record comes
// from the cache if it is there; a miss reads the newest record from the
// engine (seeking from the top, then stepping down to maxTS) and offers it
// to the cache.
func forEachVersion(r pebble.Reader, key []byte, maxTS uint64, fn func(commitTS uint64, w *write) (more bool, err error)) error {
	_, err := forEachVersionSince(r, key, maxTS, 0, fn)
	return err
}

// forEachVersionSince is forEachVersion for a caller that looks only for
// records at or above minTS (0: any). When the cache does not hold the key
// and the SSTs alone show it has no such record (noRecordSince), it calls
// fn for nothing and returns none = true, without searching the memtables.
func forEachVersionSince(r pebble.Reader, key []byte, maxTS, minTS uint64, fn func(commitTS uint64, w *write) (more bool, err error)) (none bool, err error) {
	return forEachVersionCaching(r, key, maxTS, minTS, true, fn)
}

// forEachVersionCaching is forEachVersionSince; with cacheAbsent false, a
// key found to have no record at all is not entered in the cache as such.
func forEachVersionCaching(r pebble.Reader, key []byte, maxTS, minTS uint64, cacheAbsent bool, fn func(commitTS uint64, w *write) (more bool, err error)) (none bool, err error) {
	gen := noFill
	cached := false
	vc := versionCacheOf(r)
	if vc != nil {
		// The cache answers most calls: its lookup takes the prefix from
		// the stack; the engine gets a copy on the heap.
		var buf [64]byte
		prefix := appendEscaped(append(buf[:0], Prefix, writeCF), key)
		e, ok, g := vc.lookup(prefix)
		if ok && e.absent {
			return false, nil
		}
		cached = ok
		if ok {
			commitTS, w := e.commitTS, e.w
			if invariantsEnabled {
				checkCachedVersion(r, prefix, commitTS, &w)
			}
			if commitTS <= maxTS {
				more, err := fn(commitTS, &w)
				if err != nil || !more || commitTS == 0 {
					return false, err
				}
				// The rest is below the newest record: the engine's.
				maxTS = commitTS - 1
			}
		}
		gen = g
	}
	if minTS > 0 && !cached && noRecordSince(r, key, minTS) {
		return true, nil
	}
	prefix := versionPrefix(writeCF, key)
	opts := pebble.IterOptions{LowerBound: prefix, UpperBound: versionPrefixEnd(prefix)}
	it := sstOnlyVersionIter(r, prefix, &opts)
	if it == nil {
		if it, err = r.NewIter(&opts); err != nil {
			return false, err
		}
	}
	// SeekPrefixGE: the engine's comparer splits off the timestamp, so
	// Pebble consults prefix bloom filters and skips SSTs without key.
	var valid bool
	if gen == noFill {
		valid = it.SeekPrefixGE(appendInvertedTS(prefix, maxTS))
	} else if valid = it.SeekPrefixGE(appendInvertedTS(prefix, math.MaxUint64)); !valid && it.Error() == nil {
		if cacheAbsent {
			vc.fillAbsent(prefix, gen)
		}
	} else if valid {
		// The newest record, for the cache; then down to maxTS (usually
		// there already), seeking when many versions are above it.
		w, err := decodeWrite(it.Value())
		if err != nil {
			it.Close()
			return false, err
		}
		vc.fill(prefix, gen, ^bigEndianTS(it.Key()[len(prefix):]), &w)
		for steps := 0; valid && ^bigEndianTS(it.Key()[len(prefix):]) > maxTS; steps++ {
			if steps == maxVersionSteps {
				valid = it.SeekPrefixGE(appendInvertedTS(prefix, maxTS))
				break
			}
			valid = it.Next()
		}
	}
	for ; valid; valid = it.Next() {
		k := it.Key()
		commitTS := ^bigEndianTS(k[len(prefix):])
		w, err := decodeWrite(it.Value())
		if err != nil {
			it.Close()
			return false, err
		}
		more, err := fn(commitTS, &w)
		if err != nil || !more {
			it.Close()
			return false, err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return false, err
	}
	return false, it.Close()
}

// checkCachedVersion panics when a cached newest record of a key is
// contradicted by the engine (invariants builds only). The engine may hold
// a newer record, committed after the lookup; it may not hold an older
// newest one, or a different record at the same commit ts.
func checkCachedVersion(r pebble.Reader, prefix []byte, commitTS uint64, cw *write) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: versionPrefixEnd(prefix)})
	if err != nil {
		panic(err)
	}
	defer it.Close()
	if !it.SeekPrefixGE(appendInvertedTS(prefix, math.MaxUint64)) {
		panic(fmt.Sprintf("mvcc: version cache holds %q@%d, the engine nothing", prefix, commitTS))
	}
	ts := ^bigEndianTS(it.Key()[len(prefix):])
	if ts < commitTS {
		panic(fmt.Sprintf("mvcc: version cache holds %q@%d, the engine's newest is @%d", prefix, commitTS, ts))
	}
	if ts == commitTS {
		w, err := decodeWrite(it.Value())
		if err != nil {
			panic(err)
		}
		if w.kind != cw.kind || w.startTS != cw.startTS || w.hasValue != cw.hasValue ||
			w.overlappedRollback != cw.overlappedRollback || !bytes.Equal(w.value, cw.value) {
			panic(fmt.Sprintf("mvcc: version cache record of %q@%d differs from the engine's", prefix, commitTS))
		}
	}
}

// checkNoRecordSince panics when the full view of the engine holds a
// record of prefix's key at or above ts while the key's recent-write bound
// is below ts (invariants builds only): every such record passed
// BeforeApply, which raised the bound first.
func checkNoRecordSince(r pebble.Reader, stackPrefix []byte, ts uint64) {
	lr := r.(lockSetReader)
	prefix := append([]byte(nil), stackPrefix...)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: versionPrefixEnd(prefix)})
	if err != nil {
		panic(err)
	}
	defer it.Close()
	if !it.SeekPrefixGE(appendInvertedTS(prefix, math.MaxUint64)) {
		return
	}
	newest := ^bigEndianTS(it.Key()[len(prefix):])
	if newest >= ts && lr.ls.recent.bound(prefix) < ts {
		panic(fmt.Sprintf("mvcc: %q has a record @%d, yet its recent-write bound %d is below %d",
			prefix, newest, lr.ls.recent.bound(prefix), ts))
	}
}

func bigEndianTS(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// putValue returns a copy of the value a put record stands for.
func putValue(r pebble.Reader, key []byte, w *write) ([]byte, error) {
	if w.hasValue && w.owned {
		return w.value, nil
	}
	if w.hasValue {
		return append([]byte{}, w.value...), nil
	}
	v, closer, err := r.Get(dataKey(key, w.startTS))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errors.New("mvcc: committed value missing from the data column family")
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// latestValue returns the value of key visible at readTS, ignoring locks.
func latestValue(r pebble.Reader, key []byte, readTS uint64) (value []byte, found bool, err error) {
	return latestValueCaching(r, key, readTS, true)
}

// latestValueCaching is latestValue; cacheAbsent as in forEachVersionCaching.
func latestValueCaching(r pebble.Reader, key []byte, readTS uint64, cacheAbsent bool) (value []byte, found bool, err error) {
	_, err = forEachVersionCaching(r, key, readTS, 0, cacheAbsent, func(_ uint64, w *write) (bool, error) {
		switch w.kind {
		case writePut:
			v, err := putValue(r, key, w)
			value, found = v, err == nil
			return false, err
		case writeDelete:
			return false, nil
		}
		return true, nil // Lock and Rollback records do not change the value
	})
	return value, found, err
}

// commitState is what the write CF says about one transaction on one key.
type commitState int

const (
	stateUnknown    commitState = iota // no record: never committed nor rolled back here
	stateCommitted                     // a commit record of the txn exists
	stateRolledBack                    // a rollback record (or overlapped-rollback flag) exists
)

// txnRecord looks for startTS's commit or rollback record on key. Commit
// records have commitTS > startTS and a rollback sits at exactly startTS, so
// only versions at or above startTS are examined.
func txnRecord(r pebble.Reader, key []byte, startTS uint64) (state commitState, commitTS uint64, err error) {
	err = forEachVersion(r, key, math.MaxUint64, func(ts uint64, w *write) (bool, error) {
		if ts < startTS {
			return false, nil
		}
		if w.startTS == startTS {
			if w.kind == writeRollback {
				state = stateRolledBack
			} else {
				state, commitTS = stateCommitted, ts
			}
			return false, nil
		}
		if ts == startTS && w.overlappedRollback {
			state = stateRolledBack
			return false, nil
		}
		return true, nil
	})
	return state, commitTS, err
}

// lockBlocksRead reports whether lock l on a key hides from a reader at
// readTS whether the key's value changes at or below readTS.
func lockBlocksRead(l *lock, readTS uint64, bypassLocks []uint64) bool {
	switch {
	case l.startTS > readTS:
		return false // commits above its start ts: invisible at readTS anyway
	case l.typ == kvpb.Op_PessimisticLock, l.typ == kvpb.Op_Lock:
		return false // commits no value change
	case l.minCommitTS > readTS:
		return false // Commit refuses commit ts below minCommitTS
	case slices.Contains(bypassLocks, l.startTS):
		return false // the reader knows this txn committed above readTS or rolled back
	}
	return true
}

// Get returns the value of key visible at readTS.
//
// A Put or Del lock of a transaction that started at or below readTS (and may
// therefore commit at or below it) makes the read fail with *LockedError,
// unless its min commit ts is above readTS or its start ts is in bypassLocks
// (transactions the reader already found rolled back, committed above
// readTS, or pushed above readTS by CheckTxnStatus). Pessimistic and Lock-type
// locks never block reads: committing them changes no value. The returned
// value is a copy.
func Get(r pebble.Reader, key []byte, readTS uint64, bypassLocks []uint64) (value []byte, found bool, err error) {
	return get(r, key, readTS, bypassLocks, true)
}

// BatchGetKey is Get for one key of a batch read, which does not enter
// in the version cache that a key has no record. Batch reads are mostly
// the uniqueness checks of multi-row INSERTs (a bulk load), of keys that
// have none and are about to be written: such an entry would be replaced
// by the insert's own commit at once (Observe updates the entries of
// cached keys, and only those), so a load would push out the entries
// point reads use, and the index of a cache churned that way makes
// every lookup's probe a cache miss (a profile of sysbench's prepare put
// the cache's map probes at 10% of the node's CPU).
func BatchGetKey(r pebble.Reader, key []byte, readTS uint64, bypassLocks []uint64) (value []byte, found bool, err error) {
	return get(r, key, readTS, bypassLocks, false)
}

func get(r pebble.Reader, key []byte, readTS uint64, bypassLocks []uint64, cacheAbsent bool) (value []byte, found bool, err error) {
	l, err := getLock(r, key)
	if err != nil {
		return nil, false, err
	}
	if l != nil && lockBlocksRead(l, readTS, bypassLocks) {
		return nil, false, &LockedError{Lock: l.info(slices.Clone(key))}
	}
	return latestValueCaching(r, key, readTS, cacheAbsent)
}

// Scan returns up to limit (all when limit <= 0) key-value pairs visible at
// readTS in [start, end), in ascending key order, or descending when reverse.
// An empty end means no upper bound. A lock that blocks the read (see Get) on
// a key the scan reaches fails the whole scan with *LockedError.
//
// Keys and inline values of the result share a few arena allocations.
func Scan(r pebble.Reader, start, end []byte, limit int, readTS uint64, reverse bool) ([]*kvpb.KvPair, error) {
	var (
		pairs []*kvpb.KvPair
		slab  []kvpb.KvPair // pairs are carved from slabs, not allocated one by one
		arena []byte        // keys and values are copied into shared arenas
	)
	if limit > 0 {
		pairs = make([]*kvpb.KvPair, 0, min(limit, scanSlab))
	}
	err := ScanFunc(r, start, end, limit, readTS, reverse, func(key, value []byte) error {
		if len(slab) == 0 {
			slab = make([]kvpb.KvPair, min(max(limit-len(pairs), 1), scanSlab))
		}
		kv := &slab[0]
		slab = slab[1:]
		size := arenaSize(arena, len(key)+len(value), limit-len(pairs))
		kv.Value, arena = arenaCopy(arena, value, size)
		kv.Key, arena = arenaCopy(arena, key, size)
		pairs = append(pairs, kv)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pairs, nil
}

// ScanFunc is Scan handing each pair to fn as it is read instead of
// collecting them: key and value are only valid during the call (they
// point into the scan's buffers and the engine's blocks), so a caller that
// keeps them copies them. fn returning an error ends the scan with that
// error. A blocking lock ends it with *LockedError after fn has seen the
// pairs before the lock (which are good: their keys were not locked).
//
// The scan walks one iterator over the write CF (forward: forwardScan
// steps from key to key; reverse: it seeks), merged with one iterator over
// the lock CF of the same range. The
// lock iterator is opened first: see "Reading the live engine" in the
// package documentation. A reader from LockSet.Reader skips it when the set
// knows that no key of the range holds a lock (the common case: one-phase
// commits write no locks), which saves a seek per scan.
func ScanFunc(r pebble.Reader, start, end []byte, limit int, readTS uint64, reverse bool, fn func(key, value []byte) error) error {
	return scanFunc(r, start, end, limit, readTS, reverse, fn, nil)
}

// ScanValues is ScanFunc for a caller that seldom looks at the keys (an
// aggregation such as COUNT(*) or SUM(col) GROUP BY col over a table):
// fn gets each visible value and a ScanKey, whose Key unescapes the
// record's user key only when asked (ScanFunc does it for every pair).
// Locks and versions are honoured exactly as by ScanFunc.
func ScanValues(r pebble.Reader, start, end []byte, limit int, readTS uint64, reverse bool, fn func(k *ScanKey, value []byte) error) error {
	return scanFunc(r, start, end, limit, readTS, reverse, nil, fn)
}

// RangeScan reads several ranges of one request, one after the other,
// through one pair of iterators whose bounds move from range to range,
// instead of opening them for each range (a seek to a range in an open
// iterator costs a fraction of opening one): an index join's lookups send
// hundreds of small ranges in a request. Its scans behave as ScanFunc and
// ScanValues do on each range, at the view of the engine OpenRanges took:
// as for ScanFunc, it consults the lock set (or opens the lock iterator)
// for every range before it opens the write iterator. It is used by one
// goroutine.
type RangeScan struct {
	r      pebble.Reader
	ranges [][2][]byte
	locked []bool // per range: a key of it may hold a lock
	wIt    *pebble.Iterator
	lIt    *pebble.Iterator // nil: no range may hold a lock
}

// OpenRanges prepares the scans of ranges (ascending, disjoint; an empty
// end is no upper bound). The caller closes it.
func OpenRanges(r pebble.Reader, ranges [][2][]byte) (*RangeScan, error) {
	m := &RangeScan{r: r, ranges: ranges, locked: make([]bool, len(ranges))}
	if len(ranges) == 0 {
		return m, nil
	}
	li, indexed := r.(lockIndex)
	var lLo, lHi []byte
	for i, rg := range ranges {
		if indexed && !li.mayHaveLockIn(rg[0], rg[1]) {
			continue
		}
		m.locked[i] = true
		lo, hi := cfBounds(lockCF, rg[0], rg[1])
		if lLo == nil {
			lLo = lo
		}
		lHi = hi
	}
	var err error
	if lLo != nil {
		if m.lIt, err = r.NewIter(&pebble.IterOptions{LowerBound: lLo, UpperBound: lHi}); err != nil {
			return nil, err
		}
	}
	wLo, _ := cfBounds(writeCF, ranges[0][0], ranges[0][1])
	_, wHi := cfBounds(writeCF, ranges[len(ranges)-1][0], ranges[len(ranges)-1][1])
	if m.wIt, err = r.NewIter(&pebble.IterOptions{LowerBound: wLo, UpperBound: wHi}); err != nil {
		if m.lIt != nil {
			m.lIt.Close()
		}
		return nil, err
	}
	return m, nil
}

// ScanFunc is ScanFunc over range i.
func (m *RangeScan) ScanFunc(i int, readTS uint64, reverse bool, fn func(key, value []byte) error) error {
	return m.scan(i, readTS, reverse, fn, nil)
}

// ScanValues is ScanValues over range i.
func (m *RangeScan) ScanValues(i int, readTS uint64, reverse bool, fn func(k *ScanKey, value []byte) error) error {
	return m.scan(i, readTS, reverse, nil, fn)
}

func (m *RangeScan) scan(i int, readTS uint64, reverse bool, fn func(key, value []byte) error, vfn func(k *ScanKey, value []byte) error) error {
	start, end := m.ranges[i][0], m.ranges[i][1]
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil
	}
	m.wIt.SetBounds(cfBounds(writeCF, start, end))
	var lIt *pebble.Iterator
	if m.locked[i] {
		lIt = m.lIt
		lIt.SetBounds(cfBounds(lockCF, start, end))
	}
	return scanIters(m.r, m.wIt, lIt, 0, readTS, reverse, fn, vfn)
}

// Close releases the iterators.
func (m *RangeScan) Close() {
	if m.wIt != nil {
		m.wIt.Close()
	}
	if m.lIt != nil {
		m.lIt.Close()
	}
}

// ScanKey is the key of the pair a ScanValues callback is called with.
type ScanKey struct {
	it      *pebble.Iterator
	buf     []byte
	decoded bool // buf holds the user key
}

// Key returns the user key of the pair, valid only during the callback.
func (k *ScanKey) Key() ([]byte, error) {
	if !k.decoded {
		var err error
		if k.buf, _, err = appendWriteKeyUserKey(k.buf[:0], k.it.Key()); err != nil {
			return nil, err
		}
		k.decoded = true
	}
	return k.buf, nil
}

// scanFunc is ScanFunc (fn) or ScanValues (vfn).
func scanFunc(r pebble.Reader, start, end []byte, limit int, readTS uint64, reverse bool, fn func(key, value []byte) error, vfn func(k *ScanKey, value []byte) error) error {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil
	}
	// Locks before write records: opened the other way round, a commit
	// applied between the two opens is missed by both iterators (the write
	// iterator predates its commit record, the lock iterator postdates its
	// lock), and the scan returns the key's previous value although the
	// commit is at or below readTS. Consulting the lock set instead of
	// opening the lock iterator is the same view, taken at the same point.
	var lIt *pebble.Iterator
	var err error
	if li, ok := r.(lockIndex); !ok || li.mayHaveLockIn(start, end) {
		lLo, lHi := cfBounds(lockCF, start, end)
		if lIt, err = r.NewIter(&pebble.IterOptions{LowerBound: lLo, UpperBound: lHi}); err != nil {
			return err
		}
		defer lIt.Close()
	}
	wLo, wHi := cfBounds(writeCF, start, end)
	wIt, err := r.NewIter(&pebble.IterOptions{LowerBound: wLo, UpperBound: wHi})
	if err != nil {
		return err
	}
	defer wIt.Close()
	return scanIters(r, wIt, lIt, limit, readTS, reverse, fn, vfn)
}

// scanIters is scanFunc over the iterators it opened, bounded to its range
// (lIt nil: no key of the range holds a lock). A forward scan is
// forwardScan's; a reverse one is scanReverse's.
func scanIters(r pebble.Reader, wIt, lIt *pebble.Iterator, limit int, readTS uint64, reverse bool, fn func(key, value []byte) error, vfn func(k *ScanKey, value []byte) error) error {
	var visited uint64 // keys with write records: LockSet.ScannedKeys
	var err error
	if reverse {
		visited, err = scanReverse(r, wIt, lIt, limit, readTS, fn, vfn)
	} else {
		s := forwardScan{r: r, wIt: wIt, lIt: lIt, readTS: readTS, fn: fn, vfn: vfn}
		if vfn != nil {
			s.sk = &ScanKey{it: wIt}
		}
		err = s.run(limit)
		visited = s.visited
	}
	if lr, ok := r.(lockSetReader); ok {
		lr.ls.scanned.Add(visited)
	}
	return err
}

// scanReverse is scanIters going backwards: it walks the keys from the
// last, merging the lock iterator's keys with the write iterator's
// (decoded), and seeks to each key's newest version at or below readTS.
func scanReverse(r pebble.Reader, wIt, lIt *pebble.Iterator, limit int, readTS uint64, fn func(key, value []byte) error, vfn func(k *ScanKey, value []byte) error) (visited uint64, err error) {
	wValid := wIt.Last()
	lValid := lIt != nil && lIt.Last()
	var (
		found     int    // pairs handed to fn
		keyBuf    []byte // the user key under the write iterator
		prefixBuf []byte
	)
	// Without a lock iterator the user key is decoded only for the keys
	// whose version is returned: a scan over many deleted keys (a queue
	// table's consumed head) skips them without it.
	lazyKey := lIt == nil
	var sk *ScanKey // ScanValues only: ScanFunc allocates none
	if vfn != nil {
		sk = &ScanKey{it: wIt}
	}
	for (limit <= 0 || found < limit) && (wValid || lValid) {
		var wKey []byte
		if wValid && !lazyKey {
			if keyBuf, _, err = appendWriteKeyUserKey(keyBuf[:0], wIt.Key()); err != nil {
				return visited, err
			}
			wKey = keyBuf
		}
		var lKey []byte
		if lValid {
			lKey = lIt.Key()[2:]
		}
		cur := wKey
		if !lazyKey && (!wValid || (lValid && bytes.Compare(lKey, wKey) > 0)) {
			cur = slices.Clone(lKey)
		}

		if lValid && bytes.Equal(lKey, cur) {
			l, err := decodeLock(lIt.Value())
			if err != nil {
				return visited, err
			}
			if lockBlocksRead(l, readTS, nil) {
				return visited, &LockedError{Lock: l.info(slices.Clone(cur))}
			}
			lValid = lIt.Prev()
		}
		if !lazyKey && (!wValid || !bytes.Equal(wKey, cur)) {
			continue // a lock on a key without committed versions
		}
		visited++

		// Seek to cur's newest version at or below readTS. The prefix (the
		// write key without its timestamp) is copied into one scratch
		// buffer for the whole scan.
		wk := wIt.Key()
		if len(wk) < minWriteKeyLen {
			return visited, fmt.Errorf("mvcc: %q is not a write key", wk)
		}
		prefixBuf = append(prefixBuf[:0], wk[:len(wk)-8]...)
		prefix := prefixBuf
		w, put, _, err := visiblePut(wIt, prefix, wIt.SeekGE(appendInvertedTS(prefix, readTS)))
		if err != nil {
			return visited, err
		}
		if put {
			// A value in the data CF is read by its key.
			if lazyKey && (vfn == nil || !w.hasValue) {
				if keyBuf, _, err = appendWriteKeyUserKey(keyBuf[:0], wIt.Key()); err != nil {
					return visited, err
				}
				cur = keyBuf
			}
			value := w.value
			if !w.hasValue {
				if value, err = putValue(r, cur, &w); err != nil {
					return visited, err
				}
			}
			found++
			if vfn != nil {
				// cur is nil when not decoded: the key under wIt then.
				if cur != nil {
					sk.buf, sk.decoded = cur, true
				} else {
					sk.buf, sk.decoded = keyBuf[:0], false
				}
				err = vfn(sk, value)
				keyBuf = sk.buf[:0]
			} else {
				err = fn(cur, value)
			}
			if err != nil {
				return visited, err
			}
		}
		if err := wIt.Error(); err != nil {
			return visited, err
		}
		wValid = wIt.SeekLT(prefix)
	}
	if err := wIt.Error(); err != nil {
		return visited, err
	}
	if lIt != nil {
		if err := lIt.Error(); err != nil {
			return visited, err
		}
	}
	return visited, nil
}

// lockIndex is implemented by readers that know which keys may hold a
// lock (LockSet.Reader).
type lockIndex interface {
	mayHaveLockIn(start, end []byte) bool
	mayBeLocked(key []byte) bool
}

// ScanLocks returns up to limit (all when limit <= 0) locks in [start, end)
// whose start ts is at or below maxTS, in key order, the engine's and those
// of the reader's in-memory pessimistic locks (PessimisticLocks). An empty
// end means no upper bound. Lock resolution uses it to find a transaction's
// locks when their keys are not known.
func ScanLocks(r pebble.Reader, start, end []byte, maxTS uint64, limit int) ([]*kvpb.LockInfo, error) {
	mem := pessimisticLocksOf(r).scan(start, end, maxTS)
	lo, hi := cfBounds(lockCF, start, end)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var locks []*kvpb.LockInfo
	for valid := it.First(); valid && (limit <= 0 || len(locks) < limit+len(mem)); valid = it.Next() {
		l, err := decodeLock(it.Value())
		if err != nil {
			return nil, err
		}
		if l.startTS <= maxTS {
			locks = append(locks, l.info(slices.Clone(it.Key()[2:])))
		}
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if len(mem) > 0 {
		locks = append(locks, mem...)
		sort.SliceStable(locks, func(i, j int) bool { return bytes.Compare(locks[i].Key, locks[j].Key) < 0 })
	}
	if limit > 0 && len(locks) > limit {
		locks = locks[:limit]
	}
	return locks, nil
}
