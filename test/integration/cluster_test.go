package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Cluster tests: three real strata processes on loopback, killed, paused
// and restarted while clients you would write yourself (go-sql-driver)
// move money between accounts and insert rows through every node.

const (
	bankAccounts = 10
	bankBalance  = 1000
)

func createBank(t *testing.T, c *Cluster) {
	t.Helper()
	db := c.Nodes[0].DB(t, "")
	mustExec(t, db, "CREATE DATABASE bank")
	b := c.Nodes[0].DB(t, "bank")
	mustExec(t, b, "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)")
	mustExec(t, b, "CREATE TABLE inserts (id BIGINT PRIMARY KEY, node INT NOT NULL)")
	for i := 0; i < bankAccounts; i++ {
		mustExec(t, b, fmt.Sprintf("INSERT INTO accounts VALUES (%d, %d)", i, bankBalance))
	}
}

// bankLoad runs transfers, total reads and inserts through every node
// until stopped, and checks what it can as it goes: every read of the
// totals that succeeds sees the right sum.
type bankLoad struct {
	t         *testing.T
	pools     []*sql.DB
	stop      chan struct{}
	wg        sync.WaitGroup
	transfers atomic.Int64
	reads     atomic.Int64
	errs      atomic.Int64
	badReads  atomic.Int64
	badSample atomic.Value
	nextID    atomic.Int64
	mu        sync.Mutex
	acked     map[int64]bool // inserts acknowledged to the client
}

func startBankLoad(t *testing.T, c *Cluster, workers int) *bankLoad {
	l := &bankLoad{t: t, stop: make(chan struct{}), acked: map[int64]bool{}}
	for _, n := range c.Nodes {
		db, err := sql.Open("mysql", n.DSN("bank"))
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(workers + 2)
		db.SetConnMaxLifetime(2 * time.Second)
		t.Cleanup(func() { db.Close() })
		l.pools = append(l.pools, db)
	}
	for w := 0; w < workers; w++ {
		l.wg.Add(3)
		go l.transferLoop(w)
		go l.readLoop(w)
		go l.insertLoop(w)
	}
	return l
}

func (l *bankLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *bankLoad) Stop() {
	close(l.stop)
	l.wg.Wait()
}

func (l *bankLoad) pool(i int) *sql.DB { return l.pools[i%len(l.pools)] }

func (l *bankLoad) transferLoop(w int) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(w), 7))
	for i := w; !l.stopped(); i++ {
		from, to := rng.IntN(bankAccounts), rng.IntN(bankAccounts)
		if from == to {
			continue
		}
		if err := transfer(l.pool(i), from, to, int64(1+rng.IntN(10))); err != nil {
			l.errs.Add(1)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		l.transfers.Add(1)
	}
}

func transfer(db *sql.DB, from, to int, amount int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var bal int64
	if err := tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = ? FOR UPDATE", from).Scan(&bal); err != nil {
		return err
	}
	if bal < amount {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", amount, from); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + ? WHERE id = ?", amount, to); err != nil {
		return err
	}
	return tx.Commit()
}

func (l *bankLoad) readLoop(w int) {
	defer l.wg.Done()
	for i := w; !l.stopped(); i++ {
		sum, n, err := bankTotal(l.pool(i))
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		l.reads.Add(1)
		if sum != bankAccounts*bankBalance || n != bankAccounts {
			l.badReads.Add(1)
			l.badSample.Store(fmt.Sprintf("node %d: sum %d over %d accounts", i%len(l.pools)+1, sum, n))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func bankTotal(db *sql.DB) (sum int64, n int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = db.QueryRowContext(ctx, "SELECT SUM(balance), COUNT(*) FROM accounts").Scan(&sum, &n)
	return sum, n, err
}

func (l *bankLoad) insertLoop(w int) {
	defer l.wg.Done()
	for i := w; !l.stopped(); i++ {
		id := l.nextID.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := l.pool(i).ExecContext(ctx, "INSERT INTO inserts VALUES (?, ?)", id, i%len(l.pools))
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		l.mu.Lock()
		l.acked[id] = true
		l.mu.Unlock()
	}
}

// check verifies, through every running node, that the totals are right
// and that every acknowledged insert is there.
func (l *bankLoad) check(c *Cluster) {
	t := l.t
	t.Helper()
	if n := l.badReads.Load(); n > 0 {
		t.Fatalf("%d reads of the totals were wrong, e.g. %v", n, l.badSample.Load())
	}
	for i, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		db := l.pools[i]
		var sum int64
		var cnt int
		var err error
		for attempt := 0; attempt < 50; attempt++ {
			if sum, cnt, err = bankTotal(db); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("node %d: read totals: %v", i+1, err)
		}
		if sum != bankAccounts*bankBalance || cnt != bankAccounts {
			t.Fatalf("node %d: totals %d over %d accounts, want %d over %d", i+1, sum, cnt, bankAccounts*bankBalance, bankAccounts)
		}
		rows, err := db.Query("SELECT id FROM inserts")
		if err != nil {
			t.Fatalf("node %d: read inserts: %v", i+1, err)
		}
		have := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			have[id] = true
		}
		rows.Close()
		l.mu.Lock()
		missing := 0
		for id := range l.acked {
			if !have[id] {
				missing++
			}
		}
		acked := len(l.acked)
		l.mu.Unlock()
		if missing > 0 {
			t.Fatalf("node %d: %d of %d acknowledged inserts are missing", i+1, missing, acked)
		}
	}
}

// progress waits until the load has made some more transfers, which shows
// the cluster serves writes.
func (l *bankLoad) progress(t *testing.T, what string, timeout time.Duration) time.Duration {
	t.Helper()
	start, base := time.Now(), l.transfers.Load()
	for l.transfers.Load() < base+5 {
		if time.Since(start) > timeout {
			t.Fatalf("%s: no transfers for %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestClusterSurvivesKillingEachNode kills every node in turn with
// SIGKILL, PD's leader first, under a bank-transfer load through all
// three: the cluster keeps serving, every read of the totals is right,
// and every acknowledged insert is there at the end.
func TestClusterSurvivesKillingEachNode(t *testing.T) {
	c := StartCluster(t, 3)
	createBank(t, c)
	c.WaitReplicated(30 * time.Second)
	load := startBankLoad(t, c, 3)
	load.progress(t, "before any fault", 20*time.Second)
	order := []*Node{c.PDLeader(20 * time.Second)}
	for _, n := range c.Nodes {
		if n != order[0] {
			order = append(order, n)
		}
	}
	for i, victim := range order {
		victim.Kill()
		took := load.progress(t, fmt.Sprintf("kill %d", i+1), 30*time.Second)
		t.Logf("kill %d: transfers resumed after %v", i+1, took.Round(time.Millisecond))
		victim.Start()
		c.WaitReplicated(60 * time.Second)
		load.progress(t, fmt.Sprintf("restart %d", i+1), 30*time.Second)
	}
	load.Stop()
	t.Logf("%d transfers, %d reads, %d failed attempts, %d inserts acknowledged",
		load.transfers.Load(), load.reads.Load(), load.errs.Load(), len(load.acked))
	load.check(c)
}

// TestClusterAllKilledAndRestarted kills every node at once under load;
// after a restart nothing acknowledged is lost.
func TestClusterAllKilledAndRestarted(t *testing.T) {
	c := StartCluster(t, 3)
	createBank(t, c)
	load := startBankLoad(t, c, 2)
	load.progress(t, "before the crash", 20*time.Second)
	time.Sleep(2 * time.Second)
	for _, n := range c.Nodes {
		n.Kill()
	}
	load.Stop()
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.start(); err != nil {
				t.Errorf("restart: %v", err)
			}
		}()
	}
	wg.Wait()
	c.WaitReplicated(60 * time.Second)
	load.check(c)
}

// TestClusterPausedLeaderServesNoStaleRead stops the node leading the
// data with SIGSTOP for longer than an election timeout, writes through
// another node meanwhile, and continues it: a read through the paused
// node right after it wakes sees the new value, not the one it had.
func TestClusterPausedLeaderServesNoStaleRead(t *testing.T) {
	c := StartCluster(t, 3)
	db := c.Nodes[0].DB(t, "")
	mustExec(t, db, "CREATE DATABASE p")
	p0 := c.Nodes[0].DB(t, "p")
	mustExec(t, p0, "CREATE TABLE kv (k INT PRIMARY KEY, v INT NOT NULL)")
	mustExec(t, p0, "INSERT INTO kv VALUES (1, 1)")
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	var leader *Node
	for _, r := range st.Regions {
		if !r.System {
			leader = c.NodeOfStore(st, r.LeaderStore)
		}
	}
	if leader == nil {
		t.Fatal("no leader of the data region")
	}
	// Open the paused node's connection before the pause.
	stale := leader.DB(t, "p")
	var v int
	if err := stale.QueryRow("SELECT v FROM kv WHERE k = 1").Scan(&v); err != nil || v != 1 {
		t.Fatalf("read before the pause: %d %v", v, err)
	}
	leader.Pause()
	defer leader.Resume()
	var other *Node
	for _, n := range c.Nodes {
		if n != leader {
			other = n
		}
	}
	w := other.DB(t, "p")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := w.ExecContext(ctx, "UPDATE kv SET v = 2 WHERE k = 1")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write while the leader was paused: %v", err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	leader.Resume()
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := stale.QueryRowContext(ctx, "SELECT v FROM kv WHERE k = 1").Scan(&v)
		cancel()
		if err != nil {
			t.Fatalf("read after the pause: %v", err)
		}
		if v != 2 {
			t.Fatalf("stale read after the pause: v = %d, want 2", v)
		}
	}
}
