package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dolthub/sqllogictest/go/logictest"
	"github.com/go-sql-driver/mysql"
)

// serverHarness is a logictest.Harness for any MySQL-protocol server. Unlike
// the library's own mysql harness, which empties one shared database, it gives
// every test file a database of its own (created by Init, dropped by
// dropDatabase), so a file can never see what an earlier file left behind.
type serverHarness struct {
	cfg     mysql.Config
	admin   *sql.DB // no default database; creates and drops the per-file ones
	db      *sql.DB // connected to the current file's database
	dbName  string
	prefix  string
	seq     int
	timeout time.Duration
}

var _ logictest.Harness = (*serverHarness)(nil)

// newServerHarness connects to addr as user. Databases it creates are named
// <prefix>_<pid>_<n>, so concurrent runs against one server do not collide.
func newServerHarness(addr, user, password, prefix string, timeout time.Duration) (*serverHarness, error) {
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = addr
	cfg.User = user
	cfg.Passwd = password
	cfg.Timeout = 10 * time.Second
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("connecting to %s as %s: %w", addr, user, err)
	}
	return &serverHarness{cfg: *cfg, admin: admin, prefix: prefix, timeout: timeout}, nil
}

// EngineStr selects the "onlyif mysql" records and skips the "skipif mysql" ones.
func (h *serverHarness) EngineStr() string { return "mysql" }

// Init is called by the logictest runner before each file: it drops the previous
// file's database and creates and connects to a new, empty one.
func (h *serverHarness) Init() error {
	if err := h.dropDatabase(); err != nil {
		return err
	}
	h.seq++
	name := fmt.Sprintf("%s_%d_%d", h.prefix, pid, h.seq)
	if _, err := h.admin.Exec("CREATE DATABASE " + name); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	cfg := h.cfg
	cfg.DBName = name
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	h.db, h.dbName = db, name
	return nil
}

// dropDatabase removes the current file's database, if any.
func (h *serverHarness) dropDatabase() error {
	if h.db == nil {
		return nil
	}
	h.db.Close()
	h.db = nil
	if _, err := h.admin.Exec("DROP DATABASE IF EXISTS " + h.dbName); err != nil {
		return fmt.Errorf("dropping database %s: %w", h.dbName, err)
	}
	return nil
}

// Close drops the last database and closes every connection.
func (h *serverHarness) Close() error {
	err := h.dropDatabase()
	h.admin.Close()
	return err
}

func (h *serverHarness) ExecuteStatement(statement string) error {
	return h.ExecuteStatementContext(context.Background(), statement)
}

func (h *serverHarness) ExecuteStatementContext(ctx context.Context, statement string) error {
	_, err := h.db.ExecContext(ctx, statement)
	return err
}

func (h *serverHarness) ExecuteQuery(statement string) (string, []string, error) {
	return h.ExecuteQueryContext(context.Background(), statement)
}

// ExecuteQueryContext runs a query over the text protocol (no arguments, so the
// driver does not prepare it) and renders its rows the way sqllogictest expects.
func (h *serverHarness) ExecuteQueryContext(ctx context.Context, statement string) (string, []string, error) {
	rows, err := h.db.QueryContext(ctx, statement)
	if err != nil {
		return "", nil, err
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return "", nil, err
	}
	var schema strings.Builder
	for _, t := range types {
		c, err := schemaLetter(t.DatabaseTypeName())
		if err != nil {
			return "", nil, fmt.Errorf("column %s: %w", t.Name(), err)
		}
		schema.WriteByte(c)
	}
	cols := schema.String()
	raw := make([]sql.RawBytes, len(types))
	dest := make([]any, len(types))
	for i := range raw {
		dest[i] = &raw[i]
	}
	var results []string
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return "", nil, err
		}
		for i, v := range raw {
			s, err := renderValue(cols[i], v)
			if err != nil {
				return "", nil, fmt.Errorf("column %s: %w", types[i].Name(), err)
			}
			results = append(results, s)
		}
	}
	if err := rows.Err(); err != nil {
		return "", nil, err
	}
	return cols, results, nil
}

// GetTimeout is the per-record limit, in whole seconds, that the runner
// enforces. It is at least one second: zero would mean the runner's own
// default of twenty minutes.
func (h *serverHarness) GetTimeout() int64 { return max(1, int64(h.timeout/time.Second)) }

// schemaLetter maps a column's MySQL type, as the go-sql-driver names it, to the
// sqllogictest result type: I integer, R real (decimal or floating point), T
// text. A column whose type is NULL (SELECT NULL) is reported as I, which is
// what MySQL-generated expectations use for such columns.
func schemaLetter(typeName string) (byte, error) {
	switch strings.TrimPrefix(typeName, "UNSIGNED ") {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR", "BIT", "NULL":
		return 'I', nil
	case "DECIMAL", "DOUBLE", "FLOAT":
		return 'R', nil
	case "CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET",
		"DATE", "DATETIME", "TIMESTAMP", "TIME", "JSON", "BINARY", "VARBINARY",
		"TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB":
		return 'T', nil
	}
	return 0, fmt.Errorf("unsupported column type %q", typeName)
}

// renderValue formats one value as sqllogictest compares it: NULL as "NULL",
// integers in decimal, reals with three digits after the point (printf %.3f),
// text as sent.
func renderValue(letter byte, v sql.RawBytes) (string, error) {
	if v == nil {
		return "NULL", nil
	}
	s := string(v)
	switch letter {
	case 'R':
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "", fmt.Errorf("real value %q: %w", s, err)
		}
		return strconv.FormatFloat(f, 'f', 3, 64), nil
	case 'I':
		if len(s) > 0 && s[0] != '-' && (s[0] < '0' || s[0] > '9') {
			// BIT(n) arrives as big-endian bytes.
			var n uint64
			for _, b := range v {
				n = n<<8 | uint64(b)
			}
			return strconv.FormatUint(n, 10), nil
		}
	}
	return s, nil
}
