package expr

import (
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// TIME functions: values are types.KindDuration.

func durationFT(fsp int) *ptypes.FieldType {
	return types.DefaultFieldTypeFor(types.NewDuration(0, fsp))
}

// retDuration is the type of TIME(x), TIMEDIFF(x, ...): x's fractional
// digits, as MySQL derives them (a text literal's from its own fraction,
// other text or a ? parameter 6).
func retDuration(args []Expr) *ptypes.FieldType {
	fsp := 0
	if len(args) > 0 {
		switch a := args[0]; {
		case a.Type().GetType() == mysql.TypeUnspecified:
			fsp = types.MaxFsp
		case classOf(a.Type()) == classString:
			fsp = types.MaxFsp
			if k, ok := a.(*Constant); ok && k.Value.IsStringLike() {
				s := string(k.Value.Bytes())
				fsp = 0
				if i := strings.LastIndexByte(s, '.'); i >= 0 {
					fsp = min(len(strings.TrimSpace(s[i+1:])), types.MaxFsp)
				}
			}
		default:
			if d := a.Type().GetDecimal(); d > 0 && d <= types.MaxFsp {
				fsp = d
			}
		}
	}
	return durationFT(fsp)
}

func retCurtime(args []Expr) *ptypes.FieldType { return durationFT(nowFsp(args)) }

func init() {
	for name, def := range map[string]*funcDef{
		"time":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDuration, eval: evalTimeFn},
		"curtime":      {minArgs: 0, maxArgs: 1, volatile: true, retType: retCurtime, eval: evalCurtime},
		"current_time": {minArgs: 0, maxArgs: 1, volatile: true, retType: retCurtime, eval: evalCurtime},
		"time_to_sec":  {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimeToSec},
		"sec_to_time":  {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: func([]Expr) *ptypes.FieldType { return durationFT(0) }, eval: evalSecToTime},
		"timediff":     {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retDuration, eval: evalTimediff},
		"maketime":     {minArgs: 3, maxArgs: 3, nullIfNullArg: true, retType: func([]Expr) *ptypes.FieldType { return durationFT(0) }, eval: evalMaketime},
		"hour":         {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalClockPart(0)},
		"minute":       {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalClockPart(1)},
		"second":       {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalClockPart(2)},
		"microsecond":  {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalClockPart(3)},
		"addtime":      {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retAddtime, eval: evalAddtime(1)},
		"subtime":      {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retAddtime, eval: evalAddtime(-1)},
		"time_format":  {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retShortString, eval: evalTimeFormat},
	} {
		builtins[name] = def
	}
}

// durationArg reads a value as a TIME: a TIME as it is, a DATETIME's time
// of day, text or a number parsed as [D ]HH:MM:SS / HHMMSS (text holding a
// full datetime gives its time). ok=false (with a warning) otherwise.
func durationArg(ctx *EvalContext, d types.Datum) (micros int64, fsp int, ok bool) {
	switch d.Kind() {
	case types.KindDuration:
		m, f := d.Duration()
		return m, f, true
	case types.KindTime:
		m, f := types.DurationOf(d.Time()).Duration()
		return m, f, true
	}
	v, err := types.Convert(d, durationFT(types.MaxFsp))
	if err != nil {
		s, _ := d.ToString()
		ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Truncated incorrect time value: '%s'", s))
		return 0, 0, false
	}
	m, _ := v.Duration()
	return m, types.MaxFsp, true
}

func evalTimeFn(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	m, _, ok := durationArg(ctx, args[0])
	if !ok {
		return types.Datum{}, nil
	}
	return types.Convert(types.NewDuration(m, types.MaxFsp), f.ft)
}

func evalCurtime(ctx *EvalContext, f *Func, _ []types.Datum) (types.Datum, error) {
	now := stmtNow(ctx)
	m := (int64(now.Hour())*3600+int64(now.Minute())*60+int64(now.Second()))*1000000 + int64(now.Nanosecond()/1000)
	return types.Convert(types.NewDuration(m, types.MaxFsp), f.ft)
}

func evalTimeToSec(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	m, _, ok := durationArg(ctx, args[0])
	if !ok {
		return types.Datum{}, nil
	}
	return types.NewInt(m / 1000000), nil
}

func clipDuration(m int64) int64 {
	if m > types.MaxDurationMicros {
		return types.MaxDurationMicros
	}
	if m < -types.MaxDurationMicros {
		return -types.MaxDurationMicros
	}
	return m
}

func evalSecToTime(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	s, err := args[0].ToInt64()
	if err != nil {
		return types.Datum{}, err
	}
	if s > types.MaxDurationMicros/1000000 || s < -types.MaxDurationMicros/1000000 {
		return types.NewDuration(clipDuration(s*1000000), 0), nil
	}
	return types.NewDuration(s*1000000, 0), nil
}

// evalTimediff is TIMEDIFF(a, b): a - b, both TIMEs or both DATETIMEs.
func evalTimediff(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	a, b := args[0], args[1]
	isDT := func(d types.Datum) bool {
		if d.Kind() == types.KindTime {
			return true
		}
		if d.IsStringLike() {
			_, err := types.ParseTime(string(d.Bytes()), mysql.TypeDatetime, types.MaxFsp)
			s := string(d.Bytes())
			return err == nil && len(s) >= 8 && (s[4] == '-' || s[2] == '-')
		}
		return false
	}
	var diff int64
	if isDT(a) && isDT(b) {
		ta, okA := timeArg(ctx, a)
		tb, okB := timeArg(ctx, b)
		if !okA || !okB {
			return types.Datum{}, nil
		}
		diff = ta.GoTime(stmtNow(ctx).Location()).Sub(tb.GoTime(stmtNow(ctx).Location())).Microseconds()
	} else {
		ma, _, okA := durationArg(ctx, a)
		mb, _, okB := durationArg(ctx, b)
		if !okA || !okB {
			return types.Datum{}, nil
		}
		diff = ma - mb
	}
	fsp := max(f.Args[0].Type().GetDecimal(), f.Args[1].Type().GetDecimal(), 0)
	if fsp > types.MaxFsp {
		fsp = types.MaxFsp
	}
	return types.NewDuration(clipDuration(diff), fsp), nil
}

func evalMaketime(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	h, err := args[0].ToInt64()
	if err != nil {
		return types.Datum{}, err
	}
	m, err := args[1].ToInt64()
	if err != nil {
		return types.Datum{}, err
	}
	s, err := args[2].ToInt64()
	if err != nil {
		return types.Datum{}, err
	}
	if m < 0 || m > 59 || s < 0 || s > 59 {
		return types.Datum{}, nil
	}
	neg := h < 0
	if neg {
		h = -h
	}
	v := clipDuration((h*3600 + m*60 + s) * 1000000)
	if neg {
		v = -v
	}
	return types.NewDuration(v, 0), nil
}

// evalClockPart is HOUR, MINUTE, SECOND, MICROSECOND (part 0..3) of a TIME
// or DATETIME: HOUR('272:59:59') is 272.
func evalClockPart(part int) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
		d := args[0]
		if d.Kind() == types.KindTime {
			t := d.Time()
			return types.NewInt(int64([4]int{t.Hour(), t.Minute(), t.Second(), t.Microsecond()}[part])), nil
		}
		if d.IsStringLike() {
			if t, err := types.ParseTime(string(d.Bytes()), mysql.TypeDatetime, types.MaxFsp); err == nil && len(d.Bytes()) >= 10 {
				return types.NewInt(int64([4]int{t.Hour(), t.Minute(), t.Second(), t.Microsecond()}[part])), nil
			}
		}
		m, _, ok := durationArg(ctx, d)
		if !ok {
			return types.Datum{}, nil
		}
		if m < 0 {
			m = -m
		}
		secs := m / 1000000
		return types.NewInt([4]int64{secs / 3600, secs / 60 % 60, secs % 60, m % 1000000}[part]), nil
	}
}

// retAddtime: ADDTIME(datetime, time) is a DATETIME, ADDTIME(time, time) a
// TIME (text arguments: a DATETIME when the text holds a date).
func retAddtime(args []Expr) *ptypes.FieldType {
	if classOf(args[0].Type()) == classTime {
		return timeType(mysql.TypeDatetime, types.MaxFsp)
	}
	if k, ok := args[0].(*Constant); ok && k.Value.IsStringLike() && strings.Contains(string(k.Value.Bytes()), "-") {
		return timeType(mysql.TypeDatetime, types.MaxFsp)
	}
	return durationFT(types.MaxFsp)
}

// evalAddtime is ADDTIME (sign 1) and SUBTIME (sign -1).
func evalAddtime(sign int64) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		delta, _, ok := durationArg(ctx, args[1])
		if !ok {
			return types.Datum{}, nil
		}
		delta *= sign
		if f.ft.GetType() == mysql.TypeDatetime {
			t, ok := timeArg(ctx, args[0])
			if !ok {
				return types.Datum{}, nil
			}
			g := t.GoTime(time.UTC).Add(time.Duration(delta) * time.Microsecond)
			r, err := types.TimeFromGo(g, mysql.TypeDatetime, types.MaxFsp)
			if err != nil {
				return types.Datum{}, nil
			}
			return types.NewTime(r), nil
		}
		m, _, ok := durationArg(ctx, args[0])
		if !ok {
			return types.Datum{}, nil
		}
		return types.NewDuration(clipDuration(m+delta), types.MaxFsp), nil
	}
}

// evalTimeFormat is TIME_FORMAT(time, format): DATE_FORMAT's clock
// specifiers, with hours beyond 23 for %H and %k.
func evalTimeFormat(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	m, _, ok := durationArg(ctx, args[0])
	if !ok {
		return types.Datum{}, nil
	}
	neg := m < 0
	if neg {
		m = -m
	}
	secs := m / 1000000
	h, mi, s, us := int(secs/3600), int(secs/60%60), int(secs%60), int(m%1000000)
	format := textOf(args[1])
	out := make([]byte, 0, len(format)+8)
	if neg {
		out = append(out, '-')
	}
	pad := func(v, w int) { out = appendPaddedInt(out, v, w) }
	h12 := h % 12
	if h12 == 0 {
		h12 = 12
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			out = append(out, format[i])
			continue
		}
		i++
		switch format[i] {
		case 'H':
			pad(h, 2)
		case 'k':
			pad(h, 1)
		case 'h', 'I':
			pad(h12, 2)
		case 'l':
			pad(h12, 1)
		case 'i':
			pad(mi, 2)
		case 's', 'S':
			pad(s, 2)
		case 'f':
			pad(us, 6)
		case 'p':
			if h%24 < 12 {
				out = append(out, "AM"...)
			} else {
				out = append(out, "PM"...)
			}
		case 'T':
			pad(h, 2)
			out = append(out, ':')
			pad(mi, 2)
			out = append(out, ':')
			pad(s, 2)
		case 'r':
			pad(h12, 2)
			out = append(out, ':')
			pad(mi, 2)
			out = append(out, ':')
			pad(s, 2)
			if h%24 < 12 {
				out = append(out, " AM"...)
			} else {
				out = append(out, " PM"...)
			}
		default:
			out = append(out, format[i])
		}
	}
	return stringResult(f, out), nil
}
