package resp

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
)

// parseInt parses a 64-bit integer exactly as Redis's string2ll does: an
// optional '-', no '+', no spaces, no leading zeros, at most 20 bytes.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := false
	p := b
	if p[0] == '-' {
		neg = true
		p = p[1:]
		if len(p) == 0 {
			return 0, false
		}
	}
	if p[0] < '1' || p[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (math.MaxUint64-9)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	return int64(v), true
}

// parseFloat parses a float as Redis does for INCRBYFLOAT and friends: no
// surrounding spaces, no NaN.
func parseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || isSpace(b[0]) || isSpace(b[len(b)-1]) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && !math.IsNaN(f) {
			return f, true // ±Inf, as strtold gives; callers reject it
		}
		return 0, false
	}
	if math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// incrFloat adds incr to cur the way Redis's INCRBYFLOAT does: in x87
// long double precision (a 64-bit mantissa), printed with 17 decimals and
// trailing zeros removed, so 0.1 + 0.2 is "0.3" as in Redis. Both inputs
// were validated by parseFloat; ok is false if the sum is not finite.
func incrFloat(cur, incr []byte) ([]byte, bool) {
	const prec = 64
	a, _, err1 := big.ParseFloat(string(cur), 10, prec, big.ToNearestEven)
	b, _, err2 := big.ParseFloat(string(incr), 10, prec, big.ToNearestEven)
	if err1 != nil || err2 != nil || a.IsInf() || b.IsInf() {
		return nil, false
	}
	sum := new(big.Float).SetPrec(prec).Add(a, b)
	if f, _ := sum.Float64(); math.IsInf(f, 0) {
		return nil, false
	}
	out := sum.Append(nil, 'f', 17)
	if i := bytes.IndexByte(out, '.'); i >= 0 {
		out = bytes.TrimRight(out, "0")
		out = bytes.TrimSuffix(out, []byte("."))
	}
	if string(out) == "-0" {
		out = []byte("0")
	}
	return out, true
}

// addInt adds with Redis's overflow check.
func addInt(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}
