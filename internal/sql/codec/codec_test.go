package codec

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/big"
	"math/rand"
	"sort"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/types"
)

func mustDec(t testing.TB, s string) types.Datum {
	t.Helper()
	d, err := types.ParseDecimal(s)
	if err != nil {
		t.Fatalf("ParseDecimal(%q): %v", s, err)
	}
	return types.NewDecimal(d)
}

// randomDatum returns a random non-NULL value of kind k, biased toward
// boundaries and values sharing prefixes, where ordering bugs hide.
func randomDatum(t testing.TB, rng *rand.Rand, k types.Kind) types.Datum {
	switch k {
	case types.KindInt64:
		switch rng.Intn(4) {
		case 0:
			return types.NewInt([]int64{math.MinInt64, -1, 0, 1, math.MaxInt64}[rng.Intn(5)])
		case 1:
			return types.NewInt(rng.Int63n(200) - 100)
		}
		return types.NewInt(int64(rng.Uint64()))
	case types.KindUint64:
		if rng.Intn(3) == 0 {
			return types.NewUint([]uint64{0, 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}[rng.Intn(5)])
		}
		return types.NewUint(rng.Uint64())
	case types.KindFloat64:
		switch rng.Intn(4) {
		case 0:
			return types.NewFloat([]float64{0, math.Copysign(0, -1), 1, -1, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, -0.1}[rng.Intn(9)])
		case 1:
			return types.NewFloat(float64(rng.Intn(100)-50) / 8)
		}
		return types.NewFloat(rng.NormFloat64() * math.Pow10(rng.Intn(40)-20))
	case types.KindDecimal:
		digits := []byte("-")
		if rng.Intn(2) == 0 {
			digits = digits[:0]
		}
		for i, n := 0, 1+rng.Intn(25); i < n; i++ {
			digits = append(digits, byte('0'+rng.Intn(10)))
		}
		if rng.Intn(2) == 0 {
			digits = append(digits, '.')
			for i, n := 0, 1+rng.Intn(12); i < n; i++ {
				digits = append(digits, byte('0'+rng.Intn(10)))
			}
		}
		return mustDec(t, string(digits))
	case types.KindString, types.KindBytes:
		alphabet := []byte{0, 1, 'a', 'b', 0xfe, 0xff}
		b := make([]byte, rng.Intn(20))
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		if k == types.KindString {
			return types.NewStringBytes(b)
		}
		return types.NewBytes(b)
	case types.KindTime:
		tm, err := types.NewTimeFromParts(1000+rng.Intn(9000), 1+rng.Intn(12), 1+rng.Intn(28), rng.Intn(24), rng.Intn(60), rng.Intn(60), rng.Intn(1000000), mysql.TypeDatetime, 6)
		if err != nil {
			t.Fatal(err)
		}
		return types.NewTime(tm)
	}
	return types.Datum{}
}

var allKinds = []types.Kind{types.KindInt64, types.KindUint64, types.KindFloat64, types.KindDecimal, types.KindString, types.KindBytes, types.KindTime}

// TestKeyOrderMatchesCompare is the memcomparable property: for values of
// one kind (and NULL), bytes.Compare of the encodings equals types.Compare.
func TestKeyOrderMatchesCompare(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, k := range allKinds {
		for i := 0; i < 3000; i++ {
			var a, b types.Datum
			if rng.Intn(20) != 0 {
				a = randomDatum(t, rng, k)
			}
			if rng.Intn(20) != 0 {
				b = randomDatum(t, rng, k)
			}
			ka, err := EncodeKey(nil, a)
			if err != nil {
				t.Fatal(err)
			}
			kb, err := EncodeKey(nil, b)
			if err != nil {
				t.Fatal(err)
			}
			want, err := types.Compare(a, b)
			if err != nil {
				t.Fatal(err)
			}
			got := bytes.Compare(ka, kb)
			// Equal decimals of different scale (1.5, 1.50) keep their scale
			// in the key, so only strict order is required of them.
			if want == 0 && k == types.KindDecimal && a.Decimal() != nil && b.Decimal() != nil && a.Decimal().Scale() != b.Decimal().Scale() {
				continue
			}
			if got != want {
				t.Fatalf("%v: Compare(%v, %v) = %d but key order %d (%x vs %x)", k, a, b, want, got, ka, kb)
			}
		}
	}
}

// TestKeyTupleOrder checks that concatenated keys order like tuples, which
// requires each encoding to be prefix-free.
func TestKeyTupleOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	type tuple struct {
		ds  []types.Datum
		key []byte
	}
	for _, k := range []types.Kind{types.KindString, types.KindDecimal, types.KindInt64} {
		var ts []tuple
		for i := 0; i < 500; i++ {
			ds := []types.Datum{randomDatum(t, rng, k), randomDatum(t, rng, types.KindInt64)}
			if k == types.KindDecimal {
				// A DECIMAL column holds one scale; make ties possible too.
				ds[0] = types.NewDecimal(ds[0].Decimal().Round(-20))
			}
			key, err := EncodeKey(nil, ds...)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tuple{ds, key})
		}
		sort.Slice(ts, func(i, j int) bool { return bytes.Compare(ts[i].key, ts[j].key) < 0 })
		for i := 1; i < len(ts); i++ {
			c, _ := types.Compare(ts[i-1].ds[0], ts[i].ds[0])
			if c > 0 {
				t.Fatalf("first column out of order: %v before %v", ts[i-1].ds, ts[i].ds)
			}
			if c == 0 {
				if c2, _ := types.Compare(ts[i-1].ds[1], ts[i].ds[1]); c2 > 0 {
					t.Fatalf("second column out of order: %v before %v", ts[i-1].ds, ts[i].ds)
				}
			}
		}
	}
}

func sameDatum(a, b types.Datum) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case types.KindNull:
		return true
	case types.KindDecimal:
		return a.Decimal().String() == b.Decimal().String()
	case types.KindFloat64:
		return a.Float() == b.Float()
	}
	return a.String() == b.String()
}

func TestKeyRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 2000; i++ {
		var ds []types.Datum
		for j, n := 0, 1+rng.Intn(4); j < n; j++ {
			if rng.Intn(10) == 0 {
				ds = append(ds, types.Datum{})
				continue
			}
			ds = append(ds, randomDatum(t, rng, allKinds[rng.Intn(len(allKinds))]))
		}
		key, err := EncodeKey([]byte("prefix"), ds...)
		if err != nil {
			t.Fatal(err)
		}
		key = append(key, "tail"...)
		got, rest, err := DecodeKey(key[len("prefix"):], len(ds))
		if err != nil {
			t.Fatalf("DecodeKey(%v): %v", ds, err)
		}
		if string(rest) != "tail" {
			t.Fatalf("rest = %q", rest)
		}
		for j := range ds {
			if !sameDatum(ds[j], got[j]) {
				t.Fatalf("round trip %d: %v (%v) became %v (%v)", j, ds[j], ds[j].Kind(), got[j], got[j].Kind())
			}
		}
	}
}

func TestDecimalKeyKeepsScale(t *testing.T) {
	for _, s := range []string{"0", "0.00", "1.50", "-1.50", "100", "0.00012300", "-0.001"} {
		key, err := EncodeKey(nil, mustDec(t, s))
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := DecodeKey(key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Decimal().String() != s {
			t.Errorf("decimal %s decoded as %s", s, got[0].Decimal())
		}
	}
}

func TestIntHandleOrder(t *testing.T) {
	vals := []int64{math.MinInt64, -2, -1, 0, 1, 2, math.MaxInt64}
	for i := 1; i < len(vals); i++ {
		a, b := EncodeInt(nil, vals[i-1]), EncodeInt(nil, vals[i])
		if bytes.Compare(a, b) >= 0 {
			t.Fatalf("EncodeInt(%d) >= EncodeInt(%d)", vals[i-1], vals[i])
		}
		v, rest, err := DecodeInt(b)
		if err != nil || v != vals[i] || len(rest) != 0 {
			t.Fatalf("DecodeInt: %d %v %v", v, rest, err)
		}
	}
	if _, _, err := DecodeInt([]byte{1, 2}); err == nil {
		t.Fatal("short handle decoded")
	}
}

func TestDecodeKeyRejectsCorrupt(t *testing.T) {
	for _, b := range [][]byte{{}, {0x09}, {flagInt, 1, 2}, {flagString, 'a', 'b'}, {flagDecimal, decPos, 0, 0}, {flagString, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}} {
		if _, _, err := DecodeKey(b, 1); err == nil {
			t.Errorf("DecodeKey(%x) succeeded", b)
		}
	}
}

func TestRowRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for i := 0; i < 1000; i++ {
		n := rng.Intn(40)
		ids := make([]int64, n)
		ds := make([]types.Datum, n)
		for j := range ids {
			ids[j] = int64(j*3 + 1)
			if rng.Intn(8) != 0 {
				ds[j] = randomDatum(t, rng, allKinds[rng.Intn(len(allKinds))])
			}
		}
		row, err := EncodeRow(nil, ids, ds)
		if err != nil {
			t.Fatal(err)
		}
		// Decode every column in reverse order.
		want := make([]int64, n)
		for j := range want {
			want[j] = ids[n-1-j]
		}
		out := make([]types.Datum, n)
		if err := DecodeRow(row, want, nil, out); err != nil {
			t.Fatal(err)
		}
		for j := range want {
			if !sameDatum(out[j], ds[n-1-j]) {
				t.Fatalf("column %d: %v became %v", want[j], ds[n-1-j], out[j])
			}
		}
	}
}

func TestRowSingleColumnAndMissing(t *testing.T) {
	ids := []int64{1, 2, 3, 4}
	ds := []types.Datum{types.NewInt(42), types.NewInt(7), types.NewString("c-value"), types.Datum{}}
	row, err := EncodeRow(nil, ids, ds)
	if err != nil {
		t.Fatal(err)
	}
	out := []types.Datum{types.NewString("default"), types.NewString("default"), types.NewString("default")}
	if err := DecodeRow(row, []int64{3, 99, 4}, nil, out); err != nil {
		t.Fatal(err)
	}
	if out[0].String() != "c-value" {
		t.Errorf("column 3 = %v", out[0])
	}
	if out[1].String() != "default" {
		t.Errorf("absent column 99 overwritten with %v", out[1])
	}
	if !out[2].IsNull() {
		t.Errorf("stored NULL decoded as %v", out[2])
	}
}

func TestRowConvertsAfterTypeChange(t *testing.T) {
	row, err := EncodeRow(nil, []int64{1}, []types.Datum{types.NewInt(5)})
	if err != nil {
		t.Fatal(err)
	}
	ft := ptypes.NewFieldType(mysql.TypeLonglong)
	ft.AddFlag(mysql.UnsignedFlag)
	out := make([]types.Datum, 1)
	if err := DecodeRow(row, []int64{1}, []*ptypes.FieldType{ft}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Kind() != types.KindUint64 || out[0].Uint() != 5 {
		t.Fatalf("got %v of kind %v", out[0], out[0].Kind())
	}
}

func TestRowRejectsCorrupt(t *testing.T) {
	row, err := EncodeRow(nil, []int64{1, 2}, []types.Datum{types.NewInt(1), types.NewString("abc")})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]types.Datum, 2)
	for _, b := range [][]byte{nil, {0x01}, row[:len(row)-1], append(append([]byte{}, row...), 'x')} {
		if err := DecodeRow(b, []int64{1, 2}, nil, out); err == nil {
			t.Errorf("DecodeRow(%x) succeeded", b)
		}
	}
}

func TestDecodeOneColumnDoesNotAllocate(t *testing.T) {
	row, err := EncodeRow(nil, []int64{1, 2, 3, 4}, []types.Datum{types.NewInt(1), types.NewInt(2), types.NewString("ccccccccccccccccc"), types.NewString("pad")})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]types.Datum, 1)
	ids := []int64{3}
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodeRow(row, ids, nil, out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("DecodeRow of one column allocated %v times", allocs)
	}
}

// TestDecodeNeverPanics feeds random and truncated bytes to the decoders:
// corrupt storage must surface as an error, never crash the node.
func TestDecodeNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	var valid [][]byte
	for i := 0; i < 200; i++ {
		d := randomDatum(t, rng, allKinds[rng.Intn(len(allKinds))])
		k, err := EncodeKey(nil, d, types.NewInt(int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		valid = append(valid, k)
		r, err := EncodeRow(nil, []int64{1, 2}, []types.Datum{d, types.NewInt(int64(i))})
		if err != nil {
			t.Fatal(err)
		}
		valid = append(valid, r)
	}
	out := make([]types.Datum, 2)
	try := func(b []byte) {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("decoding %x panicked: %v", b, p)
			}
		}()
		_, _, _ = DecodeKey(b, 2)
		_ = DecodeRow(b, []int64{1, 2}, nil, out)
		_, _, _ = DecodeInt(b)
	}
	for _, v := range valid {
		for cut := 0; cut <= len(v); cut++ {
			try(v[:cut])
		}
		for i := 0; i < 20; i++ {
			m := append([]byte(nil), v...)
			m[rng.Intn(len(m))] = byte(rng.Intn(256))
			try(m)
		}
	}
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.Intn(40))
		rng.Read(b)
		if len(b) > 0 && rng.Intn(2) == 0 {
			b[0] = rowVersion
		}
		try(b)
	}
}

// A final group whose padding is not zeros encodes no value (found by
// FuzzDecodeKey): it must be reported as corrupt, not decoded as the string
// its zero-padded twin holds.
func TestDecodeKeyRejectsNonZeroPadding(t *testing.T) {
	for _, b := range [][]byte{
		{flagString, '0', '0', '0', '0', '0', '0', '0', '0', 0xf9},                                 // one group, 6 pad bytes of '0'
		{flagBytes, 'a', 0, 0, 0, 0, 0, 0, 1, 0xf8},                                                // last pad byte set
		{flagString, '1', '2', '3', '4', '5', '6', '7', '8', 0xff, 'x', 0, 0, 0, 0, 0, 7, 0, 0xf9}, // second group
	} {
		if ds, _, err := DecodeKey(b, 1); err != ErrCorrupt {
			t.Errorf("DecodeKey(%x) = %v, %v; want ErrCorrupt", b, ds, err)
		}
	}
	// Decimal keys the encoder never writes (found by FuzzDecodeKey): a
	// negative sign with no digits, a leading zero digit, a scale past 30.
	for _, b := range [][]byte{
		{flagDecimal, decNeg, 0x30, 0x30, 0x30, 0x30, 0xff, 0x30},
		{flagDecimal, decPos, 0x80, 0, 0, 1, 1, 2, 0, 0},
		{flagDecimal, decZero, 31},
	} {
		if ds, _, err := DecodeKey(b, 1); err != ErrCorrupt {
			t.Errorf("DecodeKey(%x) = %v, %v; want ErrCorrupt", b, ds, err)
		}
	}
	good, _ := EncodeKey(nil, types.NewString("12345678x"))
	if ds, rest, err := DecodeKey(good, 1); err != nil || len(rest) != 0 || string(ds[0].Bytes()) != "12345678x" {
		t.Fatalf("DecodeKey(%x) = %v %x %v", good, ds, rest, err)
	}
}

// A float key holding NaN bits (found by FuzzDecodeKey) is corrupt: no SQL
// value is NaN.
func TestDecodeKeyRejectsNaN(t *testing.T) {
	b := []byte{flagFloat, 0xff, 0xff, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30}
	if ds, _, err := DecodeKey(b, 1); err != ErrCorrupt {
		t.Fatalf("DecodeKey(%x) = %v, %v; want ErrCorrupt", b, ds, err)
	}
}

// SumColumns depends on the requested columns only: changing another
// column keeps the sum, changing one of them (or its presence) does not.
func TestSumColumns(t *testing.T) {
	seed := maphash.MakeSeed()
	enc := func(ids []int64, ds ...types.Datum) []byte {
		b, err := EncodeRow(nil, ids, ds)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ids := []int64{1, 2, 3}
	a := enc(ids, types.NewInt(7), types.NewInt(0), types.NewString("x"))
	b := enc(ids, types.NewInt(7), types.NewInt(10), types.NewString("x"))
	c := enc(ids, types.NewInt(7), types.NewInt(0), types.NewString("y"))
	d := enc([]int64{1, 2}, types.NewInt(7), types.NewInt(0))
	used := []int64{1, 3}
	if SumColumns(seed, a, used) != SumColumns(seed, b, used) {
		t.Error("a change to an unused column changed the sum")
	}
	if SumColumns(seed, a, used) == SumColumns(seed, c, used) {
		t.Error("a change to a used column kept the sum")
	}
	if SumColumns(seed, a, used) == SumColumns(seed, d, used) {
		t.Error("a used column missing from the row kept the sum")
	}
	if SumColumns(seed, []byte("junk"), used) == SumColumns(seed, []byte("junk2"), used) {
		t.Error("unparsable values hashed alike")
	}
}

// TestDecimalValueBytes checks the stored form of decimals whose unscaled
// value fits an int64 (encoded and decoded without a big.Int) against the
// form computed through math/big: scale, sign byte, magnitude without
// leading zeros. Values at the int64 and uint64 edges, and past them,
// round-trip to equal decimals, small ones in their small form.
func TestDecimalValueBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var cases []*big.Int
	for _, v := range []int64{0, 1, -1, 255, 256, -256, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, 1 << 56, -(1 << 56)} {
		cases = append(cases, big.NewInt(v))
	}
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	cases = append(cases, new(big.Int).Lsh(big.NewInt(1), 63), new(big.Int).Neg(new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 63), big.NewInt(1))),
		new(big.Int).Sub(two64, big.NewInt(1)), new(big.Int).Neg(two64), new(big.Int).Mul(two64, two64))
	for range 2000 {
		v := big.NewInt(rng.Int63() >> uint(rng.Intn(63)))
		if rng.Intn(2) == 0 {
			v.Neg(v)
		}
		cases = append(cases, v)
	}
	for i, u := range cases {
		scale := i % 31
		d := types.NewDecimal(types.NewDecimalUnscaled(u, scale))
		want := binary.AppendUvarint([]byte{byte(types.KindDecimal)}, uint64(scale))
		if u.Sign() < 0 {
			want = append(want, 1)
		} else {
			want = append(want, 0)
		}
		want = append(want, new(big.Int).Abs(u).Bytes()...)
		got := appendValue(nil, d)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s (scale %d) encodes as %x, want %x", u, scale, got, want)
		}
		if n, err := valueSize(d); err != nil || n != len(want) {
			t.Fatalf("%s: valueSize %d, %v; want %d", u, n, err, len(want))
		}
		back, err := decodeValue(got)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if back.Decimal().Unscaled().Cmp(u) != 0 || back.Decimal().Scale() != scale {
			t.Fatalf("%s (scale %d) decodes as %s", u, scale, back.Decimal())
		}
		if _, small := back.Decimal().Small(); small != u.IsInt64() {
			t.Fatalf("%s decodes small=%v, want %v", u, small, u.IsInt64())
		}
	}
}
