package integration

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mustExec runs statements on one connection, failing the test on error.
func mustExec(t *testing.T, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := q.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func errCode(err error) (uint16, string) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, string(me.SQLState[:])
	}
	return 0, ""
}

func expectError(t *testing.T, err error, code uint16, state string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected error %d (%s), got success", code, state)
	}
	gotCode, gotState := errCode(err)
	if gotCode != code || gotState != state {
		t.Fatalf("expected error %d (%s), got %v", code, state, err)
	}
}

func TestDDLAndDML(t *testing.T) {
	n := StartNode(t)
	admin := n.DB(t, "")
	mustExec(t, admin, "CREATE DATABASE shop")
	db := n.DB(t, "shop")
	mustExec(t, db,
		"CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(10,2), stock INT UNSIGNED DEFAULT 0, added DATETIME)",
		"CREATE INDEX items_name ON items (name)",
	)
	res, err := db.Exec("INSERT INTO items (id, name, price, stock, added) VALUES (1, 'apple', 0.50, 10, '2024-01-02 03:04:05'), (2, 'pear', 0.75, 0, NULL), (3, 'plum', 1.25, 7, '2024-06-30 23:59:59')")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 3 {
		t.Fatalf("insert affected %d rows", n)
	}

	var name string
	var price string
	var stock uint64
	var added sql.NullTime
	if err := db.QueryRow("SELECT name, price, stock, added FROM items WHERE id = 1").Scan(&name, &price, &stock, &added); err != nil {
		t.Fatal(err)
	}
	if name != "apple" || price != "0.50" || stock != 10 || !added.Valid || added.Time.Format("2006-01-02 15:04:05") != "2024-01-02 03:04:05" {
		t.Fatalf("row 1 = %q %q %d %v", name, price, stock, added)
	}
	// The secondary index answers lookups by name.
	var id int
	if err := db.QueryRow("SELECT id FROM items WHERE name = 'plum'").Scan(&id); err != nil || id != 3 {
		t.Fatalf("lookup by name: %d %v", id, err)
	}

	res, err = db.Exec("UPDATE items SET stock = stock + 5 WHERE price < 1")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Fatalf("update affected %d rows", n)
	}
	res, err = db.Exec("DELETE FROM items WHERE id = 3")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("delete affected %d rows", n)
	}

	rows, err := db.Query("SELECT id, stock FROM items ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var id, stock int
		if err := rows.Scan(&id, &stock); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join([]string{strconv.Itoa(id), strconv.Itoa(stock)}, ":"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if strings.Join(got, " ") != "1:15 2:5" {
		t.Fatalf("table after update and delete: %v", got)
	}

	var count int
	var total string
	if err := db.QueryRow("SELECT COUNT(*), SUM(price) FROM items").Scan(&count, &total); err != nil || count != 2 || total != "1.25" {
		t.Fatalf("aggregate: %d %q %v", count, total, err)
	}

	mustExec(t, db, "DROP TABLE items")
	_, err = db.Exec("SELECT * FROM items")
	expectError(t, err, 1146, "42S02")
}

func TestTransactions(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE bank")
	db := n.DB(t, "bank")
	mustExec(t, db,
		"CREATE TABLE acct (id INT PRIMARY KEY, balance BIGINT NOT NULL)",
		"INSERT INTO acct VALUES (1, 100), (2, 100)",
	)
	balance := func(id int) int64 {
		t.Helper()
		var b int64
		if err := db.QueryRow("SELECT balance FROM acct WHERE id = ?", id).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("commit makes both writes visible", func(t *testing.T) {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "UPDATE acct SET balance = balance - 30 WHERE id = 1", "UPDATE acct SET balance = balance + 30 WHERE id = 2")
		// Not visible to others before commit.
		if b := balance(1); b != 100 {
			t.Fatalf("uncommitted write visible: %d", b)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if balance(1) != 70 || balance(2) != 130 {
			t.Fatalf("after commit: %d %d", balance(1), balance(2))
		}
	})

	t.Run("rollback discards", func(t *testing.T) {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "UPDATE acct SET balance = 0 WHERE id = 1", "INSERT INTO acct VALUES (3, 5)")
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if balance(1) != 70 {
			t.Fatalf("rolled back write visible: %d", balance(1))
		}
		var c int
		db.QueryRow("SELECT COUNT(*) FROM acct").Scan(&c)
		if c != 2 {
			t.Fatalf("rolled back insert visible: %d rows", c)
		}
	})

	t.Run("a failed statement inside a transaction changes nothing and keeps the transaction", func(t *testing.T) {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx, "INSERT INTO acct VALUES (10, 1)")
		// The second row is new, the first collides: the whole statement fails.
		_, err = tx.Exec("INSERT INTO acct VALUES (11, 1), (1, 1)")
		expectError(t, err, 1062, "23000")
		mustExec(t, tx, "INSERT INTO acct VALUES (12, 1)")
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var ids []string
		rows, err := db.Query("SELECT id FROM acct WHERE id >= 10 ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int
			rows.Scan(&id)
			ids = append(ids, strconv.Itoa(id))
		}
		rows.Close()
		if strings.Join(ids, ",") != "10,12" {
			t.Fatalf("rows after the transaction: %v", ids)
		}
		mustExec(t, db, "DELETE FROM acct WHERE id >= 10")
	})

	t.Run("concurrent updates of one row both apply, the second after waiting", func(t *testing.T) {
		ctx := context.Background()
		tx1, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		tx2, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// tx1 reads the row first; tx2 reads another one, so both
		// snapshots predate tx1's write. (Had tx2 read row 2 itself, its
		// update would fail with 1213 under snapshot isolation:
		// TestRepeatableReadRefusesLostUpdate.)
		var b1, b2 int64
		if err := tx1.QueryRow("SELECT balance FROM acct WHERE id = 2").Scan(&b1); err != nil {
			t.Fatal(err)
		}
		if err := tx2.QueryRow("SELECT balance FROM acct WHERE id = 1").Scan(&b2); err != nil {
			t.Fatal(err)
		}
		mustExec(t, tx1, "UPDATE acct SET balance = balance + 1 WHERE id = 2")
		done := make(chan error, 1)
		go func() {
			// Waits for tx1's row lock, then updates what tx1 committed:
			// row 1, which tx2 read, is unchanged, so its snapshot moves.
			if _, err := tx2.Exec("UPDATE acct SET balance = balance + 1 WHERE id = 2"); err != nil {
				tx2.Rollback()
				done <- err
				return
			}
			done <- tx2.Commit()
		}()
		select {
		case err := <-done:
			t.Fatalf("the second update did not wait for the first's lock: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if err := tx1.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if b := balance(2); b != 132 {
			t.Fatalf("balance after two increments: %d", b)
		}
	})

	t.Run("optimistic transactions: a write conflict fails one with 1213", func(t *testing.T) {
		ctx := context.Background()
		conns := make([]*sql.Conn, 2)
		txs := make([]*sql.Tx, 2)
		for i := range conns {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			mustExec(t, c, "SET tidb_txn_mode = 'optimistic'")
			if txs[i], err = c.BeginTx(ctx, nil); err != nil {
				t.Fatal(err)
			}
			conns[i] = c
		}
		mustExec(t, txs[0], "UPDATE acct SET balance = balance + 1 WHERE id = 2")
		mustExec(t, txs[1], "UPDATE acct SET balance = balance + 1 WHERE id = 2")
		if err := txs[0].Commit(); err != nil {
			t.Fatal(err)
		}
		err := txs[1].Commit()
		expectError(t, err, 1213, "40001")
		if strings.Contains(err.Error(), `\x`) {
			t.Fatalf("error text shows an internal key: %v", err)
		}
		if b := balance(2); b != 133 {
			t.Fatalf("balance after one successful increment: %d", b)
		}
		// The failed transaction's connection is usable again.
		mustExec(t, conns[1], "UPDATE acct SET balance = balance - 1 WHERE id = 2")
	})
}

func TestPreparedStatements(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE ps")
	db := n.DB(t, "ps")
	mustExec(t, db, "CREATE TABLE v (id BIGINT PRIMARY KEY, u BIGINT UNSIGNED, f DOUBLE, d DECIMAL(12,3), s VARCHAR(50), b VARBINARY(10), ts DATETIME(6), n INT)")
	ins, err := db.Prepare("INSERT INTO v (id, u, f, d, s, b, ts, n) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	when := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	for i := int64(1); i <= 20; i++ {
		if _, err := ins.Exec(i, uint64(1<<63)+uint64(i), float64(i)/4, "12.345", "row "+strconv.Itoa(int(i)), []byte{0, byte(i)}, when, nil); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	sel, err := db.Prepare("SELECT u, f, d, s, b, ts, n FROM v WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	for _, i := range []int64{1, 7, 20} {
		var (
			u  uint64
			f  float64
			d  string
			s  string
			b  []byte
			ts time.Time
			nn sql.NullInt64
		)
		if err := sel.QueryRow(i).Scan(&u, &f, &d, &s, &b, &ts, &nn); err != nil {
			t.Fatalf("select %d: %v", i, err)
		}
		if u != uint64(1<<63)+uint64(i) || f != float64(i)/4 || d != "12.345" || s != "row "+strconv.Itoa(int(i)) ||
			string(b) != string([]byte{0, byte(i)}) || !ts.Equal(when) || nn.Valid {
			t.Fatalf("row %d came back as %d %v %q %q %x %v %v", i, u, f, d, s, b, ts, nn)
		}
	}
	var count int
	if err := db.QueryRow("SELECT COUNT(*) FROM v WHERE id BETWEEN ? AND ?", 5, 9).Scan(&count); err != nil || count != 5 {
		t.Fatalf("range count: %d %v", count, err)
	}
	// A prepared statement reports parameter errors with codes too.
	_, err = ins.Exec(1, 1, 1, "1", "dup", []byte{}, when, 1)
	expectError(t, err, 1062, "23000")
}

func TestErrorCodesLeaveSessionUsable(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE errs")
	db := n.DB(t, "errs")
	mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, small TINYINT, name VARCHAR(10) NOT NULL)")
	mustExec(t, db, "INSERT INTO t VALUES (1, 1, 'one')")
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
		// The same errors through the binary protocol.
		{"INSERT INTO t VALUES (?, ?, ?)", []any{1, 2, "again"}, 1062, "23000"},
		{"INSERT INTO t VALUES (?, ?, ?)", []any{2, 300, "big"}, 1264, "22003"},
		{"INSERT INTO t VALUES (?, ?, ?)", []any{3, 1, nil}, 1048, "23000"},
		{"SELECT nope FROM t WHERE id = ?", []any{1}, 1054, "42S22"},
	}
	for _, c := range cases {
		_, err := conn.ExecContext(ctx, c.query, c.args...)
		expectError(t, err, c.code, c.state)
		var name string
		if err := conn.QueryRowContext(ctx, "SELECT name FROM t WHERE id = 1").Scan(&name); err != nil || name != "one" {
			t.Fatalf("session unusable after %q: %q %v", c.query, name, err)
		}
	}
	var rows int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("failed statements changed the table: %d rows, %v", rows, err)
	}
}

func TestShowStatements(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE shown")
	db := n.DB(t, "shown")
	mustExec(t, db, "CREATE TABLE alpha (id INT PRIMARY KEY, label VARCHAR(20))", "CREATE TABLE beta (id INT PRIMARY KEY)")

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
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(vals[0]))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	contains := func(list []string, want string) bool {
		for _, s := range list {
			if strings.EqualFold(s, want) {
				return true
			}
		}
		return false
	}
	if dbs := firstColumn("SHOW DATABASES"); !contains(dbs, "shown") {
		t.Errorf("SHOW DATABASES = %v", dbs)
	}
	if tables := firstColumn("SHOW TABLES"); len(tables) != 2 || !contains(tables, "alpha") || !contains(tables, "beta") {
		t.Errorf("SHOW TABLES = %v", tables)
	}
	if cols := firstColumn("SHOW COLUMNS FROM alpha"); strings.Join(cols, ",") != "id,label" {
		t.Errorf("SHOW COLUMNS = %v", cols)
	}
	var table, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE alpha").Scan(&table, &ddl); err != nil {
		t.Errorf("SHOW CREATE TABLE: %v", err)
	} else if !strings.Contains(ddl, "CREATE TABLE") || !strings.Contains(ddl, "label") {
		t.Errorf("SHOW CREATE TABLE = %q", ddl)
	}
	var name, value string
	if err := db.QueryRow("SHOW VARIABLES LIKE 'autocommit'").Scan(&name, &value); err != nil {
		t.Errorf("SHOW VARIABLES: %v", err)
	} else if !strings.EqualFold(value, "ON") && value != "1" {
		t.Errorf("autocommit = %q", value)
	}
}

func TestMalformedPacketDoesNotStopTheServer(t *testing.T) {
	n := StartNode(t)
	c, err := net.Dial("tcp", n.SQLAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// Read the server greeting, then answer with a packet that is not a
	// handshake response: a length header claiming more than is sent,
	// then garbage.
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	greeting := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	if _, err := io.ReadFull(c, greeting); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(greeting), "8.0.11-strata") {
		t.Errorf("greeting does not announce the strata version: %q", greeting)
	}
	c.Write([]byte{0x02, 0x00, 0x00, 0x01, 0xff, 0xff, 0xff, 0x00, 0x13, 0x37})
	c.Close()

	// After a proper login, an empty command packet (which makes the
	// protocol library index past the end of it) and a truncated
	// COM_STMT_EXECUTE must cost at most that connection.
	for _, payload := range [][]byte{{}, {0x17, 0x01, 0x00}} {
		c := rawLogin(t, n.SQLAddr)
		writeRawPacket(t, c, 0, payload)
		c.Close()
	}

	fresh := n.DB(t, "")
	var one int
	if err := fresh.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("normal query after a malformed packet: %v", err)
	}
	if n.PID() == 0 {
		t.Fatal("server process is gone")
	}
}

// rawLogin opens a protocol-level connection authenticated as root with an
// empty password (mysql_native_password, no EOF packets).
func rawLogin(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	readRawPacket(t, c)
	const caps = 0x1 | 0x200 | 0x8000 | 0x80000 | 0x1000000 // long password, 4.1, secure conn, plugin auth, deprecate EOF
	var resp []byte
	resp = binary.LittleEndian.AppendUint32(resp, caps)
	resp = binary.LittleEndian.AppendUint32(resp, 1<<24)
	resp = append(resp, 33)
	resp = append(resp, make([]byte, 23)...)
	resp = append(resp, "root\x00"...)
	resp = append(resp, 0)
	resp = append(resp, "mysql_native_password\x00"...)
	writeRawPacket(t, c, 1, resp)
	if ok := readRawPacket(t, c); len(ok) == 0 || ok[0] != 0x00 {
		t.Fatalf("raw login failed: %q", ok)
	}
	return c
}

func readRawPacket(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("read header: %v", err)
	}
	body := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("read body: %v", err)
	}
	return body
}

func writeRawPacket(t *testing.T, c net.Conn, seq byte, payload []byte) {
	t.Helper()
	pkt := append([]byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}, payload...)
	if _, err := c.Write(pkt); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func TestLargeResultSetStreams(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE big")
	db := n.DB(t, "big")
	mustExec(t, db, "CREATE TABLE r (id INT PRIMARY KEY, pad VARCHAR(100))")
	const rows = 5000
	pad := strings.Repeat("x", 100)
	for start := 0; start < rows; start += 500 {
		var b strings.Builder
		b.WriteString("INSERT INTO r VALUES ")
		for i := start; i < start+500; i++ {
			if i > start {
				b.WriteByte(',')
			}
			b.WriteString("(" + strconv.Itoa(i) + ", '" + pad + "')")
		}
		mustExec(t, db, b.String())
	}
	for _, args := range [][]any{nil, {-1}} { // text protocol, then binary
		q := "SELECT id, pad FROM r"
		if args != nil {
			q += " WHERE id > ?"
		}
		res, err := db.Query(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		count, sum := 0, 0
		for res.Next() {
			var id int
			var p string
			if err := res.Scan(&id, &p); err != nil {
				t.Fatal(err)
			}
			if p != pad {
				t.Fatalf("row %d pad %q", id, p)
			}
			count++
			sum += id
		}
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		res.Close()
		if count != rows || sum != rows*(rows-1)/2 {
			t.Fatalf("args %v: read %d rows (id sum %d)", args, count, sum)
		}
	}
}

func TestRootPassword(t *testing.T) {
	n := StartNodeWith(t, "s3cret", nil)
	var one int
	if err := n.DB(t, "").QueryRow("SELECT 1").Scan(&one); err != nil {
		t.Fatalf("login with the configured password: %v", err)
	}
	for _, pw := range []string{"", "wrong"} {
		db, err := sql.Open("mysql", n.DSNAs("root", pw, ""))
		if err != nil {
			t.Fatal(err)
		}
		err = db.Ping()
		db.Close()
		expectError(t, err, 1045, "28000")
	}
}

func TestManyConcurrentConnections(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE conc")
	db := n.DB(t, "conc")
	mustExec(t, db, "CREATE TABLE c (id INT PRIMARY KEY, v INT)")
	db.SetMaxOpenConns(64)
	const clients = 64
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		go func(i int) {
			conn, err := db.Conn(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			if _, err := conn.ExecContext(context.Background(), "INSERT INTO c VALUES (?, ?)", i, i*i); err != nil {
				errs <- err
				return
			}
			var v int
			if err := conn.QueryRowContext(context.Background(), "SELECT v FROM c WHERE id = ?", i).Scan(&v); err != nil || v != i*i {
				errs <- fmt.Errorf("client %d read %d: %v", i, v, err)
				return
			}
			errs <- nil
		}(i)
	}
	for i := 0; i < clients; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var count int
	if err := db.QueryRow("SELECT COUNT(*) FROM c").Scan(&count); err != nil || count != clients {
		t.Fatalf("%d rows, %v", count, err)
	}
}

// Clients race to insert the same keys, each statement its own
// transaction (the primary key is then checked by the commit, not read
// first): every key ends up inserted exactly once, by the client whose
// INSERT succeeded, and every other attempt fails with 1062 (or 1213 when
// it lost a write conflict), never with a second row or a lost one.
func TestRacingInsertsOfOneKey(t *testing.T) {
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE race")
	db := n.DB(t, "race")
	mustExec(t, db, "CREATE TABLE r (id INT PRIMARY KEY, who INT NOT NULL, KEY who_ix (who))")
	const clients, keys = 8, 40
	db.SetMaxOpenConns(clients)
	won := make([][]int, clients) // keys each client inserted
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		go func(c int) {
			for k := 0; k < keys; k++ {
				_, err := db.Exec("INSERT INTO r (id, who) VALUES (?, ?)", k, c)
				switch code, _ := errCode(err); {
				case err == nil:
					won[c] = append(won[c], k)
				case code == 1062 || code == 1213:
				default:
					errs <- fmt.Errorf("client %d key %d: %v", c, k, err)
					return
				}
			}
			errs <- nil
		}(c)
	}
	for c := 0; c < clients; c++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	owner := map[int]int{}
	for c, ks := range won {
		for _, k := range ks {
			if prev, dup := owner[k]; dup {
				t.Fatalf("key %d inserted by clients %d and %d", k, prev, c)
			}
			owner[k] = c
		}
	}
	rows, err := db.Query("SELECT id, who FROM r ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var id, who int
		if err := rows.Scan(&id, &who); err != nil {
			t.Fatal(err)
		}
		if c, ok := owner[id]; !ok || c != who {
			t.Fatalf("row %d written by client %d; the successful INSERT was client %d's (%v)", id, who, c, ok)
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var idx int
	if err := db.QueryRow("SELECT COUNT(*) FROM r FORCE INDEX (who_ix) WHERE who >= 0").Scan(&idx); err != nil {
		t.Fatal(err)
	}
	// Some INSERT of each key commits first, and nothing makes it fail.
	if seen != keys || len(owner) != keys || idx != keys {
		t.Fatalf("%d rows and %d index entries for %d successful inserts of %d keys", seen, idx, len(owner), keys)
	}
}
