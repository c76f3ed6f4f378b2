package expr

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// ArithOp is an arithmetic or bitwise binary operator.
type ArithOp uint8

// Arithmetic operators.
const (
	OpPlus ArithOp = iota
	OpMinus
	OpMul
	OpDiv    // '/': DECIMAL (scale of dividend + 4) or DOUBLE
	OpIntDiv // DIV
	OpMod    // % and MOD()
	OpBitAnd
	OpBitOr
	OpBitXor
	OpShiftLeft
	OpShiftRight
)

var arithOpText = [...]string{"+", "-", "*", "/", "DIV", "%", "&", "|", "^", "<<", ">>"}

// Arith is a binary arithmetic or bitwise operation.
type Arith struct {
	Op   ArithOp
	L, R Expr
	ft   *ptypes.FieldType
}

// NewArith builds L op R with MySQL's result type.
func NewArith(op ArithOp, l, r Expr) Expr {
	l, r = numericContext(l), numericContext(r)
	return &Arith{Op: op, L: l, R: r, ft: arithType(op, l.Type(), r.Type())}
}

// arithType infers the static result type. A parameter on one side takes
// the class of the other side (k+? is integer arithmetic for an INT k).
func arithType(op ArithOp, lt, rt *ptypes.FieldType) *ptypes.FieldType {
	if op >= OpBitAnd {
		return intType(mysql.MaxIntWidth, true)
	}
	lc, rc := numericClass(lt), numericClass(rt)
	if lc == classUnknown {
		lc, lt = rc, rt
	}
	if rc == classUnknown {
		rc, rt = lc, lt
	}
	if lc == classUnknown {
		lc, rc = classInt, classInt
	}
	unsigned := lc == classUint || rc == classUint
	switch {
	case op == OpIntDiv:
		return intType(mysql.MaxIntWidth, unsigned)
	case lc == classReal || rc == classReal:
		return doubleType()
	case op == OpDiv:
		ls := scaleOf(lt)
		return decimalType(intDigitsOf(lt)+scaleOf(rt)+ls+types.DivPrecisionIncrement, ls+types.DivPrecisionIncrement)
	case lc == classDecimal || rc == classDecimal:
		ls, rs := scaleOf(lt), scaleOf(rt)
		switch op {
		case OpMul:
			return decimalType(intDigitsOf(lt)+intDigitsOf(rt)+ls+rs, ls+rs)
		default:
			s := max(ls, rs)
			return decimalType(max(intDigitsOf(lt), intDigitsOf(rt))+1+s, s)
		}
	}
	return intType(mysql.MaxIntWidth, unsigned)
}

// numericClass maps a type to the class arithmetic computes in: strings
// are DOUBLE, temporal values their numeric form (integer or decimal).
func numericClass(ft *ptypes.FieldType) evalClass {
	switch c := classOf(ft); c {
	case classString:
		return classReal
	case classTime:
		if ft.GetDecimal() > 0 {
			return classDecimal
		}
		return classInt
	case classNull:
		return classInt
	default:
		return c
	}
}

// Type implements Expr.
func (a *Arith) Type() *ptypes.FieldType { return a.ft }

func (a *Arith) String() string {
	return "(" + a.L.String() + " " + arithOpText[a.Op] + " " + a.R.String() + ")"
}

func errDivByZero() error { return sqlerr.New(sqlerr.ErDivisionByZero, "22012", "Division by 0") }

// Eval implements Expr.
func (a *Arith) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	l, err := a.L.Eval(ctx, row)
	if err != nil || l.IsNull() {
		return types.Datum{}, err
	}
	r, err := a.R.Eval(ctx, row)
	if err != nil || r.IsNull() {
		return types.Datum{}, err
	}
	return a.apply(ctx, l, r)
}

// apply computes l op r for operands that are not NULL.
func (a *Arith) apply(ctx *EvalContext, l, r types.Datum) (types.Datum, error) {
	if l.Kind() == types.KindInt64 && r.Kind() == types.KindInt64 && a.Op != OpDiv {
		return a.evalInt(ctx, l.Int(), r.Int())
	}
	return a.evalSlow(ctx, l, r)
}

func (a *Arith) overflow(typeName string) error {
	return types.ErrOutOfRange(typeName, a.String())
}

func (a *Arith) evalInt(ctx *EvalContext, x, y int64) (types.Datum, error) {
	switch a.Op {
	case OpPlus:
		s := x + y
		if (s > x) != (y > 0) {
			return types.Datum{}, a.overflow("BIGINT")
		}
		return types.NewInt(s), nil
	case OpMinus:
		s := x - y
		if (s < x) != (y > 0) {
			return types.Datum{}, a.overflow("BIGINT")
		}
		return types.NewInt(s), nil
	case OpMul:
		if x == 0 || y == 0 {
			return types.NewInt(0), nil
		}
		p := x * y
		if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
			return types.Datum{}, a.overflow("BIGINT")
		}
		return types.NewInt(p), nil
	case OpIntDiv:
		if y == 0 {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		if x == math.MinInt64 && y == -1 {
			return types.Datum{}, a.overflow("BIGINT")
		}
		return types.NewInt(x / y), nil
	case OpMod:
		if y == 0 {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		if y == -1 {
			return types.NewInt(0), nil
		}
		return types.NewInt(x % y), nil
	}
	return a.evalBits(uint64(x), uint64(y))
}

func (a *Arith) evalBits(x, y uint64) (types.Datum, error) {
	switch a.Op {
	case OpBitAnd:
		return types.NewUint(x & y), nil
	case OpBitOr:
		return types.NewUint(x | y), nil
	case OpBitXor:
		return types.NewUint(x ^ y), nil
	case OpShiftLeft:
		if y >= 64 {
			return types.NewUint(0), nil
		}
		return types.NewUint(x << y), nil
	case OpShiftRight:
		if y >= 64 {
			return types.NewUint(0), nil
		}
		return types.NewUint(x >> y), nil
	}
	return types.Datum{}, errInternal("arithmetic operator %d on integers", a.Op)
}

// bitOperand converts a value for bitwise operators: signed values keep
// their two's complement bits, others are rounded to integers.
func bitOperand(ctx *EvalContext, d types.Datum) uint64 {
	switch d.Kind() {
	case types.KindUint64:
		return d.Uint()
	case types.KindInt64:
		return uint64(d.Int())
	}
	f, err := d.ToFloat64()
	ctx.Warn(err)
	if f < 0 {
		v, err := types.NewFloat(f).ToInt64()
		ctx.Warn(err)
		return uint64(v)
	}
	v, err := types.NewFloat(f).ToUint64()
	ctx.Warn(err)
	return v
}

// numericOperand converts an operand for arithmetic: times to their number,
// strings to DOUBLE (with a truncation warning for non-numeric text).
func numericOperand(ctx *EvalContext, d types.Datum) types.Datum {
	switch d.Kind() {
	case types.KindTime:
		return d.Time().ToNumber()
	case types.KindDuration:
		return types.DurationNumber(d)
	case types.KindString, types.KindBytes:
		f, err := d.ToFloat64()
		ctx.Warn(err)
		return types.NewFloat(f)
	}
	return d
}

func (a *Arith) evalSlow(ctx *EvalContext, l, r types.Datum) (types.Datum, error) {
	if a.Op >= OpBitAnd {
		return a.evalBits(bitOperand(ctx, l), bitOperand(ctx, r))
	}
	l, r = numericOperand(ctx, l), numericOperand(ctx, r)
	lk, rk := l.Kind(), r.Kind()
	switch {
	case lk == types.KindFloat64 || rk == types.KindFloat64:
		x, _ := l.ToFloat64()
		y, _ := r.ToFloat64()
		return a.evalFloat(ctx, x, y)
	case lk == types.KindDecimal || rk == types.KindDecimal || a.Op == OpDiv:
		if d, ok := a.smallDecimal(ctx, l, r); ok {
			return d, nil
		}
		x, _ := l.ToDecimal()
		y, _ := r.ToDecimal()
		return a.evalDecimal(ctx, x, y)
	case lk == types.KindInt64 && rk == types.KindInt64:
		return a.evalInt(ctx, l.Int(), r.Int())
	}
	return a.evalUnsigned(ctx, l, r)
}

// smallDecimal computes l + r, l - r or l * r, a decimal, in int64 when
// each operand is an int64 or a decimal of int64 unscaled value and the
// result fits (ok false otherwise: evalDecimal does it): the same value
// and scale as Decimal's Add, Sub and Mul, without math/big, in a decimal
// from the context's slab. A scan's arithmetic over DECIMAL columns (TPC-H
// Q1's prices) made a big.Int and a Decimal per operator and row.
func (a *Arith) smallDecimal(ctx *EvalContext, l, r types.Datum) (types.Datum, bool) {
	x, xs, ok1 := smallOperand(l)
	y, ys, ok2 := smallOperand(r)
	if !ok1 || !ok2 {
		return types.Datum{}, false
	}
	var v int64
	var scale int32
	ok := false
	switch a.Op {
	case OpPlus:
		v, scale, ok = types.AddUnscaled(x, xs, y, ys)
	case OpMinus:
		if y != math.MinInt64 {
			v, scale, ok = types.AddUnscaled(x, xs, -y, ys)
		}
	case OpMul:
		v, scale, ok = types.MulUnscaled(x, xs, y, ys)
	}
	if !ok {
		return types.Datum{}, false
	}
	return types.NewDecimal(ctx.smallDecimal(v, scale)), true
}

// smallOperand returns an int64 or a decimal of int64 unscaled value as
// its unscaled value and scale.
func smallOperand(d types.Datum) (unscaled int64, scale int32, ok bool) {
	switch d.Kind() {
	case types.KindInt64:
		return d.Int(), 0, true
	case types.KindDecimal:
		v, ok := d.Decimal().Small()
		return v, int32(d.Decimal().Scale()), ok
	}
	return 0, 0, false
}

func (a *Arith) evalFloat(ctx *EvalContext, x, y float64) (types.Datum, error) {
	var v float64
	switch a.Op {
	case OpPlus:
		v = x + y
	case OpMinus:
		v = x - y
	case OpMul:
		v = x * y
	case OpDiv:
		if y == 0 {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		v = x / y
	case OpMod:
		if y == 0 {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		v = math.Mod(x, y)
	case OpIntDiv:
		if y == 0 {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		q := math.Trunc(x / y)
		if q < -9223372036854775808.0 || q >= 9223372036854775808.0 {
			return types.Datum{}, a.overflow("BIGINT")
		}
		return types.NewInt(int64(q)), nil
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return types.Datum{}, a.overflow("DOUBLE")
	}
	return types.NewFloat(v), nil
}

func (a *Arith) evalDecimal(ctx *EvalContext, x, y *types.Decimal) (types.Datum, error) {
	var v *types.Decimal
	switch a.Op {
	case OpPlus:
		v = x.Add(y)
	case OpMinus:
		v = x.Sub(y)
	case OpMul:
		v = x.Mul(y)
	case OpDiv:
		q, ok := x.Div(y, types.DivPrecisionIncrement)
		if !ok {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		v = q
	case OpMod:
		m, ok := x.Mod(y)
		if !ok {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		v = m
	case OpIntDiv:
		q, ok := x.IntDiv(y)
		if !ok {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		if q.IsInt64() {
			return types.NewInt(q.Int64()), nil
		}
		if q.IsUint64() && classOf(a.ft) == classUint {
			return types.NewUint(q.Uint64()), nil
		}
		return types.Datum{}, a.overflow("BIGINT")
	}
	if v.IntDigits() > types.MaxDecimalPrecision {
		return types.Datum{}, a.overflow("DECIMAL")
	}
	return types.NewDecimal(v), nil
}

// evalUnsigned handles integer arithmetic where one side is BIGINT
// UNSIGNED: the result is unsigned, and a negative result is an error.
func (a *Arith) evalUnsigned(ctx *EvalContext, l, r types.Datum) (types.Datum, error) {
	if l.Kind() == types.KindUint64 && r.Kind() == types.KindUint64 {
		x, y := l.Uint(), r.Uint()
		switch a.Op {
		case OpPlus:
			s, c := bits.Add64(x, y, 0)
			if c != 0 {
				return types.Datum{}, a.overflow("BIGINT UNSIGNED")
			}
			return types.NewUint(s), nil
		case OpMinus:
			if x < y {
				return types.Datum{}, a.overflow("BIGINT UNSIGNED")
			}
			return types.NewUint(x - y), nil
		case OpMul:
			hi, lo := bits.Mul64(x, y)
			if hi != 0 {
				return types.Datum{}, a.overflow("BIGINT UNSIGNED")
			}
			return types.NewUint(lo), nil
		case OpIntDiv, OpMod:
			if y == 0 {
				ctx.Warn(errDivByZero())
				return types.Datum{}, nil
			}
			if a.Op == OpIntDiv {
				return types.NewUint(x / y), nil
			}
			return types.NewUint(x % y), nil
		}
	}
	// Mixed signed/unsigned with a non-negative signed side is unsigned
	// arithmetic (counter + 1 on an UNSIGNED column).
	if (l.Kind() == types.KindInt64 && l.Int() >= 0) || (r.Kind() == types.KindInt64 && r.Int() >= 0) {
		return a.evalUnsigned(ctx, asUint(l), asUint(r))
	}
	// Otherwise compute exactly, then range-check as unsigned.
	x, y := toBig(l), toBig(r)
	z := new(big.Int)
	switch a.Op {
	case OpPlus:
		z.Add(x, y)
	case OpMinus:
		z.Sub(x, y)
	case OpMul:
		z.Mul(x, y)
	case OpIntDiv, OpMod:
		if y.Sign() == 0 {
			ctx.Warn(errDivByZero())
			return types.Datum{}, nil
		}
		if a.Op == OpIntDiv {
			z.Quo(x, y)
		} else {
			// MOD keeps the sign of the dividend even with an unsigned divisor.
			z.Rem(x, y)
			if z.IsInt64() {
				return types.NewInt(z.Int64()), nil
			}
		}
	}
	if !z.IsUint64() {
		return types.Datum{}, a.overflow("BIGINT UNSIGNED")
	}
	return types.NewUint(z.Uint64()), nil
}

// asUint reinterprets a non-negative signed integer as unsigned.
func asUint(d types.Datum) types.Datum {
	if d.Kind() == types.KindInt64 {
		return types.NewUint(uint64(d.Int()))
	}
	return d
}

func toBig(d types.Datum) *big.Int {
	if d.Kind() == types.KindUint64 {
		return new(big.Int).SetUint64(d.Uint())
	}
	return big.NewInt(d.Int())
}

// Neg is unary minus.
type Neg struct {
	E         Expr
	ft        *ptypes.FieldType
	toDecimal bool // MySQL quirk: see NewNeg
}

// NewNeg builds -e.
func NewNeg(e Expr) Expr {
	e = numericContext(e)
	var ft *ptypes.FieldType
	switch numericClass(e.Type()) {
	case classReal:
		ft = doubleType()
	case classDecimal:
		ft = decimalType(intDigitsOf(e.Type())+scaleOf(e.Type()), scaleOf(e.Type()))
	case classUnknown:
		ft = unknownType()
	default:
		ft = intType(mysql.MaxIntWidth, false)
		// MySQL types the negation of a negative integer constant as
		// DECIMAL, since BIGINT may not hold it: - -27 is DECIMAL 27, and
		// clients see a DECIMAL column (sqllogictest "R").
		if k, ok := e.(*Constant); ok && k.Value.Kind() == types.KindInt64 && k.Value.Int() < 0 {
			return &Neg{E: e, ft: decimalType(intDigitsOf(e.Type())+1, 0), toDecimal: true}
		}
	}
	return &Neg{E: e, ft: ft}
}

// Type implements Expr.
func (n *Neg) Type() *ptypes.FieldType { return n.ft }

func (n *Neg) String() string { return "-" + n.E.String() }

// Eval implements Expr.
func (n *Neg) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	d, err := n.E.Eval(ctx, row)
	if err != nil || d.IsNull() {
		return types.Datum{}, err
	}
	d = numericOperand(ctx, d)
	switch d.Kind() {
	case types.KindInt64:
		if n.toDecimal {
			return types.NewDecimal(types.NewDecimalFromInt(d.Int()).Neg()), nil
		}
		if d.Int() == math.MinInt64 {
			return types.Datum{}, types.ErrOutOfRange("BIGINT", n.String())
		}
		return types.NewInt(-d.Int()), nil
	case types.KindUint64:
		v := d.Uint()
		if v <= 1<<63 {
			return types.NewInt(int64(-v)), nil
		}
		return types.NewDecimal(types.NewDecimalFromUint(v).Neg()), nil
	case types.KindFloat64:
		return types.NewFloat(-d.Float()), nil
	case types.KindDecimal:
		return types.NewDecimal(d.Decimal().Neg()), nil
	}
	return types.Datum{}, errInternal("unary minus on %v", d.Kind())
}

// BitNeg is ~x.
type BitNeg struct{ E Expr }

// Type implements Expr.
func (n *BitNeg) Type() *ptypes.FieldType { return intType(mysql.MaxIntWidth, true) }

func (n *BitNeg) String() string { return "~" + n.E.String() }

// Eval implements Expr.
func (n *BitNeg) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	d, err := n.E.Eval(ctx, row)
	if err != nil || d.IsNull() {
		return types.Datum{}, err
	}
	return types.NewUint(^bitOperand(ctx, d)), nil
}
