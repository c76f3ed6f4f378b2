package server

import (
	"encoding/binary"
	"math"
	"strconv"
	"unsafe"

	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	strsql "github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Collation ids reported in column definitions.
const (
	collationBinary  = 63  // "binary": numbers, dates, binary strings
	collationDefault = 255 // utf8mb4_0900_ai_ci, MySQL 8's default
)

// notFixedDecimals is what MySQL reports as the decimals of a FLOAT/DOUBLE
// or string column whose scale is not fixed.
const notFixedDecimals = 31

// wireType maps a SQL column type onto the vitess type that decides the
// column type code on the wire and the binary-protocol encoding of values.
func wireType(ft *ptypes.FieldType) querypb.Type {
	if ft == nil {
		return sqltypes.VarChar
	}
	unsigned := mysql.HasUnsignedFlag(ft.GetFlag())
	pick := func(signed, uns querypb.Type) querypb.Type {
		if unsigned {
			return uns
		}
		return signed
	}
	switch ft.GetType() {
	case mysql.TypeTiny:
		return pick(sqltypes.Int8, sqltypes.Uint8)
	case mysql.TypeShort:
		return pick(sqltypes.Int16, sqltypes.Uint16)
	case mysql.TypeInt24:
		return pick(sqltypes.Int24, sqltypes.Uint24)
	case mysql.TypeLong:
		return pick(sqltypes.Int32, sqltypes.Uint32)
	case mysql.TypeLonglong:
		return pick(sqltypes.Int64, sqltypes.Uint64)
	case mysql.TypeYear:
		return sqltypes.Year
	case mysql.TypeFloat:
		return sqltypes.Float32
	case mysql.TypeDouble:
		return sqltypes.Float64
	case mysql.TypeNewDecimal:
		return sqltypes.Decimal
	case mysql.TypeDate, mysql.TypeNewDate:
		return sqltypes.Date
	case mysql.TypeDatetime:
		return sqltypes.Datetime
	case mysql.TypeTimestamp:
		return sqltypes.Timestamp
	case mysql.TypeDuration:
		return sqltypes.Time
	case mysql.TypeBit:
		return sqltypes.Bit
	case mysql.TypeJSON:
		return sqltypes.TypeJSON
	case mysql.TypeEnum:
		return sqltypes.Enum
	case mysql.TypeSet:
		return sqltypes.Set
	case mysql.TypeNull:
		return sqltypes.Null
	case mysql.TypeGeometry:
		return sqltypes.Geometry
	case mysql.TypeString:
		if isBinaryString(ft) {
			return sqltypes.Binary
		}
		return sqltypes.Char
	case mysql.TypeTinyBlob, mysql.TypeBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		if isBinaryString(ft) {
			return sqltypes.Blob
		}
		return sqltypes.Text
	default: // TypeVarchar, TypeVarString and anything rendered as text
		if isBinaryString(ft) {
			return sqltypes.VarBinary
		}
		return sqltypes.VarChar
	}
}

// isBinaryString reports whether a string-class column holds bytes rather
// than characters (BINARY, VARBINARY, BLOB, or an explicit binary charset).
func isBinaryString(ft *ptypes.FieldType) bool {
	return ft.GetCharset() == charset.CharsetBin || ft.GetCollate() == charset.CollationBin
}

func isNumericWire(t querypb.Type) bool {
	return sqltypes.IsIntegral(t) || sqltypes.IsFloat(t) || t == sqltypes.Decimal
}

func isStringWire(t querypb.Type) bool {
	switch t {
	case sqltypes.VarChar, sqltypes.Char, sqltypes.Text, sqltypes.VarBinary, sqltypes.Binary,
		sqltypes.Blob, sqltypes.Enum, sqltypes.Set:
		return true
	}
	return false
}

// collationID is the collation id the column definition carries: 63 for
// everything that is not character data, the column's collation otherwise.
func collationID(ft *ptypes.FieldType, t querypb.Type) uint32 {
	if !isStringWire(t) && t != sqltypes.TypeJSON {
		return collationBinary
	}
	if ft == nil {
		return collationDefault
	}
	if isBinaryString(ft) {
		return collationBinary
	}
	name := ft.GetCollate()
	if name == "" && ft.GetCharset() != "" {
		if def, err := charset.GetDefaultCollation(ft.GetCharset()); err == nil {
			name = def
		}
	}
	if name != "" {
		if coll, err := charset.GetCollationByName(name); err == nil {
			return uint32(coll.ID)
		}
	}
	return collationDefault
}

// columnFlags computes the column definition flags: the column's own flags
// (NOT NULL, keys, UNSIGNED, AUTO_INCREMENT ...) plus the ones MySQL derives
// from the type. Internal TiDB flags above bit 15 are dropped.
func columnFlags(ft *ptypes.FieldType, t querypb.Type, coll uint32) uint32 {
	var flags uint
	if ft != nil {
		flags = ft.GetFlag() & (mysql.NumFlag - 1) // bits 0..14 are client-visible
	}
	if isNumericWire(t) {
		flags |= mysql.NumFlag
	}
	if coll == collationBinary {
		flags |= mysql.BinaryFlag
	}
	switch t {
	case sqltypes.Text, sqltypes.Blob:
		flags |= mysql.BlobFlag
	case sqltypes.Enum:
		flags |= mysql.EnumFlag
	case sqltypes.Set:
		flags |= mysql.SetFlag
	case sqltypes.Timestamp:
		flags |= mysql.TimestampFlag
	case sqltypes.Year:
		flags |= mysql.UnsignedFlag | mysql.ZerofillFlag
	}
	return uint32(flags)
}

// columnLength is the display length the column definition carries, in
// bytes of the column's character set (MySQL multiplies characters by the
// charset's maximum character width).
func columnLength(ft *ptypes.FieldType, t querypb.Type, coll uint32) uint32 {
	if ft == nil {
		return 0
	}
	flen := ft.GetFlen()
	if flen < 0 {
		flen, _ = mysql.GetDefaultFieldLengthAndDecimal(ft.GetType())
	}
	if flen < 0 {
		return 0
	}
	n := uint64(flen)
	if t == sqltypes.Decimal {
		// DECIMAL(p,s) is displayed with a decimal point and a sign.
		if ft.GetDecimal() > 0 {
			n++
		}
		if !mysql.HasUnsignedFlag(ft.GetFlag()) && flen > 0 {
			n++
		}
	}
	if isStringWire(t) && coll != collationBinary {
		width := uint64(4) // utf8mb4
		if cs, err := charset.GetCharsetInfo(ft.GetCharset()); err == nil && cs.Maxlen > 0 {
			width = uint64(cs.Maxlen)
		}
		n *= width
	}
	if n > math.MaxUint32 {
		n = math.MaxUint32
	}
	return uint32(n)
}

func columnDecimals(ft *ptypes.FieldType, t querypb.Type) uint32 {
	if ft == nil {
		return 0
	}
	if d := ft.GetDecimal(); d >= 0 {
		return uint32(d)
	}
	if sqltypes.IsFloat(t) || isStringWire(t) {
		return notFixedDecimals
	}
	return 0
}

// wireFields builds the column definitions for a result set.
func wireFields(cols []*strsql.Column) []*querypb.Field {
	fields := make([]*querypb.Field, len(cols))
	for i, col := range cols {
		t := wireType(col.Type)
		coll := collationID(col.Type, t)
		fields[i] = &querypb.Field{
			Name:         col.Name,
			OrgName:      col.OrgName,
			Table:        col.Table,
			OrgTable:     col.OrgTable,
			Database:     col.Database,
			Type:         t,
			Charset:      coll,
			ColumnLength: columnLength(col.Type, t, coll),
			Decimals:     columnDecimals(col.Type, t),
			Flags:        columnFlags(col.Type, t, coll),
		}
	}
	return fields
}

// rowEncoder turns rows of Datums into vitess values for one result set.
// Text protocol: every value is its MySQL text rendering. Binary protocol:
// the text is additionally normalized so that vitess can re-encode it in
// the fixed binary layout of the column's declared type (integers of the
// right width, IEEE floats, packed dates); a value that cannot be encoded
// as its column's type is an error, reported before anything is sent for
// the chunk holding it.
type rowEncoder struct {
	fields []*querypb.Field
	cols   []*strsql.Column
	binary bool
	// bufs holds the arena for the rendered values of the current chunk
	// and the slices that point into it. When it is the connection's
	// (reused), a chunk's values are only valid until the next encode:
	// that is for results the protocol library writes out before the
	// callback returns. A server-side cursor keeps a chunk's values until
	// COM_STMT_FETCH, so its encoder gets fresh buffers (nil reuse).
	bufs  *encodeBuffers
	fresh bool // every chunk gets new buffers (no reuse)
}

// encodeBuffers are a rowEncoder's arena and slices; a connection keeps
// one set between results.
type encodeBuffers struct {
	buf    []byte
	values []sqltypes.Value
	out    [][]sqltypes.Value
	spans  []valueSpan
}

type valueSpan struct{ start, end int }

// release drops buffers grown past retainedBufferLimit, so a huge result
// does not pin its memory for the rest of the connection.
func (b *encodeBuffers) release() {
	if cap(b.buf) > retainedBufferLimit || cap(b.values)*int(unsafe.Sizeof(sqltypes.Value{})) > retainedBufferLimit {
		*b = encodeBuffers{}
	}
}

// newRowEncoder returns an encoder for one result set; reuse, when not
// nil, is the connection's buffers (see rowEncoder.bufs).
func newRowEncoder(cols []*strsql.Column, fields []*querypb.Field, binary bool, reuse *encodeBuffers) *rowEncoder {
	if reuse == nil {
		return &rowEncoder{fields: fields, cols: cols, binary: binary, bufs: &encodeBuffers{}, fresh: true}
	}
	return &rowEncoder{fields: fields, cols: cols, binary: binary, bufs: reuse}
}

// encode converts rows into vitess rows, pointing into the encoder's arena.
func (e *rowEncoder) encode(rows [][]types.Datum) ([][]sqltypes.Value, error) {
	n := len(e.fields)
	b := e.bufs
	if e.fresh {
		*b = encodeBuffers{}
	}
	// The arena is sized up front: growing it by doubling allocated about
	// twice the bytes of a result (a quarter of all bytes allocated by
	// sysbench oltp_read_only).
	size := 0
	for _, row := range rows {
		for _, d := range row {
			size += d.TextSizeHint()
		}
	}
	if cap(b.buf) < size {
		b.buf = make([]byte, 0, max(size, 64))
	}
	b.buf = b.buf[:0]
	b.values = grown(b.values, len(rows)*n)
	b.out = grown(b.out, len(rows))
	// Offsets into the arena are recorded first and turned into slices at
	// the end, because the arena may move while it grows.
	b.spans = grown(b.spans, len(rows)*n)
	for r, row := range rows {
		if len(row) != n {
			return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "internal error: row has %d values for %d columns", len(row), n)
		}
		for c, d := range row {
			if d.IsNull() {
				b.spans[r*n+c] = valueSpan{-1, -1}
				continue
			}
			start := len(b.buf)
			var err error
			b.buf, err = e.appendValue(b.buf, c, d)
			if err != nil {
				return nil, err
			}
			b.spans[r*n+c] = valueSpan{start, len(b.buf)}
		}
	}
	for r := range rows {
		rowVals := b.values[r*n : (r+1)*n : (r+1)*n]
		for c := 0; c < n; c++ {
			sp := b.spans[r*n+c]
			if sp.start < 0 {
				rowVals[c] = sqltypes.NULL
				continue
			}
			rowVals[c] = sqltypes.MakeTrusted(e.fields[c].Type, b.buf[sp.start:sp.end:sp.end])
		}
		b.out[r] = rowVals
	}
	return b.out, nil
}

// grown returns s with length n, reusing its array when large enough.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func (e *rowEncoder) appendValue(buf []byte, col int, d types.Datum) ([]byte, error) {
	t := e.fields[col].Type
	ft := e.cols[col].Type
	if t == sqltypes.Bit {
		return appendBit(buf, d, ft)
	}
	if !e.binary {
		return d.AppendText(buf), nil
	}
	switch {
	case sqltypes.IsIntegral(t): // includes Year
		return appendBinaryInt(buf, d, t, ft)
	case sqltypes.IsFloat(t):
		f, err := d.ToFloat64()
		if err != nil {
			return nil, err
		}
		bits := 64
		if t == sqltypes.Float32 {
			bits = 32
		}
		return strconv.AppendFloat(buf, f, 'g', -1, bits), nil
	case t == sqltypes.Date || t == sqltypes.Datetime || t == sqltypes.Timestamp:
		if d.Kind() != types.KindTime {
			conv, err := types.Convert(d, ft)
			if err != nil {
				return nil, err
			}
			d = conv
		}
		if d.Kind() != types.KindTime {
			return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "internal error: %s value for a date column", d.Kind())
		}
		if tm := d.Time(); tm.IsZero() && tm.Hour() == 0 && tm.Minute() == 0 && tm.Second() == 0 && tm.Microsecond() == 0 {
			// The zero date goes on the wire with length 0, as MySQL
			// sends it: drivers read four zero bytes as a real date
			// (Go's as -0001-11-30).
			return buf, nil
		}
		return d.Time().Append(buf), nil
	default:
		return d.AppendText(buf), nil
	}
}

// appendBinaryInt renders an integer in decimal, checked against the range
// of the column's wire type (vitess packs it into 1, 2, 4 or 8 bytes).
func appendBinaryInt(buf []byte, d types.Datum, t querypb.Type, ft *ptypes.FieldType) ([]byte, error) {
	if sqltypes.IsUnsigned(t) {
		var v uint64
		switch d.Kind() {
		case types.KindUint64:
			v = d.Uint()
		case types.KindInt64:
			if d.Int() < 0 {
				return nil, outOfRange(t, d)
			}
			v = uint64(d.Int())
		default:
			var err error
			if v, err = d.ToUint64(); err != nil {
				return nil, err
			}
		}
		if v > unsignedMax(t) {
			return nil, outOfRange(t, d)
		}
		return strconv.AppendUint(buf, v, 10), nil
	}
	var v int64
	switch d.Kind() {
	case types.KindInt64:
		v = d.Int()
	case types.KindUint64:
		if d.Uint() > math.MaxInt64 {
			return nil, outOfRange(t, d)
		}
		v = int64(d.Uint())
	default:
		var err error
		if v, err = d.ToInt64(); err != nil {
			return nil, err
		}
	}
	lo, hi := signedRange(t)
	if v < lo || v > hi {
		return nil, outOfRange(t, d)
	}
	return strconv.AppendInt(buf, v, 10), nil
}

func outOfRange(t querypb.Type, d types.Datum) error {
	return sqlerr.New(sqlerr.ErWarnDataOutOfRange, "22003", "value %s out of range for a %s result column", d.String(), t.String())
}

func unsignedMax(t querypb.Type) uint64 {
	switch t {
	case sqltypes.Uint8:
		return math.MaxUint8
	case sqltypes.Uint16, sqltypes.Year:
		return math.MaxUint16
	case sqltypes.Uint24:
		return mysql.MaxUint24
	case sqltypes.Uint32:
		return math.MaxUint32
	}
	return math.MaxUint64
}

func signedRange(t querypb.Type) (int64, int64) {
	switch t {
	case sqltypes.Int8:
		return math.MinInt8, math.MaxInt8
	case sqltypes.Int16, sqltypes.Year:
		return math.MinInt16, math.MaxInt16
	case sqltypes.Int24:
		return mysql.MinInt24, mysql.MaxInt24
	case sqltypes.Int32:
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// appendBit renders a BIT(n) value the way MySQL sends it in both
// protocols: the raw big-endian bytes, (n+7)/8 of them.
func appendBit(buf []byte, d types.Datum, ft *ptypes.FieldType) ([]byte, error) {
	if d.Kind() == types.KindBytes || d.Kind() == types.KindString {
		return append(buf, d.Bytes()...), nil
	}
	v, err := d.ToUint64()
	if err != nil {
		return nil, err
	}
	width := 8
	if ft != nil && ft.GetFlen() > 0 {
		width = (ft.GetFlen() + 7) / 8
	}
	if width > 8 {
		width = 8
	}
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], v)
	return append(buf, be[8-width:]...), nil
}
