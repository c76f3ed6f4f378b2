package server

import (
	"context"
	gosql "database/sql"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	vmysql "github.com/dolthub/vitess/go/mysql"

	"github.com/strata-db/strata/internal/kv/kvtest"
	strsql "github.com/strata-db/strata/internal/sql"
)

// startEngineServer serves the real SQL engine over an in-memory store.
func startEngineServer(t *testing.T) string {
	t.Helper()
	engine, err := strsql.NewEngine(context.Background(), kvtest.NewMemStorage(), strsql.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Addr: "127.0.0.1:0", AllowEmptyRootPassword: true}, engine)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return srv.Addr().String()
}

func openEngineDB(t *testing.T, addr, db, params string) *gosql.DB {
	t.Helper()
	pool, err := gosql.Open("mysql", fmt.Sprintf("root@tcp(%s)/%s?timeout=5s&parseTime=true&%s", addr, db, params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

func execAll(t *testing.T, db interface {
	Exec(string, ...any) (gosql.Result, error)
}, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestEngineRoundTripThroughBothProtocols(t *testing.T) {
	addr := startEngineServer(t)
	execAll(t, openEngineDB(t, addr, "", ""), "CREATE DATABASE shop")
	db := openEngineDB(t, addr, "shop", "")
	execAll(t, db,
		"CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(10,2), qty BIGINT UNSIGNED, ratio DOUBLE, added DATETIME)",
		"INSERT INTO items VALUES (1, 'apple', 0.50, 10, 0.25, '2024-01-02 03:04:05'), (2, 'pear', 1.75, 18446744073709551615, NULL, NULL)",
	)
	type row struct {
		id    int
		name  string
		price string
		qty   uint64
		ratio gosql.NullFloat64
		added gosql.NullTime
	}
	read := func(query string, args ...any) []row {
		t.Helper()
		rows, err := db.Query(query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		var out []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.name, &r.price, &r.qty, &r.ratio, &r.added); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	text := read("SELECT id, name, price, qty, ratio, added FROM items ORDER BY id")
	binary := read("SELECT id, name, price, qty, ratio, added FROM items WHERE id >= ? ORDER BY id", 0)
	for name, got := range map[string][]row{"text": text, "binary": binary} {
		if len(got) != 2 {
			t.Fatalf("%s protocol: %d rows", name, len(got))
		}
		a, p := got[0], got[1]
		if a.id != 1 || a.name != "apple" || a.price != "0.50" || a.qty != 10 || a.ratio.Float64 != 0.25 ||
			a.added.Time.Format("2006-01-02 15:04:05") != "2024-01-02 03:04:05" {
			t.Errorf("%s protocol, row 1: %+v", name, a)
		}
		if p.qty != 18446744073709551615 || p.ratio.Valid || p.added.Valid || p.price != "1.75" {
			t.Errorf("%s protocol, row 2: %+v", name, p)
		}
	}

	// Prepared INSERT with every parameter kind the driver sends.
	res, err := db.Exec("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?)", 3, "plum", "2.50", uint64(7), 1.5, time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("prepared insert affected %d", n)
	}
	if got := read("SELECT id, name, price, qty, ratio, added FROM items WHERE id = ?", 3); len(got) != 1 || got[0].price != "2.50" ||
		got[0].added.Time.Format(time.DateTime) != "2025-05-06 07:08:09" {
		t.Fatalf("row inserted with parameters: %+v", got)
	}
}

func TestEngineErrorCodes(t *testing.T) {
	addr := startEngineServer(t)
	execAll(t, openEngineDB(t, addr, "", ""), "CREATE DATABASE e")
	db := openEngineDB(t, addr, "e", "")
	execAll(t, db, "CREATE TABLE t (id INT PRIMARY KEY, small TINYINT, name VARCHAR(10) NOT NULL)", "INSERT INTO t VALUES (1, 1, 'one')")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	cases := []struct {
		query string
		args  []any
		code  uint16
		state string
	}{
		{"SELEC 1", nil, 1064, "42000"},
		{"SELECT * FROM missing", nil, 1146, "42S02"},
		{"SELECT nope FROM t", nil, 1054, "42S22"},
		{"INSERT INTO t VALUES (1, 2, 'again')", nil, 1062, "23000"},
		{"INSERT INTO t VALUES (2, 300, 'big')", nil, 1264, "22003"},
		{"INSERT INTO t VALUES (3, 1, NULL)", nil, 1048, "23000"},
		{"INSERT INTO t VALUES (?, ?, ?)", []any{1, 2, "again"}, 1062, "23000"},
		{"INSERT INTO t VALUES (?, ?, ?)", []any{2, 300, "big"}, 1264, "22003"},
		{"INSERT INTO t VALUES (?, ?, ?)", []any{3, 1, nil}, 1048, "23000"},
	}
	for _, c := range cases {
		_, err := conn.ExecContext(ctx, c.query, c.args...)
		expectCode(t, err, c.code, c.state)
		var name string
		if err := conn.QueryRowContext(ctx, "SELECT name FROM t WHERE id = 1").Scan(&name); err != nil || name != "one" {
			t.Fatalf("session unusable after %q: %v", c.query, err)
		}
	}
}

func TestEngineTransactionsAndConflicts(t *testing.T) {
	addr := startEngineServer(t)
	execAll(t, openEngineDB(t, addr, "", ""), "CREATE DATABASE bank")
	db := openEngineDB(t, addr, "bank", "")
	execAll(t, db, "CREATE TABLE acct (id INT PRIMARY KEY, balance BIGINT NOT NULL)", "INSERT INTO acct VALUES (1, 100)")

	tx1, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	tx2, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var b int
	tx1.QueryRow("SELECT balance FROM acct WHERE id = 1").Scan(&b)
	tx2.QueryRow("SELECT balance FROM acct WHERE id = 1").Scan(&b)
	execAll(t, tx1, "UPDATE acct SET balance = balance + 1 WHERE id = 1")
	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	_, err = tx2.Exec("UPDATE acct SET balance = balance + 1 WHERE id = 1")
	if err == nil {
		err = tx2.Commit()
	} else {
		tx2.Rollback()
	}
	expectCode(t, err, 1213, "40001")
	if err := db.QueryRow("SELECT balance FROM acct WHERE id = 1").Scan(&b); err != nil || b != 101 {
		t.Fatalf("balance %d, %v", b, err)
	}
}

func TestEngineStatusFlagsAndMultiStatements(t *testing.T) {
	addr := startEngineServer(t)
	db := openEngineDB(t, addr, "", "multiStatements=true")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "CREATE DATABASE m; USE m; CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, "SELECT COUNT(*) FROM t; SELECT id FROM t ORDER BY id DESC")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		for rows.Next() {
			var v int
			rows.Scan(&v)
			got = append(got, fmt.Sprint(v))
		}
		if !rows.NextResultSet() {
			break
		}
	}
	rows.Close()
	if strings.Join(got, ",") != "2,2,1" {
		t.Fatalf("multi-statement results %v", got)
	}
}

func TestEngineShowStatements(t *testing.T) {
	addr := startEngineServer(t)
	execAll(t, openEngineDB(t, addr, "", ""), "CREATE DATABASE shown")
	db := openEngineDB(t, addr, "shown", "")
	execAll(t, db, "CREATE TABLE alpha (id INT PRIMARY KEY, label VARCHAR(20))", "CREATE TABLE beta (id INT PRIMARY KEY)")
	firstColumn := func(q string) []string {
		t.Helper()
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out []string
		for rows.Next() {
			vals := make([]gosql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(vals[0]))
		}
		return out
	}
	if got := firstColumn("SHOW DATABASES"); !strings.Contains(strings.Join(got, ","), "shown") {
		t.Errorf("SHOW DATABASES = %v", got)
	}
	if got := firstColumn("SHOW TABLES"); strings.Join(got, ",") != "alpha,beta" {
		t.Errorf("SHOW TABLES = %v", got)
	}
	if got := firstColumn("SHOW COLUMNS FROM alpha"); strings.Join(got, ",") != "id,label" {
		t.Errorf("SHOW COLUMNS = %v", got)
	}
	var table, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE alpha").Scan(&table, &ddl); err != nil || !strings.Contains(ddl, "CREATE TABLE") {
		t.Errorf("SHOW CREATE TABLE = %q, %v", ddl, err)
	}
	var name, value string
	if err := db.QueryRow("SHOW VARIABLES LIKE 'autocommit'").Scan(&name, &value); err != nil || (value != "ON" && value != "1") {
		t.Errorf("SHOW VARIABLES LIKE 'autocommit' = %q %q, %v", name, value, err)
	}
}

// TestMySQLCommandLineClient drives the server with the mysql CLI, whose
// libmysqlclient asks for caching_sha2_password first (switched to
// mysql_native_password) and uses multi-statements and COM_INIT_DB.
func TestMySQLCommandLineClient(t *testing.T) {
	cli, err := exec.LookPath("mysql")
	if err != nil {
		t.Skip("mysql client is not on PATH")
	}
	addr := startEngineServer(t)
	host, port, _ := net.SplitHostPort(addr)
	run := func(db, sql string) string {
		t.Helper()
		args := []string{"-h", host, "-P", port, "-u", "root", "--batch", "-e", sql}
		if db != "" {
			args = append(args, db)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("mysql -e %q: %v\n%s", sql, err, out)
		}
		return string(out)
	}
	run("", "CREATE DATABASE cli; USE cli; CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO t VALUES (1, 'a'), (2, NULL)")
	if got := run("cli", "SELECT id, v FROM t ORDER BY id"); got != "id\tv\n1\ta\n2\tNULL\n" {
		t.Fatalf("mysql printed %q", got)
	}
}

func TestHandshakeVersionMatchesVersionVariable(t *testing.T) {
	addr := startEngineServer(t)
	var version string
	if err := openEngineDB(t, addr, "", "").QueryRow("SELECT @@version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != ServerVersion || ServerVersion != "8.0.11-strata" {
		t.Fatalf("@@version %q, handshake %q", version, ServerVersion)
	}
}

// TestEngineColumnTypesInBothProtocols stores one value of each column type
// and reads it back as text (COM_QUERY) and binary (COM_STMT_EXECUTE)
// results; both must scan to the same Go values.
func TestEngineColumnTypesInBothProtocols(t *testing.T) {
	addr := startEngineServer(t)
	execAll(t, openEngineDB(t, addr, "", ""), "CREATE DATABASE ty")
	db := openEngineDB(t, addr, "ty", "parseTime=false") // compare dates as the server's text
	cols := []struct{ def, value, want string }{
		{"TINYINT", "-128", "-128"},
		{"TINYINT UNSIGNED", "255", "255"},
		{"SMALLINT", "-32768", "-32768"},
		{"MEDIUMINT", "8388607", "8388607"},
		{"INT UNSIGNED", "4294967295", "4294967295"},
		{"BIGINT", "-9223372036854775808", "-9223372036854775808"},
		{"FLOAT", "1.5", "1.5"},
		{"DOUBLE", "-0.000123", "-0.000123"},
		{"DECIMAL(20,6)", "-12345678901234.123456", "-12345678901234.123456"},
		{"CHAR(5)", "'ab'", "ab"},
		{"VARCHAR(20)", "'héllo wörld'", "héllo wörld"},
		{"TEXT", "'long text'", "long text"},
		{"VARBINARY(8)", "X'00FF10'", "\x00\xff\x10"},
		{"BLOB", "X'DEADBEEF'", "\xde\xad\xbe\xef"},
		{"DATE", "'2024-02-29'", "2024-02-29"},
		{"DATETIME", "'2024-02-29 23:59:58'", "2024-02-29 23:59:58"},
		{"DATETIME(3)", "'2024-02-29 23:59:58.125'", "2024-02-29 23:59:58.125"},
		{"TIMESTAMP", "'2024-02-29 01:02:03'", "2024-02-29 01:02:03"},
		{"YEAR", "2024", "2024"},
	}
	var defs, values []string
	for i, c := range cols {
		defs = append(defs, fmt.Sprintf("c%d %s", i, c.def))
		values = append(values, c.value)
	}
	execAll(t, db,
		"CREATE TABLE ty (id INT PRIMARY KEY, "+strings.Join(defs, ", ")+")",
		"INSERT INTO ty VALUES (1, "+strings.Join(values, ", ")+")",
		"INSERT INTO ty (id) VALUES (2)",
	)
	read := func(query string, args ...any) [][]gosql.NullString {
		t.Helper()
		rows, err := db.Query(query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		var out [][]gosql.NullString
		for rows.Next() {
			vals := make([]gosql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, vals)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var names []string
	for i := range cols {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	sel := "SELECT " + strings.Join(names, ", ") + " FROM ty"
	text := read(sel + " ORDER BY id")
	binary := read(sel+" WHERE id > ? ORDER BY id", 0)
	for proto, got := range map[string][][]gosql.NullString{"text": text, "binary": binary} {
		if len(got) != 2 {
			t.Fatalf("%s: %d rows", proto, len(got))
		}
		for i, c := range cols {
			// go-sql-driver renders binary DATETIME/TIMESTAMP with the
			// column's fsp and DATE without a time, like the text form.
			if v := got[0][i]; !v.Valid || v.String != c.want {
				t.Errorf("%s protocol, %s: got %q (valid %v), want %q", proto, c.def, v.String, v.Valid, c.want)
			}
			if got[1][i].Valid {
				t.Errorf("%s protocol, %s: NULL came back as %q", proto, c.def, got[1][i].String)
			}
		}
	}
}

// protocolClients returns a function that opens a connection to addr
// with the protocol library's own client, closed when the test ends.
func protocolClients(t *testing.T, addr string) func() *vmysql.Conn {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return func() *vmysql.Conn {
		c, err := vmysql.Connect(context.Background(), &vmysql.ConnParams{Host: host, Port: p, Uname: "root"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
}

// The id a client's handshake gives it is the one the session reports
// (CONNECTION_ID(), SHOW PROCESSLIST's Id) and the one KILL takes, as
// clients expect: PyMySQL's test_issue_36 finds itself in the process
// list by its thread_id() and kills it from another connection.
func TestConnectionIDIsTheHandshakes(t *testing.T) {
	connect := protocolClients(t, startEngineServer(t))
	a, b := connect(), connect()
	res, err := a.ExecuteFetch("SELECT CONNECTION_ID()", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Rows[0][0].ToString(); got != strconv.FormatUint(uint64(a.ConnectionID), 10) {
		t.Fatalf("CONNECTION_ID() = %s, the handshake said %d", got, a.ConnectionID)
	}
	res, err = b.ExecuteFetch("SHOW PROCESSLIST", 100, false)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, row := range res.Rows {
		ids = append(ids, row[0].ToString())
	}
	if !slices.Contains(ids, strconv.FormatUint(uint64(a.ConnectionID), 10)) || !slices.Contains(ids, strconv.FormatUint(uint64(b.ConnectionID), 10)) {
		t.Fatalf("SHOW PROCESSLIST ids %v, handshake ids %d and %d", ids, a.ConnectionID, b.ConnectionID)
	}
	if _, err := b.ExecuteFetch(fmt.Sprintf("KILL %d", a.ConnectionID), 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ExecuteFetch("SELECT 1", 1, false); err == nil {
		t.Fatal("the killed connection still answers")
	}
}

// A connection idle past its session's wait_timeout is closed, as MySQL
// does (PyMySQL's test_connection_gone_away); a statement running longer
// than it is not idle time, and another connection is left alone.
func TestWaitTimeoutClosesIdleConnections(t *testing.T) {
	connect := protocolClients(t, startEngineServer(t))
	short, other := connect(), connect()
	if _, err := short.ExecuteFetch("SET wait_timeout = 1", 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := short.ExecuteFetch("SELECT SLEEP(1.6)", 1, false); err != nil {
		t.Fatalf("a statement longer than wait_timeout: %v", err)
	}
	time.Sleep(1600 * time.Millisecond)
	if _, err := short.ExecuteFetch("SELECT 1", 1, false); err == nil {
		t.Fatal("a connection idle past wait_timeout still answers")
	}
	if _, err := other.ExecuteFetch("SELECT 1", 1, false); err != nil {
		t.Fatalf("a connection with the default wait_timeout: %v", err)
	}
	res, err := other.ExecuteFetch("SELECT @@wait_timeout", 1, false)
	if err != nil || res.Rows[0][0].ToString() != "28800" {
		t.Fatalf("@@wait_timeout of another session: %v %v", res, err)
	}
}
