package sql_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv/kvtest"
	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// Two SQL engines over one storage, each with its own schema cache and
// lease (two nodes' SQL layers): writers change the table through both
// while indexes and a column are added and dropped through the second, and
// ADMIN CHECK TABLE then finds every row's entries and no others, in every
// index, through either engine.
func TestIndexChangesUnderWritesThroughTwoEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	ctx := context.Background()
	n := inProcessNode(t)
	a := n.SQL()
	b, err := sql.NewEngine(ctx, n.Storage(), sql.Options{SchemaLease: 3 * time.Second, SchemaPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	exec := func(s *sql.Session, q string) {
		t.Helper()
		if _, err := s.Execute(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	admin := b.NewSession("root", "localhost")
	exec(admin, "CREATE DATABASE d; USE d; CREATE TABLE t (id INT PRIMARY KEY, k INT, c VARCHAR(20), KEY ik (k))")
	const rows = 8000 // four backfill shares of more than a batch
	for i := 0; i < rows; i += 500 {
		q := "INSERT INTO t VALUES "
		for j := i; j < i+500; j++ {
			if j > i {
				q += ","
			}
			q += fmt.Sprintf("(%d, %d, 'c%d')", j, j%97, j)
		}
		exec(admin, q)
	}

	// Writers: two sessions per engine, autocommit statements and small
	// explicit transactions. c stays unique (it is derived from the id).
	var (
		stop    atomic.Bool
		writes  atomic.Int64
		wg      sync.WaitGroup
		failMu  sync.Mutex
		failure error
	)
	expected := func(err error) bool {
		var se *sqlerr.Error
		if !errors.As(err, &se) {
			return false
		}
		switch se.Code {
		case sqlerr.ErDupEntry, sqlerr.ErLockDeadlock, sqlerr.ErLockWaitTimeout, 8028:
			return true
		}
		return false
	}
	for w := 0; w < 4; w++ {
		e := a
		if w%2 == 1 {
			e = b
		}
		wg.Add(1)
		go func(w int, s *sql.Session) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			run := func(q string) bool {
				_, err := s.Execute(ctx, q)
				if err != nil && !expected(err) {
					failMu.Lock()
					failure = fmt.Errorf("writer %d: %s: %w", w, q, err)
					failMu.Unlock()
					stop.Store(true)
				}
				return err == nil
			}
			run("USE d")
			for !stop.Load() {
				id := rng.Intn(rows * 2)
				var ok bool
				switch op := rng.Intn(10); {
				case op < 3:
					ok = run(fmt.Sprintf("INSERT INTO t (id, k, c) VALUES (%d, %d, 'c%d')", id, rng.Intn(97), id))
				case op < 6:
					ok = run(fmt.Sprintf("UPDATE t SET k = %d WHERE id = %d", rng.Intn(97), id))
				case op < 7:
					ok = run(fmt.Sprintf("DELETE FROM t WHERE id = %d", id))
				case op < 8:
					ok = run(fmt.Sprintf("REPLACE INTO t (id, k, c) VALUES (%d, %d, 'c%d')", id, rng.Intn(97), id))
				default:
					ok = run("BEGIN") &&
						run(fmt.Sprintf("UPDATE t SET k = k + 1 WHERE id = %d", id)) &&
						run(fmt.Sprintf("DELETE FROM t WHERE id = %d", (id+1)%(rows*2))) &&
						run(fmt.Sprintf("INSERT INTO t (id, k, c) VALUES (%d, %d, 'c%d')", (id+2)%(rows*2), rng.Intn(97), (id+2)%(rows*2))) &&
						run("COMMIT")
					if !ok {
						_, _ = s.Execute(ctx, "ROLLBACK")
					}
				}
				if ok {
					writes.Add(1)
				}
			}
		}(w, e.NewSession("root", "localhost"))
	}
	check := func(when string) {
		t.Helper()
		for _, e := range []*sql.Engine{a, b} {
			s := e.NewSession("root", "localhost")
			if _, err := s.Execute(ctx, "ADMIN CHECK TABLE d.t"); err != nil {
				t.Fatalf("%s: %v", when, err)
			}
		}
	}
	for _, ddl := range []string{
		"ALTER TABLE t ADD INDEX ick (c, k)",
		"ALTER TABLE t ADD UNIQUE INDEX uc (c)",
		"ALTER TABLE t DROP INDEX ik",
		"CREATE INDEX ik2 ON t (k)",
		// The same backfill in transactions instead of ingest mode.
		"SET tidb_ddl_enable_fast_reorg = OFF",
		"CREATE INDEX ik3 ON t (k, id)",
		"SET tidb_ddl_enable_fast_reorg = ON",
		"ALTER TABLE t DROP INDEX ick, ADD INDEX ikc (k, c)",
		"ALTER TABLE t ADD COLUMN extra INT DEFAULT 3, ADD INDEX ie (extra)",
		"ALTER TABLE t DROP COLUMN extra", // and its index ie
	} {
		before := writes.Load()
		start := time.Now()
		exec(admin, ddl)
		if stop.Load() {
			break
		}
		if strings.HasPrefix(ddl, "SET ") {
			continue
		}
		if writes.Load() == before {
			t.Errorf("%s: no write succeeded while it ran (%s)", ddl, time.Since(start))
		}
		t.Logf("%s: %s, %d writes meanwhile", ddl, time.Since(start).Round(time.Millisecond), writes.Load()-before)
		check("after " + ddl)
	}
	stop.Store(true)
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	check("at the end")

	// Non-unique indexes were backfilled in ingest mode, the unique one and
	// the one with fast reorg off in transactions.
	res, err := admin.Execute(ctx, "ADMIN SHOW DDL JOBS 20")
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, row := range res[len(res)-1].Rows {
		if typ := row[3].String(); strings.Contains(typ, "/*") {
			modes[typ]++
		}
	}
	want := map[string]int{"add index /* ingest */": 2, "alter table multi-schema change /* ingest */": 2, "add index /* txn */": 2}
	if !maps.Equal(modes, want) {
		t.Errorf("backfill modes of the jobs: %v, want %v", modes, want)
	}
}

// With one SQL engine the DDL owner waits for nobody: statements take a
// few commits, not a lease (ORMs run migrations of many statements).
func TestDDLOnOneNodeWaitsForNoLease(t *testing.T) {
	s, exec := nodeSession(t)
	ctx := context.Background()
	exec("CREATE DATABASE d; USE d")
	timed := func(q string) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := s.Execute(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return time.Since(start)
	}
	var worst time.Duration
	for i := 0; i < 10; i++ {
		for _, q := range []string{
			fmt.Sprintf("CREATE TABLE t%d (id INT PRIMARY KEY, v INT)", i),
			fmt.Sprintf("INSERT INTO t%d VALUES (1, 1), (2, 2)", i),
			fmt.Sprintf("ALTER TABLE t%d ADD INDEX iv (v)", i),
			fmt.Sprintf("ALTER TABLE t%d DROP INDEX iv", i),
			fmt.Sprintf("DROP TABLE t%d", i),
		} {
			d := timed(q)
			worst = max(worst, d)
			if d > time.Second {
				t.Errorf("%s took %s: it waited for a lease", q, d)
			}
		}
	}
	t.Logf("slowest statement: %s", worst)
}

// A node that restarts after a crash comes back under the same engine id
// and takes its old lease (and DDL ownership) over: its DDL does not wait
// for the dead process's lease to expire.
func TestRestartedEngineTakesItsLeaseOver(t *testing.T) {
	ctx := context.Background()
	store := kvtest.NewMemStorage()
	lease := 30 * time.Second
	// The crashed process: registered, DDL owner, never heard of again.
	if _, err := sql.NewEngine(ctx, store, sql.Options{ID: "store-1", Manual: true, SchemaLease: lease}); err != nil {
		t.Fatal(err)
	}
	e, err := sql.NewEngine(ctx, store, sql.Options{ID: "store-1", SchemaLease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s := e.NewSession("root", "localhost")
	start := time.Now()
	for _, q := range []string{"CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v INT)", "ALTER TABLE d.t ADD INDEX iv (v)"} {
		if _, err := s.Execute(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if d := time.Since(start); d > lease/2 {
		t.Fatalf("DDL after the restart took %s", d)
	}
}

// An engine that died without a word holds DDL back for one lease (and
// the clock offset margin), no longer.
func TestDeadEngineHoldsDDLForOneLease(t *testing.T) {
	ctx := context.Background()
	store := kvtest.NewMemStorage()
	lease := time.Second
	e, err := sql.NewEngine(ctx, store, sql.Options{SchemaLease: lease, SchemaPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s := e.NewSession("root", "localhost")
	if _, err := s.Execute(ctx, "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := sql.NewEngine(ctx, store, sql.Options{ID: "dead", Manual: true, SchemaLease: lease}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Execute(ctx, "ALTER TABLE d.t ADD INDEX iv (v)"); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("ADD INDEX with a dead engine: %s", d)
	if d < lease/2 || d > 2*lease+time.Second {
		t.Fatalf("ADD INDEX took %s with a dead engine's lease of %s", d, lease)
	}
}
