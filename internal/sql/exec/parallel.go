package exec

import (
	"sync"

	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// Parallel hash aggregation and hash join.
//
// Both start serial and go parallel only once their input proves large
// (aggParallelRows rows read, joinParallelBatches probe batches), so that
// OLTP statements never start a goroutine. Context.Concurrency
// (tidb_executor_concurrency) is the number of workers; the session sets
// it to 1 for statements with subqueries, whose evaluation runs plans on
// the statement's shared state. Workers evaluate expressions with their own
// copy of the statement's EvalContext (its warnings are merged at the end).
//
// Hash aggregation (agg.go, consumeParallel): the reading goroutine
// evaluates group keys and routes each row to the worker owning its key's
// hash; workers own disjoint groups.
//
// Hash join: the build side is read serially into one table that workers
// then share read-only; the probe side's batches are handed to workers in
// turn and their results returned in input order, so the output is the
// serial one.

// joinParallelBatches is how many probe batches a hash join handles serially
// before it probes in parallel.
const joinParallelBatches = 8

// onClose registers f to run when the statement ends (Context.Close).
func (c *Context) onClose(f func()) {
	c.tmp.used.Store(true)
	c.tmp.mu.Lock()
	c.tmp.closers = append(c.tmp.closers, f)
	c.tmp.mu.Unlock()
}

// parallelReady reports whether the probe should go parallel now.
func (j *joinExec) parallelReady(c *Context) bool {
	return c.Concurrency > 1 && j.par == nil && j.leftBatches >= joinParallelBatches &&
		j.table != nil && j.lookupScan == nil && j.rparts == nil && len(j.table) > 0
}

// joinJob is one probe batch and where its result goes.
type joinJob struct {
	batch [][]types.Datum
	res   chan joinResult
}

type joinResult struct {
	rows [][]types.Datum
	err  error
}

// joinPar probes a hash join's table with several workers.
type joinPar struct {
	j        *joinExec
	jobs     chan joinJob
	queue    []chan joinResult // results in input order
	leftDone bool
	closed   bool
	once     sync.Once
	wg       sync.WaitGroup
	warns    [][]error
}

func newJoinPar(c *Context, j *joinExec) *joinPar {
	n := c.Concurrency
	j.workers = n
	p := &joinPar{j: j, jobs: make(chan joinJob), warns: make([][]error, n)}
	for i := 0; i < n; i++ {
		ev := c.Eval.Fork()
		ev.Warnings = &p.warns[i]
		p.wg.Add(1)
		go func(ev *expr.EvalContext) {
			defer p.wg.Done()
			for job := range p.jobs {
				rows, err := j.probeBatch(c, ev, job.batch)
				job.res <- joinResult{rows, err}
			}
		}(ev)
	}
	c.onClose(p.stop)
	return p
}

// stop ends the workers (once) and merges their warnings.
func (p *joinPar) stop() {
	p.once.Do(func() {
		close(p.jobs)
		p.wg.Wait()
	})
}

func (p *joinPar) next(c *Context) ([][]types.Datum, error) {
	for {
		for !p.leftDone && len(p.queue) < 2*cap(p.warns) {
			if err := c.Ctx.Err(); err != nil {
				return nil, err
			}
			b, err := p.j.left.Next(c)
			if err != nil {
				return nil, err
			}
			if b == nil {
				p.leftDone = true
				break
			}
			res := make(chan joinResult, 1)
			p.jobs <- joinJob{batch: b, res: res}
			p.queue = append(p.queue, res)
		}
		if len(p.queue) == 0 {
			p.finish(c)
			p.j.acct.release(c)
			return nil, nil
		}
		r := <-p.queue[0]
		p.queue = p.queue[1:]
		if r.err != nil {
			return nil, r.err
		}
		if len(r.rows) > 0 {
			return r.rows, nil
		}
	}
}

// finish stops the workers and hands their warnings to the statement.
func (p *joinPar) finish(c *Context) {
	if p.closed {
		return
	}
	p.closed = true
	p.stop()
	if c.Eval.Warnings != nil {
		for _, w := range p.warns {
			*c.Eval.Warnings = append(*c.Eval.Warnings, w...)
		}
	}
}

// probeBatch joins one batch of probe rows against the shared table.
func (j *joinExec) probeBatch(c *Context, ev *expr.EvalContext, batch [][]types.Datum) ([][]types.Datum, error) {
	var out [][]types.Datum
	var key []byte
	var cat rowConcat
	var pair []types.Datum
	emit := func(l, r []types.Datum) []types.Datum { return cat.concat(l, r, j.rightWidth) }
	for _, l := range batch {
		k, ok, err := joinKeyEv(ev, key[:0], j.p.LeftKeys, l, j.colls)
		if err != nil {
			return nil, err
		}
		key = k
		var cands [][]types.Datum
		if ok {
			cands = j.table[string(k)]
		}
		if j.p.Type.LeftOnly() {
			matched, err := j.semiMatch(c, ev, l, cands, &pair)
			if err != nil {
				return nil, err
			}
			if matched == (j.p.Type == plan.SemiJoin) {
				out = append(out, l)
			}
			continue
		}
		matched := false
		for i, r := range cands {
			if i&4095 == 4095 {
				if err := c.Ctx.Err(); err != nil {
					return nil, err
				}
			}
			row := emit(l, r)
			if j.p.Cond != nil {
				ok, err := truthEv(ev, j.p.Cond, row)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
			}
			matched = true
			out = append(out, row)
		}
		if !matched && j.p.Type == plan.LeftJoin {
			out = append(out, emit(l, nil))
		}
	}
	return out, nil
}
