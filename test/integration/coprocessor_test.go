package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCoprocessorOnCluster runs the analytic queries the coprocessor
// pushes down on a three-node cluster, through every node, with the table
// split into regions whose leaders are spread over the nodes: fragments
// travel to other stores over gRPC (batched, marshaled) and their answers
// must equal those of the same queries with strata_enable_coprocessor =
// OFF.
func TestCoprocessorOnCluster(t *testing.T) {
	c := StartCluster(t, 3)
	ctx := context.Background()
	db := c.Nodes[0].DB(t, "")
	mustExec(t, db, "CREATE DATABASE cop", "CREATE TABLE cop.t (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(40) NOT NULL, pad CHAR(20) NOT NULL)")
	for i := 0; i < 3000; i += 500 {
		var vals []string
		for j := i; j < i+500; j++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'c%d-%s', 'p%02d')", j, (j*7919)%1000, j, strings.Repeat("x", j%13), j%37))
		}
		mustExec(t, db, "INSERT INTO cop.t VALUES "+strings.Join(vals, ","))
	}
	c.WaitReplicated(60 * time.Second)
	// A split fails while PD moves the region's leader: try again.
	for attempt := 0; ; attempt++ {
		_, err := db.ExecContext(ctx, "SPLIT TABLE cop.t BETWEEN (0) AND (3000) REGIONS 6")
		if err == nil {
			break
		}
		if attempt == 20 {
			t.Fatalf("split: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.WaitReplicated(60 * time.Second)
	queries := []string{
		"SELECT COUNT(*) FROM cop.t",
		"SELECT k % 100 g, COUNT(*), SUM(LENGTH(c)) FROM cop.t GROUP BY g ORDER BY g",
		"SELECT SUBSTRING(pad,1,2) p, COUNT(*), AVG(k) FROM cop.t GROUP BY p ORDER BY 2 DESC, 1 LIMIT 5",
		"SELECT id, k FROM cop.t WHERE k < 20 ORDER BY id",
		"SELECT id, k FROM cop.t ORDER BY k DESC, id LIMIT 7",
		"SELECT MIN(c), MAX(c), SUM(k) FROM cop.t WHERE c LIKE 'c1%'",
	}
	answers := func(conn *sql.Conn) []string {
		var out []string
		for _, q := range queries {
			rows, err := conn.QueryContext(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			cols, _ := rows.Columns()
			var all []string
			for rows.Next() {
				vals := make([]sql.NullString, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				all = append(all, fmt.Sprint(vals))
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			rows.Close()
			out = append(out, strings.Join(all, "\n"))
		}
		return out
	}
	for i, n := range c.Nodes {
		conn, err := n.DB(t, "").Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, conn, "SET strata_enable_coprocessor = OFF")
		want := answers(conn)
		mustExec(t, conn, "SET strata_enable_coprocessor = ON", "SET tidb_distsql_scan_concurrency = 4")
		got := answers(conn)
		for j, q := range queries {
			if got[j] != want[j] {
				t.Errorf("node %d: %s\npushed:\n%s\nnot pushed:\n%s", i+1, q, got[j], want[j])
			}
		}
		var plan string
		rows, err := conn.QueryContext(ctx, "EXPLAIN "+queries[1])
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			rows.Scan(&line)
			plan += line + "\n"
		}
		rows.Close()
		if !strings.Contains(plan, "cop[strata]") {
			t.Errorf("node %d: not pushed:\n%s", i+1, plan)
		}
		conn.Close()
	}
}
