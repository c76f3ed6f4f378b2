package integration

import (
	"bytes"
	"database/sql"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestMysqldumpRoundTrip dumps a database with Debian's mariadb-client
// mysqldump (its default options, and --single-transaction), restores each
// dump into an empty database with the mysql client, and checks that every
// table and view reads back the same rows and the same definitions.
func TestMysqldumpRoundTrip(t *testing.T) {
	dump, err := exec.LookPath("mysqldump")
	if err != nil {
		t.Skip("mysqldump not installed (scripts/test.sh installs mariadb-client)")
	}
	client, err := exec.LookPath("mysql")
	if err != nil {
		t.Skip("mysql client not installed")
	}
	n := StartNode(t)
	admin := n.DB(t, "")
	mustExec(t, admin, "CREATE DATABASE shop")
	db := n.DB(t, "shop")
	mustExec(t, db,
		"CREATE TABLE products (id INT PRIMARY KEY, name VARCHAR(30) NOT NULL DEFAULT '' COMMENT 'shown to buyers', price DECIMAL(10,2), "+
			"qty BIGINT UNSIGNED, weight DOUBLE, added DATE, seen DATETIME(3), changed TIMESTAMP NULL, code VARBINARY(16), notes TEXT, "+
			"total DECIMAL(12,2) AS (price * qty) STORED, UNIQUE KEY uname (name), KEY kprice (price, added)) COMMENT='what we sell'",
		"CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, product INT NOT NULL, note CHAR(5), "+
			"CONSTRAINT fk_product FOREIGN KEY (product) REFERENCES products (id) ON DELETE CASCADE)",
		"CREATE TABLE tags (name VARCHAR(10), product INT, PRIMARY KEY (name, product))",
		"INSERT INTO products (id, name, price, qty, weight, added, seen, changed, code, notes) VALUES "+
			"(1, 'apple', 1.50, 10, 0.5, '2024-01-02', '2024-01-02 03:04:05.123', '2024-05-06 07:08:09', x'00ff10', 'it''s \"quoted\" \\\\ and\\nnew line'), "+
			"(2, 'pear', NULL, NULL, -1e300, NULL, NULL, NULL, '', ''), (3, 'plum ü', 2.25, 7, NULL, '1999-12-31', NULL, NULL, NULL, NULL)",
		"INSERT INTO orders (product, note) VALUES (1, 'a'), (2, 'b'), (1, NULL), (3, 'z')",
		"INSERT INTO tags VALUES ('fruit', 1), ('fruit', 2), ('red', 1)",
		"CREATE VIEW order_counts AS SELECT p.name, COUNT(*) AS n FROM products p JOIN orders o ON o.product = p.id GROUP BY p.name",
	)
	host, port, _ := net.SplitHostPort(n.SQLAddr)
	conn := []string{"-h", host, "-P", port, "-u", "root", "--protocol=tcp"}
	objects := []string{"products", "orders", "tags", "order_counts"}
	for i, mode := range [][]string{nil, {"--single-transaction"}} {
		target := fmt.Sprintf("restored%d", i)
		t.Run(strings.Join(append([]string{"default"}, mode...), " "), func(t *testing.T) {
			var out, stderr bytes.Buffer
			cmd := exec.Command(dump, append(append(append([]string{}, conn...), mode...), "shop")...)
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("mysqldump: %v\n%s", err, stderr.String())
			}
			mustExec(t, admin, "CREATE DATABASE "+target)
			restore := exec.Command(client, append(append([]string{}, conn...), target)...)
			restore.Stdin = bytes.NewReader(out.Bytes())
			if msg, err := restore.CombinedOutput(); err != nil {
				t.Fatalf("restore: %v\n%s\ndump:\n%s", err, msg, out.String())
			}
			to := n.DB(t, target)
			for _, obj := range objects {
				want := tableRows(t, db, obj)
				got := tableRows(t, to, obj)
				if want != got {
					t.Errorf("%s after the round trip:\n%s\nwant:\n%s", obj, got, want)
				}
				if want == "" {
					t.Errorf("%s read no rows", obj)
				}
			}
			for _, tbl := range objects[:3] {
				if a, b := createTable(t, db, tbl), createTable(t, to, tbl); a != b {
					t.Errorf("SHOW CREATE TABLE %s differs:\n%s\nwant:\n%s", tbl, b, a)
				}
			}
			// The foreign key still acts.
			mustExec(t, to, "DELETE FROM products WHERE id = 1")
			var left int
			if err := to.QueryRow("SELECT COUNT(*) FROM orders WHERE product = 1").Scan(&left); err != nil || left != 0 {
				t.Errorf("cascade after restore: %d orders of product 1 left (%v)", left, err)
			}
		})
	}
}

// tableRows renders every row of a table or view, ordered, one per line.
func tableRows(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	rows, err := db.Query("SELECT * FROM " + name + " ORDER BY 1, 2")
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var sb strings.Builder
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if i > 0 {
				sb.WriteByte('|')
			}
			if v == nil {
				sb.WriteString("NULL")
			} else {
				fmt.Fprintf(&sb, "%q", v)
			}
		}
		sb.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func createTable(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var tbl, def string
	if err := db.QueryRow("SHOW CREATE TABLE "+name).Scan(&tbl, &def); err != nil {
		t.Fatalf("show create table %s: %v", name, err)
	}
	return def
}
