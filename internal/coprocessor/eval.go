package coprocessor

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"slices"

	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// Fragment is a compiled kvpb.CopDAG, ready to run over the records of a
// range. It is immutable and may be shared by concurrent Runners.
type Fragment struct {
	dag *kvpb.CopDAG

	// The scan: a row is width datums by column offset; the stored
	// columns to decode (ids, fts, kinds) go to offsets. handle is the
	// offset the record key's handle fills, or -1.
	width       int
	ids         []int64
	fts         []*ptypes.FieldType
	kinds       []types.Kind
	offsets     []int
	origin      []types.Datum // parallel to offsets
	handle      int
	unsigned    bool
	decodeValue bool
	// An index scan: the length of the index's key prefix and the offsets
	// of its columns in key order (the values decoded from each key).
	index       bool
	indexPrefix int
	indexCols   []int
	// output lists the offsets of the needed columns: a fragment without
	// aggregation returns these.
	output []int

	filter expr.Expr

	agg      bool
	groupBy  []expr.Expr
	groupCol []*collate.Collation
	funcs    []aggSpec
	firstRow []int

	topN  []sortKey
	limit int
}

type aggSpec struct {
	name string // count, sum, avg, min, max
	arg  expr.Expr
	coll *collate.Collation
	sum  *expr.AggFunc // sum and avg: the SUM the partial state is kept with
}

type sortKey struct {
	e    expr.Expr
	desc bool
	coll *collate.Collation
}

// PartialWidth is how many columns the partial state of function name
// takes in an aggregation's output.
func PartialWidth(name string) int {
	if name == "avg" {
		return 2
	}
	return 1
}

// Compile checks and compiles a fragment.
func Compile(dag *kvpb.CopDAG) (*Fragment, error) {
	s := dag.GetScan()
	if s == nil || len(s.Columns) == 0 {
		return nil, fmt.Errorf("coprocessor: fragment without a scan")
	}
	f := &Fragment{dag: dag, width: len(s.Columns), handle: int(s.HandleOffset), unsigned: s.HandleUnsigned, limit: int(dag.Limit)}
	if f.handle >= f.width {
		return nil, fmt.Errorf("coprocessor: handle offset %d out of %d columns", f.handle, f.width)
	}
	for off, c := range s.Columns {
		if !c.Needed {
			continue
		}
		f.output = append(f.output, off)
		if off == f.handle {
			continue
		}
		if c.Type == nil {
			return nil, fmt.Errorf("coprocessor: column %d has no type", off)
		}
		ft := FieldTypeFromPB(c.Type)
		f.ids = append(f.ids, c.Id)
		f.fts = append(f.fts, ft)
		f.kinds = append(f.kinds, types.KindForFieldType(ft))
		f.offsets = append(f.offsets, off)
		d, err := DecodeDatum(c.OriginDefault)
		if err != nil {
			return nil, err
		}
		f.origin = append(f.origin, d)
	}
	if f.handle >= 0 && !s.Columns[f.handle].Needed {
		f.handle = -1 // the key is not decoded
	}
	f.decodeValue = len(f.offsets) > 0 && !s.KeysOnly
	if s.IndexId != 0 {
		f.index, f.decodeValue = true, false
		f.indexPrefix = len(tablecodec.IndexPrefix(s.TableId, s.IndexId))
		covered := map[int]bool{f.handle: true}
		for _, off := range s.IndexColumns {
			if off < 0 || int(off) >= f.width {
				return nil, fmt.Errorf("coprocessor: index column %d out of range", off)
			}
			f.indexCols = append(f.indexCols, int(off))
			covered[int(off)] = true
		}
		for _, off := range f.output {
			if !covered[off] {
				return nil, fmt.Errorf("coprocessor: column %d is not in the index", off)
			}
		}
		if len(f.offsets) == 0 {
			f.indexCols = nil // no value wanted: the keys are not decoded
		}
	}
	var err error
	if dag.Filter != nil {
		if f.filter, err = ExprFromPB(dag.Filter); err != nil {
			return nil, err
		}
	}
	if a := dag.Agg; a != nil {
		f.agg = true
		for _, g := range a.GroupBy {
			e, err := ExprFromPB(g)
			if err != nil {
				return nil, err
			}
			f.groupBy = append(f.groupBy, e)
			f.groupCol = append(f.groupCol, expr.CollationOf(e))
		}
		for _, fn := range a.Funcs {
			spec := aggSpec{name: fn.Name}
			switch {
			case fn.Name == "count" && len(fn.Args) == 0:
			case len(fn.Args) == 1 && (fn.Name == "count" || fn.Name == "sum" || fn.Name == "avg" || fn.Name == "min" || fn.Name == "max"):
				if spec.arg, err = ExprFromPB(fn.Args[0]); err != nil {
					return nil, err
				}
				spec.coll = expr.CollationOf(spec.arg)
				if fn.Name == "sum" || fn.Name == "avg" {
					// Over the argument's value, evaluated once per row
					// (accumulate); its type makes the sum's.
					if spec.sum, err = expr.NewAggFunc("sum", false, []expr.Expr{expr.NewColumn(0, spec.arg.Type(), "arg")}); err != nil {
						return nil, err
					}
				}
			default:
				return nil, fmt.Errorf("coprocessor: aggregate %s/%d cannot be pushed", fn.Name, len(fn.Args))
			}
			f.funcs = append(f.funcs, spec)
		}
		for _, off := range a.FirstRow {
			if off < 0 || int(off) >= f.width {
				return nil, fmt.Errorf("coprocessor: first-row column %d out of range", off)
			}
			f.firstRow = append(f.firstRow, int(off))
		}
	}
	for _, k := range dag.TopN {
		e, err := ExprFromPB(k.Expr)
		if err != nil {
			return nil, err
		}
		f.topN = append(f.topN, sortKey{e: e, desc: k.Desc, coll: expr.CollationOf(e)})
	}
	if len(f.topN) > 0 && (f.limit <= 0 || f.agg) {
		return nil, fmt.Errorf("coprocessor: top-N needs a limit and no aggregation")
	}
	return f, nil
}

// OutputWidth is the number of columns of the fragment's output rows.
func (f *Fragment) OutputWidth() int {
	if !f.agg {
		return len(f.output)
	}
	n := len(f.groupBy) + len(f.firstRow)
	for _, a := range f.funcs {
		n += PartialWidth(a.name)
	}
	return n
}

// ErrStop is what Runner.Add returns once the fragment needs no more rows
// (its limit is reached, or its page is full).
var ErrStop = errors.New("coprocessor: enough rows")

// Runner evaluates a fragment over the records of one request. It is not
// safe for concurrent use.
type Runner struct {
	f        *Fragment
	ctx      *expr.EvalContext
	warnings []error
	row      []types.Datum
	dec      *codec.RowDecoder
	paging   int

	out      *BatchBuilder
	outRow   []types.Datum
	produced int

	groups  *groupTable
	order   []*group
	keyBuf  []byte
	scanned uint64

	top *topHeap
	// pageFull: an aggregation has paging groups.
	pageFull bool

	// vec, when set, evaluates the fragment over batches of records
	// (vec.go), from the vecAfter-th record on: a request of a few
	// records (an index join's lookups) never builds one.
	vec      *vecRun
	vecTried bool
}

type group struct {
	hashKey string // the group-by values' hash key
	keys    []types.Datum
	parts   []partial // per function
	first   []types.Datum
	// inline holds parts for up to two functions, so that a row's
	// updates touch the group's own memory.
	inline [2]partial
}

// partial is one function's partial state in a group.
type partial struct {
	count   int64
	sum     expr.ValueAdder // sum, avg
	extreme types.Datum     // min, max
}

// NewRunner starts a run; pagingRows > 0 stops a fragment after that many
// output rows (an aggregation: groups), except a top-N.
func (f *Fragment) NewRunner(pagingRows int) *Runner {
	r := &Runner{f: f, row: make([]types.Datum, f.width), paging: pagingRows}
	if f.decodeValue {
		// Columns a row lacks (added after it was written) take their
		// origin defaults.
		r.dec = codec.NewRowDecoder(f.ids, f.fts, f.kinds, f.offsets, f.origin)
	}
	r.ctx = &expr.EvalContext{Warnings: &r.warnings}
	switch {
	case f.agg:
		r.groups = newGroupTable()
	case len(f.topN) > 0:
		r.top = &topHeap{keys: f.topN}
	default:
		r.out = NewBatchBuilder(len(f.output))
		r.outRow = make([]types.Datum, len(f.output))
	}
	return r
}

// LimitReached reports whether the fragment's own limit (not a page)
// stopped the run: the range has nothing more to give it.
func (r *Runner) LimitReached() bool {
	return r.out != nil && r.f.limit > 0 && r.produced >= r.f.limit
}

// NeedsKeys reports whether Add looks at the records' keys, to decode a
// handle or index columns. When it does not, Add may be given nil keys
// (the scan then unescapes no key; a run that stops early takes its
// resume key from the scan, not from Add).
func (r *Runner) NeedsKeys() bool {
	return r.f.handle >= 0 || len(r.f.indexCols) > 0
}

// CountsOnly reports whether the run only counts records: an aggregation
// without grouping, filter or first-row columns whose functions are all
// COUNT(*), over a table or index scan that decodes neither keys nor
// values (an index has one entry per row), and whose page cannot fill (it
// holds a single group). Such a run may be given the number of records of
// a range (AddCount) instead of the records.
func (r *Runner) CountsOnly() bool {
	f := r.f
	if !f.agg || len(f.groupBy) > 0 || len(f.firstRow) > 0 || f.filter != nil || f.decodeValue ||
		len(f.indexCols) > 0 || f.handle >= 0 || r.paging == 1 {
		return false
	}
	for _, a := range f.funcs {
		if a.name != "count" || a.arg != nil {
			return false
		}
	}
	return true
}

// AddCount is n calls of Add for a run that CountsOnly.
func (r *Runner) AddCount(n uint64) error {
	if n == 0 {
		return nil
	}
	// The first record makes the group, as Add does.
	if err := r.Add(nil, nil); err != nil {
		return err
	}
	g := r.order[0]
	for i := range g.parts {
		g.parts[i].count += int64(n - 1)
	}
	r.scanned += n - 1
	return nil
}

// Scanned is the number of records the run has read.
func (r *Runner) Scanned() uint64 { return r.scanned }

// Warnings are the warnings evaluation raised.
func (r *Runner) Warnings() []error { return r.warnings }

// Add evaluates the fragment over one record. key and value are only
// valid during the call. It returns ErrStop when no more records are
// needed. A run that evaluates in batches (vec.go) may keep the record
// and evaluate it later, in Flush at the latest.
func (r *Runner) Add(key, value []byte) error {
	r.scanned++
	if r.vec == nil && !r.vecTried && r.scanned > vecAfter {
		r.vecTried = true
		r.vec = newVecRun(r.f)
	}
	if r.vec != nil {
		if r.canBuffer() {
			return r.buffer(key, value)
		}
		// This record may be the one that stops the run: the ones before
		// it go first, then it alone.
		if err := r.Flush(); err != nil {
			return err
		}
	}
	if err := r.decode(key, value, r.row); err != nil {
		return err
	}
	return r.consume(r.row)
}

// decode fills row's needed columns from a record.
func (r *Runner) decode(key, value []byte, row []types.Datum) error {
	if err := r.decodeKey(key, value, row); err != nil {
		return err
	}
	if r.f.decodeValue {
		return r.dec.Decode(value, row)
	}
	return nil
}

// decodeKey fills the columns that come from a record's key (an index's
// columns, the handle).
func (r *Runner) decodeKey(key, value []byte, row []types.Datum) error {
	f := r.f
	if f.index {
		if len(f.indexCols) > 0 {
			if len(key) < f.indexPrefix {
				return tablecodec.ErrInvalidKey
			}
			vals, _, err := codec.DecodeKey(key[f.indexPrefix:], len(f.indexCols))
			if err != nil {
				return err
			}
			for i, off := range f.indexCols {
				row[off] = vals[i]
			}
		}
		if f.handle >= 0 {
			h, err := tablecodec.IndexEntryHandle(key, value)
			if err != nil {
				return err
			}
			if f.unsigned {
				row[f.handle] = types.NewUint(uint64(h))
			} else {
				row[f.handle] = types.NewInt(h)
			}
		}
	} else if f.handle >= 0 {
		_, h, err := tablecodec.DecodeRecordKey(key)
		if err != nil {
			return err
		}
		if f.unsigned {
			row[f.handle] = types.NewUint(uint64(h))
		} else {
			row[f.handle] = types.NewInt(h)
		}
	}
	return nil
}

// consume runs the fragment's operators over one decoded row.
func (r *Runner) consume(row []types.Datum) error {
	f := r.f
	if f.filter != nil {
		d, err := f.filter.Eval(r.ctx, row)
		if err != nil {
			return err
		}
		if ok, err := truth(r.ctx, d); err != nil || !ok {
			return err
		}
	}
	switch {
	case f.agg:
		if err := r.aggregate(row); err != nil || !r.pageFull {
			return err
		}
		return ErrStop
	case r.top != nil:
		return r.topAdd(row)
	}
	return r.output(row)
}

// output appends a row to a fragment's output rows.
func (r *Runner) output(row []types.Datum) error {
	f := r.f
	for i, off := range f.output {
		r.outRow[i] = row[off]
	}
	r.out.Append(r.outRow)
	r.produced++
	if (f.limit > 0 && r.produced >= f.limit) || (r.paging > 0 && r.produced >= r.paging) {
		return ErrStop
	}
	return nil
}

// truth is a filter's verdict on a value, with WHERE semantics (NULL is
// false), as the SQL layer's filter decides it.
func truth(_ *expr.EvalContext, d types.Datum) (bool, error) {
	t, null, err := d.ToBool()
	if err != nil {
		return false, err
	}
	return t && !null, nil
}

// owned returns d with its bytes copied out of buffers that do not outlive
// the call.
func owned(d types.Datum) types.Datum {
	if d.IsStringLike() {
		return d.WithBytes(bytes.Clone(d.Bytes()))
	}
	return d
}

func (r *Runner) aggregate(row []types.Datum) error {
	f := r.f
	if len(f.groupBy) == 0 && len(r.order) == 1 {
		return r.accumulate(r.order[0], row) // the one group: no hashing
	}
	var keys [4]types.Datum
	gk := keys[:0]
	for _, g := range f.groupBy {
		d, err := g.Eval(r.ctx, row)
		if err != nil {
			return err
		}
		gk = append(gk, d)
	}
	return r.accumulate(r.groupFor(gk, row), row)
}

// groupFor returns the group of a row whose group-by values are gk,
// making it when it is new.
func (r *Runner) groupFor(gk, row []types.Datum) *group {
	f := r.f
	r.keyBuf = r.keyBuf[:0]
	for i, d := range gk {
		r.keyBuf = d.AppendHashKeyCollated(r.keyBuf, f.groupCol[i])
	}
	h := r.groups.hash(r.keyBuf)
	if g := r.groups.find(r.keyBuf, h); g != nil {
		return g
	}
	g := &group{hashKey: string(r.keyBuf)}
	if len(f.funcs) <= len(g.inline) {
		g.parts = g.inline[:len(f.funcs)]
	} else {
		g.parts = make([]partial, len(f.funcs))
	}
	for _, d := range gk {
		g.keys = append(g.keys, owned(d))
	}
	for _, off := range f.firstRow {
		g.first = append(g.first, owned(row[off]))
	}
	for i, a := range f.funcs {
		if a.sum != nil {
			g.parts[i].sum = a.sum.NewAccumulator().(expr.ValueAdder)
		}
	}
	r.groups.insert(g, h)
	r.order = append(r.order, g)
	if r.paging > 0 && len(r.order) >= r.paging {
		// A page holds this many groups: the rest of the range goes to
		// the next page, whose partial states the final phase merges
		// with these.
		r.pageFull = true
	}
	return g
}

// accumulate adds a row to its group's partial states.
func (r *Runner) accumulate(g *group, row []types.Datum) error {
	funcs := r.f.funcs
	for i := range funcs {
		a := &funcs[i]
		if a.arg == nil {
			g.parts[i].count++
			continue
		}
		d, err := a.arg.Eval(r.ctx, row)
		if err != nil {
			return err
		}
		if err := r.accumulateValue(g, i, d); err != nil {
			return err
		}
	}
	return nil
}

// accumulateValue adds function i's argument value d to g's partial
// state.
func (r *Runner) accumulateValue(g *group, i int, d types.Datum) error {
	if d.IsNull() {
		return nil
	}
	a := &r.f.funcs[i]
	p := &g.parts[i]
	p.count++
	switch {
	case a.sum != nil: // sum, avg
		p.sum.AddValue(r.ctx, d)
	case a.name == "min" || a.name == "max":
		if p.extreme.IsNull() {
			p.extreme = owned(d)
			return nil
		}
		c, err := types.CompareCollated(d, p.extreme, a.coll)
		if err != nil {
			return err
		}
		if (a.name == "min" && c < 0) || (a.name == "max" && c > 0) {
			p.extreme = owned(d)
		}
	}
	return nil
}

// Finish returns the output of the run, after evaluating what Add kept
// (Flush).
func (r *Runner) Finish() (*kvpb.CopBatch, error) {
	if err := r.Flush(); err != nil {
		return nil, err
	}
	return r.finish(), nil
}

func (r *Runner) finish() *kvpb.CopBatch {
	f := r.f
	switch {
	case f.agg:
		b := NewBatchBuilder(f.OutputWidth())
		if len(f.groupBy) == 0 && len(r.order) == 0 {
			// No rows: the partial state of the empty group, so that
			// COUNT(*) of an empty range is 0, not no row.
			return b.Build()
		}
		out := make([]types.Datum, 0, f.OutputWidth())
		for _, g := range r.order {
			out = append(out[:0], g.keys...)
			for i, a := range f.funcs {
				switch a.name {
				case "count":
					out = append(out, types.NewInt(g.parts[i].count))
				case "sum":
					out = append(out, g.parts[i].sum.Result())
				case "avg":
					out = append(out, g.parts[i].sum.Result(), types.NewInt(g.parts[i].count))
				default:
					out = append(out, g.parts[i].extreme)
				}
			}
			out = append(out, g.first...)
			b.Append(out)
		}
		return b.Build()
	case r.top != nil:
		b := NewBatchBuilder(len(f.output))
		rows := r.top.inScanOrder()
		out := make([]types.Datum, len(f.output))
		for _, tr := range rows {
			for i, off := range f.output {
				out[i] = tr.row[off]
			}
			b.Append(out)
		}
		return b.Build()
	}
	return r.out.Build()
}

// Top-N: a heap of the best limit rows seen, worst on top.

type topRow struct {
	keys []types.Datum
	row  []types.Datum
	seq  int // scan order
}

type topHeap struct {
	keys []sortKey
	rows []*topRow
	seq  int
	err  error
}

// less orders a before b in the fragment's sort order.
func (h *topHeap) cmp(a, b []types.Datum) int {
	for i, k := range h.keys {
		c, err := types.CompareCollated(a[i], b[i], k.coll)
		if err != nil && h.err == nil {
			h.err = err
		}
		if c != 0 {
			if k.desc {
				return -c
			}
			return c
		}
	}
	return 0
}

func (h *topHeap) Len() int { return len(h.rows) }
func (h *topHeap) Less(i, j int) bool {
	// The worst on top: the last in sort order, of equal rows the last
	// read (a stable sort keeps the first).
	c := h.cmp(h.rows[i].keys, h.rows[j].keys)
	return c > 0 || (c == 0 && h.rows[i].seq > h.rows[j].seq)
}
func (h *topHeap) Swap(i, j int) { h.rows[i], h.rows[j] = h.rows[j], h.rows[i] }
func (h *topHeap) Push(x any)    { h.rows = append(h.rows, x.(*topRow)) }
func (h *topHeap) Pop() any {
	x := h.rows[len(h.rows)-1]
	h.rows = h.rows[:len(h.rows)-1]
	return x
}

// inScanOrder returns the rows kept in the order they were read: the
// SQL layer's sort above is stable, and sorts them with the other
// regions' rows as it would have sorted the whole table.
func (h *topHeap) inScanOrder() []*topRow {
	out := slices.Clone(h.rows)
	slices.SortFunc(out, func(a, b *topRow) int { return a.seq - b.seq })
	return out
}

func (r *Runner) topAdd(row []types.Datum) error {
	h := r.top
	keys := make([]types.Datum, len(h.keys))
	for i, k := range h.keys {
		d, err := k.e.Eval(r.ctx, row)
		if err != nil {
			return err
		}
		keys[i] = d
	}
	if len(h.rows) >= r.f.limit {
		// Ties keep the row seen first, as a stable sort would.
		if h.cmp(keys, h.rows[0].keys) >= 0 {
			return h.err
		}
		heap.Pop(h)
	}
	h.seq++
	tr := &topRow{keys: make([]types.Datum, len(keys)), row: make([]types.Datum, len(row)), seq: h.seq}
	for i, d := range keys {
		tr.keys[i] = owned(d)
	}
	for _, off := range r.f.output {
		tr.row[off] = owned(row[off])
	}
	heap.Push(h, tr)
	return h.err
}

// ErrorToPB turns an evaluation error into a response's eval error: a SQL
// error keeps its code and state.
func ErrorToPB(err error) *kvpb.CopError {
	var se *sqlerr.Error
	if errors.As(err, &se) {
		return &kvpb.CopError{Code: uint32(se.Code), State: se.State, Message: se.Msg}
	}
	return &kvpb.CopError{Code: sqlerr.ErUnknown, State: "HY000", Message: err.Error()}
}

// ErrorFromPB is the inverse of ErrorToPB.
func ErrorFromPB(e *kvpb.CopError) error {
	return sqlerr.New(uint16(e.Code), e.State, "%s", e.Message)
}
