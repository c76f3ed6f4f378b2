package sql_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/internal/sql/types"
)

// BenchmarkSysbenchWrites runs sysbench's write statements over a 100k-row
// table in an in-process node (Raft and Pebble in memory, so no fsync: the
// CPU of the path, not the disk): oltp_update_index and oltp_insert as
// autocommit statements, and the write half of an oltp_read_write
// transaction (BEGIN, UPDATE by index column, UPDATE of c, DELETE and
// INSERT of one id, COMMIT) as one op, which takes pessimistic locks.
// cpu-ns/op is the process's CPU per op.
func BenchmarkSysbenchWrites(b *testing.B) {
	s := newSbtestSession(b)
	ctx := context.Background()
	prep := func(q string) uint32 {
		ps, err := s.Prepare(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		return ps.ID
	}
	run := func(id uint32, params ...types.Datum) {
		if _, err := s.ExecutePrepared(ctx, id, params); err != nil {
			b.Fatal(err)
		}
	}
	exec := func(q string) {
		if _, err := s.Execute(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	updIndex := prep("UPDATE sbtest1 SET k=k+1 WHERE id=?")
	updNonIndex := prep("UPDATE sbtest1 SET c=? WHERE id=?")
	del := prep("DELETE FROM sbtest1 WHERE id=?")
	ins := prep("INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)")
	bench := func(name string, op func()) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				op()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	bench("update_index", func() { run(updIndex, types.NewInt(int64(1+r.IntN(sbtestRows)))) })
	next := sbtestRows
	bench("insert", func() {
		next++
		exec(fmt.Sprintf("INSERT INTO sbtest1 (id, k, c, pad) VALUES (%d, %d, '%s', '%s')", next, r.IntN(sbtestRows), sbtestValue(r, 10), sbtestValue(r, 5)))
	})
	bench("read_write_writes", func() {
		exec("BEGIN")
		run(updIndex, types.NewInt(int64(1+r.IntN(sbtestRows))))
		run(updNonIndex, types.NewString(sbtestValue(r, 10)), types.NewInt(int64(1+r.IntN(sbtestRows))))
		id := types.NewInt(int64(1 + r.IntN(sbtestRows)))
		run(del, id)
		run(ins, id, types.NewInt(int64(r.IntN(sbtestRows))), types.NewString(sbtestValue(r, 10)), types.NewString(sbtestValue(r, 5)))
		exec("COMMIT")
	})
}
