package sql

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/types"
)

// TestAnalyzeReplansPrepared: a prepared join planned before ANALYZE TABLE
// is planned again after it, with the statistics (its hash join then
// builds the smaller input), and answers the same.
func TestAnalyzeReplansPrepared(t *testing.T) {
	s := newTestSession(t)
	ctx := context.Background()
	mustExec(t, s, "CREATE DATABASE p; USE p; CREATE TABLE big (id INT PRIMARY KEY, k INT); CREATE TABLE small (id INT PRIMARY KEY, tag INT)")
	var vals []string
	for i := range 300 {
		vals = append(vals, "("+strconv.Itoa(i)+","+strconv.Itoa(i%30)+")")
	}
	mustExec(t, s, "INSERT INTO big VALUES "+strings.Join(vals, ","))
	mustExec(t, s, "INSERT INTO small VALUES "+strings.Join(vals[:30], ","))
	ps, err := s.Prepare(ctx, "SELECT count(*) FROM small, big WHERE big.k = small.tag AND small.id < ?")
	if err != nil {
		t.Fatal(err)
	}
	run := func() (string, plan.Plan) {
		r, err := s.ExecutePrepared(ctx, ps.ID, []types.Datum{types.NewInt(100)})
		if err != nil {
			t.Fatal(err)
		}
		return rowsText(r.Rows), s.prepared[ps.ID].cached.query
	}
	before, p1 := run()
	mustExec(t, s, "ANALYZE TABLE big, small")
	after, p2 := run()
	if before != after || before != "300" {
		t.Fatalf("answers %q then %q, want 300", before, after)
	}
	if p1 == p2 {
		t.Fatal("the prepared statement kept the plan made without statistics")
	}
	if !strings.Contains(explainText(p2), "estRows=") {
		t.Fatalf("the new plan has no estimates:\n%s", explainText(p2))
	}
}

func explainText(p plan.Plan) string {
	var b strings.Builder
	var walk func(p plan.Plan, depth int)
	walk = func(p plan.Plan, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + p.Explain() + "\n")
		for _, c := range p.Children() {
			walk(c, depth+1)
		}
	}
	walk(p, 0)
	return b.String()
}
