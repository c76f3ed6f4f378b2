// Package codec turns SQL values into bytes for storage: memcomparable keys
// (EncodeKey/DecodeKey, EncodeInt/DecodeInt for row handles) whose byte order
// is the SQL order, and compact row values (EncodeRow/DecodeRow) from which
// single columns decode cheaply.
//
// Contract with neighbours: the catalog/executor build table and index keys
// by appending EncodeKey/EncodeInt output to their own prefixes; kv orders
// keys byte-wise, so a range scan over encoded keys visits rows in SQL order.
// The order guarantee holds between values of one kind (and NULL, which sorts
// first): index columns hold values already passed through types.Convert, so
// all non-NULL values of a column share the column's kind, and a constant
// used to seek must be converted to the column's type first. Encoded keys are
// self-delimiting, so a tuple key is the concatenation of its columns and a
// prefix of the tuple is a byte prefix of the key.
//
// Decoded values alias the input bytes (strings are not copied): callers must
// not mutate an encoded buffer while datums decoded from it are alive.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/strata-db/strata/internal/sql/types"
)

// Key flag bytes: the first byte of every encoded key datum. NULL is the
// smallest so that NULLs sort first, as in MySQL.
const (
	flagNull    byte = 0x00
	flagBytes   byte = 0x01
	flagString  byte = 0x02
	flagInt     byte = 0x03
	flagUint    byte = 0x04
	flagFloat   byte = 0x05
	flagDecimal byte = 0x06
	flagTime    byte = 0x07
)

// ErrCorrupt reports bytes that are not a valid encoding.
var ErrCorrupt = errors.New("codec: corrupt encoding")

const signBit = uint64(1) << 63

// EncodeInt appends v as 8 big-endian bytes with the sign bit flipped, so
// byte order equals numeric order. Used for row handles.
func EncodeInt(buf []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(buf, uint64(v)^signBit)
}

// DecodeInt decodes an EncodeInt value and returns the remaining bytes.
func DecodeInt(b []byte) (int64, []byte, error) {
	if len(b) < 8 {
		return 0, nil, ErrCorrupt
	}
	return int64(binary.BigEndian.Uint64(b) ^ signBit), b[8:], nil
}

// EncodeKey appends the memcomparable encoding of ds to buf.
func EncodeKey(buf []byte, ds ...types.Datum) ([]byte, error) {
	for _, d := range ds {
		switch d.Kind() {
		case types.KindNull:
			buf = append(buf, flagNull)
		case types.KindInt64:
			buf = append(buf, flagInt)
			buf = EncodeInt(buf, d.Int())
		case types.KindUint64:
			buf = append(buf, flagUint)
			buf = binary.BigEndian.AppendUint64(buf, d.Uint())
		case types.KindFloat64:
			buf = append(buf, flagFloat)
			buf = binary.BigEndian.AppendUint64(buf, encodeFloatBits(d.Float()))
		case types.KindDecimal:
			buf = append(buf, flagDecimal)
			buf = encodeDecimalKey(buf, d.Decimal())
		case types.KindString:
			buf = append(buf, flagString)
			buf = encodeBytesKey(buf, d.Bytes())
		case types.KindBytes:
			buf = append(buf, flagBytes)
			buf = encodeBytesKey(buf, d.Bytes())
		case types.KindTime:
			buf = append(buf, flagTime)
			buf = binary.BigEndian.AppendUint64(buf, uint64(d.Time()))
		default:
			return nil, fmt.Errorf("codec: cannot encode datum of kind %v", d.Kind())
		}
	}
	return buf, nil
}

// DecodeKey decodes n datums from an EncodeKey encoding and returns the rest.
func DecodeKey(b []byte, n int) ([]types.Datum, []byte, error) {
	out := make([]types.Datum, 0, n)
	for i := 0; i < n; i++ {
		if len(b) == 0 {
			return nil, nil, ErrCorrupt
		}
		flag := b[0]
		b = b[1:]
		var d types.Datum
		switch flag {
		case flagNull:
		case flagInt:
			v, rest, err := DecodeInt(b)
			if err != nil {
				return nil, nil, err
			}
			d, b = types.NewInt(v), rest
		case flagUint:
			if len(b) < 8 {
				return nil, nil, ErrCorrupt
			}
			d, b = types.NewUint(binary.BigEndian.Uint64(b)), b[8:]
		case flagFloat:
			if len(b) < 8 {
				return nil, nil, ErrCorrupt
			}
			f := decodeFloatBits(binary.BigEndian.Uint64(b))
			if math.IsNaN(f) {
				// No SQL value is NaN, and NaN has no place in key order.
				return nil, nil, ErrCorrupt
			}
			d, b = types.NewFloat(f), b[8:]
		case flagDecimal:
			dec, rest, err := decodeDecimalKey(b)
			if err != nil {
				return nil, nil, err
			}
			// Only the encoder's own output is a decimal key: digits with
			// a leading or trailing zero, a sign without digits or a scale
			// past DECIMAL's would otherwise decode to a value whose key is
			// different bytes.
			if used := b[:len(b)-len(rest)]; string(encodeDecimalKey(nil, dec)) != string(used) {
				return nil, nil, ErrCorrupt
			}
			d, b = types.NewDecimal(dec), rest
		case flagString, flagBytes:
			v, rest, err := decodeBytesKey(b)
			if err != nil {
				return nil, nil, err
			}
			if flag == flagString {
				d = types.NewStringBytes(v)
			} else {
				d = types.NewBytes(v)
			}
			b = rest
		case flagTime:
			if len(b) < 8 {
				return nil, nil, ErrCorrupt
			}
			d, b = types.NewTime(types.Time(binary.BigEndian.Uint64(b))), b[8:]
		default:
			return nil, nil, ErrCorrupt
		}
		out = append(out, d)
	}
	return out, b, nil
}

// encodeFloatBits maps a float64 to a uint64 whose order is the float order:
// positive numbers get the sign bit set, negative numbers are inverted.
func encodeFloatBits(f float64) uint64 {
	if f == 0 {
		f = 0 // fold -0 into +0: they are equal in SQL
	}
	u := math.Float64bits(f)
	if f >= 0 {
		return u | signBit
	}
	return ^u
}

func decodeFloatBits(u uint64) float64 {
	if u&signBit != 0 {
		return math.Float64frombits(u &^ signBit)
	}
	return math.Float64frombits(^u)
}

// Byte strings are encoded in groups of 8 bytes, each followed by a marker
// 0xFF minus the number of padding zero bytes in the group. The final group
// is always present (possibly all padding), which makes the encoding
// prefix-free and order-preserving: "ab" < "ab\x00" < "abc".
const (
	groupSize = 8
	groupMark = 0xFF
)

func encodeBytesKey(buf, v []byte) []byte {
	for {
		if len(v) >= groupSize {
			buf = append(buf, v[:groupSize]...)
			buf = append(buf, groupMark)
			v = v[groupSize:]
			continue
		}
		pad := groupSize - len(v)
		buf = append(buf, v...)
		for i := 0; i < pad; i++ {
			buf = append(buf, 0)
		}
		return append(buf, byte(groupMark-pad))
	}
}

// zeroPadding reports whether the padding of a final group is all zero
// bytes, as encodeBytesKey writes it. Other padding is not an encoding of
// any value: accepting it would let two different keys decode to the same
// string.
func zeroPadding(pad []byte) bool {
	for _, c := range pad {
		if c != 0 {
			return false
		}
	}
	return true
}

func decodeBytesKey(b []byte) ([]byte, []byte, error) {
	// Fast path: a single group decodes without copying.
	if len(b) >= groupSize+1 && b[groupSize] != groupMark {
		pad := int(groupMark - b[groupSize])
		if pad > groupSize || !zeroPadding(b[groupSize-pad:groupSize]) {
			return nil, nil, ErrCorrupt
		}
		return b[: groupSize-pad : groupSize-pad], b[groupSize+1:], nil
	}
	var out []byte
	for {
		if len(b) < groupSize+1 {
			return nil, nil, ErrCorrupt
		}
		mark := b[groupSize]
		if mark == groupMark {
			out = append(out, b[:groupSize]...)
			b = b[groupSize+1:]
			continue
		}
		pad := int(groupMark - mark)
		if pad > groupSize || !zeroPadding(b[groupSize-pad:groupSize]) {
			return nil, nil, ErrCorrupt
		}
		out = append(out, b[:groupSize-pad]...)
		return out, b[groupSize+1:], nil
	}
}

// Decimal keys: a sign byte (1 negative, 2 zero, 3 positive); for nonzero
// values the decimal exponent E (value = 0.DIGITS x 10^E) as a sign-flipped
// int32 and the significant digits as bytes 1..10 ended by 0, both inverted
// for negative numbers; then one byte holding the scale, which does not
// affect order between unequal values and lets decoding restore 1.50 as 1.50.
const (
	decNeg  byte = 1
	decZero byte = 2
	decPos  byte = 3
)

func encodeDecimalKey(buf []byte, d *types.Decimal) []byte {
	scale := byte(d.Scale())
	if d.IsZero() {
		return append(buf, decZero, scale)
	}
	s := d.Abs().Normalize().String()
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i+1:]
	}
	var digits string
	var exp int
	if intPart != "0" {
		exp = len(intPart)
		digits = strings.TrimRight(intPart+frac, "0")
	} else {
		lead := len(frac) - len(strings.TrimLeft(frac, "0"))
		exp = -lead
		digits = frac[lead:]
	}
	neg := d.Sign() < 0
	var inv byte
	if neg {
		inv = 0xFF
		buf = append(buf, decNeg)
	} else {
		buf = append(buf, decPos)
	}
	e := uint32(int32(exp)) ^ (1 << 31)
	if neg {
		e = ^e
	}
	buf = binary.BigEndian.AppendUint32(buf, e)
	for i := 0; i < len(digits); i++ {
		buf = append(buf, (digits[i]-'0'+1)^inv)
	}
	buf = append(buf, 0^inv)
	return append(buf, scale)
}

func decodeDecimalKey(b []byte) (*types.Decimal, []byte, error) {
	if len(b) < 2 {
		return nil, nil, ErrCorrupt
	}
	sign := b[0]
	b = b[1:]
	if sign == decZero {
		d, err := types.ParseDecimal("0")
		if err != nil {
			return nil, nil, err
		}
		return d.Round(int(b[0])), b[1:], nil
	}
	if sign != decNeg && sign != decPos || len(b) < 4 {
		return nil, nil, ErrCorrupt
	}
	neg := sign == decNeg
	var inv byte
	e := binary.BigEndian.Uint32(b)
	if neg {
		inv = 0xFF
		e = ^e
	}
	exp := int(int32(e ^ (1 << 31)))
	b = b[4:]
	var sb strings.Builder
	if neg {
		sb.WriteByte('-')
	}
	sb.WriteString("0.")
	for {
		if len(b) == 0 {
			return nil, nil, ErrCorrupt
		}
		c := b[0] ^ inv
		b = b[1:]
		if c == 0 {
			break
		}
		if c > 10 {
			return nil, nil, ErrCorrupt
		}
		sb.WriteByte('0' + c - 1)
	}
	if len(b) < 1 {
		return nil, nil, ErrCorrupt
	}
	scale := int(b[0])
	b = b[1:]
	fmt.Fprintf(&sb, "e%d", exp)
	d, err := types.ParseDecimal(sb.String())
	if err != nil {
		return nil, nil, ErrCorrupt
	}
	return d.Round(scale), b, nil
}
