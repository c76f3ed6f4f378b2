package sql_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/node"
	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// nodeSessions starts an in-process node and returns n sessions on it, with
// the table cnt (id 1..3, n = 0) created.
func nodeSessions(t *testing.T, n int) []*sql.Session {
	t.Helper()
	nd, err := node.Start(context.Background(), node.Config{DataDir: t.TempDir(), InMemory: true, GCInterval: -1})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { nd.Close() })
	first := nd.SQL().NewSession("root", "localhost")
	for _, q := range []string{"CREATE DATABASE d", "USE d", "CREATE TABLE cnt (id INT PRIMARY KEY, n INT NOT NULL)",
		"INSERT INTO cnt VALUES (1, 0), (2, 0), (3, 0)"} {
		exec(t, first, q)
	}
	out := []*sql.Session{first}
	for len(out) < n {
		s := nd.SQL().NewSession("root", "localhost")
		exec(t, s, "USE d")
		out = append(out, s)
	}
	return out
}

func exec(t *testing.T, s *sql.Session, q string) {
	t.Helper()
	if _, err := s.Execute(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func value(t *testing.T, s *sql.Session, q string) string {
	t.Helper()
	rs, err := s.Execute(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if len(rs) != 1 || len(rs[0].Rows) != 1 || len(rs[0].Rows[0]) != 1 {
		t.Fatalf("%s: not one value", q)
	}
	str, _ := rs[0].Rows[0][0].ToString()
	return str
}

func sqlCode(err error) uint16 {
	var se *sqlerr.Error
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// async runs q on s in the background.
func async(s *sql.Session, q string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := s.Execute(context.Background(), q)
		done <- err
	}()
	return done
}

func blocked(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("statement did not wait for the lock: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

// An UPDATE in a pessimistic transaction waits for the row lock of another
// and then updates the value that transaction committed: no lost update,
// no error.
func TestPessimisticUpdateWaitsAndReadsLatest(t *testing.T) {
	ss := nodeSessions(t, 2)
	a, b := ss[0], ss[1]
	exec(t, a, "BEGIN")
	exec(t, a, "UPDATE cnt SET n = n + 1 WHERE id = 1")
	exec(t, b, "BEGIN")
	done := async(b, "UPDATE cnt SET n = n + 1 WHERE id = 1")
	blocked(t, done)
	exec(t, a, "COMMIT")
	if err := <-done; err != nil {
		t.Fatalf("waiting update: %v", err)
	}
	exec(t, b, "COMMIT")
	if v := value(t, a, "SELECT n FROM cnt WHERE id = 1"); v != "2" {
		t.Fatalf("n = %s after two increments", v)
	}
	// SELECT ... FOR UPDATE waits too, and reads the latest row.
	exec(t, a, "BEGIN")
	exec(t, a, "UPDATE cnt SET n = 10 WHERE id = 2")
	exec(t, b, "BEGIN")
	res := make(chan string, 1)
	go func() { res <- value(t, b, "SELECT n FROM cnt WHERE id = 2 FOR UPDATE") }()
	time.Sleep(100 * time.Millisecond)
	exec(t, a, "COMMIT")
	if v := <-res; v != "10" {
		t.Fatalf("SELECT FOR UPDATE after the holder committed read %s, want 10", v)
	}
	// A plain SELECT of a REPEATABLE READ transaction keeps its snapshot.
	exec(t, b, "UPDATE cnt SET n = n + 1 WHERE id = 2")
	exec(t, b, "COMMIT")
	if v := value(t, a, "SELECT n FROM cnt WHERE id = 2"); v != "11" {
		t.Fatalf("n = %s", v)
	}
}

func TestLockWaitTimeoutKeepsTransaction(t *testing.T) {
	ss := nodeSessions(t, 2)
	a, b := ss[0], ss[1]
	exec(t, a, "BEGIN")
	exec(t, a, "UPDATE cnt SET n = 5 WHERE id = 1")
	exec(t, b, "SET innodb_lock_wait_timeout = 1")
	exec(t, b, "BEGIN")
	exec(t, b, "UPDATE cnt SET n = 7 WHERE id = 2")
	began := time.Now()
	_, err := b.Execute(context.Background(), "UPDATE cnt SET n = n + 1 WHERE id = 1")
	if sqlCode(err) != sqlerr.ErLockWaitTimeout {
		t.Fatalf("err = %v, want 1205", err)
	}
	if waited := time.Since(began); waited < 900*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("waited %v for a 1 s lock wait timeout", waited)
	}
	if !strings.Contains(err.Error(), "Lock wait timeout exceeded; try restarting transaction") {
		t.Fatalf("text: %v", err)
	}
	// The statement failed, the transaction goes on (InnoDB's default).
	if !b.InTxn() {
		t.Fatal("a lock wait timeout ended the transaction")
	}
	exec(t, b, "COMMIT")
	exec(t, a, "COMMIT")
	if v := value(t, a, "SELECT CONCAT(n, ',', (SELECT n FROM cnt WHERE id = 2)) FROM cnt WHERE id = 1"); v != "5,7" {
		t.Fatalf("rows = %s", v)
	}
}

// Two transactions waiting for each other: the one whose wait closes the
// cycle fails at once with 1213 and is rolled back; the other goes on.
func TestDeadlockVictimRolledBack(t *testing.T) {
	ss := nodeSessions(t, 2)
	a, b := ss[0], ss[1]
	exec(t, a, "BEGIN")
	exec(t, a, "UPDATE cnt SET n = 1 WHERE id = 1")
	exec(t, b, "BEGIN")
	exec(t, b, "UPDATE cnt SET n = 2 WHERE id = 2")
	done := async(a, "UPDATE cnt SET n = 1 WHERE id = 2")
	blocked(t, done)
	began := time.Now()
	_, err := b.Execute(context.Background(), "UPDATE cnt SET n = 2 WHERE id = 1")
	if sqlCode(err) != sqlerr.ErLockDeadlock {
		t.Fatalf("err = %v, want 1213", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Fatalf("deadlock found after %v", took)
	}
	if want := "Deadlock found when trying to get lock; try restarting transaction"; !strings.Contains(err.Error(), want) {
		t.Fatalf("text %q", err)
	}
	if b.InTxn() {
		t.Fatal("the deadlock victim's transaction is still open")
	}
	if err := <-done; err != nil {
		t.Fatalf("the survivor: %v", err)
	}
	exec(t, a, "COMMIT")
	if v := value(t, b, "SELECT CONCAT(n, ',', (SELECT n FROM cnt WHERE id = 2)) FROM cnt WHERE id = 1"); v != "1,1" {
		t.Fatalf("rows = %s (the victim's write must be gone)", v)
	}
}

func TestOptimisticModeFailsAtCommit(t *testing.T) {
	for _, setup := range []struct{ set, begin string }{
		{"SET tidb_txn_mode = 'optimistic'", "BEGIN"},
		{"SET tidb_txn_mode = 'pessimistic'", "BEGIN OPTIMISTIC"},
	} {
		t.Run(setup.begin, func(t *testing.T) {
			ss := nodeSessions(t, 2)
			a, b := ss[0], ss[1]
			for _, s := range ss {
				exec(t, s, setup.set)
				exec(t, s, setup.begin)
			}
			exec(t, a, "UPDATE cnt SET n = n + 1 WHERE id = 1")
			exec(t, b, "UPDATE cnt SET n = n + 1 WHERE id = 1") // no wait
			exec(t, a, "COMMIT")
			_, err := b.Execute(context.Background(), "COMMIT")
			if sqlCode(err) != sqlerr.ErLockDeadlock {
				t.Fatalf("second commit: %v, want 1213", err)
			}
			if strings.Contains(err.Error(), `\x`) || strings.Contains(err.Error(), "key") {
				t.Fatalf("error text shows a key: %v", err)
			}
		})
	}
}

func TestReadCommittedReadsFreshSnapshotPerStatement(t *testing.T) {
	ss := nodeSessions(t, 2)
	a, b := ss[0], ss[1]
	exec(t, a, "SET SESSION transaction_isolation = 'READ-COMMITTED'")
	exec(t, a, "BEGIN")
	if v := value(t, a, "SELECT n FROM cnt WHERE id = 1"); v != "0" {
		t.Fatal(v)
	}
	exec(t, b, "UPDATE cnt SET n = 1 WHERE id = 1")
	if v := value(t, a, "SELECT n FROM cnt WHERE id = 1"); v != "1" {
		t.Fatalf("READ COMMITTED read %s, want the committed 1", v)
	}
	exec(t, a, "COMMIT")
	// SET TRANSACTION ISOLATION LEVEL applies to the next transaction only.
	exec(t, a, "SET SESSION transaction_isolation = 'REPEATABLE-READ'")
	exec(t, a, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
	for round, want := range []string{"2", "3"} {
		exec(t, a, "BEGIN")
		value(t, a, "SELECT n FROM cnt WHERE id = 1")
		exec(t, b, fmt.Sprintf("UPDATE cnt SET n = %s WHERE id = 1", want))
		got := value(t, a, "SELECT n FROM cnt WHERE id = 1")
		exec(t, a, "COMMIT")
		if round == 0 && got != want {
			t.Fatalf("one-shot READ COMMITTED read %s, want %s", got, want)
		}
		if round == 1 && got == want {
			t.Fatal("the one-shot isolation level outlived its transaction")
		}
	}
}

// Four sessions each increment one counter 50 times in explicit
// transactions: every increment lands and none fails.
func TestConcurrentIncrementsAllSucceed(t *testing.T) {
	ss := nodeSessions(t, 4)
	var wg sync.WaitGroup
	errs := make(chan error, len(ss))
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				for _, q := range []string{"BEGIN", "UPDATE cnt SET n = n + 1 WHERE id = 3", "COMMIT"} {
					if _, err := s.Execute(context.Background(), q); err != nil {
						errs <- fmt.Errorf("%s: %w", q, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v := value(t, ss[0], "SELECT n FROM cnt WHERE id = 3"); v != "200" {
		t.Fatalf("n = %s, want 200", v)
	}
}

// Under REPEATABLE READ a transaction that read a row at its snapshot and
// then locks a row committed since moves its snapshot forward when what it
// read is unchanged. Only the columns the read used count: New-Order reads
// the warehouse's w_tax while Payments update its w_ytd.
func TestSnapshotRefreshComparesColumnsRead(t *testing.T) {
	ss := nodeSessions(t, 2)
	a, b := ss[0], ss[1]
	exec(t, a, "CREATE TABLE w (id INT PRIMARY KEY, tax INT, ytd INT, name VARCHAR(10))")
	exec(t, a, "INSERT INTO w VALUES (1, 7, 0, 'x')")

	// Another column of the row read changed: the refresh holds.
	exec(t, a, "BEGIN")
	if got := value(t, a, "SELECT tax FROM w WHERE id = 1"); got != "7" {
		t.Fatalf("tax = %s, want 7", got)
	}
	exec(t, b, "UPDATE w SET ytd = ytd + 10 WHERE id = 1")
	exec(t, b, "UPDATE cnt SET n = n + 1 WHERE id = 1")
	exec(t, a, "UPDATE cnt SET n = n + 1 WHERE id = 1")
	exec(t, a, "COMMIT")
	if got := value(t, b, "SELECT n FROM cnt WHERE id = 1"); got != "2" {
		t.Fatalf("n = %s, want 2", got)
	}

	// The same through a join (New-Order reads customer and warehouse in
	// one statement): each side decodes only the columns the join uses.
	exec(t, a, "BEGIN")
	if got := value(t, a, "SELECT w.tax FROM cnt, w WHERE cnt.id = 1 AND w.id = 1 AND cnt.id = w.id"); got != "7" {
		t.Fatalf("tax = %s, want 7", got)
	}
	exec(t, b, "UPDATE w SET ytd = ytd + 10 WHERE id = 1")
	exec(t, b, "UPDATE cnt SET n = n + 1 WHERE id = 2")
	exec(t, a, "UPDATE cnt SET n = n + 1 WHERE id = 2")
	exec(t, a, "COMMIT")

	// A column the read used changed: 1213, nothing written.
	exec(t, a, "BEGIN")
	exec(t, a, "SELECT tax, name FROM w WHERE id = 1")
	exec(t, b, "UPDATE w SET name = 'y' WHERE id = 1")
	exec(t, b, "UPDATE cnt SET n = n + 1 WHERE id = 1")
	_, err := a.Execute(context.Background(), "UPDATE cnt SET n = n + 1 WHERE id = 1")
	if sqlCode(err) != 1213 {
		t.Fatalf("update after a changed read: %v, want 1213", err)
	}
	exec(t, a, "ROLLBACK")

	// The same row read twice for different columns: both must hold, so
	// a change to either column refuses the refresh.
	exec(t, a, "BEGIN")
	value(t, a, "SELECT tax FROM w WHERE id = 1")
	value(t, a, "SELECT ytd FROM w WHERE id = 1")
	exec(t, b, "UPDATE w SET ytd = ytd + 1 WHERE id = 1")
	exec(t, b, "UPDATE cnt SET n = n + 1 WHERE id = 1")
	_, err = a.Execute(context.Background(), "UPDATE cnt SET n = n + 1 WHERE id = 1")
	if sqlCode(err) != 1213 {
		t.Fatalf("update after a changed second read: %v, want 1213", err)
	}
	exec(t, a, "ROLLBACK")
	if got := value(t, b, "SELECT n FROM cnt WHERE id = 1"); got != "4" {
		t.Fatalf("n = %s, want 4", got)
	}
}
