package integration

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAcknowledgedWritesSurviveKill9 is the durability contract: writers
// run two-row transactions (one row in each of two tables) while the
// process is killed with SIGKILL; after a restart on the same data
// directory every acknowledged transaction is present, and no transaction
// is half visible.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	n := StartNode(t)
	createDurTables(t, n)
	killUnderLoad(t, n)
}

// TestAcknowledgedWritesSurviveKill9DirectWAL runs the same contract once
// the Raft engine writes its WAL through O_DIRECT|O_DSYNC into a prefilled
// file (package engine, walFS), which it does from its first log
// rotations on, and again after each restart, when a spare kept from the
// last run is the new WAL.
func TestAcknowledgedWritesSurviveKill9DirectWAL(t *testing.T) {
	n := StartNode(t)
	createDurTables(t, n)
	db := n.DB(t, "dur")
	pad := strings.Repeat("x", 900)
	mustExec(t, db, "CREATE TABLE filler (id INT PRIMARY KEY, pad VARCHAR(1000))")
	deadline := time.Now().Add(60 * time.Second)
	for id := 0; metricValue(t, n, `strata_engine_raft_wal_files_total{mode="direct"}`) < 2; id += 50 {
		if time.Now().After(deadline) {
			t.Fatal("the Raft engine never opened a WAL for direct writes")
		}
		var q strings.Builder
		q.WriteString("INSERT INTO filler VALUES ")
		for i := range 50 {
			if i > 0 {
				q.WriteString(",")
			}
			fmt.Fprintf(&q, "(%d, '%s')", id+i, pad)
		}
		mustExec(t, db, q.String())
	}
	db.Close()
	killUnderLoad(t, n)
}

func createDurTables(t *testing.T, n *Node) {
	t.Helper()
	mustExec(t, n.DB(t, ""), "CREATE DATABASE dur")
	setup := n.DB(t, "dur")
	mustExec(t, setup,
		"CREATE TABLE orders (id BIGINT PRIMARY KEY, writer INT NOT NULL, seq INT NOT NULL)",
		"CREATE TABLE ledger (id BIGINT PRIMARY KEY, writer INT NOT NULL, amount INT NOT NULL)",
	)
	setup.Close()
}

// metricValue reads one sample (name with its labels, as /metrics prints
// it) from the node's /metrics; 0 when absent.
func metricValue(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// killUnderLoad kills the node twice under a write load of two-row
// transactions and checks, after each restart and after a clean one, that
// every acknowledged transaction is whole and nothing is half visible.
func killUnderLoad(t *testing.T, n *Node) {
	t.Helper()
	const (
		writers = 4
		rounds  = 2
	)
	attempted := map[int64]bool{} // transactions sent (outcome possibly unknown)
	acked := map[int64]bool{}     // transactions whose COMMIT returned success
	var mu sync.Mutex
	nextSeq := make([]int64, writers)

	for round := 0; round < rounds; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				db, err := sql.Open("mysql", n.DSN("dur"))
				if err != nil {
					t.Error(err)
					return
				}
				defer db.Close()
				db.SetMaxOpenConns(1)
				for {
					select {
					case <-stop:
						return
					default:
					}
					nextSeq[w]++
					id := int64(w)<<32 | nextSeq[w]
					mu.Lock()
					attempted[id] = true
					mu.Unlock()
					if err := writePair(db, id, w); err != nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			}(w)
		}

		// Let some transactions commit, then kill the process mid-load.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			count := len(acked)
			mu.Unlock()
			if count >= (round+1)*150 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // make sure commits are in flight at the kill
		pid := n.PID()
		n.Kill()
		close(stop)
		wg.Wait()
		mu.Lock()
		t.Logf("round %d: killed pid %d after %d acknowledged of %d attempted transactions", round, pid, len(acked), len(attempted))
		if len(acked) == 0 {
			mu.Unlock()
			t.Fatal("no transaction was acknowledged before the kill")
		}
		mu.Unlock()

		n.Start()
		verifyPairs(t, n, attempted, acked)
	}

	// A clean shutdown (SIGTERM) and restart keeps everything too.
	n.Stop()
	n.Start()
	verifyPairs(t, n, attempted, acked)
}

// writePair commits one row into each table in one transaction.
func writePair(db *sql.DB, id int64, writer int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, writer, seq) VALUES (?, ?, ?)", id, writer, int32(id)); err != nil {
		tx.Rollback()
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO ledger (id, writer, amount) VALUES (?, ?, ?)", id, writer, 10); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func verifyPairs(t *testing.T, n *Node, attempted, acked map[int64]bool) {
	t.Helper()
	db := n.DB(t, "dur")
	ids := func(table string) map[int64]bool {
		rows, err := db.Query("SELECT id FROM " + table)
		if err != nil {
			t.Fatalf("reading %s after restart: %v", table, err)
		}
		defer rows.Close()
		out := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out[id] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	orders, ledger := ids("orders"), ids("ledger")
	lost := 0
	for id := range acked {
		if !orders[id] || !ledger[id] {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged transaction %#x lost (orders=%v ledger=%v)", id, orders[id], ledger[id])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged transactions lost", lost, len(acked))
	}
	for id := range orders {
		if !ledger[id] {
			t.Fatalf("half a transaction visible: %#x in orders but not in ledger", id)
		}
		if !attempted[id] {
			t.Fatalf("row %#x was never written", id)
		}
	}
	for id := range ledger {
		if !orders[id] {
			t.Fatalf("half a transaction visible: %#x in ledger but not in orders", id)
		}
	}
	t.Logf("after restart: %d transactions present, all %d acknowledged among them", len(orders), len(acked))
}
