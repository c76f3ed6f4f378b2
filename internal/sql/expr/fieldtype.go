package expr

import (
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/types"
)

// evalClass is how an expression's static type evaluates: MySQL's
// INT_RESULT, DECIMAL_RESULT, REAL_RESULT, STRING_RESULT plus temporal.
type evalClass uint8

const (
	classUnknown evalClass = iota // ? parameter: decided per value at run time
	classNull                     // the NULL literal
	classInt
	classUint
	classDecimal
	classReal
	classString
	classTime
)

func classOf(ft *ptypes.FieldType) evalClass {
	switch ft.GetType() {
	case mysql.TypeUnspecified:
		return classUnknown
	case mysql.TypeNull:
		return classNull
	case mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeLong, mysql.TypeLonglong, mysql.TypeYear, mysql.TypeBit:
		if mysql.HasUnsignedFlag(ft.GetFlag()) || ft.GetType() == mysql.TypeBit {
			return classUint
		}
		return classInt
	case mysql.TypeNewDecimal:
		return classDecimal
	case mysql.TypeFloat, mysql.TypeDouble:
		return classReal
	case mysql.TypeDate, mysql.TypeNewDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		return classTime
	}
	return classString
}

func isNumericClass(c evalClass) bool {
	return c == classInt || c == classUint || c == classDecimal || c == classReal
}

func setBinaryCharset(ft *ptypes.FieldType) *ptypes.FieldType {
	ft.SetCharset(charset.CharsetBin)
	ft.SetCollate(charset.CollationBin)
	ft.AddFlag(mysql.BinaryFlag)
	return ft
}

func intType(flen int, unsigned bool) *ptypes.FieldType {
	ft := ptypes.NewFieldType(mysql.TypeLonglong)
	if flen <= 0 || flen > mysql.MaxIntWidth {
		flen = mysql.MaxIntWidth
	}
	ft.SetFlen(flen)
	ft.SetDecimal(0)
	if unsigned {
		ft.AddFlag(mysql.UnsignedFlag)
	}
	return setBinaryCharset(ft)
}

func boolType() *ptypes.FieldType { return intType(1, false) }

func doubleType() *ptypes.FieldType {
	ft := ptypes.NewFieldType(mysql.TypeDouble)
	ft.SetFlen(mysql.MaxRealWidth)
	ft.SetDecimal(ptypes.UnspecifiedLength)
	return setBinaryCharset(ft)
}

// decimalType returns DECIMAL(prec, scale), clamped to MySQL's limits.
func decimalType(prec, scale int) *ptypes.FieldType {
	if scale > types.MaxDecimalScale {
		scale = types.MaxDecimalScale
	}
	if scale < 0 {
		scale = 0
	}
	if prec < scale+1 {
		prec = scale + 1
	}
	if prec > types.MaxDecimalPrecision {
		prec = types.MaxDecimalPrecision
	}
	ft := ptypes.NewFieldType(mysql.TypeNewDecimal)
	ft.SetFlen(prec)
	ft.SetDecimal(scale)
	return setBinaryCharset(ft)
}

func stringType(flen int) *ptypes.FieldType {
	ft := ptypes.NewFieldType(mysql.TypeVarString)
	if flen < 0 {
		flen = mysql.MaxBlobWidth
	}
	ft.SetFlen(flen)
	ft.SetCharset(mysql.DefaultCharset)
	ft.SetCollate(collate.Default)
	return ft
}

func timeType(tp byte, fsp int) *ptypes.FieldType {
	ft := ptypes.NewFieldType(tp)
	if tp == mysql.TypeDate {
		ft.SetFlen(mysql.MaxDateWidth)
		ft.SetDecimal(0)
	} else {
		w := mysql.MaxDatetimeWidthNoFsp
		if fsp > 0 {
			w += fsp + 1
		}
		ft.SetFlen(w)
		ft.SetDecimal(fsp)
	}
	return setBinaryCharset(ft)
}

// scaleOf returns the number of fractional digits a type carries (0 for
// integers, the declared scale for DECIMAL, 0 for others).
func scaleOf(ft *ptypes.FieldType) int {
	switch classOf(ft) {
	case classDecimal:
		if d := ft.GetDecimal(); d > 0 {
			return d
		}
	}
	return 0
}

// intDigitsOf estimates the digits before the point a numeric type needs.
func intDigitsOf(ft *ptypes.FieldType) int {
	switch classOf(ft) {
	case classInt, classUint:
		if f := ft.GetFlen(); f > 0 {
			return f
		}
		return mysql.MaxIntWidth
	case classDecimal:
		if f := ft.GetFlen(); f > 0 {
			return max(f-scaleOf(ft), 1)
		}
		return 10
	}
	return mysql.MaxIntWidth
}

// charLen estimates the display length of a type rendered as text.
func charLen(ft *ptypes.FieldType) int {
	f := ft.GetFlen()
	if f <= 0 {
		switch classOf(ft) {
		case classInt, classUint:
			return mysql.MaxIntWidth
		case classReal:
			return mysql.MaxRealWidth
		case classDecimal:
			return types.MaxDecimalPrecision + 2
		case classTime:
			return mysql.MaxDatetimeWidthNoFsp + 7
		}
		return 0
	}
	if classOf(ft) == classDecimal {
		return f + 2
	}
	return f
}

// aggregateType is MySQL's type aggregation for results that may come from
// any of several expressions (CASE, IF, IFNULL, COALESCE, GREATEST...):
// numbers widen int < decimal < double, anything with a string is a string,
// temporal values stay temporal only among themselves. NULL literals do not
// participate; an unknown (parameter) type makes the result unknown.
func aggregateType(fts []*ptypes.FieldType) *ptypes.FieldType {
	var (
		seen                        bool
		allInt, allUnsigned         = true, true
		anyReal, anyString, anyTime bool
		allTime                     = true
		timeTp                      byte
		fsp, scale, intDigits, clen int
		binary                      = true
		anySigned                   bool
		allDuration                 = true
		durFsp                      int
	)
	for _, ft := range fts {
		if ft.GetType() == mysql.TypeDuration {
			durFsp = max(durFsp, ft.GetDecimal())
		} else if c := classOf(ft); c != classNull {
			allDuration = false
		}
		c := classOf(ft)
		switch c {
		case classUnknown:
			return unknownType()
		case classNull:
			continue
		}
		seen = true
		clen = max(clen, charLen(ft))
		if c != classTime {
			allTime = false
		}
		switch c {
		case classInt:
			allUnsigned, anySigned = false, true
		case classUint:
		case classDecimal:
			allInt, allUnsigned = false, false
		case classReal:
			anyReal, allInt, allUnsigned = true, false, false
		case classString:
			anyString, allInt, allUnsigned = true, false, false
			if ft.GetCharset() != charset.CharsetBin {
				binary = false
			}
		case classTime:
			anyTime, allInt, allUnsigned = true, false, false
			if timeTp == 0 {
				timeTp = ft.GetType()
			} else if timeTp != ft.GetType() {
				timeTp = mysql.TypeDatetime
			}
			fsp = max(fsp, max(ft.GetDecimal(), 0))
		}
		if isNumericClass(c) {
			scale = max(scale, scaleOf(ft))
			intDigits = max(intDigits, intDigitsOf(ft))
		}
	}
	switch {
	case !seen:
		return setBinaryCharset(ptypes.NewFieldType(mysql.TypeNull))
	case allDuration:
		return durationFT(min(durFsp, types.MaxFsp))
	case allTime:
		return timeType(timeTp, fsp)
	case anyString || anyTime:
		ft := stringType(clen)
		if binary && anyString && !anyTime {
			setBinaryCharset(ft)
		}
		return ft
	case anyReal:
		return doubleType()
	case allInt && !allUnsigned && anySigned && anyUnsignedIn(fts):
		// BIGINT and BIGINT UNSIGNED together only fit a DECIMAL.
		return decimalType(intDigits+1, 0)
	case allInt:
		return intType(intDigits, allUnsigned)
	}
	return decimalType(intDigits+scale, scale)
}

func anyUnsignedIn(fts []*ptypes.FieldType) bool {
	for _, ft := range fts {
		if classOf(ft) == classUint {
			return true
		}
	}
	return false
}

// coerce converts a runtime value to the class of a statically aggregated
// type, so that every row of a CASE/IF/COALESCE column has one kind (MySQL
// returns CASE WHEN .. THEN 1 ELSE 2.5 END as 1.0, not 1).
func coerce(ctx *EvalContext, d types.Datum, ft *ptypes.FieldType) types.Datum {
	if d.IsNull() {
		return d
	}
	if ft.GetType() == mysql.TypeDuration {
		if d.Kind() == types.KindDuration {
			return d
		}
		v, err := types.Convert(d, ft)
		if err != nil {
			ctx.Warn(err)
			return types.Datum{}
		}
		return v
	}
	switch classOf(ft) {
	case classInt:
		if d.Kind() == types.KindInt64 {
			return d
		}
		v, err := d.ToInt64()
		ctx.Warn(err)
		return types.NewInt(v)
	case classUint:
		if d.Kind() == types.KindUint64 {
			return d
		}
		v, err := d.ToUint64()
		ctx.Warn(err)
		return types.NewUint(v)
	case classDecimal:
		dec, err := d.ToDecimal()
		ctx.Warn(err)
		if s := ft.GetDecimal(); s >= 0 && dec.Scale() != s {
			dec = dec.Round(s)
		}
		return types.NewDecimal(dec)
	case classReal:
		if d.Kind() == types.KindFloat64 {
			return d
		}
		f, err := d.ToFloat64()
		ctx.Warn(err)
		return types.NewFloat(f)
	case classString:
		if d.Kind() == types.KindString || d.Kind() == types.KindBytes {
			return d
		}
		return types.NewStringBytes(d.AppendText(nil))
	case classTime:
		switch d.Kind() {
		case types.KindTime:
			if t, err := d.Time().WithType(ft.GetType(), max(ft.GetDecimal(), 0)); err == nil {
				return types.NewTime(t)
			}
		case types.KindString, types.KindBytes:
			if t, err := types.ParseTime(string(d.Bytes()), ft.GetType(), max(ft.GetDecimal(), 0)); err == nil {
				return types.NewTime(t)
			}
		}
	}
	return d
}
