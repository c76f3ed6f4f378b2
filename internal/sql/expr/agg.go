package expr

import (
	"math"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// GroupConcatMaxLen is MySQL's default group_concat_max_len: longer
// GROUP_CONCAT results are cut with warning 1260.
const GroupConcatMaxLen = 1024

// AggFunc is an aggregate function call: COUNT(*), COUNT, SUM, AVG, MIN,
// MAX, GROUP_CONCAT, STD/STDDEV[_POP|_SAMP], VARIANCE/VAR_POP/VAR_SAMP and
// BIT_AND/BIT_OR/BIT_XOR, each optionally DISTINCT. It is immutable; per-group
// state lives in Accumulators.
type AggFunc struct {
	Name     string // lower case
	Distinct bool
	Args     []Expr // empty for COUNT(*)
	// Separator joins GROUP_CONCAT values; NewAggFunc takes it from the
	// last argument, where the parser puts it (',' unless SEPARATOR says).
	Separator string
	ft        *ptypes.FieldType
}

// Accumulator folds the rows of one group. It is not safe for concurrent use.
type Accumulator interface {
	Add(ctx *EvalContext, row []types.Datum) error
	Result() types.Datum
}

// ValueAdder is implemented by the accumulators of SUM and AVG without
// DISTINCT: AddValue is Add of a row whose argument evaluated to v (the
// caller evaluated it once already).
type ValueAdder interface {
	Accumulator
	AddValue(ctx *EvalContext, v types.Datum)
}

// NewAggFunc builds an aggregate from its compiled arguments, in the shape
// the parser gives them (ast.AggregateFuncExpr.Args): COUNT(*) arrives as
// COUNT(1) and may also be passed with no arguments; GROUP_CONCAT's last
// argument is its SEPARATOR constant. GROUP_CONCAT(... ORDER BY ...) order
// is the caller's to apply (feed rows in that order).
func NewAggFunc(name string, distinct bool, args []Expr) (*AggFunc, error) {
	name = strings.ToLower(name)
	a := &AggFunc{Name: name, Distinct: distinct, Args: args, Separator: ","}
	switch name {
	case "count":
		a.ft = intType(mysql.MaxIntWidth, false)
		a.ft.SetFlen(21) // MySQL reports COUNT as BIGINT(21)
		if len(args) == 0 && distinct {
			return nil, sqlerr.New(sqlerr.ErParse, "42000", "COUNT(DISTINCT *) is not valid")
		}
		return a, nil
	case "group_concat":
		// As the parser builds it, the last argument is the SEPARATOR.
		if len(args) < 2 {
			return nil, errArgCount("GROUP_CONCAT")
		}
		sep, ok := args[len(args)-1].(*Constant)
		if !ok {
			return nil, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "GROUP_CONCAT separator must be a constant string")
		}
		a.Separator, _ = sep.Value.ToString()
		a.Args = args[:len(args)-1]
		a.ft = stringType(GroupConcatMaxLen)
		return a, nil
	}
	if len(args) != 1 {
		return nil, errArgCount(strings.ToUpper(name))
	}
	at := args[0].Type()
	switch name {
	case "sum":
		switch numericClass(at) {
		case classInt, classUint, classNull:
			a.ft = decimalType(min(intDigitsOf(at)+22, types.MaxDecimalPrecision), 0)
		case classDecimal:
			a.ft = decimalType(intDigitsOf(at)+22+scaleOf(at), scaleOf(at))
		default:
			a.ft = doubleType()
		}
	case "avg":
		switch numericClass(at) {
		case classInt, classUint, classNull:
			a.ft = decimalType(intDigitsOf(at)+types.DivPrecisionIncrement, types.DivPrecisionIncrement)
		case classDecimal:
			s := scaleOf(at) + types.DivPrecisionIncrement
			a.ft = decimalType(intDigitsOf(at)+s, s)
		default:
			a.ft = doubleType()
		}
	case "min", "max":
		a.ft = at
	case "std", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop", "var_samp":
		a.ft = doubleType()
	case "bit_and", "bit_or", "bit_xor":
		a.ft = intType(mysql.MaxIntWidth, true)
	default:
		return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support aggregate %s", strings.ToUpper(name))
	}
	return a, nil
}

// Type is the result type of the aggregate.
func (a *AggFunc) Type() *ptypes.FieldType { return a.ft }

func (a *AggFunc) String() string {
	if a.Name == "count" && len(a.Args) == 0 {
		return "count(*)"
	}
	s := callString(a.Name, a.Args)
	if a.Distinct {
		s = strings.Replace(s, "(", "(distinct ", 1)
	}
	return s
}

// NewAccumulator returns empty state for one group.
func (a *AggFunc) NewAccumulator() Accumulator {
	base := aggBase{fn: a}
	if a.Distinct {
		base.seen = make(map[string]struct{})
	}
	switch a.Name {
	case "count":
		return &countAcc{aggBase: base}
	case "sum":
		return &sumAcc{aggBase: base, real: classOf(a.ft) == classReal}
	case "avg":
		return &sumAcc{aggBase: base, avg: true, real: classOf(a.ft) == classReal}
	case "min":
		return &extremeAcc{aggBase: base, dir: -1}
	case "max":
		return &extremeAcc{aggBase: base, dir: 1}
	case "std", "stddev", "stddev_pop":
		return &varianceAcc{aggBase: base, sqrt: true}
	case "stddev_samp":
		return &varianceAcc{aggBase: base, sqrt: true, sample: true}
	case "variance", "var_pop":
		return &varianceAcc{aggBase: base}
	case "var_samp":
		return &varianceAcc{aggBase: base, sample: true}
	case "bit_and":
		return &bitAcc{aggBase: base, op: OpBitAnd, v: math.MaxUint64}
	case "bit_or":
		return &bitAcc{aggBase: base, op: OpBitOr}
	case "bit_xor":
		return &bitAcc{aggBase: base, op: OpBitXor}
	}
	return &groupConcatAcc{aggBase: base}
}

type aggBase struct {
	fn   *AggFunc
	seen map[string]struct{} // DISTINCT: hash keys of the argument tuples seen
	vals [1]types.Datum
	buf  []byte
}

// args evaluates the arguments; skip is true when any is NULL or (for
// DISTINCT) the tuple was already seen.
func (b *aggBase) args(ctx *EvalContext, row []types.Datum) (vals []types.Datum, skip bool, err error) {
	if len(b.fn.Args) == 1 {
		vals = b.vals[:]
	} else {
		vals = make([]types.Datum, len(b.fn.Args))
	}
	for i, e := range b.fn.Args {
		d, err := e.Eval(ctx, row)
		if err != nil {
			return nil, false, err
		}
		if d.IsNull() {
			return nil, true, nil
		}
		vals[i] = d
	}
	if b.seen != nil {
		b.buf = b.buf[:0]
		for i, v := range vals {
			b.buf = v.AppendHashKeyCollated(b.buf, CollationOf(b.fn.Args[i]))
		}
		if _, dup := b.seen[string(b.buf)]; dup {
			return nil, true, nil
		}
		b.seen[string(b.buf)] = struct{}{}
	}
	return vals, false, nil
}

type countAcc struct {
	aggBase
	n int64
}

func (c *countAcc) Add(ctx *EvalContext, row []types.Datum) error {
	if len(c.fn.Args) == 0 {
		c.n++
		return nil
	}
	_, skip, err := c.args(ctx, row)
	if err != nil || skip {
		return err
	}
	c.n++
	return nil
}

func (c *countAcc) Result() types.Datum { return types.NewInt(c.n) }

// sumAcc computes SUM and AVG: exactly in decimal for exact arguments, in
// double for approximate (float, string) ones.
type sumAcc struct {
	aggBase
	avg   bool
	real  bool // the result is a double: the sum is kept in f
	n     int64
	isDec bool
	// ints is the running sum, unscaled at scale, while every value is
	// an int64 or a decimal of int64 unscaled value and the sum fits
	// (inInt): no Decimal allocated per value.
	ints  int64
	scale int32
	dec   *types.Decimal
	f     float64
	inInt bool
}

func (s *sumAcc) Add(ctx *EvalContext, row []types.Datum) error {
	vals, skip, err := s.args(ctx, row)
	if err != nil || skip {
		return err
	}
	s.add(ctx, vals[0])
	return nil
}

// AddValue implements ValueAdder.
func (s *sumAcc) AddValue(ctx *EvalContext, v types.Datum) {
	if s.seen != nil {
		panic("expr: AddValue on a DISTINCT aggregate")
	}
	if !v.IsNull() {
		s.add(ctx, v)
	}
}

// add takes a non-NULL argument value into the sum.
func (s *sumAcc) add(ctx *EvalContext, v types.Datum) {
	s.n++
	if s.real {
		f, werr := v.ToFloat64()
		ctx.Warn(werr)
		s.f += f
		return
	}
	if s.n == 1 || s.inInt {
		var x int64
		var xs int32
		ok := false
		switch v.Kind() {
		case types.KindInt64:
			x, ok = v.Int(), true
		case types.KindDecimal:
			x, ok = v.Decimal().Small()
			xs = int32(v.Decimal().Scale())
		}
		if ok && s.n == 1 {
			s.ints, s.scale, s.inInt = x, xs, true
			return
		}
		if ok {
			if sum, scale, fits := types.AddUnscaled(s.ints, s.scale, x, xs); fits {
				s.ints, s.scale = sum, scale
				return
			}
		}
	}
	if s.inInt {
		s.dec, s.inInt = types.NewDecimalSmall(s.ints, int(s.scale)), false
	}
	d, werr := v.ToDecimal()
	ctx.Warn(werr)
	if s.dec == nil {
		s.dec = d
	} else {
		s.dec = s.dec.Add(d)
	}
}

func (s *sumAcc) Result() types.Datum {
	if s.n == 0 {
		return types.Datum{}
	}
	if s.real {
		if s.avg {
			return types.NewFloat(s.f / float64(s.n))
		}
		return types.NewFloat(s.f)
	}
	total := s.dec
	if s.inInt {
		total = types.NewDecimalSmall(s.ints, int(s.scale))
	}
	if s.avg {
		q, _ := total.Div(types.NewDecimalFromInt(s.n), types.DivPrecisionIncrement)
		total = q
	}
	if want := s.fn.ft.GetDecimal(); want >= 0 && total.Scale() != want {
		total = total.Round(want)
	}
	return types.NewDecimal(total)
}

type extremeAcc struct {
	aggBase
	dir  int
	best types.Datum
}

func (m *extremeAcc) Add(ctx *EvalContext, row []types.Datum) error {
	vals, skip, err := m.args(ctx, row)
	if err != nil || skip {
		return err
	}
	v := vals[0]
	if m.best.IsNull() {
		m.best = v
		return nil
	}
	c, err := compareColl(v, m.best, CollationOf(m.fn.Args[0]))
	if err != nil {
		return err
	}
	if c*m.dir > 0 {
		m.best = v
	}
	return nil
}

func (m *extremeAcc) Result() types.Datum { return m.best }

// varianceAcc computes population or sample variance (and its square root)
// with Welford's method, which stays accurate for large values.
type varianceAcc struct {
	aggBase
	sqrt, sample bool
	n            int64
	mean, m2     float64
}

func (v *varianceAcc) Add(ctx *EvalContext, row []types.Datum) error {
	vals, skip, err := v.args(ctx, row)
	if err != nil || skip {
		return err
	}
	x, werr := vals[0].ToFloat64()
	ctx.Warn(werr)
	v.n++
	delta := x - v.mean
	v.mean += delta / float64(v.n)
	v.m2 += delta * (x - v.mean)
	return nil
}

func (v *varianceAcc) Result() types.Datum {
	div := v.n
	if v.sample {
		div--
	}
	if v.n == 0 || div <= 0 {
		return types.Datum{}
	}
	r := v.m2 / float64(div)
	if v.sqrt {
		r = math.Sqrt(r)
	}
	return types.NewFloat(r)
}

// bitAcc is BIT_AND, BIT_OR and BIT_XOR over 64-bit unsigned values; an
// empty group yields the identity (all ones for AND, 0 otherwise), as MySQL.
type bitAcc struct {
	aggBase
	op ArithOp
	v  uint64
}

func (b *bitAcc) Add(ctx *EvalContext, row []types.Datum) error {
	vals, skip, err := b.args(ctx, row)
	if err != nil || skip {
		return err
	}
	x := bitOperand(ctx, vals[0])
	switch b.op {
	case OpBitAnd:
		b.v &= x
	case OpBitOr:
		b.v |= x
	default:
		b.v ^= x
	}
	return nil
}

func (b *bitAcc) Result() types.Datum { return types.NewUint(b.v) }

type groupConcatAcc struct {
	aggBase
	out       []byte
	any       bool
	truncated bool
}

func (g *groupConcatAcc) Add(ctx *EvalContext, row []types.Datum) error {
	vals, skip, err := g.args(ctx, row)
	if err != nil || skip || g.truncated {
		return err
	}
	if g.any {
		g.out = append(g.out, g.fn.Separator...)
	}
	g.any = true
	for _, v := range vals {
		g.out = v.AppendText(g.out)
	}
	if len(g.out) > GroupConcatMaxLen {
		g.out = g.out[:GroupConcatMaxLen]
		g.truncated = true
		ctx.Warn(sqlerr.New(1260, "HY000", "Row %d was cut by GROUP_CONCAT()", 1))
	}
	return nil
}

func (g *groupConcatAcc) Result() types.Datum {
	if !g.any {
		return types.Datum{}
	}
	return types.NewStringBytes(g.out)
}
