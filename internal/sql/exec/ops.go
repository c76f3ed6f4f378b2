package exec

import (
	"encoding/binary"
	"math"
	"slices"

	pmysql "github.com/pingcap/tidb/pkg/parser/mysql"

	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqljson"
	"github.com/strata-db/strata/internal/sql/types"
)

type filterExec struct {
	child Executor
	cond  expr.Expr
	// byRange is the scan under a plan.Filter.ByRange conjunct: when its
	// range is exact, every row it returns satisfies cond.
	byRange *scanExec
	// batch evaluates cond over batches of rows (vecbatch.go).
	batch *vecBatch
}

// scanUnder returns the scan at the bottom of a chain of filters, or nil.
func scanUnder(e Executor) *scanExec {
	for {
		switch x := e.(type) {
		case *filterExec:
			e = x.child
		case *analyzeExec:
			e = x.inner
		case *scanExec:
			return x
		default:
			return nil
		}
	}
}

func (f *filterExec) Next(c *Context) ([][]types.Datum, error) {
	for {
		batch, err := f.child.Next(c)
		if err != nil || batch == nil {
			return nil, err
		}
		if f.byRange != nil && f.byRange.exact {
			return batch, nil
		}
		if vals := evalBatch(c, &f.batch, batch, f.cond); vals != nil {
			out := batch[:0]
			for j, d := range vals[0] {
				t, null, err := d.ToBool()
				if err != nil {
					return nil, err
				}
				if t && !null {
					out = append(out, batch[j])
				}
			}
			if len(out) > 0 {
				return out, nil
			}
			continue
		}
		out := batch[:0]
		for _, r := range batch {
			ok, err := truth(c, f.cond, r)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, r)
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
}

// truth evaluates a condition with WHERE semantics (NULL is false).
func truth(c *Context, e expr.Expr, row []types.Datum) (bool, error) {
	return truthEv(c.Eval, e, row)
}

func truthEv(ev *expr.EvalContext, e expr.Expr, row []types.Datum) (bool, error) {
	d, err := e.Eval(ev, row)
	if err != nil {
		return false, err
	}
	t, null, err := d.ToBool()
	if err != nil {
		return false, err
	}
	return t && !null, nil
}

type projectionExec struct {
	child Executor
	exprs []expr.Expr
	batch *vecBatch
}

func (p *projectionExec) Next(c *Context) ([][]types.Datum, error) {
	batch, err := p.child.Next(c)
	if err != nil || batch == nil {
		return nil, err
	}
	out := make([][]types.Datum, len(batch))
	vals := make([]types.Datum, len(batch)*len(p.exprs))
	if cols := evalBatch(c, &p.batch, batch, p.exprs...); cols != nil {
		w := len(p.exprs)
		for i := range batch {
			row := vals[i*w : (i+1)*w : (i+1)*w]
			for j, col := range cols {
				row[j] = col[i]
			}
			out[i] = row
		}
		return out, nil
	}
	for i, r := range batch {
		row := vals[i*len(p.exprs) : (i+1)*len(p.exprs) : (i+1)*len(p.exprs)]
		for j, e := range p.exprs {
			if row[j], err = e.Eval(c.Eval, r); err != nil {
				return nil, err
			}
		}
		out[i] = row
	}
	return out, nil
}

// exprCollations returns the collation of each expression's text (see
// expr.CollationOf), or nil when none is collated: callers then take
// their byte-wise path.
func exprCollations(es []expr.Expr) []*collate.Collation {
	var out []*collate.Collation
	for i, e := range es {
		if c := expr.CollationOf(e); c != nil {
			if out == nil {
				out = make([]*collate.Collation, len(es))
			}
			out[i] = c
		}
	}
	return out
}

// columnCollations is exprCollations for the output columns of a plan.
func columnCollations(cols []*plan.Column) []*collate.Collation {
	var out []*collate.Collation
	for i, col := range cols {
		if c := types.CollationOf(col.Type); c != nil {
			if out == nil {
				out = make([]*collate.Collation, len(cols))
			}
			out[i] = c
		}
	}
	return out
}

// compareEnumNullsFirst orders ENUM values by member index, as MySQL
// sorts them, NULL first.
func compareEnumNullsFirst(a, b types.Datum, elems []string) (int, error) {
	if a.IsNull() || b.IsNull() {
		return compareNullsFirst(a, b, nil)
	}
	index := func(d types.Datum) int {
		s := string(d.Bytes())
		for i, e := range elems {
			if e == s {
				return i
			}
		}
		return -1
	}
	ia, ib := index(a), index(b)
	switch {
	case ia < ib:
		return -1, nil
	case ia > ib:
		return 1, nil
	}
	return 0, nil
}

// compareJSONNullsFirst orders JSON texts as JSON values (numbers
// numerically, then strings, ...), SQL NULL first.
func compareJSONNullsFirst(a, b types.Datum) (int, error) {
	if a.IsNull() || b.IsNull() {
		return compareNullsFirst(a, b, nil)
	}
	va, err := sqljson.Parse(a.Bytes())
	if err != nil {
		return compareNullsFirst(a, b, nil)
	}
	vb, err := sqljson.Parse(b.Bytes())
	if err != nil {
		return compareNullsFirst(a, b, nil)
	}
	return sqljson.Compare(va, vb), nil
}

// compareNullsFirst orders NULL before every value, text under coll.
func compareNullsFirst(a, b types.Datum, coll *collate.Collation) (int, error) {
	switch {
	case a.IsNull() && b.IsNull():
		return 0, nil
	case a.IsNull():
		return -1, nil
	case b.IsNull():
		return 1, nil
	}
	return types.CompareCollated(a, b, coll)
}

// sortExec orders its input by the sort keys (stably: rows with equal keys
// keep their input order) and, under a LIMIT, keeps only the first
// offset+count rows (top-N).
//
// It sorts small entries (a row index and a prefix of its first key) with
// slices.SortStableFunc rather than the rows with sort.SliceStable: the same
// algorithm, so the same order whatever the comparisons, without reflection
// and without moving pointers. The prefix is an unsigned integer whose order
// is the first key's order (see prefixes): most comparisons stop there.
//
// With distinct > 0 it also does the work of a DISTINCT over the first
// distinct columns below it (Build fuses them when every sort key is one of
// those columns): see dedupe.
type sortExec struct {
	child Executor
	keys  []plan.SortKey
	limit *plan.Limit
	// cols is the row offset of every key when all keys are plain columns
	// (the planner's usual shape): keys are then read from the rows in
	// place. Otherwise vals holds the key values, row i's at
	// vals[i*len(keys):].
	cols     []int
	maxCol   int
	distinct int
	// colls is the collation of each key (nil: all byte-wise); dcolls
	// that of each of the first distinct columns.
	colls  []*collate.Collation
	dcolls []*collate.Collation
	// jsonKeys marks keys of JSON type, ordered as JSON values; enumKeys
	// holds the members of ENUM keys, ordered by member index (nil: none).
	jsonKeys []bool
	enumKeys [][]string
	rows     [][]types.Datum
	vals     []types.Datum
	ents     []sortEnt // rows in sorted order
	err      error
	done     bool
	pos      int
	// batch evaluates key expressions over an input batch (vecbatch.go);
	// keyExprs are the keys' expressions.
	batch    *vecBatch
	keyExprs []expr.Expr

	acct  memAcct
	runs  []*spillFile // sorted runs on disk (sortspill.go)
	merge *runMerger   // merging them
}

func (s *sortExec) memStats() (peak, disk int64) { return s.acct.peak, s.acct.disk }

// sortEnt is a row to sort: its index and the prefix of its first key.
type sortEnt struct {
	prefix uint64
	row    int
}

func newSortExec(child Executor, keys []plan.SortKey) *sortExec {
	s := &sortExec{child: child, keys: keys}
	for i, k := range keys {
		if k.Expr.Type().GetType() == pmysql.TypeJSON {
			if s.jsonKeys == nil {
				s.jsonKeys = make([]bool, len(keys))
			}
			s.jsonKeys[i] = true
		}
		if k.Expr.Type().GetType() == pmysql.TypeEnum {
			if s.enumKeys == nil {
				s.enumKeys = make([][]string, len(keys))
			}
			s.enumKeys[i] = k.Expr.Type().GetElems()
		}
		if c := expr.CollationOf(k.Expr); c != nil {
			if s.colls == nil {
				s.colls = make([]*collate.Collation, len(keys))
			}
			s.colls[i] = c
		}
	}
	cols := make([]int, len(keys))
	for i, k := range keys {
		c, ok := k.Expr.(*expr.Column)
		if !ok {
			return s
		}
		cols[i] = c.Idx
		s.maxCol = max(s.maxCol, c.Idx)
	}
	s.cols = cols
	return s
}

// key returns key i of row r.
func (s *sortExec) key(r, i int) types.Datum {
	if s.cols != nil {
		return s.rows[r][s.cols[i]]
	}
	return s.vals[r*len(s.keys)+i]
}

// compare orders rows a and b by the keys, NULLs first.
func (s *sortExec) compare(a, b int) int {
	for i := range s.keys {
		if c := s.cmpKey(i, s.key(a, i), s.key(b, i)); c != 0 {
			return c
		}
	}
	return 0
}

// cmpKey orders two values of key i (descending keys reversed); an error
// is kept in s.err.
func (s *sortExec) cmpKey(i int, a, b types.Datum) int {
	var coll *collate.Collation
	if s.colls != nil {
		coll = s.colls[i]
	}
	var c int
	var err error
	switch {
	case s.jsonKeys != nil && s.jsonKeys[i]:
		c, err = compareJSONNullsFirst(a, b)
	case s.enumKeys != nil && s.enumKeys[i] != nil:
		c, err = compareEnumNullsFirst(a, b, s.enumKeys[i])
	default:
		c, err = compareNullsFirst(a, b, coll)
	}
	if err != nil && s.err == nil {
		s.err = err
	}
	if s.keys[i].Desc {
		return -c
	}
	return c
}

func (s *sortExec) compareEnts(a, b sortEnt) int {
	if a.prefix != b.prefix {
		if (a.prefix < b.prefix) != s.keys[0].Desc {
			return -1
		}
		return 1
	}
	return s.compare(a.row, b.row)
}

// prefixes gives every row the prefix of its first key: when that key is
// NULL or a string in every row, its first 8 bytes big-endian (zero
// padded; of its collation key when collated), and when it is NULL or a signed integer in every row, the
// integer with its sign bit flipped. Either way a smaller prefix means a
// smaller key under compareNullsFirst (NULL has the smallest prefix, 0,
// and strings compare byte-wise), and equal prefixes say nothing. With
// other kinds, or mixed ones, every prefix is 0 and compare decides.
func (s *sortExec) prefixes() {
	const (
		none = iota
		str
		integer
		mixed
	)
	class := none
	if len(s.keys) == 0 || (s.jsonKeys != nil && s.jsonKeys[0]) || (s.enumKeys != nil && s.enumKeys[0] != nil) {
		class = mixed
	}
	for r := range s.rows {
		if class == mixed {
			break
		}
		k := s.key(r, 0)
		c := mixed
		switch {
		case k.IsNull():
			continue
		case k.IsStringLike():
			c = str
		case k.Kind() == types.KindInt64:
			c = integer
		}
		if class != none && c != class {
			class = mixed
			break
		}
		class = c
	}
	var coll *collate.Collation
	if s.colls != nil {
		coll = s.colls[0]
	}
	for r := range s.rows {
		var p uint64
		if class == mixed {
			s.ents = append(s.ents, sortEnt{row: r})
			continue
		}
		if k := s.key(r, 0); !k.IsNull() {
			switch class {
			case str:
				if coll != nil && k.Kind() == types.KindString {
					p = coll.KeyPrefix(k.Bytes())
					break
				}
				var b [8]byte
				copy(b[:], k.Bytes())
				p = binary.BigEndian.Uint64(b[:])
			case integer:
				p = uint64(k.Int()) ^ 1<<63
			}
		}
		s.ents = append(s.ents, sortEnt{prefix: p, row: r})
	}
}

// sort fills s.ents with the rows in sorted order.
func (s *sortExec) sort() {
	s.ents = slices.Grow(s.ents[:0], len(s.rows))
	s.prefixes()
	slices.SortStableFunc(s.ents, s.compareEnts)
}

// dedupe drops, from the sorted rows, every row whose first distinct
// columns equal those of an earlier row, as distinctExec would have before
// the sort: rows DISTINCT finds equal (same hash key) have equal sort keys,
// the sort keys being among those columns, so they sit in one run of rows
// with equal sort keys, where the stable sort kept their input order; the
// first of them stays. A run of one row, the usual case, needs no hashing.
func (s *sortExec) dedupe(c *Context) error {
	kept := s.ents[:0]
	run := 0 // kept[run:] is the current run
	var seen map[string]struct{}
	var key []byte
	for _, e := range s.ents {
		if len(kept) > run && s.compare(kept[run].row, e.row) != 0 {
			run = len(kept)
			clear(seen)
		}
		if len(kept) > run {
			if seen == nil {
				seen = map[string]struct{}{}
			}
			if len(seen) == 0 {
				for _, k := range kept[run:] {
					seen[string(hashRow(key[:0], s.rows[k.row][:s.distinct], s.dcolls))] = struct{}{}
				}
			}
			key = hashRow(key[:0], s.rows[e.row][:s.distinct], s.dcolls)
			if _, dup := seen[string(key)]; dup {
				continue
			}
			if err := c.Mem.Consume(int64(len(key)) + 16); err != nil {
				return err
			}
			seen[string(key)] = struct{}{}
		}
		kept = append(kept, e)
	}
	s.ents = kept
	return nil
}

// truncate keeps the first n rows of the sorted order (top-N), rebuilding
// rows and vals in that order.
func (s *sortExec) truncate(n int) {
	rows := make([][]types.Datum, n, max(2*n, n+BatchSize))
	var vals []types.Datum
	if s.cols == nil {
		vals = make([]types.Datum, 0, cap(rows)*len(s.keys))
	}
	for i, e := range s.ents[:n] {
		rows[i] = s.rows[e.row]
		if s.cols == nil {
			vals = append(vals, s.vals[e.row*len(s.keys):(e.row+1)*len(s.keys)]...)
		}
	}
	s.rows, s.vals = rows, vals
}

// add collects one input row and its key values; keys, when not nil,
// holds them already, evaluated with the batch's other rows (key k of the
// row at keys[k][i]).
func (s *sortExec) add(c *Context, r []types.Datum, keys [][]types.Datum, i int) (size int64, err error) {
	if s.cols != nil {
		if s.maxCol >= len(r) {
			// A row too short for a key: the column's own error.
			for _, k := range s.keys {
				if _, err := k.Expr.Eval(c.Eval, r); err != nil {
					return 0, err
				}
			}
		}
		s.rows = append(s.rows, r)
		return RowSize(r) + int64(24+40*len(s.keys)), nil
	}
	n := len(s.vals)
	if keys != nil {
		for _, vec := range keys {
			s.vals = append(s.vals, vec[i])
		}
		s.rows = append(s.rows, r)
		return RowSize(r) + RowSize(s.vals[n:]), nil
	}
	for _, k := range s.keys {
		v, err := k.Expr.Eval(c.Eval, r)
		if err != nil {
			return 0, err
		}
		s.vals = append(s.vals, v)
	}
	s.rows = append(s.rows, r)
	return RowSize(r) + RowSize(s.vals[n:]), nil
}

func (s *sortExec) Next(c *Context) ([][]types.Datum, error) {
	if !s.done {
		s.done = true
		keep := int64(-1)
		if s.limit != nil {
			n, off, err := limitValues(c, s.limit)
			if err != nil {
				return nil, err
			}
			keep = n + off
		}
		for {
			batch, err := s.child.Next(c)
			if err != nil {
				return nil, err
			}
			if batch == nil {
				break
			}
			s.rows = slices.Grow(s.rows, len(batch))
			if s.cols == nil {
				s.vals = slices.Grow(s.vals, len(batch)*len(s.keys))
			}
			var keys [][]types.Datum
			if s.cols == nil {
				if s.keyExprs == nil {
					for _, k := range s.keys {
						s.keyExprs = append(s.keyExprs, k.Expr)
					}
				}
				keys = evalBatch(c, &s.batch, batch, s.keyExprs...)
			}
			for i, r := range batch {
				size, err := s.add(c, r, keys, i)
				if err != nil {
					return nil, err
				}
				if keep < 0 || int64(len(s.rows)) <= keep {
					if s.acct.grow(c, size) {
						if !c.canSpill() {
							return nil, c.Mem.overErr()
						}
						if len(s.rows) >= minSortRun {
							if err := s.spillRun(c); err != nil {
								return nil, err
							}
						}
					}
				}
			}
			// Top-N: drop rows that cannot make it (not under DISTINCT,
			// where a dropped row could be needed after duplicates go).
			if keep >= 0 && s.distinct == 0 && int64(len(s.rows)) > 2*keep+BatchSize {
				s.sort()
				s.truncate(int(keep))
			}
		}
		if len(s.runs) > 0 {
			if len(s.rows) > 0 {
				if err := s.spillRun(c); err != nil {
					return nil, err
				}
			}
			m, err := s.startMerge(c)
			if err != nil {
				return nil, err
			}
			s.merge = m
		} else {
			s.sort()
			if s.distinct > 0 && s.err == nil {
				if err := s.dedupe(c); err != nil {
					return nil, err
				}
			}
		}
		if s.err != nil {
			return nil, s.err
		}
		if keep >= 0 && int64(len(s.ents)) > keep {
			s.ents = s.ents[:keep]
		}
	}
	if s.merge != nil {
		return s.merge.next(c)
	}
	if s.pos >= len(s.ents) {
		s.acct.release(c)
		return nil, nil
	}
	end := min(s.pos+BatchSize, len(s.ents))
	out := make([][]types.Datum, 0, end-s.pos)
	for _, e := range s.ents[s.pos:end] {
		out = append(out, s.rows[e.row])
	}
	s.pos = end
	return out, nil
}

func limitValues(c *Context, l *plan.Limit) (count, offset int64, err error) {
	d, err := l.Count.Eval(c.Eval, nil)
	if err != nil {
		return 0, 0, err
	}
	if count, err = limitInt(d); err != nil {
		return 0, 0, err
	}
	if l.Offset != nil {
		if d, err = l.Offset.Eval(c.Eval, nil); err != nil {
			return 0, 0, err
		}
		if offset, err = limitInt(d); err != nil {
			return 0, 0, err
		}
	}
	return max(count, 0), max(offset, 0), nil
}

// limitInt is a LIMIT or OFFSET value. LIMIT takes unsigned 64-bit values:
// one beyond the int64 range (LIMIT 0, 18446744073709551615, the idiom
// for "all rows after the offset") means no bound.
func limitInt(d types.Datum) (int64, error) {
	if d.Kind() == types.KindUint64 {
		return int64(min(d.Uint(), math.MaxInt64)), nil
	}
	return d.ToInt64()
}

type limitExec struct {
	child   Executor
	p       *plan.Limit
	started bool
	skip    int64
	left    int64
}

func (l *limitExec) Next(c *Context) ([][]types.Datum, error) {
	if !l.started {
		l.started = true
		var err error
		if l.left, l.skip, err = limitValues(c, l.p); err != nil {
			return nil, err
		}
	}
	for l.left > 0 {
		batch, err := l.child.Next(c)
		if err != nil || batch == nil {
			return nil, err
		}
		if l.skip > 0 {
			if int64(len(batch)) <= l.skip {
				l.skip -= int64(len(batch))
				continue
			}
			batch = batch[l.skip:]
			l.skip = 0
		}
		if int64(len(batch)) > l.left {
			batch = batch[:l.left]
		}
		l.left -= int64(len(batch))
		return batch, nil
	}
	return nil, nil
}

type distinctExec struct {
	child Executor
	n     int
	colls []*collate.Collation
	seen  map[string]struct{}

	// Spilling (spill.go): past the quota, rows whose key is not held go
	// to partition files, each deduplicated on its own afterwards.
	depth   int
	acct    memAcct
	parts   *partitions
	inDone  bool
	pending []*spillFile
	sub     *distinctExec
}

func (d *distinctExec) memStats() (peak, disk int64) { return d.acct.peak, d.acct.disk }

// hashRow appends the hash key of row, text value i keyed under colls[i]
// (colls nil: byte-wise).
func hashRow(buf []byte, row []types.Datum, colls []*collate.Collation) []byte {
	if colls == nil {
		for _, d := range row {
			buf = d.AppendHashKey(buf)
		}
		return buf
	}
	for i, d := range row {
		var coll *collate.Collation
		if i < len(colls) {
			coll = colls[i]
		}
		buf = d.AppendHashKeyCollated(buf, coll)
	}
	return buf
}

func (d *distinctExec) Next(c *Context) ([][]types.Datum, error) {
	if d.seen == nil {
		d.seen = map[string]struct{}{}
	}
	var key []byte
	for !d.inDone {
		batch, err := d.child.Next(c)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			d.inDone = true
			d.seen = nil
			d.acct.release(c)
			if d.parts != nil {
				d.acct.disk += d.parts.bytes()
				for _, f := range d.parts.files {
					if f != nil {
						d.pending = append(d.pending, f)
					}
				}
			}
			break
		}
		out := batch[:0]
		for _, r := range batch {
			key = hashRow(key[:0], r[:d.n], d.colls)
			if _, dup := d.seen[string(key)]; dup {
				continue
			}
			if d.parts != nil {
				if err := d.parts.write(c, d.parts.of(key), r); err != nil {
					return nil, err
				}
				continue
			}
			d.seen[string(key)] = struct{}{}
			if d.acct.grow(c, int64(len(key))+16) {
				if !c.canSpill() || d.depth >= maxSpillDepth {
					return nil, c.Mem.overErr()
				}
				d.parts = newPartitions()
			}
			out = append(out, r)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	for {
		if d.sub != nil {
			b, err := d.sub.Next(c)
			if err != nil || b != nil {
				return b, err
			}
			d.acct.peak = max(d.acct.peak, d.sub.acct.peak)
			d.acct.disk += d.sub.acct.disk
			d.sub = nil
		}
		if len(d.pending) == 0 {
			return nil, nil
		}
		f := d.pending[0]
		d.pending = d.pending[1:]
		d.sub = &distinctExec{child: &spillScan{file: f}, n: d.n, colls: d.colls, depth: d.depth + 1}
	}
}

type joinExec struct {
	left, right Executor
	p           *plan.Join
	rightWidth  int
	colls       []*collate.Collation // per key pair (nil: all byte-wise)
	built       bool
	all         [][]types.Datum            // nested loop: every right row
	table       map[string][][]types.Datum // hash join: right rows by key

	// Probe state, so that one left row matching many right rows is
	// emitted across several batches.
	batch      [][]types.Datum
	li         int // current left row in batch
	candidates [][]types.Datum
	ci         int // next candidate of the current left row
	matched    bool
	leftDone   bool

	// Index join: the right table's scan and the filters above it.
	lookupScan  *plan.Scan
	lookupConds []expr.Expr

	// Spilling (joinspill.go): past the quota the build side moves to
	// partition files (rparts), the probe side follows (lparts), and
	// partitions are joined one at a time by sub.
	depth       int
	acct        memAcct
	rparts      *partitions
	lparts      *partitions
	part        int
	sub         *joinExec
	nl          *nlSpill // nested loop: the inner rows on disk
	workers     int      // parallel probe workers used (0: serial)
	par         *joinPar
	leftBatches int
	pair        []types.Datum // a semi or anti join's joined row under test
}

func (j *joinExec) memStats() (peak, disk int64) { return j.acct.peak, j.acct.disk }

// lookup fetches, for one batch of left rows, the right rows whose
// clustered key equals the lookup key, and hashes them like a hash join's
// build side.
func (j *joinExec) lookup(c *Context, left [][]types.Datum) error {
	ft := j.lookupScan.Table.Columns[j.lookupScan.Table.HandleOffset].Type
	handles := make([]int64, 0, len(left))
	seen := make(map[int64]bool, len(left))
	for _, l := range left {
		d, err := j.p.LeftKeys[j.p.Lookup].Eval(c.Eval, l)
		if err != nil {
			return err
		}
		h, ok := exactHandle(d, ft)
		if !ok || seen[h] {
			continue
		}
		seen[h] = true
		handles = append(handles, h)
	}
	rows, err := newScanExec(j.lookupScan).fetch(c, handles)
	if err != nil {
		return err
	}
	j.table = make(map[string][][]types.Datum, len(rows))
	var key []byte
next:
	for _, r := range rows {
		for _, cond := range j.lookupConds {
			ok, err := truth(c, cond, r)
			if err != nil {
				return err
			}
			if !ok {
				continue next
			}
		}
		var ok bool
		if key, ok, err = joinKey(c, key[:0], j.p.RightKey, r, j.colls); err != nil {
			return err
		}
		if ok {
			j.table[string(key)] = append(j.table[string(key)], r)
		}
	}
	return nil
}

func (j *joinExec) build(c *Context) error {
	j.built = true
	if j.p.Lookup >= 0 {
		j.lookupScan, j.lookupConds = plan.BaseScan(j.p.Right)
		return nil
	}
	if len(j.p.LeftKeys) > 0 {
		j.table = map[string][][]types.Datum{}
	}
	var key []byte
	for {
		batch, err := j.right.Next(c)
		if err != nil {
			return err
		}
		if batch == nil {
			return nil
		}
		for _, r := range batch {
			if j.table == nil {
				if j.nl != nil {
					if err := j.nl.file.write(r); err != nil {
						return err
					}
					continue
				}
				j.all = append(j.all, r)
				if j.acct.grow(c, RowSize(r)) {
					if err := j.spillInner(c); err != nil {
						return err
					}
				}
				continue
			}
			var ok bool
			if key, ok, err = joinKey(c, key[:0], j.p.RightKey, r, j.colls); err != nil {
				return err
			}
			if !ok {
				continue
			}
			if j.rparts != nil {
				if err := j.rparts.write(c, j.rparts.of(key), r); err != nil {
					return err
				}
				continue
			}
			if j.p.Cond == nil && j.p.Type.LeftOnly() {
				// Any row of a key answers a semi or anti join
				// without a residual condition: one is kept.
				if _, dup := j.table[string(key)]; dup {
					continue
				}
			}
			j.table[string(key)] = append(j.table[string(key)], r)
			if j.acct.grow(c, RowSize(r)) {
				if err := j.spillBuild(c); err != nil {
					return err
				}
			}
		}
	}
}

// joinKey hashes the key values of a row; ok=false when one is NULL (such
// rows never match).
func joinKey(c *Context, buf []byte, keys []expr.Expr, row []types.Datum, colls []*collate.Collation) ([]byte, bool, error) {
	return joinKeyEv(c.Eval, buf, keys, row, colls)
}

func joinKeyEv(ev *expr.EvalContext, buf []byte, keys []expr.Expr, row []types.Datum, colls []*collate.Collation) ([]byte, bool, error) {
	for i, k := range keys {
		d, err := k.Eval(ev, row)
		if err != nil {
			return nil, false, err
		}
		if d.IsNull() {
			return buf, false, nil
		}
		if colls != nil {
			buf = d.AppendHashKeyCollated(buf, colls[i])
		} else {
			buf = d.AppendHashKey(buf)
		}
	}
	return buf, true, nil
}

func (j *joinExec) Next(c *Context) ([][]types.Datum, error) {
	if !j.built {
		if err := j.build(c); err != nil {
			return nil, err
		}
	}
	if j.rparts != nil {
		return j.nextSpilled(c)
	}
	if j.nl != nil {
		return j.nextNL(c)
	}
	if j.par != nil {
		return j.par.next(c)
	}
	var out [][]types.Datum
	var cat rowConcat
	var key []byte
	emit := func(l, r []types.Datum) []types.Datum { return cat.concat(l, r, j.rightWidth) }
	for len(out) < BatchSize {
		if j.li >= len(j.batch) {
			if j.leftDone {
				break
			}
			if j.parallelReady(c) {
				j.par = newJoinPar(c, j)
				break
			}
			if err := c.Ctx.Err(); err != nil {
				return nil, err
			}
			b, err := j.left.Next(c)
			if err != nil {
				return nil, err
			}
			if b == nil {
				j.leftDone = true
				break
			}
			j.leftBatches++
			j.batch, j.li, j.ci, j.candidates = b, 0, 0, nil
			if j.lookupScan != nil {
				if err := j.lookup(c, b); err != nil {
					return nil, err
				}
			}
			if err := j.startRow(c, &key); err != nil {
				return nil, err
			}
			continue
		}
		l := j.batch[j.li]
		if j.p.Type.LeftOnly() {
			matched, err := j.semiMatch(c, c.Eval, l, j.candidates, &j.pair)
			if err != nil {
				return nil, err
			}
			if matched == (j.p.Type == plan.SemiJoin) {
				out = append(out, l)
			}
			j.ci = len(j.candidates)
		}
		for j.ci < len(j.candidates) && len(out) < BatchSize {
			if j.ci&4095 == 4095 {
				// A nested loop may test millions of pairs for one
				// batch: a KILL or a closed client must stop it.
				if err := c.Ctx.Err(); err != nil {
					return nil, err
				}
			}
			r := j.candidates[j.ci]
			j.ci++
			row := emit(l, r)
			if j.p.Cond != nil {
				ok, err := truth(c, j.p.Cond, row)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
			}
			j.matched = true
			out = append(out, row)
		}
		if j.ci < len(j.candidates) {
			break // batch full; resume this left row next time
		}
		if !j.matched && j.p.Type == plan.LeftJoin {
			out = append(out, emit(l, nil))
		}
		j.li++
		if err := j.startRow(c, &key); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		if j.par != nil {
			return j.par.next(c)
		}
		j.acct.release(c)
		return nil, nil
	}
	return out, nil
}

// semiMatch reports whether some candidate right row matches left row l
// (Cond true on the pair, or no Cond): a semi join keeps l when one does,
// an anti join when none does. pair is scratch space for the joined row,
// which is not kept.
func (j *joinExec) semiMatch(c *Context, ev *expr.EvalContext, l []types.Datum, cands [][]types.Datum, pair *[]types.Datum) (bool, error) {
	if j.p.Cond == nil {
		return len(cands) > 0, nil
	}
	for i, r := range cands {
		if i&4095 == 4095 {
			if err := c.Ctx.Err(); err != nil {
				return false, err
			}
		}
		row := append(append((*pair)[:0], l...), r...)
		*pair = row
		ok, err := truthEv(ev, j.p.Cond, row)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// startRow looks up the join candidates of the current left row.
func (j *joinExec) startRow(c *Context, key *[]byte) error {
	j.ci, j.matched = 0, false
	if j.li >= len(j.batch) {
		j.candidates = nil
		return nil
	}
	if j.table == nil {
		j.candidates = j.all
		return nil
	}
	k, ok, err := joinKey(c, (*key)[:0], j.p.LeftKeys, j.batch[j.li], j.colls)
	if err != nil {
		return err
	}
	*key = k
	j.candidates = nil
	if ok {
		j.candidates = j.table[string(k)]
	}
	return nil
}

type setOpExec struct {
	left, right Executor
	p           *plan.SetOp
	convL       []bool // columns of the left input to convert to the result type
	convR       []bool
	convInit    bool
	started     bool
	leftDone    bool
	seen        map[string]int // EXCEPT/INTERSECT: right multiset
	emitted     map[string]bool
	colls       []*collate.Collation // of the result columns (nil: byte-wise)

	// UNION (distinct) is a DISTINCT over UNION ALL, and spills as it
	// does.
	dedup *distinctExec
	// EXCEPT/INTERSECT past the quota (setopspill.go): right rows of keys
	// not held go to rparts, left rows of keys not held to lparts, and
	// each pair of partitions is computed on its own by sub.
	raw    bool // inputs are spilled rows, already converted
	depth  int
	acct   memAcct
	rparts *partitions
	lparts *partitions
	part   int
	sub    *setOpExec
}

// conversions finds the input columns whose type differs from the result
// column type (SELECT 1 UNION SELECT 2.5 returns 1.0).
func (s *setOpExec) conversions() {
	s.convInit = true
	s.colls = columnCollations(s.p.Columns())
	need := func(in []*plan.Column) []bool {
		var out []bool
		for i, c := range s.p.Columns() {
			if i < len(in) && (in[i].Type.GetType() != c.Type.GetType() || in[i].Type.GetDecimal() != c.Type.GetDecimal()) {
				if out == nil {
					out = make([]bool, len(in))
				}
				out[i] = true
			}
		}
		return out
	}
	s.convL, s.convR = need(s.p.Left.Columns()), need(s.p.Right.Columns())
}

// conform converts the marked columns of a batch in place; a value that does
// not convert is kept as it is.
func conform(batch [][]types.Datum, conv []bool, cols []*plan.Column) {
	if conv == nil {
		return
	}
	for _, r := range batch {
		for i, ok := range conv {
			if ok && !r[i].IsNull() {
				if v, err := types.Convert(r[i], cols[i].Type); err == nil {
					r[i] = v
				}
			}
		}
	}
}

func (s *setOpExec) next(c *Context, right bool) ([][]types.Datum, error) {
	if s.raw {
		if right {
			return s.right.Next(c)
		}
		return s.left.Next(c)
	}
	if !s.convInit {
		s.conversions()
	}
	src, conv := s.left, s.convL
	if right {
		src, conv = s.right, s.convR
	}
	batch, err := src.Next(c)
	if err != nil {
		return nil, err
	}
	conform(batch, conv, s.p.Columns())
	return batch, nil
}

func (s *setOpExec) Next(c *Context) ([][]types.Datum, error) {
	if s.p.Kind == plan.Union {
		if s.p.All {
			return s.union(c)
		}
		if s.dedup == nil {
			cols := s.p.Columns()
			s.dedup = &distinctExec{child: unionAll{s}, n: len(cols), colls: columnCollations(cols)}
		}
		return s.dedup.Next(c)
	}
	if !s.started {
		s.started = true
		if err := s.buildRight(c); err != nil {
			return nil, err
		}
	}
	if s.emitted == nil {
		s.emitted = map[string]bool{}
	}
	for !s.leftDone {
		batch, err := s.next(c, false)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			s.leftDone = true
			break
		}
		out, err := s.probe(c, batch)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return s.nextSpilled(c)
}

// probe returns the rows of a left batch that the operation keeps.
func (s *setOpExec) probe(c *Context, batch [][]types.Datum) ([][]types.Datum, error) {
	var out [][]types.Datum
	var key []byte
	for _, r := range batch {
		key = hashRow(key[:0], r, s.colls)
		n, held := s.seen[string(key)]
		if !held && !s.emitted[string(key)] && (s.lparts != nil || s.rparts != nil) {
			// A key whose right rows, if any, are on disk.
			if err := s.spillLeft(c, key, r); err != nil {
				return nil, err
			}
			continue
		}
		keep := false
		switch {
		case s.p.Kind == plan.Except && s.p.All:
			if n > 0 {
				s.seen[string(key)] = n - 1
			} else {
				keep = true
			}
		case s.p.Kind == plan.Except:
			keep = n == 0 && !s.emitted[string(key)]
		case s.p.All: // INTERSECT ALL
			if n > 0 {
				s.seen[string(key)] = n - 1
				keep = true
			}
		default: // INTERSECT
			keep = n > 0 && !s.emitted[string(key)]
		}
		if keep {
			if !s.p.All {
				s.emitted[string(key)] = true
				if s.acct.grow(c, int64(len(key))+16) {
					// Keys not seen yet go to disk from now on.
					if !c.canSpill() || s.depth >= maxSpillDepth {
						return nil, c.Mem.overErr()
					}
					s.lparts = &partitions{seed: s.spillSeed()}
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// unionAll is UNION ALL's rows of a setOpExec (under its DISTINCT).
type unionAll struct{ s *setOpExec }

func (u unionAll) Next(c *Context) ([][]types.Datum, error) { return u.s.union(c) }

func (s *setOpExec) memStats() (peak, disk int64) {
	if s.dedup != nil {
		return s.dedup.memStats()
	}
	return s.acct.peak, s.acct.disk
}

// union returns the rows of the left input, then those of the right.
func (s *setOpExec) union(c *Context) ([][]types.Datum, error) {
	for {
		batch, err := s.next(c, s.leftDone)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			if s.leftDone {
				return nil, nil
			}
			s.leftDone = true
			continue
		}
		return batch, nil
	}
}

// rowConcat builds joined rows (a left row followed by a right row of
// rightWidth columns) in shared slabs of up to 64 rows.
type rowConcat struct {
	slab []types.Datum
	// rows is how many rows the last slab held. Slabs double from one row
	// up to 64, so a join that emits one row (a point lookup joined to a
	// point lookup) allocates one row, not 64 of them (46 KiB for 30
	// columns, zeroed and scanned by the collector).
	rows int
}

func (c *rowConcat) concat(l, r []types.Datum, rightWidth int) []types.Datum {
	w := len(l) + rightWidth
	if len(c.slab) < w {
		c.rows = min(max(2*c.rows, 1), 64)
		c.slab = make([]types.Datum, w*c.rows)
	}
	row := c.slab[:w:w]
	c.slab = c.slab[w:]
	copy(row, l)
	copy(row[len(l):], r)
	return row
}
