package integration

import (
	"database/sql"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestLoadDataLocal loads a tab-separated file the client sends (go-sql-
// driver's reader handler) and a CSV with enclosed fields, escapes, NULLs
// and a header line, into tables with a unique key: duplicates are
// skipped as MySQL's LOCAL loads skip them.
func TestLoadDataLocal(t *testing.T) {
	n := StartNode(t)
	admin := n.DB(t, "")
	mustExec(t, admin, "CREATE DATABASE ld")
	db := n.DB(t, "ld")
	mustExec(t, db, "CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(20), born DATE, score DECIMAL(5,2))")
	var sb strings.Builder
	const rows = 5000
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&sb, "%d\tname%d\t2000-01-%02d\t%d.5\n", i, i, i%28+1, i%100)
	}
	sb.WriteString("1\tduplicate\t2000-01-01\t1\n")
	mysql.RegisterReaderHandler("people", func() io.Reader { return strings.NewReader(sb.String()) })
	defer mysql.DeregisterReaderHandler("people")
	res, err := db.Exec("LOAD DATA LOCAL INFILE 'Reader::people' INTO TABLE people")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != rows {
		t.Fatalf("affected %d rows, want %d", n, rows)
	}
	var cnt int
	var name string
	if err := db.QueryRow("SELECT COUNT(*), MAX(name) FROM people WHERE score >= 50").Scan(&cnt, &name); err != nil {
		t.Fatal(err)
	}
	if cnt != 2500 || name != "name999" {
		t.Fatalf("count %d max %q", cnt, name)
	}
	if err := db.QueryRow("SELECT name FROM people WHERE id = 1").Scan(&name); err != nil || name != "name1" {
		t.Fatalf("row 1: %q %v (the duplicate line must be skipped)", name, err)
	}

	mustExec(t, db, "CREATE TABLE notes (id INT PRIMARY KEY AUTO_INCREMENT, title VARCHAR(40), body TEXT, n INT)")
	csv := "title,body,n\r\n\"Hello, world\",\"say \"\"hi\"\"\",1\r\nplain,line\\nbreak,\\N\r\n\"quoted NULL\",NULL,3\r\n"
	mysql.RegisterReaderHandler("notes", func() io.Reader { return strings.NewReader(csv) })
	defer mysql.DeregisterReaderHandler("notes")
	if _, err := db.Exec(`LOAD DATA LOCAL INFILE 'Reader::notes' INTO TABLE notes FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '"' LINES TERMINATED BY '\r\n' IGNORE 1 LINES (title, body, n)`); err != nil {
		t.Fatal(err)
	}
	got := queryStrings(t, db, "SELECT CONCAT_WS('|', id, title, IFNULL(body, 'NULL'), IFNULL(n, 'NULL')) FROM notes ORDER BY id")
	want := []string{"1|Hello, world|say \"hi\"|1", "2|plain|line\nbreak|NULL", "3|quoted NULL|NULL|3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("notes:\n%q\nwant\n%q", got, want)
	}

	if _, err := db.Exec("LOAD DATA INFILE '/etc/passwd' INTO TABLE notes"); err == nil || !strings.Contains(err.Error(), "1290") {
		t.Fatalf("server-side LOAD DATA: %v, want 1290", err)
	}
}

func queryStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestClientFoundRows: a client connecting with CLIENT_FOUND_ROWS sees the
// rows an UPDATE matched; others see the rows it changed.
func TestClientFoundRows(t *testing.T) {
	n := StartNode(t)
	admin := n.DB(t, "")
	mustExec(t, admin, "CREATE DATABASE fr", "CREATE TABLE fr.t (id INT PRIMARY KEY, v INT)", "INSERT INTO fr.t VALUES (1, 5), (2, 5)")
	for _, found := range []bool{false, true} {
		cfg, err := mysql.ParseDSN(n.DSN("fr"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientFoundRows = found
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		res, err := db.Exec("UPDATE t SET v = 5 WHERE id IN (1, 2)")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := res.RowsAffected()
		want := int64(0)
		if found {
			want = 2
		}
		if got != want {
			t.Errorf("clientFoundRows=%v: %d affected rows, want %d", found, got, want)
		}
		db.Close()
	}
}

// TestTypesOverTheWire reads TIME, JSON, ENUM, SET, BIT and a collated
// column through both protocols (text, and binary for prepared
// statements) and checks a case-insensitive unique key.
func TestTypesOverTheWire(t *testing.T) {
	n := StartNode(t)
	admin := n.DB(t, "")
	mustExec(t, admin, "CREATE DATABASE ty")
	db := n.DB(t, "ty")
	mustExec(t, db,
		"CREATE TABLE t (id INT PRIMARY KEY, d TIME(3), j JSON, e ENUM('a','b'), s SET('x','y'), b BIT(8), email VARCHAR(40), UNIQUE KEY (email))",
		"INSERT INTO t VALUES (1, '-26:03:04.5', '{\"b\": [1, 2], \"a\": null}', 'b', 'y,x', b'101', 'Ann@Example.com')")
	for _, prepared := range []bool{false, true} {
		q := "SELECT d, j, e, s, b, email FROM t WHERE email = 'ann@example.COM'"
		var args []any
		if prepared {
			q = "SELECT d, j, e, s, b, email FROM t WHERE email = ?"
			args = []any{"ann@example.COM"}
		}
		var d, j, e, s, email string
		var b []byte
		if err := db.QueryRow(q, args...).Scan(&d, &j, &e, &s, &b, &email); err != nil {
			t.Fatalf("prepared=%v: %v", prepared, err)
		}
		if d != "-26:03:04.500" || j != `{"a": null, "b": [1, 2]}` || e != "b" || s != "x,y" || len(b) != 1 || b[0] != 5 || email != "Ann@Example.com" {
			t.Errorf("prepared=%v: %q %q %q %q %v %q", prepared, d, j, e, s, b, email)
		}
	}
	if _, err := db.Exec("INSERT INTO t (id, email) VALUES (2, 'ANN@example.com')"); err == nil || !strings.Contains(err.Error(), "1062") {
		t.Fatalf("case-insensitive duplicate: %v, want 1062", err)
	}
	// A TIME column written through a prepared statement's parameter.
	if _, err := db.Exec("INSERT INTO t (id, d) VALUES (?, ?)", 3, "1:30"); err != nil {
		t.Fatal(err)
	}
	var d string
	if err := db.QueryRow("SELECT d FROM t WHERE id = 3").Scan(&d); err != nil || d != "01:30:00.000" {
		t.Fatalf("TIME parameter: %q %v", d, err)
	}
}

// TestExplicitAutoIncrementInsertID: an INSERT giving an AUTO_INCREMENT
// column its value reports that value as the insert id (Django reads the
// new row's primary key from it), and LAST_INSERT_ID() keeps the last
// generated one.
func TestExplicitAutoIncrementInsertID(t *testing.T) {
	n := StartNode(t)
	admin := n.DB(t, "")
	mustExec(t, admin, "CREATE DATABASE ai", "CREATE TABLE ai.t (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
	db := n.DB(t, "ai")
	db.SetMaxOpenConns(1)
	res, err := db.Exec("INSERT INTO t (v) VALUES (1)")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 1 {
		t.Fatalf("generated id %d", id)
	}
	res, err = db.Exec("INSERT INTO t (id, v) VALUES (40, 2)")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := res.LastInsertId(); id != 40 {
		t.Fatalf("explicit id reported as %d, want 40", id)
	}
	var last int
	if err := db.QueryRow("SELECT LAST_INSERT_ID()").Scan(&last); err != nil || last != 1 {
		t.Fatalf("LAST_INSERT_ID() = %d, %v; want 1", last, err)
	}
}
