package exec

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/strata-db/strata/internal/coprocessor"
	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// indexJoinExec runs an inner, semi or anti index join through an index
// of the right table (plan.Join.LookupIndex): for each batch of left rows
// it reads, by one index range per distinct lookup key, only the right
// rows that can match, applies the right side's filters, and joins the
// batch against them by all the join keys (a semi or anti join outputs
// the left rows that some right row matches, or that none does).
//
// A batch's ranges are read together (lookupRows): the index entries of
// all of them through the coprocessor, one request per region carrying
// every range in it, regions (and runs of ranges) concurrently, then the
// rows by handle, per response: where the handles, sorted, fall in runs
// of consecutive values (rows inserted together, such as the lines of a
// TPC-H order), each run as one range of record keys through the
// coprocessor again (a scan of a few rows costs less than as many point
// reads); otherwise one BatchGet. Batches start at
// LookupBatchMin left rows and double up to LookupBatchMax, so a join
// whose consumer stops early (a LIMIT) reads little, and a long one sends
// few requests.
//
// The right side may also group the table's rows (plan.LookupSource: an
// Aggregate, and Projections, above the filtered scan; a decorrelated
// subquery's derived table): a batch's rows, read as above, are then
// aggregated by that part of the plan, and its rows are what the batch
// joins against. Each lookup key fixes a GROUP BY column, so the groups
// of a batch's keys are whole.
type indexJoinExec struct {
	left  Executor
	p     *plan.Join
	colls []*collate.Collation // per key pair (nil: all byte-wise)
	scan  *plan.Scan
	conds []expr.Expr // the filters above the right scan
	// base is the node of p.Right whose rows the lookup reads (p.Right
	// itself unless the right side groups them).
	base plan.Plan
	out  [][]types.Datum
	done bool
	// pending are left rows read but not yet joined; size is how many
	// the next batch takes.
	pending  [][]types.Datum
	leftDone bool
	size     int
	// records reads the right rows by record-key ranges (nil: it cannot;
	// recordsSet: worked out).
	records    *recordReader
	recordsSet bool
}

// LookupBatchMin and LookupBatchMax bound the left rows of an index
// join's batch (tests lower them).
var (
	LookupBatchMin = 32
	LookupBatchMax = BatchSize
)

// LookupRunMin is the fewest handles per run of consecutive handles, on
// average over a response, and LookupRunSpread the most handle values
// spanned per handle read, for which an index lookup reads its rows by
// record-key ranges instead of by BatchGet (LookupRunMin 0: always by
// BatchGet). Runs close together cost the leader one seek each within
// the same or the next blocks, less than a point read per row through
// the version cache; runs scattered over the table (TPC-H's lineitem
// reached from customers' orders, a span of 150 or more per row) cost a
// full seek each, more than their rows' point reads (measured on Q3, Q5
// and Q7 at SF 0.1: Q5's responses span 10 to 35 per row).
var (
	LookupRunMin    = 2
	LookupRunSpread = 64
)

func newIndexJoinExec(left Executor, p *plan.Join, colls []*collate.Collation) *indexJoinExec {
	scan, conds, base := plan.LookupSource(p.Right)
	return &indexJoinExec{left: left, p: p, colls: colls, scan: scan, conds: conds, base: base}
}

func (j *indexJoinExec) Next(c *Context) ([][]types.Datum, error) {
	for len(j.out) == 0 {
		if j.done {
			return nil, nil
		}
		if err := c.Ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := j.nextLeft(c)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			j.done = true
			return nil, nil
		}
		if err := j.join(c, batch); err != nil {
			return nil, err
		}
	}
	n := min(len(j.out), BatchSize)
	out := j.out[:n:n]
	j.out = j.out[n:]
	return out, nil
}

// nextLeft returns the next batch of left rows: j.size of them (fewer at
// the end), gathered from as many of the left input's batches as it
// takes; the size doubles after each batch up to LookupBatchMax.
func (j *indexJoinExec) nextLeft(c *Context) ([][]types.Datum, error) {
	if j.size == 0 {
		j.size = max(LookupBatchMin, 1)
	}
	for len(j.pending) < j.size && !j.leftDone {
		b, err := j.left.Next(c)
		if err != nil {
			return nil, err
		}
		if b == nil {
			j.leftDone = true
			break
		}
		j.pending = append(j.pending, b...)
	}
	n := min(j.size, len(j.pending))
	if n == 0 {
		j.pending = nil
		return nil, nil
	}
	batch := j.pending[:n:n]
	j.pending = j.pending[n:]
	j.size = min(2*j.size, max(LookupBatchMax, j.size))
	return batch, nil
}

// join reads the right rows for one batch of left rows and appends the
// joined rows to j.out. When those right rows do not fit the statement's
// memory quota and the statement may spill, it joins the batch in halves
// instead (down to one left row), so it holds less at a time: the right
// rows of a batch are all it keeps.
//
// At one left row it goes on without charging: the operators above may
// hold the whole quota (spillable ones spill only past it, when they
// grow), and one left row's matches, let go before the next row, are what
// the join needs to make progress at all.
func (j *indexJoinExec) join(c *Context, left [][]types.Datum) error {
	err := j.joinBatch(c, left, true)
	var se *sqlerr.Error
	if err != nil && c.canSpill() && errors.As(err, &se) && se.Code == sqlerr.ErMemoryExceeded {
		if len(left) == 1 {
			return j.joinBatch(c, left, false)
		}
		half := len(left) / 2
		if err := j.join(c, left[:half]); err != nil {
			return err
		}
		return j.join(c, left[half:])
	}
	return err
}

// joinBatch is join for one batch, all of whose right rows it holds at
// once. It appends to j.out only once every right row is read, so a batch
// that fails adds nothing.
func (j *indexJoinExec) joinBatch(c *Context, left [][]types.Datum, charge bool) error {
	// One index range per distinct lookup key of the batch.
	var ranges []plan.Range
	seen := map[string]bool{}
	var key []byte
	for _, l := range left {
		eq := make([]expr.Expr, len(j.p.LookupKeys))
		key = key[:0]
		null := false
		for i, k := range j.p.LookupKeys {
			d, err := j.p.LeftKeys[k].Eval(c.Eval, l)
			if err != nil {
				return err
			}
			if d.IsNull() {
				null = true // NULL never equals: no right row matches
				break
			}
			if j.colls != nil {
				key = d.AppendHashKeyCollated(key, j.colls[k])
			} else {
				key = d.AppendHashKey(key)
			}
			eq[i] = expr.NewConstant(d, j.p.LeftKeys[k].Type())
		}
		if null || seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		ranges = append(ranges, plan.Range{Eq: eq})
	}
	if len(ranges) == 0 {
		return nil
	}
	s := *j.scan
	s.Access, s.Index, s.Ranges, s.Points, s.LimitHint, s.Desc = plan.IndexLookup, j.p.LookupIndex, ranges, false, 0, false
	if !j.recordsSet {
		j.recordsSet = true
		j.records = newRecordReader(&s, j.conds)
	}
	rows, err := lookupRows(c, &s, j.records)
	if err != nil {
		return err
	}
	defer rows.close()
	table := map[string][][]types.Datum{}
	var held int64
	defer func() { c.Mem.Release(held) }()
	grouped := j.base != j.p.Right
	var read [][]types.Datum // the rows to group
	add := func(r []types.Datum) error {
		var ok bool
		var err error
		key, ok, err = joinKey(c, key[:0], j.p.RightKey, r, j.colls)
		if ok {
			table[string(key)] = append(table[string(key)], r)
		}
		return err
	}
	for {
		batch, err := rows.Next(c)
		if err != nil {
			return err
		}
		if batch == nil {
			break
		}
		conds := j.conds
		if rows.filtered {
			conds = nil // the coprocessor applied them
		}
	next:
		for _, r := range batch {
			for _, cond := range conds {
				ok, err := truth(c, cond, r)
				if err != nil {
					return err
				}
				if !ok {
					continue next
				}
			}
			if size := RowSize(r); charge {
				if err := c.Mem.Consume(size); err != nil {
					c.Mem.Release(size) // Consume charged it
					return err
				}
				held += size
			}
			if grouped {
				read = append(read, r)
			} else if err := add(r); err != nil {
				return err
			}
		}
	}
	if grouped && len(read) > 0 {
		e, err := buildOver(j.p.Right, j.base, read)
		if err != nil {
			return err
		}
		for {
			batch, err := e.Next(c)
			if err != nil {
				return err
			}
			if batch == nil {
				break
			}
			for _, r := range batch {
				if err := add(r); err != nil {
					return err
				}
			}
		}
	}
	width := len(j.p.Right.Columns())
	var pair []types.Datum
	for _, l := range left {
		k, ok, err := joinKey(c, key[:0], j.p.LeftKeys, l, j.colls)
		if err != nil {
			return err
		}
		key = k
		if j.p.Type.LeftOnly() {
			// A semi join keeps the left row once when some right row
			// of its key passes Cond, an anti join when none does (a
			// NULL key has none).
			matched := false
			if ok {
				for _, r := range table[string(k)] {
					if j.p.Cond == nil {
						matched = true
						break
					}
					pair = append(append(pair[:0], l...), r...)
					if matched, err = truth(c, j.p.Cond, pair); err != nil {
						return err
					}
					if matched {
						break
					}
				}
			}
			if matched == (j.p.Type == plan.SemiJoin) {
				j.out = append(j.out, l)
			}
			continue
		}
		if !ok {
			continue
		}
		for _, r := range table[string(k)] {
			row := make([]types.Datum, len(l)+width)
			copy(row, l)
			copy(row[len(l):], r)
			if j.p.Cond != nil {
				ok, err := truth(c, j.p.Cond, row)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
			}
			j.out = append(j.out, row)
		}
	}
	return nil
}

// buildOver builds the executors of p, Projections and Aggregates down to
// base, with rows as base's rows (indexJoinExec's grouped right side).
func buildOver(p, base plan.Plan, rows [][]types.Datum) (Executor, error) {
	if p == base {
		return &rowsExec{rows: rows}, nil
	}
	switch n := p.(type) {
	case *plan.Projection:
		child, err := buildOver(n.Child, base, rows)
		if err != nil {
			return nil, err
		}
		return &projectionExec{child: child, exprs: n.Exprs}, nil
	case *plan.Aggregate:
		child, err := buildOver(n.Child, base, rows)
		if err != nil {
			return nil, err
		}
		return &aggExec{child: child, p: n}, nil
	}
	return nil, errString("exec: an index join's right side is not a lookup source")
}

// rowsExec hands out rows it holds, BatchSize at a time, as they are.
type rowsExec struct{ rows [][]types.Datum }

func (r *rowsExec) Next(*Context) ([][]types.Datum, error) {
	if len(r.rows) == 0 {
		return nil, nil
	}
	n := min(len(r.rows), BatchSize)
	out := r.rows[:n:n]
	r.rows = r.rows[n:]
	return out, nil
}

// lookupExec reads the rows of an index lookup of many ranges: the
// handles of their index entries from the coprocessor (it), then the rows
// by handle, per response: by runs of record keys through the
// coprocessor (records) when the handles fall in long enough runs, else
// one BatchGet. With it nil, scan reads the ranges one after the other
// itself.
type lookupExec struct {
	scan    *scanExec
	it      kv.CopIterator
	cp      kv.Coprocessor
	records *recordReader // nil: by BatchGet only
	// covering: it returns the rows' needed columns from the index
	// entries themselves (plan.CoveringIndexDAG), nothing to fetch.
	covering bool
	// filtered: the rows Next returned last passed the filters above the
	// scan already (recordReader.filter).
	filtered bool
}

// lookupRows starts reading the rows of s, an index lookup: through the
// coprocessor when there are several ranges and the transaction can push
// them (no buffered write in the ranges, the coprocessor on, no locking
// read), else by the scan. records, when not nil, is newRecordReader(s).
func lookupRows(c *Context, s *plan.Scan, records *recordReader) (*lookupExec, error) {
	l := &lookupExec{scan: newScanExec(s)}
	cp, ok := c.Txn.(kv.Coprocessor)
	if !ok || c.CopConcurrency <= 0 || s.Lock || s.Table.Temporary || s.Table.ViewSQL != "" {
		return l, nil
	}
	sc := l.scan
	sc.started = true
	if err := sc.computeRanges(c); err != nil {
		return nil, err
	}
	if len(sc.ranges) <= 1 {
		// Nothing to read, or one range: the scan reads it in one
		// request too, without a fragment to compile and run.
		return l, nil
	}
	ranges := make([]kv.KeyRange, len(sc.ranges))
	for i, r := range sc.ranges {
		ranges[i] = kv.KeyRange{Start: r[0], End: r[1]}
	}
	dag, covering := plan.CoveringIndexDAG(s)
	if !covering {
		dag = handleDAG(s)
	}
	it, err := cp.Coprocess(c.Ctx, &kv.CopRequest{
		DAG:         dag,
		Ranges:      ranges,
		Concurrency: c.CopConcurrency,
		// In key order, so that each key's rows come in the order the
		// scan reads them.
		KeepOrder:  true,
		PagingRows: CopPagingRows,
		NoSplit:    true, // a range is a key's entries: small
	})
	if err != nil {
		return nil, err
	}
	l.it, l.cp, l.records, l.covering = it, cp, records, covering
	return l, nil
}

func (l *lookupExec) Next(c *Context) ([][]types.Datum, error) {
	if l.it == nil {
		return l.scan.Next(c)
	}
	for {
		resp, err := l.it.Next(c.Ctx)
		if err != nil {
			return nil, err
		}
		if resp == nil {
			return nil, nil
		}
		if l.covering {
			rows, err := coprocessor.DecodeBatch(resp.Batch, 0)
			if err != nil {
				return nil, err
			}
			if len(rows) > 0 {
				return widenRows(l.scan.p, rows), nil
			}
			continue
		}
		handles, err := batchHandles(resp.Batch)
		if err != nil {
			return nil, err
		}
		rows, err := l.fetch(c, handles)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			return rows, nil
		}
	}
}

// fetch reads the rows of handles, in their order, and sets filtered.
func (l *lookupExec) fetch(c *Context, handles []int64) ([][]types.Datum, error) {
	if l.records != nil {
		rows, ok, err := l.records.read(c, l.cp, handles)
		if ok || err != nil {
			l.filtered = l.records.filter
			return rows, err
		}
	}
	l.filtered = false
	return l.scan.fetch(c, handles)
}

// recordReader reads the rows of a table by handle as ranges of record
// keys through the coprocessor, one range per run of consecutive
// handles: a fragment (plan.RecordDAG) that returns each row's needed
// columns and its handle, of the rows that pass the filters above the
// scan when the coprocessor can evaluate them (filter).
type recordReader struct {
	s      *plan.Scan
	dag    *kvpb.CopDAG
	cols   []int // per output column, its offset in the row (-1: none)
	handle int   // the output column of the handle
	filter bool
}

// newRecordReader returns the reader of s's rows, under the filters
// conds, or nil when they must be read by BatchGet: a locking read
// (BatchGet locks the rows), or one that wants the handle beside the row.
func newRecordReader(s *plan.Scan, conds []expr.Expr) *recordReader {
	if s.Lock || s.WithHandle || s.Table.Temporary || s.Table.ViewSQL != "" {
		return nil
	}
	dag, cols, handle, ok := plan.RecordDAG(s)
	if !ok {
		return nil
	}
	for i, off := range cols {
		if off >= 0 && s.Needed != nil && !s.Needed[off] {
			cols[i] = -1 // read for the handle only
		}
	}
	r := &recordReader{s: s, dag: dag, cols: cols, handle: handle}
	if len(conds) > 0 {
		cond := conds[0]
		for _, c := range conds[1:] {
			cond = expr.NewLogic(expr.LogicAnd, cond, c)
		}
		if pc, ok := coprocessor.ExprToPB(cond); ok {
			dag.Filter, r.filter = pc, true
		}
	}
	return r
}

// wanted is one handle to read and its place in the caller's order.
type wanted struct {
	h   int64
	pos int
}

// read returns the rows of handles in the order of handles (a handle
// without a row gives none). ok is false, and nothing was read, when the
// handles fall in runs shorter than LookupRunMin on average or spread
// wider than LookupRunSpread, or the transaction cannot push the ranges
// (it has written in them): the caller reads by BatchGet then.
func (r *recordReader) read(c *Context, cp kv.Coprocessor, handles []int64) (rows [][]types.Datum, ok bool, err error) {
	if LookupRunMin <= 0 || len(handles) < 2 {
		return nil, false, nil
	}
	// The spread first: it needs no sort.
	lo, hi := handles[0], handles[0]
	for _, h := range handles[1:] {
		lo, hi = min(lo, h), max(hi, h)
	}
	if span := uint64(hi) - uint64(lo); span/uint64(len(handles)) >= uint64(LookupRunSpread) {
		return nil, false, nil
	}
	sorted := make([]wanted, len(handles))
	for i, h := range handles {
		sorted[i] = wanted{h, i}
	}
	slices.SortFunc(sorted, func(a, b wanted) int { return cmp.Compare(a.h, b.h) })
	runs := 1
	for i := 1; i < len(sorted); i++ {
		if prev := sorted[i-1].h; sorted[i].h != prev && (prev == math.MaxInt64 || sorted[i].h != prev+1) {
			runs++
		}
	}
	if runs*LookupRunMin > len(handles) {
		return nil, false, nil
	}
	tid := r.s.Table.ID
	ranges := make([]kv.KeyRange, 0, runs)
	start := 0
	for i := 1; i <= len(sorted); i++ {
		if i < len(sorted) {
			if prev := sorted[i-1].h; sorted[i].h == prev || (prev < math.MaxInt64 && sorted[i].h == prev+1) {
				continue
			}
		}
		ranges = append(ranges, kv.KeyRange{
			Start: tablecodec.RecordKey(tid, sorted[start].h),
			// Just past the run's last key: record keys are all of one length.
			End: append(tablecodec.RecordKey(tid, sorted[i-1].h), 0),
		})
		start = i
	}
	it, err := cp.Coprocess(c.Ctx, &kv.CopRequest{
		DAG:         r.dag,
		Ranges:      ranges,
		Concurrency: c.CopConcurrency,
		KeepOrder:   true,
		PagingRows:  CopPagingRows,
		NoSplit:     true, // a run is a few rows
	})
	if err != nil || it == nil {
		return nil, false, err
	}
	defer it.Close()
	width := len(r.s.Table.Columns)
	out := make([][]types.Datum, len(handles))
	k := 0 // the next of sorted not yet found
	for {
		resp, err := it.Next(c.Ctx)
		if err != nil {
			return nil, false, err
		}
		if resp == nil {
			break
		}
		for _, w := range resp.Warnings {
			c.Eval.Warn(coprocessor.ErrorFromPB(w))
		}
		batch, err := coprocessor.DecodeBatch(resp.Batch, 0)
		if err != nil {
			return nil, false, err
		}
		slab := make([]types.Datum, width*len(batch))
		for i, got := range batch {
			hd := got[r.handle]
			if hd.Kind() != types.KindInt64 && hd.Kind() != types.KindUint64 {
				return nil, false, errBadHandles
			}
			h := hd.Int() // an unsigned handle: the same bits
			for k < len(sorted) && sorted[k].h < h {
				k++ // no row for that handle
			}
			if k == len(sorted) || sorted[k].h != h {
				continue
			}
			row := slab[i*width : (i+1)*width : (i+1)*width]
			for j, off := range r.cols {
				if off >= 0 {
					row[off] = got[j]
				}
			}
			for ; k < len(sorted) && sorted[k].h == h; k++ {
				out[sorted[k].pos] = row
			}
		}
	}
	rows = out[:0]
	for _, row := range out {
		if row != nil {
			rows = append(rows, row)
		}
	}
	return rows, true, nil
}

// close stops the coprocessor requests still running.
func (l *lookupExec) close() {
	if l.it != nil {
		l.it.Close()
	}
}

// handleDAG is the coprocessor fragment that reads the entries of s's
// index and returns their handles (one integer column).
func handleDAG(s *plan.Scan) *kvpb.CopDAG {
	return &kvpb.CopDAG{Scan: &kvpb.CopScan{
		TableId:      s.Table.ID,
		IndexId:      s.Index.ID,
		Columns:      []*kvpb.CopColumnInfo{{Needed: true}},
		HandleOffset: 0,
		KeysOnly:     true,
	}}
}

// batchHandles returns the handles of a handleDAG response's batch.
func batchHandles(b *kvpb.CopBatch) ([]int64, error) {
	n := int(b.GetRows())
	if n == 0 {
		return nil, nil
	}
	if len(b.Columns) != 1 || len(b.Columns[0].Kinds) != n || len(b.Columns[0].Words) != n {
		return nil, errBadHandles
	}
	for _, k := range b.Columns[0].Kinds {
		if types.Kind(k) != types.KindInt64 {
			return nil, errBadHandles
		}
	}
	return b.Columns[0].Words, nil
}

const errBadHandles = errString("exec: coprocessor returned a malformed batch of handles")
