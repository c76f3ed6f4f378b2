package integration

import (
	"context"
	"database/sql"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// dsnFrom is a plaintext DSN for user that connects from the local
// address src (a loopback address such as 127.0.0.2), so the server sees
// the client at src.
func (n *Node) dsnFrom(user, password, db, src string) string {
	cfg, err := mysql.ParseDSN(n.DSNAs(user, password, db))
	if err != nil {
		panic(err)
	}
	cfg.TLSConfig = "false"
	cfg.Net = registerSourceDialer(src)
	return cfg.FormatDSN()
}

var sourceDialers sync.Map

// registerSourceDialer registers (once) a driver network that dials TCP
// from src, and returns its name.
func registerSourceDialer(src string) string {
	name := "tcp-from-" + src
	if _, loaded := sourceDialers.LoadOrStore(name, true); !loaded {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		})
	}
	return name
}

// TestRestrictedUserSchema: a user with a few grants sees, over the wire,
// only the databases, tables and columns it holds privileges on, in SHOW
// and in INFORMATION_SCHEMA, and is refused the rest with MySQL's codes.
func TestRestrictedUserSchema(t *testing.T) {
	n := StartNode(t)
	root := n.DB(t, "")
	for _, q := range []string{
		"CREATE DATABASE shop", "CREATE DATABASE hr", "CREATE DATABASE secret",
		"CREATE TABLE shop.orders (id INT PRIMARY KEY, total INT)",
		"CREATE TABLE shop.audit (id INT PRIMARY KEY)",
		"CREATE TABLE hr.people (id INT PRIMARY KEY, name VARCHAR(20), salary INT)",
		"CREATE TABLE secret.keys (id INT PRIMARY KEY)",
		"CREATE DATABASE tenant_1", "CREATE DATABASE tenant_2", "CREATE DATABASE tenantx",
		"CREATE USER clerk IDENTIFIED BY 'clerk-pw'",
		"GRANT SELECT, INSERT ON shop.orders TO clerk",
		"GRANT SELECT (id, name) ON hr.people TO clerk",
		"GRANT SELECT ON `tenant\\_%`.* TO clerk",
	} {
		mustExec(t, root, q)
	}
	db, err := sql.Open("mysql", n.dsnTLS("clerk", "clerk-pw", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	check := func(q string, want ...string) {
		t.Helper()
		if got := queryStrings(t, db, q); !slices.Equal(got, want) {
			t.Fatalf("%s:\n got %q\nwant %q", q, got, want)
		}
	}
	check("SHOW DATABASES", "information_schema", "hr", "shop", "tenant_1", "tenant_2")
	check("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA ORDER BY 1", "hr", "information_schema", "shop", "tenant_1", "tenant_2")
	check("SHOW TABLES FROM shop", "orders")
	check("SELECT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA <> 'information_schema' ORDER BY 1",
		"hr.people", "shop.orders")
	check("SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME, ':', PRIVILEGES) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA IN ('hr', 'shop') ORDER BY TABLE_NAME, ORDINAL_POSITION",
		"orders.id:select,insert", "orders.total:select,insert", "people.id:select", "people.name:select")
	check("SELECT CONCAT(TABLE_NAME, '.', INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA IN ('hr', 'shop', 'secret') ORDER BY 1",
		"orders.PRIMARY", "people.PRIMARY")
	check("SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'secret'", "0")

	_, err = db.Exec("SHOW TABLES FROM secret")
	expectError(t, err, 1044, "42000")
	_, err = db.Exec("USE secret")
	expectError(t, err, 1044, "42000")
	_, err = db.Exec("SELECT * FROM shop.audit")
	expectError(t, err, 1142, "42000")
	_, err = db.Exec("SELECT salary FROM hr.people")
	expectError(t, err, 1143, "42000")
	_, err = db.Exec("CREATE DATABASE tenantz")
	expectError(t, err, 1044, "42000")
	_, err = db.Exec("SET GLOBAL max_connections = 10")
	expectError(t, err, 1227, "42000")
	// Region bounds are row keys: REGIONS needs PROCESS, SHOW TABLE ...
	// REGIONS SELECT on the table.
	_, err = db.Exec("SELECT * FROM information_schema.REGIONS")
	expectError(t, err, 1227, "42000")
	_, err = db.Exec("SHOW TABLE secret.keys REGIONS")
	expectError(t, err, 1142, "42000")
	if _, err := db.Exec("SHOW TABLE shop.orders REGIONS"); err != nil {
		t.Fatalf("SHOW TABLE shop.orders REGIONS: %v", err)
	}

	// A grant shows on the clerk's open connection at once.
	mustExec(t, root, "GRANT SELECT ON secret.keys TO clerk")
	check("SHOW TABLES FROM secret", "keys")
}

// TestAccountHosts: the server matches a login to the most specific
// account of its user for the client's address, with that account's
// password and privileges. Clients connect from several loopback
// addresses.
func TestAccountHosts(t *testing.T) {
	n := StartNode(t)
	root := n.DB(t, "")
	for _, q := range []string{
		"CREATE USER 'h'@'127.0.0.2' IDENTIFIED BY 'literal'",
		"CREATE USER 'h'@'127.0.0.0/255.255.255.0' IDENTIFIED BY 'netmask'",
		"CREATE USER 'h'@'127.0.%' IDENTIFIED BY 'pattern'",
		"CREATE USER 'h'@'%' IDENTIFIED BY 'any'",
		"CREATE DATABASE only_literal",
		"GRANT SELECT ON only_literal.* TO 'h'@'127.0.0.2'",
	} {
		mustExec(t, root, q)
	}
	for _, c := range []struct{ src, pw, account string }{
		{"127.0.0.2", "literal", "h@127.0.0.2"},
		{"127.0.0.3", "netmask", "h@127.0.0.0/255.255.255.0"},
		{"127.0.1.3", "pattern", "h@127.0.%"},
		{"127.1.0.1", "any", "h@%"},
	} {
		who, err := login(n.dsnFrom("h", c.pw, "", c.src))
		if err != nil || who != c.account {
			t.Fatalf("login from %s: %q, %v; want %s", c.src, who, err, c.account)
		}
		// Another account's password does not open this one.
		_, err = login(n.dsnFrom("h", "any", "", c.src))
		if c.pw != "any" {
			expectError(t, err, 1045, "28000")
		}
	}
	if _, err := login(n.dsnFrom("h", "literal", "only_literal", "127.0.0.2")); err != nil {
		t.Fatalf("h@127.0.0.2 into its database: %v", err)
	}
	_, err := login(n.dsnFrom("h", "netmask", "only_literal", "127.0.0.3"))
	expectError(t, err, 1044, "42000")
}
