package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// sqlStore keeps records in a table of a MySQL-protocol server. Statements
// are prepared on the server (no client-side interpolation), as sysbench
// and YCSB's JDBC binding do.
type sqlStore struct {
	db     *sql.DB
	schema Schema
	dbName string
	table  string // `db`.`table`

	once    sync.Once
	prepErr error
	read    *sql.Stmt
	insert  *sql.Stmt
	write   *sql.Stmt
	scan    *sql.Stmt
	update  []*sql.Stmt // per field
	updAll  *sql.Stmt

	destPool sync.Pool // *[]any for Read and Scan
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

func openSQL(ctx context.Context, cfg Config, schema Schema) (Store, error) {
	if cfg.Database == "" {
		return nil, errors.New("the sql driver needs a database name (--database)")
	}
	mc := mysql.NewConfig()
	mc.User = cfg.User
	if mc.User == "" {
		mc.User = "root"
	}
	mc.Passwd = cfg.Password
	mc.Net = "tcp"
	mc.Addr = cfg.Addr
	mc.Timeout = cfg.Timeout
	mc.ReadTimeout = cfg.Timeout
	mc.WriteTimeout = cfg.Timeout
	mc.InterpolateParams = false
	// UPDATE reports matched rows, so that 0 means "no such record" even if
	// the new value equals the old.
	mc.ClientFoundRows = true
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(cfg.Conns)
	db.SetMaxIdleConns(cfg.Conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sql server at %s: %w", cfg.Addr, err)
	}
	s := &sqlStore{db: db, schema: schema, dbName: cfg.Database,
		table: quoteIdent(cfg.Database) + "." + quoteIdent(schema.Table)}
	n := schema.Fields()
	s.destPool.New = func() any {
		raw := make([]sql.RawBytes, n+1)
		dest := make([]any, n+1)
		for i := range raw {
			dest[i] = &raw[i]
		}
		return &dest
	}
	return s, nil
}

func (s *sqlStore) WholeRecordUpdates() bool { return false }

func (s *sqlStore) Init(ctx context.Context, drop bool) error {
	cols := make([]string, 0, s.schema.Fields()+1)
	cols = append(cols, quoteIdent(s.schema.KeyColumn)+" VARCHAR(64) NOT NULL PRIMARY KEY")
	for _, c := range s.schema.Columns {
		cols = append(cols, fmt.Sprintf("%s VARCHAR(%d)", quoteIdent(c), max(s.schema.FieldLength, 1)))
	}
	stmts := []string{"CREATE DATABASE IF NOT EXISTS " + quoteIdent(s.dbName)}
	if drop {
		stmts = append(stmts, "DROP TABLE IF EXISTS "+s.table)
	}
	stmts = append(stmts, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", s.table, strings.Join(cols, ", ")))
	for _, q := range stmts {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func (s *sqlStore) columnList() string {
	q := make([]string, len(s.schema.Columns))
	for i, c := range s.schema.Columns {
		q[i] = quoteIdent(c)
	}
	return strings.Join(q, ", ")
}

func placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}

// prepare prepares every statement once; the table must exist by then.
func (s *sqlStore) prepare(ctx context.Context) error {
	s.once.Do(func() {
		key := quoteIdent(s.schema.KeyColumn)
		cols := s.columnList()
		prep := func(q string) *sql.Stmt {
			if s.prepErr != nil {
				return nil
			}
			st, err := s.db.PrepareContext(ctx, q)
			if err != nil {
				s.prepErr = fmt.Errorf("prepare %s: %w", q, err)
			}
			return st
		}
		s.read = prep(fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?", cols, s.table, key))
		ins := fmt.Sprintf("INSERT INTO %s (%s, %s) VALUES %s", s.table, key, cols, placeholders(s.schema.Fields()+1))
		s.insert = prep(ins)
		s.write = prep("REPLACE" + strings.TrimPrefix(ins, "INSERT"))
		s.scan = prep(fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s >= ? ORDER BY %s LIMIT ?", key, cols, s.table, key, key))
		sets := make([]string, len(s.schema.Columns))
		for i, c := range s.schema.Columns {
			sets[i] = quoteIdent(c) + " = ?"
			s.update = append(s.update, prep(fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?", s.table, sets[i], key)))
		}
		s.updAll = prep(fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?", s.table, strings.Join(sets, ", "), key))
	})
	return s.prepErr
}

func (s *sqlStore) Check(ctx context.Context) error {
	err := s.prepare(ctx)
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049) {
		// ER_NO_SUCH_TABLE, ER_BAD_DB_ERROR
		return fmt.Errorf("table %s does not exist", s.table)
	}
	return err
}

func recordArgs(key string, fields [][]byte) []any {
	args := make([]any, 0, len(fields)+1)
	args = append(args, key)
	for _, f := range fields {
		args = append(args, f)
	}
	return args
}

func (s *sqlStore) Insert(ctx context.Context, key string, fields [][]byte) error {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	_, err := s.insert.ExecContext(ctx, recordArgs(key, fields)...)
	return err
}

func (s *sqlStore) Write(ctx context.Context, key string, fields [][]byte) error {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	_, err := s.write.ExecContext(ctx, recordArgs(key, fields)...)
	return err
}

// InsertBatch sends one multi-row INSERT (not prepared: its shape depends on
// the batch size).
func (s *sqlStore) InsertBatch(ctx context.Context, keys []string, fields [][][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s, %s) VALUES ", s.table, quoteIdent(s.schema.KeyColumn), s.columnList())
	row := placeholders(s.schema.Fields() + 1)
	args := make([]any, 0, len(keys)*(s.schema.Fields()+1))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
		args = append(args, recordArgs(k, fields[i])...)
	}
	_, err := s.db.ExecContext(ctx, b.String(), args...)
	return err
}

func (s *sqlStore) Read(ctx context.Context, key string) (bool, error) {
	if err := s.prepare(ctx); err != nil {
		return false, err
	}
	rows, err := s.read.QueryContext(ctx, key)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	dest := s.destPool.Get().(*[]any)
	defer s.destPool.Put(dest)
	found := false
	for rows.Next() {
		if err := rows.Scan((*dest)[1:]...); err != nil {
			return false, err
		}
		found = true
	}
	return found, rows.Err()
}

func (s *sqlStore) Update(ctx context.Context, key string, i int, fields [][]byte) error {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	var res sql.Result
	var err error
	if i >= 0 {
		res, err = s.update[i].ExecContext(ctx, fields[i], key)
	} else {
		args := make([]any, 0, len(fields)+1)
		for _, f := range fields {
			args = append(args, f)
		}
		res, err = s.updAll.ExecContext(ctx, append(args, key)...)
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("update of %s matched no row", key)
	}
	return nil
}

func (s *sqlStore) Scan(ctx context.Context, start string, n int) (int, error) {
	if err := s.prepare(ctx); err != nil {
		return 0, err
	}
	rows, err := s.scan.QueryContext(ctx, start, n)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := s.destPool.Get().(*[]any)
	defer s.destPool.Put(dest)
	got := 0
	for rows.Next() {
		if err := rows.Scan(*dest...); err != nil {
			return got, err
		}
		got++
	}
	return got, rows.Err()
}

func (s *sqlStore) Close() error {
	for _, st := range append([]*sql.Stmt{s.read, s.insert, s.write, s.scan, s.updAll}, s.update...) {
		if st != nil {
			st.Close()
		}
	}
	return s.db.Close()
}
