package types

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/sqljson"
)

// Convert casts d for storing into a column of type ft under MySQL 8's
// default (strict) sql_mode. NULL passes through (NOT NULL is the caller's
// check). Errors are *sqlerr.Error: 1264 out of range, 1406 data too long,
// 1366 incorrect value, 1265 data truncated, 1292 incorrect datetime value.
// Messages name no column; use ConvertColumn to have them name one.
func Convert(d Datum, ft *ptypes.FieldType) (Datum, error) {
	return ConvertColumn(d, ft, "", 1)
}

// ConvertColumn is Convert with the column name and 1-based row number used
// in error messages, as MySQL reports them.
func ConvertColumn(d Datum, ft *ptypes.FieldType, col string, row int) (Datum, error) {
	if d.k == KindNull {
		return d, nil
	}
	c := converter{ft: ft, col: col, row: row}
	switch ft.GetType() {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		return c.toInt(d)
	case mysql.TypeYear:
		return c.toYear(d)
	case mysql.TypeBit:
		return c.toBit(d)
	case mysql.TypeFloat, mysql.TypeDouble:
		return c.toFloat(d)
	case mysql.TypeNewDecimal:
		return c.toDecimal(d)
	case mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeString,
		mysql.TypeTinyBlob, mysql.TypeBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		return c.toString(d)
	case mysql.TypeDate, mysql.TypeNewDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		return c.toTime(d)
	case mysql.TypeDuration:
		return c.toDuration(d)
	case mysql.TypeEnum:
		return c.toEnum(d)
	case mysql.TypeSet:
		return c.toSet(d)
	case mysql.TypeJSON:
		return c.toJSON(d)
	case mysql.TypeNull, mysql.TypeUnspecified:
		return d, nil
	}
	return Datum{}, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support column type %s", ft.CompactStr())
}

type converter struct {
	ft  *ptypes.FieldType
	col string
	row int
}

func (c converter) outOfRange() error {
	return sqlerr.New(sqlerr.ErWarnDataOutOfRange, "22003", "Out of range value for column '%s' at row %d", c.col, c.row)
}

func (c converter) truncated() error {
	return sqlerr.New(1265, "01000", "Data truncated for column '%s' at row %d", c.col, c.row)
}

func (c converter) incorrect(typeName string, d Datum) error {
	s, _ := d.ToString()
	return sqlerr.New(1366, "HY000", "Incorrect %s value: '%s' for column '%s' at row %d", typeName, s, c.col, c.row)
}

func (c converter) unsigned() bool { return mysql.HasUnsignedFlag(c.ft.GetFlag()) }

// intRange returns the bounds of an integer column type.
func intRange(tp byte, unsigned bool) (lo int64, hi uint64) {
	var bits uint
	switch tp {
	case mysql.TypeTiny:
		bits = 8
	case mysql.TypeShort:
		bits = 16
	case mysql.TypeInt24:
		bits = 24
	case mysql.TypeLong:
		bits = 32
	default:
		bits = 64
	}
	if unsigned {
		if bits == 64 {
			return 0, math.MaxUint64
		}
		return 0, 1<<bits - 1
	}
	return -1 << (bits - 1), 1<<(bits-1) - 1
}

// numberFromString parses text for a numeric column: nothing numeric is
// 1366 (incorrect value), trailing garbage is 1265 (data truncated).
func (c converter) numberFromString(d Datum, typeName string) (*Decimal, error) {
	dec, complete := stringToDecimal(d.b())
	if n, ok := scanNumber(d.b()); !ok || n == 0 {
		return nil, c.incorrect(typeName, d)
	}
	if !complete {
		return nil, c.truncated()
	}
	return dec, nil
}

func (c converter) toInt(d Datum) (Datum, error) {
	lo, hi := intRange(c.ft.GetType(), c.unsigned())
	var dec *Decimal
	switch d.k {
	case KindInt64:
		v := d.i
		if v < lo || (v > 0 && uint64(v) > hi) {
			return Datum{}, c.outOfRange()
		}
		if c.unsigned() {
			return NewUint(uint64(v)), nil
		}
		return d, nil
	case KindUint64:
		v := uint64(d.i)
		if v > hi {
			return Datum{}, c.outOfRange()
		}
		if c.unsigned() {
			return d, nil
		}
		return NewInt(int64(v)), nil
	case KindFloat64:
		f := math.Round(d.Float())
		if math.IsNaN(f) || f < float64(lo) || f >= float64(hi)+1 {
			return Datum{}, c.outOfRange()
		}
		if c.unsigned() {
			if f >= 9223372036854775808.0 {
				return NewUint(uint64(f)), nil
			}
			return NewUint(uint64(int64(f))), nil
		}
		return NewInt(int64(f)), nil
	case KindDecimal:
		dec = d.dec()
	case KindString, KindBytes:
		var err error
		if dec, err = c.numberFromString(d, "integer"); err != nil {
			return Datum{}, err
		}
	case KindTime:
		return c.toInt(d.Time().ToNumber())
	case KindDuration:
		return c.toInt(durationToNumber(d.Duration()))
	}
	r := dec.Round(0)
	if c.unsigned() {
		v, ok := r.Uint64()
		if !ok || v > hi {
			return Datum{}, c.outOfRange()
		}
		return NewUint(v), nil
	}
	v, ok := r.Int64()
	if !ok || v < lo || (v > 0 && uint64(v) > hi) {
		return Datum{}, c.outOfRange()
	}
	return NewInt(v), nil
}

func (c converter) toYear(d Datum) (Datum, error) {
	if d.k == KindString || d.k == KindBytes {
		s := strings.TrimSpace(string(d.b()))
		v, err := strconv.Atoi(s)
		if err != nil {
			return Datum{}, c.incorrect("integer", d)
		}
		// A string '0' or '00' is the year 2000; numeric 0 is the zero year.
		if v >= 0 && v <= 99 {
			if v < 70 {
				v += 2000
			} else {
				v += 1900
			}
		}
		if v < 1901 || v > 2155 {
			return Datum{}, c.outOfRange()
		}
		return NewInt(int64(v)), nil
	}
	if d.k == KindTime {
		return NewInt(int64(d.Time().Year())), nil
	}
	v, err := d.ToInt64()
	if err != nil {
		return Datum{}, c.outOfRange()
	}
	switch {
	case v == 0:
		return NewInt(0), nil
	case v >= 1 && v <= 69:
		v += 2000
	case v >= 70 && v <= 99:
		v += 1900
	}
	if v < 1901 || v > 2155 {
		return Datum{}, c.outOfRange()
	}
	return NewInt(v), nil
}

func (c converter) toBit(d Datum) (Datum, error) {
	width := c.ft.GetFlen()
	if width <= 0 {
		width = 1
	}
	var v uint64
	switch d.k {
	case KindString, KindBytes:
		if len(d.b()) > 8 {
			return Datum{}, sqlerr.New(sqlerr.ErDataTooLong, "22001", "Data too long for column '%s' at row %d", c.col, c.row)
		}
		for _, b := range d.b() {
			v = v<<8 | uint64(b)
		}
	default:
		u, err := d.ToUint64()
		if err != nil {
			return Datum{}, c.outOfRange()
		}
		v = u
	}
	if width < 64 && v>>uint(width) != 0 {
		return Datum{}, sqlerr.New(sqlerr.ErDataTooLong, "22001", "Data too long for column '%s' at row %d", c.col, c.row)
	}
	return NewUint(v), nil
}

func (c converter) toFloat(d Datum) (Datum, error) {
	var f float64
	switch d.k {
	case KindString, KindBytes:
		dec, err := c.numberFromString(d, "double")
		if err != nil {
			return Datum{}, err
		}
		f = dec.Float64()
		g, perr := strconv.ParseFloat(strings.TrimSpace(string(d.b())), 64)
		switch {
		case perr == nil:
			f = g
		case errors.Is(perr, strconv.ErrRange) && math.IsInf(g, 0):
			return Datum{}, c.outOfRange()
		}
	default:
		f, _ = d.ToFloat64()
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return Datum{}, c.outOfRange()
	}
	if flen, dec := c.ft.GetFlen(), c.ft.GetDecimal(); dec > 0 && dec != ptypes.UnspecifiedLength && flen > 0 {
		// FLOAT(M,D)/DOUBLE(M,D): round to D digits, at most M-D before the point.
		p := math.Pow10(dec)
		f = math.Round(f*p) / p
		if math.Abs(f) >= math.Pow10(flen-dec) {
			return Datum{}, c.outOfRange()
		}
	}
	if c.unsigned() && f < 0 {
		return Datum{}, c.outOfRange()
	}
	if c.ft.GetType() == mysql.TypeFloat {
		if math.Abs(f) > math.MaxFloat32 {
			return Datum{}, c.outOfRange()
		}
		// Keep the shortest decimal that a FLOAT holds, so the value prints
		// and compares as MySQL shows it (0.1, not 0.10000000149011612).
		f, _ = strconv.ParseFloat(strconv.FormatFloat(float64(float32(f)), 'g', -1, 32), 64)
	}
	return NewFloat(f), nil
}

// DecimalBounds returns the precision and scale of a DECIMAL column type,
// applying MySQL's defaults (DECIMAL = DECIMAL(10,0)).
func DecimalBounds(ft *ptypes.FieldType) (prec, scale int) {
	prec, scale = ft.GetFlen(), ft.GetDecimal()
	if prec <= 0 {
		prec = 10
	}
	if scale < 0 {
		scale = 0
	}
	return prec, scale
}

func (c converter) toDecimal(d Datum) (Datum, error) {
	var dec *Decimal
	switch d.k {
	case KindString, KindBytes:
		var err error
		if dec, err = c.numberFromString(d, "decimal"); err != nil {
			return Datum{}, err
		}
	case KindFloat64:
		f := d.Float()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return Datum{}, c.outOfRange()
		}
		dec, _ = NewDecimalFromFloat(f)
	default:
		dec, _ = d.ToDecimal()
	}
	prec, scale := DecimalBounds(c.ft)
	r := dec.Round(scale)
	if r.IntDigits() > prec-scale {
		return Datum{}, c.outOfRange()
	}
	if c.unsigned() && r.Sign() < 0 {
		return Datum{}, c.outOfRange()
	}
	return NewDecimal(r), nil
}

// binaryString reports whether a string column type holds bytes rather than text.
func binaryString(ft *ptypes.FieldType) bool {
	return ft.GetCharset() == charset.CharsetBin || (mysql.HasBinaryFlag(ft.GetFlag()) && ft.GetCharset() == "")
}

// maxStringLen returns the length limit of a string type: characters for
// CHAR/VARCHAR, bytes for BLOB/TEXT (which have fixed limits).
func maxStringLen(ft *ptypes.FieldType) (limit int, inBytes bool) {
	switch ft.GetType() {
	case mysql.TypeTinyBlob:
		return 255, true
	case mysql.TypeBlob:
		if flen := ft.GetFlen(); flen > 0 && flen < 65535 {
			// TEXT(n) picks the smallest type holding n; the limit is the type's.
			if flen <= 255 {
				return 255, true
			}
		}
		return 65535, true
	case mysql.TypeMediumBlob:
		return 1<<24 - 1, true
	case mysql.TypeLongBlob:
		return 1<<32 - 1, true
	}
	return ft.GetFlen(), false
}

func (c converter) toString(d Datum) (Datum, error) {
	var b []byte
	switch d.k {
	case KindString, KindBytes:
		b = d.b()
	default:
		b = d.AppendText(nil)
	}
	bin := binaryString(c.ft)
	limit, inBytes := maxStringLen(c.ft)
	inBytes = inBytes || bin
	if !bin && !utf8.Valid(b) {
		return Datum{}, sqlerr.New(1366, "HY000", "Incorrect string value: '%s' for column '%s' at row %d", hexPrefix(b), c.col, c.row)
	}
	if limit >= 0 {
		n := len(b)
		if !inBytes {
			n = utf8.RuneCount(b)
		}
		if n > limit {
			// Excess trailing spaces are cut silently (a note in MySQL);
			// anything else is an error in strict mode.
			cut := len(b)
			if inBytes {
				cut = limit
			} else {
				cut = 0
				for i := 0; i < limit; i++ {
					_, size := utf8.DecodeRune(b[cut:])
					cut += size
				}
			}
			if !onlyByte(b[cut:], ' ') {
				return Datum{}, sqlerr.New(sqlerr.ErDataTooLong, "22001", "Data too long for column '%s' at row %d", c.col, c.row)
			}
			b = b[:cut]
		}
	}
	if c.ft.GetType() == mysql.TypeString && !bin {
		// CHAR pads on storage and strips trailing spaces on retrieval
		// (PAD_CHAR_TO_FULL_LENGTH off): keep the stripped form.
		for len(b) > 0 && b[len(b)-1] == ' ' {
			b = b[:len(b)-1]
		}
	}
	if bin {
		return NewBytes(b), nil
	}
	return NewStringBytes(b), nil
}

func onlyByte(b []byte, c byte) bool {
	for _, x := range b {
		if x != c {
			return false
		}
	}
	return true
}

func hexPrefix(b []byte) string {
	const digits = "0123456789ABCDEF"
	var sb strings.Builder
	for i, x := range b {
		if i == 4 {
			sb.WriteString("...")
			break
		}
		sb.WriteString(`\x`)
		sb.WriteByte(digits[x>>4])
		sb.WriteByte(digits[x&15])
	}
	return sb.String()
}

func (c converter) badTime(d Datum) error {
	name := "datetime"
	if timeTypeCode(c.ft.GetType()) == timeTypeDate {
		name = "date"
	}
	s, _ := d.ToString()
	return sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect %s value: '%s' for column '%s' at row %d", name, s, c.col, c.row)
}

func (c converter) toTime(d Datum) (Datum, error) {
	tp := c.ft.GetType()
	fsp := c.ft.GetDecimal()
	if fsp < 0 || tp == mysql.TypeDate || tp == mysql.TypeNewDate {
		fsp = 0
	}
	var t Time
	var err error
	switch d.k {
	case KindTime:
		t, err = d.Time().WithType(tp, fsp)
	case KindString, KindBytes:
		t, err = ParseTime(string(d.b()), tp, fsp)
	case KindInt64, KindUint64, KindDecimal, KindFloat64:
		t, err = timeFromNumber(d, tp, fsp)
	}
	if err != nil {
		return Datum{}, c.badTime(d)
	}
	if t.IsZero() {
		// NO_ZERO_DATE is part of MySQL 8's default strict mode.
		return Datum{}, c.badTime(d)
	}
	if tp == mysql.TypeTimestamp {
		lo, _ := NewTimeFromParts(1970, 1, 1, 0, 0, 1, 0, tp, 0)
		hi, _ := NewTimeFromParts(2038, 1, 19, 3, 14, 7, 999999, tp, 0)
		if t.Compare(lo) < 0 || t.Compare(hi) > 0 {
			return Datum{}, c.badTime(d)
		}
	}
	return NewTime(t), nil
}

// timeFromNumber interprets 20200102, 200102, 20200102030405(.ffffff) as MySQL does.
func timeFromNumber(d Datum, tp byte, fsp int) (Time, error) {
	s := string(d.AppendText(nil))
	if d.k == KindFloat64 {
		dec, err := NewDecimalFromFloat(d.Float())
		if err != nil {
			return 0, ErrBadTime
		}
		s = dec.String()
	}
	intPart := s
	frac := ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	switch {
	case len(intPart) <= 6 && frac == "":
		intPart = strings.Repeat("0", 6-len(intPart)) + intPart
	case len(intPart) == 7:
		intPart = "0" + intPart
	case len(intPart) > 8 && len(intPart) < 12:
		intPart = strings.Repeat("0", 12-len(intPart)) + intPart
	case len(intPart) == 13:
		intPart = "0" + intPart
	}
	return ParseTime(intPart+frac, tp, fsp)
}

func (c converter) toEnum(d Datum) (Datum, error) {
	elems := c.ft.GetElems()
	switch d.k {
	case KindString, KindBytes:
		s := strings.TrimRight(string(d.b()), " ")
		for _, e := range elems {
			if strings.EqualFold(e, s) {
				return NewString(e), nil
			}
		}
	default:
		v, err := d.ToInt64()
		if err == nil && v >= 1 && int(v) <= len(elems) {
			return NewString(elems[v-1]), nil
		}
	}
	return Datum{}, c.truncated()
}

func (c converter) toSet(d Datum) (Datum, error) {
	elems := c.ft.GetElems()
	var picked uint64
	switch d.k {
	case KindString, KindBytes:
		if len(d.b()) > 0 {
			for _, part := range strings.Split(string(d.b()), ",") {
				found := false
				for i, e := range elems {
					if strings.EqualFold(e, part) {
						picked |= 1 << uint(i)
						found = true
						break
					}
				}
				if !found {
					return Datum{}, c.truncated()
				}
			}
		}
	default:
		v, err := d.ToUint64()
		if err != nil || (len(elems) < 64 && v>>uint(len(elems)) != 0) {
			return Datum{}, c.truncated()
		}
		picked = v
	}
	var sb strings.Builder
	for i, e := range elems {
		if picked&(1<<uint(i)) != 0 {
			if sb.Len() > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(e)
		}
	}
	return NewString(sb.String()), nil
}

func (c converter) toJSON(d Datum) (Datum, error) {
	switch d.k {
	case KindString, KindBytes:
		canon, err := sqljson.Canonical(d.b())
		if err != nil {
			return Datum{}, sqlerr.New(3140, "22032", "Invalid JSON text: \"Invalid value.\" at position 0 in value for column '%s'.", c.col)
		}
		return NewStringBytes(canon), nil
	case KindFloat64:
		return NewStringBytes(sqljson.AppendFloat(nil, d.Float())), nil
	case KindTime:
		return NewStringBytes(sqljson.AppendString(nil, string(d.AppendText(nil)))), nil
	}
	return NewStringBytes(d.AppendText(nil)), nil
}

// DefaultFieldTypeFor returns the column type MySQL reports for a value of
// d's kind when nothing better is known (literals, untyped results).
func DefaultFieldTypeFor(d Datum) *ptypes.FieldType {
	var ft *ptypes.FieldType
	switch d.k {
	case KindNull:
		ft = ptypes.NewFieldType(mysql.TypeNull)
		ft.SetFlen(0)
		setBinary(ft)
	case KindInt64:
		ft = ptypes.NewFieldType(mysql.TypeLonglong)
		ft.SetFlen(mysql.MaxIntWidth)
		ft.SetDecimal(0)
		setBinary(ft)
	case KindUint64:
		ft = ptypes.NewFieldType(mysql.TypeLonglong)
		ft.SetFlen(mysql.MaxIntWidth)
		ft.SetDecimal(0)
		ft.AddFlag(mysql.UnsignedFlag)
		setBinary(ft)
	case KindFloat64:
		ft = ptypes.NewFieldType(mysql.TypeDouble)
		ft.SetFlen(mysql.MaxRealWidth)
		ft.SetDecimal(ptypes.UnspecifiedLength)
		setBinary(ft)
	case KindDecimal:
		ft = ptypes.NewFieldType(mysql.TypeNewDecimal)
		// Like DECIMAL(M,D) column types, flen is the precision M.
		ft.SetFlen(d.dec().Precision())
		ft.SetDecimal(d.dec().Scale())
		setBinary(ft)
	case KindString:
		ft = ptypes.NewFieldType(mysql.TypeVarString)
		ft.SetFlen(utf8.RuneCount(d.b()))
		ft.SetCharset(mysql.DefaultCharset)
		ft.SetCollate(mysql.DefaultCollationName)
	case KindBytes:
		ft = ptypes.NewFieldType(mysql.TypeVarString)
		ft.SetFlen(len(d.b()))
		setBinary(ft)
	case KindTime:
		t := d.Time()
		ft = ptypes.NewFieldType(t.Type())
		if t.Type() == mysql.TypeDate {
			ft.SetFlen(mysql.MaxDateWidth)
			ft.SetDecimal(0)
		} else {
			w := mysql.MaxDatetimeWidthNoFsp
			if t.Fsp() > 0 {
				w += 1 + t.Fsp()
			}
			ft.SetFlen(w)
			ft.SetDecimal(t.Fsp())
		}
		setBinary(ft)
	case KindDuration:
		_, fsp := d.Duration()
		ft = durationType(fsp)
	}
	return ft
}

func setBinary(ft *ptypes.FieldType) {
	ft.SetCharset(charset.CharsetBin)
	ft.SetCollate(charset.CollationBin)
	ft.AddFlag(mysql.BinaryFlag)
}

// KindForFieldType returns the kind Convert produces for a column of type ft.
// Codecs and planners use it to tell whether a stored or constant value
// already has the column's representation.
func KindForFieldType(ft *ptypes.FieldType) Kind {
	switch ft.GetType() {
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong:
		if mysql.HasUnsignedFlag(ft.GetFlag()) {
			return KindUint64
		}
		return KindInt64
	case mysql.TypeYear:
		return KindInt64
	case mysql.TypeBit:
		return KindUint64
	case mysql.TypeFloat, mysql.TypeDouble:
		return KindFloat64
	case mysql.TypeNewDecimal:
		return KindDecimal
	case mysql.TypeVarchar, mysql.TypeVarString, mysql.TypeString,
		mysql.TypeTinyBlob, mysql.TypeBlob, mysql.TypeMediumBlob, mysql.TypeLongBlob:
		if binaryString(ft) {
			return KindBytes
		}
		return KindString
	case mysql.TypeDate, mysql.TypeNewDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		return KindTime
	case mysql.TypeDuration:
		return KindDuration
	case mysql.TypeEnum, mysql.TypeSet, mysql.TypeJSON:
		return KindString
	}
	return KindNull
}
