package plan

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// SubqueryKind says how a subquery's rows become a value.
type SubqueryKind int

// Subquery kinds.
const (
	ScalarSubquery SubqueryKind = iota // (SELECT x ...): one value, NULL if no row
	ExistsSubquery                     // EXISTS (SELECT ...)
	InSubquery                         // x IN (SELECT ...)
	AnySubquery                        // x op ANY (SELECT ...)
	AllSubquery                        // x op ALL (SELECT ...)
)

// Subquery is an expression whose value comes from running a nested plan.
// Outer column references inside the nested plan read the row that Eval was
// called with (see OuterRef), so correlated subqueries run once per outer
// row and uncorrelated ones once per execution (cached).
type Subquery struct {
	Kind       SubqueryKind
	Not        bool
	Plan       Plan
	Left       expr.Expr // IN / ANY / ALL operand
	Op         opcode.Op // ANY / ALL comparison
	Correlated bool

	// Run executes Plan in the current statement; exec installs it before
	// every execution and calls Reset.
	Run func() ([][]types.Datum, error)

	outer  []types.Datum
	cached [][]types.Datum
	valid  bool
	ft     *ptypes.FieldType
	coll   *collate.Collation // Left against the subquery's column
	collOK bool
}

// collation is the collation comparing Left with the subquery's values.
func (s *Subquery) collation() *collate.Collation {
	if !s.collOK {
		if cols := s.Plan.Columns(); s.Left != nil && len(cols) > 0 {
			s.coll = expr.PairCollation(s.Left, expr.NewColumn(0, cols[0].Type, cols[0].Name))
		}
		s.collOK = true
	}
	return s.coll
}

// Reset drops the cached result of an uncorrelated subquery.
func (s *Subquery) Reset() { s.valid, s.cached = false, nil }

func (s *Subquery) rows() ([][]types.Datum, error) {
	if s.valid && !s.Correlated {
		return s.cached, nil
	}
	if s.Run == nil {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "subquery is not bound to an execution")
	}
	rows, err := s.Run()
	if err != nil {
		return nil, err
	}
	s.cached, s.valid = rows, true
	return rows, nil
}

// Type implements expr.Expr.
func (s *Subquery) Type() *ptypes.FieldType { return s.ft }

// String implements expr.Expr.
func (s *Subquery) String() string {
	switch s.Kind {
	case ExistsSubquery:
		return "exists(subquery)"
	case InSubquery:
		return s.Left.String() + " in (subquery)"
	case AnySubquery, AllSubquery:
		return fmt.Sprintf("%s %s any/all(subquery)", s.Left.String(), s.Op)
	}
	return "(subquery)"
}

// Eval implements expr.Expr.
func (s *Subquery) Eval(ctx *expr.EvalContext, row []types.Datum) (types.Datum, error) {
	s.outer = row
	var left types.Datum
	if s.Left != nil {
		var err error
		if left, err = s.Left.Eval(ctx, row); err != nil {
			return types.Null, err
		}
		s.outer = row // Left may itself contain subqueries over the same row
	}
	rows, err := s.rows()
	if err != nil {
		return types.Null, err
	}
	switch s.Kind {
	case ScalarSubquery:
		if len(rows) == 0 {
			return types.Null, nil
		}
		if len(rows) > 1 {
			return types.Null, sqlerr.New(sqlerr.ErSubqueryNo1Row, "21000", "Subquery returns more than 1 row")
		}
		return rows[0][0], nil
	case ExistsSubquery:
		return boolDatum((len(rows) > 0) != s.Not), nil
	case InSubquery:
		v, err := anyMatch(left, rows, opcode.EQ, s.collation())
		if err != nil || v.IsNull() || !s.Not {
			return v, err
		}
		return boolDatum(v.Int() == 0), nil
	case AnySubquery:
		return anyMatch(left, rows, s.Op, s.collation())
	case AllSubquery:
		return allMatch(left, rows, s.Op, s.collation())
	}
	return types.Null, nil
}

func boolDatum(b bool) types.Datum {
	if b {
		return types.NewInt(1)
	}
	return types.NewInt(0)
}

func compareOp(a, b types.Datum, op opcode.Op, coll *collate.Collation) (bool, error) {
	c, err := types.CompareCollated(a, b, coll)
	if err != nil {
		return false, err
	}
	switch op {
	case opcode.EQ:
		return c == 0, nil
	case opcode.NE:
		return c != 0, nil
	case opcode.LT:
		return c < 0, nil
	case opcode.LE:
		return c <= 0, nil
	case opcode.GT:
		return c > 0, nil
	case opcode.GE:
		return c >= 0, nil
	}
	return false, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support '%s' with a subquery", op)
}

// anyMatch is three-valued: true if some row satisfies left op v, NULL if
// none does but a NULL was involved, false otherwise.
func anyMatch(left types.Datum, rows [][]types.Datum, op opcode.Op, coll *collate.Collation) (types.Datum, error) {
	if len(rows) == 0 {
		return boolDatum(false), nil
	}
	if left.IsNull() {
		return types.Null, nil
	}
	sawNull := false
	for _, r := range rows {
		if r[0].IsNull() {
			sawNull = true
			continue
		}
		ok, err := compareOp(left, r[0], op, coll)
		if err != nil {
			return types.Null, err
		}
		if ok {
			return boolDatum(true), nil
		}
	}
	if sawNull {
		return types.Null, nil
	}
	return boolDatum(false), nil
}

func allMatch(left types.Datum, rows [][]types.Datum, op opcode.Op, coll *collate.Collation) (types.Datum, error) {
	if len(rows) == 0 {
		return boolDatum(true), nil
	}
	if left.IsNull() {
		return types.Null, nil
	}
	sawNull := false
	for _, r := range rows {
		if r[0].IsNull() {
			sawNull = true
			continue
		}
		ok, err := compareOp(left, r[0], op, coll)
		if err != nil {
			return types.Null, err
		}
		if !ok {
			return boolDatum(false), nil
		}
	}
	if sawNull {
		return types.Null, nil
	}
	return boolDatum(true), nil
}

// OuterRef reads column Index of the outer row a correlated Subquery is
// being evaluated for.
type OuterRef struct {
	Sub   *Subquery
	Index int
	Name  string
	ft    *ptypes.FieldType
}

// Eval implements expr.Expr.
func (o *OuterRef) Eval(_ *expr.EvalContext, _ []types.Datum) (types.Datum, error) {
	if o.Index >= len(o.Sub.outer) {
		return types.Null, sqlerr.New(sqlerr.ErUnknown, "HY000", "outer reference %s out of range", o.Name)
	}
	return o.Sub.outer[o.Index], nil
}

// Type implements expr.Expr.
func (o *OuterRef) Type() *ptypes.FieldType { return o.ft }

// String implements expr.Expr.
func (o *OuterRef) String() string { return "outer(" + o.Name + ")" }

func boolType() *ptypes.FieldType {
	ft := ptypes.NewFieldType(mysql.TypeLonglong)
	ft.SetFlen(1)
	return ft
}
