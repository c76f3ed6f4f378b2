package types

import (
	"bytes"
	"math"

	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// Compare orders a and b with MySQL's comparison rules and returns -1, 0 or
// +1. NULL sorts before every value and equals NULL (three-valued logic is
// the caller's job). Mixed kinds are compared as MySQL does:
//
//   - integer vs integer (signed or not): exactly;
//   - integer or decimal vs decimal: exactly, as decimals;
//   - anything numeric vs a float, or a number vs a string: as DOUBLE;
//   - string vs string: byte-wise (binary collation; CompareCollated
//     applies another);
//   - time vs time: by moment; time vs string: the string is parsed as a
//     datetime (compared as text if it does not parse);
//   - time vs number: the time's numeric form (YYYYMMDDhhmmss).
//
// The error is reserved for incomparable values; today every pair compares.
func Compare(a, b Datum) (int, error) {
	if a.k == KindNull || b.k == KindNull {
		switch {
		case a.k == b.k:
			return 0, nil
		case a.k == KindNull:
			return -1, nil
		}
		return 1, nil
	}
	switch a.k {
	case KindInt64:
		switch b.k {
		case KindInt64:
			return cmpInt64(a.i, b.i), nil
		case KindUint64:
			if a.i < 0 {
				return -1, nil
			}
			return cmpUint64(uint64(a.i), uint64(b.i)), nil
		case KindDecimal:
			return NewDecimalFromInt(a.i).Cmp(b.dec()), nil
		}
	case KindUint64:
		switch b.k {
		case KindInt64:
			if b.i < 0 {
				return 1, nil
			}
			return cmpUint64(uint64(a.i), uint64(b.i)), nil
		case KindUint64:
			return cmpUint64(uint64(a.i), uint64(b.i)), nil
		case KindDecimal:
			return NewDecimalFromUint(uint64(a.i)).Cmp(b.dec()), nil
		}
	case KindDecimal:
		switch b.k {
		case KindInt64:
			return a.dec().Cmp(NewDecimalFromInt(b.i)), nil
		case KindUint64:
			return a.dec().Cmp(NewDecimalFromUint(uint64(b.i))), nil
		case KindDecimal:
			return a.dec().Cmp(b.dec()), nil
		}
	case KindString, KindBytes:
		switch b.k {
		case KindString, KindBytes:
			return bytes.Compare(a.b(), b.b()), nil
		case KindTime:
			return -compareTimeString(b.Time(), a), nil
		}
	case KindDuration:
		return compareDuration(a, b), nil
	case KindTime:
		switch b.k {
		case KindTime:
			return a.Time().Compare(b.Time()), nil
		case KindString, KindBytes:
			return compareTimeString(a.Time(), b), nil
		default:
			return Compare(a.Time().ToNumber(), b)
		}
	}
	if b.k == KindTime {
		return Compare(a, b.Time().ToNumber())
	}
	if b.k == KindDuration {
		return -compareDuration(b, a), nil
	}
	// Remaining pairs involve a float, or a number and a string: DOUBLE.
	af, _ := a.ToFloat64()
	bf, _ := b.ToFloat64()
	return cmpFloat(af, bf), nil
}

func compareTimeString(t Time, s Datum) int {
	// Parse as DATETIME even for a DATE operand: DATE '2020-01-01' is not
	// equal to '2020-01-01 10:00:00'.
	parsed, err := ParseTime(string(s.b()), mysql.TypeDatetime, MaxFsp)
	if err != nil {
		return bytes.Compare(t.Append(nil), s.b())
	}
	return t.Compare(parsed)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	}
	// NaN cannot be stored in MySQL; order it first for determinism.
	if math.IsNaN(a) && !math.IsNaN(b) {
		return -1
	}
	if !math.IsNaN(a) && math.IsNaN(b) {
		return 1
	}
	return 0
}

// AppendHashKey appends a key for GROUP BY, DISTINCT and hash joins such
// that values which Compare equal produce equal bytes: 1, 1.0 (DOUBLE) and
// 1.00 (DECIMAL) share one key; DATE '2020-01-01' and DATETIME
// '2020-01-01 00:00:00' share one key. Keys of several datums may be
// concatenated: each is self-delimiting. Strings are hashed byte-wise
// (AppendHashKeyCollated keys text by a collation).
func (d Datum) AppendHashKey(buf []byte) []byte {
	switch d.k {
	case KindNull:
		return append(buf, 'n')
	case KindInt64:
		return appendHashInt(buf, d.i)
	case KindUint64:
		if d.i >= 0 {
			return appendHashInt(buf, d.i)
		}
		return appendHashUint(buf, uint64(d.i))
	case KindFloat64:
		f := d.Float()
		if f == math.Trunc(f) && f >= -9223372036854775808.0 && f < 9223372036854775808.0 {
			return appendHashInt(buf, int64(f))
		}
		if f == math.Trunc(f) && f >= 0 && f < 18446744073709551616.0 {
			return appendHashUint(buf, uint64(f))
		}
		dec, err := NewDecimalFromFloat(f)
		if err != nil {
			return append(buf, 'N')
		}
		return appendHashDecimal(buf, dec)
	case KindDecimal:
		if d.dec().IsInteger() {
			r := d.dec().Truncate(0)
			if r.big == nil {
				return appendHashInt(buf, r.small)
			}
			if r.big.IsUint64() {
				return appendHashUint(buf, r.big.Uint64())
			}
		}
		return appendHashDecimal(buf, d.dec())
	case KindString, KindBytes:
		buf = append(buf, 's')
		buf = appendUvarint(buf, uint64(len(d.b())))
		return append(buf, d.b()...)
	case KindTime:
		v := uint64(d.i) >> 5
		return append(buf, 't', byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	case KindDuration:
		v := uint64(d.i >> 3)
		return append(buf, 'D', byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return buf
}

func appendHashInt(buf []byte, v int64) []byte {
	u := uint64(v)
	return append(buf, 'i', byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

func appendHashUint(buf []byte, u uint64) []byte {
	return append(buf, 'u', byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32), byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

func appendHashDecimal(buf []byte, d *Decimal) []byte {
	n := d.Normalize()
	var tmp [64]byte
	s := n.Append(tmp[:0])
	buf = append(buf, 'd')
	buf = appendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func appendUvarint(buf []byte, v uint64) []byte {
	for v >= 0x80 {
		buf = append(buf, byte(v)|0x80)
		v >>= 7
	}
	return append(buf, byte(v))
}
