package types

import (
	"math"
	"strconv"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
)

// AppendText appends d as MySQL's text protocol renders it (what the mysql
// CLI prints): integers in decimal, DECIMAL with exactly its scale, DOUBLE in
// the shortest form that round-trips (exponent form like 1e20 at or beyond
// 1e15 and below 1e-15, as MySQL), times as 2006-01-02 15:04:05[.ffffff],
// strings as their bytes. NULL appends nothing: the protocol encodes NULL
// separately.
func (d Datum) AppendText(buf []byte) []byte {
	switch d.k {
	case KindInt64:
		return strconv.AppendInt(buf, d.i, 10)
	case KindUint64:
		return strconv.AppendUint(buf, uint64(d.i), 10)
	case KindFloat64:
		return AppendFloat(buf, d.Float(), 64)
	case KindDecimal:
		return d.dec().Append(buf)
	case KindString, KindBytes:
		return append(buf, d.b()...)
	case KindTime:
		return d.Time().Append(buf)
	}
	return buf
}

// TextSizeHint is about how many bytes AppendText appends for d: exact for
// strings and bytes, an upper bound for numbers and times (a decimal may
// exceed it). Callers size buffers with it so that appending does not grow
// them again and again.
func (d Datum) TextSizeHint() int {
	switch d.k {
	case KindString, KindBytes:
		return len(d.b())
	case KindNull:
		return 0
	}
	return 32
}

// AppendFloat renders f like MySQL: the shortest digits that round-trip at
// the given bit size (32 for FLOAT, 64 for DOUBLE), fixed notation for
// 1e-15 <= |f| < 1e15 and otherwise mantissa 'e' exponent without '+'
// (1e15, 1.5e-16).
func AppendFloat(buf []byte, f float64, bitSize int) []byte {
	if f == 0 {
		return append(buf, '0')
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		// SQL arithmetic refuses to produce these (out of range), but a
		// value decoded from elsewhere must still render, not panic.
		return strconv.AppendFloat(buf, f, 'g', -1, bitSize)
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, bitSize)
	// e looks like -1.2345e+20: split mantissa and exponent.
	p := len(e) - 1
	for e[p] != 'e' {
		p--
	}
	exp, _ := strconv.Atoi(string(e[p+1:]))
	if exp >= -15 && exp < 15 {
		return strconv.AppendFloat(buf, f, 'f', -1, bitSize)
	}
	buf = append(buf, e[:p]...)
	buf = append(buf, 'e')
	return strconv.AppendInt(buf, int64(exp), 10)
}

// notFixedDec is MySQL's NOT_FIXED_DEC: a DOUBLE/FLOAT decimals value of 31
// (or more) means "no fixed number of decimals".
const notFixedDec = 31

// AppendTextAs appends d as MySQL renders a value of column type ft in the
// text protocol. It differs from AppendText for approximate numbers only:
// a FLOAT column shows 6 significant digits (FLT_DIG), and a FLOAT(M,D),
// DOUBLE(M,D) or function result with fixed decimals (PI() has 6) shows
// exactly D decimals. A nil ft behaves like AppendText.
func (d Datum) AppendTextAs(buf []byte, ft *ptypes.FieldType) []byte {
	if d.k != KindFloat64 || ft == nil {
		return d.AppendText(buf)
	}
	f := d.Float()
	if dec := ft.GetDecimal(); dec >= 0 && dec < notFixedDec {
		return strconv.AppendFloat(buf, f, 'f', dec, 64)
	}
	if ft.GetType() == mysql.TypeFloat {
		rounded, err := strconv.ParseFloat(strconv.FormatFloat(f, 'e', 5, 64), 64)
		if err == nil {
			f = rounded
		}
	}
	return AppendFloat(buf, f, 64)
}
