package exec

import (
	"time"

	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// EXPLAIN ANALYZE: BuildAnalyzed wraps every executor it builds in one
// that measures it; Analysis then gives each plan node's measurements.

// OpStats are what one operator did.
type OpStats struct {
	Rows  int64         // rows returned
	Loops int64         // times started (0: never executed)
	First time.Duration // until the first rows came back
	Total time.Duration // until the last, in the operator and below it
	// MemPeak is the most memory the operator held at once and Disk what
	// it wrote to temporary files (operators that hold rows).
	MemPeak, Disk int64
	// Workers is how many goroutines a parallel operator used (0: serial).
	Workers int
	// Stateful is true for operators that hold rows (MemPeak and Disk
	// mean something).
	Stateful bool
}

// Analysis maps the plan nodes of one execution to their measurements.
type Analysis struct {
	ops map[plan.Plan]*analyzeExec
}

// Stats returns the measurements of plan node p; ok is false for a node
// that had no executor of its own (one fused into its parent).
func (a *Analysis) Stats(p plan.Plan) (OpStats, bool) {
	e, ok := a.ops[p]
	if !ok {
		return OpStats{}, false
	}
	st := e.st
	if !e.gotFirst {
		st.First = st.Total // no rows: the time to find there are none
	}
	if m, ok := e.inner.(memStater); ok {
		st.Stateful = true
		st.MemPeak, st.Disk = m.memStats()
	}
	switch x := e.inner.(type) {
	case *aggExec:
		st.Workers = x.workers
	case *joinExec:
		st.Workers = x.workers
	}
	return st, true
}

// analyzeExec measures the executor it wraps.
type analyzeExec struct {
	inner    Executor
	st       OpStats
	gotFirst bool
}

func (a *analyzeExec) Next(c *Context) ([][]types.Datum, error) {
	if a.st.Loops == 0 {
		a.st.Loops = 1
	}
	start := time.Now()
	b, err := a.inner.Next(c)
	a.st.Total += time.Since(start)
	if len(b) > 0 && !a.gotFirst {
		a.gotFirst = true
		a.st.First = a.st.Total
	}
	a.st.Rows += int64(len(b))
	return b, err
}

// unwrap returns the executor an analyzeExec measures.
func unwrap(e Executor) Executor {
	if a, ok := e.(*analyzeExec); ok {
		return a.inner
	}
	return e
}

// BuildAnalyzed is Build with every executor measured.
func BuildAnalyzed(p plan.Plan) (Executor, *Analysis, error) {
	an := &Analysis{ops: map[plan.Plan]*analyzeExec{}}
	e, err := build(p, an)
	if err != nil {
		return nil, nil, err
	}
	return e, an, nil
}

// Discard runs an executor to the end, dropping its rows.
func Discard(c *Context, e Executor) error {
	for {
		if err := c.Ctx.Err(); err != nil {
			return err
		}
		b, err := e.Next(c)
		if err != nil || b == nil {
			return err
		}
	}
}
