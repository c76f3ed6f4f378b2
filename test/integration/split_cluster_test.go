package integration

import (
	"fmt"
	"testing"
	"time"
)

// TestSplitTableOnEveryNode runs SPLIT TABLE through each of three nodes:
// whichever node leads the table's region carries out the split, the
// others ask it over the stores' gRPC service. Every split is counted and
// SHOW TABLE REGIONS shows every boundary from every node.
func TestSplitTableOnEveryNode(t *testing.T) {
	c := StartCluster(t, 3)
	db := c.Nodes[0].DB(t, "")
	mustExec(t, db, "CREATE DATABASE s", "CREATE TABLE s.t (id INT PRIMARY KEY, v INT)")
	c.WaitReplicated(60 * time.Second)
	for i, n := range c.Nodes {
		ndb := n.DB(t, "")
		lo, hi := i*300, i*300+300
		var splits, ratio float64
		q := fmt.Sprintf("SPLIT TABLE s.t BETWEEN (%d) AND (%d) REGIONS 3", lo, hi)
		if err := ndb.QueryRow(q).Scan(&splits, &ratio); err != nil {
			t.Fatalf("node %d: %s: %v", i+1, q, err)
		}
		// Boundaries at lo, lo+100 and lo+200; lo is already one when
		// the previous node's range ended there.
		if splits < 2 || splits > 3 {
			t.Fatalf("node %d: %s split %v regions, want 2 or 3", i+1, q, splits)
		}
	}
	for i, n := range c.Nodes {
		rows, err := n.DB(t, "").Query("SHOW TABLE s.t REGIONS")
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for rows.Next() {
			count++
		}
		rows.Close()
		if count < 9 {
			t.Fatalf("node %d shows %d regions of s.t, want at least 9 after three SPLIT TABLEs", i+1, count)
		}
	}
	// The table still reads and writes across the new regions.
	for i := 0; i < 900; i += 50 {
		mustExec(t, db, fmt.Sprintf("INSERT INTO s.t VALUES (%d, %d)", i, i))
	}
	var n int
	if err := c.Nodes[2].DB(t, "").QueryRow("SELECT COUNT(*) FROM s.t").Scan(&n); err != nil || n != 18 {
		t.Fatalf("count %d %v, want 18", n, err)
	}
}
