package mvcc

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// forwardScan is a forward scan's state over its iterators (scanIters).
//
// The per-key work is kept small, because a table scan (COUNT(*), an
// aggregation) runs it for every row:
//   - Keys are compared in their escaped engine form: escaping preserves
//     order and no escaped key is a prefix of another, so comparing the
//     write key's escaped part with the next lock's escaped key orders them
//     as their user keys. The user key is unescaped only for a pair that
//     is returned through ScanFunc, a value in the data column family, or
//     a ScanKey that is asked for it.
//   - A key whose newest record is at or below readTS and is a put or a
//     delete (a table's rows, once written) is settled from that record:
//     no prefix copy, no stepping, then NextPrefix to the next key. Newer
//     versions, and lock and rollback records (which leave the value to
//     older ones), take the general path.
//   - Locks keep their order with the records: every lock at or before
//     the key under the write iterator is checked against readTS before
//     that key's value is handed on, and a blocking one ends the scan with
//     *LockedError.
type forwardScan struct {
	r        pebble.Reader
	wIt, lIt *pebble.Iterator // lIt nil: no key of the range holds a lock
	readTS   uint64
	fn       func(key, value []byte) error
	vfn      func(k *ScanKey, value []byte) error

	sk        *ScanKey // ScanValues only: ScanFunc and Count allocate none
	keyBuf    []byte   // the user key of the pair at hand, when decoded
	prefixBuf []byte   // the general path's version prefix
	lockEsc   []byte   // the escaped user key of the lock under lIt
	found     int      // pairs handed on (counted, without fn and vfn)
	bytes     int      // counting: the inline values' bytes
	visited   uint64   // keys with write records: LockSet.ScannedKeys
}

// minWriteKeyLen is 'z' 'w', the escape terminator and the timestamp.
const minWriteKeyLen = 2 + 2 + 8

func (s *forwardScan) run(limit int) error {
	wIt, lIt := s.wIt, s.lIt
	wValid := wIt.First()
	lValid := lIt != nil && lIt.First()
	if lValid {
		s.lockEsc = appendEscaped(s.lockEsc[:0], lIt.Key()[2:])
	}
	for (limit <= 0 || s.found < limit) && (wValid || lValid) {
		var wk []byte
		if wValid {
			if wk = wIt.Key(); len(wk) < minWriteKeyLen {
				return fmt.Errorf("mvcc: %q is not a write key", wk)
			}
		}
		if lValid {
			c := -1 // the lock's key against the write key
			if wValid {
				c = bytes.Compare(s.lockEsc, wk[2:len(wk)-8])
			}
			if c <= 0 {
				l, err := decodeLock(lIt.Value())
				if err != nil {
					return err
				}
				if lockBlocksRead(l, s.readTS, nil) {
					return &LockedError{Lock: l.info(slices.Clone(lIt.Key()[2:]))}
				}
				if lValid = lIt.Next(); lValid {
					s.lockEsc = appendEscaped(s.lockEsc[:0], lIt.Key()[2:])
				}
				if c < 0 {
					continue // a lock on a key without committed versions
				}
			}
		}
		s.visited++

		// The common case: the newest record settles the key.
		if ^bigEndianTS(wk[len(wk)-8:]) <= s.readTS {
			switch kind, value, ok := inlineWrite(wIt.Value()); {
			case ok && kind == writePut:
				if err := s.emitInline(value); err != nil {
					return err
				}
				wValid = s.nextKey(wk)
				continue
			case ok: // a delete
				wValid = s.nextKey(wk)
				continue
			}
		}
		var err error
		if wValid, err = s.versions(wk); err != nil {
			return err
		}
	}
	if err := wIt.Error(); err != nil {
		return err
	}
	if lIt != nil {
		if err := lIt.Error(); err != nil {
			return err
		}
	}
	return nil
}

// nextKey moves the write iterator from the key of record wk (under it)
// to the next key's newest record. Most keys of a table have one version:
// Next lands on the next key, and costs less than NextPrefix (which also
// asks every level of the engine's merging iterator for an error); when
// Next lands on an older version of the same key, NextPrefix skips the rest.
func (s *forwardScan) nextKey(wk []byte) bool {
	s.prefixBuf = append(s.prefixBuf[:0], wk[:len(wk)-8]...)
	if !s.wIt.Next() {
		return false
	}
	if k := s.wIt.Key(); len(k) == len(wk) && bytes.HasPrefix(k, s.prefixBuf) {
		return s.wIt.NextPrefix()
	}
	return true
}

// versions finds the newest version at or below readTS of the key whose
// newest record is under the write iterator (wk), hands it on if it is a
// put, and moves to the next key.
func (s *forwardScan) versions(wk []byte) (bool, error) {
	wIt := s.wIt
	s.prefixBuf = append(s.prefixBuf[:0], wk[:len(wk)-8]...)
	prefix := s.prefixBuf
	// Step over versions above readTS with Next, which is far cheaper than
	// a seek, and seek only when there are many of them.
	valid := true
	for steps := 0; valid && bytes.HasPrefix(wIt.Key(), prefix) && ^bigEndianTS(wIt.Key()[len(prefix):]) > s.readTS; steps++ {
		if steps == maxVersionSteps {
			valid = wIt.SeekGE(appendInvertedTS(prefix, s.readTS))
			break
		}
		valid = wIt.Next()
	}
	w, put, valid, err := visiblePut(wIt, prefix, valid)
	if err != nil {
		return false, err
	}
	if put {
		if err := s.emit(&w); err != nil {
			return false, err
		}
	}
	if !valid {
		return false, wIt.Error()
	}
	if bytes.HasPrefix(wIt.Key(), prefix) {
		// Skip the older versions: NextPrefix uses the engine comparer's
		// Split to move to the next user key directly.
		return wIt.NextPrefix(), nil
	}
	return true, nil
}

// emitInline hands on the inline value of the put record under the write
// iterator.
func (s *forwardScan) emitInline(value []byte) error {
	s.found++
	if s.fn == nil && s.vfn == nil {
		s.bytes += len(value) // counting
		return nil
	}
	if s.fn != nil {
		key, _, err := appendWriteKeyUserKey(s.keyBuf[:0], s.wIt.Key())
		if err != nil {
			return err
		}
		s.keyBuf = key
		return s.fn(key, value)
	}
	s.sk.buf, s.sk.decoded = s.keyBuf[:0], false
	err := s.vfn(s.sk, value)
	s.keyBuf = s.sk.buf[:0]
	return err
}

// emit hands on the put record w under the write iterator.
func (s *forwardScan) emit(w *write) error {
	if s.fn == nil && s.vfn == nil {
		// Counting: a put record stands for its value, wherever it is.
		s.found++
		s.bytes += len(w.value)
		return nil
	}
	value := w.value
	if s.fn != nil || !w.hasValue {
		key, _, err := appendWriteKeyUserKey(s.keyBuf[:0], s.wIt.Key())
		if err != nil {
			return err
		}
		s.keyBuf = key
		if !w.hasValue {
			// A value in the data CF is read by its key.
			if value, err = putValue(s.r, key, w); err != nil {
				return err
			}
		}
		s.found++
		if s.fn != nil {
			return s.fn(key, value)
		}
		s.sk.buf, s.sk.decoded = key, true
	} else {
		s.found++
		s.sk.buf, s.sk.decoded = s.keyBuf[:0], false
	}
	err := s.vfn(s.sk, value)
	s.keyBuf = s.sk.buf[:0]
	return err
}

// Count returns how many pairs ScanValues would hand on over [start, end)
// at readTS, and the bytes of their values kept inline in the write
// records (values in the data column family are not read), with the same
// lock checks: a blocking lock fails it with *LockedError. It is the scan
// of a COUNT(*): per key, the newest record's kind and timestamp decide,
// and no key is unescaped.
func Count(r pebble.Reader, start, end []byte, readTS uint64) (pairs, valueBytes int, err error) {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return 0, 0, nil
	}
	// Locks before write records, as scanFunc opens them.
	var lIt *pebble.Iterator
	if li, ok := r.(lockIndex); !ok || li.mayHaveLockIn(start, end) {
		lLo, lHi := cfBounds(lockCF, start, end)
		if lIt, err = r.NewIter(&pebble.IterOptions{LowerBound: lLo, UpperBound: lHi}); err != nil {
			return 0, 0, err
		}
		defer lIt.Close()
	}
	wLo, wHi := cfBounds(writeCF, start, end)
	wIt, err := r.NewIter(&pebble.IterOptions{LowerBound: wLo, UpperBound: wHi})
	if err != nil {
		return 0, 0, err
	}
	defer wIt.Close()
	return countIters(r, wIt, lIt, readTS)
}

// Count is Count over range i.
func (m *RangeScan) Count(i int, readTS uint64) (pairs, valueBytes int, err error) {
	start, end := m.ranges[i][0], m.ranges[i][1]
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return 0, 0, nil
	}
	m.wIt.SetBounds(cfBounds(writeCF, start, end))
	var lIt *pebble.Iterator
	if m.locked[i] {
		lIt = m.lIt
		lIt.SetBounds(cfBounds(lockCF, start, end))
	}
	return countIters(m.r, m.wIt, lIt, readTS)
}

func countIters(r pebble.Reader, wIt, lIt *pebble.Iterator, readTS uint64) (int, int, error) {
	s := forwardScan{r: r, wIt: wIt, lIt: lIt, readTS: readTS}
	err := s.run(0)
	if lr, ok := r.(lockSetReader); ok {
		lr.ls.scanned.Add(s.visited)
	}
	return s.found, s.bytes, err
}

// visiblePut walks a key's write records from the iterator's position (the
// newest at or below the read timestamp; valid is the iterator's state) to
// the put that gives the key its value. put is false when a delete, or the
// end of the key's records, comes first; lock and rollback records change
// no value. The iterator is left on the put or the delete, or past the
// key's records, and valid reports its state.
func visiblePut(wIt *pebble.Iterator, prefix []byte, valid bool) (w write, put, stillValid bool, err error) {
	for ; valid && bytes.HasPrefix(wIt.Key(), prefix); valid = wIt.Next() {
		if w, err = decodeWrite(wIt.Value()); err != nil {
			return write{}, false, valid, err
		}
		switch w.kind {
		case writePut:
			return w, true, true, nil
		case writeDelete:
			return write{}, false, true, nil
		}
	}
	return write{}, false, valid, nil
}
