package exec

import (
	"io"
	"strings"

	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Window functions past the quota.
//
// When the rows a windowExec holds take the statement past its quota (and
// it may spill), it stops holding them: the rows, each with a slot per
// function, go through one pass per distinct window (PARTITION BY and
// ORDER BY). A pass sorts its input by the partition keys, then the order
// keys, with sortExec (which writes sorted runs past the quota and merges
// them), and reads the sorted rows one partition at a time: a partition
// that fits is computed in memory as windowExec does; one that does not is
// written to a spill file while whole-partition values (its row count,
// aggregates over the whole partition, first/last/nth values) are
// gathered, then read back once, computing every row's values in order
// (bigPartition). Rows come out partition by partition, as MySQL returns
// them, rather than in input order.
//
// Over a partition larger than the quota, the functions computed are
// ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK, CUME_DIST, NTILE, LAG and
// LEAD (which read the file a second time, offset rows ahead or behind),
// and the aggregates, FIRST_VALUE, LAST_VALUE and NTH_VALUE over the
// default frame or over a frame from UNBOUNDED PRECEDING to CURRENT ROW or
// UNBOUNDED FOLLOWING; with ORDER BY, one group of peers (rows with equal
// ORDER BY values) is held at a time when a value depends on the last
// peer. Frames with offsets or starting after the partition's first row
// fail with 8175 there, as does a group of peers larger than the quota.

// winSource gives windowExec's rows to the first pass: the rows it held,
// the rest of the batch it was reading, then the rest of its input, each
// row with a NULL slot per function.
type winSource struct {
	held, rest   [][]types.Datum
	child        Executor
	width, funcs int
	done         bool
}

// widen returns r with the function slots: in place for a row windowExec
// allocated (owned, with their capacity), a copy for the input's rows,
// whose spare capacity may belong to other rows.
func (s *winSource) widen(r []types.Datum, owned bool) []types.Datum {
	if owned && cap(r) >= s.width+s.funcs && len(r) == s.width {
		r = r[:s.width+s.funcs]
		clear(r[s.width:])
		return r
	}
	out := make([]types.Datum, s.width+s.funcs)
	copy(out, r)
	return out
}

func (s *winSource) Next(c *Context) ([][]types.Datum, error) {
	for i, src := range []*[][]types.Datum{&s.held, &s.rest} {
		if len(*src) > 0 {
			n := min(len(*src), BatchSize)
			out := make([][]types.Datum, n)
			for j, r := range (*src)[:n] {
				out[j] = s.widen(r, i == 0)
			}
			*src = (*src)[n:]
			return out, nil
		}
	}
	if s.done {
		return nil, nil
	}
	b, err := s.child.Next(c)
	if err != nil || b == nil {
		s.done = b == nil
		return nil, err
	}
	out := make([][]types.Datum, len(b))
	for i, r := range b {
		out[i] = s.widen(r, false)
	}
	return out, nil
}

// spillPasses chains one pass per distinct window over src.
func (w *windowExec) spillPasses(src Executor) Executor {
	width := len(w.p.Child.Columns())
	var order []string
	groups := map[string][]int{}
	for i, f := range w.p.Funcs {
		k := windowKey(f)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	in := src
	for _, k := range order {
		fs := groups[k]
		f := w.p.Funcs[fs[0]]
		keys := make([]plan.SortKey, 0, len(f.Partition)+len(f.Order))
		for _, e := range f.Partition {
			keys = append(keys, plan.SortKey{Expr: e})
		}
		keys = append(keys, f.Order...)
		p := &winPass{sort: newSortExec(in, keys), width: width, win: f, pcolls: exprCollations(f.Partition)}
		for _, fi := range fs {
			p.funcs = append(p.funcs, w.p.Funcs[fi])
			p.dsts = append(p.dsts, width+fi)
		}
		p.ocolls = make([]*collate.Collation, len(f.Order))
		for i, k := range f.Order {
			p.ocolls[i] = expr.CollationOf(k.Expr)
		}
		w.passes = append(w.passes, p)
		in = p
	}
	return in
}

// windowKey identifies a window: functions with the same key share a
// pass.
func windowKey(f *plan.WindowFunc) string {
	var b strings.Builder
	for _, e := range f.Partition {
		b.WriteString(e.String())
		b.WriteByte(',')
	}
	b.WriteByte('|')
	for _, k := range f.Order {
		b.WriteString(k.Expr.String())
		if k.Desc {
			b.WriteString(" desc")
		}
		b.WriteByte(',')
	}
	return b.String()
}

// winPass computes the functions of one window over its sorted input.
type winPass struct {
	sort   *sortExec
	width  int
	win    *plan.WindowFunc // the window (its partition and order)
	funcs  []*plan.WindowFunc
	dsts   []int
	pcolls []*collate.Collation
	ocolls []*collate.Collation

	acct    memAcct
	charged bool // the sort spilled: rows read from it are new memory
	started bool
	inDone  bool
	batch   [][]types.Datum
	bi      int
	key     []byte            // partition key of part
	part    [][]types.Datum   // the current partition, while it fits
	big     *bigPartition     // the current partition, once it does not
	out     [][]types.Datum   // rows computed, not yet returned
	spilled *bigPartitionRead // reading a big partition back
	keyBuf  []byte
}

func (p *winPass) partKey(c *Context, buf []byte, row []types.Datum) ([]byte, error) {
	in := row[:p.width]
	for j, e := range p.win.Partition {
		d, err := e.Eval(c.Eval, in)
		if err != nil {
			return nil, err
		}
		if p.pcolls != nil {
			buf = d.AppendHashKeyCollated(buf, p.pcolls[j])
		} else {
			buf = d.AppendHashKey(buf)
		}
	}
	return buf, nil
}

func (p *winPass) Next(c *Context) ([][]types.Datum, error) {
	for {
		if len(p.out) > 0 {
			n := min(len(p.out), BatchSize)
			out := p.out[:n:n]
			p.out = p.out[n:]
			return out, nil
		}
		if p.spilled != nil {
			b, err := p.spilled.next(c)
			if err != nil || b != nil {
				return b, err
			}
			p.spilled = nil
		}
		if p.inDone {
			return nil, nil
		}
		if p.bi >= len(p.batch) {
			if err := c.Ctx.Err(); err != nil {
				return nil, err
			}
			b, err := p.sort.Next(c)
			if err != nil {
				return nil, err
			}
			if !p.started {
				p.started = true
				p.charged = p.sort.merge != nil
			}
			if b == nil {
				p.inDone = true
				if err := p.endPartition(c); err != nil {
					return nil, err
				}
				continue
			}
			p.batch, p.bi = b, 0
		}
		row := p.batch[p.bi]
		p.bi++
		k, err := p.partKey(c, p.keyBuf[:0], row)
		if err != nil {
			return nil, err
		}
		p.keyBuf = k
		if (len(p.part) > 0 || p.big != nil) && string(k) != string(p.key) {
			if err := p.endPartition(c); err != nil {
				return nil, err
			}
		}
		if len(p.part) == 0 && p.big == nil {
			p.key = append(p.key[:0], k...)
		}
		if err := p.add(c, row); err != nil {
			return nil, err
		}
	}
}

// add puts a row into the current partition, moving the partition to a
// spill file when it no longer fits.
func (p *winPass) add(c *Context, row []types.Datum) error {
	if p.big != nil {
		return p.big.add(c, row)
	}
	p.part = append(p.part, row)
	if !p.charged || !p.acct.grow(c, RowSize(row)+64) {
		return nil
	}
	big, err := newBigPartition(c, p)
	if err != nil {
		return err
	}
	for _, r := range p.part {
		if err := big.add(c, r); err != nil {
			return err
		}
	}
	clear(p.part)
	p.part = p.part[:0]
	p.acct.release(c)
	p.big = big
	return nil
}

// endPartition computes the current partition's values.
func (p *winPass) endPartition(c *Context) error {
	if p.big != nil {
		r, err := p.big.finish(c)
		p.acct.disk += p.big.file.bytes
		p.big = nil
		if err != nil {
			return err
		}
		p.spilled = r
		return nil
	}
	if len(p.part) == 0 {
		return nil
	}
	rows := p.part
	ents := make([]winRow, len(rows))
	for i, r := range rows {
		ord := make([]types.Datum, len(p.win.Order))
		for j, k := range p.win.Order {
			d, err := k.Expr.Eval(c.Eval, r[:p.width])
			if err != nil {
				return err
			}
			ord[j] = d
		}
		ents[i] = winRow{idx: i, order: ord}
	}
	var cmpErr error
	cmpOrder := func(a, b *winRow) int {
		return p.cmpOrder(a.order, b.order, &cmpErr)
	}
	for i, f := range p.funcs {
		if err := computePartition(c, f, rows, p.width, p.dsts[i], ents, cmpOrder); err != nil {
			return err
		}
	}
	if cmpErr != nil {
		return cmpErr
	}
	p.out = rows
	p.part = nil
	p.acct.release(c)
	return nil
}

func (p *winPass) cmpOrder(a, b []types.Datum, errp *error) int {
	for j, k := range p.win.Order {
		c, err := compareNullsFirst(a[j], b[j], p.ocolls[j])
		if err != nil && *errp == nil {
			*errp = err
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

// Frames a big partition computes.
const (
	frameWhole   = iota // the whole partition
	frameToPeers        // first row to the current row's last peer
	frameToRow          // first row to the current row
)

// bigFrame classifies f's frame, ok false when a big partition cannot
// compute it.
func bigFrame(f *plan.WindowFunc) (kind int, ok bool) {
	fr := f.Frame
	if fr == nil {
		if len(f.Order) == 0 {
			return frameWhole, true
		}
		return frameToPeers, true
	}
	if !(fr.Start.Unbounded && fr.Start.Preceding) {
		return 0, false
	}
	switch {
	case fr.End.Unbounded && !fr.End.Preceding:
		return frameWhole, true
	case fr.End.Current && fr.Rows:
		return frameToRow, true
	case fr.End.Current && len(f.Order) == 0:
		// RANGE to the current row is to its last peer; without ORDER
		// BY every row is a peer.
		return frameWhole, true
	case fr.End.Current:
		return frameToPeers, true
	}
	return 0, false
}

// bigPartition is a partition being written to a spill file.
type bigPartition struct {
	p     *winPass
	file  *spillFile
	n     int64
	first []types.Datum // the partition's first row
	kinds []int         // per function: its frame
	// Whole-partition values per function: an aggregate's accumulator,
	// FIRST/LAST/NTH_VALUE's value.
	accs  []expr.Accumulator
	vals  []types.Datum
	nth   []int64
	ntile []int64
}

func newBigPartition(c *Context, p *winPass) (*bigPartition, error) {
	b := &bigPartition{p: p, kinds: make([]int, len(p.funcs)), accs: make([]expr.Accumulator, len(p.funcs)),
		vals: make([]types.Datum, len(p.funcs)), nth: make([]int64, len(p.funcs)), ntile: make([]int64, len(p.funcs))}
	for i, f := range p.funcs {
		switch f.Name {
		case "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead":
			continue
		}
		k, ok := bigFrame(f)
		if !ok {
			return nil, c.Mem.overErr()
		}
		b.kinds[i] = k
		if f.Agg != nil && k == frameWhole {
			b.accs[i] = f.Agg.NewAccumulator()
		}
	}
	f, err := c.newSpillFile()
	if err != nil {
		return nil, err
	}
	b.file = f
	return b, nil
}

func (b *bigPartition) add(c *Context, row []types.Datum) error {
	p := b.p
	in := row[:p.width]
	if b.n == 0 {
		b.first = row
		for i, f := range p.funcs {
			var err error
			switch f.Name {
			case "nth_value":
				b.nth[i], err = windowIntArg(c, f, 1, in)
			case "ntile":
				b.ntile[i], err = windowIntArg(c, f, 0, in)
			case "lag", "lead":
				// The offset (default 1), kept in ntile's slot.
				b.ntile[i] = 1
				if len(f.Args) > 1 {
					d, derr := f.Args[1].Eval(c.Eval, in)
					if derr != nil {
						return derr
					}
					if b.ntile[i], derr = d.ToInt64(); derr != nil || d.IsNull() || b.ntile[i] < 0 {
						return errWrongArguments(f.Name)
					}
				}
			}
			if err != nil {
				return err
			}
		}
	}
	for i, f := range p.funcs {
		if b.kinds[i] != frameWhole {
			continue
		}
		var err error
		switch {
		case b.accs[i] != nil:
			err = b.accs[i].Add(c.Eval, in)
		case f.Name == "first_value" && b.n == 0, f.Name == "last_value",
			f.Name == "nth_value" && b.n == b.nth[i]-1:
			b.vals[i], err = f.Args[0].Eval(c.Eval, in)
		}
		if err != nil {
			return err
		}
	}
	b.n++
	return b.file.write(row)
}

// windowIntArg is NTILE's bucket count or NTH_VALUE's N: a positive
// integer.
func windowIntArg(c *Context, f *plan.WindowFunc, arg int, in []types.Datum) (int64, error) {
	d, err := f.Args[arg].Eval(c.Eval, in)
	if err != nil {
		return 0, err
	}
	v, err := d.ToInt64()
	if err != nil || d.IsNull() || v <= 0 {
		return 0, errWrongArguments(f.Name)
	}
	return v, nil
}

// finish returns the reader that computes the partition's rows.
func (b *bigPartition) finish(c *Context) (*bigPartitionRead, error) {
	r, err := b.file.reader()
	if err != nil {
		return nil, err
	}
	rd := &bigPartitionRead{b: b, r: r, accs: make([]expr.Accumulator, len(b.p.funcs)), vals: make([]types.Datum, len(b.p.funcs)),
		cursors: make([]*spillReader, len(b.p.funcs))}
	for i, f := range b.p.funcs {
		if f.Name == "lag" || f.Name == "lead" {
			// A second reader of the file, offset rows ahead of the
			// current row (LEAD) or behind it (LAG).
			cur, err := b.file.readerAt()
			if err != nil {
				return nil, err
			}
			if f.Name == "lead" {
				for k := int64(0); k < b.ntile[i] && k < b.n; k++ {
					if _, err := cur.next(); err != nil {
						return nil, err
					}
				}
			}
			rd.cursors[i] = cur
			continue
		}
		if f.Agg != nil && b.kinds[i] != frameWhole {
			rd.accs[i] = f.Agg.NewAccumulator()
		}
		if b.kinds[i] == frameWhole && f.Agg == nil {
			rd.vals[i] = b.vals[i]
		}
		if b.kinds[i] == frameWhole && b.accs[i] != nil {
			rd.vals[i] = b.accs[i].Result()
		}
	}
	// Peers are held only when a value depends on the current row's last
	// peer.
	if len(b.p.win.Order) > 0 {
		for i, f := range b.p.funcs {
			if f.Name == "cume_dist" || b.kinds[i] == frameToPeers && f.Name != "first_value" {
				rd.peers = true
			}
		}
	}
	return rd, nil
}

// bigPartitionRead reads a big partition back and computes its rows.
type bigPartitionRead struct {
	b     *bigPartition
	r     *spillReader
	acct  memAcct
	i     int64 // index of the next row read
	start int64 // index of the current peer group's first row
	dense int64
	prev  []types.Datum // ORDER BY values of the row before
	peers bool
	group [][]types.Datum // the current peer group (peers) or row
	ahead []types.Datum   // the first row of the next group, read
	accs  []expr.Accumulator
	vals  []types.Datum // per function: its value (whole frames), NTH_VALUE's row once read
	// cursors are LAG's and LEAD's readers of the rows offset from the
	// current one.
	cursors []*spillReader
	done    bool
}

func (rd *bigPartitionRead) order(c *Context, row []types.Datum) ([]types.Datum, error) {
	p := rd.b.p
	ord := make([]types.Datum, len(p.win.Order))
	for j, k := range p.win.Order {
		d, err := k.Expr.Eval(c.Eval, row[:p.width])
		if err != nil {
			return nil, err
		}
		ord[j] = d
	}
	return ord, nil
}

// next returns the next batch of computed rows; nil at the end (the file
// is removed then).
func (rd *bigPartitionRead) next(c *Context) ([][]types.Datum, error) {
	if rd.done {
		return nil, nil
	}
	if err := c.Ctx.Err(); err != nil {
		return nil, err
	}
	var out [][]types.Datum
	for len(out) < BatchSize {
		g, err := rd.readGroup(c)
		if err != nil {
			return nil, err
		}
		if g == nil {
			rd.done = true
			rd.b.file.remove(c)
			rd.acct.release(c)
			break
		}
		if err := rd.compute(c, g); err != nil {
			return nil, err
		}
		out = append(out, g...)
		rd.acct.release(c)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// readGroup reads the next peer group (or, without peers, the next row).
func (rd *bigPartitionRead) readGroup(c *Context) ([][]types.Datum, error) {
	p := rd.b.p
	var g [][]types.Datum
	var gord []types.Datum
	for {
		row := rd.ahead
		rd.ahead = nil
		if row == nil {
			var err error
			if row, err = rd.r.next(); err != nil {
				return nil, err
			}
			if row == nil {
				return g, nil
			}
		}
		var ord []types.Datum
		if len(p.win.Order) > 0 {
			var err error
			if ord, err = rd.order(c, row); err != nil {
				return nil, err
			}
		}
		if len(g) > 0 {
			var cmpErr error
			if p.cmpOrder(gord, ord, &cmpErr) != 0 {
				rd.ahead = row
				return g, cmpErr
			}
		}
		if len(g) == 0 {
			gord = ord
			// Is this row the first of a peer group? Without ORDER BY
			// every row is a peer of the first.
			var cmpErr error
			if rd.i == 0 || len(p.win.Order) > 0 && p.cmpOrder(rd.prev, ord, &cmpErr) != 0 {
				rd.start = rd.i
				rd.dense++
			}
			if cmpErr != nil {
				return nil, cmpErr
			}
			rd.prev = ord
		}
		g = append(g, row)
		if !rd.peers {
			return g, nil
		}
		if rd.acct.grow(c, RowSize(row)) && len(g) >= minSortRun {
			// One group of peers larger than the quota.
			return nil, c.Mem.overErr()
		}
	}
}

// compute sets the function values of group g, whose first row has index
// rd.i.
func (rd *bigPartitionRead) compute(c *Context, g [][]types.Datum) error {
	b, p := rd.b, rd.b.p
	n := b.n
	peerEnd := rd.start // without peers held, only rows whose value does not need it
	if rd.peers {
		peerEnd = rd.i + int64(len(g)) - 1
	}
	if len(p.win.Order) == 0 {
		peerEnd = n - 1
	}
	// Frames to the last peer take in the whole group first.
	for i, f := range p.funcs {
		if b.kinds[i] != frameToPeers {
			continue
		}
		for k, row := range g {
			if err := rd.take(c, i, f, row, rd.i+int64(k)); err != nil {
				return err
			}
		}
	}
	for k, row := range g {
		idx := rd.i + int64(k)
		for i, f := range p.funcs {
			var v types.Datum
			switch f.Name {
			case "row_number":
				v = types.NewInt(idx + 1)
			case "rank":
				v = types.NewInt(rd.start + 1)
			case "dense_rank":
				v = types.NewInt(rd.dense)
			case "percent_rank":
				x := 0.0
				if n > 1 {
					x = float64(rd.start) / float64(n-1)
				}
				v = types.NewFloat(x)
			case "cume_dist":
				v = types.NewFloat(float64(peerEnd+1) / float64(n))
			case "ntile":
				v = types.NewInt(ntileOf(idx, n, b.ntile[i]))
			case "lag", "lead":
				var err error
				if v, err = rd.offsetValue(c, i, f, row, idx); err != nil {
					return err
				}
			default:
				switch b.kinds[i] {
				case frameWhole:
					v = rd.vals[i]
				case frameToRow:
					if err := rd.take(c, i, f, row, idx); err != nil {
						return err
					}
					fallthrough
				case frameToPeers:
					var err error
					if v, err = rd.value(c, i, f, row, g); err != nil {
						return err
					}
				}
			}
			row[p.dsts[i]] = v
		}
	}
	rd.i += int64(len(g))
	return nil
}

// take adds row (index idx) to function i's running frame.
func (rd *bigPartitionRead) take(c *Context, i int, f *plan.WindowFunc, row []types.Datum, idx int64) error {
	in := row[:rd.b.p.width]
	if rd.accs[i] != nil {
		return rd.accs[i].Add(c.Eval, in)
	}
	var err error
	switch f.Name {
	case "last_value":
		rd.vals[i], err = f.Args[0].Eval(c.Eval, in)
	case "nth_value":
		if idx == rd.b.nth[i]-1 {
			rd.vals[i], err = f.Args[0].Eval(c.Eval, in)
		}
	}
	return err
}

// value is function i's value over its running frame, every row of which
// has been taken.
func (rd *bigPartitionRead) value(c *Context, i int, f *plan.WindowFunc, row []types.Datum, g [][]types.Datum) (types.Datum, error) {
	if rd.accs[i] != nil {
		return rd.accs[i].Result(), nil
	}
	if f.Name == "first_value" {
		// Every frame computed here starts at the partition's first row.
		return f.Args[0].Eval(c.Eval, rd.b.first[:rd.b.p.width])
	}
	return rd.vals[i], nil
}

// ntileOf is the bucket of row idx of n rows in buckets buckets.
func ntileOf(idx, n, buckets int64) int64 {
	size, extra := n/buckets, n%buckets
	if idx < extra*(size+1) {
		return idx/(size+1) + 1
	}
	return extra + (idx-extra*(size+1))/size + 1
}

func errWrongArguments(name string) error {
	return sqlerr.New(sqlerr.ErWrongArguments, "HY000", "Incorrect arguments to %s", name)
}

// offsetValue is LAG's or LEAD's value for row idx: the argument over the
// row offset rows before or after it, or the default.
func (rd *bigPartitionRead) offsetValue(c *Context, i int, f *plan.WindowFunc, row []types.Datum, idx int64) (types.Datum, error) {
	off, n := rd.b.ntile[i], rd.b.n
	j := idx + off
	if f.Name == "lag" {
		j = idx - off
	}
	if j >= 0 && j < n {
		other, err := rd.cursors[i].next()
		if err != nil {
			return types.Datum{}, err
		}
		if other == nil {
			return types.Datum{}, spillErr(io.ErrUnexpectedEOF)
		}
		return f.Args[0].Eval(c.Eval, other[:rd.b.p.width])
	}
	if len(f.Args) > 2 {
		return f.Args[2].Eval(c.Eval, row[:rd.b.p.width])
	}
	return types.Datum{}, nil
}
