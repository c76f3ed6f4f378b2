package expr

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/sqljson"
	"github.com/strata-db/strata/internal/sql/types"
)

// Case is CASE [value] WHEN .. THEN .. [ELSE ..] END. With a value it
// compares value = when; without, each when is a condition.
type Case struct {
	Value Expr // nil for the searched form
	Whens []Expr
	Thens []Expr
	Else  Expr // nil means NULL
	ft    *ptypes.FieldType
}

// NewCase builds a CASE expression whose type aggregates THEN and ELSE.
func NewCase(value Expr, whens, thens []Expr, els Expr) Expr {
	fts := make([]*ptypes.FieldType, 0, len(thens)+1)
	for _, t := range thens {
		fts = append(fts, t.Type())
	}
	if els != nil {
		fts = append(fts, els.Type())
	}
	if value != nil {
		for i, w := range whens {
			whens[i] = prepareTemporalConstant(w, value)
		}
	}
	return &Case{Value: value, Whens: whens, Thens: thens, Else: els, ft: aggregateType(fts)}
}

// Type implements Expr.
func (c *Case) Type() *ptypes.FieldType { return c.ft }

func (c *Case) String() string {
	var sb strings.Builder
	sb.WriteString("CASE")
	if c.Value != nil {
		sb.WriteString(" " + c.Value.String())
	}
	for i := range c.Whens {
		sb.WriteString(" WHEN " + c.Whens[i].String() + " THEN " + c.Thens[i].String())
	}
	if c.Else != nil {
		sb.WriteString(" ELSE " + c.Else.String())
	}
	sb.WriteString(" END")
	return sb.String()
}

// Eval implements Expr.
func (c *Case) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	var v types.Datum
	if c.Value != nil {
		var err error
		if v, err = c.Value.Eval(ctx, row); err != nil {
			return types.Datum{}, err
		}
	}
	for i, w := range c.Whens {
		var hit bool
		if c.Value != nil {
			if v.IsNull() {
				continue
			}
			wv, err := w.Eval(ctx, row)
			if err != nil {
				return types.Datum{}, err
			}
			if wv.IsNull() {
				continue
			}
			cmp, err := compareColl(v, wv, PairCollation(c.Value, w))
			if err != nil {
				return types.Datum{}, err
			}
			hit = cmp == 0
		} else {
			t, _, err := truth(ctx, w, row)
			if err != nil {
				return types.Datum{}, err
			}
			hit = t
		}
		if hit {
			d, err := c.Thens[i].Eval(ctx, row)
			if err != nil {
				return types.Datum{}, err
			}
			return coerce(ctx, d, c.ft), nil
		}
	}
	if c.Else == nil {
		return types.Datum{}, nil
	}
	d, err := c.Else.Eval(ctx, row)
	if err != nil {
		return types.Datum{}, err
	}
	return coerce(ctx, d, c.ft), nil
}

// Coalesce returns the first non-NULL argument; IFNULL(a,b) is
// COALESCE(a,b) and IF(c,a,b) is a two-branch CASE.
type Coalesce struct {
	Args []Expr
	name string
	ft   *ptypes.FieldType
}

// NewCoalesce builds COALESCE(args...); name is the SQL function shown.
func NewCoalesce(name string, args []Expr) Expr {
	fts := make([]*ptypes.FieldType, len(args))
	for i, a := range args {
		fts[i] = a.Type()
	}
	return &Coalesce{Args: args, name: name, ft: aggregateType(fts)}
}

// Type implements Expr.
func (c *Coalesce) Type() *ptypes.FieldType { return c.ft }

func (c *Coalesce) String() string { return callString(c.name, c.Args) }

// Eval implements Expr.
func (c *Coalesce) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	for _, a := range c.Args {
		d, err := a.Eval(ctx, row)
		if err != nil {
			return types.Datum{}, err
		}
		if !d.IsNull() {
			return coerce(ctx, d, c.ft), nil
		}
	}
	return types.Datum{}, nil
}

func callString(name string, args []Expr) string {
	var sb strings.Builder
	sb.WriteString(name)
	sb.WriteByte('(')
	for i, a := range args {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(a.String())
	}
	sb.WriteByte(')')
	return sb.String()
}

// NullIf is NULLIF(a, b): NULL when a = b, else a.
type NullIf struct{ A, B Expr }

// Type implements Expr.
func (n *NullIf) Type() *ptypes.FieldType { return n.A.Type() }

func (n *NullIf) String() string { return callString("nullif", []Expr{n.A, n.B}) }

// Eval implements Expr.
func (n *NullIf) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	a, err := n.A.Eval(ctx, row)
	if err != nil || a.IsNull() {
		return types.Datum{}, err
	}
	b, err := n.B.Eval(ctx, row)
	if err != nil {
		return types.Datum{}, err
	}
	if b.IsNull() {
		return a, nil
	}
	cmp, err := compareColl(a, b, PairCollation(n.A, n.B))
	if err != nil {
		return types.Datum{}, err
	}
	if cmp == 0 {
		return types.Datum{}, nil
	}
	return a, nil
}

// Cast is CAST(e AS type) / CONVERT(e, type): lenient conversion that
// warns (1292) and yields MySQL's best-effort value instead of failing.
type Cast struct {
	E     Expr
	ft    *ptypes.FieldType
	limit int // CHAR(n)/BINARY(n): the length values are cut to; -1 for none
}

// NewCast builds CAST(e AS ft). The parser's cast types are mapped to the
// result types MySQL reports (SIGNED -> BIGINT, CHAR(n) -> VARCHAR(n)...).
func NewCast(e Expr, target *ptypes.FieldType) (Expr, error) {
	var ft *ptypes.FieldType
	limit := -1
	switch target.GetType() {
	case mysql.TypeLonglong, mysql.TypeLong, mysql.TypeTiny, mysql.TypeShort, mysql.TypeInt24, mysql.TypeYear:
		ft = intType(mysql.MaxIntWidth, mysql.HasUnsignedFlag(target.GetFlag()))
	case mysql.TypeNewDecimal:
		prec, scale := target.GetFlen(), target.GetDecimal()
		if prec <= 0 {
			prec = 10
		}
		if scale < 0 {
			scale = 0
		}
		if prec > types.MaxDecimalPrecision || scale > types.MaxDecimalScale || scale > prec {
			return nil, sqlerr.New(1426, "42000", "Too-big precision %d specified for '%s'. Maximum is %d.", prec, e.String(), types.MaxDecimalPrecision)
		}
		ft = decimalType(prec, scale)
	case mysql.TypeDouble, mysql.TypeFloat:
		ft = doubleType()
		if target.GetType() == mysql.TypeFloat {
			ft = ptypes.NewFieldType(mysql.TypeFloat)
			ft.SetFlen(12)
			ft.SetDecimal(ptypes.UnspecifiedLength)
			setBinaryCharset(ft)
		}
	case mysql.TypeString, mysql.TypeVarString, mysql.TypeVarchar, mysql.TypeBlob:
		limit = target.GetFlen()
		flen := limit
		if flen < 0 {
			// Without a length the result is as wide as the operand's text.
			if flen = charLen(e.Type()); flen <= 0 {
				flen = mysql.MaxBlobWidth
			}
		}
		ft = stringType(flen)
		if target.GetCharset() == charset.CharsetBin || mysql.HasBinaryFlag(target.GetFlag()) {
			setBinaryCharset(ft)
		}
	case mysql.TypeDate, mysql.TypeDatetime, mysql.TypeTimestamp:
		fsp := target.GetDecimal()
		if fsp < 0 || target.GetType() == mysql.TypeDate {
			fsp = 0
		}
		ft = timeType(target.GetType(), fsp)
	case mysql.TypeDuration:
		fsp := target.GetDecimal()
		if fsp < 0 {
			fsp = 0
		}
		ft = durationFT(fsp)
	case mysql.TypeJSON:
		ft = ptypes.NewFieldType(mysql.TypeJSON)
		ft.SetCharset(charset.CharsetUTF8MB4)
		ft.SetCollate(charset.CollationUTF8MB4)
	default:
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support CAST to %s", target.String())
	}
	return &Cast{E: e, ft: ft, limit: limit}, nil
}

// Type implements Expr.
func (c *Cast) Type() *ptypes.FieldType { return c.ft }

func (c *Cast) String() string {
	return "cast(" + c.E.String() + " as " + c.ft.CompactStr() + ")"
}

// Eval implements Expr.
func (c *Cast) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	d, err := c.E.Eval(ctx, row)
	if err != nil || d.IsNull() {
		return types.Datum{}, err
	}
	if c.ft.GetType() == mysql.TypeDuration {
		v, err := types.Convert(d, c.ft)
		if err != nil {
			s, _ := d.ToString()
			ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Truncated incorrect time value: '%s'", s))
			return types.Datum{}, nil
		}
		return v, nil
	}
	if c.ft.GetType() == mysql.TypeJSON {
		if isJSONExpr(c.E) {
			return d, nil
		}
		if d.IsStringLike() {
			canon, err := sqljson.Canonical(d.Bytes())
			if err != nil {
				return types.Datum{}, sqlerr.New(3141, "22032", "Invalid JSON text in argument 1 to function cast_as_json: \"Invalid value.\" at position 0.")
			}
			return types.NewStringBytes(canon), nil
		}
		return jsonDatum(sqlToJSON(d)), nil
	}
	return castValue(ctx, d, c.ft, c.limit, c), nil
}

// castValue converts d to ft leniently, as CAST does; strings are cut to
// limit characters (bytes for binary) unless it is negative; e names the
// expression in warnings.
func castValue(ctx *EvalContext, d types.Datum, ft *ptypes.FieldType, limit int, e Expr) types.Datum {
	switch classOf(ft) {
	case classInt, classUint:
		unsigned := classOf(ft) == classUint
		var v int64
		var u uint64
		switch d.Kind() {
		case types.KindString, types.KindBytes:
			// CAST of text parses an integer prefix: '1.9' is 1, not 2.
			neg, mag, ok, complete := parseIntPrefix(d.Bytes())
			if !ok || !complete {
				ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Truncated incorrect INTEGER value: '%s'", string(d.Bytes())))
			}
			if neg {
				if mag > 1<<63 {
					ctx.Warn(types.ErrOutOfRange("BIGINT", string(d.Bytes())))
					mag = 1 << 63
				}
				v = int64(-mag)
				u = uint64(v)
			} else {
				u = mag
				v = int64(mag)
				if !unsigned && mag > math.MaxInt64 {
					// MySQL wraps CAST('18446744073709551615' AS SIGNED) to -1.
					ctx.Warn(sqlerr.New(sqlerr.ErUnknown, "HY000", "Cast to signed converted positive out-of-range integer to its negative complement"))
				}
			}
		case types.KindUint64:
			u = d.Uint()
			v = int64(u)
		default:
			if d.Kind() == types.KindFloat64 && unsigned && d.Float() >= 0 {
				var err error
				u, err = d.ToUint64()
				ctx.Warn(err)
				v = int64(u)
				break
			}
			var err error
			v, err = d.ToInt64()
			ctx.Warn(err)
			u = uint64(v)
		}
		if unsigned {
			return types.NewUint(u)
		}
		return types.NewInt(v)
	case classDecimal:
		dec, err := d.ToDecimal()
		ctx.Warn(err)
		prec, scale := ft.GetFlen(), ft.GetDecimal()
		r := dec.Round(scale)
		if r.IntDigits() > prec-scale {
			// Clip to the largest value of the type, like MySQL.
			ctx.Warn(sqlerr.New(sqlerr.ErWarnDataOutOfRange, "22003", "Out of range value for column '%s' at row 1", e.String()))
			maxStr := strings.Repeat("9", prec-scale)
			if maxStr == "" {
				maxStr = "0"
			}
			if scale > 0 {
				maxStr += "." + strings.Repeat("9", scale)
			}
			m, _ := types.ParseDecimal(maxStr)
			if r.Sign() < 0 {
				m = m.Neg()
			}
			r = m
		}
		return types.NewDecimal(r)
	case classReal:
		f, err := d.ToFloat64()
		ctx.Warn(err)
		if ft.GetType() == mysql.TypeFloat {
			f = float64(float32(f))
		}
		return types.NewFloat(f)
	case classString:
		var b []byte
		if d.IsStringLike() {
			b = d.Bytes()
		} else {
			b = d.AppendText(nil)
		}
		if n := limit; n >= 0 {
			binary := ft.GetCharset() == charset.CharsetBin
			if binary && len(b) > n {
				ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Truncated incorrect BINARY(%d) value: '%s'", n, string(b)))
				b = b[:n]
			} else if !binary && utf8.RuneCount(b) > n {
				ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Truncated incorrect CHAR(%d) value: '%s'", n, string(b)))
				cut := 0
				for i := 0; i < n; i++ {
					_, size := utf8.DecodeRune(b[cut:])
					cut += size
				}
				b = b[:cut]
			}
		}
		if ft.GetCharset() == charset.CharsetBin {
			return types.NewBytes(b)
		}
		return types.NewStringBytes(b)
	case classTime:
		t, ok := toTime(d, ft.GetType(), max(ft.GetDecimal(), 0))
		if !ok {
			s, _ := d.ToString()
			ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect datetime value: '%s'", s))
			return types.Datum{}
		}
		return types.NewTime(t)
	}
	if ft.GetType() == mysql.TypeJSON {
		if d.IsStringLike() {
			return d
		}
		return types.NewStringBytes(d.AppendText(nil))
	}
	return d
}

// toTime converts a value to a temporal type as CAST and date functions do.
func toTime(d types.Datum, tp byte, fsp int) (types.Time, bool) {
	ft := timeType(tp, fsp)
	switch d.Kind() {
	case types.KindTime:
		t, err := d.Time().WithType(tp, fsp)
		return t, err == nil
	case types.KindString, types.KindBytes:
		t, err := types.ParseTime(string(d.Bytes()), tp, fsp)
		return t, err == nil
	}
	conv, err := types.Convert(d, ft)
	if err != nil {
		return 0, false
	}
	return conv.Time(), true
}

// parseIntPrefix parses [spaces][+-]digits; complete is false when text
// other than trailing spaces follows.
func parseIntPrefix(b []byte) (neg bool, mag uint64, ok, complete bool) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n') {
		i++
	}
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	start := i
	overflow := false
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		digit := uint64(b[i] - '0')
		if mag > (math.MaxUint64-digit)/10 {
			overflow = true
			mag = math.MaxUint64
		} else if !overflow {
			mag = mag*10 + digit
		}
		i++
	}
	ok = i > start
	rest := b[i:]
	complete = true
	for _, c := range rest {
		if c != ' ' {
			complete = false
			break
		}
	}
	return neg, mag, ok, complete && !overflow
}
