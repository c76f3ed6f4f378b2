package types

import (
	"errors"
	"math"
	"math/big"
	"math/bits"
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

// Decimal is an exact fixed-point number: unscaled * 10^-scale. The
// unscaled value lives in an int64 when it fits (the common case: prices,
// averages of int columns) and in a big.Int otherwise, so everyday
// arithmetic does not allocate big integers. A Decimal is immutable once
// built; every operation returns a new value, so Datums may share one freely.
type Decimal struct {
	small int64    // unscaled value when big == nil
	big   *big.Int // unscaled value when it does not fit an int64
	scale int32    // >= 0
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

// pow10 returns 10^n as a big.Int that callers must not modify.
func pow10(n int) *big.Int {
	if n < len(pow10Cache) {
		return pow10Cache[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

var bigOne = big.NewInt(1)

// pow10Int64[i] is 10^i for the exponents an int64 holds.
var pow10Int64 = func() [19]int64 {
	var out [19]int64
	v := int64(1)
	for i := range out {
		out[i] = v
		v *= 10
	}
	return out
}()

// newDecimalBig builds a Decimal from a big unscaled value, keeping it
// small when it fits. b is owned by the result.
func newDecimalBig(b *big.Int, scale int32) *Decimal {
	if b.IsInt64() {
		return &Decimal{small: b.Int64(), scale: scale}
	}
	return &Decimal{big: b, scale: scale}
}

// bigInt returns the unscaled value as a big.Int, which callers must not
// modify (it may be d's own).
func (d *Decimal) bigInt() *big.Int {
	if d.big != nil {
		return d.big
	}
	return big.NewInt(d.small)
}

// mulPow10 returns v*10^n and whether it fit an int64.
func mulPow10(v int64, n int) (int64, bool) {
	if n == 0 {
		return v, true
	}
	if n >= len(pow10Int64) {
		return 0, v == 0
	}
	p := pow10Int64[n]
	r := v * p
	if v != 0 && (r/p != v || (v == -1 && p == -1)) {
		return 0, false
	}
	return r, true
}

// aligned returns d and o as int64 unscaled values at their common scale,
// when both fit.
func aligned(d, o *Decimal) (x, y int64, scale int32, ok bool) {
	if d.big != nil || o.big != nil {
		return 0, 0, 0, false
	}
	scale = max(d.scale, o.scale)
	x, ok1 := mulPow10(d.small, int(scale-d.scale))
	y, ok2 := mulPow10(o.small, int(scale-o.scale))
	return x, y, scale, ok1 && ok2
}

// NewDecimalFromInt returns v as a decimal with scale 0.
func NewDecimalFromInt(v int64) *Decimal {
	return &Decimal{small: v}
}

// NewDecimalFromUint returns v as a decimal with scale 0.
func NewDecimalFromUint(v uint64) *Decimal {
	if v <= math.MaxInt64 {
		return &Decimal{small: int64(v)}
	}
	return &Decimal{big: new(big.Int).SetUint64(v)}
}

// NewDecimalFromFloat returns the shortest decimal that round-trips to f.
func NewDecimalFromFloat(f float64) (*Decimal, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, ErrBadDecimal
	}
	return ParseDecimal(strconv.FormatFloat(f, 'g', -1, 64))
}

// NewDecimalSmall returns unscaled * 10^-scale without a big.Int: the
// form a decimal whose unscaled value fits an int64 always takes. scale
// must be >= 0.
func NewDecimalSmall(unscaled int64, scale int) *Decimal {
	return &Decimal{small: unscaled, scale: int32(scale)}
}

// DecimalSlab hands out decimals of int64 unscaled value from chunks, one
// allocation per decimalSlabSize of them instead of one each: expression
// evaluation over many rows (a scan's arithmetic) makes a decimal per
// row and operator. A decimal it returns stays valid while referenced, as
// any other. Not safe for concurrent use.
type DecimalSlab struct {
	free []Decimal
}

const decimalSlabSize = 128

// Small is NewDecimalSmall from the slab.
func (s *DecimalSlab) Small(unscaled int64, scale int) *Decimal {
	if len(s.free) == 0 {
		s.free = make([]Decimal, decimalSlabSize)
	}
	d := &s.free[0]
	s.free = s.free[1:]
	d.small, d.scale = unscaled, int32(scale)
	return d
}

// MulUnscaled returns x*10^-xs * y*10^-ys as an unscaled value at scale
// xs+ys when that scale is at most MaxDecimalScale and the product fits an
// int64 (ok false otherwise): Mul without a Decimal.
func MulUnscaled(x int64, xs int32, y int64, ys int32) (product int64, scale int32, ok bool) {
	scale = xs + ys
	if scale > MaxDecimalScale {
		return 0, 0, false
	}
	hi, lo := bits.Mul64(absU64(x), absU64(y))
	neg := (x < 0) != (y < 0)
	switch {
	case hi != 0 || lo > 1<<63 || (lo == 1<<63 && !neg):
		return 0, 0, false
	case neg:
		return int64(-lo), scale, true // -(1<<63) wraps to math.MinInt64
	}
	return int64(lo), scale, true
}

func absU64(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

// Small returns the unscaled value when it fits an int64 (ok false: it
// does not, Unscaled has it).
func (d *Decimal) Small() (unscaled int64, ok bool) { return d.small, d.big == nil }

// NewDecimalUnscaled returns unscaled * 10^-scale. scale must be >= 0.
func NewDecimalUnscaled(unscaled *big.Int, scale int) *Decimal {
	return newDecimalBig(new(big.Int).Set(unscaled), int32(scale))
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
	// The digits are s[intStart:intEnd] and s[fracStart:fracEnd]; small
	// accumulates them while they fit an int64 (up to 18 digits).
	var small int64
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		small = small*10 + int64(s[i]-'0')
		i++
	}
	intEnd, fracStart, fracEnd := i, i, i
	if i < len(s) && s[i] == '.' {
		j := i + 1
		fracStart = j
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			small = small*10 + int64(s[j]-'0')
			j++
		}
		fracEnd = j
		if intEnd > intStart || fracEnd > fracStart {
			i = j
		} else {
			fracStart, fracEnd = intEnd, intEnd
		}
	}
	ndigits := (intEnd - intStart) + (fracEnd - fracStart)
	if ndigits == 0 {
		return nil, 0, false
	}
	scale := fracEnd - fracStart
	exponent := false
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
			exponent = true
			if eneg {
				scale += exp
			} else {
				scale -= exp
			}
		}
	}
	if !exponent && ndigits <= 18 && scale <= MaxDecimalScale {
		// The common case (a price, a stored DECIMAL's text): no big.Int.
		if neg {
			small = -small
		}
		return &Decimal{small: small, scale: int32(scale)}, i, true
	}
	digits := make([]byte, 0, ndigits)
	digits = append(digits, s[intStart:intEnd]...)
	digits = append(digits, s[fracStart:fracEnd]...)
	u, _ := new(big.Int).SetString(string(digits), 10)
	if neg {
		u.Neg(u)
	}
	if scale < 0 {
		if -scale > 1000 {
			// Far beyond any DECIMAL (65 digits): bound the work, the value
			// stays out of every DECIMAL range.
			scale = -1000
		}
		u.Mul(u, pow10(-scale))
		scale = 0
	}
	d := newDecimalBig(u, 0)
	d.scale = int32(scale)
	if scale > MaxDecimalScale {
		d = d.Round(MaxDecimalScale)
	}
	return d, i, true
}

// Scale returns the number of fractional digits.
func (d *Decimal) Scale() int { return int(d.scale) }

// Sign returns -1, 0 or +1.
func (d *Decimal) Sign() int {
	if d.big != nil {
		return d.big.Sign()
	}
	switch {
	case d.small < 0:
		return -1
	case d.small > 0:
		return 1
	}
	return 0
}

// IsZero reports whether d == 0.
func (d *Decimal) IsZero() bool { return d.big == nil && d.small == 0 }

// Unscaled returns a copy of the unscaled integer.
func (d *Decimal) Unscaled() *big.Int { return new(big.Int).Set(d.bigInt()) }

// absDigits returns the decimal digits of |unscaled|.
func (d *Decimal) absDigits(buf []byte) []byte {
	if d.big == nil {
		if d.small >= 0 {
			return strconv.AppendInt(buf, d.small, 10)
		}
		return strconv.AppendUint(buf, uint64(-(d.small+1))+1, 10)
	}
	start := len(buf)
	buf = d.big.Append(buf, 10)
	if buf[start] == '-' {
		buf = append(buf[:start], buf[start+1:]...)
	}
	return buf
}

// Precision returns the number of significant decimal digits of the
// unscaled value, at least scale+1 (the digit before the point counts).
func (d *Decimal) Precision() int {
	var tmp [24]byte
	n := len(d.absDigits(tmp[:0]))
	if n < int(d.scale)+1 {
		n = int(d.scale) + 1
	}
	return n
}

// IntDigits returns the number of digits before the decimal point (0 for |d|<1).
func (d *Decimal) IntDigits() int {
	if d.big == nil {
		u := uint64(d.small)
		if d.small < 0 {
			u = uint64(-(d.small + 1)) + 1
		}
		if u == 0 {
			return 0
		}
		n := 1
		for n < len(pow10Int64) && u >= uint64(pow10Int64[n]) {
			n++
		}
		return max(n-int(d.scale), 0)
	}
	var tmp [24]byte
	digits := d.absDigits(tmp[:0])
	n := len(digits) - int(d.scale)
	if n < 0 || (n == 1 && digits[0] == '0') {
		return 0
	}
	return n
}

// String renders d with exactly Scale() fractional digits, like MySQL.
func (d *Decimal) String() string { return string(d.Append(nil)) }

// Append appends the text form of d to buf.
func (d *Decimal) Append(buf []byte) []byte {
	if d.Sign() < 0 {
		buf = append(buf, '-')
	}
	var tmp [24]byte
	abs := d.absDigits(tmp[:0])
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
		return d.bigInt()
	}
	return new(big.Int).Mul(d.bigInt(), pow10(int(scale-d.scale)))
}

// Cmp compares numerically: -1, 0, +1.
func (d *Decimal) Cmp(o *Decimal) int {
	if x, y, _, ok := aligned(d, o); ok {
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	}
	s := max(d.scale, o.scale)
	return d.rescaled(s).Cmp(o.rescaled(s))
}

// Neg returns -d.
func (d *Decimal) Neg() *Decimal {
	if d.big == nil && d.small != math.MinInt64 {
		return &Decimal{small: -d.small, scale: d.scale}
	}
	return newDecimalBig(new(big.Int).Neg(d.bigInt()), d.scale)
}

// Abs returns |d|.
func (d *Decimal) Abs() *Decimal {
	if d.Sign() < 0 {
		return d.Neg()
	}
	return d
}

// Add returns d+o with scale max(scale(d), scale(o)).
func (d *Decimal) Add(o *Decimal) *Decimal {
	if x, y, s, ok := aligned(d, o); ok {
		if r := x + y; (r > x) == (y > 0) {
			return &Decimal{small: r, scale: s}
		}
	}
	s := max(d.scale, o.scale)
	return newDecimalBig(new(big.Int).Add(d.rescaled(s), o.rescaled(s)), s)
}

// AddUnscaled returns x*10^-xs + y*10^-ys as an unscaled value at scale
// max(xs, ys) when both values align at that scale and the sum fits an
// int64 (ok false otherwise): Add without a Decimal, for running sums.
func AddUnscaled(x int64, xs int32, y int64, ys int32) (sum int64, scale int32, ok bool) {
	scale = max(xs, ys)
	a, ok1 := mulPow10(x, int(scale-xs))
	b, ok2 := mulPow10(y, int(scale-ys))
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	if sum = a + b; (sum > a) != (b > 0) {
		return 0, 0, false
	}
	return sum, scale, true
}

// Sub returns d-o with scale max(scale(d), scale(o)).
func (d *Decimal) Sub(o *Decimal) *Decimal {
	if x, y, s, ok := aligned(d, o); ok {
		if r := x - y; (r < x) == (y > 0) {
			return &Decimal{small: r, scale: s}
		}
	}
	s := max(d.scale, o.scale)
	return newDecimalBig(new(big.Int).Sub(d.rescaled(s), o.rescaled(s)), s)
}

// Mul returns d*o with scale min(scale(d)+scale(o), MaxDecimalScale).
func (d *Decimal) Mul(o *Decimal) *Decimal {
	scale := d.scale + o.scale
	var r *Decimal
	if d.big == nil && o.big == nil {
		x, y := d.small, o.small
		if p := x * y; x == 0 || (p/x == y && !(x == -1 && y == math.MinInt64) && !(y == -1 && x == math.MinInt64)) {
			r = &Decimal{small: p, scale: scale}
		}
	}
	if r == nil {
		r = newDecimalBig(new(big.Int).Mul(d.bigInt(), o.bigInt()), scale)
	}
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
	shift := s - int(d.scale) + int(o.scale)
	if d.big == nil && o.big == nil && o.small != math.MinInt64 {
		if num, fits := mulPow10(d.small, shift); fits && num != math.MinInt64 {
			return &Decimal{small: quoRoundInt64(num, o.small), scale: int32(s)}, true
		}
	}
	num := new(big.Int).Mul(d.bigInt(), pow10(shift))
	z := new(big.Int)
	quoRound(z, num, o.bigInt())
	return newDecimalBig(z, int32(s)), true
}

// quoRoundInt64 returns n/m rounded half away from zero; m must not be
// MinInt64 (its magnitude does not fit).
func quoRoundInt64(n, m int64) int64 {
	q, r := n/m, n%m
	if r == 0 {
		return q
	}
	if r < 0 {
		r = -r
	}
	am := m
	if am < 0 {
		am = -am
	}
	// 2r >= |m| without overflow: r >= |m| - r.
	if r >= am-r {
		if (n < 0) != (m < 0) {
			return q - 1
		}
		return q + 1
	}
	return q
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
	if x, y, s, ok := aligned(d, o); ok && y != -1 {
		return &Decimal{small: x % y, scale: s}, true
	}
	s := max(d.scale, o.scale)
	return newDecimalBig(new(big.Int).Rem(d.rescaled(s), o.rescaled(s)), s), true
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
		if scale == cur {
			return d
		}
		if v, ok := mulPow10(d.small, scale-cur); ok && d.big == nil {
			return &Decimal{small: v, scale: int32(scale)}
		}
		return newDecimalBig(new(big.Int).Mul(d.bigInt(), pow10(scale-cur)), int32(scale))
	}
	drop := cur - scale
	resultScale := scale
	if resultScale < 0 {
		resultScale = 0
	}
	if d.big == nil && drop < len(pow10Int64) && d.small != math.MinInt64 {
		p := pow10Int64[drop]
		var q int64
		if round {
			q = quoRoundInt64(d.small, p)
		} else {
			q = d.small / p
		}
		if scale >= 0 {
			return &Decimal{small: q, scale: int32(scale)}
		}
		if v, ok := mulPow10(q, -scale); ok {
			return &Decimal{small: v}
		}
		return newDecimalBig(new(big.Int).Mul(big.NewInt(q), pow10(-scale)), 0)
	}
	z := new(big.Int)
	if round {
		quoRound(z, d.bigInt(), pow10(drop))
	} else {
		z.Quo(d.bigInt(), pow10(drop))
	}
	if scale < 0 {
		z.Mul(z, pow10(-scale))
	}
	return newDecimalBig(z, int32(resultScale))
}

// Floor returns the largest integer <= d (scale 0).
func (d *Decimal) Floor() *Decimal {
	r := d.Truncate(0)
	if d.Sign() < 0 && r.Cmp(d) != 0 {
		return r.Sub(NewDecimalFromInt(1))
	}
	return r
}

// Ceil returns the smallest integer >= d (scale 0).
func (d *Decimal) Ceil() *Decimal {
	r := d.Truncate(0)
	if d.Sign() > 0 && r.Cmp(d) != 0 {
		return r.Add(NewDecimalFromInt(1))
	}
	return r
}

// IsInteger reports whether d has no nonzero fractional digits.
func (d *Decimal) IsInteger() bool {
	if d.scale == 0 {
		return true
	}
	if d.big == nil && int(d.scale) < len(pow10Int64) {
		return d.small%pow10Int64[d.scale] == 0
	}
	return new(big.Int).Rem(d.bigInt(), pow10(int(d.scale))).Sign() == 0
}

// Normalize returns d with trailing fractional zeros removed.
func (d *Decimal) Normalize() *Decimal {
	if d.IsZero() {
		return &Decimal{}
	}
	if d.scale == 0 {
		return d
	}
	if d.big == nil {
		v, s := d.small, d.scale
		for s > 0 && v%10 == 0 {
			v /= 10
			s--
		}
		return &Decimal{small: v, scale: s}
	}
	u := new(big.Int).Set(d.big)
	s := d.scale
	ten := big.NewInt(10)
	q, m := new(big.Int), new(big.Int)
	for s > 0 {
		q.QuoRem(u, ten, m)
		if m.Sign() != 0 {
			break
		}
		u.Set(q)
		s--
	}
	return newDecimalBig(u, s)
}

// Float64 returns the nearest float64.
func (d *Decimal) Float64() float64 {
	if d.big == nil {
		// Both operands exact in float64: one correctly rounded division.
		if d.scale == 0 && d.small > -(1<<53) && d.small < 1<<53 {
			return float64(d.small)
		}
		if d.small > -(1<<53) && d.small < 1<<53 && d.scale <= 22 {
			return float64(d.small) / math.Pow10(int(d.scale))
		}
	}
	var tmp [48]byte
	f, _ := strconv.ParseFloat(string(d.Append(tmp[:0])), 64)
	return f
}

// Int64 rounds d half away from zero to an integer; ok is false (and the
// value clipped) when it does not fit int64.
func (d *Decimal) Int64() (int64, bool) {
	r := d.Round(0)
	if r.big == nil {
		return r.small, true
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
	if r.big == nil {
		return uint64(r.small), true
	}
	if r.big.IsUint64() {
		return r.big.Uint64(), true
	}
	return math.MaxUint64, false
}
