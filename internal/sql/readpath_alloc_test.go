package sql_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/sql/types"
)

// TestPreparedRangeAllocations bounds the allocations of sysbench's range
// selects from the SQL session down to the MVCC scan in an in-process node.
// Their count does not grow with the rows read: the executor decodes each
// row as the engine scan hands it over (kv.FuncScanner) into slabs sized by
// the range, copying into one arena only the strings the plan reads, skips
// the filter the range implies, and sorts (with DISTINCT) one array of
// entries. The byte bounds fail if the scan copies whole keys and values
// again (39, 31, 47 and 47 KB when it did; 25, 15, 32 and 32 KB since).
// The bounds leave room for allocations of the node's background work,
// which the counts include.
func TestPreparedRangeAllocations(t *testing.T) {
	ctx := context.Background()
	s, exec := nodeSession(t)
	exec("CREATE DATABASE sbtest")
	exec("USE sbtest")
	exec("CREATE TABLE sbtest1 (id INTEGER NOT NULL, k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))")
	var sb strings.Builder
	sb.WriteString("INSERT INTO sbtest1 VALUES ")
	for i := 1; i <= 300; i++ {
		if i > 1 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "(%d, %d, '%011d-%011d', 'pad')", i, i%7, (i*7919)%1000, i)
	}
	exec(sb.String())
	for _, c := range []struct {
		query    string
		rows     int
		max      float64
		maxBytes uint64
	}{
		{"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", 100, 38, 30 << 10},
		{"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?", 1, 44, 20 << 10},
		{"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c", 100, 43, 38 << 10},
		{"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c", 100, 43, 38 << 10},
	} {
		ps, err := s.Prepare(ctx, c.query)
		if err != nil {
			t.Fatal(err)
		}
		params := []types.Datum{types.NewInt(101), types.NewInt(200)}
		allocs := testing.AllocsPerRun(200, func() {
			r, err := s.ExecutePrepared(ctx, ps.ID, params)
			if err != nil || len(r.Rows) != c.rows {
				t.Fatalf("%s: %d rows, %v", c.query, len(r.Rows), err)
			}
		})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 200
		for range runs {
			if _, err := s.ExecutePrepared(ctx, ps.ID, params); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		perQuery := (after.TotalAlloc - before.TotalAlloc) / runs
		t.Logf("%s: %.0f allocations, %d bytes", c.query, allocs, perQuery)
		if allocs > c.max {
			t.Errorf("%s allocates %.0f times, want <= %.0f", c.query, allocs, c.max)
		}
		if perQuery > c.maxBytes {
			t.Errorf("%s allocates %d bytes, want <= %d", c.query, perQuery, c.maxBytes)
		}
	}
}

// TestPreparedJoinedPointLookupBytes bounds the bytes TPC-C New-Order's
// first statement allocates: a customer row joined to its warehouse row,
// both by primary key, 30 columns in all. The join built its output rows
// in slabs of 64, so the one row it emits cost 46 KB of slab (54 KB per
// execution in all; 6 KB since slabs grow from one row).
func TestPreparedJoinedPointLookupBytes(t *testing.T) {
	ctx := context.Background()
	s, exec := nodeSession(t)
	exec("CREATE DATABASE tpcc")
	exec("USE tpcc")
	var cols strings.Builder
	for i := 1; i <= 17; i++ {
		fmt.Fprintf(&cols, ", c_x%d VARCHAR(20)", i)
	}
	exec("CREATE TABLE customer (c_w_id INT, c_d_id INT, c_id INT, c_discount DECIMAL(4,4)" + cols.String() + ", PRIMARY KEY (c_w_id, c_d_id, c_id))")
	exec("CREATE TABLE warehouse (w_id INT PRIMARY KEY, w_tax DECIMAL(4,4), w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20), w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_ytd DECIMAL(12,2))")
	exec("INSERT INTO warehouse VALUES (1, 0.1, 'w', 's1', 's2', 'c', 'st', '123451111', 300000)")
	exec("INSERT INTO customer (c_w_id, c_d_id, c_id, c_discount, c_x1) VALUES (1, 2, 3, 0.05, 'x'), (1, 2, 4, 0.05, 'y')")
	ps, err := s.Prepare(ctx, "SELECT c_discount, c_x1, w_tax FROM customer, warehouse WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?")
	if err != nil {
		t.Fatal(err)
	}
	params := []types.Datum{types.NewInt(1), types.NewInt(2), types.NewInt(3)}
	run := func() {
		r, err := s.ExecutePrepared(ctx, ps.ID, params)
		if err != nil || len(r.Rows) != 1 {
			t.Fatalf("%d rows, %v", len(r.Rows), err)
		}
	}
	perQuery := bytesPerRun(t, run)
	if perQuery > 16<<10 {
		t.Errorf("the joined point lookup allocates %d bytes, want <= %d", perQuery, 16<<10)
	}
}

// TestPreparedWideRowUpdateBytes bounds the bytes of TPC-C New-Order's
// UPDATE stock in an explicit transaction: a primary-key update of a
// 17-column row of about 350 bytes. The row's old value is encoded only to
// be compared with the new one; it is encoded into a buffer the statement
// reuses, and neither encoding copies the row's values first (7.0 KB per
// execution before, 6.2 KB since).
func TestPreparedWideRowUpdateBytes(t *testing.T) {
	ctx := context.Background()
	s, exec := nodeSession(t)
	exec("CREATE DATABASE tpcc")
	exec("USE tpcc")
	var cols, vals strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&cols, ", s_dist_%02d CHAR(24)", i)
		fmt.Fprintf(&vals, ", '%024d'", i)
	}
	exec("CREATE TABLE stock (s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity INT, s_ytd INT, s_order_cnt INT, s_remote_cnt INT, s_data VARCHAR(50)" + cols.String() + ", PRIMARY KEY (s_w_id, s_i_id))")
	exec("INSERT INTO stock VALUES (7, 1, 50, 0, 0, 0, '" + strings.Repeat("d", 50) + "'" + vals.String() + ")")
	ps, err := s.Prepare(ctx, "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ? WHERE s_w_id = ? AND s_i_id = ?")
	if err != nil {
		t.Fatal(err)
	}
	exec("BEGIN")
	defer exec("ROLLBACK")
	qty := int64(50)
	run := func() {
		qty = qty%90 + 1
		r, err := s.ExecutePrepared(ctx, ps.ID, []types.Datum{types.NewInt(qty), types.NewInt(3), types.NewInt(0), types.NewInt(1), types.NewInt(7)})
		if err != nil || r.AffectedRows != 1 {
			t.Fatalf("%v rows, %v", r, err)
		}
	}
	perQuery := bytesPerRun(t, run)
	if perQuery > 6500 {
		t.Errorf("the update allocates %d bytes, want <= 6500", perQuery)
	}
}

// bytesPerRun runs run once to warm it up, then 200 times, and returns the
// bytes it allocated per run.
func bytesPerRun(t *testing.T, run func()) uint64 {
	t.Helper()
	run()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 200
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("%d bytes per execution", perRun)
	return perRun
}
