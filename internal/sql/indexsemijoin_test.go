package sql

import (
	"math/rand"
	"strings"
	"testing"
)

// TestIndexSemiJoinSameAnswer compares, on random tables where the outer
// rows are few against the inner table's (which has an index on k and an
// integer primary key), every condition of semiJoinQueries, and two
// through the primary key, with the same condition run per outer row.
// Those keyed on i.k or i.id must be planned as index semi or anti joins.
func TestIndexSemiJoinSameAnswer(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE sji")
	mustExec(t, s, "USE sji")
	conds := append([]string{
		"EXISTS (SELECT * FROM i WHERE i.id = o.k AND i.q > o.x)",
		"NOT EXISTS (SELECT 1 FROM i WHERE o.k = i.id AND (i.q IS NULL OR i.k2 = o.k2))",
	}, semiJoinQueries...)
	indexed := 0
	for seed := int64(1); seed <= 4; seed++ {
		r := rand.New(rand.NewSource(seed))
		semiJoinTables(t, s, r, 40+r.Intn(40), 2500+r.Intn(1000), 2000, false)
		for _, cond := range conds {
			q := "SELECT id, k, x FROM o WHERE id % 7 <> 3 AND " + cond + " ORDER BY id"
			plan, err := queryText(t, s, "EXPLAIN "+q)
			if err != nil {
				t.Fatalf("EXPLAIN %s: %v", q, err)
			}
			keyed := strings.Contains(cond, "i.k = o.k") || strings.Contains(cond, "o.k = i.k") ||
				strings.Contains(cond, "i.id = o.k") || strings.Contains(cond, "o.k = i.id")
			index := strings.Contains(plan, "IndexJoin semi") || strings.Contains(plan, "IndexJoin anti")
			if keyed && !index {
				t.Fatalf("seed %d: %s is not an index semi or anti join:\n%s", seed, q, plan)
			}
			if index {
				indexed++
			}
			got, err := queryText(t, s, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			slow := "SELECT id, k, x FROM o WHERE id % 7 <> 3 AND " + perRow(cond) + " ORDER BY id"
			want, err := queryText(t, s, slow)
			if err != nil {
				t.Fatalf("%s: %v", slow, err)
			}
			if got != want {
				t.Errorf("seed %d: %s\ngot  %d rows: %.300s\nwant %d rows: %.300s", seed, q,
					strings.Count(got, "\n"), got, strings.Count(want, "\n"), want)
			}
		}
	}
	if indexed == 0 {
		t.Fatal("no condition was planned as an index semi or anti join")
	}
}
