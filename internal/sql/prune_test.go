package sql

import (
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/sql/plan"
)

// TestColumnPruningKeepsResults runs queries that read columns in every
// place a plan can (select list, WHERE, ORDER BY, GROUP BY, HAVING,
// aggregates, DISTINCT, functions, CASE, subqueries, joins, derived
// tables, views, ALTERed tables) with the scans decoding only the columns
// the planner found read, and again decoding every column, and compares
// the results. A column the planner misses comes out NULL and shows up
// here as a difference. It also checks that pruning happened at all.
func TestColumnPruningKeepsResults(t *testing.T) {
	s := newTestEngine(t).NewSession("root", "localhost")
	for _, q := range []string{
		"CREATE DATABASE d", "USE d",
		`CREATE TABLE t (id INT PRIMARY KEY, k INT, c VARCHAR(20), pad VARCHAR(20), f DOUBLE,
			d DECIMAL(6,2), dt DATE, KEY k_ix (k))`,
		`INSERT INTO t VALUES (1, 10, 'a', 'p1', 1.5, 1.25, '2024-01-01'), (2, 20, 'b', 'p2', 2.5, NULL, '2024-02-01'),
			(3, 10, 'c', NULL, NULL, 3.50, NULL), (4, 30, NULL, 'p4', 4.5, 4.75, '2024-04-01'),
			(5, 20, 'e', 'p5', 5.5, 5.00, '2024-05-01'), (6, NULL, 'a', 'p6', 6.5, 6.25, '2024-06-01')`,
		"CREATE TABLE u (id INT PRIMARY KEY, tid INT, note VARCHAR(10), extra INT)",
		"INSERT INTO u VALUES (1, 1, 'x', 7), (2, 2, 'y', 8), (3, 2, 'z', 9), (4, 9, 'w', 10)",
		"CREATE VIEW v AS SELECT id, c, k * 2 AS k2 FROM t WHERE pad IS NOT NULL",
		"CREATE TABLE a (id INT PRIMARY KEY, x INT)",
		"INSERT INTO a VALUES (1, 1), (2, 2)",
		"ALTER TABLE a ADD COLUMN y INT DEFAULT 5",
		"ALTER TABLE a ADD COLUMN z VARCHAR(5) DEFAULT 'zz'",
		"INSERT INTO a VALUES (3, 3, 33, 'new')",
	} {
		mustExec(t, s, q)
	}
	queries := []string{
		"SELECT c FROM t WHERE id BETWEEN 2 AND 5",
		"SELECT c FROM t WHERE id = 3",
		"SELECT pad FROM t WHERE id IN (1, 4, 6)",
		"SELECT SUM(k) FROM t WHERE id BETWEEN 1 AND 6",
		"SELECT c FROM t WHERE id BETWEEN 1 AND 6 ORDER BY c",
		"SELECT DISTINCT c FROM t WHERE id BETWEEN 1 AND 6 ORDER BY c",
		"SELECT id FROM t WHERE pad LIKE 'p%' ORDER BY f DESC",
		"SELECT k, COUNT(*), MAX(f), AVG(d) FROM t GROUP BY k HAVING MIN(dt) > '2024-01-15' ORDER BY k",
		"SELECT k, MIN(c) FROM t GROUP BY k ORDER BY k",
		"SELECT k AS kk, COUNT(pad) FROM t GROUP BY kk ORDER BY 2, 1",
		"SELECT CASE WHEN f > 3 THEN c ELSE pad END FROM t ORDER BY id",
		"SELECT COALESCE(pad, c), IFNULL(d, f), CONCAT(c, '-', dt) FROM t ORDER BY id",
		"SELECT id FROM t WHERE k IN (SELECT tid * 10 FROM u WHERE note <> 'w') ORDER BY id",
		"SELECT id, (SELECT note FROM u WHERE u.tid = t.id LIMIT 1) FROM t ORDER BY id",
		"SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.tid = t.id AND u.extra > t.k - 15) ORDER BY id",
		// The outer columns a subquery reads, through a nested one, in
		// HAVING, ORDER BY and a join; an EXISTS's select list unread.
		"SELECT id FROM t WHERE EXISTS (SELECT * FROM u WHERE u.tid = t.id AND EXISTS (SELECT 1 FROM a WHERE a.x = u.tid AND a.y > t.k - 40)) ORDER BY id",
		"SELECT c FROM t WHERE NOT EXISTS (SELECT note, extra FROM u WHERE u.tid = t.id AND u.note > t.c) ORDER BY dt, id",
		"SELECT k, COUNT(*) FROM t GROUP BY k HAVING COUNT(*) > (SELECT COUNT(*) FROM u WHERE u.tid = t.k / 10) ORDER BY k",
		"SELECT id FROM t ORDER BY (SELECT MAX(extra) FROM u WHERE u.tid = t.id), pad, id",
		"SELECT t.c, u.note FROM t JOIN u ON u.tid = t.id AND u.extra > (SELECT MIN(x) FROM a WHERE a.id = t.id) ORDER BY u.id",
		"SELECT t.c, u.note FROM t JOIN u ON u.tid = t.id ORDER BY u.id",
		"SELECT t.pad, u.extra FROM t LEFT JOIN u ON u.tid = t.id WHERE t.f > 2 ORDER BY t.id, u.id",
		"SELECT x.c FROM (SELECT c, pad FROM t WHERE k = 10) AS x ORDER BY x.pad",
		"SELECT c, k2 FROM v ORDER BY id",
		"SELECT * FROM t ORDER BY id",
		"SELECT COUNT(*) FROM t",
		"SELECT id FROM t ORDER BY dt, id LIMIT 3",
		"SELECT k FROM t WHERE k = 20",
		"SELECT c FROM t WHERE k BETWEEN 15 AND 30 ORDER BY c",
		"SELECT id, y, z FROM a ORDER BY id",
		"SELECT z FROM a WHERE id BETWEEN 1 AND 3",
		"SELECT c FROM t WHERE id = 1 UNION SELECT pad FROM t WHERE id = 2",
		"SELECT c FROM t WHERE id BETWEEN 1 AND 3 FOR UPDATE",
	}
	results := func() []string {
		var out []string
		for _, q := range queries {
			out = append(out, query(t, s, q))
		}
		return out
	}
	defer func() { plan.ColumnPruning = true }()
	plan.ColumnPruning = false
	full := results()
	plan.ColumnPruning = true
	pruned := results()
	for i, q := range queries {
		if pruned[i] != full[i] {
			t.Errorf("%s\n pruned:\n%s\n all columns:\n%s", q, pruned[i], full[i])
		}
	}
	explain := query(t, s, "EXPLAIN SELECT c FROM t WHERE id BETWEEN 2 AND 5")
	if !strings.Contains(explain, "columns=id,c") {
		t.Errorf("the range scan does not read only id and c:\n%s", explain)
	}
}
