// Package expr compiles parser expressions (ast.ExprNode) into evaluable
// trees (Expr) and evaluates them over rows of types.Datum with MySQL 8
// semantics: integer arithmetic with overflow errors, '/' yielding DECIMAL
// with scale(dividend)+4, division by zero yielding NULL plus a warning,
// NULL propagation, three-valued logic, MySQL's comparison conversions,
// CASE/IF/COALESCE result types, and the common string, math and time
// functions. It also provides the aggregate functions (AggFunc).
//
// Contract with the planner: Compile calls Binder.Bind first for every node;
// the binder resolves column names (ast.ColumnNameExpr) to NewColumn(index
// into the row the executor will pass to Eval), and may take over any other
// node (subqueries, aggregates already computed, window functions). A column
// the binder does not resolve is the binder's error (1054). Compiled trees are
// immutable and safe for concurrent Eval from many goroutines; all per-call
// state lives in the EvalContext. Eval of a column, a constant, a parameter,
// a comparison, BETWEEN, IN over constants and integer arithmetic does not
// allocate.
//
// Parameters: the parser records only each ? marker's byte offset, so
// Prepare must call NumberParams on the statement before compiling it;
// EvalContext.Params[i] is then the value of the i-th marker in text order.
// Subtrees without columns, parameters or volatile functions are folded to
// constants at compile time (IsConstant reports them).
//
// Errors returned by Eval are *sqlerr.Error (e.g. 1690 BIGINT out of range);
// lossy conversions and division by zero are warnings appended to
// EvalContext.Warnings, as MySQL reports them. Text compares under the
// collation chosen at compile time from the operands' types (collation.go);
// a nil collation, the binary path, is byte-wise, matching types.Compare.
package expr

import (
	"context"
	"fmt"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Expr is a compiled expression.
type Expr interface {
	// Eval computes the value for one row.
	Eval(ctx *EvalContext, row []types.Datum) (types.Datum, error)
	// Type is the static result type, as reported in result-set metadata.
	// For a Column it is the type the binder gave (usually the catalog's):
	// treat it as read-only.
	// Values Eval returns have the kind types.KindForFieldType(Type()) or are
	// NULL, except where an operand's type is only known at run time (a ?
	// parameter), where Type() is a best guess.
	Type() *ptypes.FieldType
	// String renders the expression in SQL, used in messages and EXPLAIN.
	String() string
}

// VarReader resolves user variables (@x, system=false) and system variables
// (@@x, @@session.x, @@global.x; scope is "", "session" or "global").
type VarReader interface {
	GetVar(name string, system bool, scope string) (types.Datum, bool)
}

// EvalContext is the per-statement state expressions read.
type EvalContext struct {
	Params   []types.Datum // values of ? markers, by ParamMarkerExpr.Offset
	Vars     VarReader     // may be nil: variables then read as NULL
	Warnings *[]error      // may be nil: warnings are then dropped
	// Now is the statement start, for NOW() and friends; its Location is
	// the session time zone (UNIX_TIMESTAMP, FROM_UNIXTIME).
	Now          time.Time
	Database     string // current database, for DATABASE()
	User         string // 'user@host', for USER()
	CurrentUser  string // the account's 'user@host pattern', for CURRENT_USER()
	ConnectionID uint64 // for CONNECTION_ID()
	LastInsertID uint64 // for LAST_INSERT_ID()
	// Ctx is the statement's context (SLEEP returns early when it ends);
	// RowCount and FoundRows are what ROW_COUNT() and FOUND_ROWS() return.
	Ctx       context.Context
	RowCount  int64
	FoundRows uint64

	// args is a stack of builtin arguments: a call (Func.Eval) puts its
	// arguments above the top and gives the slots back when it returns,
	// so evaluating a call allocates nothing (an array on Go's stack
	// escapes through the builtin's function value: 11-13% of a group-by
	// fragment's CPU was that allocation). An EvalContext serves one
	// goroutine at a time; another goroutine gets a Fork.
	args []types.Datum
	// decs hands out the decimal results of arithmetic on int64-sized
	// values (Arith.smallDecimal); a pointer, so copies of the context
	// share it and never hand out one decimal twice, and Fork's gets
	// its own.
	decs *types.DecimalSlab
}

// smallDecimal returns a decimal of int64 unscaled value, from the
// context's slab.
func (ctx *EvalContext) smallDecimal(unscaled int64, scale int32) *types.Decimal {
	if ctx == nil {
		return types.NewDecimalSmall(unscaled, int(scale))
	}
	if ctx.decs == nil {
		ctx.decs = &types.DecimalSlab{}
	}
	return ctx.decs.Small(unscaled, int(scale))
}

// Fork returns a copy of ctx for another goroutine, with its own argument
// stack.
func (ctx *EvalContext) Fork() *EvalContext {
	c := *ctx
	c.args, c.decs = nil, nil
	return &c
}

// Warn records a warning (a *sqlerr.Error) if the context collects them.
func (ctx *EvalContext) Warn(err error) {
	if ctx != nil && ctx.Warnings != nil && err != nil {
		*ctx.Warnings = append(*ctx.Warnings, err)
	}
}

// Binder resolves names while compiling: a non-nil Expr replaces the node.
type Binder interface {
	Bind(node ast.ExprNode) (Expr, error)
}

// Column reads one position of the row.
type Column struct {
	Idx  int
	ft   *ptypes.FieldType
	name string
}

// NewColumn returns an expression reading row[idx], of type ft, shown as
// name. A nil ft means the type is only known at run time (like a ?).
func NewColumn(idx int, ft *ptypes.FieldType, name string) Expr {
	if ft == nil {
		ft = unknownType()
	}
	return &Column{Idx: idx, ft: ft, name: name}
}

// Eval implements Expr.
func (c *Column) Eval(_ *EvalContext, row []types.Datum) (types.Datum, error) {
	if c.Idx >= len(row) {
		return types.Datum{}, sqlerr.New(sqlerr.ErUnknown, "HY000", "column %s (#%d) is outside a row of %d values", c.name, c.Idx, len(row))
	}
	return row[c.Idx], nil
}

// Type implements Expr.
func (c *Column) Type() *ptypes.FieldType { return c.ft }

func (c *Column) String() string { return c.name }

// Constant is a literal or a folded constant subexpression.
type Constant struct {
	Value      types.Datum
	ft         *ptypes.FieldType
	bitLiteral bool // a hex or bit literal: a number in numeric context
}

// numericContext returns e as an unsigned integer constant when it is a
// hex/bit literal used where MySQL reads it as a number (0x41 + 0 is 65).
func numericContext(e Expr) Expr {
	k, ok := e.(*Constant)
	if !ok || !k.bitLiteral {
		return e
	}
	b := k.Value.Bytes()
	if len(b) > 8 {
		return e
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return NewConstant(types.NewUint(v), nil)
}

// NewConstant returns a constant; a nil ft means types.DefaultFieldTypeFor(d).
func NewConstant(d types.Datum, ft *ptypes.FieldType) Expr {
	if ft == nil {
		ft = types.DefaultFieldTypeFor(d)
	}
	return &Constant{Value: d, ft: ft}
}

// Eval implements Expr.
func (c *Constant) Eval(*EvalContext, []types.Datum) (types.Datum, error) { return c.Value, nil }

// Type implements Expr.
func (c *Constant) Type() *ptypes.FieldType { return c.ft }

func (c *Constant) String() string {
	switch c.Value.Kind() {
	case types.KindNull:
		return "NULL"
	case types.KindString, types.KindBytes, types.KindTime, types.KindDuration:
		return quote(c.Value.String())
	}
	return c.Value.String()
}

func quote(s string) string {
	out := make([]byte, 0, len(s)+2)
	out = append(out, '\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' || s[i] == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// Param reads the value of a ? marker from EvalContext.Params.
type Param struct {
	Offset int
}

// NewParam returns the expression for the ? marker at offset.
func NewParam(offset int) Expr { return &Param{Offset: offset} }

// Eval implements Expr.
func (p *Param) Eval(ctx *EvalContext, _ []types.Datum) (types.Datum, error) {
	if ctx == nil || p.Offset >= len(ctx.Params) {
		return types.Datum{}, sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to EXECUTE")
	}
	return ctx.Params[p.Offset], nil
}

// Type implements Expr: unknown until execution.
func (p *Param) Type() *ptypes.FieldType { return unknownType() }

func (p *Param) String() string { return "?" }

// unknownType returns a fresh type marking a value only known at run time
// (? parameters, variables). Fresh, because callers may adjust the types
// they get (e.g. flags in result metadata) and must not share them.
func unknownType() *ptypes.FieldType {
	return ptypes.NewFieldType(mysql.TypeUnspecified)
}

// IsConstant reports whether e is a constant (a literal or folded subtree):
// its value does not depend on the row, the parameters or the session.
func IsConstant(e Expr) bool {
	_, ok := e.(*Constant)
	return ok
}

// ColumnIndex reports the row position e reads when e is a bare column.
func ColumnIndex(e Expr) (int, bool) {
	if c, ok := e.(*Column); ok {
		return c.Idx, true
	}
	return 0, false
}

// IsParam reports whether e is a ? marker and returns its offset; planners
// treat parameters as constants known at execution.
func IsParam(e Expr) (int, bool) {
	if p, ok := e.(*Param); ok {
		return p.Offset, true
	}
	return 0, false
}

func errInternal(format string, args ...any) error {
	return sqlerr.New(sqlerr.ErUnknown, "HY000", "%s", fmt.Sprintf(format, args...))
}
