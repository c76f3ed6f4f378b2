package types

import (
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

func dec(t testing.TB, s string) *Decimal {
	t.Helper()
	d, err := ParseDecimal(s)
	if err != nil {
		t.Fatalf("ParseDecimal(%q): %v", s, err)
	}
	return d
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"0":                                  "0",
		"-0.00":                              "0.00",
		"1.50":                               "1.50",
		"+12":                                "12",
		".5":                                 "0.5",
		"5.":                                 "5",
		"-0.001":                             "-0.001",
		"1e3":                                "1000",
		"1.5e-3":                             "0.0015",
		" 42 ":                               "42",
		"123456789012345678901234567890.123": "123456789012345678901234567890.123",
	} {
		if got := dec(t, in).String(); got != want {
			t.Errorf("ParseDecimal(%q) = %s, want %s", in, got, want)
		}
	}
	for _, bad := range []string{"", "abc", "1.2.3", "1e", "--1", "."} {
		if _, err := ParseDecimal(bad); err == nil && bad != "1e" {
			t.Errorf("ParseDecimal(%q) succeeded", bad)
		}
	}
}

// TestParseDecimalFastPath checks the int64 path of ParseDecimal (up to
// 18 digits, no exponent) against the big.Int one, which an exponent of
// zero takes: the same value and scale for every length and sign.
func TestParseDecimalFastPath(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for n := 0; n < 20000; n++ {
		var sb strings.Builder
		switch r.Intn(3) {
		case 0:
			sb.WriteByte('-')
		case 1:
			sb.WriteByte('+')
		}
		for k := r.Intn(21); k > 0; k-- {
			sb.WriteByte(byte('0' + r.Intn(10)))
		}
		if r.Intn(2) == 0 {
			sb.WriteByte('.')
			for k := r.Intn(21); k > 0; k-- {
				sb.WriteByte(byte('0' + r.Intn(10)))
			}
		}
		in := sb.String()
		fast, errFast := ParseDecimal(in)
		slow, errSlow := ParseDecimal(in + "e0")
		if (errFast != nil) != (errSlow != nil) {
			t.Fatalf("%q: error %v, with e0 %v", in, errFast, errSlow)
		}
		if errFast != nil {
			continue
		}
		if fast.String() != slow.String() || fast.Scale() != slow.Scale() || fast.Cmp(slow) != 0 {
			t.Fatalf("%q: %s (scale %d), with e0 %s (scale %d)", in, fast, fast.Scale(), slow, slow.Scale())
		}
	}
}

func TestDecimalArithmetic(t *testing.T) {
	type op func(a, b *Decimal) string
	div := func(a, b *Decimal) string {
		q, ok := a.Div(b, DivPrecisionIncrement)
		if !ok {
			return "divzero"
		}
		return q.String()
	}
	mod := func(a, b *Decimal) string {
		m, ok := a.Mod(b)
		if !ok {
			return "divzero"
		}
		return m.String()
	}
	cases := []struct {
		name string
		f    op
		a, b string
		want string
	}{
		{"add", func(a, b *Decimal) string { return a.Add(b).String() }, "1.10", "2.205", "3.305"},
		{"sub", func(a, b *Decimal) string { return a.Sub(b).String() }, "1", "2.50", "-1.50"},
		{"mul", func(a, b *Decimal) string { return a.Mul(b).String() }, "1.5", "-2.25", "-3.375"},
		{"div int", div, "7", "2", "3.5000"},
		{"div repeating", div, "1", "3", "0.3333"},
		{"div rounds half up", div, "2", "3", "0.6667"},
		{"div negative rounds away", div, "-2", "3", "-0.6667"},
		{"div keeps dividend scale", div, "1.00", "3", "0.333333"},
		{"div by decimal", div, "10", "4.0", "2.5000"},
		{"div zero", div, "1", "0.00", "divzero"},
		{"mod", mod, "10.5", "3", "1.5"},
		{"mod sign of dividend", mod, "-7", "3", "-1"},
		{"mod zero", mod, "1", "0", "divzero"},
	}
	for _, tc := range cases {
		if got := tc.f(dec(t, tc.a), dec(t, tc.b)); got != tc.want {
			t.Errorf("%s(%s, %s) = %s, want %s", tc.name, tc.a, tc.b, got, tc.want)
		}
	}
}

func TestDecimalRounding(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scale int
		round string
		trunc string
	}{
		{"2.5", 0, "3", "2"},
		{"-2.5", 0, "-3", "-2"},
		{"1.298", 1, "1.3", "1.2"},
		{"1.25", 1, "1.3", "1.2"},
		{"23.298", -1, "20", "20"},
		{"25", -1, "30", "20"},
		{"1.5", 3, "1.500", "1.500"},
		{"0.0005", 3, "0.001", "0.000"},
	} {
		d := dec(t, tc.in)
		if got := d.Round(tc.scale).String(); got != tc.round {
			t.Errorf("Round(%s, %d) = %s, want %s", tc.in, tc.scale, got, tc.round)
		}
		if got := d.Truncate(tc.scale).String(); got != tc.trunc {
			t.Errorf("Truncate(%s, %d) = %s, want %s", tc.in, tc.scale, got, tc.trunc)
		}
	}
	if got := dec(t, "-1.2").Floor().String(); got != "-2" {
		t.Errorf("Floor(-1.2) = %s", got)
	}
	if got := dec(t, "-1.2").Ceil().String(); got != "-1" {
		t.Errorf("Ceil(-1.2) = %s", got)
	}
	if got := dec(t, "100.2500").Normalize().String(); got != "100.25" {
		t.Errorf("Normalize = %s", got)
	}
	if got := dec(t, "0.012").IntDigits(); got != 0 {
		t.Errorf("IntDigits(0.012) = %d", got)
	}
	if got := dec(t, "-123.4").IntDigits(); got != 3 {
		t.Errorf("IntDigits(-123.4) = %d", got)
	}
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		tp   byte
		fsp  int
		want string
	}{
		{"2020-01-02", mysql.TypeDate, 0, "2020-01-02"},
		{"2020-1-2", mysql.TypeDate, 0, "2020-01-02"},
		{"2020/01/02 03:04:05", mysql.TypeDatetime, 0, "2020-01-02 03:04:05"},
		{"2020-01-02T03:04:05", mysql.TypeDatetime, 0, "2020-01-02 03:04:05"},
		{"2020-01-02 03:04:05.123456", mysql.TypeDatetime, 3, "2020-01-02 03:04:05.123"},
		{"2020-01-02 03:04:05.9996", mysql.TypeDatetime, 3, "2020-01-02 03:04:06.000"},
		{"2020-12-31 23:59:59.5", mysql.TypeDatetime, 0, "2021-01-01 00:00:00"},
		{"20200102", mysql.TypeDate, 0, "2020-01-02"},
		{"200102", mysql.TypeDate, 0, "2020-01-02"},
		{"991231", mysql.TypeDate, 0, "1999-12-31"},
		{"20200102030405", mysql.TypeDatetime, 0, "2020-01-02 03:04:05"},
		{"2020-01-02 03:04:05", mysql.TypeDate, 0, "2020-01-02"},
		{"2024-02-29", mysql.TypeDate, 0, "2024-02-29"},
		{"2020-01-02", mysql.TypeDatetime, 0, "2020-01-02 00:00:00"},
		{"0000-00-00", mysql.TypeDate, 0, "0000-00-00"},
	} {
		got, err := ParseTime(tc.in, tc.tp, tc.fsp)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tc.in, err)
			continue
		}
		if got.String() != tc.want {
			t.Errorf("ParseTime(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "abc", "2023-02-29", "2020-13-01", "2020-01-32", "2020-01-02 24:00:00", "2020-01-02 10:60:00", "1234567", "2020-01-02 03:04:05x"} {
		if got, err := ParseTime(bad, mysql.TypeDatetime, 0); err == nil {
			t.Errorf("ParseTime(%q) = %s, want error", bad, got)
		}
	}
}

// TestTimeOrder checks the packed form orders like the moments it holds.
func TestTimeOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		a := randomTime(t, rng)
		b := randomTime(t, rng)
		ga, gb := a.GoTime(time.UTC), b.GoTime(time.UTC)
		want := ga.Compare(gb)
		if got := a.Compare(b); got != want {
			t.Fatalf("Compare(%s, %s) = %d, want %d", a, b, got, want)
		}
		if want < 0 && uint64(a) >= uint64(b) {
			t.Fatalf("packed %s >= packed %s", a, b)
		}
	}
	d, _ := ParseTime("2020-01-01", mysql.TypeDate, 0)
	dt, _ := ParseTime("2020-01-01 00:00:00", mysql.TypeDatetime, 0)
	if d.Compare(dt) != 0 {
		t.Error("DATE and DATETIME of the same moment compare unequal")
	}
}

func randomTime(t testing.TB, rng *rand.Rand) Time {
	tm, err := NewTimeFromParts(1+rng.Intn(9999), 1+rng.Intn(12), 1+rng.Intn(28), rng.Intn(24), rng.Intn(60), rng.Intn(60), rng.Intn(1000000), mysql.TypeDatetime, 6)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestCompareAcrossKinds(t *testing.T) {
	tm, _ := ParseTime("2020-01-02 03:04:05", mysql.TypeDatetime, 0)
	day, _ := ParseTime("2020-01-02", mysql.TypeDate, 0)
	for _, tc := range []struct {
		a, b Datum
		want int
	}{
		{NewInt(1), NewInt(2), -1},
		{NewInt(-1), NewUint(0), -1},
		{NewUint(math.MaxUint64), NewInt(math.MaxInt64), 1},
		{NewInt(1), NewDecimal(dec(t, "1.00")), 0},
		{NewInt(2), NewDecimal(dec(t, "1.99")), 1},
		{NewDecimal(dec(t, "0.1")), NewFloat(0.1), 0},
		{NewInt(1), NewFloat(1.5), -1},
		{NewInt(10), NewString("9"), 1},       // numeric: 10 > 9
		{NewString("10"), NewString("9"), -1}, // text: '10' < '9'
		{NewString("abc"), NewInt(0), 0},
		{NewString("1e1"), NewInt(10), 0},
		{NewTime(tm), NewString("2020-01-02 03:04:05"), 0},
		{NewTime(tm), NewString("2020-01-03"), -1},
		{NewTime(tm), NewInt(20200102030405), 0},
		{NewTime(day), NewString("2020-01-02 10:00:00"), -1},
		{NewTime(day), NewString("2020-01-02"), 0},
		{Datum{}, NewInt(math.MinInt64), -1},
		{Datum{}, Datum{}, 0},
		{NewBytes([]byte{0xff}), NewString("a"), 1},
	} {
		got, err := Compare(tc.a, tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if back, _ := Compare(tc.b, tc.a); back != -tc.want {
			t.Errorf("Compare(%v, %v) = %d, not antisymmetric", tc.b, tc.a, back)
		}
	}
}

// TestHashKeyAgreesWithCompare: values that compare equal hash equal, and
// distinct values of one kind hash differently.
func TestHashKeyAgreesWithCompare(t *testing.T) {
	d1, _ := ParseTime("2020-01-01", mysql.TypeDate, 0)
	d2, _ := ParseTime("2020-01-01 00:00:00", mysql.TypeDatetime, 0)
	equal := [][]Datum{
		{NewInt(1), NewUint(1), NewFloat(1), NewDecimal(dec(t, "1.000"))},
		{NewFloat(0.1), NewDecimal(dec(t, "0.10"))},
		{NewInt(-5), NewFloat(-5), NewDecimal(dec(t, "-5"))},
		{NewUint(math.MaxUint64), NewDecimal(dec(t, "18446744073709551615"))},
		{NewTime(d1), NewTime(d2)},
		{Datum{}, Datum{}},
	}
	for _, group := range equal {
		k0 := string(group[0].AppendHashKey(nil))
		for _, d := range group[1:] {
			if k := string(d.AppendHashKey(nil)); k != k0 {
				t.Errorf("%v (%v) and %v (%v) hash differently", group[0], group[0].Kind(), d, d.Kind())
			}
		}
	}
	distinct := []Datum{NewInt(1), NewInt(2), NewDecimal(dec(t, "1.5")), NewString("1"), NewString("a"), NewString("ab"), Datum{}, NewInt(0), NewString("")}
	seen := map[string]Datum{}
	for _, d := range distinct {
		k := string(d.AppendHashKey(nil))
		if prev, dup := seen[k]; dup {
			t.Errorf("%v and %v share a hash key", prev, d)
		}
		seen[k] = d
	}
	// Keys concatenate without ambiguity.
	a := NewString("a").AppendHashKey(NewString("bc").AppendHashKey(nil))
	b := NewString("ab").AppendHashKey(NewString("c").AppendHashKey(nil))
	if string(a) == string(b) {
		t.Error("('bc','a') and ('c','ab') share a composite hash key")
	}
}

func TestAppendText(t *testing.T) {
	tm, _ := ParseTime("2021-03-04 05:06:07.5", mysql.TypeDatetime, 3)
	dt, _ := ParseTime("2021-03-04", mysql.TypeDate, 0)
	for _, tc := range []struct {
		d    Datum
		want string
	}{
		{NewInt(-42), "-42"},
		{NewUint(math.MaxUint64), "18446744073709551615"},
		{NewDecimal(dec(t, "3.50")), "3.50"},
		{NewDecimal(dec(t, "-0.001")), "-0.001"},
		{NewFloat(2.5), "2.5"},
		{NewFloat(0.1), "0.1"},
		{NewFloat(100), "100"},
		{NewFloat(1e14), "100000000000000"},
		{NewFloat(1e15), "1e15"},
		{NewFloat(1.2345678901234567e20), "1.2345678901234567e20"},
		{NewFloat(-123456789012345678), "-1.2345678901234568e17"},
		{NewFloat(-1.5e-16), "-1.5e-16"},
		{NewFloat(0.0001), "0.0001"},
		// What the mysql client shows for SELECT 2.3e+14, 2.3e+15, 1e-15,
		// 1e-16, 3.4e-15, 3.4e-16.
		{NewFloat(2.3e14), "230000000000000"},
		{NewFloat(2.3e15), "2.3e15"},
		{NewFloat(1e-15), "0.000000000000001"},
		{NewFloat(1e-16), "1e-16"},
		{NewFloat(3.4e-15), "0.0000000000000034"},
		{NewFloat(3.4e-16), "3.4e-16"},
		{NewFloat(math.Copysign(0, -1)), "0"},
		{NewString("héllo"), "héllo"},
		{NewTime(tm), "2021-03-04 05:06:07.500"},
		{NewTime(dt), "2021-03-04"},
		{Datum{}, ""},
	} {
		if got := string(tc.d.AppendText(nil)); got != tc.want {
			t.Errorf("AppendText(%v kind) = %q, want %q", tc.d.Kind(), got, tc.want)
		}
	}
}

func TestAppendTextAs(t *testing.T) {
	float := fieldType(mysql.TypeFloat, 12, -1, 0)
	float72 := fieldType(mysql.TypeFloat, 7, 2, 0)
	double := fieldType(mysql.TypeDouble, 22, -1, 0)
	pi := fieldType(mysql.TypeDouble, 8, 6, 0)
	stored := func(v float64) Datum {
		d, err := Convert(NewFloat(v), float)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		d    Datum
		ft   *ptypes.FieldType
		want string
	}{
		{stored(0.1), float, "0.1"},
		{stored(1234567.8), float, "1234570"},
		{stored(3.14159265), float, "3.14159"},
		{stored(-0.000123456789), float, "-0.000123457"},
		{NewFloat(1.5), float72, "1.50"},
		{NewFloat(3.141592653589793), pi, "3.141593"},
		{NewFloat(1234567.8), double, "1234567.8"},
		{NewInt(7), float, "7"},
		{NewFloat(2.5), nil, "2.5"},
	} {
		if got := string(tc.d.AppendTextAs(nil, tc.ft)); got != tc.want {
			t.Errorf("AppendTextAs(%v, %s) = %q, want %q", tc.d, tc.ft.CompactStr(), got, tc.want)
		}
	}
}

func TestToConversions(t *testing.T) {
	for _, tc := range []struct {
		d       Datum
		i       int64
		f       float64
		warnInt bool
	}{
		{NewString("12abc"), 12, 12, true},
		{NewString(" 3.6"), 4, 3.6, false},
		{NewString("abc"), 0, 0, true},
		{NewFloat(-2.5), -3, -2.5, false},
		{NewDecimal(dec(t, "2.5")), 3, 2.5, false},
		{NewFloat(1e30), math.MaxInt64, 1e30, true},
	} {
		i, err := tc.d.ToInt64()
		if i != tc.i || (err != nil) != tc.warnInt {
			t.Errorf("ToInt64(%v) = %d, %v", tc.d, i, err)
		}
		f, _ := tc.d.ToFloat64()
		if f != tc.f {
			t.Errorf("ToFloat64(%v) = %v, want %v", tc.d, f, tc.f)
		}
	}
	for _, tc := range []struct {
		d          Datum
		true, null bool
	}{
		{NewInt(0), false, false},
		{NewInt(-1), true, false},
		{NewFloat(0.1), true, false},
		{NewDecimal(dec(t, "0.00")), false, false},
		{NewString("0.0"), false, false},
		{NewString("1x"), true, false},
		{Datum{}, false, true},
	} {
		isTrue, isNull, _ := tc.d.ToBool()
		if isTrue != tc.true || isNull != tc.null {
			t.Errorf("ToBool(%v) = %v, %v", tc.d, isTrue, isNull)
		}
	}
}

func fieldType(tp byte, flen, decimal int, flag uint) *ptypes.FieldType {
	ft := ptypes.NewFieldType(tp)
	ft.SetFlen(flen)
	ft.SetDecimal(decimal)
	ft.AddFlag(flag)
	if tp == mysql.TypeVarchar || tp == mysql.TypeString || tp == mysql.TypeBlob {
		ft.SetCharset(mysql.DefaultCharset)
	}
	return ft
}

// TestConvertStrict checks column conversion under MySQL 8's strict mode:
// the stored value, or the MySQL error code.
func TestConvertStrict(t *testing.T) {
	tinyint := fieldType(mysql.TypeTiny, 4, 0, 0)
	utiny := fieldType(mysql.TypeTiny, 3, 0, mysql.UnsignedFlag)
	integer := fieldType(mysql.TypeLong, 11, 0, 0)
	bigUnsigned := fieldType(mysql.TypeLonglong, 20, 0, mysql.UnsignedFlag)
	decimal52 := fieldType(mysql.TypeNewDecimal, 5, 2, 0)
	double := fieldType(mysql.TypeDouble, -1, -1, 0)
	float := fieldType(mysql.TypeFloat, -1, -1, 0)
	varchar3 := fieldType(mysql.TypeVarchar, 3, 0, 0)
	char3 := fieldType(mysql.TypeString, 3, 0, 0)
	varbinary2 := fieldType(mysql.TypeVarchar, 2, 0, mysql.BinaryFlag)
	varbinary2.SetCharset("binary")
	date := fieldType(mysql.TypeDate, 10, 0, 0)
	datetime := fieldType(mysql.TypeDatetime, 19, 0, 0)
	timestamp := fieldType(mysql.TypeTimestamp, 19, 0, 0)
	year := fieldType(mysql.TypeYear, 4, 0, 0)
	enum := fieldType(mysql.TypeEnum, -1, 0, 0)
	enum.SetElems([]string{"small", "large"})
	for _, tc := range []struct {
		d    Datum
		ft   *ptypes.FieldType
		want string // value and kind, or "error N"
	}{
		{NewInt(127), tinyint, "127 int"},
		{NewInt(128), tinyint, "error 1264"},
		{NewInt(-129), tinyint, "error 1264"},
		{NewInt(-1), utiny, "error 1264"},
		{NewInt(255), utiny, "255 uint"},
		{NewFloat(2.5), integer, "3 int"},
		{NewDecimal(dec(t, "-2.5")), integer, "-3 int"},
		{NewString("42"), integer, "42 int"},
		{NewString(" 1.5 "), integer, "2 int"},
		{NewString("abc"), integer, "error 1366"},
		{NewString("12abc"), integer, "error 1265"},
		{NewString(""), integer, "error 1366"},
		{NewUint(math.MaxUint64), bigUnsigned, "18446744073709551615 uint"},
		{NewInt(-1), bigUnsigned, "error 1264"},
		{NewUint(math.MaxUint64), integer, "error 1264"},
		{NewString("3.14159"), decimal52, "3.14 decimal"},
		{NewInt(999), decimal52, "999.00 decimal"},
		{NewInt(1000), decimal52, "error 1264"},
		{NewDecimal(dec(t, "999.995")), decimal52, "error 1264"},
		{NewFloat(-1.005), decimal52, "-1.01 decimal"},
		{NewString("x"), decimal52, "error 1366"},
		{NewString("1.5e3"), double, "1500 float"},
		{NewString("1.5x"), double, "error 1265"},
		{NewString("1e400"), double, "error 1264"},
		{NewString("-1e400"), double, "error 1264"},
		{NewString("1e300"), decimal52, "error 1264"},
		{NewFloat(0.1), float, "0.1 float"},
		{NewInt(7), double, "7 float"},
		{NewString("abc"), varchar3, "abc string"},
		{NewString("héé"), varchar3, "héé string"},
		{NewString("abcd"), varchar3, "error 1406"},
		{NewString("ab   "), varchar3, "ab  string"},
		{NewString("ab "), char3, "ab string"},
		{NewInt(12345), varchar3, "error 1406"},
		{NewInt(123), varchar3, "123 string"},
		{NewString("ab"), varbinary2, "ab bytes"},
		{NewString("abc"), varbinary2, "error 1406"},
		{NewStringBytes([]byte{0xff, 0xfe}), varchar3, "error 1366"},
		{NewString("2020-02-30"), date, "error 1292"},
		{NewString("2020-02-29"), date, "2020-02-29 time"},
		{NewString("2020-02-29 10:11:12"), datetime, "2020-02-29 10:11:12 time"},
		{NewInt(20200229), date, "2020-02-29 time"},
		{NewInt(20200229101112), datetime, "2020-02-29 10:11:12 time"},
		{NewString("0000-00-00"), date, "error 1292"},
		{NewString("1969-12-31 23:59:59"), timestamp, "error 1292"},
		{NewString("2038-01-19 03:14:07"), timestamp, "2038-01-19 03:14:07 time"},
		{NewString("garbage"), datetime, "error 1292"},
		{NewDuration((10*3600+11*60+12)*1e6, 0), integer, "101112 int"},
		{NewDuration(-3600*1e6, 0), integer, "-10000 int"},
		{NewDuration(1500000, 1), integer, "2 int"},
		{NewDuration(3600*1e6, 0), tinyint, "error 1264"},
		{NewInt(69), year, "2069 int"},
		{NewInt(1999), year, "1999 int"},
		{NewInt(2156), year, "error 1264"},
		{NewString("LARGE"), enum, "large string"},
		{NewInt(1), enum, "small string"},
		{NewString("medium"), enum, "error 1265"},
		{Datum{}, integer, "NULL null"},
	} {
		got, err := Convert(tc.d, tc.ft)
		var s string
		if err != nil {
			e, ok := err.(*sqlerr.Error)
			if !ok {
				t.Errorf("Convert(%v, %s): non-MySQL error %v", tc.d, tc.ft.CompactStr(), err)
				continue
			}
			s = "error " + itoa(int(e.Code))
		} else {
			s = got.String() + " " + got.Kind().String()
		}
		if s != tc.want {
			t.Errorf("Convert(%v, %s) = %s, want %s", tc.d, tc.ft.CompactStr(), s, tc.want)
		}
		if err == nil && !got.IsNull() && got.Kind() != KindForFieldType(tc.ft) {
			t.Errorf("Convert(%v, %s) kind %v, KindForFieldType says %v", tc.d, tc.ft.CompactStr(), got.Kind(), KindForFieldType(tc.ft))
		}
	}
	_, err := ConvertColumn(NewInt(300), tinyint, "k", 3)
	if err == nil || err.Error() != "ERROR 1264 (22003): Out of range value for column 'k' at row 3" {
		t.Errorf("ConvertColumn message: %v", err)
	}
}

func itoa(v int) string { return NewInt(int64(v)).String() }

func TestDefaultFieldTypeFor(t *testing.T) {
	tm, _ := ParseTime("2020-01-02 03:04:05.12", mysql.TypeDatetime, 2)
	for _, tc := range []struct {
		d    Datum
		want string
	}{
		{NewInt(1), "bigint(20)"},
		{NewUint(1), "bigint(20)"},
		{NewFloat(1), "double"},
		{NewDecimal(dec(t, "-12.345")), "decimal(5,3)"},
		{NewString("héllo"), "var_string(5)"},
		{NewTime(tm), "datetime(2)"},
	} {
		if got := DefaultFieldTypeFor(tc.d).CompactStr(); got != tc.want {
			t.Errorf("DefaultFieldTypeFor(%v) = %s, want %s", tc.d, got, tc.want)
		}
	}
	if !mysql.HasUnsignedFlag(DefaultFieldTypeFor(NewUint(1)).GetFlag()) {
		t.Error("unsigned datum typed signed")
	}
}

// TestParsersNeverPanic: any text a client sends must parse or fail cleanly.
func TestParsersNeverPanic(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	alphabet := []byte("0123456789-+.eE:T /x\t")
	fts := []*ptypes.FieldType{
		fieldType(mysql.TypeLong, 11, 0, 0), fieldType(mysql.TypeNewDecimal, 10, 3, 0),
		fieldType(mysql.TypeDouble, -1, -1, 0), fieldType(mysql.TypeDatetime, 19, 6, 0),
		fieldType(mysql.TypeDate, 10, 0, 0), fieldType(mysql.TypeYear, 4, 0, 0),
		fieldType(mysql.TypeVarchar, 5, 0, 0), fieldType(mysql.TypeBit, 8, 0, 0),
	}
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.Intn(30))
		for j := range b {
			b[j] = alphabet[rng.Intn(len(alphabet))]
		}
		s := string(b)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("input %q panicked: %v", s, p)
				}
			}()
			_, _ = ParseDecimal(s)
			_, _ = ParseTime(s, mysql.TypeDatetime, 6)
			d := NewString(s)
			_, _ = d.ToInt64()
			_, _ = d.ToUint64()
			_, _ = d.ToFloat64()
			_, _ = d.ToDecimal()
			_, _, _ = d.ToBool()
			for _, ft := range fts {
				_, _ = Convert(d, ft)
			}
			_, _ = Compare(d, NewTime(0))
		}()
	}
}

// TestDecimalSmallAndBigAgree checks the int64 fast paths against the
// big.Int paths on random operands around the int64 boundary.
func TestDecimalSmallAndBigAgree(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	randDec := func() *Decimal {
		var digits []byte
		if rng.Intn(2) == 0 {
			digits = append(digits, '-')
		}
		for i, n := 0, 1+rng.Intn(22); i < n; i++ {
			digits = append(digits, byte('0'+rng.Intn(10)))
		}
		d := dec(t, string(digits))
		return NewDecimalUnscaled(d.Unscaled(), rng.Intn(8))
	}
	// viaBig forces the big.Int representation of the same value.
	viaBig := func(d *Decimal) *Decimal {
		return &Decimal{big: d.Unscaled(), scale: d.scale}
	}
	for i := 0; i < 20000; i++ {
		a, b := randDec(), randDec()
		ab, bb := viaBig(a), viaBig(b)
		check := func(op string, got, want *Decimal) {
			if got.String() != want.String() {
				t.Fatalf("%s %s %s: fast %s, big %s", a, op, b, got, want)
			}
		}
		check("+", a.Add(b), ab.Add(bb))
		check("-", a.Sub(b), ab.Sub(bb))
		check("*", a.Mul(b), ab.Mul(bb))
		if q, ok := a.Div(b, DivPrecisionIncrement); ok {
			qb, _ := ab.Div(bb, DivPrecisionIncrement)
			check("/", q, qb)
			m, _ := a.Mod(b)
			mb, _ := ab.Mod(bb)
			check("%", m, mb)
		}
		s := rng.Intn(10) - 3
		check("round", a.Round(s), ab.Round(s))
		check("truncate", a.Truncate(s), ab.Truncate(s))
		check("normalize", a.Normalize(), ab.Normalize())
		if a.Cmp(b) != ab.Cmp(bb) {
			t.Fatalf("Cmp(%s, %s) differs", a, b)
		}
		if a.IntDigits() != ab.IntDigits() || a.Precision() != ab.Precision() || a.IsInteger() != ab.IsInteger() {
			t.Fatalf("digit counts of %s differ", a)
		}
		if f, fb := a.Float64(), ab.Float64(); f != fb {
			t.Fatalf("Float64(%s) = %v, big %v", a, f, fb)
		}
	}
}

func TestTimeZones(t *testing.T) {
	for _, bad := range []string{"+15:00", "-14:00", "+1:60", "Mars/Olympus", "+10"} {
		if _, err := ParseTimeZone(bad); err == nil {
			t.Errorf("ParseTimeZone(%q) accepted", bad)
		}
	}
	plus2, err := ParseTimeZone("+02:00")
	if err != nil {
		t.Fatal(err)
	}
	utc, _ := ParseTimeZone("UTC")
	tm, _ := ParseTime("2020-01-01 01:30:00.25", mysql.TypeTimestamp, 2)
	got, err := tm.ConvertTimeZone(plus2, utc)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "2019-12-31 23:30:00.25" || got.Type() != mysql.TypeTimestamp {
		t.Errorf("+02:00 -> UTC gave %s (%d)", got, got.Type())
	}
	back, _ := got.ConvertTimeZone(utc, plus2)
	if back != tm {
		t.Errorf("round trip gave %s, want %s", back, tm)
	}
}
