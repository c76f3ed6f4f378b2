package exec

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// aggParallelRows is how many input rows a hash aggregation reads serially
// before it hands the rest to parallel workers: small inputs (OLTP's
// range sums) never start a goroutine.
const aggParallelRows = 32 * BatchSize

type aggGroup struct {
	accs  []expr.Accumulator
	first []types.Datum
	seq   int64 // input position of the group's first row
}

// aggTable holds groups by key. Once the statement is past its quota it
// keeps the groups it has and writes the rows of new groups to partition
// files (spill.go).
type aggTable struct {
	p      *plan.Aggregate
	depth  int
	groups map[string]*aggGroup
	order  []*aggGroup
	parts  *partitions
	acct   memAcct
}

func newAggTable(p *plan.Aggregate, depth int) *aggTable {
	return &aggTable{p: p, depth: depth, groups: map[string]*aggGroup{}}
}

// add folds row r, whose group key is key and input position seq, into
// its group.
func (t *aggTable) add(c *Context, ev *expr.EvalContext, key []byte, r []types.Datum, seq int64) error {
	grp := t.groups[string(key)]
	if grp == nil {
		if t.parts != nil {
			return t.parts.write(c, t.parts.of(key), r)
		}
		grp = &aggGroup{first: r, accs: make([]expr.Accumulator, len(t.p.Aggs)), seq: seq}
		for i, f := range t.p.Aggs {
			grp.accs[i] = f.NewAccumulator()
		}
		t.groups[string(key)] = grp
		t.order = append(t.order, grp)
		if t.acct.grow(c, RowSize(r)+int64(len(key))+64*int64(len(t.p.Aggs))) {
			if !c.canSpill() || t.depth >= maxSpillDepth {
				return c.Mem.overErr()
			}
			// Keep this group; rows of groups not held go to disk.
			t.parts = newPartitions()
		}
	}
	for _, acc := range grp.accs {
		if err := acc.Add(ev, r); err != nil {
			return err
		}
	}
	return nil
}

type aggExec struct {
	child Executor
	p     *plan.Aggregate
	depth int

	started bool
	out     [][]types.Datum
	pending []*spillFile // spilled partitions still to aggregate
	sub     *aggExec     // aggregating one of them
	stats   memAcct
	workers int // parallel workers used (0: serial)
	// serial is the table of a serial aggregation, one its slice: no
	// allocation of their own for OLTP's small aggregations.
	serial aggTable
	one    [1]*aggTable
	// batch evaluates the group-by expressions over an input batch
	// (vecbatch.go).
	batch *vecBatch
}

func (a *aggExec) memStats() (peak, disk int64) { return a.stats.peak, a.stats.disk }

func (a *aggExec) Next(c *Context) ([][]types.Datum, error) {
	if !a.started {
		a.started = true
		tables, err := a.consume(c)
		if err != nil {
			return nil, err
		}
		a.finish(c, tables)
		if len(a.out) > 0 {
			out := a.out
			a.out = nil
			return out, nil
		}
	}
	for {
		if a.sub != nil {
			b, err := a.sub.Next(c)
			if err != nil || b != nil {
				return b, err
			}
			a.stats.peak = max(a.stats.peak, a.sub.stats.peak)
			a.stats.disk += a.sub.stats.disk
			a.sub = nil
		}
		if len(a.pending) == 0 {
			return nil, nil
		}
		f := a.pending[0]
		a.pending = a.pending[1:]
		a.sub = &aggExec{child: &spillScan{file: f}, p: a.p, depth: a.depth + 1}
	}
}

// finish turns the held groups into output rows (in the order their
// first rows came) and gives their memory back: the consumer charges what
// it keeps.
func (a *aggExec) finish(c *Context, tables []*aggTable) {
	var order []*aggGroup
	if len(tables) == 1 {
		order = tables[0].order
	} else {
		for _, t := range tables {
			order = append(order, t.order...)
		}
		slices.SortFunc(order, func(x, y *aggGroup) int { return int(x.seq - y.seq) })
	}
	spilled := false
	for _, t := range tables {
		a.stats.peak += t.acct.peak
		t.acct.release(c)
		if t.parts != nil {
			spilled = true
			a.stats.disk += t.parts.bytes()
			for _, f := range t.parts.files {
				if f != nil {
					a.pending = append(a.pending, f)
				}
			}
		}
	}
	if len(order) == 0 && len(a.p.GroupBy) == 0 && a.depth == 0 && !spilled {
		grp := &aggGroup{first: make([]types.Datum, len(a.p.Child.Columns())), accs: make([]expr.Accumulator, len(a.p.Aggs))}
		for i, f := range a.p.Aggs {
			grp.accs[i] = f.NewAccumulator()
		}
		order = append(order, grp)
	}
	out := make([][]types.Datum, len(order))
	for i, g := range order {
		row := make([]types.Datum, 0, len(g.accs)+len(g.first))
		for _, acc := range g.accs {
			row = append(row, acc.Result())
		}
		out[i] = append(row, g.first...)
	}
	a.out = out
}

// groupKey appends the group key of row r.
func groupKey(c *Context, key []byte, groupBy []expr.Expr, colls []*collate.Collation, r []types.Datum) ([]byte, error) {
	for i, g := range groupBy {
		d, err := g.Eval(c.Eval, r)
		if err != nil {
			return nil, err
		}
		key = appendGroupValue(key, d, colls, i)
	}
	return key, nil
}

// batchGroupKey appends the group key of a batch's row i, from the
// group-by values evalBatch gave for the batch.
func batchGroupKey(key []byte, vals [][]types.Datum, colls []*collate.Collation, i int) []byte {
	for k, vec := range vals {
		key = appendGroupValue(key, vec[i], colls, k)
	}
	return key
}

// appendGroupValue appends group-by value i's part of a group key.
func appendGroupValue(key []byte, d types.Datum, colls []*collate.Collation, i int) []byte {
	if colls != nil {
		return d.AppendHashKeyCollated(key, colls[i])
	}
	return d.AppendHashKey(key)
}

// consume reads the whole input into group tables: one, or one per
// worker once the input proves large.
func (a *aggExec) consume(c *Context) ([]*aggTable, error) {
	a.serial = aggTable{p: a.p, depth: a.depth, groups: map[string]*aggGroup{}}
	t := &a.serial
	a.one[0] = t
	var key []byte
	colls := exprCollations(a.p.GroupBy)
	var seq int64
	for {
		batch, err := a.child.Next(c)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			return a.one[:], nil
		}
		// The group keys of the whole batch first, when they can be
		// evaluated in one go (no error, no warning); then row by row,
		// in input order, as before.
		var vals [][]types.Datum
		if len(a.p.GroupBy) > 0 {
			vals = evalBatch(c, &a.batch, batch, a.p.GroupBy...)
		}
		for i, r := range batch {
			if vals != nil {
				key = batchGroupKey(key[:0], vals, colls, i)
			} else if key, err = groupKey(c, key[:0], a.p.GroupBy, colls, r); err != nil {
				return nil, err
			}
			if err := t.add(c, c.Eval, key, r, seq); err != nil {
				return nil, err
			}
			seq++
		}
		if seq >= aggParallelRows && c.Concurrency > 1 && t.parts == nil && len(a.p.GroupBy) > 0 {
			return a.consumeParallel(c, t, seq, colls)
		}
	}
}

// aggWork is a share of one input batch for one worker: rows and their
// keys (keys[ends[i-1]:ends[i]]) and input positions.
type aggWork struct {
	keys []byte
	ends []int
	rows [][]types.Datum
	seqs []int64
}

// consumeParallel aggregates the rest of the input with c.Concurrency
// workers, each owning the groups whose key hashes to it: the reading
// goroutine evaluates the group keys and routes rows, the workers look
// groups up and fold rows (the aggregate arguments). Every group's rows
// reach its worker in input order, and output follows the first rows'
// positions, so the result is the serial one.
func (a *aggExec) consumeParallel(c *Context, t *aggTable, seq int64, colls []*collate.Collation) ([]*aggTable, error) {
	n := c.Concurrency
	a.workers = n
	seed := maphash.MakeSeed()
	tables := make([]*aggTable, n)
	for i := range tables {
		tables[i] = newAggTable(a.p, a.depth)
	}
	// Hand the groups read so far to their owners.
	for k, g := range t.groups {
		w := tables[maphash.String(seed, k)%uint64(n)]
		w.groups[k] = g
		w.order = append(w.order, g)
	}
	for i := range tables {
		slices.SortFunc(tables[i].order, func(x, y *aggGroup) int { return int(x.seq - y.seq) })
	}
	tables[0].acct = t.acct // the memory charged so far

	ins := make([]chan aggWork, n)
	errs := make([]error, n)
	warns := make([]seqWarnings, n+1) // the workers', then the reader's
	var wg sync.WaitGroup
	for i := range ins {
		ins[i] = make(chan aggWork, 4)
		ev := c.Eval.Fork()
		ev.Warnings = &warns[i].errs
		wg.Add(1)
		go func(i int, ev *expr.EvalContext) {
			defer wg.Done()
			for w := range ins[i] {
				if errs[i] != nil {
					continue
				}
				start := 0
				for j, r := range w.rows {
					err := tables[i].add(c, ev, w.keys[start:w.ends[j]], r, w.seqs[j])
					warns[i].tag(w.seqs[j], phaseArgs)
					if err != nil {
						errs[i] = err
						break
					}
					start = w.ends[j]
				}
			}
		}(i, ev)
	}
	// The reader's warnings (its input's, the group keys') are moved out
	// of the statement's list as they come, and merged back with the
	// workers' in input order when the workers are done: the warnings of
	// the serial aggregation, in its order.
	reader := &warns[n]
	var w0 int
	if c.Eval.Warnings != nil {
		w0 = len(*c.Eval.Warnings)
	}
	take := func(seq int64, phase int) {
		if ws := c.Eval.Warnings; ws != nil && len(*ws) > w0 {
			reader.errs = append(reader.errs, (*ws)[w0:]...)
			*ws = (*ws)[:w0]
			reader.tag(seq, phase)
		}
	}
	stop := func() {
		for _, ch := range ins {
			close(ch)
		}
		wg.Wait()
		if c.Eval.Warnings != nil {
			*c.Eval.Warnings = append(*c.Eval.Warnings, mergeSeqWarnings(warns)...)
		}
	}
	var key []byte
	for {
		batch, err := a.child.Next(c)
		take(seq, phaseInput)
		if err == nil && batch == nil {
			break
		}
		if err != nil {
			stop()
			for _, t := range tables {
				t.acct.release(c)
			}
			return nil, err
		}
		works := make([]aggWork, n)
		vals := evalBatch(c, &a.batch, batch, a.p.GroupBy...)
		for i, r := range batch {
			if vals != nil {
				key = batchGroupKey(key[:0], vals, colls, i)
			} else {
				key, err = groupKey(c, key[:0], a.p.GroupBy, colls, r)
			}
			take(seq, phaseKey)
			if err != nil {
				stop()
				return nil, err
			}
			w := &works[maphash.Bytes(seed, key)%uint64(n)]
			w.keys = append(w.keys, key...)
			w.ends = append(w.ends, len(w.keys))
			w.rows = append(w.rows, r)
			w.seqs = append(w.seqs, seq)
			seq++
		}
		for i, w := range works {
			if len(w.rows) > 0 {
				ins[i] <- w
			}
		}
	}
	stop()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return tables, nil
}

// A parallel aggregation's warnings are tagged with the input position of
// the row they came from and the phase that raised them, so that they can
// be put in the serial aggregation's order: per batch the input's
// warnings, then per row its group key's and its aggregates'.
const (
	phaseInput = iota
	phaseKey
	phaseArgs
)

// warnTag is a warning's row input position and phase.
type warnTag struct {
	seq   int64
	phase int
}

// seqWarnings are warnings (errs) and, for each, its tag; tag labels the
// warnings added since the last call.
type seqWarnings struct {
	errs []error
	tags []warnTag
}

func (w *seqWarnings) tag(seq int64, phase int) {
	for len(w.tags) < len(w.errs) {
		w.tags = append(w.tags, warnTag{seq, phase})
	}
}

// mergeSeqWarnings returns all the warnings of ws ordered by input
// position, then phase, then as each list had them.
func mergeSeqWarnings(ws []seqWarnings) []error {
	type tagged struct {
		err error
		warnTag
	}
	var all []tagged
	for _, w := range ws {
		for i, err := range w.errs {
			all = append(all, tagged{err, w.tags[i]})
		}
	}
	slices.SortStableFunc(all, func(x, y tagged) int {
		if x.seq != y.seq {
			return cmp.Compare(x.seq, y.seq)
		}
		return cmp.Compare(x.phase, y.phase)
	})
	out := make([]error, len(all))
	for i, t := range all {
		out[i] = t.err
	}
	return out
}
