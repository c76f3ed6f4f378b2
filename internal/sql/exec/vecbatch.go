package exec

import (
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
)

// minVecBatch is the smallest batch evaluated with expr.Vec: a point
// lookup's one-row batches keep the row path and never build one.
const minVecBatch = 16

// vecBatch evaluates an operator's expressions over a whole batch of rows
// with expr.Vec (one expression node at a time over every row) instead of
// row by row. It keeps expr.Vec's contract: when a batch's evaluation
// fails or warns, eval drops its values and warnings and returns nil, and
// the operator evaluates that batch row by row, which reports errors and
// warnings in MySQL's order.
type vecBatch struct {
	tried bool        // vecs was built (or could not be)
	vecs  []*expr.Vec // nil: some expression cannot be batch-evaluated
	all   []int
	out   [][]types.Datum
}

// evalBatch returns, per expression, its values for the rows of batch, or
// nil when the operator is to evaluate the batch row by row. The values are
// valid until the next call. *b is the operator's state, made at its first
// batch big enough: an operator that only ever sees a point lookup's row
// carries a nil pointer, not the state.
func evalBatch(c *Context, b **vecBatch, batch [][]types.Datum, es ...expr.Expr) [][]types.Datum {
	if len(batch) < minVecBatch || c.Eval == nil || c.NoVec {
		return nil
	}
	if *b == nil {
		*b = &vecBatch{}
	}
	return (*b).eval(c, batch, es...)
}

func (b *vecBatch) eval(c *Context, batch [][]types.Datum, es ...expr.Expr) [][]types.Datum {
	if !b.tried {
		b.tried = true
		computed := false
		for _, e := range es {
			switch e.(type) {
			case *expr.Column, *expr.Constant:
			default:
				computed = true
			}
		}
		if !computed {
			// Copying columns gains nothing from batches.
			return nil
		}
		vecs := make([]*expr.Vec, len(es))
		for i, e := range es {
			if vecs[i] = expr.NewVec(e); vecs[i] == nil {
				return nil
			}
		}
		b.vecs = vecs
		b.out = make([][]types.Datum, len(es))
	}
	if b.vecs == nil {
		return nil
	}
	for len(b.all) < len(batch) {
		b.all = append(b.all, len(b.all))
	}
	sel := b.all[:len(batch)]
	var w0 int
	if ws := c.Eval.Warnings; ws != nil {
		w0 = len(*ws)
	}
	for i, v := range b.vecs {
		vals, err := v.Eval(c.Eval, batch, sel)
		if err != nil {
			b.undo(c, w0)
			return nil
		}
		b.out[i] = vals
	}
	if ws := c.Eval.Warnings; ws != nil && len(*ws) != w0 {
		b.undo(c, w0)
		return nil
	}
	return b.out
}

// undo drops the warnings a failed batch evaluation added.
func (b *vecBatch) undo(c *Context, w0 int) {
	if ws := c.Eval.Warnings; ws != nil {
		*ws = (*ws)[:w0]
	}
}
