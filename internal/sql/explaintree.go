package sql

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// EXPLAIN FORMAT=TREE and EXPLAIN ANALYZE print MySQL 8's tree: one row,
// one column named EXPLAIN, a line per plan node ("-> " and the node,
// children indented four spaces). EXPLAIN ANALYZE runs the statement,
// drops its rows and adds to every node what it did:
//
//	(actual time=FIRST..ALL rows=N loops=L)
//
// FIRST and ALL are the milliseconds until the node returned its first
// rows and all of them, its children's time included; then, for nodes
// that hold rows, (memory=PEAK, disk=SPILLED) and, for parallel ones,
// workers=N. A node its parent ran itself (a DISTINCT done by the sort
// above it) shows no measurements; one that never ran shows
// (never executed). A node that says where it runs (plan.Tasker) shows
// it in brackets: [cop[strata]].

// explainTreeFormat is the rewrite of FORMAT=TREE, which the parser
// takes only quoted.
var explainTreeFormat = regexp.MustCompile(`(?i)^(\s*(?:explain|describe|desc)\s+(?:analyze\s+)?format\s*=\s*)tree\b`)

// quoteTreeFormat returns query with an unquoted FORMAT=TREE quoted, and
// whether it changed.
func quoteTreeFormat(query string) (string, bool) {
	if !explainTreeFormat.MatchString(query) {
		return query, false
	}
	return explainTreeFormat.ReplaceAllString(query, "${1}'tree'"), true
}

// isTreeFormat reports whether an EXPLAIN prints the tree.
func isTreeFormat(n *ast.ExplainStmt) bool {
	return n.Analyze || strings.EqualFold(n.Format, "tree")
}

// explainAnalyze runs a compiled query measuring every operator.
func (s *Session) explainAnalyze(ctx context.Context, c *compiled) (*exec.Analysis, time.Duration, error) {
	if err := s.checkCompiled(c); err != nil {
		return nil, 0, err
	}
	if err := s.beginStatement(ctx, false, false); err != nil {
		return nil, 0, err
	}
	set := s.execSettings()
	ec := &exec.Context{
		Ctx: ctx, Txn: s.txn, Eval: s.evalContext(nil), IDs: s.e.ids,
		Mem: exec.NewMemTracker(set.quota), TmpDir: s.e.tmpDir, NoSpill: !set.spill, Concurrency: set.concurrency, MaxRecursion: set.recursion, NoVec: set.noVec,
		Schema: s.schema, FKChecks: !s.x.fkOff, NonStrict: s.x.nonStrict, CopConcurrency: s.copConcurrency(),
	}
	defer ec.Close()
	ec.Eval.Ctx = ctx
	if len(c.subqueries) > 0 {
		ec.Concurrency = 1
	}
	an := exec.NewAnalysis()
	exec.BindSubqueriesAnalyzed(ec, c.subqueries, an)
	e, _, err := exec.BuildAnalyzed(c.query, an)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := exec.Discard(ec, e); err != nil {
		return nil, 0, err
	}
	return an, time.Since(start), nil
}

// explainTree renders p (and the subqueries) as MySQL's tree, with the
// measurements of an when it is not nil.
func explainTree(p plan.Plan, subs []*plan.Subquery, an *exec.Analysis) *Result {
	var sb strings.Builder
	var walk func(p plan.Plan, depth int)
	walk = func(p plan.Plan, depth int) {
		sb.WriteString(strings.Repeat("    ", depth))
		sb.WriteString("-> ")
		sb.WriteString(p.Explain())
		if task := plan.TaskOf(p); task != "" {
			sb.WriteString(" [" + task + "]")
		}
		if an != nil {
			if st, ok := an.Stats(p); ok {
				sb.WriteString("  ")
				sb.WriteString(formatStats(st))
			}
		}
		sb.WriteByte('\n')
		for _, c := range p.Children() {
			walk(c, depth+1)
		}
	}
	walk(p, 0)
	for i, sq := range subs {
		kind := "uncorrelated"
		if sq.Correlated {
			kind = "correlated"
		}
		if sq.Memoized() {
			kind = "correlated, memoized"
		}
		fmt.Fprintf(&sb, "-> Subquery %d (%s): %s\n", i+1, kind, sq.String())
		walk(sq.Plan, 1)
	}
	return &Result{Columns: textColumns("EXPLAIN"), Rows: [][]types.Datum{textRow(strings.TrimSuffix(sb.String(), "\n"))}}
}

// formatStats renders one node's measurements.
func formatStats(st exec.OpStats) string {
	if st.Loops == 0 {
		return "(never executed)"
	}
	out := fmt.Sprintf("(actual time=%s..%s rows=%d loops=%d)", ms(st.First), ms(st.Total), st.Rows, st.Loops)
	if st.Stateful {
		out += fmt.Sprintf(" (memory=%s, disk=%s", formatBytes(st.MemPeak), formatBytes(st.Disk))
		if st.Workers > 0 {
			out += fmt.Sprintf(", workers=%d", st.Workers)
		}
		out += ")"
	}
	return out
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond))
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
