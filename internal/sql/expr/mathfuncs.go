package expr

import (
	"math"
	"time"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/types"
)

// Trigonometry, ORD, MAKEDATE and UTC_TIMESTAMP, which ORMs emit.

func init() {
	inUnit := func(x float64) bool { return x >= -1 && x <= 1 }
	for name, def := range map[string]*funcDef{
		"asin":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1Null(math.Asin, inUnit)},
		"acos":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1Null(math.Acos, inUnit)},
		"atan":     {minArgs: 1, maxArgs: 2, nullIfNullArg: true, retType: retDouble, eval: evalAtan},
		"atan2":    {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retDouble, eval: evalAtan},
		"cot":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(func(x float64) float64 { return 1 / math.Tan(x) }, nil)},
		"degrees":  {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(func(x float64) float64 { return x * 180 / math.Pi }, nil)},
		"radians":  {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(func(x float64) float64 { return x * math.Pi / 180 }, nil)},
		"ord":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalOrd},
		"makedate": {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: func([]Expr) *ptypes.FieldType { return timeType(mysql.TypeDate, 0) }, eval: evalMakedate},
		"utc_timestamp": {minArgs: 0, maxArgs: 1, volatile: true, retType: retNow, eval: func(ctx *EvalContext, f *Func, _ []types.Datum) (types.Datum, error) {
			t, err := types.TimeFromGo(stmtNow(ctx).UTC(), mysql.TypeDatetime, max(f.ft.GetDecimal(), 0))
			if err != nil {
				return types.Datum{}, nil
			}
			return types.NewTime(t), nil
		}},
	} {
		builtins[name] = def
	}
}

// evalFloat1Null is evalFloat1 for functions that are NULL (without a
// warning) outside their domain, as ASIN and ACOS are.
func evalFloat1Null(fn func(float64) float64, valid func(float64) bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
		x := floatArg(ctx, args[0])
		if !valid(x) {
			return types.Datum{}, nil
		}
		return types.NewFloat(fn(x)), nil
	}
}

func evalAtan(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	if len(args) == 2 {
		return types.NewFloat(math.Atan2(floatArg(ctx, args[0]), floatArg(ctx, args[1]))), nil
	}
	return types.NewFloat(math.Atan(floatArg(ctx, args[0]))), nil
}

// evalOrd is ORD(s): the code of s's first character as MySQL computes it
// for multi-byte characters (its bytes as a big-endian number).
func evalOrd(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	b := textOf(args[0])
	if len(b) == 0 {
		return types.NewInt(0), nil
	}
	n := 1
	if args[0].Kind() == types.KindString {
		if _, size := utf8.DecodeRune(b); size > 0 {
			n = size
		}
	}
	var v int64
	for _, c := range b[:n] {
		v = v<<8 | int64(c)
	}
	return types.NewInt(v), nil
}

// evalMakedate is MAKEDATE(year, dayofyear).
func evalMakedate(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	y, err := args[0].ToInt64()
	if err != nil {
		return types.Datum{}, nil
	}
	d, err := args[1].ToInt64()
	if err != nil || d <= 0 || y < 0 || y > 9999 {
		return types.Datum{}, nil
	}
	if y < 70 {
		y += 2000
	} else if y < 100 {
		y += 1900
	}
	g := time.Date(int(y), 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(d-1))
	if g.Year() > 9999 {
		return types.Datum{}, nil
	}
	t, err := types.TimeFromGo(g, mysql.TypeDate, 0)
	if err != nil {
		return types.Datum{}, nil
	}
	return types.NewTime(t), nil
}
