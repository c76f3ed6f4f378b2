package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/test/chaos/checker"
	"github.com/strata-db/strata/test/chaos/history"
)

// A Workload is what the clients do: Next generates operations (it is
// called under one lock, so it may keep state such as the next unique
// value), a Client per worker performs them against one node, Final reads
// what the checkers need after the faults healed, and Check judges the
// history.
type Workload interface {
	Name() string
	Setup(ctx context.Context, db *sql.DB, c *Cluster) error
	Next(r *rand.Rand) (f string, value any)
	NewClient(c *Cluster, n *Node, timeout time.Duration) Client
	// Final runs reads through every node after the heal; it records them
	// in the history as ordinary operations of fresh processes.
	Final(ctx context.Context, c *Cluster, run func(n *Node, f string, value any))
	Check(ops []history.Op, dir string) []*checker.Result
}

// Client performs one operation. It returns the completion type
// (history.OK, Fail or Info), the completion value, and the error (if any)
// for the record.
type Client interface {
	Invoke(ctx context.Context, f string, value any) (typ string, out any, err error)
	Close()
}

// Workloads by name.
func NewWorkload(name string) (Workload, error) {
	switch name {
	case "bank":
		return &bank{accounts: 8, initial: 100}, nil
	case "register":
		return &register{slots: 6, opsPerKey: 200, next: map[int]int{}, keyOf: map[int]int{}}, nil
	case "list-append":
		return &listAppend{slots: 8, appendsPerKey: 32, keyOf: map[int]int64{}, count: map[int]int{}, nextVal: map[int64]int64{}}, nil
	case "set":
		return &setWorkload{}, nil
	case "long-fork":
		return &longFork{groupSize: 4}, nil
	case "monotonic":
		return &monotonic{keys: 4}, nil
	}
	return nil, fmt.Errorf("unknown workload %q (have: %s)", name, strings.Join(WorkloadNames, ", "))
}

// WorkloadNames lists the workloads.
var WorkloadNames = []string{"bank", "register", "list-append", "set", "long-fork", "monotonic"}

// SQL helpers.

// sqlClient is one connection to one node.
type sqlClient struct {
	db      *sql.DB
	timeout time.Duration
	do      func(ctx context.Context, db *sql.DB, f string, value any) (string, any, error)
}

func newSQLClient(c *Cluster, n *Node, timeout time.Duration, do func(context.Context, *sql.DB, string, any) (string, any, error)) *sqlClient {
	db := c.SQL(n, timeout)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return &sqlClient{db: db, timeout: timeout, do: do}
}

func (s *sqlClient) Invoke(ctx context.Context, f string, value any) (string, any, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.do(ctx, s.db, f, value)
}

func (s *sqlClient) Close() { s.db.Close() }

// errDeclined is a transaction the workload rolled back on purpose.
var errDeclined = errors.New("declined")

// outcome classifies an error of a SQL transaction. Before COMMIT is sent
// nothing can have taken effect (the server rolls back an open transaction
// when it reports an error or loses the connection): fail. An error from
// COMMIT itself is a definite abort only when the server says the
// transaction was rolled back for a conflict (1213, 1205); anything else
// (a lost connection, a timeout, an undetermined commit) may have
// committed: info.
func outcome(err error, committing bool) string {
	if !committing {
		return history.Fail
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) {
		return history.Fail
	}
	return history.Info
}

// inTxn runs body in a transaction and commits it, classifying the outcome.
func inTxn(ctx context.Context, db *sql.DB, body func(tx *sql.Tx) error) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return history.Fail, err
	}
	if err := body(tx); err != nil {
		tx.Rollback()
		return history.Fail, err
	}
	if err := tx.Commit(); err != nil {
		return outcome(err, true), err
	}
	return history.OK, nil
}

// autocommitOutcome classifies an error of a single autocommit statement:
// it may have committed unless the server said it did not.
func autocommitOutcome(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1213, 1205, 1062, 1146, 1064:
			return history.Fail
		}
	}
	return history.Info
}

func execAll(ctx context.Context, db *sql.DB, stmts ...string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// Bank.

type bank struct {
	accounts int
	initial  int64
}

func (b *bank) Name() string { return "bank" }

func (b *bank) Setup(ctx context.Context, db *sql.DB, c *Cluster) error {
	if err := execAll(ctx, db, "DROP TABLE IF EXISTS accounts",
		"CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)"); err != nil {
		return err
	}
	var vals []string
	for i := 0; i < b.accounts; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, b.initial))
	}
	return execAll(ctx, db, "INSERT INTO accounts VALUES "+strings.Join(vals, ", "))
}

// bankTransfer carries how the transfer is written: "delta" (balance =
// balance - ?), "absolute" (balance = ? from the values read) and whether
// the read locks (FOR UPDATE).
type bankTransfer struct {
	checker.BankTransfer
	Mode      string `json:"mode"`
	ForUpdate bool   `json:"for_update"`
}

func (b *bank) Next(r *rand.Rand) (string, any) {
	if r.Intn(4) == 0 {
		return "read", nil
	}
	from := r.Intn(b.accounts)
	to := (from + 1 + r.Intn(b.accounts-1)) % b.accounts
	t := bankTransfer{BankTransfer: checker.BankTransfer{From: int64(from), To: int64(to), Amount: int64(1 + r.Intn(5))},
		Mode: []string{"delta", "absolute"}[r.Intn(2)], ForUpdate: r.Intn(2) == 0}
	return "transfer", t
}

func (b *bank) NewClient(c *Cluster, n *Node, timeout time.Duration) Client {
	return newSQLClient(c, n, timeout, b.do)
}

func (b *bank) do(ctx context.Context, db *sql.DB, f string, value any) (string, any, error) {
	if f == "read" {
		read := checker.BankRead{}
		typ, err := inTxn(ctx, db, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, "SELECT id, balance FROM accounts")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id, bal int64
				if err := rows.Scan(&id, &bal); err != nil {
					return err
				}
				read[strconv.FormatInt(id, 10)] = bal
			}
			return rows.Err()
		})
		if err != nil && typ == history.Info {
			// A read-only transaction's commit changes nothing.
			typ = history.Fail
		}
		if typ != history.OK {
			return typ, nil, err
		}
		return typ, read, nil
	}
	t := value.(bankTransfer)
	typ, err := inTxn(ctx, db, func(tx *sql.Tx) error {
		q := "SELECT id, balance FROM accounts WHERE id IN (?, ?)"
		if t.ForUpdate {
			q += " FOR UPDATE"
		}
		rows, err := tx.QueryContext(ctx, q, t.From, t.To)
		if err != nil {
			return err
		}
		bal := map[int64]int64{}
		for rows.Next() {
			var id, v int64
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				return err
			}
			bal[id] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(bal) != 2 {
			return fmt.Errorf("read %d of the 2 accounts", len(bal))
		}
		if bal[t.From] < t.Amount {
			return errDeclined
		}
		if t.Mode == "delta" {
			if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", t.Amount, t.From); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + ? WHERE id = ?", t.Amount, t.To)
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = ?", bal[t.From]-t.Amount, t.From); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = ?", bal[t.To]+t.Amount, t.To)
		return err
	})
	return typ, t, err
}

func (b *bank) Final(ctx context.Context, c *Cluster, run func(n *Node, f string, value any)) {
	for _, n := range c.Nodes {
		run(n, "read", nil)
	}
}

func (b *bank) Check(ops []history.Op, dir string) []*checker.Result {
	return []*checker.Result{checker.CheckBank(ops, checker.BankOptions{Accounts: b.accounts, Total: int64(b.accounts) * b.initial})}
}

// Register (Redis).

type register struct {
	mu        sync.Mutex
	slots     int
	opsPerKey int
	next      map[int]int // slot -> ops issued on its current key
	keyOf     map[int]int // slot -> current key number
	keys      int
}

func (g *register) Name() string { return "register" }

func (g *register) Setup(ctx context.Context, db *sql.DB, c *Cluster) error { return nil }

func (g *register) Next(r *rand.Rand) (string, any) {
	slot := r.Intn(g.slots)
	if _, ok := g.keyOf[slot]; !ok || g.next[slot] >= g.opsPerKey {
		g.keyOf[slot] = g.keys
		g.keys++
		g.next[slot] = 0
	}
	g.next[slot]++
	k := fmt.Sprintf("chaos:r%d", g.keyOf[slot])
	v := func() *int64 { x := int64(r.Intn(5)); return &x }
	switch x := r.Intn(10); {
	case x < 4:
		return "read", checker.RegisterOp{K: k}
	case x < 6:
		return "write", checker.RegisterOp{K: k, V: v()}
	case x < 8:
		return "cas", checker.RegisterOp{K: k, Old: v(), New: v()}
	default:
		return "incr", checker.RegisterOp{K: k}
	}
}

type redisClient struct{ rc *redis.Client }

func (g *register) NewClient(c *Cluster, n *Node, timeout time.Duration) Client {
	return &redisClient{c.Redis(n, timeout)}
}

func (r *redisClient) Close() { r.rc.Close() }

var errCASMismatch = errors.New("cas: the register did not hold the expected value")

func (r *redisClient) Invoke(ctx context.Context, f string, value any) (string, any, error) {
	op := value.(checker.RegisterOp)
	switch f {
	case "read":
		v, err := r.rc.Get(ctx, op.K).Int64()
		if errors.Is(err, redis.Nil) {
			return history.OK, checker.RegisterOp{K: op.K}, nil
		}
		if err != nil {
			return history.Fail, nil, err
		}
		return history.OK, checker.RegisterOp{K: op.K, V: &v}, nil
	case "write":
		if err := r.rc.Set(ctx, op.K, *op.V, 0).Err(); err != nil {
			return history.Info, op, err
		}
		return history.OK, op, nil
	case "incr":
		v, err := r.rc.Incr(ctx, op.K).Result()
		if err != nil {
			return history.Info, op, err
		}
		return history.OK, checker.RegisterOp{K: op.K, V: &v}, nil
	}
	// cas: WATCH, GET, and MULTI/SET/EXEC only if it holds the old value.
	// EXEC's nil reply (the key changed after WATCH) is a definite failure;
	// an error before EXEC was sent changed nothing.
	execSent := false
	err := r.rc.Watch(ctx, func(tx *redis.Tx) error {
		cur, err := tx.Get(ctx, op.K).Int64()
		if errors.Is(err, redis.Nil) {
			return errCASMismatch
		}
		if err != nil {
			return err
		}
		if cur != *op.Old {
			return errCASMismatch
		}
		execSent = true
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, op.K, *op.New, 0)
			return nil
		})
		return err
	}, op.K)
	switch {
	case err == nil:
		return history.OK, op, nil
	case errors.Is(err, errCASMismatch), errors.Is(err, redis.TxFailedErr), !execSent:
		return history.Fail, op, err
	}
	return history.Info, op, err
}

func (g *register) Final(ctx context.Context, c *Cluster, run func(n *Node, f string, value any)) {}

func (g *register) Check(ops []history.Op, dir string) []*checker.Result {
	return []*checker.Result{checker.CheckRegister(ops, checker.RegisterOptions{VisualizePath: filepath.Join(dir, "register.html")})}
}

// List-append (Elle).

type listAppend struct {
	mu            sync.Mutex
	slots         int
	appendsPerKey int
	keyOf         map[int]int64 // slot -> key
	count         map[int]int   // slot -> appends issued
	nextKey       int64
	nextVal       map[int64]int64
}

func (l *listAppend) Name() string { return "list-append" }

func (l *listAppend) Setup(ctx context.Context, db *sql.DB, c *Cluster) error {
	return execAll(ctx, db, "DROP TABLE IF EXISTS lists", "CREATE TABLE lists (k BIGINT PRIMARY KEY, v TEXT NOT NULL)")
}

func (l *listAppend) Next(r *rand.Rand) (string, any) {
	n := 1 + r.Intn(4)
	var mops []checker.Mop
	for i := 0; i < n; i++ {
		slot := r.Intn(l.slots)
		if _, ok := l.keyOf[slot]; !ok || l.count[slot] >= l.appendsPerKey {
			l.keyOf[slot] = l.nextKey
			l.nextKey++
			l.count[slot] = 0
		}
		k := l.keyOf[slot]
		if r.Intn(2) == 0 {
			mops = append(mops, checker.Mop{F: "r", K: k})
			continue
		}
		l.count[slot]++
		l.nextVal[k]++
		mops = append(mops, checker.Mop{F: "append", K: k, V: l.nextVal[k]})
	}
	return "txn", mops
}

func (l *listAppend) NewClient(c *Cluster, n *Node, timeout time.Duration) Client {
	return newSQLClient(c, n, timeout, listAppendTxn)
}

// listAppendTxn runs one list-append transaction on db.
func listAppendTxn(ctx context.Context, db *sql.DB, f string, value any) (string, any, error) {
	in := value.([]checker.Mop)
	out := make([]checker.Mop, len(in))
	copy(out, in)
	typ, err := inTxn(ctx, db, func(tx *sql.Tx) error {
		for i, m := range out {
			if m.F == "append" {
				if _, err := tx.ExecContext(ctx, "INSERT INTO lists (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = CONCAT(v, ',', ?)",
					m.K, strconv.FormatInt(m.V, 10), strconv.FormatInt(m.V, 10)); err != nil {
					return err
				}
				continue
			}
			var v sql.NullString
			err := tx.QueryRowContext(ctx, "SELECT v FROM lists WHERE k = ?", m.K).Scan(&v)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			read, perr := parseList(v.String)
			if perr != nil {
				return perr
			}
			out[i].Read = read
		}
		return nil
	})
	if typ != history.OK {
		return typ, in, err
	}
	return typ, out, nil
}

func parseList(s string) ([]int64, error) {
	read := []int64{}
	if s == "" {
		return read, nil
	}
	for _, p := range strings.Split(s, ",") {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("list element %q: %v", p, err)
		}
		read = append(read, x)
	}
	return read, nil
}

func (l *listAppend) Final(ctx context.Context, c *Cluster, run func(n *Node, f string, value any)) {
	l.mu.Lock()
	keys := l.nextKey
	l.mu.Unlock()
	for _, n := range c.Nodes {
		var mops []checker.Mop
		for k := int64(0); k < keys; k++ {
			mops = append(mops, checker.Mop{F: "r", K: k})
		}
		if len(mops) > 0 {
			run(n, "txn", mops)
		}
	}
}

func (l *listAppend) Check(ops []history.Op, dir string) []*checker.Result {
	ours := checker.CheckListAppend(ops, checker.ListAppendOptions{Model: checker.SnapshotIsolation})
	if checker.AdyaPath() == "" {
		// The second opinion is missing, not the history's fault.
		ours.Notes = append(ours.Notes, "adya is not installed (cargo install adya): no second checker")
		return []*checker.Result{ours}
	}
	theirs := checker.CheckAdya(filepath.Join(dir, "history.jsonl"), checker.SnapshotIsolation)
	res := []*checker.Result{ours, theirs}
	if d := checker.Agree(ours, theirs); d != "" {
		res = append(res, &checker.Result{Checker: "list-append checkers agree", Verdict: checker.Unknown, Notes: []string{d}})
	}
	return res
}

// Set.

type setWorkload struct {
	next int64
}

func (s *setWorkload) Name() string { return "set" }

func (s *setWorkload) Setup(ctx context.Context, db *sql.DB, c *Cluster) error {
	return execAll(ctx, db, "DROP TABLE IF EXISTS set_items", "CREATE TABLE set_items (v BIGINT PRIMARY KEY)")
}

func (s *setWorkload) Next(r *rand.Rand) (string, any) {
	s.next++
	return "add", s.next
}

func (s *setWorkload) NewClient(c *Cluster, n *Node, timeout time.Duration) Client {
	return newSQLClient(c, n, timeout, func(ctx context.Context, db *sql.DB, f string, value any) (string, any, error) {
		if f == "read" {
			rows, err := db.QueryContext(ctx, "SELECT v FROM set_items")
			if err != nil {
				return history.Fail, nil, err
			}
			defer rows.Close()
			got := []int64{}
			for rows.Next() {
				var v int64
				if err := rows.Scan(&v); err != nil {
					return history.Fail, nil, err
				}
				got = append(got, v)
			}
			if err := rows.Err(); err != nil {
				return history.Fail, nil, err
			}
			sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
			return history.OK, got, nil
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO set_items VALUES (?)", value); err != nil {
			return autocommitOutcome(err), value, err
		}
		return history.OK, value, nil
	})
}

func (s *setWorkload) Final(ctx context.Context, c *Cluster, run func(n *Node, f string, value any)) {
	for _, n := range c.Nodes {
		run(n, "read", nil)
	}
}

func (s *setWorkload) Check(ops []history.Op, dir string) []*checker.Result {
	return []*checker.Result{checker.CheckSet(ops)}
}

// Long fork.

type longFork struct {
	groupSize int
	next      int64
}

func (l *longFork) Name() string { return "long-fork" }

func (l *longFork) Setup(ctx context.Context, db *sql.DB, c *Cluster) error {
	return execAll(ctx, db, "DROP TABLE IF EXISTS lf", "CREATE TABLE lf (k BIGINT PRIMARY KEY, v BIGINT NOT NULL)")
}

func (l *longFork) Next(r *rand.Rand) (string, any) {
	if l.next == 0 || r.Intn(2) == 0 {
		k := l.next
		l.next++
		return "insert", k
	}
	// Read the group of a recent insert (the current group or the one before).
	g := (l.next - 1) / int64(l.groupSize)
	if g > 0 && r.Intn(3) == 0 {
		g--
	}
	var keys []int64
	for i := int64(0); i < int64(l.groupSize); i++ {
		keys = append(keys, g*int64(l.groupSize)+i)
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return "read", checker.LongForkRead{Keys: keys}
}

func (l *longFork) NewClient(c *Cluster, n *Node, timeout time.Duration) Client {
	return newSQLClient(c, n, timeout, func(ctx context.Context, db *sql.DB, f string, value any) (string, any, error) {
		if f == "insert" {
			if _, err := db.ExecContext(ctx, "INSERT INTO lf VALUES (?, 1)", value); err != nil {
				return autocommitOutcome(err), value, err
			}
			return history.OK, value, nil
		}
		r := value.(checker.LongForkRead)
		r.Present = []int64{}
		typ, err := inTxn(ctx, db, func(tx *sql.Tx) error {
			for _, k := range r.Keys {
				var v int64
				err := tx.QueryRowContext(ctx, "SELECT v FROM lf WHERE k = ?", k).Scan(&v)
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				if err != nil {
					return err
				}
				r.Present = append(r.Present, k)
			}
			return nil
		})
		if typ != history.OK {
			return history.Fail, value, err
		}
		return typ, r, nil
	})
}

func (l *longFork) Final(ctx context.Context, c *Cluster, run func(n *Node, f string, value any)) {}

func (l *longFork) Check(ops []history.Op, dir string) []*checker.Result {
	return []*checker.Result{checker.CheckLongFork(ops)}
}

// Monotonic.

type monotonic struct{ keys int }

func (m *monotonic) Name() string { return "monotonic" }

func (m *monotonic) Setup(ctx context.Context, db *sql.DB, c *Cluster) error {
	if err := execAll(ctx, db, "DROP TABLE IF EXISTS counters", "CREATE TABLE counters (k INT PRIMARY KEY, v BIGINT NOT NULL)"); err != nil {
		return err
	}
	var vals []string
	for i := 0; i < m.keys; i++ {
		vals = append(vals, fmt.Sprintf("(%d, 0)", i))
	}
	return execAll(ctx, db, "INSERT INTO counters VALUES "+strings.Join(vals, ", "))
}

func (m *monotonic) Next(r *rand.Rand) (string, any) {
	op := checker.MonotonicOp{K: int64(r.Intn(m.keys))}
	if r.Intn(3) == 0 {
		return "incr", op
	}
	return "read", op
}

func (m *monotonic) NewClient(c *Cluster, n *Node, timeout time.Duration) Client {
	return newSQLClient(c, n, timeout, func(ctx context.Context, db *sql.DB, f string, value any) (string, any, error) {
		op := value.(checker.MonotonicOp)
		var v int64
		if f == "read" {
			if err := db.QueryRowContext(ctx, "SELECT v FROM counters WHERE k = ?", op.K).Scan(&v); err != nil {
				return history.Fail, op, err
			}
			return history.OK, checker.MonotonicOp{K: op.K, V: &v}, nil
		}
		typ, err := inTxn(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE counters SET v = v + 1 WHERE k = ?", op.K); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, "SELECT v FROM counters WHERE k = ?", op.K).Scan(&v)
		})
		if typ != history.OK {
			return typ, op, err
		}
		return typ, checker.MonotonicOp{K: op.K, V: &v}, nil
	})
}

func (m *monotonic) Final(ctx context.Context, c *Cluster, run func(n *Node, f string, value any)) {}

func (m *monotonic) Check(ops []history.Op, dir string) []*checker.Result {
	return []*checker.Result{checker.CheckMonotonic(ops)}
}
