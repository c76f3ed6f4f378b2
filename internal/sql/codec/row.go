package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/big"
	"math/bits"
	"slices"

	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/types"
)

// Row values have the layout
//
//	rowVersion | uvarint n | n x uvarint column id | n x uvarint end offset | data
//
// where column i's value is data[end[i-1]:end[i]]: a kind byte followed by the
// payload (zigzag varint for INT, uvarint for UINT, 8 bytes for DOUBLE and
// TIME, raw bytes for strings, uvarint scale + sign byte + magnitude for
// DECIMAL, nothing for NULL). Decoding one column parses only the small
// header and that column's bytes.
const rowVersion byte = 0x80

// maxStackCols is the number of columns whose header fits in DecodeRow's
// stack arrays; wider rows allocate.
const maxStackCols = 32

// EncodeRow appends the row value for the columns colIDs with values ds.
// NULLs are stored explicitly so that a NULL is distinguishable from a column
// the row was written without (see DecodeRow).
func EncodeRow(buf []byte, colIDs []int64, ds []types.Datum) ([]byte, error) {
	if len(colIDs) != len(ds) {
		return nil, fmt.Errorf("codec: %d column ids for %d values", len(colIDs), len(ds))
	}
	buf = append(buf, rowVersion)
	buf = binary.AppendUvarint(buf, uint64(len(colIDs)))
	for _, id := range colIDs {
		if id < 0 {
			return nil, fmt.Errorf("codec: negative column id %d", id)
		}
		buf = binary.AppendUvarint(buf, uint64(id))
	}
	// Offsets depend on the encoded sizes: size each value first.
	end := 0
	for _, d := range ds {
		n, err := valueSize(d)
		if err != nil {
			return nil, err
		}
		end += n
		buf = binary.AppendUvarint(buf, uint64(end))
	}
	for _, d := range ds {
		buf = appendValue(buf, d)
	}
	return buf, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func valueSize(d types.Datum) (int, error) {
	switch d.Kind() {
	case types.KindNull:
		return 1, nil
	case types.KindInt64:
		return 1 + uvarintLen(zigzag(d.Int())), nil
	case types.KindUint64:
		return 1 + uvarintLen(d.Uint()), nil
	case types.KindFloat64, types.KindTime, types.KindDuration:
		return 9, nil
	case types.KindString, types.KindBytes:
		return 1 + len(d.Bytes()), nil
	case types.KindDecimal:
		dec := d.Decimal()
		n := 0
		if v, ok := dec.Small(); ok {
			n = (bits.Len64(absInt64(v)) + 7) / 8
		} else {
			n = len(new(big.Int).Abs(dec.Unscaled()).Bytes())
		}
		return 1 + uvarintLen(uint64(dec.Scale())) + 1 + n, nil
	}
	return 0, fmt.Errorf("codec: cannot encode datum of kind %v", d.Kind())
}

func appendValue(buf []byte, d types.Datum) []byte {
	buf = append(buf, byte(d.Kind()))
	switch d.Kind() {
	case types.KindInt64:
		buf = binary.AppendUvarint(buf, zigzag(d.Int()))
	case types.KindUint64:
		buf = binary.AppendUvarint(buf, d.Uint())
	case types.KindFloat64:
		buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(d.Float()))
	case types.KindTime:
		buf = binary.BigEndian.AppendUint64(buf, uint64(d.Time()))
	case types.KindDuration:
		buf = binary.BigEndian.AppendUint64(buf, uint64(d.DurationWord()))
	case types.KindString, types.KindBytes:
		buf = append(buf, d.Bytes()...)
	case types.KindDecimal:
		// Scale, sign (1: negative), then the magnitude's big-endian
		// bytes without leading zeros (none for zero).
		dec := d.Decimal()
		buf = binary.AppendUvarint(buf, uint64(dec.Scale()))
		if v, ok := dec.Small(); ok {
			buf = append(buf, b2u8(v < 0))
			mag := absInt64(v)
			for shift := (bits.Len64(mag) + 7) / 8 * 8; shift > 0; shift -= 8 {
				buf = append(buf, byte(mag>>(shift-8)))
			}
			break
		}
		u := dec.Unscaled()
		buf = append(buf, b2u8(u.Sign() < 0))
		buf = append(buf, u.Abs(u).Bytes()...)
	}
	return buf
}

func decodeValue(b []byte) (types.Datum, error) { return decodeValueSlab(b, nil) }

// decodeValueSlab is decodeValue taking the decimals that fit an int64
// from decs (nil: one allocation each).
func decodeValueSlab(b []byte, decs *types.DecimalSlab) (types.Datum, error) {
	if len(b) == 0 {
		return types.Datum{}, ErrCorrupt
	}
	kind := types.Kind(b[0])
	p := b[1:]
	switch kind {
	case types.KindNull:
		return types.Datum{}, nil
	case types.KindInt64:
		u, n := binary.Uvarint(p)
		if n <= 0 {
			return types.Datum{}, ErrCorrupt
		}
		return types.NewInt(unzigzag(u)), nil
	case types.KindUint64:
		u, n := binary.Uvarint(p)
		if n <= 0 {
			return types.Datum{}, ErrCorrupt
		}
		return types.NewUint(u), nil
	case types.KindFloat64:
		if len(p) != 8 {
			return types.Datum{}, ErrCorrupt
		}
		return types.NewFloat(math.Float64frombits(binary.BigEndian.Uint64(p))), nil
	case types.KindTime:
		if len(p) != 8 {
			return types.Datum{}, ErrCorrupt
		}
		return types.NewTime(types.Time(binary.BigEndian.Uint64(p))), nil
	case types.KindDuration:
		if len(p) != 8 {
			return types.Datum{}, ErrCorrupt
		}
		return types.NewDurationWord(int64(binary.BigEndian.Uint64(p))), nil
	case types.KindString:
		return types.NewStringBytes(p), nil
	case types.KindBytes:
		return types.NewBytes(p), nil
	case types.KindDecimal:
		scale, n := binary.Uvarint(p)
		if n <= 0 || len(p) < n+1 || scale > types.MaxDecimalScale {
			return types.Datum{}, ErrCorrupt
		}
		neg := p[n] == 1
		if v, ok := smallUnscaled(p[n+1:], neg); ok {
			// No big.Int (a scan of TPC-H's lineitem decodes four
			// decimals a row).
			if decs != nil {
				return types.NewDecimal(decs.Small(v, int(scale))), nil
			}
			return types.NewDecimal(types.NewDecimalSmall(v, int(scale))), nil
		}
		mag := new(big.Int).SetBytes(p[n+1:])
		if neg {
			mag.Neg(mag)
		}
		return types.NewDecimal(types.NewDecimalUnscaled(mag, int(scale))), nil
	}
	return types.Datum{}, ErrCorrupt
}

// smallUnscaled is the unscaled value of a decimal whose big-endian
// magnitude is b, when it fits an int64.
func smallUnscaled(b []byte, neg bool) (int64, bool) {
	if len(b) > 8 {
		return 0, false
	}
	var mag uint64
	for _, c := range b {
		mag = mag<<8 | uint64(c)
	}
	switch {
	case mag <= math.MaxInt64 && neg:
		return -int64(mag), true
	case mag <= math.MaxInt64:
		return int64(mag), true
	case neg && mag == 1<<63:
		return math.MinInt64, true
	}
	return 0, false
}

// DecodeRow decodes the columns colIDs of the row value b into out
// (len(out) >= len(colIDs)). A column the row does not contain (added after
// the row was written) keeps the value the caller put in out, so callers
// pre-fill out with column defaults (or NULL). When fts is non-nil and a
// stored value's kind differs from the kind of fts[i] (the column's type was
// altered), the value is converted with types.Convert. Decoded strings alias b.
func DecodeRow(b []byte, colIDs []int64, fts []*ptypes.FieldType, out []types.Datum) error {
	return DecodeRowKinds(b, colIDs, fts, nil, out)
}

// DecodeRowKinds is DecodeRow for callers that decode many rows of one
// layout: kinds, when not nil, holds types.KindForFieldType(fts[i]), so it
// is not worked out again for every value.
func DecodeRowKinds(b []byte, colIDs []int64, fts []*ptypes.FieldType, kinds []types.Kind, out []types.Datum) error {
	if len(out) < len(colIDs) {
		return fmt.Errorf("codec: %d outputs for %d columns", len(out), len(colIDs))
	}
	if len(b) == 0 || b[0] != rowVersion {
		return ErrCorrupt
	}
	p := b[1:]
	n64, k := binary.Uvarint(p)
	if k <= 0 || n64 > uint64(len(p)) {
		return ErrCorrupt
	}
	p = p[k:]
	n := int(n64)
	var idsArr, endsArr [maxStackCols]uint64
	ids, ends := idsArr[:0], endsArr[:0]
	if n > maxStackCols {
		ids, ends = make([]uint64, 0, n), make([]uint64, 0, n)
	}
	for i := 0; i < n; i++ {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return ErrCorrupt
		}
		ids = append(ids, v)
		p = p[k:]
	}
	for i := 0; i < n; i++ {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return ErrCorrupt
		}
		ends = append(ends, v)
		p = p[k:]
	}
	data := p
	if n > 0 && ends[n-1] != uint64(len(data)) {
		return ErrCorrupt
	}
	// Search from just after the previous hit: requests usually list columns
	// in the order the row stores them, which makes a full decode linear.
	next := 0
	for i, want := range colIDs {
		for probe := 0; probe < n; probe++ {
			j := next + probe
			if j >= n {
				j -= n
			}
			if ids[j] != uint64(want) {
				continue
			}
			next = j + 1
			b, ok := valueBytes(data, ends, j)
			if !ok {
				return ErrCorrupt
			}
			d, err := decodeValue(b)
			if err != nil {
				return err
			}
			if fts != nil && fts[i] != nil && !d.IsNull() && d.Kind() != kindOf(kinds, fts, i) {
				if d, err = types.Convert(d, fts[i]); err != nil {
					return err
				}
			}
			out[i] = d
			break
		}
	}
	return nil
}

// RowDecoder decodes the same columns out of many row values, such as
// the records of one table a scan reads. Rows written with the same
// columns share the header's column-id list byte for byte, so the decoder
// keeps the last list it saw and where each wanted column sits in it; a
// row whose list matches (a prefix compare) is decoded without parsing or
// searching the ids again. The values of columns not wanted are never
// looked at: their bytes are skipped by the offsets. A RowDecoder is not
// safe for concurrent use; its results are the same as DecodeRowKinds'.
type RowDecoder struct {
	colIDs   []int64
	fts      []*ptypes.FieldType
	kinds    []types.Kind
	offsets  []int
	defaults []types.Datum

	// The layout last learned: its header bytes after the version (uvarint
	// n and the n uvarint ids), and per wanted column its index in the
	// row, or -1 when the row lacks it.
	layout []byte
	// word and mask: a layout of at most 8 bytes as a little-endian word
	// (compared with one load), mask 0 otherwise.
	word, mask uint64
	n          int
	pos        []int
	ends       []uint64 // for rows wider than maxStackCols
	// decs hands out the decimals of the rows decoded, a chunk at a time
	// (a lineitem row has four: one allocation each was a fifth of a
	// TPC-H Q6 scan's CPU).
	decs types.DecimalSlab
}

// NewRowDecoder returns a decoder of the columns colIDs, with fts and
// kinds as DecodeRowKinds takes them (either may be nil). Decode writes
// column i to out[offsets[i]] (to out[i] when offsets is nil), and a
// column a row does not hold as defaults[i] (NULL when defaults is nil):
// the value of rows written before the column was added. A RowDecoder
// serves one goroutine at a time.
func NewRowDecoder(colIDs []int64, fts []*ptypes.FieldType, kinds []types.Kind, offsets []int, defaults []types.Datum) *RowDecoder {
	if kinds == nil && fts != nil {
		kinds = make([]types.Kind, len(fts))
		for i, ft := range fts {
			if ft != nil {
				kinds[i] = types.KindForFieldType(ft)
			}
		}
	}
	if offsets == nil {
		offsets = make([]int, len(colIDs))
		for i := range offsets {
			offsets[i] = i
		}
	}
	return &RowDecoder{colIDs: colIDs, fts: fts, kinds: kinds, offsets: offsets, defaults: defaults, pos: make([]int, len(colIDs))}
}

// Decode decodes the row value b into out. Decoded strings alias b.
func (d *RowDecoder) Decode(b []byte, out []types.Datum) error {
	return d.DecodeShared(b, nil, out)
}

// RowOffsets holds a row value's parsed column offsets, for several
// decoders of the same row (different columns of it, decoded at different
// times): the first parses them, the others reuse them. Reset it for
// another row.
type RowOffsets struct {
	data   []byte
	ends   []uint64
	parsed bool
}

// Reset forgets the row whose offsets o holds.
func (o *RowOffsets) Reset() { o.parsed = false }

// DecodeShared is Decode with the row's offsets taken from o when a
// decoder of the same row parsed them already (o nil: parsed here).
func (d *RowDecoder) DecodeShared(b []byte, o *RowOffsets, out []types.Datum) error {
	if len(b) == 0 || b[0] != rowVersion {
		return ErrCorrupt
	}
	p := b[1:]
	same := false
	if d.mask != 0 && len(p) >= 8 {
		same = binary.LittleEndian.Uint64(p)&d.mask == d.word
	} else {
		same = len(d.layout) > 0 && bytes.HasPrefix(p, d.layout)
	}
	if !same {
		if err := d.learn(p); err != nil {
			return err
		}
	}
	if o != nil {
		if !o.parsed {
			data, ends, err := d.parseOffsets(p[len(d.layout):], o.ends[:0])
			if err != nil {
				return err
			}
			o.data, o.ends, o.parsed = data, ends, true
		}
		return d.decodeValues(o.data, o.ends, out)
	}
	var endsArr [maxStackCols]uint64
	ends := endsArr[:0]
	if d.n > maxStackCols {
		ends = d.ends[:0]
	}
	data, ends, err := d.parseOffsets(p[len(d.layout):], ends)
	if err != nil {
		return err
	}
	return d.decodeValues(data, ends, out)
}

// parseOffsets reads the d.n column end offsets at the start of p (a row
// value after its layout) into ends and returns the values after them.
func (d *RowDecoder) parseOffsets(p []byte, ends []uint64) ([]byte, []uint64, error) {
	for range d.n {
		// The offsets are mostly one or two bytes long.
		var v uint64
		if len(p) > 0 && p[0] < 0x80 {
			v, p = uint64(p[0]), p[1:]
		} else {
			var k int
			if v, k = binary.Uvarint(p); k <= 0 {
				return nil, nil, ErrCorrupt
			}
			p = p[k:]
		}
		ends = append(ends, v)
	}
	if d.n > 0 && ends[d.n-1] != uint64(len(p)) {
		return nil, nil, ErrCorrupt
	}
	return p, ends, nil
}

// decodeValues decodes the wanted columns of a row whose values are data,
// column i ending at ends[i].
func (d *RowDecoder) decodeValues(data []byte, ends []uint64, out []types.Datum) error {
	for i, j := range d.pos {
		if j < 0 {
			if d.defaults != nil {
				out[d.offsets[i]] = d.defaults[i]
			} else {
				out[d.offsets[i]] = types.Datum{}
			}
			continue
		}
		b, ok := valueBytes(data, ends, j)
		if !ok {
			return ErrCorrupt
		}
		v, err := decodeValueSlab(b, &d.decs)
		if err != nil {
			return err
		}
		if d.fts != nil && d.fts[i] != nil && !v.IsNull() && v.Kind() != d.kinds[i] {
			if v, err = types.Convert(v, d.fts[i]); err != nil {
				return err
			}
		}
		out[d.offsets[i]] = v
	}
	return nil
}

// learn parses the header of a row value p (after the version byte) and
// finds the wanted columns in it, as DecodeRowKinds' search does.
func (d *RowDecoder) learn(p []byte) error {
	d.layout, d.word, d.mask = d.layout[:0], 0, 0
	n64, k := binary.Uvarint(p)
	if k <= 0 || n64 > uint64(len(p)) {
		return ErrCorrupt
	}
	n := int(n64)
	h := k
	var idsArr [maxStackCols]uint64
	ids := idsArr[:0]
	if n > maxStackCols {
		ids = make([]uint64, 0, n)
	}
	for range n {
		v, k := binary.Uvarint(p[h:])
		if k <= 0 {
			return ErrCorrupt
		}
		ids = append(ids, v)
		h += k
	}
	next := 0
	for i, want := range d.colIDs {
		d.pos[i] = -1
		for probe := 0; probe < n; probe++ {
			j := next + probe
			if j >= n {
				j -= n
			}
			if ids[j] == uint64(want) {
				d.pos[i], next = j, j+1
				break
			}
		}
	}
	d.layout = append(d.layout, p[:h]...)
	if h <= 8 {
		var w [8]byte
		copy(w[:], p[:h])
		d.word = binary.LittleEndian.Uint64(w[:])
		d.mask = ^uint64(0) >> (64 - 8*h)
	}
	d.n = n
	if n > maxStackCols && cap(d.ends) < n {
		d.ends = make([]uint64, 0, n)
	}
	return nil
}

// kindOf returns the value kind of column i's type.
func kindOf(kinds []types.Kind, fts []*ptypes.FieldType, i int) types.Kind {
	if kinds != nil {
		return kinds[i]
	}
	return types.KindForFieldType(fts[i])
}

// SumColumns returns a hash, under seed, of the encoded values of the
// columns colIDs in the row value b, in the order given; a column the row
// does not hold hashes as absent. Two row values with the same sum hold the
// same values in those columns (up to hash collisions), whatever their
// other columns hold. A value that does not parse hashes whole.
func SumColumns(seed maphash.Seed, b []byte, colIDs []int64) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	if len(b) == 0 || b[0] != rowVersion {
		h.Write(b)
		return h.Sum64()
	}
	p := b[1:]
	n64, k := binary.Uvarint(p)
	if k <= 0 || n64 > uint64(len(p)) {
		h.Write(b)
		return h.Sum64()
	}
	p = p[k:]
	n := int(n64)
	var idsArr, endsArr [maxStackCols]uint64
	ids, ends := idsArr[:0], endsArr[:0]
	if n > maxStackCols {
		ids, ends = make([]uint64, 0, n), make([]uint64, 0, n)
	}
	for range 2 * n {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			h.Write(b)
			return h.Sum64()
		}
		if len(ids) < n {
			ids = append(ids, v)
		} else {
			ends = append(ends, v)
		}
		p = p[k:]
	}
	var lenBuf [binary.MaxVarintLen64 + 1]byte
	for _, want := range colIDs {
		j := slices.Index(ids, uint64(want))
		if j < 0 {
			h.WriteByte(0) // absent
			continue
		}
		var start uint64
		if j > 0 {
			start = ends[j-1]
		}
		if start > ends[j] || ends[j] > uint64(len(p)) {
			h.Reset()
			h.Write(b)
			return h.Sum64()
		}
		lb := append(lenBuf[:0], 1)
		lb = binary.AppendUvarint(lb, ends[j]-start)
		h.Write(lb)
		h.Write(p[start:ends[j]])
	}
	return h.Sum64()
}

// valueBytes slices the j-th stored value out of a row's data, which the
// end offsets ends cut into values; ok is false when the offsets do not fit.
func valueBytes(data []byte, ends []uint64, j int) (b []byte, ok bool) {
	var start uint64
	if j > 0 {
		start = ends[j-1]
	}
	if start > ends[j] || ends[j] > uint64(len(data)) {
		return nil, false
	}
	return data[start:ends[j]:ends[j]], true
}

// absInt64 is |v| as a uint64 (math.MinInt64 included).
func absInt64(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}
