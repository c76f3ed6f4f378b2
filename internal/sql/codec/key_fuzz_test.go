package codec

import (
	"bytes"
	"math"
	"testing"

	"github.com/strata-db/strata/internal/sql/types"
)

// FuzzDecodeKey: decoding arbitrary bytes as a key never panics, and what
// decodes re-encodes to exactly the bytes it consumed.
func FuzzDecodeKey(f *testing.F) {
	seed := func(ds ...types.Datum) []byte {
		b, err := EncodeKey(nil, ds...)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(seed(types.NewInt(-5), types.NewString("a\x00b")), uint8(2))
	f.Add(seed(types.NewUint(math.MaxUint64), types.NewFloat(-0.5), types.NewBytes(nil)), uint8(3))
	f.Add(seed(types.NewDecimal(types.NewDecimalFromInt(-12345))), uint8(1))
	f.Add(seed(types.Datum{}, types.NewTime(types.Time(42))), uint8(2))
	f.Add([]byte{0xff, 0, 1}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		ds, rest, err := DecodeKey(b, int(n%8))
		if err != nil {
			return
		}
		again, err := EncodeKey(nil, ds...)
		if err != nil {
			t.Fatalf("DecodeKey(%x) gave %v, which does not encode: %v", b, ds, err)
		}
		if used := b[:len(b)-len(rest)]; !bytes.Equal(again, used) {
			t.Fatalf("DecodeKey(%x) = %v, which encodes as %x, not %x", b, ds, again, used)
		}
	})
}

// FuzzKeyOrder: encoded integers and strings sort as their values do, and
// decode back to them.
func FuzzKeyOrder(f *testing.F) {
	f.Add(int64(-1), int64(1), "a", "a\x00")
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), "", "\xff")
	f.Fuzz(func(t *testing.T, x, y int64, s, u string) {
		kx, _ := EncodeKey(nil, types.NewInt(x), types.NewString(s))
		ky, _ := EncodeKey(nil, types.NewInt(y), types.NewString(u))
		want := 0
		switch {
		case x < y:
			want = -1
		case x > y:
			want = 1
		default:
			want = bytes.Compare([]byte(s), []byte(u))
		}
		if got := bytes.Compare(kx, ky); got != want {
			t.Fatalf("(%d,%q) vs (%d,%q): keys compare %d, want %d", x, s, y, u, got, want)
		}
		ds, rest, err := DecodeKey(kx, 2)
		if err != nil || len(rest) != 0 || ds[0].Int() != x || string(ds[1].Bytes()) != s {
			t.Fatalf("round trip of (%d,%q): %v %x %v", x, s, ds, rest, err)
		}
	})
}
