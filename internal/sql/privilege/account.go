package privilege

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
// address or a Unix socket) matches the account host pattern. Strata does
// not resolve client addresses to names (as MySQL with skip_name_resolve),
// so apart from 'localhost' a pattern matches the client's IP address:
//
//	'%'                     any client
//	'localhost'             a loopback address or a Unix socket
//	'10.0.0.7', '::1'       that address
//	'10.0.%', '10.0.0._'    a LIKE pattern over the address text
//	'10.0.0.0/255.255.255.0' the addresses a with a & mask == 10.0.0.0
//	'10.0.0.0/24', 'fd00::/8' the same in CIDR notation (IPv6 too)
func hostMatches(pattern, ip string, loopback bool) bool {
	if a := net.ParseIP(ip); a != nil {
		if v4 := a.To4(); v4 != nil {
			ip = v4.String() // ::ffff:10.0.0.7 is 10.0.0.7
		}
	}
	switch {
	case pattern == "%":
		return true
	case pattern == "localhost":
		return loopback
	case strings.Contains(pattern, "/"):
		n := parseNetmask(pattern)
		return n != nil && n.Contains(net.ParseIP(ip))
	case strings.ContainsAny(pattern, "%_"):
		return like(pattern, strings.ToLower(ip), false)
	}
	if strings.EqualFold(pattern, ip) {
		return true
	}
	if p, h := net.ParseIP(pattern), net.ParseIP(ip); p != nil && h != nil {
		return p.Equal(h)
	}
	return false
}

// parseNetmask parses a host given as ip/netmask or ip/prefix-length, or
// returns nil. As in MySQL, an address with bits outside the mask
// ('10.0.0.1/255.255.255.0') is kept as written and matches no client.
func parseNetmask(host string) *net.IPNet {
	addr, mask, ok := strings.Cut(host, "/")
	ip := net.ParseIP(addr)
	if !ok || ip == nil {
		return nil
	}
	var m net.IPMask
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	if bits, err := strconv.Atoi(mask); err == nil {
		if m = net.CIDRMask(bits, len(ip)*8); m == nil {
			return nil
		}
	} else {
		mip := net.ParseIP(mask).To4()
		if mip == nil || len(ip) != net.IPv4len {
			return nil
		}
		if m = net.IPMask(mip); !contiguous(m) {
			return nil
		}
	}
	if !ip.Mask(m).Equal(ip) {
		return nil
	}
	return &net.IPNet{IP: ip, Mask: m}
}

// contiguous reports whether a netmask is ones followed by zeros.
func contiguous(m net.IPMask) bool {
	ones, bits := m.Size()
	return bits != 0 || ones != 0
}

// like matches s against a SQL LIKE pattern (% any run, _ one
// character); with escapes, a backslash makes the next character literal.
func like(pattern, s string, escapes bool) bool {
	for len(pattern) > 0 {
		switch c := pattern[0]; {
		case c == '%':
			for i := 0; i <= len(s); i++ {
				if like(pattern[1:], s[i:], escapes) {
					return true
				}
			}
			return false
		case c == '_':
			if s == "" {
				return false
			}
			_, n := utf8.DecodeRuneInString(s)
			pattern, s = pattern[1:], s[n:]
		default:
			if c == '\\' && escapes && len(pattern) > 1 {
				pattern = pattern[1:]
				c = pattern[0]
			}
			if s == "" || c != s[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}

// specificity orders host patterns as MySQL sorts its account table:
// literal hosts first (an address before an address with a netmask,
// longer masks first), then patterns by the length of their literal
// prefix, '%' last. MySQL leaves the order of equally specific hosts
// unspecified; Strata then sorts by the host text.
func specificity(host string) int {
	if strings.Contains(host, "/") {
		if n := parseNetmask(host); n != nil {
			ones, _ := n.Mask.Size()
			return 1<<20 - 256 + ones
		}
		return 1 << 19
	}
	return wildPos(host, false)
}

// wildPos is the position of the first wildcard of a LIKE pattern (with
// escapes: not counting escaped ones), or 1<<20 for none.
func wildPos(p string, escapes bool) int {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%', '_':
			return i
		case '\\':
			if escapes {
				i++
			}
		}
	}
	return 1 << 20
}
