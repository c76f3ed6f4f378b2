package exec

import (
	"slices"

	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// windowExec materialises its input, computes each window function over
// the rows sorted by (partition, order) keys, and returns the input rows in
// their input order, each followed by the functions' values.
//
// Frames: the default frame is the whole partition without ORDER BY and
// RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW (the current row and
// its peers) with it. ROWS frames count rows; RANGE frames with offsets
// compare the single ORDER BY key numerically. Aggregates over a frame
// starting at the partition's first row are accumulated as the frame
// grows; other frames are recomputed for every row (cost rows x frame).
type windowExec struct {
	child Executor
	p     *plan.Window
	done  bool

	// Past the quota the rows go through the passes of windowspill.go
	// instead: spilled is the last of them.
	acct    memAcct
	passes  []*winPass
	spilled Executor
}

func (w *windowExec) memStats() (peak, disk int64) {
	peak, disk = w.acct.peak, w.acct.disk
	for _, p := range w.passes {
		peak = max(peak, p.acct.peak, p.sort.acct.peak)
		disk += p.acct.disk + p.sort.acct.disk
	}
	return peak, disk
}

func (w *windowExec) Next(c *Context) ([][]types.Datum, error) {
	if w.spilled != nil {
		return w.spilled.Next(c)
	}
	if w.done {
		return nil, nil
	}
	w.done = true
	var rows [][]types.Datum
	for {
		batch, err := w.child.Next(c)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			break
		}
		for bi, r := range batch {
			out := make([]types.Datum, len(r), len(r)+len(w.p.Funcs))
			copy(out, r)
			rows = append(rows, out)
			if w.acct.grow(c, RowSize(r)+int64(24*len(w.p.Funcs))+64) {
				if !c.canSpill() {
					return nil, c.Mem.overErr()
				}
				// The rows held and the rest of the input go through
				// external sorts, one per window (windowspill.go).
				w.acct.release(c)
				w.spilled = w.spillPasses(&winSource{held: rows, rest: batch[bi+1:], child: w.child,
					width: len(w.p.Child.Columns()), funcs: len(w.p.Funcs)})
				return w.spilled.Next(c)
			}
		}
	}
	width := len(w.p.Child.Columns())
	for range w.p.Funcs {
		for i := range rows {
			rows[i] = append(rows[i], types.Datum{})
		}
	}
	for fi, f := range w.p.Funcs {
		if err := computeWindow(c, f, rows, width, width+fi); err != nil {
			return nil, err
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	// The rows now belong to the consumer.
	w.acct.release(c)
	return rows, nil
}

// winRow is a row with its partition and order key values.
type winRow struct {
	idx   int
	part  []byte
	order []types.Datum
}

func computeWindow(c *Context, f *plan.WindowFunc, rows [][]types.Datum, width, dst int) error {
	pcolls := exprCollations(f.Partition)
	ocolls := make([]*collate.Collation, len(f.Order))
	for i, k := range f.Order {
		ocolls[i] = expr.CollationOf(k.Expr)
	}
	ents := make([]winRow, len(rows))
	for i, r := range rows {
		in := r[:width]
		var key []byte
		for j, e := range f.Partition {
			d, err := e.Eval(c.Eval, in)
			if err != nil {
				return err
			}
			if pcolls != nil {
				key = d.AppendHashKeyCollated(key, pcolls[j])
			} else {
				key = d.AppendHashKey(key)
			}
		}
		ord := make([]types.Datum, len(f.Order))
		for j, k := range f.Order {
			d, err := k.Expr.Eval(c.Eval, in)
			if err != nil {
				return err
			}
			ord[j] = d
		}
		ents[i] = winRow{idx: i, part: key, order: ord}
	}
	var cmpErr error
	cmpOrder := func(a, b *winRow) int {
		for j, k := range f.Order {
			c, err := compareNullsFirst(a.order[j], b.order[j], ocolls[j])
			if err != nil && cmpErr == nil {
				cmpErr = err
			}
			if c != 0 {
				if k.Desc {
					return -c
				}
				return c
			}
		}
		return 0
	}
	slices.SortStableFunc(ents, func(a, b winRow) int {
		if c := compareBytes(a.part, b.part); c != 0 {
			return c
		}
		return cmpOrder(&a, &b)
	})
	if cmpErr != nil {
		return cmpErr
	}
	for start := 0; start < len(ents); {
		end := start + 1
		for end < len(ents) && string(ents[end].part) == string(ents[start].part) {
			end++
		}
		if err := computePartition(c, f, rows, width, dst, ents[start:end], cmpOrder); err != nil {
			return err
		}
		start = end
	}
	return nil
}

func compareBytes(a, b []byte) int {
	switch {
	case string(a) < string(b):
		return -1
	case string(a) > string(b):
		return 1
	}
	return 0
}

func computePartition(c *Context, f *plan.WindowFunc, rows [][]types.Datum, width, dst int, part []winRow, cmpOrder func(a, b *winRow) int) error {
	n := len(part)
	in := func(i int) []types.Datum { return rows[part[i].idx][:width] }
	set := func(i int, d types.Datum) { rows[part[i].idx][dst] = d }
	// peers[i] = [first, last] index of row i's peer group (equal ORDER BY
	// keys; the whole partition without ORDER BY).
	peerStart := make([]int, n)
	peerEnd := make([]int, n)
	for i := 0; i < n; {
		j := i + 1
		for j < n && (len(f.Order) == 0 || cmpOrder(&part[i], &part[j]) == 0) {
			j++
		}
		for k := i; k < j; k++ {
			peerStart[k], peerEnd[k] = i, j-1
		}
		i = j
	}
	switch f.Name {
	case "row_number":
		for i := 0; i < n; i++ {
			set(i, types.NewInt(int64(i+1)))
		}
		return nil
	case "rank":
		for i := 0; i < n; i++ {
			set(i, types.NewInt(int64(peerStart[i]+1)))
		}
		return nil
	case "dense_rank":
		rank := int64(0)
		for i := 0; i < n; i++ {
			if peerStart[i] == i {
				rank++
			}
			set(i, types.NewInt(rank))
		}
		return nil
	case "percent_rank":
		for i := 0; i < n; i++ {
			v := 0.0
			if n > 1 {
				v = float64(peerStart[i]) / float64(n-1)
			}
			set(i, types.NewFloat(v))
		}
		return nil
	case "cume_dist":
		for i := 0; i < n; i++ {
			set(i, types.NewFloat(float64(peerEnd[i]+1)/float64(n)))
		}
		return nil
	case "ntile":
		d, err := f.Args[0].Eval(c.Eval, in(0))
		if err != nil {
			return err
		}
		buckets, err := d.ToInt64()
		if err != nil || d.IsNull() || buckets <= 0 {
			return sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to ntile")
		}
		size, extra := int64(n)/buckets, int64(n)%buckets
		row := int64(0)
		for b := int64(1); b <= buckets && row < int64(n); b++ {
			cnt := size
			if b <= extra {
				cnt++
			}
			for k := int64(0); k < cnt && row < int64(n); k++ {
				set(int(row), types.NewInt(b))
				row++
			}
		}
		return nil
	case "lag", "lead":
		offset := int64(1)
		if len(f.Args) > 1 {
			d, err := f.Args[1].Eval(c.Eval, in(0))
			if err != nil {
				return err
			}
			if offset, err = d.ToInt64(); err != nil || d.IsNull() || offset < 0 {
				return sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to %s", f.Name)
			}
		}
		if f.Name == "lag" {
			offset = -offset
		}
		for i := 0; i < n; i++ {
			j := int64(i) + offset
			var v types.Datum
			var err error
			if j >= 0 && j < int64(n) {
				v, err = f.Args[0].Eval(c.Eval, in(int(j)))
			} else if len(f.Args) > 2 {
				v, err = f.Args[2].Eval(c.Eval, in(i))
			}
			if err != nil {
				return err
			}
			set(i, v)
		}
		return nil
	}
	// Functions over a frame: first_value, last_value, nth_value,
	// aggregates.
	frame, err := newFrameBounds(c, f, part, in, peerStart, peerEnd)
	if err != nil {
		return err
	}
	var nth int64
	if f.Name == "nth_value" {
		d, err := f.Args[1].Eval(c.Eval, in(0))
		if err != nil {
			return err
		}
		if nth, err = d.ToInt64(); err != nil || d.IsNull() || nth <= 0 {
			return sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to nth_value")
		}
	}
	// A growing frame (from the partition's start) feeds one accumulator.
	var acc expr.Accumulator
	fed := 0
	for i := 0; i < n; i++ {
		lo, hi := frame(i)
		if lo > hi || lo >= n || hi < 0 {
			if f.Agg != nil {
				set(i, f.Agg.NewAccumulator().Result())
			} else {
				set(i, types.Datum{})
			}
			continue
		}
		switch f.Name {
		case "first_value":
			v, err := f.Args[0].Eval(c.Eval, in(lo))
			if err != nil {
				return err
			}
			set(i, v)
			continue
		case "last_value":
			v, err := f.Args[0].Eval(c.Eval, in(hi))
			if err != nil {
				return err
			}
			set(i, v)
			continue
		case "nth_value":
			var v types.Datum
			if j := lo + int(nth) - 1; j <= hi {
				if v, err = f.Args[0].Eval(c.Eval, in(j)); err != nil {
					return err
				}
			}
			set(i, v)
			continue
		}
		if lo == 0 && acc != nil && hi >= fed-1 {
			for ; fed <= hi; fed++ {
				if err := acc.Add(c.Eval, in(fed)); err != nil {
					return err
				}
			}
			set(i, acc.Result())
			continue
		}
		a := f.Agg.NewAccumulator()
		for j := lo; j <= hi; j++ {
			if err := a.Add(c.Eval, in(j)); err != nil {
				return err
			}
		}
		if lo == 0 {
			acc, fed = a, hi+1
		}
		set(i, a.Result())
	}
	return nil
}

// newFrameBounds returns, for a row of the partition, the first and last
// row of its frame (lo > hi: empty).
func newFrameBounds(c *Context, f *plan.WindowFunc, part []winRow, in func(int) []types.Datum, peerStart, peerEnd []int) (func(int) (int, int), error) {
	n := len(part)
	fr := f.Frame
	if fr == nil {
		if len(f.Order) == 0 {
			return func(int) (int, int) { return 0, n - 1 }, nil
		}
		return func(i int) (int, int) { return 0, peerEnd[i] }, nil
	}
	offset := func(b plan.FrameBound) (types.Datum, error) {
		if b.Offset == nil {
			return types.Datum{}, nil
		}
		d, err := b.Offset.Eval(c.Eval, in(0))
		if err != nil {
			return d, err
		}
		if d.IsNull() {
			return d, sqlerr.New(3586, "HY000", "Window frame offsets must be non-negative constants.")
		}
		if neg, _ := types.Compare(d, types.NewInt(0)); neg < 0 {
			return d, sqlerr.New(3586, "HY000", "Window frame offsets must be non-negative constants.")
		}
		return d, nil
	}
	so, err := offset(fr.Start)
	if err != nil {
		return nil, err
	}
	eo, err := offset(fr.End)
	if err != nil {
		return nil, err
	}
	if fr.Rows {
		rowBound := func(b plan.FrameBound, off types.Datum, i int, start bool) int {
			switch {
			case b.Unbounded && b.Preceding:
				return 0
			case b.Unbounded:
				return n - 1
			case b.Current:
				return i
			}
			k, _ := off.ToInt64()
			if b.Preceding {
				return i - int(k)
			}
			return i + int(k)
		}
		return func(i int) (int, int) {
			lo := max(rowBound(fr.Start, so, i, true), 0)
			hi := min(rowBound(fr.End, eo, i, false), n-1)
			return lo, hi
		}, nil
	}
	// RANGE: peers, or rows whose single ORDER BY key lies within the
	// offsets of the current row's.
	desc := len(f.Order) == 1 && f.Order[0].Desc
	key := func(i int) types.Datum {
		if len(part[i].order) == 0 {
			return types.Datum{}
		}
		return part[i].order[0]
	}
	shifted := func(i int, off types.Datum, preceding bool) (types.Datum, error) {
		v, err := key(i).ToDecimal()
		if err != nil {
			return types.Datum{}, err
		}
		o, err := off.ToDecimal()
		if err != nil {
			return types.Datum{}, err
		}
		if preceding != desc {
			o = o.Neg()
		}
		return types.NewDecimal(v.Add(o)), nil
	}
	// before reports whether row j sorts before value v in window order.
	before := func(j int, v types.Datum) bool {
		c, _ := types.Compare(key(j), v)
		if desc {
			return c > 0
		}
		return c < 0
	}
	after := func(j int, v types.Datum) bool {
		c, _ := types.Compare(key(j), v)
		if desc {
			return c < 0
		}
		return c > 0
	}
	var ferr error
	bound := func(b plan.FrameBound, off types.Datum, i int, start bool) int {
		switch {
		case b.Unbounded && b.Preceding:
			return 0
		case b.Unbounded:
			return n - 1
		case b.Current:
			if start {
				return peerStart[i]
			}
			return peerEnd[i]
		}
		if key(i).IsNull() {
			if start {
				return peerStart[i]
			}
			return peerEnd[i]
		}
		v, err := shifted(i, off, b.Preceding)
		if err != nil {
			ferr = err
			return i
		}
		if start {
			j := 0
			for j < n && (key(j).IsNull() || before(j, v)) {
				j++
			}
			return j
		}
		j := n - 1
		for j >= 0 && (!key(j).IsNull() && after(j, v)) {
			j--
		}
		return j
	}
	return func(i int) (int, int) {
		lo := bound(fr.Start, so, i, true)
		hi := bound(fr.End, eo, i, false)
		if ferr != nil {
			return 1, 0
		}
		return lo, hi
	}, nil
}
