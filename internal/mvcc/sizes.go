package mvcc

import (
	"bytes"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// SizeSample is a user key and the bytes of the records (every version,
// write records and values) of the keys from the previous sample up to it.
type SizeSample struct {
	Key   []byte
	Bytes uint64
}

// RegionSize is what SampleSizes measured of a user key range.
type RegionSize struct {
	Bytes, Keys uint64
	// Samples are in key order, about one per `every` bytes; each is a
	// user key present in the range.
	Samples []SizeSample
}

// SampleSizes scans the write and data records of the user keys in
// [start, end) (empty end: no bound) and measures them, keeping a user
// key about every `every` bytes. The split checker picks its split key
// among the samples, so a region is only ever split at a whole user key
// (a row, an index entry), between its versions' records and never
// inside them.
func SampleSizes(r pebble.Reader, start, end []byte, every uint64) (RegionSize, error) {
	var out RegionSize
	every = max(every, 1)
	for _, cf := range []byte{writeCF, dataCF} {
		lo, hi := cfBounds(cf, start, end)
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return out, err
		}
		var pending uint64
		var last []byte
		for it.First(); it.Valid(); it.Next() {
			k := it.Key()
			pending += uint64(len(k) + len(it.Value()))
			if len(k) < 2+8 {
				continue
			}
			// The escaped user key is everything but the prefix and the
			// 8-byte timestamp; compare before decoding.
			esc := k[2 : len(k)-8]
			if last != nil && bytes.Equal(esc, last) {
				continue
			}
			last = append(last[:0], esc...)
			if cf == writeCF {
				out.Keys++
			}
			if pending >= every {
				uk, _, err := decodeEscaped(esc)
				if err != nil {
					continue
				}
				out.Samples = append(out.Samples, SizeSample{Key: uk, Bytes: pending})
				out.Bytes += pending
				pending = 0
			}
		}
		out.Bytes += pending
		if err := it.Close(); err != nil {
			return out, err
		}
	}
	sort.SliceStable(out.Samples, func(i, j int) bool { return bytes.Compare(out.Samples[i].Key, out.Samples[j].Key) < 0 })
	return out, nil
}

// MiddleKey returns the sample at which the bytes before it reach half
// of the total, or nil when there is none strictly inside the range
// (above start).
func (s RegionSize) MiddleKey(start []byte) []byte {
	var acc uint64
	for _, smp := range s.Samples {
		acc += smp.Bytes
		if acc*2 >= s.Bytes && bytes.Compare(smp.Key, start) > 0 {
			return smp.Key
		}
	}
	return nil
}

// FirstAndLastKeys returns the smallest and the largest user keys with a
// write record in [start, end), or nils when there is none.
func FirstAndLastKeys(r pebble.Reader, start, end []byte) (first, last []byte, err error) {
	lo, hi := cfBounds(writeCF, start, end)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, err
	}
	if it.First() {
		first, _, _ = decodeWriteKey(it.Key())
	}
	if it.Last() {
		last, _, _ = decodeWriteKey(it.Key())
	}
	return first, last, it.Close()
}
