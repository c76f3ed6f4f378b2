package coprocessor

import (
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// Batch evaluation of a fragment with a filter.
//
// The Runner keeps up to vecBatch records (their values copied into an
// arena, the columns of their keys decoded) and evaluates them together:
// the filter's conjuncts one after the other with expr.Vec (one
// expression node at a time over the batch, each producing a vector of
// values), each over the rows no earlier conjunct rejected and after
// decoding only the columns it is the first to read; then the other
// columns of the rows that pass, their group-by values and aggregate
// arguments; then the rows go to their groups, or to the output, in scan
// order. Rows the filter rejects are never decoded in full: a TPC-H Q6
// scan of lineitem decodes its four decimals for the 2% of rows that
// pass, not for all of them. The answer, the errors and the warnings are
// the row-at-a-time path's:
//   - Expressions are evaluated first for the whole batch; only then does
//     any group change. If that evaluation fails, warns, or meets a value
//     that is not a clean truth value (expr.Vec may evaluate operands the
//     row path would skip, and in another order), its results and
//     warnings are dropped and the batch goes through the row path
//     (consume), which reports the first error and the warnings in the
//     scan's order.
//   - A conjunct is evaluated for the rows the row path evaluates it for:
//     A AND B AND C evaluates B unless A is false (NULL included) and C
//     unless A or B is false; a row passes when all are true.
//   - The application to the groups runs in scan order and is the row
//     path's own code (groupFor, accumulateValue); once expressions have
//     neither failed nor warned, its errors and warnings are the ones the
//     row path would meet, in the same order.
//   - A record is kept only when no record of the batch can end the run
//     (a full page of groups or rows, the fragment's limit): the run stops
//     at the same record, and the scan resumes after it, as before. A
//     record that might stop the run is evaluated alone, after the batch.
//   - A batch spans the ranges of a request. When the scan meets a lock
//     its caller calls Flush first: the records before the lock are
//     evaluated, and their errors reported, as the row path would have.
//
// Differences: a record the filter rejects is not decoded in full, so a
// value of another column that does not decode (a corrupt record) fails
// the row path but not this one.
//
// Fragments without a filter (a group-by over every row), and top-N ones,
// stay row at a time: without rows to skip, the copies into the arena
// cost about what batch evaluation of a group-by's one or two light
// expressions saves (BenchmarkFragmentGroupBy).

// vecAfter is how many records a run evaluates row at a time before it
// evaluates in batches.
const vecAfter = 64

// vecBatch is how many records a batch holds.
const vecBatch = 256

// arenaChunk is the size of the arena's chunks of record bytes.
const arenaChunk = 64 << 10

type vecRun struct {
	// The filter's conjuncts, in the order the row path evaluates them,
	// each with a decoder of the columns it is the first to read; rest
	// decodes the columns only the later operators read, for the rows
	// that pass.
	conj []conjunct
	rest *codec.RowDecoder

	groupBy []*expr.Vec
	args    []*expr.Vec // per function; nil for COUNT(*)
	// copyKeys: decoded values point into the key (index columns).
	copyKeys bool

	width   int
	rows    [][]types.Datum    // up to vecBatch rows of the fragment's width, made as needed
	vals    [][]byte           // each row's record value, in the arena
	offs    []codec.RowOffsets // each row's column offsets, parsed by its first decoder
	n       int                // rows held
	all     []int              // 0..len(rows)-1
	sel     []int
	pass    []int
	keyVals [][]types.Datum // group-by values of the selected rows
	argVals [][]types.Datum // argument values of the selected rows
	gk      []types.Datum

	chunks [][]byte // the arena: record bytes the rows point into
	cur    int
}

type conjunct struct {
	vec *expr.Vec
	dec *codec.RowDecoder // nil: its columns are decoded already
}

// newVecRun returns the batch state of a fragment that evaluates
// expressions batch-wise, or nil.
func newVecRun(f *Fragment) *vecRun {
	if len(f.topN) > 0 || f.filter == nil {
		// Without a filter there is no decoding to save and the batch's
		// copies of the records cost about what evaluating a group-by's
		// few expressions in batches saves (BenchmarkFragmentGroupBy).
		return nil
	}
	v := &vecRun{copyKeys: f.index && len(f.indexCols) > 0}
	decoded := map[int]bool{}
	var conjs []expr.Expr
	var cols [][]int
	splitConjuncts(f.filter, f.dag.Filter, &conjs, &cols)
	for i, c := range conjs {
		cv := expr.NewVec(c)
		if cv == nil {
			return nil
		}
		v.conj = append(v.conj, conjunct{vec: cv, dec: f.decoderOf(cols[i], decoded)})
	}
	if f.agg {
		for _, g := range f.groupBy {
			gv := expr.NewVec(g)
			if gv == nil {
				return nil
			}
			v.groupBy = append(v.groupBy, gv)
		}
		v.args = make([]*expr.Vec, len(f.funcs))
		for i, a := range f.funcs {
			if a.arg == nil {
				continue
			}
			if v.args[i] = expr.NewVec(a.arg); v.args[i] == nil {
				return nil
			}
		}
	}
	v.rest = f.decoderOf(nil, decoded)
	v.width = f.width
	v.keyVals = make([][]types.Datum, len(v.groupBy))
	v.argVals = make([][]types.Datum, len(v.args))
	return v
}

// splitConjuncts appends the conjuncts of a filter (e, compiled from p)
// in evaluation order, each with the row offsets it reads (nil: unknown,
// every column). A AND B AND C is ((A AND B) AND C): Eval evaluates A,
// then B unless A is false, then C unless A or B is.
func splitConjuncts(e expr.Expr, p *kvpb.CopExpr, out *[]expr.Expr, cols *[][]int) {
	if l, ok := e.(*expr.Logic); ok && l.Op == expr.LogicAnd && p != nil &&
		p.Kind == kvpb.CopExprKind_CopLogic && p.Op == int32(expr.LogicAnd) && len(p.Args) == 2 {
		splitConjuncts(l.L, p.Args[0], out, cols)
		splitConjuncts(l.R, p.Args[1], out, cols)
		return
	}
	*out = append(*out, e)
	if p == nil {
		*cols = append(*cols, nil)
		return
	}
	var offs []int
	var walk func(p *kvpb.CopExpr)
	walk = func(p *kvpb.CopExpr) {
		if p.Kind == kvpb.CopExprKind_CopColumnRef {
			offs = append(offs, int(p.Column))
		}
		for _, a := range p.Args {
			walk(a)
		}
	}
	walk(p)
	if offs == nil {
		offs = []int{} // reads no column
	}
	*cols = append(*cols, offs)
}

// decoderOf returns a decoder of the value columns among offs (nil: all)
// not yet in decoded, and marks them; nil when there are none.
func (f *Fragment) decoderOf(offs []int, decoded map[int]bool) *codec.RowDecoder {
	if !f.decodeValue {
		return nil
	}
	want := map[int]bool{}
	for _, o := range offs {
		want[o] = true
	}
	var ids []int64
	var fts []*ptypes.FieldType
	var kinds []types.Kind
	var offsets []int
	var origin []types.Datum
	for i, off := range f.offsets {
		if decoded[off] || (offs != nil && !want[off]) {
			continue
		}
		decoded[off] = true
		ids, fts, kinds = append(ids, f.ids[i]), append(fts, f.fts[i]), append(kinds, f.kinds[i])
		offsets, origin = append(offsets, off), append(origin, f.origin[i])
	}
	if len(ids) == 0 {
		return nil
	}
	return codec.NewRowDecoder(ids, fts, kinds, offsets, origin)
}

// canBuffer reports whether the next record may wait in the batch: no
// record of the batch, this one included, can end the run.
func (r *Runner) canBuffer() bool {
	held := r.vec.n + 1
	if r.f.agg {
		// Each record makes at most one group.
		return r.paging <= 0 || len(r.order)+held < r.paging
	}
	bound := r.paging
	if r.f.limit > 0 && (bound <= 0 || r.f.limit < bound) {
		bound = r.f.limit
	}
	return bound <= 0 || r.produced+held < bound
}

// alloc returns n bytes of the arena, valid until the batch is flushed.
func (v *vecRun) alloc(n int) []byte {
	for ; v.cur < len(v.chunks); v.cur++ {
		c := v.chunks[v.cur]
		if cap(c)-len(c) >= n {
			v.chunks[v.cur] = c[:len(c)+n]
			return c[len(c) : len(c)+n : len(c)+n]
		}
	}
	c := make([]byte, n, max(n, arenaChunk))
	v.chunks = append(v.chunks, c)
	v.cur = len(v.chunks) - 1
	return c[:n:n]
}

// grow makes room for more rows: a request of a few records (an index
// join's lookups) allocates for a few.
func (v *vecRun) grow() {
	n := min(max(16, 2*len(v.rows)), vecBatch) - len(v.rows)
	backing := make([]types.Datum, n*v.width)
	for i := range n {
		v.rows = append(v.rows, backing[i*v.width:(i+1)*v.width:(i+1)*v.width])
		v.vals = append(v.vals, nil)
		v.offs = append(v.offs, codec.RowOffsets{})
		v.all = append(v.all, len(v.all))
	}
}

// buffer keeps a record in the batch: its key columns decoded, its value
// copied for the decoders of Flush. A full batch is flushed.
func (r *Runner) buffer(key, value []byte) error {
	v := r.vec
	if v.n == len(v.rows) {
		v.grow()
	}
	if r.f.decodeValue {
		v.vals[v.n] = append(v.alloc(len(value))[:0], value...)
		v.offs[v.n].Reset()
	}
	if v.copyKeys {
		key = append(v.alloc(len(key))[:0], key...)
	}
	if err := r.decodeKey(key, value, v.rows[v.n]); err != nil {
		return err
	}
	v.n++
	if v.n == vecBatch {
		return r.Flush()
	}
	return nil
}

// Flush evaluates the records Add has kept. The scan's caller calls it
// before it reports a lock; Finish calls it.
func (r *Runner) Flush() error {
	v := r.vec
	if v == nil || v.n == 0 {
		return nil
	}
	n := v.n
	v.n = 0
	defer func() {
		for i := range v.chunks {
			v.chunks[i] = v.chunks[i][:0]
		}
		v.cur = 0
	}()
	rows := v.rows[:n]
	w0 := len(r.warnings)
	sel, ok, err := r.evalBatch(rows, v.all[:n])
	if err != nil {
		return err // a record that does not decode
	}
	if !ok || len(r.warnings) != w0 {
		// The row path reports errors and warnings in scan order.
		r.warnings = r.warnings[:w0]
		for i, row := range rows {
			if r.f.decodeValue {
				if err := r.dec.Decode(v.vals[i], row); err != nil {
					return err
				}
			}
			if err := r.consume(row); err != nil {
				return err
			}
		}
		return nil
	}
	return r.applyBatch(rows, sel)
}

// evalBatch evaluates the filter's conjuncts in turn, each over the rows
// the ones before did not reject and after decoding the columns it is the
// first to read; then decodes the other columns of the rows that pass and
// evaluates their group-by values and aggregate arguments (into v.keyVals
// and v.argVals). It returns those rows. ok false: an expression failed,
// or a value is not a clean truth value; the batch then goes through the
// row path.
func (r *Runner) evalBatch(rows [][]types.Datum, sel []int) (pass []int, ok bool, err error) {
	v := r.vec
	decode := func(d *codec.RowDecoder, sel []int) error {
		if d == nil {
			return nil
		}
		for _, i := range sel {
			if err := d.DecodeShared(v.vals[i], &v.offs[i], rows[i]); err != nil {
				return err
			}
		}
		return nil
	}
	// A row passes when every conjunct is true; it is evaluated further
	// while none is false (a NULL conjunct rejects it, but the row path
	// evaluates the next one, whose errors and warnings then count).
	pass = append(v.pass[:0], sel...)
	live := append(v.sel[:0], sel...)
	for _, c := range v.conj {
		if len(live) == 0 {
			break
		}
		if err := decode(c.dec, live); err != nil {
			return nil, false, err
		}
		vals, verr := c.vec.Eval(r.ctx, rows, live)
		if verr != nil {
			return nil, false, nil
		}
		next, p := live[:0], pass[:0]
		k := 0
		for j, d := range vals {
			t, null, terr := d.ToBool()
			if terr != nil {
				return nil, false, nil
			}
			i := live[j]
			if !t && !null {
				continue // false: the row path stops here
			}
			next = append(next, i)
			for k < len(pass) && pass[k] < i {
				k++
			}
			if t && k < len(pass) && pass[k] == i {
				p = append(p, i)
			}
		}
		live, pass = next, p
	}
	v.sel, v.pass = live, pass
	if err := decode(v.rest, pass); err != nil {
		return nil, false, err
	}
	if !r.f.agg || len(pass) == 0 {
		return pass, true, nil
	}
	for i, g := range v.groupBy {
		vals, err := g.Eval(r.ctx, rows, pass)
		if err != nil {
			return nil, false, nil
		}
		v.keyVals[i] = vals
	}
	for i, a := range v.args {
		if a == nil {
			continue
		}
		vals, err := a.Eval(r.ctx, rows, pass)
		if err != nil {
			return nil, false, nil
		}
		v.argVals[i] = vals
	}
	return pass, true, nil
}

// applyBatch hands the rows that passed to their groups, or to the
// output, in scan order.
func (r *Runner) applyBatch(rows [][]types.Datum, sel []int) error {
	v := r.vec
	if !r.f.agg {
		for _, i := range sel {
			if err := r.output(rows[i]); err != nil {
				return err
			}
		}
		return nil
	}
	funcs := r.f.funcs
	for j, i := range sel {
		var g *group
		if len(v.groupBy) == 0 && len(r.order) == 1 {
			g = r.order[0]
		} else {
			v.gk = v.gk[:0]
			for _, vals := range v.keyVals {
				v.gk = append(v.gk, vals[j])
			}
			g = r.groupFor(v.gk, rows[i])
		}
		for k := range funcs {
			if v.args[k] == nil {
				g.parts[k].count++
				continue
			}
			if err := r.accumulateValue(g, k, v.argVals[k][j]); err != nil {
				return err
			}
		}
	}
	return nil
}
