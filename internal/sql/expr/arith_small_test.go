package expr

import (
	"math"
	"math/rand"
	"testing"

	"github.com/strata-db/strata/internal/sql/types"
)

// TestSmallDecimalArith compares + - * of int64 and decimal operands
// computed in int64 (Arith.smallDecimal, results from the context's slab)
// with the same operation through math/big (evalDecimal): the same value,
// scale and text whenever the int64 path answers; and it must answer for
// operands and results of a few digits. Results taken from the slab stay
// what they were after many more are handed out.
func TestSmallDecimalArith(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	operand := func() types.Datum {
		var v int64
		switch rng.Intn(5) {
		case 0:
			v = []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MaxInt32}[rng.Intn(6)]
		default:
			v = rng.Int63() >> uint(rng.Intn(63))
			if rng.Intn(2) == 0 {
				v = -v
			}
		}
		if rng.Intn(4) == 0 {
			return types.NewInt(v)
		}
		return types.NewDecimal(types.NewDecimalSmall(v, rng.Intn(20)))
	}
	ctx := &EvalContext{}
	type kept struct {
		d    types.Datum
		text string
	}
	var held []kept
	answered := 0
	for range 30000 {
		l, r := operand(), operand()
		if l.Kind() != types.KindDecimal && r.Kind() != types.KindDecimal {
			continue
		}
		for _, op := range []ArithOp{OpPlus, OpMinus, OpMul} {
			a := &Arith{Op: op}
			got, ok := a.smallDecimal(ctx, l, r)
			if !ok {
				continue
			}
			x, _ := l.ToDecimal()
			y, _ := r.ToDecimal()
			want, err := a.evalDecimal(nil, x, y)
			if err != nil {
				t.Fatalf("%v %d %v: %v", l, op, r, err)
			}
			if got.Decimal().String() != want.Decimal().String() || got.Decimal().Scale() != want.Decimal().Scale() {
				t.Fatalf("%s op %d %s = %s, want %s", x, op, y, got.Decimal(), want.Decimal())
			}
			if small, fits := got.Decimal().Small(); fits && small > -1000000 && small < 1000000 {
				answered++
			}
			if len(held) < 1000 && rng.Intn(10) == 0 {
				held = append(held, kept{got, got.Decimal().String()})
			}
		}
	}
	for _, h := range held {
		if h.d.Decimal().String() != h.text {
			t.Fatalf("a slab decimal changed: %s, was %s", h.d.Decimal(), h.text)
		}
	}
	if answered < 1000 {
		t.Fatalf("the int64 path answered only %d small results", answered)
	}
	// A context's copies share its slab (a copy made before decimals are
	// handed out must not hand the same ones out again); a fork has its
	// own, used by another goroutine at the same time.
	c2 := *ctx
	d1 := ctx.smallDecimal(7, 1)
	d2 := c2.smallDecimal(8, 1)
	if d1.String() != "0.7" || d2.String() != "0.8" || d1 == d2 {
		t.Fatalf("slab decimals overlap: %s %s", d1, d2)
	}
	f := ctx.Fork()
	done := make(chan []*types.Decimal)
	fill := func(c *EvalContext, base int64) {
		var out []*types.Decimal
		for i := range int64(5000) {
			out = append(out, c.smallDecimal(base+i, 0))
		}
		done <- out
	}
	go fill(ctx, 0)
	go fill(f, 1_000_000)
	for range 2 {
		out := <-done
		base, _ := out[0].Small()
		for i, d := range out {
			if v, _ := d.Small(); v != base+int64(i) {
				t.Fatalf("a decimal of one context was overwritten by another's: %d, want %d", v, base+int64(i))
			}
		}
	}
}
