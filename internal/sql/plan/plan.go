// Package plan turns parsed statements into executable plan trees.
//
// The planner resolves names against a catalog.Schema snapshot, compiles
// expressions with package expr (it is the expr.Binder: it owns column
// references, aggregates, subqueries, VALUES() and DEFAULT), and chooses an
// access path for every table: PointGet / BatchPointGet on the integer
// primary key, TableRangeScan on primary-key ranges, IndexLookup (an index
// range, then rows by handle) on secondary indexes, or TableFullScan. It
// orders inner joins greedily (joinorder.go: the table its own conditions
// select best first, then the tables reached through an index on a join
// equality), turns equalities between tables into join keys, and makes a
// join an index join (Join.Lookup) when the joined table would otherwise
// be read whole and a key reaches it through its primary key or an index.
// With table statistics it decorrelates a scalar aggregate subquery into a
// grouped join (decorrelate.go) and a [NOT] EXISTS into a hash semi or
// anti join (semijoin.go) when the estimates say so. Last, it hands the
// scans it can to the coprocessor (cop.go): a full table scan with its
// filter and its aggregation, top-N or limit becomes a CopRead.
//
// Contract with package exec: a plan is immutable after Build except for the
// per-execution state of its Subquery expressions, which exec installs
// (Subquery.Run) before each execution. Plans may be cached and executed many
// times (prepared statements) as long as the schema version is unchanged;
// parameter values are read from expr.EvalContext.Params at execution time,
// never baked into the plan. A WHERE clause is always kept as a filter above
// the access path, so an access path only has to return a superset of the
// matching rows; exec skips only the filters marked Filter.ByRange, and only
// when it could express their range exactly. Plans are not safe for
// concurrent execution: a session executes its cached plans one at a time.
package plan

import (
	"fmt"
	"strings"

	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
)

// Column describes one output column of a plan.
type Column struct {
	Name, OrgName, Table, OrgTable, DB string
	Type                               *ptypes.FieldType
}

// Plan is a node of an executable plan tree.
type Plan interface {
	// Columns describes the rows the node produces.
	Columns() []*Column
	// Children returns the inputs.
	Children() []Plan
	// Explain describes the node itself in one line.
	Explain() string
}

type base struct{ cols []*Column }

func (b *base) Columns() []*Column { return b.cols }

// AccessKind is how a table's rows are located.
type AccessKind int

// Access paths.
const (
	TableFullScan AccessKind = iota
	PointGet
	BatchPointGet
	TableRangeScan
	IndexLookup // index range, then rows fetched by handle
)

func (k AccessKind) String() string {
	return [...]string{"TableFullScan", "PointGet", "BatchPointGet", "TableRangeScan", "IndexLookup"}[k]
}

// Bound is one side of a range; Value nil means unbounded.
type Bound struct {
	Value     expr.Expr
	Inclusive bool
}

// Range is a range over the handle or over an index: Eq fixes a prefix of
// the index columns (or the handle), Low/High bound the next column.
type Range struct {
	Eq        []expr.Expr
	Low, High Bound
}

// Scan reads rows of one table; it outputs all table columns in order.
type Scan struct {
	base
	DB     string
	Table  *catalog.TableInfo
	Alias  string
	Access AccessKind
	// Handles lists the primary-key values for PointGet / BatchPointGet.
	Handles []expr.Expr
	// Index is the index used by IndexLookup / IndexRangeScan.
	Index *catalog.IndexInfo
	// Ranges for TableRangeScan / IndexLookup (one range each, or one per
	// IN value for an index).
	Ranges []Range
	// LimitHint, when > 0, is how many rows a LIMIT right above wants: the
	// scan's first batch reads that many.
	LimitHint int
	// Points: every range of an IndexLookup fixes all columns of a unique
	// index, so each is one key, read by a batched point get rather than
	// a scan (when its values convert exactly to the columns' types).
	Points bool
	// Desc walks the range backwards (ORDER BY pk DESC).
	Desc bool
	// Lock takes pessimistic locks on the rows read (FOR UPDATE).
	Lock bool
	// LockOpts are the locking read's NOWAIT, SKIP LOCKED or WAIT n.
	LockOpts kv.LockOptions
	// WithHandle appends the row handle as an extra trailing datum (for
	// UPDATE / DELETE); it is not part of Columns.
	WithHandle bool
	// Needed, when not nil, marks the table columns the plan reads (by
	// column offset); the others may be left NULL in the rows the scan
	// returns (prune.go).
	Needed []bool
	// EstRows is the estimated number of rows the scan reads, when its
	// table has statistics (0: none; cost.go).
	EstRows float64
}

func (*Scan) Children() []Plan { return nil }

func (s *Scan) Explain() string {
	name := s.Table.Name
	if s.Alias != "" && !strings.EqualFold(s.Alias, s.Table.Name) {
		name += " AS " + s.Alias
	}
	out := fmt.Sprintf("%s table=%s", s.Access, name)
	if s.Index != nil {
		out += " index=" + s.Index.Name
	}
	switch s.Access {
	case PointGet, BatchPointGet:
		out += " handle=" + exprList(s.Handles)
	case TableRangeScan, IndexLookup:
		parts := make([]string, len(s.Ranges))
		for i, r := range s.Ranges {
			parts[i] = r.String()
		}
		out += " range=" + strings.Join(parts, ",")
		if s.Points {
			out += " points"
		}
	}
	if s.Desc {
		out += " desc"
	}
	if s.Lock {
		out += " lock"
		switch {
		case s.LockOpts.NoWait:
			out += " nowait"
		case s.LockOpts.SkipLocked:
			out += " skip-locked"
		case s.LockOpts.Wait > 0:
			out += fmt.Sprintf(" wait=%v", s.LockOpts.Wait)
		}
	}
	if s.Needed != nil {
		var cols []string
		for i, c := range s.Table.Columns {
			if s.Needed[i] {
				cols = append(cols, c.Name)
			}
		}
		out += " columns=" + strings.Join(cols, ",")
	}
	if s.EstRows > 0 {
		out += " " + estRows(s.EstRows)
	}
	return out
}

func (r Range) String() string {
	var sb strings.Builder
	if len(r.Eq) > 0 {
		sb.WriteString("eq(" + exprList(r.Eq) + ")")
	}
	if r.Low.Value == nil && r.High.Value == nil {
		if len(r.Eq) == 0 {
			return "[-inf,+inf]"
		}
		return sb.String()
	}
	if r.Low.Inclusive {
		sb.WriteByte('[')
	} else {
		sb.WriteByte('(')
	}
	if r.Low.Value != nil {
		sb.WriteString(r.Low.Value.String())
	} else {
		sb.WriteString("-inf")
	}
	sb.WriteByte(',')
	if r.High.Value != nil {
		sb.WriteString(r.High.Value.String())
	} else {
		sb.WriteString("+inf")
	}
	if r.High.Inclusive {
		sb.WriteByte(']')
	} else {
		sb.WriteByte(')')
	}
	return sb.String()
}

// Dual produces one empty row (SELECT without FROM).
type Dual struct{ base }

func (*Dual) Children() []Plan { return nil }
func (*Dual) Explain() string  { return "Dual" }

// Filter keeps rows for which Cond is true.
type Filter struct {
	base
	Child Plan
	Cond  expr.Expr
	// ByRange marks a conjunct that the primary-key range of the Scan
	// under this chain of filters was built from: when, at execution, the
	// scan could express the range's bounds exactly (integers that fit the
	// handle), every row it returns satisfies Cond and exec skips it.
	// EXPLAIN shows such a filter with "[by range]": whether it is skipped
	// is only known at run time.
	ByRange bool
	// EstRows is the estimated number of rows that pass, when the filter
	// is one of a table's own conditions and the table has statistics (0:
	// none; cost.go).
	EstRows float64
}

func (f *Filter) Children() []Plan { return []Plan{f.Child} }
func (f *Filter) Explain() string {
	out := "Filter " + f.Cond.String()
	if f.ByRange {
		out += " [by range]"
	}
	if f.EstRows > 0 {
		out += " " + estRows(f.EstRows)
	}
	return out
}

// Projection computes Exprs over each input row.
type Projection struct {
	base
	Child Plan
	Exprs []expr.Expr
}

func (p *Projection) Children() []Plan { return []Plan{p.Child} }
func (p *Projection) Explain() string  { return "Projection " + exprList(p.Exprs) }

// Aggregate groups its input by GroupBy and outputs, per group, the
// aggregate results followed by the first input row of the group (so that
// non-aggregated columns resolve to a value of the group, as in MySQL without
// ONLY_FULL_GROUP_BY). Without GroupBy it outputs exactly one row.
type Aggregate struct {
	base
	Child   Plan
	GroupBy []expr.Expr
	Aggs    []*expr.AggFunc
	aggText []string
}

func (a *Aggregate) Children() []Plan { return []Plan{a.Child} }
func (a *Aggregate) Explain() string {
	return fmt.Sprintf("HashAgg group=[%s] aggs=[%s]", exprList(a.GroupBy), strings.Join(a.aggText, ", "))
}

// SortKey is one ORDER BY item.
type SortKey struct {
	Expr expr.Expr
	Desc bool
}

// Sort orders rows; with Limit set it keeps only the first Offset+Count
// rows (top-N).
type Sort struct {
	base
	Child Plan
	Keys  []SortKey
}

func (s *Sort) Children() []Plan { return []Plan{s.Child} }
func (s *Sort) Explain() string {
	parts := make([]string, len(s.Keys))
	for i, k := range s.Keys {
		parts[i] = k.Expr.String()
		if k.Desc {
			parts[i] += " desc"
		}
	}
	return "Sort " + strings.Join(parts, ", ")
}

// Limit skips Offset rows and returns at most Count (expressions so that
// prepared statements can bind them).
type Limit struct {
	base
	Child  Plan
	Count  expr.Expr
	Offset expr.Expr
}

func (l *Limit) Children() []Plan { return []Plan{l.Child} }
func (l *Limit) Explain() string {
	s := "Limit " + l.Count.String()
	if l.Offset != nil {
		s += " offset " + l.Offset.String()
	}
	return s
}

// Distinct removes duplicate rows, comparing the first N columns.
type Distinct struct {
	base
	Child Plan
	N     int
}

func (d *Distinct) Children() []Plan { return []Plan{d.Child} }
func (d *Distinct) Explain() string  { return "Distinct" }

// JoinType is INNER, LEFT OUTER, semi or anti.
type JoinType int

// Join types.
const (
	InnerJoin JoinType = iota
	LeftJoin
	// SemiJoin outputs each left row once when some right row matches
	// it (keys equal and Cond true): EXISTS (semijoin.go).
	SemiJoin
	// AntiJoin outputs each left row that no right row matches: NOT
	// EXISTS. A left row with a NULL key matches nothing.
	AntiJoin
)

// LeftOnly reports whether the join outputs left rows alone (semi and
// anti joins), never a right row's columns.
func (t JoinType) LeftOnly() bool { return t == SemiJoin || t == AntiJoin }

// Join combines rows of Left and Right; the output row is the left row
// followed by the right row (a semi or anti join's is the left row alone).
// With equality keys it is a hash join (build on Right), otherwise a nested
// loop. Cond is evaluated on the combined row.
type Join struct {
	base
	Left, Right        Plan
	Type               JoinType
	LeftKeys, RightKey []expr.Expr
	Cond               expr.Expr
	// Lookup >= 0 makes an index join: Right is a full scan (under
	// filters) of a table that, instead of being read whole, is read for
	// each batch of left rows, only the rows matching their keys. With
	// LookupIndex nil the table's clustered key is RightKey[Lookup] and
	// the rows are fetched by handle.
	Lookup int
	// LookupIndex, when set, is the index of the right table the rows are
	// read through: its first len(LookupKeys) columns equal LeftKeys[
	// LookupKeys[0]], LeftKeys[LookupKeys[1]], ... (an index range per
	// distinct key in the batch; Lookup is LookupKeys[0]). Inner joins only.
	// Right may group the scan's rows (an Aggregate and Projections above
	// the filtered scan, LookupSource) when each lookup key is a GROUP BY
	// column (groupLookup).
	LookupIndex *catalog.IndexInfo
	LookupKeys  []int
	// EstRows is the estimated number of rows the join produces (0:
	// no estimate, a table without statistics; cost.go).
	EstRows float64
}

func (j *Join) Children() []Plan { return []Plan{j.Left, j.Right} }
func (j *Join) Explain() string {
	kind := "NestedLoopJoin"
	if j.Lookup >= 0 {
		kind = "IndexJoin"
	} else if len(j.LeftKeys) > 0 {
		kind = "HashJoin"
	}
	kind += [...]string{" inner", " left", " semi", " anti"}[j.Type]
	if len(j.LeftKeys) > 0 {
		kind += fmt.Sprintf(" keys=[%s]=[%s]", exprList(j.LeftKeys), exprList(j.RightKey))
	}
	if j.LookupIndex != nil {
		kind += " index=" + j.LookupIndex.Name
	}
	if j.Cond != nil {
		kind += " cond=" + j.Cond.String()
	}
	if j.EstRows > 0 {
		kind += " " + estRows(j.EstRows)
	}
	return kind
}

// SetOpKind is UNION, EXCEPT or INTERSECT.
type SetOpKind int

// Set operations.
const (
	Union SetOpKind = iota
	Except
	Intersect
)

// SetOp combines two inputs with the same number of columns.
type SetOp struct {
	base
	Left, Right Plan
	Kind        SetOpKind
	All         bool
}

func (s *SetOp) Children() []Plan { return []Plan{s.Left, s.Right} }
func (s *SetOp) Explain() string {
	n := [...]string{"Union", "Except", "Intersect"}[s.Kind]
	if s.All {
		n += " all"
	}
	return n
}

// Explain renders a plan tree, one node per line, children indented.
func Explain(p Plan) []string {
	var out []string
	var walk func(p Plan, depth int)
	walk = func(p Plan, depth int) {
		out = append(out, strings.Repeat("  ", depth)+p.Explain())
		for _, c := range p.Children() {
			walk(c, depth+1)
		}
	}
	walk(p, 0)
	return out
}

func exprList(es []expr.Expr) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.String()
	}
	return strings.Join(parts, ", ")
}
