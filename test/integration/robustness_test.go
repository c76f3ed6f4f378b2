package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// slowQuery runs for minutes unless stopped: a nested loop over a
// thousand-row table three times (10^9 pairs, none matching).
const slowQuery = "SELECT COUNT(*) FROM big a, big b, big c WHERE a.v + b.v + c.v < 0"

func createBig(t *testing.T, db *sql.DB) {
	t.Helper()
	mustExec(t, db, "CREATE TABLE big (id INT PRIMARY KEY, v INT NOT NULL)")
	var vals []string
	for i := 0; i < 1000; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
	}
	mustExec(t, db, "INSERT INTO big VALUES "+strings.Join(vals, ","))
}

// processInfo returns the Info column of the running statements.
func processInfo(t *testing.T, db *sql.DB) map[int64]string {
	t.Helper()
	rows, err := db.Query("SHOW FULL PROCESSLIST")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id, secs int64
		var user, host, command, state string
		var dbName, info sql.NullString
		if err := rows.Scan(&id, &user, &host, &dbName, &command, &secs, &state, &info); err != nil {
			t.Fatal(err)
		}
		if command == "Query" {
			out[id] = info.String
		}
	}
	return out
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Errors and limits as MySQL applications meet them, over go-sql-driver.
func TestErrorsAndLimits(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE app")
	db := n.DB(t, "app")
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT, d DATE)",
		"INSERT INTO t VALUES (1, 1, 1, '2020-01-02'), (2, 1, 2, NULL), (3, 2, 3, NULL)")
	ctx := context.Background()

	t.Run("a comment-only query returns OK", func(t *testing.T) {
		for _, q := range []string{"/* nothing */", "-- nothing\n", "# nothing\n"} {
			if _, err := db.Exec(q); err != nil {
				t.Errorf("%q: %v", q, err)
			}
		}
	})

	t.Run("LIMIT offset, 18446744073709551615 reads the rest", func(t *testing.T) {
		var c int
		if err := db.QueryRow("SELECT COUNT(*) FROM (SELECT id FROM t ORDER BY id LIMIT 1, 18446744073709551615) x").Scan(&c); err != nil || c != 2 {
			t.Fatalf("count %d, %v", c, err)
		}
	})

	t.Run("unsupported features answer 1235 in words", func(t *testing.T) {
		for q, want := range map[string]string{
			"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1": "'CREATE TRIGGER'",
			"CREATE DEFINER = root@localhost PROCEDURE p() SELECT 1":          "'CREATE PROCEDURE'",
			"CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT 1":              "'CREATE EVENT'",
			"XA START 'x'": "'XA'",
		} {
			_, err := db.Exec(q)
			expectError(t, err, 1235, "42000")
			if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "*ast") {
				t.Errorf("%s: %v", q, err)
			}
		}
		// Whatever a query uses that is not built yet, the text names
		// SQL, not a Go type.
		for _, q := range []string{
			"SELECT ROW_NUMBER() OVER (ORDER BY id) FROM t",
			"SELECT SUM(a) OVER w FROM t WINDOW w AS (PARTITION BY b)",
			"SELECT MATCH (a) AGAINST ('x') FROM t",
		} {
			_, err := db.Exec(q)
			if err != nil && (strings.Contains(err.Error(), "*ast.") || strings.Contains(err.Error(), "*plan.")) {
				t.Errorf("%s: %v", q, err)
			}
		}
	})

	t.Run("ONLY_FULL_GROUP_BY", func(t *testing.T) {
		_, err := db.Exec("SELECT a, b FROM t GROUP BY a")
		expectError(t, err, 1055, "42000")
		if !strings.Contains(err.Error(), "'app.t.b'") {
			t.Errorf("text: %v", err)
		}
		_, err = db.Exec("SELECT b, COUNT(*) FROM t")
		expectError(t, err, 1140, "42000")
		// Determined by the primary key, grouped, aggregated, or grouped as
		// a whole expression: fine.
		for _, q := range []string{
			"SELECT id, a, b FROM t GROUP BY id",
			"SELECT a, COUNT(b) FROM t GROUP BY a ORDER BY a",
			"SELECT a + 1, COUNT(*) FROM t GROUP BY a + 1",
			"SELECT a AS x, MAX(b) FROM t GROUP BY x HAVING x > 0",
		} {
			if _, err := db.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mustExec(t, conn, "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'", "SELECT a, b FROM t GROUP BY a")
	})

	t.Run("SET @x = (SELECT ...)", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mustExec(t, conn, "SET @x = (SELECT MAX(id) FROM t), @y = 1 + (SELECT COUNT(*) FROM t)")
		var x, y int
		if err := conn.QueryRowContext(ctx, "SELECT @x, @y").Scan(&x, &y); err != nil || x != 3 || y != 4 {
			t.Fatalf("@x = %d, @y = %d, %v", x, y, err)
		}
	})

	t.Run("zero dates in the binary protocol", func(t *testing.T) {
		// An argument makes the driver prepare the query: binary protocol.
		for _, q := range []string{
			"SELECT CAST(? AS DATE)",
			"SELECT CAST(CONCAT(?, ' 00:00:00') AS DATETIME)",
		} {
			var d time.Time
			if err := db.QueryRow(q, "0000-00-00").Scan(&d); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if !d.IsZero() {
				t.Errorf("%s: the zero date read as %v", q, d)
			}
		}
		var s string
		if err := db.QueryRow("SELECT CAST(CAST(? AS DATE) AS CHAR)", "0000-00-00").Scan(&s); err != nil || s != "0000-00-00" {
			t.Fatalf("as text %q, %v", s, err)
		}
		var d time.Time
		if err := db.QueryRow("SELECT d FROM t WHERE id = ?", 1).Scan(&d); err != nil || d.Format("2006-01-02") != "2020-01-02" {
			t.Fatalf("a real date: %v, %v", d, err)
		}
	})

	t.Run("CLIENT_FOUND_ROWS", func(t *testing.T) {
		cfg, err := mysql.ParseDSN(n.DSN("app"))
		if err != nil {
			t.Fatal(err)
		}
		for _, found := range []bool{false, true} {
			cfg.ClientFoundRows = found
			c, err := mysql.NewConnector(cfg)
			if err != nil {
				t.Fatal(err)
			}
			fdb := sql.OpenDB(c)
			res, err := fdb.Exec("UPDATE t SET a = a WHERE id IN (1, 2)")
			if err != nil {
				t.Fatal(err)
			}
			affected, _ := res.RowsAffected()
			want := int64(0)
			if found {
				want = 2
			}
			if affected != want {
				t.Errorf("clientFoundRows=%v: %d rows affected, want %d", found, affected, want)
			}
			fdb.Close()
		}
	})

	createBig(t, db)

	t.Run("SHOW PROCESSLIST and KILL QUERY", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var id int64
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := conn.ExecContext(ctx, slowQuery)
			done <- err
		}()
		waitUntil(t, "the query in the process list", 5*time.Second, func() bool { return processInfo(t, db)[id] == slowQuery })
		var info string
		if err := db.QueryRow("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&info); err != nil || info != slowQuery {
			t.Errorf("information_schema.PROCESSLIST: %q, %v", info, err)
		}
		mustExec(t, db, fmt.Sprintf("KILL QUERY %d", id))
		select {
		case err := <-done:
			expectError(t, err, 1317, "70100")
		case <-time.After(5 * time.Second):
			t.Fatal("the killed query kept running")
		}
		// The connection is still usable.
		var one int
		if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec("KILL QUERY 999999")
		expectError(t, err, 1094, "HY000")
	})

	t.Run("KILL CONNECTION", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var id int64
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, fmt.Sprintf("KILL %d", id))
		if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); err == nil {
			t.Fatal("a killed connection still answers")
		}
	})

	t.Run("max_execution_time", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mustExec(t, conn, "SET SESSION max_execution_time = 300")
		began := time.Now()
		_, err = conn.ExecContext(ctx, slowQuery)
		expectError(t, err, 3024, "HY000")
		if took := time.Since(began); took > 3*time.Second {
			t.Fatalf("stopped after %v", took)
		}
		mustExec(t, conn, "SET SESSION max_execution_time = 0")
		_, err = conn.ExecContext(ctx, "SELECT /*+ MAX_EXECUTION_TIME(200) */ COUNT(*) FROM big a, big b, big c WHERE a.v + b.v + c.v < 0")
		expectError(t, err, 3024, "HY000")
	})

	t.Run("a statement stops when its client goes away", func(t *testing.T) {
		raw, err := net.Dial("tcp", n.SQLAddr)
		if err != nil {
			t.Fatal(err)
		}
		// Log in with the driver's connector on our own socket, start
		// the query, and close the socket under it.
		cfg, _ := mysql.ParseDSN(n.DSN("app"))
		cfg.Params = nil
		dialer := func(ctx context.Context, addr string) (net.Conn, error) { return raw, nil }
		name := "robustness-" + fmt.Sprint(time.Now().UnixNano())
		mysql.RegisterDialContext(name, dialer)
		cfg.Net = name
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		gone := sql.OpenDB(c)
		defer gone.Close()
		go gone.Exec(slowQuery)
		waitUntil(t, "the query to start", 5*time.Second, func() bool {
			for _, info := range processInfo(t, db) {
				if info == slowQuery {
					return true
				}
			}
			return false
		})
		raw.Close()
		waitUntil(t, "the query to stop after its client left", 5*time.Second, func() bool {
			for _, info := range processInfo(t, db) {
				if info == slowQuery {
					return false
				}
			}
			return true
		})
	})
}

// Stopping the server while queries run cancels them cleanly: the
// clients get an error, and the log has no panic and no leaked iterator.
func TestShutdownCancelsRunningStatements(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE app")
	db := n.DB(t, "app")
	createBig(t, db)
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := db.Exec(slowQuery)
			errs <- err
		}()
	}
	waitUntil(t, "the queries to run", 5*time.Second, func() bool { return len(processInfo(t, db)) >= 3 })
	began := time.Now()
	n.Stop()
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("shutdown took %v", took)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err == nil {
			t.Error("a query running at shutdown succeeded")
		}
	}
	log, err := os.ReadFile(n.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"panic", "pebble: closed", "leaked iterator", "leaked"} {
		if strings.Contains(strings.ToLower(string(log)), bad) {
			t.Errorf("the log mentions %q:\n%s", bad, tail(n.LogPath, 30))
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Fatal("no log")
	}
}
