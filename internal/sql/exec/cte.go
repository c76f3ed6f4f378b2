package exec

import (
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// maxRecursion is MySQL's default cte_max_recursion_depth.
const maxRecursion = 1000

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
type recursiveCTEExec struct {
	p    *plan.RecursiveCTE
	out  valuesExec
	done bool
}

func (r *recursiveCTEExec) Next(c *Context) ([][]types.Datum, error) {
	if !r.done {
		r.done = true
		if err := r.run(c); err != nil {
			return nil, err
		}
	}
	return r.out.Next(c)
}

func (r *recursiveCTEExec) run(c *Context) error {
	var seen map[string]struct{}
	if r.p.Distinct {
		seen = map[string]struct{}{}
	}
	var key []byte
	keep := func(rows [][]types.Datum) ([][]types.Datum, error) {
		kept := rows[:0]
		for _, row := range rows {
			if seen != nil {
				key = hashRow(key[:0], row)
				if _, dup := seen[string(key)]; dup {
					continue
				}
				seen[string(key)] = struct{}{}
			}
			kept = append(kept, row)
		}
		return kept, nil
	}
	seed, err := Query(c, r.p.Seed)
	if err != nil {
		return err
	}
	work, err := keep(seed)
	if err != nil {
		return err
	}
	all := append([][]types.Datum(nil), work...)
	for round := 0; len(work) > 0; round++ {
		if round >= maxRecursion {
			return sqlerr.New(3636, "HY000", "Recursive query aborted after %d iterations. Try increasing @@cte_max_recursion_depth to a larger value.", round+1)
		}
		r.p.Work.Rows = work
		next, err := Query(c, r.p.Rec)
		if err != nil {
			return err
		}
		if work, err = keep(next); err != nil {
			return err
		}
		all = append(all, work...)
	}
	r.p.Work.Rows = nil
	r.out.rows = all
	return nil
}
