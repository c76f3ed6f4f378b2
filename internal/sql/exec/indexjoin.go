package exec

import (
	"errors"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// indexJoinExec runs an inner index join through an index of the right
// table (plan.Join.LookupIndex): for each batch of left rows it reads, by
// one index range per distinct lookup key, only the right rows that can
// match, applies the right side's filters, and joins the batch against
// them by all the join keys.
//
// A batch's ranges are read together (lookupRows): the index entries of
// all of them through the coprocessor, one request per region carrying
// every range in it, regions (and runs of ranges) concurrently, then the
// rows by handle, one BatchGet per response. Batches start at
// LookupBatchMin left rows and double up to LookupBatchMax, so a join
// whose consumer stops early (a LIMIT) reads little, and a long one sends
// few requests.
type indexJoinExec struct {
	left  Executor
	p     *plan.Join
	colls []*collate.Collation // per key pair (nil: all byte-wise)
	scan  *plan.Scan
	conds []expr.Expr // the filters above the right scan
	out   [][]types.Datum
	done  bool
	// pending are left rows read but not yet joined; size is how many
	// the next batch takes.
	pending  [][]types.Datum
	leftDone bool
	size     int
}

// LookupBatchMin and LookupBatchMax bound the left rows of an index
// join's batch (tests lower them).
var (
	LookupBatchMin = 32
	LookupBatchMax = BatchSize
)

func newIndexJoinExec(left Executor, p *plan.Join, colls []*collate.Collation) *indexJoinExec {
	scan, conds := plan.BaseScan(p.Right)
	return &indexJoinExec{left: left, p: p, colls: colls, scan: scan, conds: conds}
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
	rows, err := lookupRows(c, &s)
	if err != nil {
		return err
	}
	defer rows.close()
	table := map[string][][]types.Datum{}
	var held int64
	defer func() { c.Mem.Release(held) }()
	for {
		batch, err := rows.Next(c)
		if err != nil {
			return err
		}
		if batch == nil {
			break
		}
	next:
		for _, r := range batch {
			for _, cond := range j.conds {
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
			var ok bool
			if key, ok, err = joinKey(c, key[:0], j.p.RightKey, r, j.colls); err != nil {
				return err
			}
			if ok {
				table[string(key)] = append(table[string(key)], r)
			}
		}
	}
	width := len(j.p.Right.Columns())
	for _, l := range left {
		k, ok, err := joinKey(c, key[:0], j.p.LeftKeys, l, j.colls)
		if err != nil {
			return err
		}
		key = k
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

// lookupExec reads the rows of an index lookup of many ranges: the
// handles of their index entries from the coprocessor (it), then the rows
// by handle, one BatchGet per response. With it nil, scan reads the
// ranges one after the other itself.
type lookupExec struct {
	scan *scanExec
	it   kv.CopIterator
}

// lookupRows starts reading the rows of s, an index lookup: through the
// coprocessor when there are several ranges and the transaction can push
// them (no buffered write in the ranges, the coprocessor on, no locking
// read), else by the scan.
func lookupRows(c *Context, s *plan.Scan) (*lookupExec, error) {
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
	it, err := cp.Coprocess(c.Ctx, &kv.CopRequest{
		DAG:         handleDAG(s),
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
	l.it = it
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
		handles, err := batchHandles(resp.Batch)
		if err != nil {
			return nil, err
		}
		rows, err := l.scan.fetch(c, handles)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			return rows, nil
		}
	}
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
