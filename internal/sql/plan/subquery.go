package plan

import (
	"encoding/binary"
	"fmt"
	"math"

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

	// outerCols are the columns of the outer row its plan reads (through
	// OuterRefs, its own and those of subqueries nested in it).
	outerCols []int
	// reachesOut: its plan reads a row beyond its own outer row (a column
	// of a query block further out), so its result is not a function of
	// outerCols alone.
	reachesOut bool
	// volatile: its text calls a function whose value may change from
	// call to call (RAND(), UUID(), SLEEP() ...) or reads a user variable.
	volatile bool
	// memoOK: a correlated subquery of a read-only query whose result is
	// a function of outerCols: its rows are remembered per distinct
	// value of outerCols (memo), so it runs once per distinct outer value
	// instead of once per outer row.
	memoOK   bool
	memo     map[string][][]types.Datum
	memoSize int // datums held in memo
	memoKey  []byte
	memoRuns int // runs since the last hit
	memoOff  bool

	set *inSet // uncorrelated IN: its rows hashed (nil: not built yet)

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

// Reset drops the cached result of an uncorrelated subquery and the
// remembered results of a correlated one.
func (s *Subquery) Reset() {
	s.valid, s.cached, s.set = false, nil, nil
	s.memo, s.memoSize, s.memoRuns, s.memoOff = nil, 0, 0, false
}

// Memoized reports whether a correlated subquery's results are remembered
// per distinct value of the outer columns it reads.
func (s *Subquery) Memoized() bool { return s.memoOK }

// memoLimit bounds the datums a correlated subquery's memo holds: past it
// new results are not remembered (the subquery runs per outer row again).
const memoLimit = 1 << 16

// memoGiveUp: after this many runs in a row without a hit (every outer
// value distinct so far, as for a key), the memo is dropped for the rest
// of the execution.
const memoGiveUp = 1024

func (s *Subquery) rows() ([][]types.Datum, error) {
	if s.valid && !s.Correlated {
		return s.cached, nil
	}
	if s.Run == nil {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "subquery is not bound to an execution")
	}
	var key []byte
	memo := s.memoOK && !s.memoOff
	if memo {
		key = s.memoKey[:0]
		for _, i := range s.outerCols {
			if i >= len(s.outer) {
				return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "outer reference out of range")
			}
			key = appendExactKey(key, s.outer[i])
		}
		s.memoKey = key
		if rows, ok := s.memo[string(key)]; ok {
			s.memoRuns = 0
			return rows, nil
		}
		if s.memoRuns++; s.memoRuns >= memoGiveUp {
			s.memoOff, s.memo, memo = true, nil, false
		}
	}
	rows, err := s.Run()
	if err != nil {
		return nil, err
	}
	s.cached, s.valid = rows, true
	if memo {
		n := 1
		for _, r := range rows {
			n += len(r)
		}
		if s.memoSize+n <= memoLimit {
			if s.memo == nil {
				s.memo = map[string][][]types.Datum{}
			}
			s.memo[string(key)] = rows
			s.memoSize += n
		}
	}
	return rows, nil
}

// appendExactKey appends a self-delimiting key of d that is equal for two
// datums only when they are the same value of the same kind, shown the
// same way (1.0 and 1.00, 'a' and 'A', 0 and -0e0 get different keys):
// a memoized subquery must see exactly the value it would have read.
func appendExactKey(buf []byte, d types.Datum) []byte {
	buf = append(buf, byte(d.Kind()))
	switch d.Kind() {
	case types.KindNull:
		return buf
	case types.KindString, types.KindBytes:
		b := d.Bytes()
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		return append(buf, b...)
	case types.KindDecimal:
		t := d.Decimal().String()
		buf = binary.AppendUvarint(buf, uint64(len(t)))
		return append(buf, t...)
	case types.KindFloat64:
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(d.Float()))
	case types.KindTime:
		return binary.BigEndian.AppendUint64(buf, uint64(d.Time()))
	}
	// KindInt64, KindUint64, KindDuration: the integer word.
	return binary.BigEndian.AppendUint64(buf, uint64(d.Int()))
}

// inSet is an uncorrelated IN subquery's rows in a hash set, so that
// x IN (SELECT ...) costs one lookup per outer row rather than a pass over
// the rows. It is used only when every non-NULL value is of one class
// whose hash keys are equal exactly when CompareCollated says equal (see
// types.AppendHashKey) and x is of that class too; otherwise Eval compares
// row by row.
type inSet struct {
	usable  bool
	class   int
	hasNull bool
	keys    map[string]struct{}
}

// inSetMin is the row count from which an IN subquery's rows are hashed.
const inSetMin = 8

// hashClass groups the kinds whose values compare equal only within the
// group and whose hash keys agree with that comparison (0: none).
func hashClass(d types.Datum) int {
	switch d.Kind() {
	case types.KindInt64, types.KindUint64:
		return 1
	case types.KindDecimal:
		return 2
	case types.KindString:
		return 3
	case types.KindBytes:
		return 4
	case types.KindTime:
		return 5
	case types.KindDuration:
		return 6
	}
	return 0
}

func newInSet(rows [][]types.Datum, coll *collate.Collation) *inSet {
	set := &inSet{usable: true, keys: make(map[string]struct{}, len(rows))}
	var buf []byte
	for _, r := range rows {
		d := r[0]
		if d.IsNull() {
			set.hasNull = true
			continue
		}
		c := hashClass(d)
		if c == 0 || (set.class != 0 && c != set.class) {
			return &inSet{}
		}
		set.class = c
		buf = d.AppendHashKeyCollated(buf[:0], coll)
		set.keys[string(buf)] = struct{}{}
	}
	return set
}

// inMatch is anyMatch(left, rows, EQ) through the hash set; ok=false when
// the set cannot answer for left.
func (s *Subquery) inMatch(left types.Datum, rows [][]types.Datum) (types.Datum, bool) {
	if s.set == nil {
		s.set = newInSet(rows, s.collation())
	}
	set := s.set
	if !set.usable {
		return types.Null, false
	}
	if left.IsNull() {
		return types.Null, true
	}
	if set.class != 0 && hashClass(left) != set.class {
		return types.Null, false
	}
	if set.class != 0 {
		if _, ok := set.keys[string(left.AppendHashKeyCollated(nil, s.collation()))]; ok {
			return boolDatum(true), true
		}
	}
	if set.hasNull {
		return types.Null, true
	}
	return boolDatum(false), true
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
		var v types.Datum
		var err error
		ok := false
		if !s.Correlated && len(rows) >= inSetMin {
			v, ok = s.inMatch(left, rows)
		}
		if !ok {
			v, err = anyMatch(left, rows, opcode.EQ, s.collation())
		}
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
