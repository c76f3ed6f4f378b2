package types

import (
	"math"
	"strconv"

	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// The To* conversions implement MySQL's implicit casts in expressions. They
// always return a usable best-effort value (MySQL's: '12abc' -> 12, 'abc' -> 0,
// out-of-range -> clipped). A non-nil error describes a lossy conversion as a
// *sqlerr.Error (1292 truncated value, 1690 out of range); expressions record
// it as a warning, strict callers may reject it.

func errTruncated(typeName string, d Datum) *sqlerr.Error {
	return sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Truncated incorrect %s value: '%s'", typeName, string(d.b()))
}

// ErrOutOfRange builds MySQL's error 1690 for a value outside a type's range.
func ErrOutOfRange(typeName, expr string) *sqlerr.Error {
	return sqlerr.New(1690, "22003", "%s value is out of range in '%s'", typeName, expr)
}

// scanNumber returns the length of the longest prefix of s (after leading
// spaces, which are included) that is a decimal/float literal, and whether it
// contains any digit.
func scanNumber(s []byte) (int, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits = true
	}
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
			digits = true
		}
		if digits {
			i = j
		}
	}
	if !digits {
		return 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			i = k
		}
	}
	return i, true
}

// onlySpaces reports whether b is empty or all whitespace.
func onlySpaces(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// stringToFloat parses the numeric prefix of b; complete is false when some
// non-space text was ignored.
func stringToFloat(b []byte) (v float64, complete bool) {
	n, ok := scanNumber(b)
	if !ok {
		return 0, onlySpaces(b) && len(b) > 0
	}
	v, err := strconv.ParseFloat(trimLeftSpace(string(b[:n])), 64)
	if err != nil {
		// Overflow: ParseFloat returns ±Inf; MySQL clips to ±DBL_MAX.
		if math.IsInf(v, 1) {
			v = math.MaxFloat64
		} else if math.IsInf(v, -1) {
			v = -math.MaxFloat64
		}
	}
	return v, onlySpaces(b[n:])
}

// stringToDecimal parses the numeric prefix of b exactly.
func stringToDecimal(b []byte) (*Decimal, bool) {
	n, ok := scanNumber(b)
	if !ok {
		return &Decimal{}, onlySpaces(b) && len(b) > 0
	}
	d, _, _ := parseDecimalPrefix(trimLeftSpace(string(b[:n])))
	return d, onlySpaces(b[n:])
}

func trimLeftSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
		s = s[1:]
	}
	return s
}

// ToInt64 converts d to a signed integer, rounding half away from zero.
func (d Datum) ToInt64() (int64, error) {
	switch d.k {
	case KindNull:
		return 0, nil
	case KindInt64:
		return d.i, nil
	case KindUint64:
		if d.i < 0 {
			return math.MaxInt64, ErrOutOfRange("BIGINT", d.String())
		}
		return d.i, nil
	case KindFloat64:
		return floatToInt64(d.Float())
	case KindDecimal:
		v, ok := d.dec().Int64()
		if !ok {
			return v, ErrOutOfRange("BIGINT", d.dec().String())
		}
		return v, nil
	case KindString, KindBytes:
		dec, complete := stringToDecimal(d.b())
		v, ok := dec.Int64()
		if !ok {
			return v, ErrOutOfRange("BIGINT", string(d.b()))
		}
		if !complete {
			return v, errTruncated("INTEGER", d)
		}
		return v, nil
	case KindTime:
		return d.Time().ToNumber().ToInt64()
	case KindDuration:
		return durationToNumber(d.Duration()).ToInt64()
	}
	return 0, nil
}

func floatToInt64(f float64) (int64, error) {
	r := math.Round(f)
	if math.IsNaN(r) {
		return 0, ErrOutOfRange("BIGINT", strconv.FormatFloat(f, 'g', -1, 64))
	}
	if r < -9223372036854775808.0 {
		return math.MinInt64, ErrOutOfRange("BIGINT", strconv.FormatFloat(f, 'g', -1, 64))
	}
	if r >= 9223372036854775808.0 {
		return math.MaxInt64, ErrOutOfRange("BIGINT", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return int64(r), nil
}

// ToUint64 converts d to an unsigned integer, rounding half away from zero;
// negative values clip to 0 with an out-of-range error.
func (d Datum) ToUint64() (uint64, error) {
	switch d.k {
	case KindNull:
		return 0, nil
	case KindInt64:
		if d.i < 0 {
			return 0, ErrOutOfRange("BIGINT UNSIGNED", d.String())
		}
		return uint64(d.i), nil
	case KindUint64:
		return uint64(d.i), nil
	case KindFloat64:
		f := math.Round(d.Float())
		if f < 0 || math.IsNaN(f) {
			return 0, ErrOutOfRange("BIGINT UNSIGNED", d.String())
		}
		if f >= 18446744073709551616.0 {
			return math.MaxUint64, ErrOutOfRange("BIGINT UNSIGNED", d.String())
		}
		return uint64(f), nil
	case KindDecimal:
		v, ok := d.dec().Uint64()
		if !ok {
			return v, ErrOutOfRange("BIGINT UNSIGNED", d.dec().String())
		}
		return v, nil
	case KindString, KindBytes:
		dec, complete := stringToDecimal(d.b())
		v, ok := dec.Uint64()
		if !ok {
			return v, ErrOutOfRange("BIGINT UNSIGNED", string(d.b()))
		}
		if !complete {
			return v, errTruncated("INTEGER", d)
		}
		return v, nil
	case KindTime:
		return d.Time().ToNumber().ToUint64()
	case KindDuration:
		return durationToNumber(d.Duration()).ToUint64()
	}
	return 0, nil
}

// ToFloat64 converts d to a double.
func (d Datum) ToFloat64() (float64, error) {
	switch d.k {
	case KindNull:
		return 0, nil
	case KindInt64:
		return float64(d.i), nil
	case KindUint64:
		return float64(uint64(d.i)), nil
	case KindFloat64:
		return d.Float(), nil
	case KindDecimal:
		return d.dec().Float64(), nil
	case KindString, KindBytes:
		v, complete := stringToFloat(d.b())
		if !complete {
			return v, errTruncated("DOUBLE", d)
		}
		return v, nil
	case KindTime:
		return d.Time().ToNumber().ToFloat64()
	case KindDuration:
		return durationToNumber(d.Duration()).ToFloat64()
	}
	return 0, nil
}

// ToDecimal converts d to an exact decimal (NULL gives 0).
func (d Datum) ToDecimal() (*Decimal, error) {
	switch d.k {
	case KindInt64:
		return NewDecimalFromInt(d.i), nil
	case KindUint64:
		return NewDecimalFromUint(uint64(d.i)), nil
	case KindFloat64:
		dec, err := NewDecimalFromFloat(d.Float())
		if err != nil {
			return &Decimal{}, ErrOutOfRange("DECIMAL", d.String())
		}
		return dec, nil
	case KindDecimal:
		return d.dec(), nil
	case KindString, KindBytes:
		dec, complete := stringToDecimal(d.b())
		if !complete {
			return dec, errTruncated("DECIMAL", d)
		}
		return dec, nil
	case KindTime:
		return d.Time().ToNumber().ToDecimal()
	case KindDuration:
		return durationToNumber(d.Duration()).ToDecimal()
	}
	return &Decimal{}, nil
}

// ToString renders d as text (the text-protocol form); NULL gives "".
func (d Datum) ToString() (string, error) {
	switch d.k {
	case KindNull:
		return "", nil
	case KindString, KindBytes:
		return string(d.b()), nil
	}
	return string(d.AppendText(nil)), nil
}

// ToBool evaluates d as a WHERE/HAVING/ON condition: NULL is unknown,
// numbers are true when nonzero, strings are converted to DOUBLE first.
func (d Datum) ToBool() (isTrue bool, isNull bool, err error) {
	switch d.k {
	case KindNull:
		return false, true, nil
	case KindInt64, KindUint64:
		return d.i != 0, false, nil
	case KindFloat64:
		return d.Float() != 0, false, nil
	case KindDecimal:
		return !d.dec().IsZero(), false, nil
	case KindString, KindBytes:
		f, err := d.ToFloat64()
		return f != 0, false, err
	case KindTime:
		return !d.Time().IsZero(), false, nil
	case KindDuration:
		m, _ := d.Duration()
		return m != 0, false, nil
	}
	return false, false, nil
}
