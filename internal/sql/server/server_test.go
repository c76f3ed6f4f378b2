package server

import (
	"context"
	gosql "database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	vmysql "github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	gomysql "github.com/go-sql-driver/mysql"
	pmysql "github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-db/strata/internal/sql/types"
)

type testServer struct {
	srv     *Server
	backend *scriptedBackend
	addr    string
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	b := newScriptedBackend()
	srv, err := newServer(cfg, b.open, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return &testServer{srv: srv, backend: b, addr: srv.Addr().String()}
}

func startDefaultServer(t testing.TB) *testServer {
	return startServer(t, Config{AllowEmptyRootPassword: true})
}

// openDB connects with go-sql-driver. interpolateParams=false (the driver's
// default) makes every query with arguments a server-side prepare.
func (ts *testServer) openDB(t *testing.T, userPass, db, params string) *gosql.DB {
	t.Helper()
	dsn := fmt.Sprintf("%s@tcp(%s)/%s?timeout=5s&%s", userPass, ts.addr, db, params)
	conn, err := gosql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func mysqlError(t *testing.T, err error) *gomysql.MySQLError {
	t.Helper()
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("expected a MySQL error, got %v", err)
	}
	return me
}

func expectCode(t *testing.T, err error, code uint16, state string) {
	t.Helper()
	me := mysqlError(t, err)
	if me.Number != code || string(me.SQLState[:]) != state {
		t.Fatalf("got error %d (%s) %q, want %d (%s)", me.Number, string(me.SQLState[:]), me.Message, code, state)
	}
}

func TestSimpleQueryAndDatabaseFromHandshake(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	var current gosql.NullString
	if err := db.QueryRow("SELECT DATABASE()").Scan(&current); err != nil || current.String != "test" {
		t.Fatalf("database named in the DSN was not selected: %v %v", current, err)
	}
}

func TestHandshakeAnnouncesStrataVersion(t *testing.T) {
	ts := startDefaultServer(t)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	pkt := readPacket(t, c)
	if pkt[0] != 10 {
		t.Fatalf("protocol version %d", pkt[0])
	}
	end := strings.IndexByte(string(pkt[1:]), 0)
	if got := string(pkt[1 : 1+end]); got != ServerVersion {
		t.Fatalf("handshake version %q, want %q", got, ServerVersion)
	}
}

func TestTextProtocolRendersEveryType(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "parseTime=true")
	checkTypedRows(t, db, "SELECT * FROM typed")
}

func TestBinaryProtocolRendersEveryType(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "parseTime=true")
	// An argument makes the driver prepare and execute on the server.
	checkTypedRows(t, db, "SELECT * FROM typed WHERE i32 = ?", 1)
	if got := ts.backend.lastParams(); len(got) != 1 || got[0].Kind() != types.KindInt64 || got[0].Int() != 1 {
		t.Fatalf("parameter reached the session as %v", got)
	}
}

func checkTypedRows(t *testing.T, db *gosql.DB, query string, args ...any) {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"TINYINT", "UNSIGNED SMALLINT", "INT", "UNSIGNED BIGINT", "FLOAT", "DOUBLE", "DECIMAL", "VARCHAR", "BLOB", "DATE", "DATETIME"}
	for i, ct := range cts {
		if ct.DatabaseTypeName() != wantTypes[i] {
			t.Errorf("column %s: type %s, want %s", ct.Name(), ct.DatabaseTypeName(), wantTypes[i])
		}
	}
	if p, s, ok := cts[6].DecimalSize(); !ok || s != 2 || p != 10 {
		t.Errorf("decimal column size (%d,%d,%v), want (10,2)", p, s, ok)
	}
	if nullable, ok := cts[2].Nullable(); !ok || nullable {
		t.Errorf("NOT NULL column reported nullable=%v ok=%v", nullable, ok)
	}
	var (
		i8, i32       int64
		u16, u64      uint64
		f32, f64      float64
		dec, s        string
		b             []byte
		d, dt         time.Time
		nullCount     int
		sawValuesRow  bool
		nullsInRowTwo []any
	)
	if !rows.Next() {
		t.Fatal("no rows")
	}
	if err := rows.Scan(&i8, &u16, &i32, &u64, &f32, &f64, &dec, &s, &b, &d, &dt); err != nil {
		t.Fatal(err)
	}
	sawValuesRow = true
	if i8 != -7 || u16 != 65535 || i32 != -2147483648 || u64 != 18446744073709551615 {
		t.Errorf("integers: %d %d %d %d", i8, u16, i32, u64)
	}
	if f32 != 1.5 || f64 != -2.25e-3 {
		t.Errorf("floats: %v %v", f32, f64)
	}
	if dec != "12345678.90" || s != "héllo" || string(b) != "\x00\x01\xff" {
		t.Errorf("decimal/string/blob: %q %q %q", dec, s, b)
	}
	if d.Format("2006-01-02") != "2024-02-29" || dt.Format("2006-01-02 15:04:05.000000") != "2024-02-29 13:14:15.000123" {
		t.Errorf("dates: %v %v", d, dt)
	}
	if !rows.Next() {
		t.Fatal("NULL row missing")
	}
	nullsInRowTwo = make([]any, 11)
	ptrs := make([]any, 11)
	for i := range ptrs {
		ptrs[i] = &nullsInRowTwo[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	for _, v := range nullsInRowTwo {
		if v == nil {
			nullCount++
		}
	}
	if !sawValuesRow || nullCount != 11 {
		t.Errorf("second row should be all NULL, got %v", nullsInRowTwo)
	}
	if rows.Next() {
		t.Error("extra row")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyAndLargeResultSets(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	rows, err := db.Query("SELECT * FROM empty")
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	if len(cols) != 11 || rows.Next() {
		t.Fatalf("empty result: %d columns, rows present", len(cols))
	}
	rows.Close()

	rows, err = db.Query("SELECT * FROM big")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != n {
			t.Fatalf("row %d holds %d", n, v)
		}
		n++
	}
	if n != 1000 || rows.Err() != nil {
		t.Fatalf("read %d rows, err %v", n, rows.Err())
	}
}

func TestPreparedParametersBecomeTypedDatums(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	var a, b, c, d, e, f string
	var g gosql.NullString
	err := db.QueryRow("SELECT ?, ?, ?, ?, ?, ?, ?", int64(-5), uint64(1<<63+1), 2.5, "txt", []byte("raw"), true, nil).
		Scan(&a, &b, &c, &d, &e, &f, &g)
	if err != nil {
		t.Fatal(err)
	}
	if a != "-5" || b != "9223372036854775809" || c != "2.5" || d != "txt" || e != "raw" || f != "1" || g.Valid {
		t.Fatalf("echoed %q %q %q %q %q %q %v", a, b, c, d, e, f, g)
	}
	got := ts.backend.lastParams()
	wantKinds := []types.Kind{types.KindInt64, types.KindUint64, types.KindFloat64, types.KindString, types.KindString, types.KindInt64, types.KindNull}
	for i, k := range wantKinds {
		if got[i].Kind() != k {
			t.Errorf("param %d: kind %s, want %s", i+1, got[i].Kind(), k)
		}
	}
	// An INSERT through the binary protocol reports affected rows and id.
	res, err := db.Exec("INSERT INTO t VALUES (?, ?)", 1, "x")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Errorf("affected %d", n)
	}
	if id, _ := res.LastInsertId(); id != 7 {
		t.Errorf("last insert id %d", id)
	}
}

func TestClosedStatementsAreReleasedFromTheSession(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	db.SetMaxOpenConns(1)
	for i := 0; i < 20; i++ {
		var v string
		if err := db.QueryRow("SELECT ?", i).Scan(&v); err != nil || v != strconv.Itoa(i) {
			t.Fatalf("iteration %d: %q %v", i, v, err)
		}
	}
	// Each query prepared and closed a statement; the server releases the
	// closed ones at the next prepare, so at most one is still open.
	if n := ts.backend.openPrepared(); n > 1 {
		t.Fatalf("%d prepared statements left open in the session", n)
	}
}

func TestPrepareErrorIsReported(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	_, err := db.Query("SELECT c FROM nope WHERE id = ?", 1)
	expectCode(t, err, 1146, "42S02")
}

func TestErrorsCarryCodesAndSessionStaysUsable(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	cases := []struct {
		query string
		code  uint16
		state string
	}{
		{"INSERT dup", 1062, "23000"},
		{"UPDATE conflict", 1213, "40001"},
		{"UPDATE lockwait", 1205, "HY000"},
		{"SELECT plain_error", 1105, "HY000"},
		{"gibberish", 1064, "42000"},
	}
	for _, c := range cases {
		_, err := conn.ExecContext(ctx, c.query)
		expectCode(t, err, c.code, c.state)
		var one int
		if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("after %q the connection is unusable: %v", c.query, err)
		}
	}
}

func TestMultiStatementsRunInOrderAndStopAtFirstError(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "multiStatements=true")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2) ;\n-- done\n"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, "SELECT 1; SELECT 2")
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for {
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		if !rows.NextResultSet() {
			break
		}
	}
	rows.Close()
	if fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("result sets %v", got)
	}
	_, err = conn.ExecContext(ctx, "INSERT INTO t VALUES (1); INSERT dup; INSERT INTO t VALUES (3)")
	expectCode(t, err, 1062, "23000")
	for _, q := range ts.backend.executedStatements() {
		if q == "INSERT INTO t VALUES (3)" {
			t.Fatal("statement after the failing one was executed")
		}
	}
	var one int
	if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("connection unusable after multi-statement error: %v", err)
	}
}

func TestMultipleStatementsWithoutCapabilityAreRejected(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	_, err := db.Exec("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
	expectCode(t, err, 1064, "42000")
	if got := ts.backend.executedStatements(); len(got) != 0 {
		t.Fatalf("executed %v", got)
	}
	// A semicolon inside a string or comment is not a statement boundary.
	if _, err := db.Exec("INSERT INTO t VALUES (1) /* ; */"); err == nil {
		t.Fatal("scripted backend should not know the statement with the comment")
	} else {
		expectCode(t, err, 1064, "42000") // from the backend, not the splitter
	}
	if got := ts.backend.executedStatements(); len(got) != 1 {
		t.Fatalf("statement with a commented ';' was not passed through: %v", got)
	}
}

func TestStatusFlagsFollowTheSession(t *testing.T) {
	ts := startDefaultServer(t)
	host, port, _ := net.SplitHostPort(ts.addr)
	p, _ := strconv.Atoi(port)
	ctx := context.Background()
	c, err := vmysql.Connect(ctx, &vmysql.ConnParams{Host: host, Port: p, Uname: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status := func(q string) uint16 {
		t.Helper()
		_, st, err := c.ExecuteFetchMulti(ctx, q, 100, true)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return uint16(st)
	}
	if st := status("SELECT 1"); st&vmysql.ServerInTransaction != 0 || st&vmysql.ServerStatusAutocommit == 0 {
		t.Fatalf("idle status %#x", st)
	}
	if st := status("BEGIN"); st&vmysql.ServerInTransaction == 0 {
		t.Fatalf("status after BEGIN %#x", st)
	}
	if st := status("SELECT 1"); st&vmysql.ServerInTransaction == 0 {
		t.Fatalf("status of a result set inside a transaction %#x", st)
	}
	if st := status("COMMIT"); st&vmysql.ServerInTransaction != 0 {
		t.Fatalf("status after COMMIT %#x", st)
	}
	if st := status("SET autocommit=0"); st&vmysql.ServerStatusAutocommit != 0 {
		t.Fatalf("status after SET autocommit=0 %#x", st)
	}
}

func TestWarningCountIsReported(t *testing.T) {
	ts := startDefaultServer(t)
	host, port, _ := net.SplitHostPort(ts.addr)
	p, _ := strconv.Atoi(port)
	c, err := vmysql.Connect(context.Background(), &vmysql.ConnParams{Host: host, Port: p, Uname: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, warnings, err := c.ExecuteFetchWithWarningCount("INSERT warn", 10, false)
	if err != nil || warnings != 2 {
		t.Fatalf("warnings %d, err %v", warnings, err)
	}
}

func TestUseDatabase(t *testing.T) {
	ts := startDefaultServer(t)
	_, err := ts.openDB(t, "root", "nosuchdb", "").Exec("SELECT 1")
	expectCode(t, err, 1049, "42000")

	// COM_INIT_DB is what the mysql CLI's "use" sends.
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	login(t, c)
	writePacket(t, c, 0, append([]byte{0x02}, "sbtest"...))
	if p := readPacket(t, c); p[0] != 0x00 {
		t.Fatalf("COM_INIT_DB sbtest: %q", p)
	}
	writePacket(t, c, 0, append([]byte{0x02}, "nosuchdb"...))
	expectErrPacket(t, c)
	ts.backend.mu.Lock()
	last := ts.backend.sessions[len(ts.backend.sessions)-1]
	db := last.db
	ts.backend.mu.Unlock()
	if db != "sbtest" {
		t.Fatalf("session database %q after COM_INIT_DB", db)
	}
}

func TestAuthentication(t *testing.T) {
	t.Run("empty root password from loopback", func(t *testing.T) {
		ts := startDefaultServer(t)
		if err := ts.openDB(t, "root", "", "").Ping(); err != nil {
			t.Fatal(err)
		}
		err := ts.openDB(t, "alice", "", "").Ping()
		expectCode(t, err, 1045, "28000")
	})
	t.Run("empty password not allowed unless configured", func(t *testing.T) {
		ts := startServer(t, Config{})
		expectCode(t, ts.openDB(t, "root", "", "").Ping(), 1045, "28000")
	})
	t.Run("configured root password", func(t *testing.T) {
		ts := startServer(t, Config{RootPassword: "s3cret", AllowEmptyRootPassword: true})
		if err := ts.openDB(t, "root:s3cret", "", "").Ping(); err != nil {
			t.Fatal(err)
		}
		expectCode(t, ts.openDB(t, "root:wrong", "", "").Ping(), 1045, "28000")
		expectCode(t, ts.openDB(t, "root", "", "").Ping(), 1045, "28000")
	})
}

func TestPanicCostsOnlyItsConnection(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	db.SetMaxIdleConns(0)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(context.Background(), "SELECT panic")
	if err == nil {
		t.Fatal("panicking statement succeeded")
	}
	conn.Close()
	waitFor(t, func() bool { return ts.backend.closedSessions() >= 1 }, "session of the panicked connection closed")
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("server unusable after a panic: %v", err)
	}
}

func TestCloseClosesSessions(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	ts.srv.Close()
	waitFor(t, func() bool { return ts.backend.closedSessions() == 1 }, "open session closed by Server.Close")
}

func TestMalformedPacketsDoNotHurtTheServer(t *testing.T) {
	ts := startDefaultServer(t)
	attacks := map[string]func(t *testing.T, c net.Conn){
		"garbage instead of handshake response": func(t *testing.T, c net.Conn) {
			readPacket(t, c)
			c.Write([]byte{0x05, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef, 0x00})
		},
		"truncated handshake response": func(t *testing.T, c net.Conn) {
			readPacket(t, c)
			writePacket(t, c, 1, []byte{0x00, 0x02})
		},
		"empty command packet": func(t *testing.T, c net.Conn) {
			login(t, c)
			c.Write([]byte{0, 0, 0, 0})
		},
		"truncated COM_STMT_EXECUTE": func(t *testing.T, c net.Conn) {
			login(t, c)
			writePacket(t, c, 0, []byte{0x17, 0x01})
			expectErrPacket(t, c)
		},
		"COM_STMT_EXECUTE with truncated values": func(t *testing.T, c net.Conn) {
			login(t, c)
			writePacket(t, c, 0, append([]byte{0x16}, "SELECT ?, ?"...))
			drainPrepareOK(t, c, 2)
			// stmt id 1, no cursor, 1 iteration, null bitmap, new-params flag,
			// types LONGLONG x2, then only 3 bytes of the first value.
			exec := []byte{0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x01, 0x08, 0x00, 0x08, 0x00, 1, 2, 3}
			writePacket(t, c, 0, exec)
			expectErrPacket(t, c)
		},
		"COM_STMT_EXECUTE of unknown statement": func(t *testing.T, c net.Conn) {
			login(t, c)
			writePacket(t, c, 0, []byte{0x17, 9, 9, 9, 9, 0, 1, 0, 0, 0})
			expectErrPacket(t, c)
		},
		"unknown command": func(t *testing.T, c net.Conn) {
			login(t, c)
			writePacket(t, c, 0, []byte{0xee, 1, 2, 3})
			expectErrPacket(t, c)
		},
		"length header larger than the data": func(t *testing.T, c net.Conn) {
			login(t, c)
			c.Write([]byte{0xff, 0xff, 0x00, 0x00, 0x03, 'S', 'E'})
		},
	}
	for name, attack := range attacks {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			attack(t, c)
			c.Close()
			db := ts.openDB(t, "root", "test", "")
			var one int
			if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("server unusable after %s: %v", name, err)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Raw protocol helpers for the malformed-packet tests.

func readPacket(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("read header: %v", err)
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("read body: %v", err)
	}
	return body
}

func writePacket(t *testing.T, c net.Conn, seq byte, payload []byte) {
	t.Helper()
	hdr := []byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}
	if _, err := c.Write(append(hdr, payload...)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// login authenticates as root with an empty password using
// mysql_native_password.
func login(t *testing.T, c net.Conn) {
	t.Helper()
	readPacket(t, c)
	const (
		clientLongPassword   = 0x1
		clientProtocol41     = 0x200
		clientSecureConn     = 0x8000
		clientPluginAuth     = 0x80000
		clientDeprecateEOFCp = 0x1000000
	)
	var resp []byte
	resp = binary.LittleEndian.AppendUint32(resp, clientLongPassword|clientProtocol41|clientSecureConn|clientPluginAuth|clientDeprecateEOFCp)
	resp = binary.LittleEndian.AppendUint32(resp, 1<<24)
	resp = append(resp, 33)
	resp = append(resp, make([]byte, 23)...)
	resp = append(resp, "root\x00"...)
	resp = append(resp, 0) // empty auth response
	resp = append(resp, "mysql_native_password\x00"...)
	writePacket(t, c, 1, resp)
	if ok := readPacket(t, c); ok[0] != 0x00 {
		t.Fatalf("login failed: %q", ok)
	}
}

func expectErrPacket(t *testing.T, c net.Conn) {
	t.Helper()
	if p := readPacket(t, c); p[0] != 0xff {
		t.Fatalf("expected an error packet, got %q", p)
	}
}

// drainPrepareOK reads a COM_STMT_PREPARE response (client without EOF
// packets): the OK, params column definitions and result column
// definitions.
func drainPrepareOK(t *testing.T, c net.Conn, params int) {
	t.Helper()
	ok := readPacket(t, c)
	if ok[0] != 0 {
		t.Fatalf("prepare failed: %q", ok)
	}
	cols := int(binary.LittleEndian.Uint16(ok[5:7]))
	nparams := int(binary.LittleEndian.Uint16(ok[7:9]))
	if nparams != params {
		t.Fatalf("prepare reported %d params, want %d", nparams, params)
	}
	for i := 0; i < cols+nparams; i++ {
		readPacket(t, c)
	}
}

func TestBindDateTimeParameters(t *testing.T) {
	cases := []struct {
		in       string
		declared string
		want     string
	}{
		{"2024-1-5", "date", "2024-01-05"},
		{"2024-1-5 3:4:5", "datetime", "2024-01-05 03:04:05"},
		{"2024-1-5 3:4:5.5000", "datetime", "2024-01-05 03:04:05.005000"},
		{" ", "datetime", "0000-00-00 00:00:00"},
	}
	for _, c := range cases {
		typ := sqltypes.Datetime
		if c.declared == "date" {
			typ = sqltypes.Date
		}
		d, err := bindDateTime(c.in, typ)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := string(d.AppendText(nil)); got != c.want {
			t.Errorf("%q as %s: got %q, want %q", c.in, c.declared, got, c.want)
		}
	}
	if _, err := bindDateTime("2024-x-01", sqltypes.Date); err == nil {
		t.Error("bad date accepted")
	}
	if d, err := bindDateTime("2024-1-5", sqltypes.Date); err != nil || d.Time().Type() != pmysql.TypeDate {
		t.Errorf("date parameter typed %v (%v)", d, err)
	}
}

func TestResetConnectionStartsAFreshSessionOnTheSameDatabase(t *testing.T) {
	ts := startDefaultServer(t)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	login(t, c)
	writePacket(t, c, 0, append([]byte{0x02}, "sbtest"...)) // COM_INIT_DB
	if p := readPacket(t, c); p[0] != 0x00 {
		t.Fatalf("COM_INIT_DB: %q", p)
	}
	writePacket(t, c, 0, append([]byte{0x03}, "BEGIN"...)) // COM_QUERY
	if p := readPacket(t, c); p[0] != 0x00 {
		t.Fatalf("BEGIN: %q", p)
	}
	writePacket(t, c, 0, []byte{0x1f}) // COM_RESET_CONNECTION
	if p := readPacket(t, c); p[0] != 0x00 {
		t.Fatalf("COM_RESET_CONNECTION: %q", p)
	}
	ts.backend.mu.Lock()
	defer ts.backend.mu.Unlock()
	if len(ts.backend.sessions) != 2 {
		t.Fatalf("%d sessions opened, want the original and a fresh one", len(ts.backend.sessions))
	}
	old, fresh := ts.backend.sessions[0], ts.backend.sessions[1]
	if !old.closed || old.inTxn {
		t.Fatalf("old session closed=%v inTxn=%v", old.closed, old.inTxn)
	}
	if fresh.closed || fresh.db != "sbtest" || fresh.inTxn {
		t.Fatalf("fresh session closed=%v db=%q inTxn=%v", fresh.closed, fresh.db, fresh.inTxn)
	}
}

func TestMetricsCountCommandsAndErrors(t *testing.T) {
	ts := startDefaultServer(t)
	db := ts.openDB(t, "root", "test", "")
	// The counters are the process's: a connection an earlier test left
	// behind can still be counted while this one measures. So a window
	// that saw anything but one failed query and one execute is measured
	// again; a miscount shows in every window.
	var errs, executes float64
	for attempt := 0; attempt < 3; attempt++ {
		before := metricValue(t, metricCommandErrors.WithLabelValues("query"))
		servedBefore := metricValue(t, metricCommands.WithLabelValues("execute"))
		if _, err := db.Exec("INSERT dup"); err == nil {
			t.Fatal("INSERT dup succeeded")
		}
		var v string
		if err := db.QueryRow("SELECT ?", 5).Scan(&v); err != nil {
			t.Fatal(err)
		}
		errs = metricValue(t, metricCommandErrors.WithLabelValues("query")) - before
		executes = metricValue(t, metricCommands.WithLabelValues("execute")) - servedBefore
		if errs == 1 && executes == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if errs != 1 {
		t.Errorf("query errors grew by %v, want 1", errs)
	}
	if executes != 1 {
		t.Errorf("executes grew by %v, want 1", executes)
	}
	if open := metricValue(t, metricConnectionsOpen); open < 1 {
		t.Errorf("connections_open = %v with a connection open", open)
	}
}

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

// TestCursorFetch opens a read-only cursor with COM_STMT_EXECUTE and reads
// it with COM_STMT_FETCH, as Connector/J does with useCursorFetch: vitess
// runs the handler on its own goroutine for this.
func TestCursorFetch(t *testing.T) {
	ts := startDefaultServer(t)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	login(t, c)
	writePacket(t, c, 0, append([]byte{0x16}, "SELECT * FROM big"...))
	drainPrepareOK(t, c, 0)
	writePacket(t, c, 0, []byte{0x17, 1, 0, 0, 0, 0x01 /* read-only cursor */, 1, 0, 0, 0})
	if p := readPacket(t, c); len(p) != 1 || p[0] != 1 {
		t.Fatalf("column count packet %q", p)
	}
	readPacket(t, c) // column definition
	end := readPacket(t, c)
	if end[0] != 0xfe || binary.LittleEndian.Uint16(end[3:5])&vmysql.ServerCursorExists == 0 {
		t.Fatalf("cursor not reported open: %q", end)
	}
	next := 0
	fetch := func(rows uint32) (status uint16) {
		t.Helper()
		req := []byte{0x1c, 1, 0, 0, 0}
		req = binary.LittleEndian.AppendUint32(req, rows)
		writePacket(t, c, 0, req)
		for {
			p := readPacket(t, c)
			if p[0] == 0xfe && len(p) < 9 {
				return binary.LittleEndian.Uint16(p[3:5])
			}
			// Binary row: header 0x00, 1-byte NULL bitmap, int64.
			if p[0] != 0 || len(p) != 10 {
				t.Fatalf("row packet %q", p)
			}
			if v := int(binary.LittleEndian.Uint64(p[2:])); v != next {
				t.Fatalf("row %d holds %d", next, v)
			}
			next++
		}
	}
	if st := fetch(10); next != 10 || st&vmysql.ServerCursorLastRowSent != 0 {
		t.Fatalf("first fetch: %d rows, status %#x", next, st)
	}
	if st := fetch(5000); next != 1000 || st&vmysql.ServerCursorLastRowSent == 0 {
		t.Fatalf("second fetch: %d rows, status %#x", next, st)
	}
	writePacket(t, c, 0, append([]byte{0x03}, "SELECT 1"...))
	if p := readPacket(t, c); len(p) != 1 || p[0] != 1 {
		t.Fatalf("query after the cursor: %q", p)
	}
}

func TestMaxConnectionsRefusesClientsBeyondTheLimit(t *testing.T) {
	ts := startServer(t, Config{AllowEmptyRootPassword: true, MaxConnections: 1, ConnWaitTimeout: 200 * time.Millisecond})
	first := ts.openDB(t, "root", "test", "")
	held, err := first.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := held.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ts.openDB(t, "root", "test", "").Ping(); err == nil {
		t.Fatal("a second connection was served beyond MaxConnections=1")
	}
	held.Close()
	first.Close()
	waitFor(t, func() bool { return ts.backend.closedSessions() == 1 }, "first connection closed")
	if err := ts.openDB(t, "root", "test", "").Ping(); err != nil {
		t.Fatalf("connection after the first one left: %v", err)
	}
}

// TestLongDataParameter streams a parameter with COM_STMT_SEND_LONG_DATA
// before executing, as clients do for large BLOBs.
func TestLongDataParameter(t *testing.T) {
	ts := startDefaultServer(t)
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	login(t, c)
	writePacket(t, c, 0, append([]byte{0x16}, "SELECT ?"...))
	drainPrepareOK(t, c, 1)
	writePacket(t, c, 0, append([]byte{0x18, 1, 0, 0, 0, 0, 0}, "hel"...))
	writePacket(t, c, 0, append([]byte{0x18, 1, 0, 0, 0, 0, 0}, "lo"...))
	// Execute: no cursor, 1 iteration, NULL bitmap, types bound: BLOB.
	writePacket(t, c, 0, []byte{0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x01, 0xfc, 0x00})
	if p := readPacket(t, c); len(p) != 1 || p[0] != 1 {
		t.Fatalf("column count packet %q", p)
	}
	readPacket(t, c) // column definition
	row := readPacket(t, c)
	if want := "\x00\x00\x05hello"; string(row) != want {
		t.Fatalf("row %q, want %q", row, want)
	}
	if p := readPacket(t, c); p[0] != 0xfe {
		t.Fatalf("end of result %q", p)
	}
	got := ts.backend.lastParams()
	if len(got) != 1 || got[0].Kind() != types.KindBytes || string(got[0].Bytes()) != "hello" {
		t.Fatalf("long data reached the session as %v", got)
	}
}
