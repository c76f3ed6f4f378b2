package plan

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/strata-db/strata/internal/coprocessor"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// CopRead is a full table scan (or, under an aggregation, a covering
// index scan) whose filter and aggregation, top-N or limit run in the
// coprocessor, next to the data, on every region of the
// table at once (package coprocessor; docs/architecture.md). Its output is
// that of the subtree it replaces, Fallback, which exec runs instead when
// the transaction cannot push the fragment (it has buffered writes in the
// table) or the session turned pushdown off.
//
//   - With Agg, the regions aggregate by hash (partial COUNT, SUM, MIN,
//     MAX, AVG as sum and count) and exec merges their rows (the final
//     phase); the output is the Aggregate's.
//   - Without, the regions return the rows that pass Filter, in key order
//     (TopN: each region's first Limit rows in that order; the Sort and
//     Limit above stay and finish the job).
type CopRead struct {
	base
	Scan     *Scan
	Filter   expr.Expr // nil: none
	Agg      *Aggregate
	FirstRow []int // Agg: the offsets of the scan columns the rows above read
	TopN     []SortKey
	Limit    uint64 // 0: none
	Fallback Plan
	// DAG is the fragment sent to the regions.
	DAG *kvpb.CopDAG
}

func (*CopRead) Children() []Plan { return nil }

func (c *CopRead) Explain() string {
	var sb strings.Builder
	sb.WriteString("CopRead task=cop[strata] table=" + c.Scan.Table.Name)
	if c.Scan.Access == IndexLookup {
		parts := make([]string, len(c.Scan.Ranges))
		for i, r := range c.Scan.Ranges {
			parts[i] = r.String()
		}
		sb.WriteString(" index=" + c.Scan.Index.Name + " range=" + strings.Join(parts, ","))
	}
	if c.Scan.Desc {
		sb.WriteString(" desc")
	}
	if c.Filter != nil {
		sb.WriteString(" filter=" + c.Filter.String())
	}
	if c.Agg != nil {
		parts := make([]string, len(c.Agg.Aggs))
		for i, a := range c.Agg.Aggs {
			parts[i] = a.String()
		}
		fmt.Fprintf(&sb, " partial-agg group=[%s] aggs=[%s]", exprList(c.Agg.GroupBy), strings.Join(parts, ", "))
	}
	if len(c.TopN) > 0 {
		parts := make([]string, len(c.TopN))
		for i, k := range c.TopN {
			parts[i] = k.Expr.String()
			if k.Desc {
				parts[i] += " desc"
			}
		}
		sb.WriteString(" topn=[" + strings.Join(parts, ", ") + "]")
	}
	if c.Limit > 0 {
		fmt.Fprintf(&sb, " limit=%d", c.Limit)
	}
	if c.Scan.Needed != nil {
		var cols []string
		for i, col := range c.Scan.Table.Columns {
			if c.Scan.Needed[i] {
				cols = append(cols, col.Name)
			}
		}
		sb.WriteString(" columns=" + strings.Join(cols, ","))
	}
	if est := c.estRows(); est > 0 {
		sb.WriteString(" " + estRows(est))
	}
	return sb.String()
}

// estRows estimates the rows the fragment returns from those of the
// filters and scan it replaces (0: unknown, or an aggregation).
func (c *CopRead) estRows() float64 {
	if c.Agg != nil {
		return 0
	}
	est := 0.0
	switch n := c.Fallback.(type) {
	case *Filter:
		est = n.EstRows
	case *Scan:
		est = n.EstRows
	}
	if c.Limit > 0 && est > float64(c.Limit) {
		est = float64(c.Limit)
	}
	return est
}

// Coprocessor enables pushCoprocessor; tests turn it off to compare.
var Coprocessor = true

// pushCoprocessor replaces the subtrees of p that a coprocessor can run
// with CopReads. Only full table scans are pushed: point gets and ranges
// of the primary key or of an index stay as they are, so that short
// OLTP reads never pay for a fragment.
func pushCoprocessor(p Plan) Plan {
	switch n := p.(type) {
	case *Aggregate:
		if c := copAggregate(n); c != nil {
			return c
		}
		n.Child = pushCoprocessor(n.Child)
	case *Limit:
		count, ok := constUint(n.Count)
		offset, ok2 := uint64(0), true
		if n.Offset != nil {
			offset, ok2 = constUint(n.Offset)
		}
		limit := count + offset
		if ok && ok2 && limit > 0 && limit < 1<<20 {
			if c := copLimit(n.Child, limit); c != nil {
				n.Child = c
				return n
			}
		}
		n.Child = pushCoprocessor(n.Child)
	case *Filter:
		if c := copRows(n, nil, 0); c != nil {
			return c
		}
		n.Child = pushCoprocessor(n.Child)
	case *Projection:
		n.Child = pushCoprocessor(n.Child)
	case *Sort:
		n.Child = pushCoprocessor(n.Child)
	case *Distinct:
		n.Child = pushCoprocessor(n.Child)
	case *Window:
		n.Child = pushCoprocessor(n.Child)
	case *Join:
		n.Left = pushCoprocessor(n.Left)
		if n.Lookup < 0 {
			// An index join reads its right side by handle itself.
			n.Right = pushCoprocessor(n.Right)
		}
	case *SetOp:
		n.Left = pushCoprocessor(n.Left)
		n.Right = pushCoprocessor(n.Right)
	}
	return p
}

// copLimit pushes the limit of a Limit whose child is p: a top-N when p
// sorts, else the first rows, through a projection (which keeps rows as
// they are). Without a sort, only a filtered scan is pushed: a bare scan
// under a LIMIT reads its few rows through the cursor already. It returns
// what replaces p, or nil.
func copLimit(p Plan, limit uint64) Plan {
	top := p
	var keys []SortKey
	s, sorted := p.(*Sort)
	if sorted {
		keys, p = s.Keys, s.Child
	}
	under := p
	proj, projected := p.(*Projection)
	if projected {
		under = proj.Child
		if sorted {
			// The keys read the projection's output: read what it computes.
			mapped := make([]SortKey, len(keys))
			for i, k := range keys {
				idx, ok := expr.ColumnIndex(k.Expr)
				if !ok || idx >= len(proj.Exprs) {
					return nil
				}
				mapped[i] = SortKey{Expr: proj.Exprs[idx], Desc: k.Desc}
			}
			keys = mapped
		}
	}
	if !sorted {
		if _, filtered := under.(*Filter); !filtered {
			return nil
		}
	}
	c := copRows(under, keys, limit)
	switch {
	case c == nil:
		return nil
	case projected:
		proj.Child = c
	case sorted:
		s.Child = c
	default:
		return c
	}
	return top
}

func constUint(e expr.Expr) (uint64, bool) {
	k, ok := e.(*expr.Constant)
	if !ok {
		return 0, false
	}
	switch k.Value.Kind() {
	case types.KindInt64:
		if k.Value.Int() < 0 {
			return 0, false
		}
		return uint64(k.Value.Int()), true
	case types.KindUint64:
		return k.Value.Uint(), true
	}
	return 0, false
}

// pushableScan returns the full table scan under a chain of filters and
// the filters' conjunction, serialized; ok is false when the chain is not
// that or a filter cannot be pushed.
func pushableScan(p Plan) (scan *Scan, cond expr.Expr, pcond *kvpb.CopExpr, ok bool) {
	return pushableScanOf(p, false)
}

// coveringIndex reports whether an index lookup can be a coprocessor
// index scan: its ranges are constants (not ? parameters), it is not a
// lookup of unique points, and every column the plan reads is the handle
// or an integer column of the index, decoded from the entry's key.
func coveringIndex(s *Scan) bool {
	if s.Access != IndexLookup || s.Points || s.Index == nil || s.Needed == nil {
		return false
	}
	for _, r := range s.Ranges {
		for _, e := range r.Eq {
			if !expr.IsConstant(e) {
				return false
			}
		}
		for _, b := range []Bound{r.Low, r.High} {
			if b.Value != nil && !expr.IsConstant(b.Value) {
				return false
			}
		}
	}
	var needed []int
	for off, need := range s.Needed {
		if need {
			needed = append(needed, off)
		}
	}
	return indexHolds(s.Table, s.Index, needed)
}

// indexHolds reports whether every column of t at the offsets cols is the
// integer handle or an integer column of ix (whole, not a prefix), which
// an index scan decodes from an entry's key.
func indexHolds(t *catalog.TableInfo, ix *catalog.IndexInfo, cols []int) bool {
	inIndex := map[int]bool{}
	for i, off := range ix.Columns {
		if i < len(ix.Lengths) && ix.Lengths[i] > 0 {
			return false
		}
		switch types.KindForFieldType(t.Columns[off].Type) {
		case types.KindInt64, types.KindUint64:
			inIndex[off] = true
		}
	}
	for _, off := range cols {
		if !inIndex[off] && !(t.PKIsHandle && off == t.HandleOffset) {
			return false
		}
	}
	return true
}

// CoveringIndexDAG returns, for s an index lookup that coveringIndex
// takes (every column it needs decoded from the index entries' keys), the
// fragment that reads those columns from the entries of s's ranges, no
// row fetched; ok is false otherwise.
func CoveringIndexDAG(s *Scan) (dag *kvpb.CopDAG, ok bool) {
	if !coveringIndex(s) || s.Lock || s.WithHandle || s.Table.Temporary || s.Table.ViewSQL != "" {
		return nil, false
	}
	cs, ok := copScan(s)
	if !ok {
		return nil, false
	}
	return &kvpb.CopDAG{Scan: cs, Reverse: s.Desc}, true
}

// pushableScanOf is pushableScan; withIndex also takes a covering index
// scan (coveringIndex).
func pushableScanOf(p Plan, withIndex bool) (scan *Scan, cond expr.Expr, pcond *kvpb.CopExpr, ok bool) {
	var conds []expr.Expr
	for {
		switch n := p.(type) {
		case *Filter:
			conds = append(conds, n.Cond)
			p = n.Child
			continue
		case *Scan:
			scan = n
		}
		break
	}
	if scan == nil || scan.Lock || scan.WithHandle || scan.Table.Temporary || scan.Table.ViewSQL != "" ||
		(scan.Access != TableFullScan && !(withIndex && coveringIndex(scan))) {
		return nil, nil, nil, false
	}
	for i := len(conds) - 1; i >= 0; i-- {
		if cond == nil {
			cond = conds[i]
		} else {
			cond = expr.NewLogic(expr.LogicAnd, cond, conds[i])
		}
	}
	if cond != nil {
		if pcond, ok = coprocessor.ExprToPB(cond); !ok {
			return nil, nil, nil, false
		}
	}
	return scan, cond, pcond, true
}

// copScan describes the table scan of a fragment.
func copScan(s *Scan) (*kvpb.CopScan, bool) {
	t := s.Table
	cs := &kvpb.CopScan{TableId: t.ID, HandleOffset: -1, KeysOnly: true}
	if t.PKIsHandle {
		cs.HandleOffset = int32(t.HandleOffset)
		cs.HandleUnsigned = mysql.HasUnsignedFlag(t.Columns[t.HandleOffset].Type.GetFlag())
	}
	if s.Access == IndexLookup {
		cs.IndexId = s.Index.ID
		for _, off := range s.Index.Columns {
			cs.IndexColumns = append(cs.IndexColumns, int32(off))
		}
	}
	for i, c := range t.Columns {
		info := &kvpb.CopColumnInfo{Id: c.ID, Type: coprocessor.FieldTypeToPB(c.Type), Needed: s.Needed == nil || s.Needed[i]}
		if info.Needed && i != int(cs.HandleOffset) {
			cs.KeysOnly = false
		}
		if c.OriginDefault != nil {
			v, err := types.Convert(types.NewString(*c.OriginDefault), c.Type)
			if err != nil {
				return nil, false
			}
			if !v.IsNull() {
				info.OriginDefault = coprocessor.EncodeDatum(v)
			}
		}
		cs.Columns = append(cs.Columns, info)
	}
	return cs, true
}

// copRows pushes a scan (under filters) returning rows: with keys and a
// limit, each region's top-N; with a limit only, the first rows.
func copRows(p Plan, keys []SortKey, limit uint64) *CopRead {
	scan, cond, pcond, ok := pushableScan(p)
	if !ok || (cond == nil && len(keys) == 0) {
		// A bare full scan, or one under a LIMIT, reads through the
		// cursor as well.
		return nil
	}
	cs, ok := copScan(scan)
	if !ok {
		return nil
	}
	dag := &kvpb.CopDAG{Scan: cs, Filter: pcond, Limit: limit, Reverse: scan.Desc, WarningsLimit: 64}
	for _, k := range keys {
		pk, ok := coprocessor.ExprToPB(k.Expr)
		if !ok {
			return nil
		}
		dag.TopN = append(dag.TopN, &kvpb.CopSortKey{Expr: pk, Desc: k.Desc})
	}
	c := &CopRead{Scan: scan, Filter: cond, TopN: keys, Limit: limit, Fallback: p, DAG: dag}
	c.cols = p.Columns()
	return c
}

// copAggregate pushes an aggregation over a scan (under filters): COUNT,
// SUM, AVG, MIN and MAX, without DISTINCT, over pushable arguments,
// grouped by pushable expressions.
func copAggregate(a *Aggregate) *CopRead {
	// An aggregation may also read a covering index (COUNT(*) WHERE k
	// BETWEEN ...): its entries, not its rows.
	scan, cond, pcond, ok := pushableScanOf(a.Child, true)
	if !ok {
		return nil
	}
	if cond == nil {
		if ix := countIndex(a, scan); ix != nil {
			scan = ix
		}
	}
	cs, ok := copScan(scan)
	if !ok {
		return nil
	}
	pa := &kvpb.CopAgg{}
	for _, g := range a.GroupBy {
		pg, ok := coprocessor.ExprToPB(g)
		if !ok {
			return nil
		}
		pa.GroupBy = append(pa.GroupBy, pg)
	}
	for _, f := range a.Aggs {
		if f.Distinct {
			return nil
		}
		switch f.Name {
		case "count", "sum", "avg", "min", "max":
		default:
			return nil
		}
		pf := &kvpb.CopAggFunc{Name: f.Name}
		if f.Name == "count" && len(f.Args) == 1 {
			if k, ok := f.Args[0].(*expr.Constant); ok && !k.Value.IsNull() {
				// COUNT(*), which arrives as COUNT(1): count the keys.
				pa.Funcs = append(pa.Funcs, pf)
				continue
			}
		}
		if !(f.Name == "count" && len(f.Args) == 0) {
			if len(f.Args) != 1 {
				return nil
			}
			parg, ok := coprocessor.ExprToPB(f.Args[0])
			if !ok {
				return nil
			}
			pf.Args = []*kvpb.CopExpr{parg}
		}
		pa.Funcs = append(pa.Funcs, pf)
	}
	var first []int
	for i := range scan.Table.Columns {
		if scan.Needed == nil || scan.Needed[i] {
			first = append(first, i)
			pa.FirstRow = append(pa.FirstRow, int32(i))
		}
	}
	dag := &kvpb.CopDAG{Scan: cs, Filter: pcond, Agg: pa, Reverse: scan.Desc, WarningsLimit: 64}
	c := &CopRead{Scan: scan, Filter: cond, Agg: a, FirstRow: first, Fallback: a, DAG: dag}
	c.cols = a.Columns()
	return c
}

// countIndex returns, for a COUNT(*) of a whole table (no filter, no
// grouping, no column read), the scan of the table's narrowest public
// index as a covering index scan, when its entries are at most half the
// estimated width of the rows; nil otherwise. Every row has exactly one
// entry in every public index (tablecodec.IndexEntry: NULL values too, and
// an index being added is not public), so counting the index's entries
// counts the rows, and the coprocessor counts keys without decoding them.
// MariaDB's InnoDB counts through the smallest secondary index likewise.
func countIndex(a *Aggregate, s *Scan) *Scan {
	if len(a.GroupBy) > 0 || s.Access != TableFullScan || s.Needed == nil {
		return nil
	}
	for _, f := range a.Aggs {
		if f.Name != "count" || f.Distinct || len(f.Args) > 1 {
			return nil
		}
		if len(f.Args) == 1 {
			if k, ok := f.Args[0].(*expr.Constant); !ok || k.Value.IsNull() {
				return nil
			}
		}
	}
	for _, need := range s.Needed {
		if need {
			return nil
		}
	}
	t := s.Table
	rowWidth := 0
	for _, c := range t.Columns {
		rowWidth += columnWidth(c)
	}
	var best *catalog.IndexInfo
	bestWidth := 0
	for _, ix := range t.Indexes {
		if ix.IsPrefix() || ix.State != catalog.StatePublic || (ix.Primary && t.PKIsHandle) {
			continue
		}
		w := 9 // the handle
		for _, off := range ix.Columns {
			w += columnWidth(t.Columns[off])
		}
		if best == nil || w < bestWidth {
			best, bestWidth = ix, w
		}
	}
	if best == nil || 2*bestWidth > rowWidth {
		return nil
	}
	ns := *s
	ns.Access, ns.Index, ns.Ranges, ns.Points, ns.Desc = IndexLookup, best, []Range{{}}, false, false
	if !coveringIndex(&ns) {
		return nil
	}
	return &ns
}

// columnWidth estimates a column's encoded width in bytes.
func columnWidth(c *catalog.ColumnInfo) int {
	switch types.KindForFieldType(c.Type) {
	case types.KindInt64, types.KindUint64, types.KindFloat64, types.KindTime, types.KindDuration:
		return 9
	case types.KindDecimal:
		return 12
	case types.KindString, types.KindBytes:
		if n := c.Type.GetFlen(); n > 0 && n < 1<<16 {
			return n + 2
		}
	}
	return 64
}

// RecordDAG is the fragment that reads the rows of s's table by ranges
// of record keys (an index lookup's rows, once its entries gave their
// handles): the columns s needs and the handle, no filter. cols gives, per
// output column, its offset in the table's columns, -1 for the handle of
// a table without an integer primary key; handle is the output column
// holding the handle. ok is false when s cannot be read so (a column
// default the coprocessor cannot take).
func RecordDAG(s *Scan) (dag *kvpb.CopDAG, cols []int, handle int, ok bool) {
	t := *s
	t.Access, t.Index, t.Ranges = TableFullScan, nil, nil
	cs, ok := copScan(&t)
	if !ok {
		return nil, nil, 0, false
	}
	if cs.HandleOffset >= 0 {
		cs.Columns[cs.HandleOffset].Needed = true
	} else {
		cs.HandleOffset = int32(len(cs.Columns))
		cs.Columns = append(cs.Columns, &kvpb.CopColumnInfo{Needed: true})
	}
	for off, c := range cs.Columns {
		if !c.Needed {
			continue
		}
		if off == int(cs.HandleOffset) {
			handle = len(cols)
		}
		if off >= len(s.Table.Columns) {
			off = -1
		}
		cols = append(cols, off)
	}
	return &kvpb.CopDAG{Scan: cs, WarningsLimit: 64}, cols, handle, true
}
