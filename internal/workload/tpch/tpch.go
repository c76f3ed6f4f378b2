// Package tpch is TPC-H in `strata workload`: init generates the eight
// tables of a scale factor and loads them, run executes the 22 queries
// and prints each one's time, and check verifies the loaded data and the
// answers.
//
// The data follows the TPC-H standard specification (revision 3, clause
// 4.2): the table sizes of the scale factor, the keys (sparse order keys,
// the supplier formula of PARTSUPP and LINEITEM), the value domains and
// distributions, dates, flags and statuses derived from one another as
// the spec derives them, O_TOTALPRICE computed from the order's lines. It
// is generated from a fixed seed (--seed), in independent chunks, so two
// loads of the same scale factor and seed are identical whatever the
// number of loaders. What is simplified, on purpose: the text of comments
// comes from the grammar of clause 4.2.2.13 with approximate word weights
// and a 2 MiB pool instead of the reference generator's 300 MB one, so
// the answers have the spec's shape but are not the reference answer set
// of dbgen; compare answers between servers loaded by this program.
//
// The queries are the spec's, with the validation substitution parameters
// (clause 2.4), in SQL that MySQL, MariaDB and Strata parse (Q15 as a
// common table expression rather than a view). check verifies what can
// be computed independently of the server: the row counts of every table,
// and the answers of Q1, Q4, Q6, Q12 and Q13, recomputed from the
// generator; with --against it also runs the 22 queries on a second
// server and compares every answer (numbers rounded to hundredths, as the
// spec's validation rules do).
package tpch

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/strata-db/strata/internal/workload"
)

// Config describes a TPC-H database.
type Config struct {
	Addr, User, Password, Database string
	ScaleFactor                    float64
	Seed                           uint64
	Threads                        int
	Timeout                        time.Duration
	// QueryTimeout bounds each query (0: no bound) with the server's
	// max_execution_time (MySQL, Strata) or max_statement_time (MariaDB).
	QueryTimeout time.Duration
}

// DefaultSeed is the seed of the data when none is given.
const DefaultSeed = 19920101

func open(ctx context.Context, cfg Config, database string, conns int) (*sql.DB, error) {
	mc := workload.MySQLConfig(cfg.User, cfg.Password, cfg.Addr, database, cfg.Timeout, 0)
	mc.MaxAllowedPacket = 0
	return workload.OpenMySQL(ctx, mc, conns)
}

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Result is the answer of a query: its rows, every value as text (NULL as
// "NULL").
type Result [][]string

// runQuery executes q on conn and reads every row.
func runQuery(ctx context.Context, conn *sql.Conn, q string) (Result, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	raw := make([]sql.RawBytes, len(cols))
	dest := make([]any, len(cols))
	for i := range raw {
		dest[i] = &raw[i]
	}
	var res Result
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, b := range raw {
			if b == nil {
				row[i] = "NULL"
			} else {
				row[i] = string(b)
			}
		}
		res = append(res, row)
	}
	return res, rows.Err()
}

// session opens one connection with the query bound set.
func session(ctx context.Context, db *sql.DB, cfg Config) (*sql.Conn, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.QueryTimeout > 0 {
		// Each server knows one of the two; the other is an error to ignore.
		ms := cfg.QueryTimeout.Milliseconds()
		_, err1 := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION max_execution_time = %d", ms))
		_, err2 := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION max_statement_time = %g", cfg.QueryTimeout.Seconds()))
		if err1 != nil && err2 != nil {
			conn.Close()
			return nil, fmt.Errorf("the server bounds statements neither by max_execution_time (%v) nor max_statement_time (%v)", err1, err2)
		}
	}
	return conn, nil
}
