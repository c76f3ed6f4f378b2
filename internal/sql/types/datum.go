// Package types holds SQL values (Datum) with MySQL semantics: comparison
// (Compare), conversion for expressions (ToInt64, ToFloat64, ToDecimal,
// ToString, ToBool) and for storing into a column (Convert, strict sql_mode),
// text-protocol rendering (AppendText) and group/hash keys (AppendHashKey).
//
// Column types are the parser's *ptypes.FieldType; this package never
// defines a second one. Exact numbers are Decimal (fixed point, MySQL's
// scale rules); DATE/DATETIME/TIMESTAMP are Time (64-bit packed, ordered).
//
// Contract with neighbours: codec stores and restores Datums without loss
// (kind included); expr builds arithmetic on Decimal and the To* conversions;
// the executor reports errors from Convert to the client unchanged (they are
// *sqlerr.Error with MySQL codes). Datums are values: byte slices and
// *Decimal are shared, never mutated after construction.
package types

import (
	"math"
	"unsafe"
)

// Kind is the runtime kind of a Datum.
type Kind uint8

const (
	KindNull Kind = iota
	KindInt64
	KindUint64
	KindFloat64
	KindDecimal
	KindString   // text; Compare is byte-wise, CompareCollated orders it by a collation
	KindBytes    // binary strings and BLOB
	KindTime     // DATE, DATETIME, TIMESTAMP (see Time)
	KindDuration // TIME (see duration.go)
)

// Datum is one SQL value. The zero Datum is NULL. Datums are small values
// passed by value; the byte slice of a string is shared, never mutated.
//
// A Datum is 24 bytes: the kind, one integer word and one pointer word.
// Strings and binary values keep their bytes' address in p and their
// length in i (a slice header without its capacity); a decimal keeps its
// *Decimal in p. Rows are slices of Datums, and a row-sized slab of them
// is allocated for every batch a scan reads: at 48 bytes (a separate
// slice header and decimal pointer) the slabs were a fifth of the bytes
// allocated under sysbench oltp_read_only.
type Datum struct {
	k Kind
	i int64          // KindInt64, KindUint64 (bit pattern), KindFloat64 (bits), KindTime (packed); the length of a string
	p unsafe.Pointer // KindString, KindBytes: the first byte; KindDecimal: the *Decimal
}

// bytesDatum returns a Datum of kind k sharing b.
func bytesDatum(k Kind, b []byte) Datum {
	return Datum{k: k, i: int64(len(b)), p: unsafe.Pointer(unsafe.SliceData(b))}
}

// b returns the bytes of a string or binary Datum (nil for other kinds).
// Its capacity is its length, so appending to it never writes into the
// shared bytes.
func (d Datum) b() []byte {
	if (d.k != KindString && d.k != KindBytes) || d.p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(d.p), int(d.i))
}

// dec returns the *Decimal of a decimal Datum (nil for other kinds).
func (d Datum) dec() *Decimal {
	if d.k != KindDecimal {
		return nil
	}
	return (*Decimal)(d.p)
}

// Kind returns the kind of d.
func (d Datum) Kind() Kind { return d.k }

// IsNull reports whether d is SQL NULL.
func (d Datum) IsNull() bool { return d.k == KindNull }

// Null is the SQL NULL value.
var Null = Datum{}

// NewInt returns a signed integer datum.
func NewInt(v int64) Datum { return Datum{k: KindInt64, i: v} }

// NewUint returns an unsigned integer datum.
func NewUint(v uint64) Datum { return Datum{k: KindUint64, i: int64(v)} }

// NewString returns a text datum that shares s.
func NewString(s string) Datum { return bytesDatum(KindString, []byte(s)) }

// NewStringBytes returns a text datum that shares b.
func NewStringBytes(b []byte) Datum { return bytesDatum(KindString, b) }

// NewBytes returns a binary datum that shares b.
func NewBytes(b []byte) Datum { return bytesDatum(KindBytes, b) }

// NewDecimal returns a decimal datum.
func NewDecimal(v *Decimal) Datum { return Datum{k: KindDecimal, p: unsafe.Pointer(v)} }

// Int returns the int64 payload (valid for KindInt64).
func (d Datum) Int() int64 { return d.i }

// Uint returns the uint64 payload (valid for KindUint64).
func (d Datum) Uint() uint64 { return uint64(d.i) }

// Bytes returns the byte payload (valid for KindString and KindBytes).
func (d Datum) Bytes() []byte { return d.b() }

// WithBytes returns a Datum of d's kind, which must be KindString or
// KindBytes, holding b instead of d's bytes (a copy of them, when the
// caller moves a value out of a buffer it will reuse).
func (d Datum) WithBytes(b []byte) Datum { return bytesDatum(d.k, b) }

// Decimal returns the decimal payload (valid for KindDecimal).
func (d Datum) Decimal() *Decimal { return d.dec() }

// NewFloat returns a DOUBLE datum.
func NewFloat(v float64) Datum { return Datum{k: KindFloat64, i: int64(math.Float64bits(v))} }

// Float returns the float64 payload (valid for KindFloat64).
func (d Datum) Float() float64 { return math.Float64frombits(uint64(d.i)) }

// NewTime returns a DATE/DATETIME/TIMESTAMP datum.
func NewTime(t Time) Datum { return Datum{k: KindTime, i: int64(t)} }

// Time returns the time payload (valid for KindTime).
func (d Datum) Time() Time { return Time(d.i) }

// NewBool returns 1 or 0 as a signed integer, MySQL's boolean.
func NewBool(b bool) Datum {
	if b {
		return Datum{k: KindInt64, i: 1}
	}
	return Datum{k: KindInt64}
}

// IsNumeric reports whether d is an integer, float or decimal.
func (d Datum) IsNumeric() bool {
	return d.k == KindInt64 || d.k == KindUint64 || d.k == KindFloat64 || d.k == KindDecimal
}

// IsStringLike reports whether d is text or binary.
func (d Datum) IsStringLike() bool { return d.k == KindString || d.k == KindBytes }

// String renders d for debugging and tests: NULL, or the text-protocol form.
func (d Datum) String() string {
	if d.k == KindNull {
		return "NULL"
	}
	return string(d.AppendText(nil))
}

// String returns the name of the kind.
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindInt64:
		return "int"
	case KindUint64:
		return "uint"
	case KindFloat64:
		return "float"
	case KindDecimal:
		return "decimal"
	case KindString:
		return "string"
	case KindBytes:
		return "bytes"
	case KindTime:
		return "time"
	case KindDuration:
		return "duration"
	}
	return "kind?"
}
