package types

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Decimal limits, as in MySQL: DECIMAL(65,30) is the widest column type and
// arithmetic results never carry more than 30 fractional digits.
const (
	MaxDecimalPrecision = 65
	MaxDecimalScale     = 30
	// DivPrecisionIncrement is MySQL's div_precision_increment default: the
	// scale of a/b is scale(a)+4.
	DivPrecisionIncrement = 4
)

// ErrBadDecimal is returned by ParseDecimal for text that is not a number.
var ErrBadDecimal = errors.New("invalid decimal literal")

// Decimal is an exact fixed-point number: unscaled * 10^-scale. A Decimal is
// immutable once built; every operation returns a new value, so Datums may
// share one freely.
type Decimal struct {
	unscaled big.Int
	scale    int32 // >= 0
}

var pow10Cache = func() []*big.Int {
	out := make([]*big.Int, 100)
	v := big.NewInt(1)
	for i := range out {
		out[i] = new(big.Int).Set(v)
		v.Mul(v, big.NewInt(10))
	}
	return out
}()

func pow10(n int) *big.Int {
	if n < len(pow10Cache) {
		return pow10Cache[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

var bigOne = big.NewInt(1)

// NewDecimalFromInt returns v as a decimal with scale 0.
func NewDecimalFromInt(v int64) *Decimal {
	d := &Decimal{}
	d.unscaled.SetInt64(v)
	return d
}

// NewDecimalFromUint returns v as a decimal with scale 0.
func NewDecimalFromUint(v uint64) *Decimal {
	d := &Decimal{}
	d.unscaled.SetUint64(v)
	return d
}

// NewDecimalFromFloat returns the shortest decimal that round-trips to f.
func NewDecimalFromFloat(f float64) (*Decimal, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, ErrBadDecimal
	}
	return ParseDecimal(strconv.FormatFloat(f, 'g', -1, 64))
}

// NewDecimalUnscaled returns unscaled * 10^-scale. scale must be >= 0.
func NewDecimalUnscaled(unscaled *big.Int, scale int) *Decimal {
	d := &Decimal{scale: int32(scale)}
	d.unscaled.Set(unscaled)
	return d
}

// ParseDecimal parses [+-]digits[.digits][e[+-]digits], surrounding spaces
// allowed. A negative exponent raises the scale; the scale of the result is
// capped at MaxDecimalScale by rounding.
func ParseDecimal(s string) (*Decimal, error) {
	d, n, ok := parseDecimalPrefix(strings.TrimSpace(s))
	if !ok || n != len(strings.TrimSpace(s)) {
		return nil, ErrBadDecimal
	}
	return d, nil
}

// parseDecimalPrefix parses the longest numeric prefix of s and returns it,
// the number of bytes consumed and whether any digits were found.
func parseDecimalPrefix(s string) (*Decimal, int, bool) {
	i := 0
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	digits := make([]byte, 0, len(s))
	scale := 0
	sawDigit := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		digits = append(digits, s[i])
		i++
		sawDigit = true
	}
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			digits = append(digits, s[j])
			scale++
			j++
			sawDigit = true
		}
		if sawDigit {
			i = j
		}
	}
	if !sawDigit {
		return nil, 0, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		eneg := false
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			eneg = s[j] == '-'
			j++
		}
		start := j
		exp := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			if exp < 10000 {
				exp = exp*10 + int(s[j]-'0')
			}
			j++
		}
		if j > start {
			i = j
			if eneg {
				scale += exp
			} else {
				scale -= exp
			}
		}
	}
	d := &Decimal{}
	d.unscaled.SetString(string(digits), 10)
	if neg {
		d.unscaled.Neg(&d.unscaled)
	}
	if scale < 0 {
		if -scale > 1000 {
			// Far beyond any DECIMAL (65 digits): bound the work, the value
			// stays out of every DECIMAL range.
			scale = -1000
		}
		d.unscaled.Mul(&d.unscaled, pow10(-scale))
		scale = 0
	}
	d.scale = int32(scale)
	if scale > MaxDecimalScale {
		d = d.Round(MaxDecimalScale)
	}
	return d, i, true
}

// Scale returns the number of fractional digits.
func (d *Decimal) Scale() int { return int(d.scale) }

// Sign returns -1, 0 or +1.
func (d *Decimal) Sign() int { return d.unscaled.Sign() }

// IsZero reports whether d == 0.
func (d *Decimal) IsZero() bool { return d.unscaled.Sign() == 0 }

// Unscaled returns a copy of the unscaled integer.
func (d *Decimal) Unscaled() *big.Int { return new(big.Int).Set(&d.unscaled) }

// Precision returns the number of significant decimal digits of the
// unscaled value, at least scale+1 (the digit before the point counts).
func (d *Decimal) Precision() int {
	n := len(new(big.Int).Abs(&d.unscaled).String())
	if n < int(d.scale)+1 {
		n = int(d.scale) + 1
	}
	return n
}

// IntDigits returns the number of digits before the decimal point (0 for |d|<1).
func (d *Decimal) IntDigits() int {
	n := len(new(big.Int).Abs(&d.unscaled).String()) - int(d.scale)
	if n < 0 {
		return 0
	}
	if n == 1 && new(big.Int).Abs(&d.unscaled).Cmp(pow10(int(d.scale))) < 0 {
		return 0
	}
	return n
}

// String renders d with exactly Scale() fractional digits, like MySQL.
func (d *Decimal) String() string { return string(d.Append(nil)) }

// Append appends the text form of d to buf.
func (d *Decimal) Append(buf []byte) []byte {
	abs := d.unscaled.Text(10)
	neg := false
	if abs[0] == '-' {
		neg = true
		abs = abs[1:]
	}
	if neg {
		buf = append(buf, '-')
	}
	scale := int(d.scale)
	if scale == 0 {
		return append(buf, abs...)
	}
	if len(abs) <= scale {
		buf = append(buf, '0', '.')
		for i := len(abs); i < scale; i++ {
			buf = append(buf, '0')
		}
		return append(buf, abs...)
	}
	buf = append(buf, abs[:len(abs)-scale]...)
	buf = append(buf, '.')
	return append(buf, abs[len(abs)-scale:]...)
}

// rescaled returns d's unscaled value expressed at a larger scale.
func (d *Decimal) rescaled(scale int32) *big.Int {
	if scale == d.scale {
		return &d.unscaled
	}
	return new(big.Int).Mul(&d.unscaled, pow10(int(scale-d.scale)))
}

// Cmp compares numerically: -1, 0, +1.
func (d *Decimal) Cmp(o *Decimal) int {
	if d.scale == o.scale {
		return d.unscaled.Cmp(&o.unscaled)
	}
	s := max(d.scale, o.scale)
	return d.rescaled(s).Cmp(o.rescaled(s))
}

// Neg returns -d.
func (d *Decimal) Neg() *Decimal {
	r := &Decimal{scale: d.scale}
	r.unscaled.Neg(&d.unscaled)
	return r
}

// Abs returns |d|.
func (d *Decimal) Abs() *Decimal {
	r := &Decimal{scale: d.scale}
	r.unscaled.Abs(&d.unscaled)
	return r
}

// Add returns d+o with scale max(scale(d), scale(o)).
func (d *Decimal) Add(o *Decimal) *Decimal {
	s := max(d.scale, o.scale)
	r := &Decimal{scale: s}
	r.unscaled.Add(d.rescaled(s), o.rescaled(s))
	return r
}

// Sub returns d-o with scale max(scale(d), scale(o)).
func (d *Decimal) Sub(o *Decimal) *Decimal {
	s := max(d.scale, o.scale)
	r := &Decimal{scale: s}
	r.unscaled.Sub(d.rescaled(s), o.rescaled(s))
	return r
}

// Mul returns d*o with scale min(scale(d)+scale(o), MaxDecimalScale).
func (d *Decimal) Mul(o *Decimal) *Decimal {
	r := &Decimal{scale: d.scale + o.scale}
	r.unscaled.Mul(&d.unscaled, &o.unscaled)
	if r.scale > MaxDecimalScale {
		return r.Round(MaxDecimalScale)
	}
	return r
}

// Div returns d/o rounded half away from zero to scale
// min(scale(d)+incr, MaxDecimalScale). ok is false when o is zero.
func (d *Decimal) Div(o *Decimal, incr int) (q *Decimal, ok bool) {
	if o.IsZero() {
		return nil, false
	}
	s := min(int(d.scale)+incr, MaxDecimalScale)
	// q = d.unscaled*10^(s - sd + so) / o.unscaled, rounded.
	num := new(big.Int).Mul(&d.unscaled, pow10(s-int(d.scale)+int(o.scale)))
	r := &Decimal{scale: int32(s)}
	quoRound(&r.unscaled, num, &o.unscaled)
	return r, true
}

// quoRound sets z = n/m rounded half away from zero.
func quoRound(z, n, m *big.Int) {
	rem := new(big.Int)
	z.QuoRem(n, m, rem)
	if rem.Sign() == 0 {
		return
	}
	rem.Abs(rem)
	rem.Lsh(rem, 1)
	if rem.CmpAbs(m) >= 0 {
		if n.Sign()*m.Sign() < 0 {
			z.Sub(z, bigOne)
		} else {
			z.Add(z, bigOne)
		}
	}
}

// Mod returns d % o (sign of d, scale max of both); ok is false when o is zero.
func (d *Decimal) Mod(o *Decimal) (*Decimal, bool) {
	if o.IsZero() {
		return nil, false
	}
	s := max(d.scale, o.scale)
	r := &Decimal{scale: s}
	r.unscaled.Rem(d.rescaled(s), o.rescaled(s))
	return r, true
}

// IntDiv returns the integer part of d/o (truncated toward zero); ok is false
// when o is zero.
func (d *Decimal) IntDiv(o *Decimal) (*big.Int, bool) {
	if o.IsZero() {
		return nil, false
	}
	s := max(d.scale, o.scale)
	return new(big.Int).Quo(d.rescaled(s), o.rescaled(s)), true
}

// Round rounds half away from zero to scale fractional digits. A negative
// scale rounds to tens, hundreds... and yields scale 0. A scale above the
// current one pads with zeros.
func (d *Decimal) Round(scale int) *Decimal {
	return d.rescale(scale, true)
}

// Truncate drops digits beyond scale (toward zero); negative scale as Round.
func (d *Decimal) Truncate(scale int) *Decimal {
	return d.rescale(scale, false)
}

func (d *Decimal) rescale(scale int, round bool) *Decimal {
	if scale > MaxDecimalScale {
		scale = MaxDecimalScale
	}
	cur := int(d.scale)
	if scale >= cur {
		r := &Decimal{scale: int32(scale)}
		r.unscaled.Mul(&d.unscaled, pow10(scale-cur))
		return r
	}
	drop := cur - scale
	r := &Decimal{}
	if round {
		quoRound(&r.unscaled, &d.unscaled, pow10(drop))
	} else {
		r.unscaled.Quo(&d.unscaled, pow10(drop))
	}
	if scale < 0 {
		r.unscaled.Mul(&r.unscaled, pow10(-scale))
		scale = 0
	}
	r.scale = int32(scale)
	return r
}

// Floor returns the largest integer <= d (scale 0).
func (d *Decimal) Floor() *Decimal {
	r := d.Truncate(0)
	if d.Sign() < 0 && r.Cmp(d) != 0 {
		r.unscaled.Sub(&r.unscaled, bigOne)
	}
	return r
}

// Ceil returns the smallest integer >= d (scale 0).
func (d *Decimal) Ceil() *Decimal {
	r := d.Truncate(0)
	if d.Sign() > 0 && r.Cmp(d) != 0 {
		r.unscaled.Add(&r.unscaled, bigOne)
	}
	return r
}

// IsInteger reports whether d has no nonzero fractional digits.
func (d *Decimal) IsInteger() bool {
	if d.scale == 0 {
		return true
	}
	return new(big.Int).Rem(&d.unscaled, pow10(int(d.scale))).Sign() == 0
}

// Normalize returns d with trailing fractional zeros removed.
func (d *Decimal) Normalize() *Decimal {
	if d.IsZero() {
		return &Decimal{}
	}
	if d.scale == 0 {
		return d
	}
	r := &Decimal{scale: d.scale}
	r.unscaled.Set(&d.unscaled)
	ten := big.NewInt(10)
	q, m := new(big.Int), new(big.Int)
	for r.scale > 0 {
		q.QuoRem(&r.unscaled, ten, m)
		if m.Sign() != 0 {
			break
		}
		r.unscaled.Set(q)
		r.scale--
	}
	return r
}

// Float64 returns the nearest float64.
func (d *Decimal) Float64() float64 {
	if d.scale == 0 && d.unscaled.IsInt64() {
		return float64(d.unscaled.Int64())
	}
	f, _ := strconv.ParseFloat(d.String(), 64)
	return f
}

// Int64 rounds d half away from zero to an integer; ok is false (and the
// value clipped) when it does not fit int64.
func (d *Decimal) Int64() (int64, bool) {
	r := d.Round(0)
	if r.unscaled.IsInt64() {
		return r.unscaled.Int64(), true
	}
	if r.Sign() < 0 {
		return math.MinInt64, false
	}
	return math.MaxInt64, false
}

// Uint64 rounds d half away from zero; ok is false (value clipped to 0 or
// MaxUint64) when it does not fit uint64.
func (d *Decimal) Uint64() (uint64, bool) {
	r := d.Round(0)
	if r.Sign() < 0 {
		return 0, false
	}
	if r.unscaled.IsUint64() {
		return r.unscaled.Uint64(), true
	}
	return math.MaxUint64, false
}
