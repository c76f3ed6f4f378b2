package exec

import (
	"github.com/strata-db/strata/internal/coprocessor"
	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
	"github.com/strata-db/strata/kvpb"
)

// CopPagingRows bounds the rows (an aggregation's: groups) of one
// coprocessor response; tests lower it to make every region page.
var CopPagingRows = 4 * BatchSize

// copExec runs a plan.CopRead: it sends the fragment to every region of
// the table (kv.Coprocessor) and turns the column batches that come back
// into rows: an aggregation's partial rows are merged here (the final
// phase of a two-phase aggregation), other rows are widened to the table's
// row layout. When the transaction cannot push the fragment, or
// Context.CopConcurrency is 0, it runs the plan's Fallback instead.
type copExec struct {
	p        *plan.CopRead
	started  bool
	fallback Executor
	it       kv.CopIterator
	// out: an aggregation's final rows, handed out BatchSize at a time.
	out  [][]types.Datum
	done bool
}

func (e *copExec) Next(c *Context) ([][]types.Datum, error) {
	if !e.started {
		e.started = true
		if err := e.start(c); err != nil {
			return nil, err
		}
	}
	if e.fallback != nil {
		return e.fallback.Next(c)
	}
	if e.p.Agg != nil {
		return e.nextAgg(c)
	}
	for !e.done {
		resp, err := e.it.Next(c.Ctx)
		if err != nil {
			e.it.Close()
			return nil, err
		}
		if resp == nil {
			e.done = true
			e.it.Close()
			break
		}
		e.warn(c, resp.Warnings)
		rows, err := coprocessor.DecodeBatch(resp.Batch, 0)
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			continue
		}
		return e.widen(rows), nil
	}
	return nil, nil
}

// start sends the fragment, or builds the fallback.
func (e *copExec) start(c *Context) error {
	cp, ok := c.Txn.(kv.Coprocessor)
	if ok && c.CopConcurrency > 0 {
		prefix := tablecodec.RecordPrefix(e.p.Scan.Table.ID)
		ranges := []kv.KeyRange{{Start: prefix, End: tablecodec.PrefixEnd(prefix)}}
		if e.p.Scan.Access == plan.IndexLookup {
			// The index ranges, as the scan would read them.
			s := newScanExec(e.p.Scan)
			if err := s.computeRanges(c); err != nil {
				return err
			}
			ranges = ranges[:0]
			for _, r := range s.ranges {
				ranges = append(ranges, kv.KeyRange{Start: r[0], End: r[1]})
			}
		}
		req := &kv.CopRequest{
			DAG:         e.p.DAG,
			Ranges:      ranges,
			Concurrency: c.CopConcurrency,
			// In key order, so that rows and groups come out in the
			// order the plan without the coprocessor gives them (a
			// stable sort's ties, GROUP BY without ORDER BY).
			KeepOrder:  true,
			PagingRows: CopPagingRows,
		}
		it, err := cp.Coprocess(c.Ctx, req)
		if err != nil {
			return err
		}
		if it != nil {
			e.it = it
			return nil
		}
	}
	f, err := Build(e.p.Fallback)
	if err != nil {
		return err
	}
	e.fallback = f
	return nil
}

func (e *copExec) warn(c *Context, ws []*kvpb.CopError) {
	for _, w := range ws {
		c.Eval.Warn(coprocessor.ErrorFromPB(w))
	}
}

// widen turns rows of the fragment's output columns (the scan's needed
// columns) into rows of the table's layout, the others NULL.
func (e *copExec) widen(rows [][]types.Datum) [][]types.Datum { return widenRows(e.p.Scan, rows) }

// widenRows turns rows of a fragment that reads s's needed columns into
// rows of the table's layout, the others NULL.
func widenRows(s *plan.Scan, rows [][]types.Datum) [][]types.Datum {
	t := s.Table
	width := len(t.Columns)
	needed := s.Needed
	slab := make([]types.Datum, width*len(rows))
	out := make([][]types.Datum, len(rows))
	for i, r := range rows {
		row := slab[i*width : (i+1)*width : (i+1)*width]
		j := 0
		for off := 0; off < width; off++ {
			if needed == nil || needed[off] {
				row[off] = r[j]
				j++
			}
		}
		out[i] = row
	}
	return out
}

// nextAgg merges every region's partial rows, then hands out the final
// rows. The merge holds a row per group; when those pass the statement's
// memory quota and the statement may spill, it lets them go and runs the
// plan's Fallback instead (the aggregation in SQL, which spills to disk).
func (e *copExec) nextAgg(c *Context) ([][]types.Datum, error) {
	if !e.done {
		e.done = true
		a := e.p.Agg
		final := coprocessor.NewFinalAgg(a.GroupBy, a.Aggs, e.p.FirstRow, len(e.p.Scan.Table.Columns))
		defer e.it.Close()
		var held int64
		for {
			resp, err := e.it.Next(c.Ctx)
			if err != nil {
				return nil, err
			}
			if resp == nil {
				break
			}
			e.warn(c, resp.Warnings)
			rows, err := coprocessor.DecodeBatch(resp.Batch, 0)
			if err != nil {
				return nil, err
			}
			fresh, err := final.Add(rows)
			if err != nil {
				return nil, err
			}
			// The partial rows of a group seen before are folded in and
			// let go.
			for _, i := range fresh {
				size := RowSize(rows[i])
				held += size
				if err := c.Mem.Consume(size); err != nil {
					c.Mem.Release(held)
					if !c.canSpill() {
						return nil, err
					}
					f, berr := Build(e.p.Fallback)
					if berr != nil {
						return nil, berr
					}
					e.fallback = f
					return f.Next(c)
				}
			}
		}
		e.out = final.Rows()
	}
	if len(e.out) == 0 {
		return nil, nil
	}
	n := min(len(e.out), BatchSize)
	batch := e.out[:n:n]
	e.out = e.out[n:]
	return batch, nil
}
