package privilege

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
)

// Identity names an account: 'user'@'host', where host may be a pattern.
type Identity struct {
	User string `json:"user"`
	Host string `json:"host"`
}

// String is the identity as MySQL quotes it in messages: 'u'@'h'.
func (id Identity) String() string { return fmt.Sprintf("'%s'@'%s'", id.User, id.Host) }

// Quoted is the identity as SHOW GRANTS prints it: `u`@`h`.
func (id Identity) Quoted() string {
	return "`" + strings.ReplaceAll(id.User, "`", "``") + "`@`" + strings.ReplaceAll(id.Host, "`", "``") + "`"
}

// NormalHost is the host part as stored: lower case, '%' when empty.
func NormalHost(h string) string {
	if h == "" {
		return "%"
	}
	return strings.ToLower(h)
}

// Account is a user or a role, with the privileges granted to it
// directly. Map keys are lower case: DBs by database, Tables by
// TableKey, Columns by ColumnKey.
type Account struct {
	Identity
	// Plugin is caching_sha2_password or mysql_native_password; Auth is
	// the stored hash of the password in the plugin's format
	// (password.go), empty for no password.
	Plugin string `json:"plugin,omitempty"`
	Auth   string `json:"auth,omitempty"`
	// Locked refuses every login (ACCOUNT LOCK; roles are created locked).
	Locked bool `json:"locked,omitempty"`
	Role   bool `json:"role,omitempty"`
	// RequireSSL / RequireX509: REQUIRE SSL refuses logins without TLS,
	// REQUIRE X509 also without a client certificate the server's CA
	// signed.
	RequireSSL  bool `json:"require_ssl,omitempty"`
	RequireX509 bool `json:"require_x509,omitempty"`
	// FailedLoginAttempts consecutive wrong passwords lock the account
	// for PasswordLockDays days (-1: until unlocked); 0 disables.
	FailedLoginAttempts int64 `json:"failed_login_attempts,omitempty"`
	PasswordLockDays    int64 `json:"password_lock_days,omitempty"`
	// Unlocks counts ACCOUNT UNLOCKs: each ends a lock that failed
	// logins started (the count of failures is kept per node).
	Unlocks int64 `json:"unlocks,omitempty"`

	Global  Priv            `json:"global,omitempty"`
	DBs     map[string]Priv `json:"dbs,omitempty"`
	Tables  map[string]Priv `json:"tables,omitempty"`
	Columns map[string]Priv `json:"columns,omitempty"`
	// Roles are the roles granted to the account; DefaultRoles are those
	// active at login.
	Roles        []Identity `json:"roles,omitempty"`
	DefaultRoles []Identity `json:"default_roles,omitempty"`
}

// TableKey is the key of a table in Account.Tables and Set.Tables.
func TableKey(db, table string) string { return strings.ToLower(db) + "\x00" + strings.ToLower(table) }

// ColumnKey is the key of a column in Account.Columns.
func ColumnKey(db, table, col string) string {
	return strings.ToLower(db) + "\x00" + strings.ToLower(table) + "\x00" + strings.ToLower(col)
}

// SplitKey splits a TableKey or ColumnKey.
func SplitKey(k string) []string { return strings.Split(k, "\x00") }

// Clone returns a deep copy of a, for a change to be stored.
func (a *Account) Clone() *Account {
	c := *a
	c.DBs = maps.Clone(a.DBs)
	c.Tables = maps.Clone(a.Tables)
	c.Columns = maps.Clone(a.Columns)
	c.Roles = slices.Clone(a.Roles)
	c.DefaultRoles = slices.Clone(a.DefaultRoles)
	return &c
}

// HasRole reports whether role is granted to a.
func (a *Account) HasRole(role Identity) bool { return slices.Contains(a.Roles, role) }

// grant adds p at a level: db "" is global, table "" the database, col ""
// the table.
func (a *Account) Grant(db, table, col string, p Priv) {
	switch {
	case db == "":
		a.Global |= p
	case table == "":
		if a.DBs == nil {
			a.DBs = map[string]Priv{}
		}
		a.DBs[strings.ToLower(db)] |= p
	case col == "":
		if a.Tables == nil {
			a.Tables = map[string]Priv{}
		}
		a.Tables[TableKey(db, table)] |= p
	default:
		if a.Columns == nil {
			a.Columns = map[string]Priv{}
		}
		a.Columns[ColumnKey(db, table, col)] |= p
	}
}

// Revoke removes p at a level (see Grant) and reports whether the
// account held any of it there.
func (a *Account) Revoke(db, table, col string, p Priv) bool {
	var m map[string]Priv
	var k string
	switch {
	case db == "":
		had := a.Global&p != 0
		a.Global &^= p
		return had
	case table == "":
		m, k = a.DBs, strings.ToLower(db)
	case col == "":
		m, k = a.Tables, TableKey(db, table)
	default:
		m, k = a.Columns, ColumnKey(db, table, col)
	}
	v, ok := m[k]
	if !ok {
		return false
	}
	had := v&p != 0
	if v &^= p; v == 0 {
		delete(m, k)
	} else {
		m[k] = v
	}
	return had
}

// Level returns what a holds at a level (see Grant).
func (a *Account) Level(db, table, col string) Priv {
	switch {
	case db == "":
		return a.Global
	case table == "":
		return a.DBs[strings.ToLower(db)]
	case col == "":
		return a.Tables[TableKey(db, table)]
	}
	return a.Columns[ColumnKey(db, table, col)]
}

// hostMatches reports whether a login from ip (loopback: from a loopback
// address or a Unix socket) matches the account host pattern.
func hostMatches(pattern, ip string, loopback bool) bool {
	switch {
	case pattern == "%":
		return true
	case pattern == "localhost":
		return loopback
	case strings.ContainsAny(pattern, "%_"):
		return like(pattern, strings.ToLower(ip))
	}
	if strings.EqualFold(pattern, ip) {
		return true
	}
	if p, h := net.ParseIP(pattern), net.ParseIP(ip); p != nil && h != nil {
		return p.Equal(h)
	}
	return false
}

// like matches s against a SQL LIKE pattern (% any run, _ one character).
func like(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '%':
			for i := 0; i <= len(s); i++ {
				if like(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '_':
			if s == "" {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		default:
			if s == "" || pattern[0] != s[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}

// specificity orders host patterns as MySQL sorts its account table:
// literal hosts first, then patterns by the length of their literal
// prefix, '%' last.
func specificity(host string) int {
	i := strings.IndexAny(host, "%_")
	if i < 0 {
		return 1 << 20
	}
	return i
}
