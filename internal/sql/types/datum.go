// Package types holds SQL values (Datum) and column types (FieldType) with
// MySQL semantics: comparison, conversion, arithmetic and formatting.
package types

// Kind is the runtime kind of a Datum.
type Kind uint8

const (
	KindNull Kind = iota
	KindInt64
	KindUint64
	KindFloat64
	KindDecimal
	KindString // text; collation-aware comparison is case-sensitive binary for now
	KindBytes  // binary strings and BLOB
	KindTime   // DATE, DATETIME, TIMESTAMP (see Time)
)

// Datum is one SQL value. The zero Datum is NULL. Datums are small values
// passed by value; the byte slice of a string is shared, never mutated.
type Datum struct {
	k   Kind
	i   int64    // KindInt64, KindUint64 (bit pattern), KindFloat64 (bits), KindTime (packed)
	b   []byte   // KindString, KindBytes
	dec *Decimal // KindDecimal
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
func NewString(s string) Datum { return Datum{k: KindString, b: []byte(s)} }

// NewStringBytes returns a text datum that shares b.
func NewStringBytes(b []byte) Datum { return Datum{k: KindString, b: b} }

// NewBytes returns a binary datum that shares b.
func NewBytes(b []byte) Datum { return Datum{k: KindBytes, b: b} }

// NewDecimal returns a decimal datum.
func NewDecimal(v *Decimal) Datum { return Datum{k: KindDecimal, dec: v} }

// Int returns the int64 payload (valid for KindInt64).
func (d Datum) Int() int64 { return d.i }

// Uint returns the uint64 payload (valid for KindUint64).
func (d Datum) Uint() uint64 { return uint64(d.i) }

// Bytes returns the byte payload (valid for KindString and KindBytes).
func (d Datum) Bytes() []byte { return d.b }

// Decimal returns the decimal payload (valid for KindDecimal).
func (d Datum) Decimal() *Decimal { return d.dec }
