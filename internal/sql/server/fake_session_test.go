package server

import (
	"context"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	strsql "github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// scriptedBackend plays the SQL layer for protocol tests: a handful of
// fixed statements with known results and errors, and a log of everything
// the server asked of it.
type scriptedBackend struct {
	mu       sync.Mutex
	executed []string        // statements passed to Execute, in order
	params   [][]types.Datum // parameters of each ExecutePrepared
	prepares []string        // statements passed to Prepare, in order
	sessions []*scriptedSession
	dbs      map[string]bool
}

func newScriptedBackend() *scriptedBackend {
	return &scriptedBackend{dbs: map[string]bool{"test": true, "sbtest": true}}
}

func (b *scriptedBackend) open(user, host string, _ uint32) session {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &scriptedSession{b: b, user: user, host: host, autocommit: true, prepared: map[uint32]string{}}
	b.sessions = append(b.sessions, s)
	return s
}

func (b *scriptedBackend) executedStatements() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.executed...)
}

func (b *scriptedBackend) lastParams() []types.Datum {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.params) == 0 {
		return nil
	}
	return b.params[len(b.params)-1]
}

// openPrepared counts prepared statements not yet closed, over all sessions.
func (b *scriptedBackend) openPrepared() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.sessions {
		n += len(s.prepared)
	}
	return n
}

func (b *scriptedBackend) closedSessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.sessions {
		if s.closed {
			n++
		}
	}
	return n
}

type scriptedSession struct {
	b          *scriptedBackend
	user, host string
	db         string
	inTxn      bool
	autocommit bool
	warnings   uint16
	closed     bool
	nextID     uint32
	prepared   map[uint32]string
}

func ft(tp byte, flag uint, flen, dec int) *ptypes.FieldType {
	f := ptypes.NewFieldType(tp)
	f.SetFlag(flag)
	f.SetFlen(flen)
	f.SetDecimal(dec)
	switch tp {
	case mysql.TypeVarchar, mysql.TypeString, mysql.TypeBlob, mysql.TypeVarString:
		if flag&mysql.BinaryFlag != 0 {
			f.SetCharset("binary")
			f.SetCollate("binary")
		} else {
			f.SetCharset("utf8mb4")
			f.SetCollate("utf8mb4_bin")
		}
	default:
		f.SetCharset("binary")
		f.SetCollate("binary")
	}
	return f
}

func mustDecimal(s string) types.Datum {
	d, err := types.ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return types.NewDecimal(d)
}

func mustTime(s string, tp byte, fsp int) types.Datum {
	t, err := types.ParseTime(s, tp, fsp)
	if err != nil {
		panic(err)
	}
	return types.NewTime(t)
}

// typedResult is one row of every common column type, and a row of NULLs.
func typedResult() *strsql.Result {
	col := func(name string, f *ptypes.FieldType) *strsql.Column {
		return &strsql.Column{Name: name, OrgName: name, Table: "typed", OrgTable: "typed", Database: "test", Type: f}
	}
	return &strsql.Result{
		Columns: []*strsql.Column{
			col("i8", ft(mysql.TypeTiny, 0, 4, 0)),
			col("u16", ft(mysql.TypeShort, mysql.UnsignedFlag, 5, 0)),
			col("i32", ft(mysql.TypeLong, mysql.NotNullFlag|mysql.PriKeyFlag, 11, 0)),
			col("u64", ft(mysql.TypeLonglong, mysql.UnsignedFlag, 20, 0)),
			col("f32", ft(mysql.TypeFloat, 0, 12, -1)),
			col("f64", ft(mysql.TypeDouble, 0, 22, -1)),
			col("dec", ft(mysql.TypeNewDecimal, 0, 10, 2)),
			col("s", ft(mysql.TypeVarchar, 0, 20, 0)),
			col("b", ft(mysql.TypeBlob, mysql.BinaryFlag, 65535, 0)),
			col("d", ft(mysql.TypeDate, 0, 10, 0)),
			col("dt", ft(mysql.TypeDatetime, 0, 26, 6)),
		},
		Rows: [][]types.Datum{
			{
				types.NewInt(-7), types.NewUint(65535), types.NewInt(-2147483648), types.NewUint(18446744073709551615),
				types.NewFloat(1.5), types.NewFloat(-2.25e-3), mustDecimal("12345678.90"), types.NewString("héllo"),
				types.NewBytes([]byte{0, 1, 0xff}), mustTime("2024-02-29", mysql.TypeDate, 0),
				mustTime("2024-02-29 13:14:15.000123", mysql.TypeDatetime, 6),
			},
			make([]types.Datum, 11),
		},
	}
}

func (s *scriptedSession) Execute(ctx context.Context, query string) ([]*strsql.Result, error) {
	q := strings.TrimSpace(query)
	s.b.mu.Lock()
	s.b.executed = append(s.b.executed, q)
	s.b.mu.Unlock()
	s.warnings = 0
	switch strings.ToUpper(q) {
	case "BEGIN":
		s.inTxn = true
		return []*strsql.Result{{}}, nil
	case "COMMIT", "ROLLBACK":
		s.inTxn = false
		return []*strsql.Result{{}}, nil
	case "SET AUTOCOMMIT=0":
		s.autocommit = false
		return []*strsql.Result{{}}, nil
	case "SELECT 1":
		return []*strsql.Result{{
			Columns: []*strsql.Column{{Name: "1", Type: ft(mysql.TypeLonglong, mysql.NotNullFlag, 1, 0)}},
			Rows:    [][]types.Datum{{types.NewInt(1)}},
		}}, nil
	case "SELECT 2":
		return []*strsql.Result{{
			Columns: []*strsql.Column{{Name: "2", Type: ft(mysql.TypeLonglong, mysql.NotNullFlag, 1, 0)}},
			Rows:    [][]types.Datum{{types.NewInt(2)}},
		}}, nil
	case "SELECT * FROM TYPED":
		return []*strsql.Result{typedResult()}, nil
	case "SELECT * FROM EMPTY":
		r := typedResult()
		r.Rows = nil
		return []*strsql.Result{r}, nil
	case "SELECT * FROM BIG":
		r := &strsql.Result{Columns: []*strsql.Column{{Name: "n", Type: ft(mysql.TypeLonglong, 0, 20, 0)}}}
		for i := 0; i < 1000; i++ {
			r.Rows = append(r.Rows, []types.Datum{types.NewInt(int64(i))})
		}
		return []*strsql.Result{r}, nil
	case "SELECT DATABASE()":
		d := types.Null
		if s.db != "" {
			d = types.NewString(s.db)
		}
		return []*strsql.Result{{Columns: []*strsql.Column{{Name: "DATABASE()", Type: ft(mysql.TypeVarchar, 0, 64, 0)}}, Rows: [][]types.Datum{{d}}}}, nil
	case "INSERT INTO T VALUES (1)", "INSERT INTO T VALUES (2)", "INSERT INTO T VALUES (3)":
		return []*strsql.Result{{AffectedRows: 1, LastInsertID: 42}}, nil
	case "INSERT WARN":
		s.warnings = 2
		return []*strsql.Result{{AffectedRows: 1}}, nil
	case "INSERT DUP":
		return nil, sqlerr.New(sqlerr.ErDupEntry, "23000", "Duplicate entry '1' for key 't.PRIMARY'")
	case "UPDATE CONFLICT":
		return nil, &kv.RetryableError{Reason: "write conflict on key 74"}
	case "UPDATE LOCKWAIT":
		return nil, &kv.RetryableError{Reason: "lock wait", LockWaitTimeout: true}
	case "SELECT PLAIN_ERROR":
		return nil, errPlain
	case "SELECT PANIC":
		panic("scripted panic")
	}
	return nil, sqlerr.New(sqlerr.ErParse, "42000", "You have an error in your SQL syntax near '%s'", q)
}

var errPlain = errString("disk on fire")

type errString string

func (e errString) Error() string { return string(e) }

func (s *scriptedSession) Prepare(ctx context.Context, query string) (*strsql.PreparedStmt, error) {
	q := strings.TrimSpace(query)
	s.b.mu.Lock()
	s.b.prepares = append(s.b.prepares, q)
	s.b.mu.Unlock()
	var cols []*strsql.Column
	switch {
	case strings.HasPrefix(strings.ToUpper(q), "SELECT * FROM TYPED"):
		cols = typedResult().Columns
	case strings.HasPrefix(strings.ToUpper(q), "SELECT ?"):
		for i := 0; i < strings.Count(q, "?"); i++ {
			cols = append(cols, &strsql.Column{Name: "?", Type: ft(mysql.TypeVarchar, 0, 255, 0)})
		}
	case strings.HasPrefix(strings.ToUpper(q), "SELECT * FROM BIG"):
		cols = []*strsql.Column{{Name: "n", Type: ft(mysql.TypeLonglong, 0, 20, 0)}}
	case strings.HasPrefix(strings.ToUpper(q), "INSERT"):
	default:
		return nil, sqlerr.New(sqlerr.ErNoSuchTable, "42S02", "Table 'test.nope' doesn't exist")
	}
	s.b.mu.Lock()
	s.nextID++
	s.prepared[s.nextID] = q
	s.b.mu.Unlock()
	return &strsql.PreparedStmt{ID: s.nextID, ParamCount: strings.Count(q, "?"), Columns: cols}, nil
}

func (s *scriptedSession) ExecutePrepared(ctx context.Context, id uint32, params []types.Datum) (*strsql.Result, error) {
	s.b.mu.Lock()
	q, ok := s.prepared[id]
	s.b.mu.Unlock()
	if !ok {
		return nil, sqlerr.New(sqlerr.ErUnknown, "HY000", "unknown statement %d", id)
	}
	s.b.mu.Lock()
	s.b.params = append(s.b.params, params)
	s.b.mu.Unlock()
	switch {
	case strings.HasPrefix(strings.ToUpper(q), "SELECT * FROM TYPED"):
		return typedResult(), nil
	case strings.HasPrefix(strings.ToUpper(q), "SELECT * FROM BIG"):
		rs, err := s.Execute(ctx, "SELECT * FROM big")
		if err != nil {
			return nil, err
		}
		return rs[0], nil
	case strings.HasPrefix(strings.ToUpper(q), "SELECT ?"):
		row := make([]types.Datum, len(params))
		cols := make([]*strsql.Column, len(params))
		for i, p := range params {
			cols[i] = &strsql.Column{Name: "?", Type: ft(mysql.TypeVarchar, 0, 255, 0)}
			row[i] = p
			if !p.IsNull() {
				str, err := p.ToString()
				if err != nil {
					return nil, err
				}
				row[i] = types.NewString(str)
			}
		}
		return &strsql.Result{Columns: cols, Rows: [][]types.Datum{row}}, nil
	default:
		return &strsql.Result{AffectedRows: uint64(len(params)), LastInsertID: 7}, nil
	}
}

func (s *scriptedSession) ClosePrepared(id uint32) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	delete(s.prepared, id)
}
func (s *scriptedSession) CurrentDB() string { return s.db }

func (s *scriptedSession) UseDB(name string) error {
	if !s.b.dbs[name] {
		return sqlerr.New(sqlerr.ErBadDB, "42000", "Unknown database '%s'", name)
	}
	s.db = name
	return nil
}

func (s *scriptedSession) InTxn() bool          { return s.inTxn }
func (s *scriptedSession) AutoCommit() bool     { return s.autocommit }
func (s *scriptedSession) WarningCount() uint16 { return s.warnings }

func (s *scriptedSession) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.closed = true
	s.inTxn = false
	s.prepared = map[uint32]string{}
}
