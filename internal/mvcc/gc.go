package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// GCResult is what one GC call did.
type GCResult struct {
	// Versions is how many write records the call deleted; Values how
	// many data-CF values (of deleted Puts whose value was not inlined).
	Versions, Values int
	// Resume is the user key the next call must start from, or nil when
	// the range is done. The next call must read state that includes this
	// call's deletions.
	Resume []byte
}

// GC adds to b the deletions that garbage-collect the versions of the user
// keys in [start, end) (empty end: no upper bound) that no read at or above
// safePoint can see. For each user key, among the write records with
// commit ts <= safePoint:
//   - the newest Put or Delete is the version a read at safePoint sees: a
//     Put is kept; a Delete is deleted as well (nothing older is visible
//     through it), but only once everything older is gone, so that a call
//     cut short by limit never exposes an older Put;
//   - every other record (older Puts and Deletes, and Lock and Rollback
//     records at or below safePoint) is deleted, with the data-CF value of
//     each deleted Put that did not inline its value.
//
// Records above safePoint and the lock column family are never touched, so
// a read at any ts >= safePoint sees exactly what it saw before. GC stops
// once it has deleted limit engine keys (limit <= 0: no bound) and
// returns where to resume; it deletes at most limit+1 keys (a Put's record
// and its value go together). Like every function of this package it only
// reads r and writes b.
//
// The caller must make sure no read below safePoint is served once the
// deletions may be applied (see LockSet.RaiseGCSafePoint), and that every
// lock whose transaction started at or below safePoint has been resolved
// first: a secondary lock of a transaction whose primary committed at or
// below safePoint would otherwise lose the commit record that decides it.
func GC(r pebble.Reader, b *pebble.Batch, start, end []byte, safePoint uint64, limit int) (GCResult, error) {
	var res GCResult
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return res, nil
	}
	lo, hi := cfBounds(writeCF, start, end)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return res, err
	}
	defer it.Close()
	var s staged
	full := func() bool { return limit > 0 && len(s.ops) >= limit }
	// prefix is the escaped engine prefix of the key under the iterator
	// (its write key without the timestamp); the user key is unescaped
	// only when a deletion or a resume point needs it. Most keys of a
	// table have one version, which GC keeps whatever the safe point:
	// those cost a look at the record's kind and one Next.
	var prefix, key []byte
	userKey := func() ([]byte, error) {
		if key == nil {
			k, _, err := appendWriteKeyUserKey(nil, append(prefix, make([]byte, 8)...))
			if err != nil {
				return nil, err
			}
			key = k
		}
		return key, nil
	}
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < minWriteKeyLen || k[0] != Prefix || k[1] != writeCF {
			return res, fmt.Errorf("mvcc: %q is not a write key", k)
		}
		prefix, key = append(prefix[:0], k[:len(k)-8]...), nil
		if full() {
			if res.Resume, err = userKey(); err != nil {
				return res, err
			}
			break
		}
		if ^bigEndianTS(k[len(k)-8:]) <= safePoint {
			if kind, _, ok := inlineWrite(it.Value()); ok && kind == writePut {
				// The newest record is the Put a read at the safe point
				// sees: only older records can go.
				if valid = it.Next(); !valid || !bytes.HasPrefix(it.Key(), prefix) {
					continue
				}
				if err := gcOlder(it, &s, &res, prefix, userKey, full); err != nil {
					return res, err
				}
				if res.Resume != nil {
					break
				}
				valid = it.Valid()
				if valid && bytes.HasPrefix(it.Key(), prefix) {
					valid = it.NextPrefix()
				}
				continue
			}
		}
		// Step over the versions above the safe point: Next while there
		// are few, then seek.
		for steps := 0; valid && bytes.HasPrefix(it.Key(), prefix) && ^bigEndianTS(it.Key()[len(prefix):]) > safePoint; steps++ {
			if steps == maxVersionSteps {
				valid = it.SeekGE(appendInvertedTS(prefix, safePoint))
				break
			}
			valid = it.Next()
		}
		kept := false           // the newest Put or Delete at or below safePoint was seen
		var deleteMarker []byte // the write key of that version when it is a Delete
		for ; valid && bytes.HasPrefix(it.Key(), prefix); valid = it.Next() {
			w, err := decodeWrite(it.Value())
			if err != nil {
				return res, err
			}
			if w.kind == writePut || w.kind == writeDelete {
				kept = true
				if w.kind == writeDelete {
					deleteMarker = slices.Clone(it.Key())
				}
				valid = it.Next()
				break
			}
			// A Lock or Rollback record above the version that gives
			// the key its value at the safe point.
			if full() {
				if res.Resume, err = userKey(); err != nil {
					return res, err
				}
				break
			}
			s.del(slices.Clone(it.Key()))
			res.Versions++
		}
		if res.Resume != nil {
			break
		}
		if kept && valid && bytes.HasPrefix(it.Key(), prefix) {
			if err := gcOlder(it, &s, &res, prefix, userKey, full); err != nil {
				return res, err
			}
			if res.Resume != nil {
				break
			}
			valid = it.Valid()
		}
		if err := it.Error(); err != nil {
			return res, err
		}
		if deleteMarker != nil {
			if full() {
				// The next call finds the Delete alone.
				if res.Resume, err = userKey(); err != nil {
					return res, err
				}
				break
			}
			s.del(deleteMarker)
			res.Versions++
		}
		if valid && bytes.HasPrefix(it.Key(), prefix) {
			valid = it.NextPrefix()
		}
	}
	if err := it.Error(); err != nil {
		return res, err
	}
	return res, s.applyTo(b)
}

// The GC safe point record: 'z' 'g' + 8-byte region id -> 8-byte safe
// point. A region's GC writes it in the same batch as its deletions, so a
// replica that applied the deletions (also after a crash and replay) knows
// reads below it must fail. It is outside the lock, write and data
// families, hence outside EngineSpans: splits and range operations on
// user keys never see it.
const gcCF byte = 'g'

func gcSafePointKey(regionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{Prefix, gcCF}, regionID)
}

// PutGCSafePoint adds to b the record that region regionID has been
// garbage-collected at safePoint.
func PutGCSafePoint(b *pebble.Batch, regionID, safePoint uint64) error {
	return b.Set(gcSafePointKey(regionID), binary.BigEndian.AppendUint64(nil, safePoint), nil)
}

// loadGCSafePoint returns the highest safe point recorded by any region.
func loadGCSafePoint(r pebble.Reader) (uint64, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{Prefix, gcCF}, UpperBound: []byte{Prefix, gcCF + 1}})
	if err != nil {
		return 0, err
	}
	var sp uint64
	for valid := it.First(); valid; valid = it.Next() {
		v, err := decodeGCSafePoint(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return 0, err
		}
		sp = max(sp, v)
	}
	if err := it.Error(); err != nil {
		it.Close()
		return 0, err
	}
	return sp, it.Close()
}

func decodeGCSafePoint(k, v []byte) (uint64, error) {
	if len(k) != 10 || len(v) != 8 {
		return 0, fmt.Errorf("mvcc: corrupt GC safe point record %q = %x", k, v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// gcOlder deletes the records under the iterator and after it that belong
// to the key of prefix: all are older than the version a read at the safe
// point sees. A Put's value in the data column family goes with its
// record. Cut short by full, it sets res.Resume to the key; otherwise it
// leaves the iterator past the key's records.
func gcOlder(it *pebble.Iterator, s *staged, res *GCResult, prefix []byte, userKey func() ([]byte, error), full func() bool) error {
	for valid := true; valid && bytes.HasPrefix(it.Key(), prefix); valid = it.Next() {
		if full() {
			key, err := userKey()
			res.Resume = key
			return err
		}
		w, err := decodeWrite(it.Value())
		if err != nil {
			return err
		}
		s.del(slices.Clone(it.Key()))
		res.Versions++
		if w.kind == writePut && !w.hasValue {
			key, err := userKey()
			if err != nil {
				return err
			}
			s.del(dataKey(key, w.startTS))
			res.Values++
		}
	}
	return it.Error()
}
