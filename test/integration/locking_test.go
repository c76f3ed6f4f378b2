package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Four clients each run BEGIN; UPDATE cnt SET n = n + 1; COMMIT fifty times
// against one row, and then 50 autocommit increments each: every
// transaction waits for the row lock instead of failing, so the counter
// ends at 400 with no error at all (MySQL's behaviour, which applications
// count on).
func TestCounterUnderContention(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE app")
	db := n.DB(t, "app")
	mustExec(t, db, "CREATE TABLE cnt (id INT PRIMARY KEY, n BIGINT NOT NULL)", "INSERT INTO cnt VALUES (1, 0)")
	const clients, rounds = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Conn(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			for i := 0; i < rounds; i++ {
				for _, q := range []string{"BEGIN", "UPDATE cnt SET n = n + 1 WHERE id = 1", "COMMIT"} {
					if _, err := conn.ExecContext(context.Background(), q); err != nil {
						errs <- fmt.Errorf("round %d, %s: %w", i, q, err)
						return
					}
				}
			}
			for i := 0; i < rounds; i++ {
				if _, err := conn.ExecContext(context.Background(), "UPDATE cnt SET n = n + 1 WHERE id = 1"); err != nil {
					errs <- fmt.Errorf("autocommit round %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var got int
	if err := db.QueryRow("SELECT n FROM cnt WHERE id = 1").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := 2 * clients * rounds; got != want {
		t.Fatalf("n = %d, want %d", got, want)
	}
}

// Sixteen clients move money between random accounts in pessimistic
// transactions that update the two rows in random order, so some of them
// deadlock: the detector aborts one of each cycle at once with 1213 and the
// client retries it. The total never changes and no other error appears.
func TestBankTransfersPessimistic(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE bank")
	db := n.DB(t, "bank")
	db.SetMaxOpenConns(32)
	const accounts, initial = 20, 1000
	mustExec(t, db, "CREATE TABLE acct (id INT PRIMARY KEY, balance BIGINT NOT NULL)")
	var values []string
	for i := 0; i < accounts; i++ {
		values = append(values, fmt.Sprintf("(%d, %d)", i, initial))
	}
	mustExec(t, db, "INSERT INTO acct VALUES "+strings.Join(values, ", "))

	const clients = 16
	deadline := time.Now().Add(4 * time.Second)
	var transfers, deadlocks atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				from, to := rand.IntN(accounts), rand.IntN(accounts)
				if from == to {
					continue
				}
				err := transferSQL(db, from, to, int64(rand.IntN(50)))
				if code, _ := errCode(err); code == 1213 {
					deadlocks.Add(1)
					if strings.Contains(err.Error(), `\x`) {
						errs <- fmt.Errorf("deadlock error shows an internal key: %v", err)
						return
					}
					continue // the victim was rolled back: retry
				}
				if err != nil {
					errs <- err
					return
				}
				transfers.Add(1)
			}
		}()
	}
	// Meanwhile the total, read in snapshots, never changes.
	checkDone := make(chan struct{})
	go func() {
		defer close(checkDone)
		for time.Now().Before(deadline) {
			var sum int64
			if err := db.QueryRow("SELECT SUM(balance) FROM acct").Scan(&sum); err != nil {
				errs <- err
				return
			}
			if sum != accounts*initial {
				errs <- fmt.Errorf("total %d in a snapshot, want %d", sum, accounts*initial)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	wg.Wait()
	<-checkDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var sum int64
	if err := db.QueryRow("SELECT SUM(balance) FROM acct").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != accounts*initial {
		t.Fatalf("total %d, want %d", sum, accounts*initial)
	}
	t.Logf("%d transfers, %d deadlock victims retried", transfers.Load(), deadlocks.Load())
	if transfers.Load() < 100 {
		t.Fatalf("only %d transfers in 4 s", transfers.Load())
	}
	if d := deadlocks.Load(); d*10 > transfers.Load() {
		t.Fatalf("%d deadlock victims for %d transfers: not rare", d, transfers.Load())
	}
}

func transferSQL(db *sql.DB, from, to int, amount int64) error {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE acct SET balance = balance - ? WHERE id = ?", amount, from); err != nil {
		return err
	}
	if _, err := tx.Exec("UPDATE acct SET balance = balance + ? WHERE id = ?", amount, to); err != nil {
		return err
	}
	return tx.Commit()
}

// A transaction that waits longer than innodb_lock_wait_timeout for a row
// lock gets 1205, and only its statement fails: the transaction goes on and
// commits what it did before.
func TestLockWaitTimeout(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE app")
	db := n.DB(t, "app")
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0), (2, 0)")
	ctx := context.Background()
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	mustExec(t, holder, "UPDATE t SET v = 1 WHERE id = 1")

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var timeout int
	if err := conn.QueryRowContext(ctx, "SELECT @@innodb_lock_wait_timeout").Scan(&timeout); err != nil || timeout != 50 {
		t.Fatalf("default innodb_lock_wait_timeout = %d (%v), want 50", timeout, err)
	}
	mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = 1", "BEGIN", "UPDATE t SET v = 2 WHERE id = 2")
	began := time.Now()
	_, err = conn.ExecContext(ctx, "UPDATE t SET v = 2 WHERE id = 1")
	expectError(t, err, 1205, "HY000")
	if waited := time.Since(began); waited < 900*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("1205 after %v with a 1 s timeout", waited)
	}
	if !strings.Contains(err.Error(), "Lock wait timeout exceeded; try restarting transaction") {
		t.Fatalf("text: %v", err)
	}
	// SELECT ... FOR UPDATE waits and times out the same way.
	_, err = conn.ExecContext(ctx, "SELECT v FROM t WHERE id = 1 FOR UPDATE")
	expectError(t, err, 1205, "HY000")
	mustExec(t, conn, "COMMIT")
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	var v1, v2 int
	if err := db.QueryRow("SELECT (SELECT v FROM t WHERE id = 1), (SELECT v FROM t WHERE id = 2)").Scan(&v1, &v2); err != nil {
		t.Fatal(err)
	}
	if v1 != 1 || v2 != 2 {
		t.Fatalf("v = %d, %d; want 1 (holder), 2 (the waiter's first statement)", v1, v2)
	}
}

// In a cluster the deadlock detector runs with PD's leader and the row
// locks are waited for on the leaders of their regions: two transactions
// that reach each other's rows through different nodes still find their
// deadlock at once (the victim gets 1213 well before the 50 s lock wait
// timeout) and the survivor commits.
func TestClusterDeadlockDetected(t *testing.T) {
	c := StartCluster(t, 3)
	mustExec(t, c.Nodes[0].DB(t, ""), "CREATE DATABASE app")
	mustExec(t, c.Nodes[0].DB(t, "app"), "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0), (2, 0)")
	if st, err := c.Status(); err == nil {
		for _, r := range st.Regions {
			t.Logf("region %d (system %v) led by store %d; PD's leader is store %d", r.ID, r.System, r.LeaderStore, st.PDLeaderStore)
		}
	}
	ctx := context.Background()
	begin := func(n *Node) *sql.Tx {
		tx, err := n.DB(t, "app").BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		return tx
	}
	a, b := begin(c.Nodes[1]), begin(c.Nodes[2])
	mustExec(t, a, "UPDATE t SET v = 1 WHERE id = 1")
	mustExec(t, b, "UPDATE t SET v = 2 WHERE id = 2")
	done := make(chan error, 1)
	go func() {
		_, err := a.Exec("UPDATE t SET v = 1 WHERE id = 2")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a did not wait for b's lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	began := time.Now()
	_, err := b.Exec("UPDATE t SET v = 2 WHERE id = 1")
	expectError(t, err, 1213, "40001")
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("deadlock found after %v", took)
	}
	if err := <-done; err != nil {
		t.Fatalf("the survivor: %v", err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	var v1, v2 int
	if err := c.Nodes[0].DB(t, "app").QueryRow("SELECT (SELECT v FROM t WHERE id = 1), (SELECT v FROM t WHERE id = 2)").Scan(&v1, &v2); err != nil {
		t.Fatal(err)
	}
	if v1 != 1 || v2 != 1 {
		t.Fatalf("v = %d, %d; want the survivor's 1, 1", v1, v2)
	}
}

// REPEATABLE READ is snapshot isolation: a transaction that read a row at
// its snapshot and then writes it after another transaction committed a
// change to it is rolled back with 1213 rather than overwrite a value it
// never saw (the lost update InnoDB allows). A transaction that has read
// nothing at its snapshot waits for the row and writes the latest value, as
// in MySQL; so does one that read the row with FOR UPDATE.
func TestRepeatableReadRefusesLostUpdate(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE app")
	db := n.DB(t, "app")
	mustExec(t, db, "CREATE TABLE acct (id INT PRIMARY KEY, balance BIGINT NOT NULL)", "INSERT INTO acct VALUES (1, 100), (2, 100)")
	ctx := context.Background()
	balance := func(id int) int64 {
		t.Helper()
		var b int64
		if err := db.QueryRow("SELECT balance FROM acct WHERE id = ?", id).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}

	// Read at the snapshot, another commit, then a write from the stale read.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen int64
	if err := tx.QueryRow("SELECT balance FROM acct WHERE id = 1").Scan(&seen); err != nil || seen != 100 {
		t.Fatalf("read %d (%v), want 100", seen, err)
	}
	mustExec(t, db, "UPDATE acct SET balance = balance - 30 WHERE id = 1")
	_, err = tx.Exec("UPDATE acct SET balance = ? WHERE id = 1", seen+10)
	expectError(t, err, 1213, "40001")
	_ = tx.Commit() // the transaction was rolled back: MySQL's COMMIT then commits nothing
	if b := balance(1); b != 70 {
		t.Fatalf("balance of 1 = %d, want 70 (the lost update of 110 must not land)", b)
	}

	// The same with a delta update: still refused, the read was stale.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow("SELECT balance FROM acct WHERE id = 2").Scan(&seen); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "UPDATE acct SET balance = balance + 5 WHERE id = 2")
	_, err = tx.Exec("UPDATE acct SET balance = balance - 1 WHERE id = 2")
	expectError(t, err, 1213, "40001")
	_ = tx.Rollback()

	// The rows read at the snapshot are unchanged, another one is written
	// after a concurrent commit: the snapshot moves past that commit (the
	// reads give the same answers there) and the write applies to the
	// latest row. A range read makes the snapshot final: refused again.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow("SELECT balance FROM acct WHERE id = 2").Scan(&seen); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "UPDATE acct SET balance = balance + 1 WHERE id = 1")
	mustExec(t, tx, "UPDATE acct SET balance = balance - 1 WHERE id = 1")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if b := balance(1); b != 70 {
		t.Fatalf("balance of 1 = %d, want 70", b)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	if err := tx.QueryRow("SELECT SUM(balance) FROM acct WHERE id BETWEEN 2 AND 9").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "UPDATE acct SET balance = balance + 1 WHERE id = 1")
	_, err = tx.Exec("UPDATE acct SET balance = balance - 1 WHERE id = 1")
	expectError(t, err, 1213, "40001")
	_ = tx.Rollback()
	mustExec(t, db, "UPDATE acct SET balance = balance - 1 WHERE id = 1")

	// Nothing read at the snapshot: the write waits for and applies to the
	// latest row, and later plain reads see it.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "UPDATE acct SET balance = balance + 0 WHERE id = 2")
	mustExec(t, db, "UPDATE acct SET balance = balance + 1 WHERE id = 1")
	mustExec(t, tx, "UPDATE acct SET balance = balance + 1 WHERE id = 1")
	var got int64
	if err := tx.QueryRow("SELECT balance FROM acct WHERE id = 1").Scan(&got); err != nil || got != 72 {
		t.Fatalf("read %d (%v) after the locking update, want 72", got, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// FOR UPDATE first: the read takes the lock and sees the latest row.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, "UPDATE acct SET balance = balance + 1 WHERE id = 1")
	if err := tx.QueryRow("SELECT balance FROM acct WHERE id = 1 FOR UPDATE").Scan(&seen); err != nil || seen != 73 {
		t.Fatalf("FOR UPDATE read %d (%v), want 73", seen, err)
	}
	if _, err := tx.Exec("UPDATE acct SET balance = ? WHERE id = 1", seen-3); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if b := balance(1); b != 70 {
		t.Fatalf("balance of 1 = %d, want 70", b)
	}
}

// SELECT ... FOR UPDATE on tables whose rows are not keyed by an integer
// primary key (a VARCHAR key, and no primary key at all) locks the rows it
// reads, through a full scan with or without a filter and through a
// secondary index: another transaction's write of such a row waits, and
// times out with 1205, while a row the locking read did not reach is free.
func TestLockingReadWithoutIntegerKey(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE app")
	db := n.DB(t, "app")
	mustExec(t, db,
		"CREATE TABLE s (k VARCHAR(10) PRIMARY KEY, v INT, w INT, KEY (w))",
		"INSERT INTO s VALUES ('a', 1, 1), ('b', 2, 2), ('c', 3, 3)",
		"CREATE TABLE h (v INT, w INT)",
		"INSERT INTO h VALUES (1, 1), (2, 2)")
	ctx := context.Background()
	for _, tc := range []struct {
		lock    string // the locking read
		rows    int    // what it returns
		blocked string // a write it must block
		free    string // a write it must not block ("" for none)
	}{
		{lock: "SELECT * FROM s FOR UPDATE", rows: 3, blocked: "UPDATE s SET v = 9 WHERE k = 'c'"},
		{lock: "SELECT * FROM s WHERE v > 1 FOR UPDATE", rows: 2, blocked: "UPDATE s SET v = 9 WHERE k = 'b'"},
		{lock: "SELECT * FROM s WHERE w = 2 FOR UPDATE", rows: 1, blocked: "UPDATE s SET v = 9 WHERE k = 'b'", free: "UPDATE s SET v = 9 WHERE k = 'c'"},
		{lock: "SELECT * FROM h FOR UPDATE", rows: 2, blocked: "UPDATE h SET w = 9 WHERE v = 2"},
		{lock: "SELECT * FROM h WHERE v = 1 FOR UPDATE", rows: 1, blocked: "DELETE FROM h WHERE v = 1"},
	} {
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := holder.QueryContext(ctx, tc.lock)
		if err != nil {
			t.Fatalf("%s: %v", tc.lock, err)
		}
		got := 0
		for rows.Next() {
			got++
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", tc.lock, err)
		}
		rows.Close()
		if got != tc.rows {
			t.Fatalf("%s: %d rows, want %d", tc.lock, got, tc.rows)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = 1", "BEGIN")
		if tc.free != "" {
			mustExec(t, conn, tc.free)
		}
		_, err = conn.ExecContext(ctx, tc.blocked)
		expectError(t, err, 1205, "HY000")
		mustExec(t, conn, "ROLLBACK")
		conn.Close()
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// NOWAIT, SKIP LOCKED and WAIT n, as MySQL 8 takes them (and the job
// queues of Django, Laravel and Rails send them): NOWAIT fails at once
// with 3572 on a row another transaction holds; SKIP LOCKED returns the
// rows it could lock and leaves the others, and under a LIMIT locks no
// more rows than it returns, so each consumer of a queue claims its own
// job; WAIT n waits n seconds instead of innodb_lock_wait_timeout.
func TestLockingReadNowaitSkipLocked(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE app")
	db := n.DB(t, "app")
	mustExec(t, db, "CREATE TABLE jobs (id INT PRIMARY KEY, state VARCHAR(10), KEY (state))")
	for i := 1; i <= 5; i++ {
		mustExec(t, db, fmt.Sprintf("INSERT INTO jobs VALUES (%d, 'new')", i))
	}
	ctx := context.Background()
	open := func() *sql.Conn {
		t.Helper()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		mustExec(t, c, "BEGIN")
		return c
	}
	ids := func(c *sql.Conn, q string) []int {
		t.Helper()
		rows, err := c.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		var out []int
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	holder := open()
	if got := ids(holder, "SELECT id FROM jobs WHERE id = 1 FOR UPDATE"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("holder: %v", got)
	}

	c2 := open()
	for _, q := range []string{"SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT", "SELECT id FROM jobs WHERE id = 1 FOR SHARE NOWAIT",
		"SELECT id FROM jobs WHERE state = 'new' FOR UPDATE NOWAIT"} {
		began := time.Now()
		_, err := c2.ExecContext(ctx, q)
		expectError(t, err, 3572, "HY000")
		if waited := time.Since(began); waited > 2*time.Second {
			t.Fatalf("%s: 3572 after %v", q, waited)
		}
	}
	// Consumers of a queue each claim the first job nobody holds.
	if got := ids(c2, "SELECT id FROM jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"); fmt.Sprint(got) != "[2]" {
		t.Fatalf("second consumer claimed %v, want [2]", got)
	}
	c3 := open()
	if got := ids(c3, "SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"); fmt.Sprint(got) != "[3]" {
		t.Fatalf("third consumer claimed %v, want [3]", got)
	}
	c4 := open()
	if got := ids(c4, "SELECT id FROM jobs FOR UPDATE SKIP LOCKED"); fmt.Sprint(got) != "[4 5]" {
		t.Fatalf("fourth consumer claimed %v, want [4 5]", got)
	}
	c5 := open()
	if got := ids(c5, "SELECT id FROM jobs WHERE state = 'new' FOR SHARE SKIP LOCKED"); len(got) != 0 {
		t.Fatalf("every job is held, yet SKIP LOCKED returned %v", got)
	}
	// WAIT 1 waits one second, not innodb_lock_wait_timeout's 50.
	began := time.Now()
	_, err := c5.ExecContext(ctx, "SELECT id FROM jobs WHERE id = 2 FOR UPDATE WAIT 1")
	expectError(t, err, 1205, "HY000")
	if waited := time.Since(began); waited < 900*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("WAIT 1 gave 1205 after %v", waited)
	}

	// Once the holder commits its row is free to NOWAIT.
	mustExec(t, holder, "COMMIT")
	if got := ids(c5, "SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("after the holder's commit: %v", got)
	}
	for _, c := range []*sql.Conn{c2, c3, c4, c5} {
		mustExec(t, c, "ROLLBACK")
	}
}
