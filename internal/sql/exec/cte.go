package exec

import (
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// DefaultMaxRecursion is MySQL's default cte_max_recursion_depth.
const DefaultMaxRecursion = 1000

// valuesExec returns constant rows (copies, since consumers may keep and
// change them).
type valuesExec struct {
	rows [][]types.Datum
	pos  int
}

func (v *valuesExec) Next(*Context) ([][]types.Datum, error) {
	if v.pos >= len(v.rows) {
		return nil, nil
	}
	end := min(v.pos+BatchSize, len(v.rows))
	out := make([][]types.Datum, 0, end-v.pos)
	for _, r := range v.rows[v.pos:end] {
		out = append(out, append([]types.Datum(nil), r...))
	}
	v.pos = end
	return out, nil
}

// recursiveCTEExec runs a recursive CTE to its fixed point, then returns
// every row produced.
//
// Memory: it holds the rows of the round being run and of the round
// before (which the recursive part reads), the rows of earlier rounds,
// and under UNION (distinct) the key of every row produced. Past the
// quota, the rows of earlier rounds move to a spill file, where the rest
// follow; the two rounds and the keys stay in memory, and past the quota
// without earlier rounds to move the statement fails with 8175.
type recursiveCTEExec struct {
	p    *plan.RecursiveCTE
	out  Executor
	done bool
	acct memAcct

	all  [][]types.Datum // rows of the rounds before, in memory
	file *spillFile      // or on disk
	// Bytes charged for the rows of all (not the previous round's), the
	// previous round's and the current one's.
	oldBytes, prevBytes, curBytes int64
}

func (r *recursiveCTEExec) memStats() (peak, disk int64) { return r.acct.peak, r.acct.disk }

func (r *recursiveCTEExec) Next(c *Context) ([][]types.Datum, error) {
	if !r.done {
		r.done = true
		if err := r.run(c); err != nil {
			return nil, err
		}
	}
	b, err := r.out.Next(c)
	if b == nil && err == nil {
		r.acct.release(c)
	}
	return b, err
}

// shrink gives back n of the bytes a holds.
func (a *memAcct) shrink(c *Context, n int64) {
	a.held -= n
	c.Mem.Release(n)
}

// charge charges n bytes of the current round; past the quota it moves
// the earlier rounds' rows to disk, and fails when that is not enough.
func (r *recursiveCTEExec) charge(c *Context, n int64) error {
	if !r.acct.grow(c, n) {
		return nil
	}
	if !c.canSpill() {
		return c.Mem.overErr()
	}
	if r.file == nil {
		f, err := c.newSpillFile()
		if err != nil {
			return err
		}
		r.file = f
		for _, row := range r.all {
			if err := f.write(row); err != nil {
				return err
			}
		}
		r.all = nil
		r.acct.shrink(c, r.oldBytes)
		r.oldBytes = 0
	}
	if c.Mem.Used() > c.Mem.Limit && r.curBytes+r.prevBytes > int64(minSortRun)*64 {
		// Two rounds (and the keys of the rows seen) hold the quota.
		return c.Mem.overErr()
	}
	return nil
}

// endRound makes the current round's rows the previous round's, adding
// them to the output.
func (r *recursiveCTEExec) endRound(c *Context, rows [][]types.Datum) error {
	if r.file != nil {
		// The previous round's rows are on disk: let them go.
		r.acct.shrink(c, r.prevBytes)
		for _, row := range rows {
			if err := r.file.write(row); err != nil {
				return err
			}
		}
	} else {
		r.oldBytes += r.prevBytes
		r.all = append(r.all, rows...)
	}
	r.prevBytes, r.curBytes = r.curBytes, 0
	return nil
}

func (r *recursiveCTEExec) run(c *Context) error {
	var seen map[string]struct{}
	if r.p.Distinct {
		seen = map[string]struct{}{}
	}
	var key []byte
	colls := columnCollations(r.p.Columns())
	// round runs p, keeping the rows not seen before.
	round := func(p plan.Plan) ([][]types.Datum, error) {
		e, err := Build(p)
		if err != nil {
			return nil, err
		}
		var kept [][]types.Datum
		for {
			if err := c.Ctx.Err(); err != nil {
				return nil, err
			}
			batch, err := e.Next(c)
			if err != nil {
				return nil, err
			}
			if batch == nil {
				return kept, nil
			}
			for _, row := range batch {
				size := RowSize(row)
				if seen != nil {
					key = hashRow(key[:0], row, colls)
					if _, dup := seen[string(key)]; dup {
						continue
					}
					seen[string(key)] = struct{}{}
					// The key stays for the statement: charged, never
					// counted as a round's.
					if err := r.charge(c, int64(len(key))+16); err != nil {
						return nil, err
					}
				}
				r.curBytes += size
				if err := r.charge(c, size); err != nil {
					return nil, err
				}
				kept = append(kept, row)
			}
		}
	}
	work, err := round(r.p.Seed)
	if err != nil {
		return err
	}
	if err := r.endRound(c, work); err != nil {
		return err
	}
	limit := c.MaxRecursion
	if limit <= 0 {
		limit = DefaultMaxRecursion
	}
	for n := 0; len(work) > 0; n++ {
		if n >= limit {
			return sqlerr.New(3636, "HY000", "Recursive query aborted after %d iterations. Try increasing @@cte_max_recursion_depth to a larger value.", n+1)
		}
		r.p.Work.Rows = work
		next, err := round(r.p.Rec)
		if err != nil {
			return err
		}
		if err := r.endRound(c, next); err != nil {
			return err
		}
		work = next
	}
	r.p.Work.Rows = nil
	if r.file != nil {
		r.acct.disk += r.file.bytes
		r.acct.shrink(c, r.prevBytes)
		r.prevBytes = 0
		r.out = &spillScan{file: r.file}
		return nil
	}
	r.out = &valuesExec{rows: r.all}
	r.all = nil
	return nil
}
