package integration

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TestAddIndexUnderWritesThroughTwoNodes: two strata processes form a
// cluster; clients write one table through both while indexes are added
// (one unique) and dropped through the second node, and ADMIN CHECK TABLE
// through either node then finds every row's index entries and no others.
// ADMIN SHOW DDL JOBS shows the backfill's progress while it runs, and
// which backfills ran in ingest mode.
func TestAddIndexUnderWritesThroughTwoNodes(t *testing.T) {
	c := StartCluster(t, 2)
	db0 := c.Nodes[0].DB(t, "")
	mustExec(t, db0, "CREATE DATABASE o")
	d0, d1 := c.Nodes[0].DB(t, "o"), c.Nodes[1].DB(t, "o")
	mustExec(t, d0, "CREATE TABLE t (id INT PRIMARY KEY, k INT, c VARCHAR(20), KEY ik (k))")
	const rows = 20000
	for i := 0; i < rows; i += 1000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO t VALUES ")
		for j := i; j < i+1000; j++ {
			if j > i {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, "(%d, %d, 'c%d')", j, j%97, j)
		}
		mustExec(t, d0, sb.String())
	}

	var (
		stop    atomic.Bool
		writes  atomic.Int64
		wg      sync.WaitGroup
		failMu  sync.Mutex
		failure error
	)
	expected := func(err error) bool {
		var me *mysql.MySQLError
		if !errors.As(err, &me) {
			return false
		}
		switch me.Number {
		case 1062, 1213, 1205, 8028:
			return true
		}
		return false
	}
	for w := 0; w < 4; w++ {
		pool := []*sql.DB{d0, d1}[w%2]
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for !stop.Load() {
				id := rng.IntN(rows * 2)
				var q string
				switch op := rng.IntN(10); {
				case op < 3:
					q = fmt.Sprintf("INSERT INTO t VALUES (%d, %d, 'c%d')", id, rng.IntN(97), id)
				case op < 7:
					q = fmt.Sprintf("UPDATE t SET k = %d WHERE id = %d", rng.IntN(97), id)
				case op < 8:
					q = fmt.Sprintf("REPLACE INTO t VALUES (%d, %d, 'c%d')", id, rng.IntN(97), id)
				default:
					q = fmt.Sprintf("DELETE FROM t WHERE id = %d", id)
				}
				_, err := pool.Exec(q)
				switch {
				case err == nil:
					writes.Add(1)
				case !expected(err):
					failMu.Lock()
					failure = fmt.Errorf("writer %d: %s: %w", w, q, err)
					failMu.Unlock()
					stop.Store(true)
				}
			}
		}(w)
	}
	check := func(when string) {
		t.Helper()
		for i, d := range []*sql.DB{d0, d1} {
			if _, err := d.Exec("ADMIN CHECK TABLE t"); err != nil {
				t.Fatalf("%s, through node %d: %v", when, i+1, err)
			}
		}
	}
	var sawProgress atomic.Bool
	for _, ddl := range []string{
		"ALTER TABLE t ADD INDEX ick (c, k)",
		"ALTER TABLE t ADD UNIQUE INDEX uc (c)",
		"ALTER TABLE t DROP INDEX ik",
		"ALTER TABLE t ADD INDEX ik (k)",
	} {
		before := writes.Load()
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := d1.Exec(ddl)
			done <- err
		}()
		for watching := true; watching; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: %v", ddl, err)
				}
				watching = false
			case <-time.After(20 * time.Millisecond):
				if state, count, err := lastJob(d0); err == nil && state == "write reorganization" && count > 0 {
					sawProgress.Store(true)
				}
			}
		}
		if stop.Load() {
			break
		}
		if writes.Load() == before {
			t.Errorf("%s: no write succeeded while it ran", ddl)
		}
		t.Logf("%s: %s, %d writes through both nodes meanwhile", ddl, time.Since(start).Round(time.Millisecond), writes.Load()-before)
		check("after " + ddl)
	}
	stop.Store(true)
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	check("at the end")
	if !sawProgress.Load() {
		t.Log("no backfill progress was caught by ADMIN SHOW DDL JOBS (the backfills were quick)")
	}
	var n1, n2 int
	if err := d0.QueryRow("SELECT COUNT(*) FROM t WHERE k = 5").Scan(&n1); err != nil {
		t.Fatal(err)
	}
	if err := d1.QueryRow("SELECT COUNT(*) FROM t WHERE k + 0 = 5").Scan(&n2); err != nil { // no index for k + 0
		t.Fatal(err)
	}
	if n1 != n2 {
		t.Fatalf("k = 5: %d rows through the index, %d without", n1, n2)
	}
	// The non-unique indexes were backfilled in ingest mode (imported
	// through the region leaders, wherever they are), the unique one in
	// transactions.
	jobs, err := d0.Query("ADMIN SHOW DDL JOBS 10")
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Close()
	modes := map[string]int{}
	cols := make([]sql.RawBytes, 12)
	ptrs := make([]any, len(cols))
	for i := range cols {
		ptrs[i] = &cols[i]
	}
	for jobs.Next() {
		if err := jobs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		if typ := string(cols[3]); strings.HasPrefix(typ, "add index") {
			modes[typ]++
		}
	}
	if modes["add index /* ingest */"] != 2 || modes["add index /* txn */"] != 1 {
		t.Fatalf("backfill modes of the jobs: %v, want 2 ingest and 1 txn", modes)
	}
}

// lastJob returns the newest DDL job's schema state and row count from
// ADMIN SHOW DDL JOBS.
func lastJob(db *sql.DB) (state string, rowCount int64, err error) {
	rows, err := db.Query("ADMIN SHOW DDL JOBS 1")
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	cols := make([]sql.RawBytes, 12)
	ptrs := make([]any, len(cols))
	for i := range cols {
		ptrs[i] = &cols[i]
	}
	if !rows.Next() {
		return "", 0, rows.Err()
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", 0, err
	}
	_, err = fmt.Sscan(string(cols[7]), &rowCount)
	return string(cols[4]), rowCount, err
}
