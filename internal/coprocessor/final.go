package coprocessor

import (
	"fmt"

	"github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/types"
)

// FinalAgg is the second phase of a two-phase aggregation: it merges the
// partial rows the regions returned (the output of a CopAgg) into the
// rows of the SQL layer's aggregation: the aggregate results, then a
// first row of the group (width datums by column offset, the first_row
// columns filled). It is not safe for concurrent use.
type FinalAgg struct {
	groupN   int
	groupCol []*collate.Collation
	funcs    []*expr.AggFunc
	colls    []*collate.Collation
	firstRow []int
	width    int

	groups map[string]*finalGroup
	order  []*finalGroup
	keyBuf []byte
}

type finalGroup struct {
	first  []types.Datum // firstRow values
	counts []int64
	reals  []float64
	decs   []*types.Decimal
	seen   []bool // a non-NULL partial sum or extreme arrived
	vals   []types.Datum
}

// NewFinalAgg returns the merge of a fragment aggregating by groupBy with
// funcs (each count, sum, avg, min or max; the SQL layer's own, for their
// result types), returning the first_row offsets of rows of width
// columns.
func NewFinalAgg(groupBy []expr.Expr, funcs []*expr.AggFunc, firstRow []int, width int) *FinalAgg {
	m := &FinalAgg{groupN: len(groupBy), funcs: funcs, firstRow: firstRow, width: width, groups: make(map[string]*finalGroup)}
	for _, g := range groupBy {
		m.groupCol = append(m.groupCol, expr.CollationOf(g))
	}
	for _, f := range funcs {
		var c *collate.Collation
		if len(f.Args) == 1 {
			c = expr.CollationOf(f.Args[0])
		}
		m.colls = append(m.colls, c)
	}
	return m
}

func isReal(f *expr.AggFunc) bool {
	t := f.Type().GetType()
	return t == mysql.TypeDouble || t == mysql.TypeFloat
}

// Add merges partial rows; fresh is how many of them started a group (the
// rows the merge holds on to).
func (m *FinalAgg) Add(rows [][]types.Datum) (fresh []int, err error) {
	want := m.groupN + len(m.firstRow)
	for _, f := range m.funcs {
		want += PartialWidth(f.Name)
	}
	for ri, row := range rows {
		if len(row) < want {
			return nil, fmt.Errorf("coprocessor: partial aggregate row of %d values, want %d", len(row), want)
		}
		m.keyBuf = m.keyBuf[:0]
		for i := 0; i < m.groupN; i++ {
			m.keyBuf = row[i].AppendHashKeyCollated(m.keyBuf, m.groupCol[i])
		}
		g, ok := m.groups[string(m.keyBuf)]
		if !ok {
			n := len(m.funcs)
			g = &finalGroup{counts: make([]int64, n), reals: make([]float64, n), decs: make([]*types.Decimal, n),
				seen: make([]bool, n), vals: make([]types.Datum, n)}
			g.first = append(g.first, row[want-len(m.firstRow):want]...)
			m.groups[string(m.keyBuf)] = g
			m.order = append(m.order, g)
			fresh = append(fresh, ri)
		}
		p := m.groupN
		for i, f := range m.funcs {
			d := row[p]
			switch f.Name {
			case "count":
				g.counts[i] += d.Int()
			case "sum", "avg":
				if !d.IsNull() {
					if err := g.addSum(i, isReal(f), d); err != nil {
						return nil, err
					}
				}
				if f.Name == "avg" {
					g.counts[i] += row[p+1].Int()
				}
			case "min", "max":
				if d.IsNull() {
					break
				}
				if !g.seen[i] {
					g.vals[i], g.seen[i] = d, true
					break
				}
				c, err := types.CompareCollated(d, g.vals[i], m.colls[i])
				if err != nil {
					return nil, err
				}
				if (f.Name == "min" && c < 0) || (f.Name == "max" && c > 0) {
					g.vals[i] = d
				}
			}
			p += PartialWidth(f.Name)
		}
	}
	return fresh, nil
}

func (g *finalGroup) addSum(i int, real bool, d types.Datum) error {
	g.seen[i] = true
	if real {
		f, err := d.ToFloat64()
		if err != nil {
			return err
		}
		g.reals[i] += f
		return nil
	}
	dec, err := d.ToDecimal()
	if err != nil {
		return err
	}
	if g.decs[i] == nil {
		g.decs[i] = dec
	} else {
		g.decs[i] = g.decs[i].Add(dec)
	}
	return nil
}

// Rows returns the final rows: one per group, or exactly one without
// GROUP BY (an empty input gives COUNT 0 and NULL for the others).
func (m *FinalAgg) Rows() [][]types.Datum {
	if m.groupN == 0 && len(m.order) == 0 {
		n := len(m.funcs)
		m.order = append(m.order, &finalGroup{counts: make([]int64, n), reals: make([]float64, n), decs: make([]*types.Decimal, n),
			seen: make([]bool, n), vals: make([]types.Datum, n)})
	}
	out := make([][]types.Datum, 0, len(m.order))
	for _, g := range m.order {
		row := make([]types.Datum, len(m.funcs)+m.width)
		for i, f := range m.funcs {
			row[i] = m.result(g, i, f)
		}
		for j, off := range m.firstRow {
			if j < len(g.first) {
				row[len(m.funcs)+off] = g.first[j]
			}
		}
		out = append(out, row)
	}
	return out
}

func (m *FinalAgg) result(g *finalGroup, i int, f *expr.AggFunc) types.Datum {
	switch f.Name {
	case "count":
		return types.NewInt(g.counts[i])
	case "min", "max":
		return g.vals[i]
	}
	if !g.seen[i] || (f.Name == "avg" && g.counts[i] == 0) {
		return types.Datum{}
	}
	if isReal(f) {
		if f.Name == "avg" {
			return types.NewFloat(g.reals[i] / float64(g.counts[i]))
		}
		return types.NewFloat(g.reals[i])
	}
	total := g.decs[i]
	if f.Name == "avg" {
		q, _ := total.Div(types.NewDecimalFromInt(g.counts[i]), types.DivPrecisionIncrement)
		total = q
	}
	if want := f.Type().GetDecimal(); want >= 0 && total.Scale() != want {
		total = total.Round(want)
	}
	return types.NewDecimal(total)
}
