package sql

import (
	"math/rand"
	"strings"
	"testing"
)

// TestLookupJoinSameAnswer compares, on random tables where o's rows are
// few against i's (which has an index on k), queries planned as index
// joins into what a subquery reads with the same queries kept as they
// were (RAND() in a correlated subquery, NOT (k NOT IN ...) for IN): a correlated aggregate subquery
// decorrelated into i grouped by its correlation columns and read through
// the index (plan.groupLookup), and i's own k IN (uncorrelated subquery)
// read through the index or the primary key for the subquery's distinct
// values (plan.inLookup). NULL keys on either side, repeated keys,
// strings equal under the collation, an empty i (seed 5: its rows deleted
// after ANALYZE, planned either way).
func TestLookupJoinSameAnswer(t *testing.T) {
	s := newTestSession(t)
	mustExec(t, s, "CREATE DATABASE lj")
	mustExec(t, s, "USE lj")
	type pair struct{ fast, slow string }
	var queries []pair
	for _, cond := range []string{
		"x < (SELECT 2 * AVG(q) FROM i WHERE i.k = o.k)",
		"x >= (SELECT SUM(q) - 50 FROM i WHERE i.k = o.k AND i.k2 = o.k2 AND i.q < 50)",
		"(SELECT MAX(q) FROM i WHERE o.k = i.k AND i.s = o.s) > x",
		"(SELECT MIN(q) + 10 FROM i WHERE i.k = o.k AND i.k2 IS NOT NULL) <> x",
	} {
		queries = append(queries, pair{
			"SELECT id, k, x FROM o WHERE id % 7 <> 3 AND " + cond + " ORDER BY id",
			"SELECT id, k, x FROM o WHERE id % 7 <> 3 AND " + perRow(cond) + " ORDER BY id",
		})
	}
	for _, c := range []pair{
		{"k IN (SELECT k FROM o WHERE x < 50)", "NOT (k NOT IN (SELECT k FROM o WHERE x < 50))"},
		{"k IN (SELECT k2 * 700 + x FROM o)", "NOT (k NOT IN (SELECT k2 * 700 + x FROM o))"},
		{"id IN (SELECT k FROM o WHERE x > 20) AND q > 10", "NOT (id NOT IN (SELECT k FROM o WHERE x > 20)) AND q > 10"},
	} {
		queries = append(queries, pair{
			"SELECT id, k, q FROM i WHERE id % 7 <> 3 AND " + c.fast + " ORDER BY id",
			"SELECT id, k, q FROM i WHERE id % 7 <> 3 AND " + c.slow + " ORDER BY id",
		})
	}
	for seed := int64(1); seed <= 5; seed++ {
		r := rand.New(rand.NewSource(seed))
		semiJoinTables(t, s, r, 40+r.Intn(40), 2500+r.Intn(1000), 2000, seed == 5)
		for _, q := range queries {
			plan, err := queryText(t, s, "EXPLAIN "+q.fast)
			if err != nil {
				t.Fatalf("EXPLAIN %s: %v", q.fast, err)
			}
			if empty := seed == 5; !empty && !strings.Contains(plan, "IndexJoin inner") {
				t.Fatalf("seed %d: %s is not an index join:\n%s", seed, q.fast, plan)
			}
			if plan, _ := queryText(t, s, "EXPLAIN "+q.slow); strings.Contains(plan, "IndexJoin") {
				t.Fatalf("%s is not kept as it was:\n%s", q.slow, plan)
			}
			got, err := queryText(t, s, q.fast)
			if err != nil {
				t.Fatalf("%s: %v", q.fast, err)
			}
			want, err := queryText(t, s, q.slow)
			if err != nil {
				t.Fatalf("%s: %v", q.slow, err)
			}
			if got != want {
				t.Errorf("seed %d: %s\ngot  %d rows: %.300s\nwant %d rows: %.300s", seed, q.fast,
					strings.Count(got, "\n"), got, strings.Count(want, "\n"), want)
			}
		}
	}
}
