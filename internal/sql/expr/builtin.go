package expr

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// ServerVersion is what VERSION() and @@version report: MySQL 8 compatible.
const ServerVersion = "8.0.11-strata"

// maxStringResult bounds REPEAT/LPAD/RPAD/CONCAT results like MySQL's
// max_allowed_packet (64 MiB): longer results are NULL with a warning.
const maxStringResult = 64 << 20

// Func is a call of a scalar builtin.
type Func struct {
	Name string
	Args []Expr
	def  *funcDef
	ft   *ptypes.FieldType
}

type funcDef struct {
	minArgs, maxArgs int  // maxArgs -1: variadic
	volatile         bool // result may differ between calls with equal arguments
	nullIfNullArg    bool // any NULL argument makes the result NULL (checked before eval)
	retType          func(args []Expr) *ptypes.FieldType
	eval             func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error)
}

// Type implements Expr.
func (f *Func) Type() *ptypes.FieldType { return f.ft }

func (f *Func) String() string { return callString(f.Name, f.Args) }

// Eval implements Expr.
func (f *Func) Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error) {
	if ctx == nil {
		ctx = &EvalContext{}
	}
	// The arguments go on ctx's stack (EvalContext.args): an argument that
	// is itself a call pushes and pops above them.
	base := len(ctx.args)
	for _, a := range f.Args {
		d, err := a.Eval(ctx, row)
		if err != nil {
			ctx.args = ctx.args[:base]
			return types.Datum{}, err
		}
		if d.IsNull() && f.def.nullIfNullArg {
			ctx.args = ctx.args[:base]
			return types.Datum{}, nil
		}
		ctx.args = append(ctx.args, d)
	}
	top := len(ctx.args)
	v, err := f.def.eval(ctx, f, ctx.args[base:top:top])
	ctx.args = ctx.args[:base]
	return v, err
}

// Variable reads @user or @@system variables through EvalContext.Vars.
type Variable struct {
	Name   string
	System bool
	Scope  string
}

// Type implements Expr: variables are typed by their value at run time.
func (v *Variable) Type() *ptypes.FieldType { return unknownType() }

func (v *Variable) String() string {
	if !v.System {
		return "@" + v.Name
	}
	if v.Scope != "" {
		return "@@" + v.Scope + "." + v.Name
	}
	return "@@" + v.Name
}

// Eval implements Expr. An unknown user variable is NULL; an unknown system
// variable is error 1193.
func (v *Variable) Eval(ctx *EvalContext, _ []types.Datum) (types.Datum, error) {
	if ctx != nil && ctx.Vars != nil {
		if d, ok := ctx.Vars.GetVar(v.Name, v.System, v.Scope); ok {
			return d, nil
		}
	}
	if v.System {
		if v.Name == "version" {
			return types.NewString(ServerVersion), nil
		}
		return types.Datum{}, sqlerr.New(sqlerr.ErUnknownSystemVariable, "HY000", "Unknown system variable '%s'", v.Name)
	}
	return types.Datum{}, nil
}

func errArgCount(name string) error {
	return sqlerr.New(1582, "42000", "Incorrect parameter count in the call to native function '%s'", name)
}

func (c *compiler) funcCall(n *ast.FuncCallExpr) (Expr, error) {
	name := n.FnName.L
	nodes := n.Args
	trimDir := ast.TrimBothDefault
	if name == "trim" && len(nodes) == 3 {
		if d, ok := nodes[2].(*ast.TrimDirectionExpr); ok {
			trimDir = d.Direction
			nodes = nodes[:2]
		}
	}
	switch name {
	case "date_add", "date_sub", "adddate", "subdate":
		return c.dateArithCall(name, nodes)
	case "timestampadd", "timestampdiff":
		return c.timestampCall(name, nodes)
	case "extract":
		return c.extractCall(nodes)
	case ast.DateLiteral, ast.TimeLiteral, ast.TimestampLiteral:
		return c.temporalLiteral(name, nodes)
	}
	args, err := c.compileAll(nodes)
	if err != nil {
		return nil, err
	}
	switch name {
	case "any_value":
		// MySQL's escape from ONLY_FULL_GROUP_BY: the value of any row of
		// the group, here the group's first (the planner's check lets it
		// through).
		if len(args) != 1 {
			return nil, errArgCount("ANY_VALUE")
		}
		return args[0], nil
	case "if":
		if len(args) != 3 {
			return nil, errArgCount("IF")
		}
		return NewCase(nil, []Expr{args[0]}, []Expr{args[1]}, args[2]), nil
	case "ifnull":
		if len(args) != 2 {
			return nil, errArgCount("IFNULL")
		}
		return NewCoalesce("ifnull", args), nil
	case "coalesce":
		if len(args) < 1 {
			return nil, errArgCount("COALESCE")
		}
		return NewCoalesce("coalesce", args), nil
	case "nullif":
		if len(args) != 2 {
			return nil, errArgCount("NULLIF")
		}
		return &NullIf{A: args[0], B: args[1]}, nil
	case "convert":
		return c.convertCall(args)
	case "mod":
		if len(args) != 2 {
			return nil, errArgCount("MOD")
		}
		return NewArith(OpMod, args[0], args[1]), nil
	case "trim":
		switch trimDir {
		case ast.TrimLeading:
			name = "ltrim"
		case ast.TrimTrailing:
			name = "rtrim"
		}
		if len(args) == 1 {
			args = append(args, NewConstant(types.NewString(" "), nil))
		}
		return newFunc(name+"_chars", args)
	case "ltrim", "rtrim":
		if len(args) != 1 {
			return nil, errArgCount(strings.ToUpper(name))
		}
		return newFunc(name+"_chars", append(args, NewConstant(types.NewString(" "), nil)))
	}
	return newFunc(name, args)
}

// temporalLiteral compiles the standard SQL literals DATE 'yyyy-mm-dd',
// TIME 'hh:mm:ss[.f]' and TIMESTAMP 'yyyy-mm-dd hh:mm:ss[.f]' into a
// constant of their type. Unlike CAST, a string that is not such a value
// is an error (ER_WRONG_VALUE, 1525), as in MySQL.
func (c *compiler) temporalLiteral(name string, nodes []ast.ExprNode) (Expr, error) {
	kind, tp := "DATE", mysql.TypeDate
	switch name {
	case ast.TimeLiteral:
		kind, tp = "TIME", mysql.TypeDuration
	case ast.TimestampLiteral:
		kind, tp = "DATETIME", mysql.TypeDatetime
	}
	if len(nodes) != 1 {
		return nil, errArgCount(kind)
	}
	arg, err := c.compile(nodes[0])
	if err != nil {
		return nil, err
	}
	k, ok := arg.(*Constant)
	if !ok || !k.Value.IsStringLike() {
		return nil, sqlerr.New(sqlerr.ErParse, "42000", "You have an error in your SQL syntax; a %s literal takes a quoted string", kind)
	}
	s := string(k.Value.Bytes())
	fsp := 0
	if i := strings.LastIndexByte(s, '.'); i >= 0 && tp != mysql.TypeDate {
		fsp = min(len(strings.TrimSpace(s[i+1:])), 6)
	}
	var ft *ptypes.FieldType
	if tp == mysql.TypeDuration {
		ft = durationFT(fsp)
	} else {
		ft = timeType(tp, fsp)
	}
	v, err := types.Convert(k.Value, ft)
	if err != nil || v.IsNull() {
		return nil, sqlerr.New(1525, "HY000", "Incorrect %s value: '%s'", kind, s)
	}
	return NewConstant(v, ft), nil
}

// NewFunc builds a call of the scalar builtin name (lower case) over args.
// IF, IFNULL, COALESCE, NULLIF and MOD are compiled by Compile into their
// own node types; NewFunc covers the rest.
func NewFunc(name string, args []Expr) (Expr, error) { return newFunc(strings.ToLower(name), args) }

func newFunc(name string, args []Expr) (Expr, error) {
	def, ok := builtins[name]
	if !ok {
		return nil, sqlerr.New(1305, "42000", "FUNCTION %s does not exist", name)
	}
	if len(args) < def.minArgs || (def.maxArgs >= 0 && len(args) > def.maxArgs) {
		return nil, errArgCount(strings.ToUpper(strings.TrimSuffix(name, "_chars")))
	}
	display := strings.TrimSuffix(name, "_chars")
	return &Func{Name: display, Args: args, def: def, ft: def.retType(args)}, nil
}

var builtins map[string]*funcDef

func init() {
	builtins = map[string]*funcDef{
		// String functions.
		"concat":           {minArgs: 1, maxArgs: -1, nullIfNullArg: true, retType: concatType, eval: evalConcat},
		"concat_ws":        {minArgs: 2, maxArgs: -1, retType: concatType, eval: evalConcatWS},
		"length":           {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalLength},
		"octet_length":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalLength},
		"char_length":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalCharLength},
		"character_length": {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalCharLength},
		"upper":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retArg0String, eval: evalUpper},
		"ucase":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retArg0String, eval: evalUpper},
		"lower":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retArg0String, eval: evalLower},
		"lcase":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retArg0String, eval: evalLower},
		"substring":        {minArgs: 2, maxArgs: 3, nullIfNullArg: true, retType: retArg0String, eval: evalSubstring},
		"substr":           {minArgs: 2, maxArgs: 3, nullIfNullArg: true, retType: retArg0String, eval: evalSubstring},
		"mid":              {minArgs: 3, maxArgs: 3, nullIfNullArg: true, retType: retArg0String, eval: evalSubstring},
		"trim_chars":       {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retArg0String, eval: evalTrim(true, true)},
		"ltrim_chars":      {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retArg0String, eval: evalTrim(true, false)},
		"rtrim_chars":      {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retArg0String, eval: evalTrim(false, true)},
		"replace":          {minArgs: 3, maxArgs: 3, nullIfNullArg: true, retType: retArg0String, eval: evalReplace},
		"left":             {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retArg0String, eval: evalLeftRight(true)},
		"right":            {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retArg0String, eval: evalLeftRight(false)},
		"lpad":             {minArgs: 3, maxArgs: 3, nullIfNullArg: true, retType: retPadString, eval: evalPad(true)},
		"rpad":             {minArgs: 3, maxArgs: 3, nullIfNullArg: true, retType: retPadString, eval: evalPad(false)},
		"repeat":           {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retLongString, eval: evalRepeat},
		"space":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retLongString, eval: evalSpace},
		"reverse":          {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retArg0String, eval: evalReverse},
		"instr":            {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retInt, eval: evalInstr},
		"locate":           {minArgs: 2, maxArgs: 3, nullIfNullArg: true, retType: retInt, eval: evalLocate},
		"position":         {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retInt, eval: evalLocate},
		"ascii":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalASCII},
		"strcmp":           {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retInt, eval: evalStrcmp},
		// Math functions.
		"abs":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retAbs, eval: evalAbs},
		"ceil":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retCeilFloor, eval: evalCeilFloor(true)},
		"ceiling":  {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retCeilFloor, eval: evalCeilFloor(true)},
		"floor":    {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retCeilFloor, eval: evalCeilFloor(false)},
		"round":    {minArgs: 1, maxArgs: 2, nullIfNullArg: true, retType: retRound, eval: evalRound(true)},
		"truncate": {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retRound, eval: evalRound(false)},
		"power":    {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retDouble, eval: evalFloat2(math.Pow)},
		"pow":      {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retDouble, eval: evalFloat2(math.Pow)},
		"sqrt":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Sqrt, func(x float64) bool { return x >= 0 })},
		"exp":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Exp, nil)},
		"ln":       {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Log, positive)},
		"log10":    {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Log10, positive)},
		"log2":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Log2, positive)},
		"log":      {minArgs: 1, maxArgs: 2, nullIfNullArg: true, retType: retDouble, eval: evalLog},
		"sin":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Sin, nil)},
		"cos":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Cos, nil)},
		"tan":      {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDouble, eval: evalFloat1(math.Tan, nil)},
		"pi":       {minArgs: 0, maxArgs: 0, retType: retPi, eval: func(*EvalContext, *Func, []types.Datum) (types.Datum, error) { return types.NewFloat(math.Pi), nil }},
		"sign":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalSign},
		"greatest": {minArgs: 2, maxArgs: -1, nullIfNullArg: true, retType: retAggregate, eval: evalExtreme(1)},
		"least":    {minArgs: 2, maxArgs: -1, nullIfNullArg: true, retType: retAggregate, eval: evalExtreme(-1)},
		"rand":     {minArgs: 0, maxArgs: 1, volatile: true, retType: retDouble, eval: evalRand},
		// Date and time functions.
		"now":               {minArgs: 0, maxArgs: 1, volatile: true, retType: retNow, eval: evalNow},
		"current_timestamp": {minArgs: 0, maxArgs: 1, volatile: true, retType: retNow, eval: evalNow},
		"localtime":         {minArgs: 0, maxArgs: 1, volatile: true, retType: retNow, eval: evalNow},
		"localtimestamp":    {minArgs: 0, maxArgs: 1, volatile: true, retType: retNow, eval: evalNow},
		"sysdate":           {minArgs: 0, maxArgs: 1, volatile: true, retType: retNow, eval: evalNow},
		"curdate":           {minArgs: 0, maxArgs: 0, volatile: true, retType: retDate, eval: evalCurdate},
		"current_date":      {minArgs: 0, maxArgs: 0, volatile: true, retType: retDate, eval: evalCurdate},
		"date":              {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retDate, eval: evalDate},
		"year":              {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimePart(types.Time.Year)},
		"month":             {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimePart(types.Time.Month)},
		"day":               {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimePart(types.Time.Day)},
		"dayofmonth":        {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimePart(types.Time.Day)},
		"hour":              {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimePart(types.Time.Hour)},
		"minute":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimePart(types.Time.Minute)},
		"second":            {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retInt, eval: evalTimePart(types.Time.Second)},
		"datediff":          {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retInt, eval: evalDatediff},
		"unix_timestamp":    {minArgs: 0, maxArgs: 1, volatile: true, retType: retUnixTimestamp, eval: evalUnixTimestamp},
		"from_unixtime":     {minArgs: 1, maxArgs: 1, nullIfNullArg: true, retType: retFromUnixtime, eval: evalFromUnixtime},
		"date_format":       {minArgs: 2, maxArgs: 2, nullIfNullArg: true, retType: retShortString, eval: evalDateFormat},
		// Information functions.
		"user":           {minArgs: 0, maxArgs: 0, volatile: true, retType: retShortString, eval: evalUser},
		"current_user":   {minArgs: 0, maxArgs: 0, volatile: true, retType: retShortString, eval: evalCurrentUser},
		"session_user":   {minArgs: 0, maxArgs: 0, volatile: true, retType: retShortString, eval: evalUser},
		"system_user":    {minArgs: 0, maxArgs: 0, volatile: true, retType: retShortString, eval: evalUser},
		"connection_id":  {minArgs: 0, maxArgs: 0, volatile: true, retType: retUint, eval: evalConnectionID},
		"last_insert_id": {minArgs: 0, maxArgs: 0, volatile: true, retType: retUint, eval: evalLastInsertID},
		"database":       {minArgs: 0, maxArgs: 0, volatile: true, retType: retShortString, eval: evalDatabase},
		"schema":         {minArgs: 0, maxArgs: 0, volatile: true, retType: retShortString, eval: evalDatabase},
		"version":        {minArgs: 0, maxArgs: 0, retType: retShortString, eval: evalVersion},
	}
}

// Result types.

func retInt([]Expr) *ptypes.FieldType    { return intType(mysql.MaxIntWidth, false) }
func retDouble([]Expr) *ptypes.FieldType { return doubleType() }

// retPi is DOUBLE with 6 fixed decimals: MySQL shows PI() as 3.141593.
func retPi([]Expr) *ptypes.FieldType {
	ft := doubleType()
	ft.SetFlen(8)
	ft.SetDecimal(6)
	return ft
}

func retUint([]Expr) *ptypes.FieldType { return intType(mysql.MaxIntWidth, true) }

func retUnixTimestamp(args []Expr) *ptypes.FieldType {
	if len(args) == 1 && classOf(args[0].Type()) == classTime && args[0].Type().GetDecimal() > 0 {
		return decimalType(18, args[0].Type().GetDecimal())
	}
	return intType(mysql.MaxIntWidth, false)
}

func retFromUnixtime(args []Expr) *ptypes.FieldType {
	return timeType(mysql.TypeDatetime, min(max(scaleOf(args[0].Type()), 0), types.MaxFsp))
}
func retDate([]Expr) *ptypes.FieldType { return timeType(mysql.TypeDate, 0) }
func retLongString([]Expr) *ptypes.FieldType {
	return stringType(mysql.MaxBlobWidth)
}
func retShortString([]Expr) *ptypes.FieldType { return stringType(64) }

func retArg0String(args []Expr) *ptypes.FieldType {
	ft := stringType(charLen(args[0].Type()))
	if args[0].Type().GetCharset() == "binary" && classOf(args[0].Type()) == classString {
		setBinaryCharset(ft)
	}
	return ft
}

func retPadString(args []Expr) *ptypes.FieldType {
	if k, ok := args[1].(*Constant); ok {
		if n, err := k.Value.ToInt64(); err == nil && n >= 0 && n < mysql.MaxBlobWidth {
			return stringType(int(n))
		}
	}
	return stringType(mysql.MaxBlobWidth)
}

func concatType(args []Expr) *ptypes.FieldType {
	n := 0
	binary := false
	for _, a := range args {
		n += charLen(a.Type())
		if classOf(a.Type()) == classString && a.Type().GetCharset() == "binary" {
			binary = true
		}
	}
	ft := stringType(min(n, mysql.MaxBlobWidth))
	if binary {
		setBinaryCharset(ft)
	}
	return ft
}

func retAggregate(args []Expr) *ptypes.FieldType {
	fts := make([]*ptypes.FieldType, len(args))
	for i, a := range args {
		fts[i] = a.Type()
	}
	return aggregateType(fts)
}

func retAbs(args []Expr) *ptypes.FieldType {
	ft := args[0].Type()
	switch numericClass(ft) {
	case classInt, classUint:
		return intType(mysql.MaxIntWidth, classOf(ft) == classUint)
	case classDecimal:
		return decimalType(intDigitsOf(ft)+scaleOf(ft), scaleOf(ft))
	case classUnknown:
		return unknownType()
	}
	return doubleType()
}

func retCeilFloor(args []Expr) *ptypes.FieldType {
	ft := args[0].Type()
	switch numericClass(ft) {
	case classInt, classUint:
		return intType(mysql.MaxIntWidth, classOf(ft) == classUint)
	case classDecimal:
		if intDigitsOf(ft) < 18 {
			return intType(mysql.MaxIntWidth, false)
		}
		return decimalType(intDigitsOf(ft)+1, 0)
	case classUnknown:
		return unknownType()
	}
	return doubleType()
}

// retRound: ROUND/TRUNCATE keep the argument's class; a constant second
// argument fixes a DECIMAL result's scale.
func retRound(args []Expr) *ptypes.FieldType {
	ft := args[0].Type()
	switch numericClass(ft) {
	case classInt, classUint:
		return intType(mysql.MaxIntWidth, classOf(ft) == classUint)
	case classDecimal:
		scale := 0
		if len(args) > 1 {
			k, ok := args[1].(*Constant)
			if !ok {
				scale = scaleOf(ft)
			} else if n, err := k.Value.ToInt64(); err == nil && n > 0 {
				scale = int(min(n, types.MaxDecimalScale))
			}
		}
		return decimalType(intDigitsOf(ft)+1+scale, scale)
	case classUnknown:
		return unknownType()
	}
	return doubleType()
}

func retNow(args []Expr) *ptypes.FieldType {
	return timeType(mysql.TypeDatetime, nowFsp(args))
}

func nowFsp(args []Expr) int {
	if len(args) == 0 {
		return 0
	}
	if k, ok := args[0].(*Constant); ok {
		if n, err := k.Value.ToInt64(); err == nil && n >= 0 && n <= types.MaxFsp {
			return int(n)
		}
	}
	return types.MaxFsp
}

// Evaluation helpers.

// textOf returns the bytes of a value as a string function sees them.
func textOf(d types.Datum) []byte {
	if d.IsStringLike() {
		return d.Bytes()
	}
	return d.AppendText(nil)
}

// intArg converts a numeric argument, recording conversion warnings.
func intArg(ctx *EvalContext, d types.Datum) int64 {
	v, err := d.ToInt64()
	ctx.Warn(err)
	return v
}

// stringResult returns b as text or binary according to f's type.
func stringResult(f *Func, b []byte) types.Datum {
	if f.ft.GetCharset() == "binary" {
		return types.NewBytes(b)
	}
	return types.NewStringBytes(b)
}

func tooLong(ctx *EvalContext, f *Func) (types.Datum, error) {
	ctx.Warn(sqlerr.New(1301, "HY000", "Result of %s() was larger than max_allowed_packet (%d) - truncated", f.Name, maxStringResult))
	return types.Datum{}, nil
}

func evalConcat(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	var out []byte
	for _, a := range args {
		out = append(out, textOf(a)...)
		if len(out) > maxStringResult {
			return tooLong(ctx, f)
		}
	}
	if out == nil {
		out = []byte{}
	}
	return stringResult(f, out), nil
}

func evalConcatWS(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if args[0].IsNull() {
		return types.Datum{}, nil
	}
	sep := textOf(args[0])
	out := []byte{}
	first := true
	for _, a := range args[1:] {
		if a.IsNull() {
			continue
		}
		if !first {
			out = append(out, sep...)
		}
		first = false
		out = append(out, textOf(a)...)
		if len(out) > maxStringResult {
			return tooLong(ctx, f)
		}
	}
	return stringResult(f, out), nil
}

func evalLength(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	return types.NewInt(int64(len(textOf(args[0])))), nil
}

func evalCharLength(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	if args[0].Kind() == types.KindBytes {
		return types.NewInt(int64(len(args[0].Bytes()))), nil
	}
	return types.NewInt(int64(utf8.RuneCount(textOf(args[0])))), nil
}

func evalUpper(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if args[0].Kind() == types.KindBytes {
		return args[0], nil // binary strings have no letter case
	}
	return stringResult(f, bytes.ToUpper(textOf(args[0]))), nil
}

func evalLower(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if args[0].Kind() == types.KindBytes {
		return args[0], nil
	}
	return stringResult(f, bytes.ToLower(textOf(args[0]))), nil
}

// chars splits b into characters: runes for text, bytes for binary.
func chars(d types.Datum) (b []byte, offsets []int) {
	b = textOf(d)
	if d.Kind() == types.KindBytes {
		offsets = make([]int, len(b)+1)
		for i := range offsets {
			offsets[i] = i
		}
		return b, offsets
	}
	offsets = make([]int, 0, len(b)+1)
	for i := range string(b) {
		offsets = append(offsets, i)
	}
	return b, append(offsets, len(b))
}

func evalSubstring(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	pos := intArg(ctx, args[1])
	if pos > 0 {
		// From the start: walk to the characters wanted, not over the
		// whole string (GROUP BY SUBSTRING(pad, 1, 2) over every row).
		length := int64(-1)
		if len(args) == 3 {
			if length = intArg(ctx, args[2]); length <= 0 {
				return stringResult(f, []byte{}), nil
			}
		}
		b := textOf(args[0])
		if args[0].Kind() == types.KindBytes {
			start := min(pos-1, int64(len(b)))
			end := int64(len(b))
			if length >= 0 && length < end-start {
				end = start + length
			}
			return stringResult(f, b[start:end]), nil
		}
		i := 0
		for k := int64(1); k < pos && i < len(b); k++ {
			_, n := utf8.DecodeRune(b[i:])
			i += n
		}
		j := i
		for k := int64(0); (length < 0 || k < length) && j < len(b); k++ {
			_, n := utf8.DecodeRune(b[j:])
			j += n
		}
		return stringResult(f, b[i:j]), nil
	}
	b, offs := chars(args[0])
	n := int64(len(offs) - 1)
	length := n
	if len(args) == 3 {
		length = intArg(ctx, args[2])
	}
	switch {
	case pos > 0:
		pos--
	case pos < 0:
		pos += n
		if pos < 0 {
			return stringResult(f, []byte{}), nil
		}
	default:
		return stringResult(f, []byte{}), nil
	}
	if pos >= n || length <= 0 {
		return stringResult(f, []byte{}), nil
	}
	end := n
	if length < n-pos {
		end = pos + length
	}
	return stringResult(f, b[offs[pos]:offs[end]]), nil
}

func evalTrim(leading, trailing bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		s, rem := textOf(args[0]), textOf(args[1])
		if len(rem) > 0 {
			if leading {
				for bytes.HasPrefix(s, rem) {
					s = s[len(rem):]
				}
			}
			if trailing {
				for bytes.HasSuffix(s, rem) {
					s = s[:len(s)-len(rem)]
				}
			}
		}
		return stringResult(f, s), nil
	}
}

func evalReplace(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	s, from, to := textOf(args[0]), textOf(args[1]), textOf(args[2])
	if len(from) == 0 {
		return stringResult(f, s), nil
	}
	out := bytes.ReplaceAll(s, from, to)
	if len(out) > maxStringResult {
		return tooLong(ctx, f)
	}
	return stringResult(f, out), nil
}

func evalLeftRight(left bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		b, offs := chars(args[0])
		n := int64(len(offs) - 1)
		k := intArg(ctx, args[1])
		if k <= 0 {
			return stringResult(f, []byte{}), nil
		}
		if k >= n {
			return stringResult(f, b), nil
		}
		if left {
			return stringResult(f, b[:offs[k]]), nil
		}
		return stringResult(f, b[offs[n-k]:]), nil
	}
}

func evalPad(left bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		b, offs := chars(args[0])
		n := int64(len(offs) - 1)
		want := intArg(ctx, args[1])
		if want < 0 {
			return types.Datum{}, nil
		}
		if want <= n {
			return stringResult(f, b[:offs[want]]), nil
		}
		if want > maxStringResult {
			return tooLong(ctx, f)
		}
		pad, padOffs := chars(args[2])
		padLen := int64(len(padOffs) - 1)
		if padLen == 0 {
			return types.Datum{}, nil
		}
		need := want - n
		fill := make([]byte, 0, int(need)*max(1, len(pad)/int(padLen)))
		for need > 0 {
			k := min(need, padLen)
			fill = append(fill, pad[:padOffs[k]]...)
			need -= k
		}
		if left {
			return stringResult(f, append(fill, b...)), nil
		}
		return stringResult(f, append(append([]byte{}, b...), fill...)), nil
	}
}

func evalRepeat(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	s := textOf(args[0])
	n := intArg(ctx, args[1])
	if n <= 0 || len(s) == 0 {
		return stringResult(f, []byte{}), nil
	}
	if n > maxStringResult/int64(len(s)) {
		return tooLong(ctx, f)
	}
	return stringResult(f, bytes.Repeat(s, int(n))), nil
}

func evalSpace(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	n := intArg(ctx, args[0])
	if n <= 0 {
		return stringResult(f, []byte{}), nil
	}
	if n > maxStringResult {
		return tooLong(ctx, f)
	}
	return stringResult(f, bytes.Repeat([]byte{' '}, int(n))), nil
}

func evalReverse(_ *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	b, offs := chars(args[0])
	out := make([]byte, 0, len(b))
	for i := len(offs) - 1; i > 0; i-- {
		out = append(out, b[offs[i-1]:offs[i]]...)
	}
	return stringResult(f, out), nil
}

// locate returns the 1-based character position of sub in s at or after
// the character position from (1-based), or 0.
func locate(s, sub types.Datum, from int64) int64 {
	b, offs := chars(s)
	n := int64(len(offs) - 1)
	if from < 1 || from > n+1 {
		return 0
	}
	needle := textOf(sub)
	i := bytes.Index(b[offs[from-1]:], needle)
	if i < 0 {
		return 0
	}
	byteIdx := offs[from-1] + i
	for k, o := range offs {
		if o == byteIdx {
			return int64(k) + 1
		}
	}
	return 0
}

func evalInstr(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	return types.NewInt(locate(args[0], args[1], 1)), nil
}

func evalLocate(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	from := int64(1)
	if len(args) == 3 {
		from = intArg(ctx, args[2])
	}
	return types.NewInt(locate(args[1], args[0], from)), nil
}

func evalASCII(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	b := textOf(args[0])
	if len(b) == 0 {
		return types.NewInt(0), nil
	}
	return types.NewInt(int64(b[0])), nil
}

func evalStrcmp(_ *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	return types.NewInt(int64(bytes.Compare(textOf(args[0]), textOf(args[1])))), nil
}

func evalAbs(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	d := numericOperand(ctx, args[0])
	switch d.Kind() {
	case types.KindInt64:
		v := d.Int()
		if v == math.MinInt64 {
			return types.Datum{}, types.ErrOutOfRange("BIGINT", f.String())
		}
		if v < 0 {
			v = -v
		}
		return types.NewInt(v), nil
	case types.KindUint64:
		return d, nil
	case types.KindDecimal:
		return types.NewDecimal(d.Decimal().Abs()), nil
	}
	return types.NewFloat(math.Abs(d.Float())), nil
}

func evalCeilFloor(ceil bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		d := numericOperand(ctx, args[0])
		switch d.Kind() {
		case types.KindInt64, types.KindUint64:
			return d, nil
		case types.KindDecimal:
			var r *types.Decimal
			if ceil {
				r = d.Decimal().Ceil()
			} else {
				r = d.Decimal().Floor()
			}
			if c := classOf(f.ft); c == classInt || c == classUnknown {
				if v, ok := r.Int64(); ok {
					return types.NewInt(v), nil
				}
				if c == classInt {
					return types.Datum{}, types.ErrOutOfRange("BIGINT", f.String())
				}
			}
			return types.NewDecimal(r), nil
		}
		if ceil {
			return types.NewFloat(math.Ceil(d.Float())), nil
		}
		return types.NewFloat(math.Floor(d.Float())), nil
	}
}

func evalRound(round bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		d := numericOperand(ctx, args[0])
		var places int64
		if len(args) > 1 {
			places = intArg(ctx, args[1])
		}
		places = max(min(places, 30), -30)
		switch d.Kind() {
		case types.KindInt64, types.KindUint64:
			if places >= 0 {
				return d, nil
			}
			dec, _ := d.ToDecimal()
			if round {
				dec = dec.Round(int(places))
			} else {
				dec = dec.Truncate(int(places))
			}
			if d.Kind() == types.KindUint64 {
				v, _ := dec.Uint64()
				return types.NewUint(v), nil
			}
			v, ok := dec.Int64()
			if !ok {
				return types.Datum{}, types.ErrOutOfRange("BIGINT", f.String())
			}
			return types.NewInt(v), nil
		case types.KindDecimal:
			dec := d.Decimal()
			if round {
				dec = dec.Round(int(places))
			} else {
				dec = dec.Truncate(int(places))
			}
			if s := f.ft.GetDecimal(); classOf(f.ft) == classDecimal && s >= 0 && dec.Scale() < s {
				dec = dec.Round(s)
			}
			return types.NewDecimal(dec), nil
		}
		x := d.Float()
		p := math.Pow10(int(abs64(places)))
		var scaled float64
		if places >= 0 {
			scaled = x * p
		} else {
			scaled = x / p
		}
		if math.IsInf(scaled, 0) {
			return types.NewFloat(x), nil
		}
		if round {
			scaled = math.RoundToEven(scaled)
		} else {
			scaled = math.Trunc(scaled)
		}
		if places >= 0 {
			return types.NewFloat(scaled / p), nil
		}
		return types.NewFloat(scaled * p), nil
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func floatArg(ctx *EvalContext, d types.Datum) float64 {
	f, err := d.ToFloat64()
	ctx.Warn(err)
	return f
}

func positive(x float64) bool { return x > 0 }

func errInvalidLog() error {
	return sqlerr.New(3020, "2201E", "Invalid argument for logarithm")
}

func evalFloat1(fn func(float64) float64, valid func(float64) bool) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		x := floatArg(ctx, args[0])
		if valid != nil && !valid(x) {
			if f.Name != "sqrt" {
				ctx.Warn(errInvalidLog())
			}
			return types.Datum{}, nil
		}
		v := fn(x)
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return types.Datum{}, types.ErrOutOfRange("DOUBLE", f.String())
		}
		return types.NewFloat(v), nil
	}
}

func evalFloat2(fn func(float64, float64) float64) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		v := fn(floatArg(ctx, args[0]), floatArg(ctx, args[1]))
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return types.Datum{}, types.ErrOutOfRange("DOUBLE", f.String())
		}
		return types.NewFloat(v), nil
	}
}

func evalLog(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
	if len(args) == 1 {
		return evalFloat1(math.Log, positive)(ctx, f, args)
	}
	base, x := floatArg(ctx, args[0]), floatArg(ctx, args[1])
	if base <= 0 || base == 1 || x <= 0 {
		ctx.Warn(errInvalidLog())
		return types.Datum{}, nil
	}
	return types.NewFloat(math.Log(x) / math.Log(base)), nil
}

func evalSign(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	d := numericOperand(ctx, args[0])
	switch d.Kind() {
	case types.KindInt64:
		return types.NewInt(int64(cmpInt(d.Int(), 0))), nil
	case types.KindUint64:
		return types.NewBool(d.Uint() > 0), nil
	case types.KindDecimal:
		return types.NewInt(int64(d.Decimal().Sign())), nil
	}
	switch x := d.Float(); {
	case x > 0:
		return types.NewInt(1), nil
	case x < 0:
		return types.NewInt(-1), nil
	}
	return types.NewInt(0), nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// evalExtreme is GREATEST (dir 1) and LEAST (dir -1): arguments are
// converted to the aggregated type first, so GREATEST(2, '10') compares
// as strings and GREATEST(2, 10.5) as decimals, like MySQL.
func evalExtreme(dir int) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, f *Func, args []types.Datum) (types.Datum, error) {
		best := coerce(ctx, args[0], f.ft)
		for _, a := range args[1:] {
			v := coerce(ctx, a, f.ft)
			c, err := types.CompareCollated(v, best, types.CollationOf(f.ft))
			if err != nil {
				return types.Datum{}, err
			}
			if c*dir > 0 {
				best = v
			}
		}
		return best, nil
	}
}

func evalRand(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	if len(args) == 1 && !args[0].IsNull() {
		// RAND(N) is repeatable for a given seed (MySQL's sequence is not
		// reproduced; only the repeatability is).
		seed := uint64(intArg(ctx, args[0]))
		return types.NewFloat(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)).Float64()), nil
	}
	return types.NewFloat(rand.Float64()), nil
}

func stmtNow(ctx *EvalContext) time.Time {
	if ctx != nil && !ctx.Now.IsZero() {
		return ctx.Now
	}
	return time.Now()
}

func evalNow(ctx *EvalContext, f *Func, _ []types.Datum) (types.Datum, error) {
	fsp := max(f.ft.GetDecimal(), 0)
	t, err := types.TimeFromGo(stmtNow(ctx), mysql.TypeDatetime, fsp)
	if err != nil {
		return types.Datum{}, errInternal("NOW(): %v", err)
	}
	return types.NewTime(t), nil
}

func evalCurdate(ctx *EvalContext, _ *Func, _ []types.Datum) (types.Datum, error) {
	t, err := types.TimeFromGo(stmtNow(ctx), mysql.TypeDate, 0)
	if err != nil {
		return types.Datum{}, errInternal("CURDATE(): %v", err)
	}
	return types.NewTime(t), nil
}

func timeArg(ctx *EvalContext, d types.Datum) (types.Time, bool) {
	if d.Kind() == types.KindTime {
		return d.Time(), true
	}
	if d.Kind() == types.KindDuration {
		// A TIME as a DATETIME is that time on the current date, as in MySQL.
		m, fsp := d.Duration()
		now := stmtNow(ctx)
		g := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Microsecond)
		t, err := types.TimeFromGo(g, mysql.TypeDatetime, fsp)
		return t, err == nil
	}
	t, ok := toTime(d, mysql.TypeDatetime, types.MaxFsp)
	if !ok {
		s, _ := d.ToString()
		ctx.Warn(sqlerr.New(sqlerr.ErTruncatedWrongValue, "22007", "Incorrect datetime value: '%s'", s))
	}
	return t, ok
}

func evalDate(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
	t, ok := timeArg(ctx, args[0])
	if !ok {
		return types.Datum{}, nil
	}
	d, err := t.WithType(mysql.TypeDate, 0)
	if err != nil {
		return types.Datum{}, nil
	}
	return types.NewTime(d), nil
}

func evalTimePart(part func(types.Time) int) func(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return func(ctx *EvalContext, _ *Func, args []types.Datum) (types.Datum, error) {
		t, ok := timeArg(ctx, args[0])
		if !ok {
			return types.Datum{}, nil
		}
		return types.NewInt(int64(part(t))), nil
	}
}

func evalDatabase(ctx *EvalContext, _ *Func, _ []types.Datum) (types.Datum, error) {
	if ctx == nil || ctx.Database == "" {
		return types.Datum{}, nil
	}
	return types.NewString(ctx.Database), nil
}

func evalVersion(*EvalContext, *Func, []types.Datum) (types.Datum, error) {
	return types.NewString(ServerVersion), nil
}
