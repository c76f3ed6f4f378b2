package integration

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMergeOnCluster: on three strata processes with a short
// --split-merge-interval, a table split into eight regions whose rows are
// then mostly deleted goes back to few regions on its own (PD's merge
// checker, the raft store's PrepareMerge / CommitMerge), while a client
// keeps updating and reading rows through another node; every update the
// client saw acknowledged is in the table afterwards.
func TestMergeOnCluster(t *testing.T) {
	c := StartCluster(t, 3, "--split-merge-interval", "2s", "--split-check-interval", "-1s")
	db := c.Nodes[0].DB(t, "")
	mustExec(t, db, "CREATE DATABASE m", "CREATE TABLE m.t (id INT PRIMARY KEY, v INT)")
	var vals []string
	for i := 0; i < 800; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 0)", i))
	}
	mustExec(t, db, "INSERT INTO m.t VALUES "+strings.Join(vals, ","))
	// The split's own count: PD may merge its first regions (cold, and
	// empty as PD sees them until their sizes are reported) while the
	// statement is still splitting the later ones, so the count of
	// regions is never 8 at any one time on a slow run.
	var split int
	var ratio float64
	if err := db.QueryRow("SPLIT TABLE m.t BETWEEN (0) AND (800) REGIONS 8").Scan(&split, &ratio); err != nil {
		t.Fatal(err)
	}
	if split < 7 {
		t.Fatalf("SPLIT TABLE ... REGIONS 8 made %d regions", split)
	}
	dataRegions := func() int {
		st, err := c.Status()
		if err != nil {
			return -1
		}
		n := 0
		for _, r := range st.Regions {
			if !r.System {
				n++
			}
		}
		return n
	}
	c.WaitReplicated(60 * time.Second)
	before := dataRegions()
	mustExec(t, db, "DELETE FROM m.t WHERE id >= 100")

	// The client: updates through node 2, reads through node 3.
	wdb, rdb := c.Nodes[1].DB(t, "m"), c.Nodes[2].DB(t, "m")
	var acked sync.Map // id -> highest acknowledged v
	var stop atomic.Bool
	var writes, reads, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for seq := 1; !stop.Load(); seq++ {
			id := seq % 100
			if _, err := wdb.Exec("UPDATE t SET v = ? WHERE id = ?", seq, id); err != nil {
				failed.Add(1)
			} else {
				acked.Store(id, seq)
				writes.Add(1)
			}
			var v int
			if err := rdb.QueryRow("SELECT v FROM t WHERE id = ?", (seq*7)%100).Scan(&v); err != nil {
				failed.Add(1)
			} else {
				reads.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	after := before
	for time.Since(start) < 120*time.Second {
		if n := dataRegions(); n > 0 {
			after = n
		}
		if after <= 2 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Traffic goes on a little over the merged layout.
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	t.Logf("data regions %d -> %d in %v; %d updates and %d reads acknowledged, %d failed",
		before, after, time.Since(start).Round(time.Second), writes.Load(), reads.Load(), failed.Load())
	if after > 2 {
		t.Fatalf("%d data regions after 120 s (were %d)", after, before)
	}
	if writes.Load() == 0 || reads.Load() == 0 {
		t.Fatal("the client got nothing done during the merges")
	}
	rows, err := db.Query("SELECT id, v FROM m.t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	count := 0
	for rows.Next() {
		var id, v int
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		count++
		if w, ok := acked.Load(id); ok && v < w.(int) {
			t.Fatalf("row %d has v=%d, below the acknowledged update to %d", id, v, w)
		}
	}
	if count != 100 {
		t.Fatalf("%d rows, want 100", count)
	}
	c.WaitReplicated(60 * time.Second)
	var shown int
	r2, err := c.Nodes[2].DB(t, "").Query("SHOW TABLE m.t REGIONS")
	if err != nil {
		t.Fatal(err)
	}
	for r2.Next() {
		shown++
	}
	r2.Close()
	if shown > 2 {
		t.Fatalf("SHOW TABLE m.t REGIONS lists %d regions after the merges", shown)
	}
}
