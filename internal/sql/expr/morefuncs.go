package expr

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Builtins common in application and ORM queries beyond the core set.
func init() {
	more := map[string]*funcDef{
		"isnull":          {minArgs: 1, maxArgs: 1, retType: retInt, eval: evalIsNullFunc},
		"convert_using":   {minArgs: 2, maxArgs: 2, retType: retConvertUsing, eval: evalConvertUsing},
		"field":           {minArgs: 2, maxArgs: -1, retType: retInt, eval: evalField},
		"elt":             {minArgs: 2, maxArgs: -1, retType: retEltType, eval: evalElt},
		"find_in_set":     {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retInt, eval: evalFindInSet},
		"hex":             {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retLongString, eval: evalHex},
		"unhex":           {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retBinaryString, eval: evalUnhex},
		"md5":             {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retFixedString(32), eval: evalDigest("md5")},
		"sha1":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retFixedString(40), eval: evalDigest("sha1")},
		"sha":             {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retFixedString(40), eval: evalDigest("sha1")},
		"sha2":            {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retFixedString(128), eval: evalSHA2},
		"crc32":           {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retUint, eval: evalCRC32},
		"uuid":            {minArgs: 0, maxArgs: 0, volatile: true, retType: retFixedString(36), eval: evalUUID},
		"substring_index": {minArgs: 3, maxArgs: 3, nullIfNullArg: true, retType: retArg0String, eval: evalSubstringIndex},
		"format":          {minArgs: 2, maxArgs: 3, nullIfNullArg: true, retType: retLongString, eval: evalFormat},
		"dayofweek":       {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalDatePart(func(g time.Time) int { return int(g.Weekday()) + 1 })},
		"weekday":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalDatePart(func(g time.Time) int { return (int(g.Weekday()) + 6) % 7 })},
		"dayofyear":       {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalDatePart(time.Time.YearDay)},
		"quarter":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalDatePart(func(g time.Time) int { return (int(g.Month())-1)/3 + 1 })},
		"dayname":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retShortString, eval: evalDateName(func(g time.Time) string { return g.Weekday().String() })},
		"monthname":       {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retShortString, eval: evalDateName(func(g time.Time) string { return g.Month().String() })},
		"last_day":        {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDate, eval: evalLastDay},
		"str_to_date":     {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retStrToDate, eval: evalStrToDate},
		"convert_tz":      {minArgs: 3, maxArgs: 3, nullIfNullArg: true, retType: retConvertTZ, eval: evalConvertTZ},
	}
	for name, def := range more {
		builtins[name] = def
	}
}

func retFixedString(n int) func([]Expr) *ptypes.FieldType {
	return func([]Expr) *ptypes.FieldType { return stringType(n) }
}

func retBinaryString([]Expr) *ptypes.FieldType {
	return setBinaryCharset(stringType(mysql.MaxBlobWidth))
}

func retConvertUsing(args []Expr) *ptypes.FieldType {
	ft := stringType(charLen(args[0].Type()))
	if k, ok := args[1].(*Constant); ok {
		if cs, _ := k.Value.ToString(); strings.EqualFold(cs, charset.CharsetBin) {
			setBinaryCharset(ft)
		}
	}
	return ft
}

func retEltType(args []Expr) *ptypes.FieldType {
	n := 0
	for _, a := range args[1:] {
		n = max(n, charLen(a.Type()))
	}
	return stringType(n)
}

// convertCall compiles CONVERT(expr USING charset): the value as a string
// of that character set (binary gives bytes; text charsets keep the bytes,
// all text being utf8mb4 in Strata).
func (c *compiler) convertCall(args []Expr) (Expr, error) {
	if len(args) != 2 {
		return nil, errArgCount("CONVERT")
	}
	k, ok := args[1].(*Constant)
	if !ok {
		return nil, errArgCount("CONVERT")
	}
	cs, _ := k.Value.ToString()
	if _, err := charset.GetCharsetInfo(cs); err != nil {
		return nil, sqlerr.New(1115, "42000", "Unknown character set: '%s'", cs)
	}
	return newFunc("convert_using", args)
}

func evalIsNullFunc(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	return types.NewBool(args[0].IsNull()), nil
}

func evalConvertUsing(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if args[0].IsNull() {
		return types.Datum{}, nil
	}
	b := textOf(args[0])
	if f.ft.GetCharset() != charset.CharsetBin && !utf8.Valid(b) {
		ctx.Warn(sqlerr.New(1300, "HY000", "Invalid utf8mb4 character string: '%X'", b))
		return types.Datum{}, nil
	}
	return stringResult(f, b), nil
}

// evalField is FIELD(x, a, b, ...): the 1-based position of x in the list,
// 0 if absent or NULL. Strings compare as strings when all are strings,
// otherwise as numbers (MySQL's rule).
func evalField(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	x := args[0]
	if x.IsNull() {
		return types.NewInt(0), nil
	}
	allStrings := true
	for _, a := range args {
		if !a.IsNull() && !a.IsStringLike() {
			allStrings = false
		}
	}
	for i, a := range args[1:] {
		if a.IsNull() {
			continue
		}
		if allStrings {
			if bytes.Equal(x.Bytes(), a.Bytes()) {
				return types.NewInt(int64(i + 1)), nil
			}
			continue
		}
		xf, _ := x.ToFloat64()
		af, _ := a.ToFloat64()
		if xf == af {
			return types.NewInt(int64(i + 1)), nil
		}
	}
	return types.NewInt(0), nil
}

func evalElt(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if args[0].IsNull() {
		return types.Datum{}, nil
	}
	n := intArg(ctx, args[0])
	if n < 1 || n >= int64(len(args)) || args[n].IsNull() {
		return types.Datum{}, nil
	}
	return stringResult(f, textOf(args[n])), nil
}

func evalFindInSet(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	needle := string(textOf(args[0]))
	list := string(textOf(args[1]))
	if strings.Contains(needle, ",") || list == "" {
		return types.NewInt(0), nil
	}
	for i, item := range strings.Split(list, ",") {
		if item == needle {
			return types.NewInt(int64(i + 1)), nil
		}
	}
	return types.NewInt(0), nil
}

// evalHex renders numbers as their hexadecimal value and strings byte-wise.
func evalHex(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	d := args[0]
	if d.IsStringLike() {
		return stringResult(f, []byte(strings.ToUpper(hex.EncodeToString(d.Bytes())))), nil
	}
	var v uint64
	if d.Kind() == types.KindUint64 {
		v = d.Uint()
	} else {
		i, err := d.ToInt64()
		ctx.Warn(err)
		v = uint64(i)
	}
	return stringResult(f, []byte(strings.ToUpper(strconv.FormatUint(v, 16)))), nil
}

func evalUnhex(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	s := string(textOf(args[0]))
	if len(s)%2 == 1 {
		s = "0" + s
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return types.Datum{}, nil
	}
	return types.NewBytes(b), nil
}

func evalDigest(kind string) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		b := textOf(args[0])
		var sum []byte
		switch kind {
		case "md5":
			s := md5.Sum(b)
			sum = s[:]
		default:
			s := sha1.Sum(b)
			sum = s[:]
		}
		return stringResult(f, []byte(hex.EncodeToString(sum))), nil
	}
}

func evalSHA2(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	b := textOf(args[0])
	var sum []byte
	switch intArg(ctx, args[1]) {
	case 0, 256:
		s := sha256.Sum256(b)
		sum = s[:]
	case 224:
		s := sha256.Sum224(b)
		sum = s[:]
	case 384:
		s := sha512.Sum384(b)
		sum = s[:]
	case 512:
		s := sha512.Sum512(b)
		sum = s[:]
	default:
		return types.Datum{}, nil
	}
	return stringResult(f, []byte(hex.EncodeToString(sum))), nil
}

func evalCRC32(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	return types.NewUint(uint64(crc32.ChecksumIEEE(textOf(args[0])))), nil
}

// evalUUID returns a random (version 4) UUID; MySQL's are time-based
// (version 1), which callers cannot rely on beyond uniqueness and format.
func evalUUID(_ *EvalContext, f *Func, _ []types.Datum) (types.Datum, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return types.Datum{}, errInternal("UUID(): %v", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	s := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	return stringResult(f, []byte(s)), nil
}

// evalSubstringIndex is SUBSTRING_INDEX(s, delim, count): the text before
// the count-th delimiter (from the right for a negative count).
func evalSubstringIndex(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	s, delim := textOf(args[0]), textOf(args[1])
	count := intArg(ctx, args[2])
	if len(delim) == 0 || count == 0 {
		return stringResult(f, []byte{}), nil
	}
	if count > 0 {
		idx := 0
		for i := int64(0); i < count; i++ {
			j := bytes.Index(s[idx:], delim)
			if j < 0 {
				return stringResult(f, s), nil
			}
			idx += j + len(delim)
		}
		return stringResult(f, s[:idx-len(delim)]), nil
	}
	end := len(s)
	// -(count+1) cannot overflow, unlike -count for MinInt64.
	for i, n := int64(0), -(count + 1); i <= n; i++ {
		j := bytes.LastIndex(s[:end], delim)
		if j < 0 {
			return stringResult(f, s), nil
		}
		end = j
	}
	return stringResult(f, s[end+len(delim):]), nil
}

// evalFormat is FORMAT(x, d): x rounded to d decimals with ',' thousands
// separators (en_US locale, the only one supported).
func evalFormat(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	places := intArg(ctx, args[1])
	places = max(min(places, 30), 0)
	var dec *types.Decimal
	if args[0].Kind() == types.KindFloat64 {
		var err error
		if dec, err = types.NewDecimalFromFloat(args[0].Float()); err != nil {
			return types.Datum{}, nil
		}
	} else {
		var err error
		dec, err = args[0].ToDecimal()
		ctx.Warn(err)
	}
	s := dec.Round(int(places)).String()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	var out []byte
	if neg {
		out = append(out, '-')
	}
	for i := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, intPart[i])
	}
	out = append(out, frac...)
	return stringResult(f, out), nil
}

func evalDatePart(part func(time.Time) int) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
		t, ok := timeArg(ctx, args[0])
		if !ok || t.IsZero() {
			return types.Datum{}, nil
		}
		return types.NewInt(int64(part(t.GoTime(time.UTC)))), nil
	}
}

func evalDateName(name func(time.Time) string) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		t, ok := timeArg(ctx, args[0])
		if !ok || t.IsZero() {
			return types.Datum{}, nil
		}
		return stringResult(f, []byte(name(t.GoTime(time.UTC)))), nil
	}
}

func evalLastDay(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	t, ok := timeArg(ctx, args[0])
	if !ok || t.IsZero() {
		return types.Datum{}, nil
	}
	last := time.Date(t.Year(), time.Month(t.Month())+1, 0, 0, 0, 0, 0, time.UTC)
	r, err := types.TimeFromGo(last, mysql.TypeDate, 0)
	if err != nil {
		return types.Datum{}, nil
	}
	return types.NewTime(r), nil
}

// TimestampDiff is TIMESTAMPDIFF(unit, a, b): b - a in whole units.
type TimestampDiff struct {
	Unit ast.TimeUnitType
	A, B Expr
}

// Type implements Expr.
func (d *TimestampDiff) Type() *ptypes.FieldType { return intType(mysql.MaxIntWidth, false) }

func (d *TimestampDiff) String() string {
	return "timestampdiff(" + d.Unit.String() + ", " + d.A.String() + ", " + d.B.String() + ")"
}

// Eval implements Expr. Month-based units count whole months, a month being
// complete when b's day and time of day reach a's (as MySQL counts).
func (d *TimestampDiff) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	av, err := d.A.Eval(ctx, row)
	if err != nil || av.IsNull() {
		return types.Datum{}, err
	}
	bv, err := d.B.Eval(ctx, row)
	if err != nil || bv.IsNull() {
		return types.Datum{}, err
	}
	a, ok1 := timeArg(ctx, av)
	b, ok2 := timeArg(ctx, bv)
	if !ok1 || !ok2 || a.IsZero() || b.IsZero() {
		return types.Datum{}, nil
	}
	ga, gb := a.GoTime(time.UTC), b.GoTime(time.UTC)
	switch d.Unit {
	case ast.TimeUnitMonth, ast.TimeUnitQuarter, ast.TimeUnitYear:
		months := int64(gb.Year()-ga.Year())*12 + int64(gb.Month()-ga.Month())
		// Compare the rest (day, clock) to see whether the last month is whole.
		restA := time.Date(2000, 1, ga.Day(), ga.Hour(), ga.Minute(), ga.Second(), ga.Nanosecond(), time.UTC)
		restB := time.Date(2000, 1, gb.Day(), gb.Hour(), gb.Minute(), gb.Second(), gb.Nanosecond(), time.UTC)
		if months > 0 && restB.Before(restA) {
			months--
		} else if months < 0 && restB.After(restA) {
			months++
		}
		switch d.Unit {
		case ast.TimeUnitQuarter:
			months /= 3
		case ast.TimeUnitYear:
			months /= 12
		}
		return types.NewInt(months), nil
	}
	micros := gb.Sub(ga).Microseconds()
	var unit int64
	switch d.Unit {
	case ast.TimeUnitMicrosecond:
		unit = 1
	case ast.TimeUnitSecond:
		unit = 1000000
	case ast.TimeUnitMinute:
		unit = 60 * 1000000
	case ast.TimeUnitHour:
		unit = 3600 * 1000000
	case ast.TimeUnitDay:
		unit = 86400 * 1000000
	case ast.TimeUnitWeek:
		unit = 7 * 86400 * 1000000
	default:
		return types.Datum{}, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "TIMESTAMPDIFF does not support unit %s", d.Unit.String())
	}
	return types.NewInt(micros / unit), nil
}

// timestampCall compiles TIMESTAMPADD(unit, n, t) and TIMESTAMPDIFF(unit, a, b).
func (c *compiler) timestampCall(name string, nodes []ast.ExprNode) (Expr, error) {
	if len(nodes) != 3 {
		return nil, errArgCount(strings.ToUpper(name))
	}
	unit, ok := nodes[0].(*ast.TimeUnitExpr)
	if !ok {
		return nil, errArgCount(strings.ToUpper(name))
	}
	args, err := c.compileAll(nodes[1:])
	if err != nil {
		return nil, err
	}
	if name == "timestampadd" {
		return NewDateArith(args[1], args[0], unit.Unit, false)
	}
	return &TimestampDiff{Unit: unit.Unit, A: args[0], B: args[1]}, nil
}

// StrToDate is STR_TO_DATE(str, format), the inverse of DATE_FORMAT for the
// common specifiers. A constant format decides the result type: DATE when
// it has no clock fields, DATETIME (with microseconds for %f) otherwise.
func retStrToDate(args []Expr) *ptypes.FieldType {
	k, ok := args[1].(*Constant)
	if !ok || k.Value.IsNull() {
		return timeType(mysql.TypeDatetime, types.MaxFsp)
	}
	f, _ := k.Value.ToString()
	date, clock, frac := formatParts(f)
	switch {
	case frac:
		return timeType(mysql.TypeDatetime, types.MaxFsp)
	case clock || !date:
		return timeType(mysql.TypeDatetime, 0)
	}
	return timeType(mysql.TypeDate, 0)
}

// formatParts reports which kinds of fields a DATE_FORMAT string has.
func formatParts(f string) (date, clock, frac bool) {
	for i := 0; i+1 < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		switch f[i] {
		case 'Y', 'y', 'm', 'c', 'd', 'e', 'M', 'b', 'j':
			date = true
		case 'H', 'k', 'h', 'I', 'l', 'i', 's', 'S', 'p', 'T', 'r':
			clock = true
		case 'f':
			clock, frac = true, true
		}
	}
	return date, clock, frac
}

func evalStrToDate(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	orig := string(textOf(args[0]))
	s := orig
	format := string(textOf(args[1]))
	year, month, day, hour, minute, second, micro := 0, 0, 0, 0, 0, 0, 0
	pm, hour12 := false, false
	fail := func() (types.Datum, error) {
		ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect datetime value: '%s' for function str_to_date", orig))
		return types.Datum{}, nil
	}
	// num reads up to width digits, after optional spaces.
	num := func(width int) (int, bool) {
		s = strings.TrimLeft(s, " ")
		n, v := 0, 0
		for n < width && n < len(s) && s[n] >= '0' && s[n] <= '9' {
			v = v*10 + int(s[n]-'0')
			n++
		}
		if n == 0 {
			return 0, false
		}
		s = s[n:]
		return v, true
	}
	name := func(names []string, short bool) (int, bool) {
		for i, n := range names {
			if short {
				n = n[:3]
			}
			if len(s) >= len(n) && strings.EqualFold(s[:len(n)], n) {
				s = s[len(n):]
				return i, true
			}
		}
		return 0, false
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			if c == ' ' {
				s = strings.TrimLeft(s, " ")
				continue
			}
			if len(s) == 0 || s[0] != c {
				return fail()
			}
			s = s[1:]
			continue
		}
		i++
		var ok bool
		switch format[i] {
		case 'Y':
			year, ok = num(4)
		case 'y':
			if year, ok = num(2); ok {
				if year < 70 {
					year += 2000
				} else {
					year += 1900
				}
			}
		case 'm', 'c':
			month, ok = num(2)
		case 'd', 'e':
			day, ok = num(2)
		case 'H', 'k':
			hour, ok = num(2)
		case 'h', 'I', 'l':
			hour, ok = num(2)
			hour12 = true
		case 'i':
			minute, ok = num(2)
		case 's', 'S':
			second, ok = num(2)
		case 'f':
			start := len(s)
			if micro, ok = num(6); ok {
				for d := start - len(s); d < 6; d++ {
					micro *= 10
				}
			}
		case 'p':
			switch {
			case len(s) >= 2 && strings.EqualFold(s[:2], "AM"):
				ok = true
			case len(s) >= 2 && strings.EqualFold(s[:2], "PM"):
				pm, ok = true, true
			}
			if ok {
				s = s[2:]
			}
		case 'M':
			var m int
			if m, ok = name(monthNames[:], false); ok {
				month = m + 1
			}
		case 'b':
			var m int
			if m, ok = name(monthNames[:], true); ok {
				month = m + 1
			}
		case 'r':
			hour12 = true
			fallthrough
		case 'T':
			if hour, ok = num(2); ok && len(s) > 0 && s[0] == ':' {
				s = s[1:]
				if minute, ok = num(2); ok && len(s) > 0 && s[0] == ':' {
					s = s[1:]
					second, ok = num(2)
				} else {
					ok = false
				}
			} else {
				ok = false
			}
			if ok && format[i] == 'r' {
				s = strings.TrimLeft(s, " ")
				switch {
				case len(s) >= 2 && strings.EqualFold(s[:2], "AM"):
					s = s[2:]
				case len(s) >= 2 && strings.EqualFold(s[:2], "PM"):
					pm = true
					s = s[2:]
				default:
					ok = false
				}
			}
		case '%':
			ok = len(s) > 0 && s[0] == '%'
			if ok {
				s = s[1:]
			}
		default:
			ok = false
		}
		if !ok {
			return fail()
		}
	}
	if hour12 {
		if hour < 1 || hour > 12 {
			return fail()
		}
		hour %= 12
		if pm {
			hour += 12
		}
	}
	tp, fsp := f.ft.GetType(), max(f.ft.GetDecimal(), 0)
	t, err := types.NewTimeFromParts(year, month, day, hour, minute, second, micro, tp, fsp)
	if err != nil {
		return fail()
	}
	return types.NewTime(t), nil
}

func retConvertTZ(args []Expr) *ptypes.FieldType {
	return timeType(mysql.TypeDatetime, operandFsp(args[0]))
}

// operandFsp is the fractional-second precision a temporal operand carries:
// its type's, the digits a string constant spells, or 6 when unknown.
func operandFsp(e Expr) int {
	if classOf(e.Type()) == classTime {
		return max(e.Type().GetDecimal(), 0)
	}
	if k, ok := e.(*Constant); ok && k.Value.IsStringLike() {
		s := string(k.Value.Bytes())
		if i := strings.LastIndexByte(s, '.'); i >= 0 {
			return min(len(strings.TrimSpace(s[i+1:])), types.MaxFsp)
		}
		return 0
	}
	return types.MaxFsp
}

// evalConvertTZ is CONVERT_TZ(dt, from, to); unknown zones give NULL.
func evalConvertTZ(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	t, ok := timeArg(ctx, args[0])
	if !ok {
		return types.Datum{}, nil
	}
	from, err1 := types.ParseTimeZone(string(textOf(args[1])))
	to, err2 := types.ParseTimeZone(string(textOf(args[2])))
	if err1 != nil || err2 != nil {
		return types.Datum{}, nil
	}
	t, err := t.WithType(mysql.TypeDatetime, max(f.ft.GetDecimal(), 0))
	if err != nil {
		return types.Datum{}, nil
	}
	r, err := t.ConvertTimeZone(from, to)
	if err != nil {
		return types.Datum{}, nil
	}
	return types.NewTime(r), nil
}
