package sql_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/types"
)

// sbtestRows is the table size of the sysbench benchmarks (sysbench's
// --table-size for the measured runs in docs/benchmarks.md).
const sbtestRows = 100_000

// sbtestValue is a sysbench-style CHAR value: groups of 11 digits joined by
// '-' (sysbench's c is 10 groups, 119 characters; pad is 5 groups, 59).
func sbtestValue(r *rand.Rand, groups int) string {
	var sb strings.Builder
	for g := range groups {
		if g > 0 {
			sb.WriteByte('-')
		}
		fmt.Fprintf(&sb, "%011d", r.Uint64N(1e11))
	}
	return sb.String()
}

// newSbtestSession starts an in-process node (client, Raft, Pebble in
// memory), loads sbtest1 with sbtestRows rows shaped like sysbench's
// oltp_common.lua (id 1..n, k uniform in [1,n], random c and pad) and
// returns a session on it.
func newSbtestSession(b *testing.B) *sql.Session {
	b.Helper()
	s, exec := nodeSession(b)
	exec("CREATE DATABASE sbtest")
	exec("USE sbtest")
	exec(`CREATE TABLE sbtest1 (
		id INTEGER NOT NULL AUTO_INCREMENT,
		k INTEGER DEFAULT '0' NOT NULL,
		c CHAR(120) DEFAULT '' NOT NULL,
		pad CHAR(60) DEFAULT '' NOT NULL,
		PRIMARY KEY (id),
		KEY k_1 (k))`)
	r := rand.New(rand.NewPCG(1, 2))
	const perInsert = 1000
	var q strings.Builder
	for id := 1; id <= sbtestRows; id += perInsert {
		q.Reset()
		q.WriteString("INSERT INTO sbtest1 (id, k, c, pad) VALUES ")
		for i := id; i < id+perInsert && i <= sbtestRows; i++ {
			if i > id {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "(%d,%d,'%s','%s')", i, 1+r.IntN(sbtestRows), sbtestValue(r, 10), sbtestValue(r, 5))
		}
		exec(q.String())
	}
	return s
}

// BenchmarkSysbenchReadOnly runs the statements of one sysbench
// oltp_read_only transaction, as server-side prepared statements, over a
// 100k-row table in an in-process node: the point select and the four
// range queries over 100 consecutive ids. Each op is one execution of the
// statement in its own autocommit transaction (sysbench wraps them in
// BEGIN/COMMIT; the reads are the same).
func BenchmarkSysbenchReadOnly(b *testing.B) {
	s := newSbtestSession(b)
	ctx := context.Background()
	const rangeSize = 100
	for _, bm := range []struct {
		name, query string
		rows        int // rows of the result, checked once per op
	}{
		{"point", "SELECT c FROM sbtest1 WHERE id=?", 1},
		{"simple_range", "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", rangeSize},
		{"sum_range", "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?", 1},
		{"order_range", "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c", rangeSize},
		{"distinct_range", "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c", rangeSize},
	} {
		b.Run(bm.name, func(b *testing.B) {
			ps, err := s.Prepare(ctx, bm.query)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 4))
			params := make([]types.Datum, ps.ParamCount)
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				lo := 1 + r.IntN(sbtestRows-rangeSize+1)
				params[0] = types.NewInt(int64(lo))
				if len(params) > 1 {
					params[1] = types.NewInt(int64(lo + rangeSize - 1))
				}
				res, err := s.ExecutePrepared(ctx, ps.ID, params)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Rows) != bm.rows {
					b.Fatalf("%s: %d rows, want %d", bm.query, len(res.Rows), bm.rows)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time (user + system) the process has used. Per op it
// is steadier than ns/op on a shared machine, and it counts the garbage
// collector's work on other threads.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
