package privilege

import "strings"

// Set is the effective privileges of a session: its account's and its
// active roles', merged. Keys are lower case.
type Set struct {
	Global    Priv
	DBs       map[string]Priv
	Tables    map[string]Priv
	Columns   map[string]Priv
	colTables map[string]Priv // TableKey -> union of the table's column privileges
}

// Table returns the privileges held on a whole table (from the global,
// database and table levels).
func (s *Set) Table(db, table string) Priv {
	if s.Global == All|GrantOpt {
		return s.Global
	}
	return s.Global | s.DBs[strings.ToLower(db)] | s.Tables[TableKey(db, table)]
}

// DB returns the privileges held on a whole database.
func (s *Set) DB(db string) Priv { return s.Global | s.DBs[strings.ToLower(db)] }

// Column returns the privileges held on one column from every level.
func (s *Set) Column(db, table, col string) Priv {
	return s.Table(db, table) | s.Columns[ColumnKey(db, table, col)]
}

// AnyColumn returns the privileges held on at least one column of table.
func (s *Set) AnyColumn(db, table string) Priv { return s.colTables[TableKey(db, table)] }

// AnyInDB reports whether s holds any privilege on db or on something in
// it (what USE and SHOW DATABASES ask).
func (s *Set) AnyInDB(db string) bool {
	if s.Global&(DBLevel|GrantOpt) != 0 || s.DBs[strings.ToLower(db)] != 0 {
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
