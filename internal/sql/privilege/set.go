package privilege

import (
	"sort"
	"strings"
)

// Set is the effective privileges of a session: its account's and its
// active roles', merged. Keys are lower case.
//
// Database names in DBs may be LIKE patterns, as in MySQL: GRANT ... ON
// `app\_%`.* holds for every database whose name starts with "app_" (an
// unescaped _ or % is a wildcard, \_ and \% are literal). A database gets
// the privileges of the entry named exactly as it is, if there is one, or
// else of the most specific pattern that matches it (the longest literal
// prefix first); patterns are not added together, as in MySQL's db table.
type Set struct {
	Global     Priv
	DBs        map[string]Priv
	Tables     map[string]Priv
	Columns    map[string]Priv
	colTables  map[string]Priv // TableKey -> union of the table's column privileges
	dbPatterns []dbPattern     // the keys of DBs that are patterns, most specific first
}

type dbPattern struct {
	pattern string
	p       Priv
}

// IsDBPattern reports whether a database name of a grant is a LIKE
// pattern (has an unescaped % or _, or an escape).
func IsDBPattern(db string) bool { return strings.ContainsAny(db, "%_\\") }

// DBPatternMatches reports whether the database name of a grant (a LIKE
// pattern, see Set) covers db.
func DBPatternMatches(pattern, db string) bool {
	return like(strings.ToLower(pattern), strings.ToLower(db), true)
}

// sortPatterns collects the patterns of s.DBs, most specific first.
func (s *Set) sortPatterns() {
	s.dbPatterns = s.dbPatterns[:0]
	for k, v := range s.DBs {
		if IsDBPattern(k) {
			s.dbPatterns = append(s.dbPatterns, dbPattern{k, v})
		}
	}
	sort.Slice(s.dbPatterns, func(i, j int) bool {
		a, b := s.dbPatterns[i].pattern, s.dbPatterns[j].pattern
		if wa, wb := wildPos(a, true), wildPos(b, true); wa != wb {
			return wa > wb
		}
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return a < b
	})
}

// DBGrant returns what s holds at the database level on everything a
// grant on pattern covers (what GRANT ... ON pattern.* needs of its
// grantor): the entry named exactly pattern, or else the most specific
// pattern of s that covers every name pattern matches.
func (s *Set) DBGrant(pattern string) Priv {
	k := strings.ToLower(pattern)
	if p, ok := s.DBs[k]; ok {
		return s.Global | p
	}
	target := tokens(k)
	for _, e := range s.dbPatterns {
		if covers(tokens(e.pattern), target) {
			return s.Global | e.p
		}
	}
	return s.Global
}

// A token of a LIKE pattern: a literal byte, or wildAny (%) or wildOne (_).
const (
	wildAny = -1
	wildOne = -2
)

func tokens(p string) []int {
	out := make([]int, 0, len(p))
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '%':
			out = append(out, wildAny)
		case '_':
			out = append(out, wildOne)
		case '\\':
			if i+1 < len(p) {
				i++
			}
			out = append(out, int(p[i]))
		default:
			out = append(out, int(c))
		}
	}
	return out
}

// covers reports whether pattern g matches every string pattern t does:
// g's % takes any run of t's tokens, g's _ any one token but %, g's
// literals only the same literal.
func covers(g, t []int) bool {
	if len(g) == 0 {
		return len(t) == 0
	}
	switch g[0] {
	case wildAny:
		for i := 0; i <= len(t); i++ {
			if covers(g[1:], t[i:]) {
				return true
			}
		}
		return false
	case wildOne:
		return len(t) > 0 && t[0] != wildAny && covers(g[1:], t[1:])
	}
	return len(t) > 0 && t[0] == g[0] && covers(g[1:], t[1:])
}

// dbLevel is what s holds at the database level on db.
func (s *Set) dbLevel(db string) Priv {
	k := strings.ToLower(db)
	if p, ok := s.DBs[k]; ok {
		return p
	}
	for _, e := range s.dbPatterns {
		if like(e.pattern, k, true) {
			return e.p
		}
	}
	return 0
}

// Table returns the privileges held on a whole table (from the global,
// database and table levels).
func (s *Set) Table(db, table string) Priv {
	if s.Global == All|GrantOpt {
		return s.Global
	}
	return s.Global | s.dbLevel(db) | s.Tables[TableKey(db, table)]
}

// DB returns the privileges held on a whole database.
func (s *Set) DB(db string) Priv { return s.Global | s.dbLevel(db) }

// Column returns the privileges held on one column from every level.
func (s *Set) Column(db, table, col string) Priv {
	return s.Table(db, table) | s.Columns[ColumnKey(db, table, col)]
}

// AnyColumn returns the privileges held on at least one column of table.
func (s *Set) AnyColumn(db, table string) Priv { return s.colTables[TableKey(db, table)] }

// AnyInDB reports whether s holds any privilege on db or on something in
// it (what USE and SHOW DATABASES ask).
func (s *Set) AnyInDB(db string) bool {
	if s.Global&(DBLevel|GrantOpt) != 0 || s.dbLevel(db) != 0 {
		return true
	}
	prefix := strings.ToLower(db) + "\x00"
	for k, v := range s.Tables {
		if v != 0 && strings.HasPrefix(k, prefix) {
			return true
		}
	}
	for k, v := range s.colTables {
		if v != 0 && strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// AnyOnTable reports whether s holds any privilege on a table or one of
// its columns (what SHOW TABLES and SHOW CREATE TABLE ask).
func (s *Set) AnyOnTable(db, table string) bool {
	return s.Table(db, table)&(TableLevel|GrantOpt) != 0 || s.AnyColumn(db, table) != 0
}
