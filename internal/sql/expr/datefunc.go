package expr

import (
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// DateArith is DATE_ADD/DATE_SUB (and d +/- INTERVAL n unit).
type DateArith struct {
	Date, Interval Expr
	Unit           ast.TimeUnitType
	Sub            bool
	ft             *ptypes.FieldType
}

// intervalFields lists, for each unit, the fields an interval string
// supplies, largest first, as MySQL reads them ('1 2:30' DAY_MINUTE).
var intervalFields = map[ast.TimeUnitType][]ast.TimeUnitType{
	ast.TimeUnitMicrosecond:       {ast.TimeUnitMicrosecond},
	ast.TimeUnitSecond:            {ast.TimeUnitSecond},
	ast.TimeUnitMinute:            {ast.TimeUnitMinute},
	ast.TimeUnitHour:              {ast.TimeUnitHour},
	ast.TimeUnitDay:               {ast.TimeUnitDay},
	ast.TimeUnitWeek:              {ast.TimeUnitWeek},
	ast.TimeUnitMonth:             {ast.TimeUnitMonth},
	ast.TimeUnitQuarter:           {ast.TimeUnitQuarter},
	ast.TimeUnitYear:              {ast.TimeUnitYear},
	ast.TimeUnitSecondMicrosecond: {ast.TimeUnitSecond, ast.TimeUnitMicrosecond},
	ast.TimeUnitMinuteMicrosecond: {ast.TimeUnitMinute, ast.TimeUnitSecond, ast.TimeUnitMicrosecond},
	ast.TimeUnitMinuteSecond:      {ast.TimeUnitMinute, ast.TimeUnitSecond},
	ast.TimeUnitHourMicrosecond:   {ast.TimeUnitHour, ast.TimeUnitMinute, ast.TimeUnitSecond, ast.TimeUnitMicrosecond},
	ast.TimeUnitHourSecond:        {ast.TimeUnitHour, ast.TimeUnitMinute, ast.TimeUnitSecond},
	ast.TimeUnitHourMinute:        {ast.TimeUnitHour, ast.TimeUnitMinute},
	ast.TimeUnitDayMicrosecond:    {ast.TimeUnitDay, ast.TimeUnitHour, ast.TimeUnitMinute, ast.TimeUnitSecond, ast.TimeUnitMicrosecond},
	ast.TimeUnitDaySecond:         {ast.TimeUnitDay, ast.TimeUnitHour, ast.TimeUnitMinute, ast.TimeUnitSecond},
	ast.TimeUnitDayMinute:         {ast.TimeUnitDay, ast.TimeUnitHour, ast.TimeUnitMinute},
	ast.TimeUnitDayHour:           {ast.TimeUnitDay, ast.TimeUnitHour},
	ast.TimeUnitYearMonth:         {ast.TimeUnitYear, ast.TimeUnitMonth},
}

// NewDateArith builds date +/- INTERVAL interval unit. The result is a DATE
// when the operand is a DATE and the unit has no clock part, else DATETIME.
func NewDateArith(date, interval Expr, unit ast.TimeUnitType, sub bool) (Expr, error) {
	fields, ok := intervalFields[unit]
	if !ok {
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support INTERVAL unit %s", unit.String())
	}
	dateOnly := true
	for _, f := range fields {
		if f < ast.TimeUnitDay {
			dateOnly = false
		}
	}
	fsp := 0
	if classOf(date.Type()) == classTime {
		fsp = max(date.Type().GetDecimal(), 0)
	}
	if fields[len(fields)-1] == ast.TimeUnitMicrosecond {
		fsp = types.MaxFsp
	}
	ft := timeType(mysql.TypeDatetime, fsp)
	if dateOnly && date.Type().GetType() == mysql.TypeDate {
		ft = timeType(mysql.TypeDate, 0)
	}
	return &DateArith{Date: date, Interval: interval, Unit: unit, Sub: sub, ft: ft}, nil
}

// Type implements Expr.
func (a *DateArith) Type() *ptypes.FieldType { return a.ft }

func (a *DateArith) String() string {
	name := "date_add"
	if a.Sub {
		name = "date_sub"
	}
	return name + "(" + a.Date.String() + ", INTERVAL " + a.Interval.String() + " " + a.Unit.String() + ")"
}

func errDatetimeOverflow(name string) error {
	return sqlerr.New(1441, "22008", "Datetime function: %s field overflow", name)
}

// Eval implements Expr.
func (a *DateArith) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	dv, err := a.Date.Eval(ctx, row)
	if err != nil || dv.IsNull() {
		return types.Datum{}, err
	}
	iv, err := a.Interval.Eval(ctx, row)
	if err != nil || iv.IsNull() {
		return types.Datum{}, err
	}
	t, ok := timeArg(ctx, dv)
	if !ok {
		return types.Datum{}, nil
	}
	amounts, neg, ok := parseInterval(ctx, iv, intervalFields[a.Unit])
	if !ok {
		return types.Datum{}, nil
	}
	if neg != a.Sub {
		for i := range amounts {
			amounts[i] = -amounts[i]
		}
	}
	g := t.GoTime(time.UTC)
	var months, days int64
	var clock time.Duration
	for i, f := range intervalFields[a.Unit] {
		n := amounts[i]
		switch f {
		case ast.TimeUnitYear:
			months += n * 12
		case ast.TimeUnitQuarter:
			months += n * 3
		case ast.TimeUnitMonth:
			months += n
		case ast.TimeUnitWeek:
			days += n * 7
		case ast.TimeUnitDay:
			days += n
		case ast.TimeUnitHour:
			clock += time.Duration(n) * time.Hour
		case ast.TimeUnitMinute:
			clock += time.Duration(n) * time.Minute
		case ast.TimeUnitSecond:
			clock += time.Duration(n) * time.Second
		case ast.TimeUnitMicrosecond:
			clock += time.Duration(n) * time.Microsecond
		}
	}
	if months != 0 {
		// Adding months keeps the day, clipped to the target month's length.
		total := int64(g.Year())*12 + int64(g.Month()) - 1 + months
		y, m := total/12, time.Month(total%12+1)
		if total < 0 || y > 9999 {
			ctx.Warn(errDatetimeOverflow("datetime"))
			return types.Datum{}, nil
		}
		day := min(g.Day(), time.Date(int(y), m+1, 0, 0, 0, 0, 0, time.UTC).Day())
		g = time.Date(int(y), m, day, g.Hour(), g.Minute(), g.Second(), g.Nanosecond(), time.UTC)
	}
	g = g.AddDate(0, 0, int(days)).Add(clock)
	if g.Year() < 1 || g.Year() > 9999 {
		ctx.Warn(errDatetimeOverflow("datetime"))
		return types.Datum{}, nil
	}
	tp, fsp := a.ft.GetType(), max(a.ft.GetDecimal(), 0)
	if dv.IsStringLike() && tp == mysql.TypeDatetime && fsp == 0 && !strings.ContainsAny(string(dv.Bytes()), ": ") && t.Type() == mysql.TypeDatetime && dateOnlyUnit(a.Unit) {
		// '2020-01-01' + INTERVAL 1 DAY is the date string '2020-01-02'.
		tp = mysql.TypeDate
	}
	if dv.Kind() == types.KindTime && dv.Time().Fsp() > fsp && tp != mysql.TypeDate {
		fsp = dv.Time().Fsp()
	}
	r, err := types.TimeFromGo(g, tp, fsp)
	if err != nil {
		ctx.Warn(errDatetimeOverflow("datetime"))
		return types.Datum{}, nil
	}
	return types.NewTime(r), nil
}

func dateOnlyUnit(u ast.TimeUnitType) bool {
	for _, f := range intervalFields[u] {
		if f < ast.TimeUnitDay {
			return false
		}
	}
	return true
}

// parseInterval reads the interval amounts for fields: a number for a
// single-field unit, or digit groups right-aligned to the fields ('1:30'
// HOUR_SECOND is 1 minute 30 seconds). Fractions of a single field round.
func parseInterval(ctx *EvalContext, d types.Datum, fields []ast.TimeUnitType) ([]int64, bool, bool) {
	out := make([]int64, len(fields))
	if len(fields) == 1 {
		v, err := d.ToInt64()
		ctx.Warn(err)
		return []int64{v}, false, true
	}
	s := strings.TrimSpace(string(d.AppendText(nil)))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var groups []string
	for _, g := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		groups = append(groups, g)
	}
	if len(groups) == 0 || len(groups) > len(fields) {
		ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect INTERVAL value: '%s'", s))
		return nil, false, false
	}
	off := len(fields) - len(groups)
	for i, g := range groups {
		v, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, false, false
		}
		if fields[off+i] == ast.TimeUnitMicrosecond {
			// '1.5' SECOND_MICROSECOND is 1 s 500000 µs: the digits are a fraction.
			for n := len(g); n < 6; n++ {
				v *= 10
			}
		}
		out[off+i] = v
	}
	return out, neg, true
}

func (c *compiler) dateArithCall(name string, nodes []ast.ExprNode) (Expr, error) {
	sub := name == "date_sub" || name == "subdate"
	if len(nodes) != 3 {
		if len(nodes) == 2 && (name == "adddate" || name == "subdate") {
			// ADDDATE(d, n) adds days.
			args, err := c.compileAll(nodes)
			if err != nil {
				return nil, err
			}
			return NewDateArith(args[0], args[1], ast.TimeUnitDay, sub)
		}
		return nil, errArgCount(strings.ToUpper(name))
	}
	unit, ok := nodes[2].(*ast.TimeUnitExpr)
	if !ok {
		return nil, errArgCount(strings.ToUpper(name))
	}
	args, err := c.compileAll(nodes[:2])
	if err != nil {
		return nil, err
	}
	return NewDateArith(args[0], args[1], unit.Unit, sub)
}

func evalDatediff(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	a, ok1 := timeArg(ctx, args[0])
	b, ok2 := timeArg(ctx, args[1])
	if !ok1 || !ok2 || a.IsZero() || b.IsZero() {
		return types.Datum{}, nil
	}
	da := time.Date(a.Year(), time.Month(a.Month()), a.Day(), 0, 0, 0, 0, time.UTC)
	db := time.Date(b.Year(), time.Month(b.Month()), b.Day(), 0, 0, 0, 0, time.UTC)
	return types.NewInt(int64(da.Sub(db).Hours() / 24)), nil
}

// sessionLocation is the session time zone, carried by EvalContext.Now.
func sessionLocation(ctx *EvalContext) *time.Location {
	if ctx != nil && !ctx.Now.IsZero() {
		return ctx.Now.Location()
	}
	return time.Local
}

func evalUnixTimestamp(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	if len(args) == 0 {
		return types.NewInt(stmtNow(ctx).Unix()), nil
	}
	if args[0].IsNull() {
		return types.Datum{}, nil
	}
	t, ok := timeArg(ctx, args[0])
	if !ok || t.IsZero() {
		return types.NewInt(0), nil
	}
	g := t.GoTime(sessionLocation(ctx))
	if g.Unix() < 0 {
		return types.NewInt(0), nil
	}
	fsp := t.Fsp()
	if args[0].IsStringLike() {
		// A literal's precision is the number of fraction digits it spells.
		fsp = 0
		if i := strings.LastIndexByte(string(args[0].Bytes()), '.'); i >= 0 {
			fsp = min(len(strings.TrimSpace(string(args[0].Bytes()[i+1:]))), types.MaxFsp)
		}
	}
	if fsp > 0 {
		d := types.NewDecimalFromInt(g.Unix()*1000000 + int64(t.Microsecond()))
		q, _ := d.Div(types.NewDecimalFromInt(1000000), 6)
		return types.NewDecimal(q.Round(fsp)), nil
	}
	return types.NewInt(g.Unix()), nil
}

func evalFromUnixtime(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	dec, err := args[0].ToDecimal()
	ctx.Warn(err)
	if dec.Sign() < 0 {
		return types.Datum{}, nil
	}
	fsp := min(dec.Scale(), types.MaxFsp)
	micros, ok := dec.Mul(types.NewDecimalFromInt(1000000)).Int64()
	if !ok {
		return types.Datum{}, nil
	}
	g := time.UnixMicro(micros).In(sessionLocation(ctx))
	t, err := types.TimeFromGo(g, mysql.TypeDatetime, fsp)
	if err != nil {
		return types.Datum{}, nil
	}
	return types.NewTime(t), nil
}

var monthNames = [...]string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}

// evalDateFormat implements DATE_FORMAT's common specifiers.
func evalDateFormat(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	t, ok := timeArg(ctx, args[0])
	if !ok {
		return types.Datum{}, nil
	}
	format := textOf(args[1])
	g := t.GoTime(time.UTC)
	out := make([]byte, 0, len(format)+16)
	pad := func(v, w int) { out = appendPaddedInt(out, v, w) }
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			out = append(out, format[i])
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			pad(t.Year(), 4)
		case 'y':
			pad(t.Year()%100, 2)
		case 'm':
			pad(t.Month(), 2)
		case 'c':
			out = strconv.AppendInt(out, int64(t.Month()), 10)
		case 'M':
			if t.Month() > 0 {
				out = append(out, monthNames[t.Month()-1]...)
			}
		case 'b':
			if t.Month() > 0 {
				out = append(out, monthNames[t.Month()-1][:3]...)
			}
		case 'd':
			pad(t.Day(), 2)
		case 'e':
			out = strconv.AppendInt(out, int64(t.Day()), 10)
		case 'D':
			out = strconv.AppendInt(out, int64(t.Day()), 10)
			out = append(out, ordinalSuffix(t.Day())...)
		case 'H':
			pad(t.Hour(), 2)
		case 'k':
			out = strconv.AppendInt(out, int64(t.Hour()), 10)
		case 'h', 'I':
			pad((t.Hour()+11)%12+1, 2)
		case 'l':
			out = strconv.AppendInt(out, int64((t.Hour()+11)%12+1), 10)
		case 'i':
			pad(t.Minute(), 2)
		case 's', 'S':
			pad(t.Second(), 2)
		case 'f':
			pad(t.Microsecond(), 6)
		case 'p':
			if t.Hour() < 12 {
				out = append(out, "AM"...)
			} else {
				out = append(out, "PM"...)
			}
		case 'r':
			pad((t.Hour()+11)%12+1, 2)
			out = append(out, ':')
			pad(t.Minute(), 2)
			out = append(out, ':')
			pad(t.Second(), 2)
			if t.Hour() < 12 {
				out = append(out, " AM"...)
			} else {
				out = append(out, " PM"...)
			}
		case 'T':
			pad(t.Hour(), 2)
			out = append(out, ':')
			pad(t.Minute(), 2)
			out = append(out, ':')
			pad(t.Second(), 2)
		case 'W':
			out = append(out, g.Weekday().String()...)
		case 'a':
			out = append(out, g.Weekday().String()[:3]...)
		case 'w':
			out = strconv.AppendInt(out, int64(g.Weekday()), 10)
		case 'j':
			pad(g.YearDay(), 3)
		default:
			out = append(out, format[i]) // %% and unknown specifiers print the character
		}
	}
	return stringResult(f, out), nil
}

func appendPaddedInt(buf []byte, v, width int) []byte {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		buf = append(buf, '0')
	}
	return append(buf, s...)
}

func ordinalSuffix(day int) string {
	if day%100 >= 11 && day%100 <= 13 {
		return "th"
	}
	switch day % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}

func evalUser(ctx *EvalContext, _ *Func, _ []types.Datum) (types.Datum, error) {
	if ctx == nil || ctx.User == "" {
		return types.Datum{}, nil
	}
	return types.NewString(ctx.User), nil
}

// evalCurrentUser is CURRENT_USER(): the account the login matched
// (user@host pattern), USER() where it is not known.
func evalCurrentUser(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if ctx != nil && ctx.CurrentUser != "" {
		return types.NewString(ctx.CurrentUser), nil
	}
	return evalUser(ctx, f, args)
}

func evalConnectionID(ctx *EvalContext, _ *Func, _ []types.Datum) (types.Datum, error) {
	if ctx == nil {
		return types.NewUint(0), nil
	}
	return types.NewUint(ctx.ConnectionID), nil
}

func evalLastInsertID(ctx *EvalContext, _ *Func, _ []types.Datum) (types.Datum, error) {
	if ctx == nil {
		return types.NewUint(0), nil
	}
	return types.NewUint(ctx.LastInsertID), nil
}
