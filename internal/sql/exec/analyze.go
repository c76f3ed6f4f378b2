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
	ops map[plan.Plan]*opMeasure
}

// NewAnalysis returns an empty Analysis (for BuildAnalyzed's plan and
// BindSubqueriesAnalyzed's subqueries).
func NewAnalysis() *Analysis { return &Analysis{ops: map[plan.Plan]*opMeasure{}} }

// opMeasure accumulates one plan node's runs.
type opMeasure struct {
	st   OpStats
	exec Executor // the latest executor built for the node
}

// setExec makes e the node's executor, folding the memory figures of the
// one before into st (and letting it and its rows go).
func (m *opMeasure) setExec(e Executor) {
	if m.exec != nil {
		m.st = m.withExec(m.exec)
	}
	m.exec = e
}

// withExec returns st with e's memory figures and workers folded in.
func (m *opMeasure) withExec(e Executor) OpStats {
	st := m.st
	if ms, ok := e.(memStater); ok {
		st.Stateful = true
		peak, disk := ms.memStats()
		st.MemPeak = max(st.MemPeak, peak)
		st.Disk += disk
	}
	switch x := e.(type) {
	case *aggExec:
		st.Workers = max(st.Workers, x.workers)
	case *joinExec:
		st.Workers = max(st.Workers, x.workers)
	}
	return st
}

// Stats returns the measurements of plan node p; ok is false for a node
// that had no executor of its own (one fused into its parent). With
// several loops, Rows, First and Total are per loop (averages), as MySQL
// shows them.
func (a *Analysis) Stats(p plan.Plan) (OpStats, bool) {
	m, ok := a.ops[p]
	if !ok {
		return OpStats{}, false
	}
	st := m.withExec(m.exec)
	if st.Loops > 1 {
		st.Rows /= st.Loops
		st.First /= time.Duration(st.Loops)
		st.Total /= time.Duration(st.Loops)
	}
	return st, true
}

// analyzeExec measures one run of the executor it wraps.
type analyzeExec struct {
	inner    Executor
	m        *opMeasure
	started  bool
	gotFirst bool
	spent    time.Duration
}

func (a *analyzeExec) Next(c *Context) ([][]types.Datum, error) {
	if !a.started {
		a.started = true
		a.m.st.Loops++
	}
	start := time.Now()
	b, err := a.inner.Next(c)
	d := time.Since(start)
	a.spent += d
	a.m.st.Total += d
	if !a.gotFirst && (len(b) > 0 || b == nil) {
		// The first rows, or the end without any: the time to find
		// there are none.
		a.gotFirst = true
		a.m.st.First += a.spent
	}
	a.m.st.Rows += int64(len(b))
	return b, err
}

// unwrap returns the executor an analyzeExec measures.
func unwrap(e Executor) Executor {
	if a, ok := e.(*analyzeExec); ok {
		return a.inner
	}
	return e
}

// BuildAnalyzed is Build with every executor measured (into an, or a new
// Analysis when an is nil).
func BuildAnalyzed(p plan.Plan, an *Analysis) (Executor, *Analysis, error) {
	if an == nil {
		an = NewAnalysis()
	}
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
