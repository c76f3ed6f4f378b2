package types

import (
	"math"
	"math/big"
	"math/rand"
	"testing"
)

// TestSmallDecimalPaths checks the int64 forms against math/big: IntDigits
// against the digits of the text form, AddUnscaled against Add (the same
// value and scale whenever it reports that the sum fits, and a sum that
// fits an int64 never refused when both values align), at the int64 edges.
func TestSmallDecimalPaths(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	edge := []int64{0, 1, -1, 9, 10, 99, 100, math.MaxInt64, math.MinInt64, math.MaxInt64 / 10, 999999999999999999, 1000000000000000000}
	val := func() int64 {
		if rng.Intn(4) == 0 {
			return edge[rng.Intn(len(edge))]
		}
		v := rng.Int63() >> uint(rng.Intn(63))
		if rng.Intn(2) == 0 {
			v = -v
		}
		return v
	}
	for range 20000 {
		x, xs := val(), int32(rng.Intn(25))
		d := NewDecimalSmall(x, int(xs))
		text := new(big.Int).Abs(big.NewInt(x)).String()
		want := max(len(text)-int(xs), 0)
		if x == 0 {
			want = 0
		}
		if got := d.IntDigits(); got != want {
			t.Fatalf("IntDigits(%s) = %d, want %d", d, got, want)
		}
		y, ys := val(), int32(rng.Intn(25))
		o := NewDecimalSmall(y, int(ys))
		sum := d.Add(o)
		got, scale, ok := AddUnscaled(x, xs, y, ys)
		if s, fits := sum.Small(); ok && (!fits || got != s || scale != int32(sum.Scale())) {
			t.Fatalf("AddUnscaled(%s, %s) = %d at %d, Add = %s", d, o, got, scale, sum)
		}
		prod := d.Mul(o)
		if p, scale, ok := MulUnscaled(x, xs, y, ys); ok {
			if ps, fits := prod.Small(); !fits || ps != p || scale != int32(prod.Scale()) {
				t.Fatalf("MulUnscaled(%s, %s) = %d at %d, Mul = %s", d, o, p, scale, prod)
			}
		} else if ps, fits := prod.Small(); fits && xs+ys <= MaxDecimalScale && prod.Scale() == int(xs+ys) {
			t.Fatalf("MulUnscaled(%s, %s) refused a product that fits: %d", d, o, ps)
		}
		if s, fits := sum.Small(); !ok && fits {
			// Refused although the sum fits: only when a value does
			// not fit at the common scale.
			sc := max(xs, ys)
			_, ok1 := mulPow10(x, int(sc-xs))
			_, ok2 := mulPow10(y, int(sc-ys))
			if ok1 && ok2 {
				t.Fatalf("AddUnscaled(%s, %s) refused a sum that fits: %d", d, o, s)
			}
		}
	}
}
