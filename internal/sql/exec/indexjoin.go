package exec

import (
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// indexJoinExec runs an inner index join through an index of the right
// table (plan.Join.LookupIndex): for each batch of left rows it reads, by
// one index range per distinct lookup key, only the right rows that can
// match, applies the right side's filters, and joins the batch against
// them by all the join keys.
type indexJoinExec struct {
	left  Executor
	p     *plan.Join
	colls []*collate.Collation // per key pair (nil: all byte-wise)
	scan  *plan.Scan
	conds []expr.Expr // the filters above the right scan
	out   [][]types.Datum
	done  bool
}

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
		batch, err := j.left.Next(c)
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

// join reads the right rows for one batch of left rows and appends the
// joined rows to j.out.
func (j *indexJoinExec) join(c *Context, left [][]types.Datum) error {
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
	rows := newScanExec(&s)
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
			if err := c.Mem.Consume(RowSize(r)); err != nil {
				return err
			}
			held += RowSize(r)
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
