package sql

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestAutoAnalyze: once the rows changed in an analyzed table pass half of
// those its statistics counted, the engine analyzes it again by itself; a
// table never analyzed is left alone.
func TestAutoAnalyze(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE a; USE a; CREATE TABLE t (id INT PRIMARY KEY, v INT); CREATE TABLE u (id INT PRIMARY KEY)")
	insert := func(table string, from, to int) {
		var vals []string
		for i := from; i < to; i++ {
			if table == "t" {
				vals = append(vals, "("+strconv.Itoa(i)+",1)")
			} else {
				vals = append(vals, "("+strconv.Itoa(i)+")")
			}
		}
		mustExec(t, s, "INSERT INTO "+table+" VALUES "+strings.Join(vals, ","))
	}
	insert("t", 0, 2000)
	insert("u", 0, 2000)
	mustExec(t, s, "ANALYZE TABLE t")
	rows := func(table string) string {
		r := mustExec(t, s, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'a' AND TABLE_NAME = '"+table+"'")
		return rowsText(r[0].Rows)
	}
	insert("t", 2000, 2500) // a quarter: not yet
	insert("u", 2000, 4000)
	time.Sleep(300 * time.Millisecond)
	if got := rows("t"); got != "2000" {
		t.Fatalf("TABLE_ROWS %s after a quarter changed, want 2000 (no automatic ANALYZE yet)", got)
	}
	insert("t", 2500, 3100) // more than half now
	deadline := time.Now().Add(10 * time.Second)
	for rows("t") != "3100" {
		if time.Now().After(deadline) {
			t.Fatalf("TABLE_ROWS %s, want 3100 after an automatic ANALYZE", rows("t"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := rows("u"); got != "0" {
		t.Fatalf("a table never analyzed got statistics: TABLE_ROWS %s", got)
	}
}

// TestAnalyzeNeedsSelectAndInsert: as in MySQL, ANALYZE TABLE needs SELECT
// and INSERT on the table (1142 otherwise).
func TestAnalyzeNeedsSelectAndInsert(t *testing.T) {
	root := newTestSession(t)
	mustExec(t, root, "CREATE DATABASE g; CREATE TABLE g.t (id INT PRIMARY KEY); CREATE USER u; GRANT SELECT ON g.t TO u")
	u := root.e.NewSession("u", "localhost")
	defer u.Close()
	_, err := u.Execute(context.Background(), "ANALYZE TABLE g.t")
	if err == nil || !strings.Contains(err.Error(), "1142") {
		t.Fatalf("ANALYZE TABLE with SELECT only: %v, want 1142", err)
	}
	mustExec(t, root, "GRANT INSERT ON g.t TO u")
	if r := mustExec(t, u, "ANALYZE TABLE g.t"); rowsText(r[0].Rows) != "g.t analyze status OK" {
		t.Fatalf("ANALYZE TABLE with SELECT and INSERT: %q", rowsText(r[0].Rows))
	}
}
