package expr

import (
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// EXTRACT(unit FROM x), WEEK(x[, mode]) and YEARWEEK(x[, mode]).

func init() {
	builtins["week"] = &funcDef{minArgs: 1, maxArgs: 2, nullIfNullArg: true, retType: retInt, eval: evalWeek(false)}
	builtins["yearweek"] = &funcDef{minArgs: 1, maxArgs: 2, nullIfNullArg: true, retType: retInt, eval: evalWeek(true)}
	builtins["weekofyear"] = &funcDef{minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: func(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
		t, ok := timeArg(ctx, args[0])
		if !ok || t.IsZero() {
			return types.Datum{}, nil
		}
		_, w := mysqlWeek(t.GoTime(time.UTC), 3)
		return types.NewInt(int64(w)), nil
	}}
}

// MySQL's week modes (calc_week in its sources): bit 0 Monday first, bit
// 1 weeks counted 1-53 (else 0-53, with days before the first week in
// week 0), bit 2 the first week is the one with a first day (else the
// one with 4 or more days).
const (
	weekMondayFirst  = 1
	weekYear         = 2
	weekFirstWeekday = 4
)

func weekBehaviour(mode int) int {
	mode &= 7
	if mode&weekMondayFirst == 0 {
		mode ^= weekFirstWeekday
	}
	return mode
}

func daysInYear(y int) int {
	if (y%4 == 0 && y%100 != 0) || y%400 == 0 {
		return 366
	}
	return 365
}

// mysqlWeek returns the year and week of g under a WEEK() mode.
func mysqlWeek(g time.Time, mode int) (year, week int) {
	b := weekBehaviour(mode)
	mondayFirst := b&weekMondayFirst != 0
	wy := b&weekYear != 0
	firstWeekday := b&weekFirstWeekday != 0
	daynr := g.YearDay() - 1
	firstDaynr := 0
	jan1 := time.Date(g.Year(), 1, 1, 0, 0, 0, 0, time.UTC).Weekday()
	weekday := int(jan1) // 0 = Sunday
	if mondayFirst {
		weekday = (weekday + 6) % 7 // 0 = Monday
	}
	year = g.Year()
	if g.Month() == 1 && g.Day() <= 7-weekday {
		if !wy && ((firstWeekday && weekday != 0) || (!firstWeekday && weekday >= 4)) {
			return year, 0
		}
		wy = true
		year--
		days := daysInYear(year)
		firstDaynr -= days
		weekday = (weekday + 53*7 - days) % 7
	}
	var days int
	if (firstWeekday && weekday != 0) || (!firstWeekday && weekday >= 4) {
		days = daynr - (firstDaynr + (7 - weekday))
	} else {
		days = daynr - (firstDaynr - weekday)
	}
	if wy && days >= 52*7 {
		weekday = (weekday + daysInYear(year)) % 7
		if (!firstWeekday && weekday < 4) || (firstWeekday && weekday == 0) {
			return year + 1, 1
		}
	}
	return year, days/7 + 1
}

func evalWeek(yearweek bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
		t, ok := timeArg(ctx, args[0])
		if !ok || t.IsZero() {
			return types.Datum{}, nil
		}
		mode := int64(0)
		if len(args) > 1 {
			mode, _ = args[1].ToInt64()
		}
		m := int(mode)
		if yearweek {
			m |= weekYear
		}
		y, w := mysqlWeek(t.GoTime(time.UTC), m)
		if yearweek {
			return types.NewInt(int64(y*100 + w)), nil
		}
		return types.NewInt(int64(w)), nil
	}
}

// Extract is EXTRACT(unit FROM e).
type Extract struct {
	Unit ast.TimeUnitType
	E    Expr
}

func (c *compiler) extractCall(nodes []ast.ExprNode) (Expr, error) {
	if len(nodes) != 2 {
		return nil, errArgCount("EXTRACT")
	}
	unit, ok := nodes[0].(*ast.TimeUnitExpr)
	if !ok {
		return nil, errArgCount("EXTRACT")
	}
	e, err := c.compile(nodes[1])
	if err != nil {
		return nil, err
	}
	switch unit.Unit {
	case ast.TimeUnitYear, ast.TimeUnitQuarter, ast.TimeUnitMonth, ast.TimeUnitWeek, ast.TimeUnitDay,
		ast.TimeUnitHour, ast.TimeUnitMinute, ast.TimeUnitSecond, ast.TimeUnitMicrosecond,
		ast.TimeUnitYearMonth, ast.TimeUnitDayHour, ast.TimeUnitDayMinute, ast.TimeUnitDaySecond,
		ast.TimeUnitHourMinute, ast.TimeUnitHourSecond, ast.TimeUnitMinuteSecond,
		ast.TimeUnitSecondMicrosecond, ast.TimeUnitMinuteMicrosecond, ast.TimeUnitHourMicrosecond, ast.TimeUnitDayMicrosecond:
	default:
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support EXTRACT(%s ...)", unit.Unit.String())
	}
	return &Extract{Unit: unit.Unit, E: e}, nil
}

// Type implements Expr.
func (x *Extract) Type() *ptypes.FieldType { return intType(21, false) }

func (x *Extract) String() string {
	return "extract(" + strings.ToLower(x.Unit.String()) + " from " + x.E.String() + ")"
}

// Eval implements Expr.
func (x *Extract) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	d, err := x.E.Eval(ctx, row)
	if err != nil || d.IsNull() {
		return types.Datum{}, err
	}
	var (
		y, mon, day, h, mi, s, us int64
		sign                      int64 = 1
	)
	clockOnly := d.Kind() == types.KindDuration
	if !clockOnly && d.IsStringLike() {
		// Text is a datetime when it parses as one and has a date part
		// ('10:05:03' is a time, not 2010-05-03).
		s := string(d.Bytes())
		hasDate := strings.ContainsAny(strings.SplitN(strings.TrimSpace(s), " ", 2)[0], "-/")
		if _, err := types.ParseTime(s, mysql.TypeDatetime, types.MaxFsp); err != nil || (!hasDate && strings.Contains(s, ":")) {
			clockOnly = true
		}
	}
	if clockOnly {
		m, _, ok := durationArg(ctx, d)
		if !ok {
			return types.Datum{}, nil
		}
		if m < 0 {
			sign, m = -1, -m
		}
		secs := m / 1000000
		h, mi, s, us = secs/3600, secs/60%60, secs%60, m%1000000
	} else {
		t, ok := timeArg(ctx, d)
		if !ok {
			return types.Datum{}, nil
		}
		y, mon, day = int64(t.Year()), int64(t.Month()), int64(t.Day())
		h, mi, s, us = int64(t.Hour()), int64(t.Minute()), int64(t.Second()), int64(t.Microsecond())
		if x.Unit == ast.TimeUnitWeek {
			if t.IsZero() {
				return types.Datum{}, nil
			}
			_, w := mysqlWeek(t.GoTime(time.UTC), 0)
			return types.NewInt(int64(w)), nil
		}
	}
	var v int64
	switch x.Unit {
	case ast.TimeUnitYear:
		v = y
	case ast.TimeUnitQuarter:
		v = (mon + 2) / 3
	case ast.TimeUnitMonth:
		v = mon
	case ast.TimeUnitDay:
		v = day
	case ast.TimeUnitHour:
		v = h
	case ast.TimeUnitMinute:
		v = mi
	case ast.TimeUnitSecond:
		v = s
	case ast.TimeUnitMicrosecond:
		v = us
	case ast.TimeUnitYearMonth:
		v = y*100 + mon
	case ast.TimeUnitDayHour:
		v = day*100 + h
	case ast.TimeUnitDayMinute:
		v = (day*100+h)*100 + mi
	case ast.TimeUnitDaySecond:
		v = ((day*100+h)*100+mi)*100 + s
	case ast.TimeUnitHourMinute:
		v = h*100 + mi
	case ast.TimeUnitHourSecond:
		v = (h*100+mi)*100 + s
	case ast.TimeUnitMinuteSecond:
		v = mi*100 + s
	case ast.TimeUnitSecondMicrosecond:
		v = s*1000000 + us
	case ast.TimeUnitMinuteMicrosecond:
		v = (mi*100+s)*1000000 + us
	case ast.TimeUnitHourMicrosecond:
		v = ((h*100+mi)*100+s)*1000000 + us
	case ast.TimeUnitDayMicrosecond:
		v = (((day*100+h)*100+mi)*100+s)*1000000 + us
	}
	return types.NewInt(sign * v), nil
}
