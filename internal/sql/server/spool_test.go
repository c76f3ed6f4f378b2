package server

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/kv/kvtest"
	strsql "github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/exec"
)

// TestResultLargerThanQuota: a query whose result is larger than the
// statement's memory quota is sent from a temporary file (text and binary
// protocols), the same rows as without a quota, and the file is gone once
// sent; with tidb_enable_tmp_storage_on_oom off it fails with 8175.
func TestResultLargerThanQuota(t *testing.T) {
	dir := t.TempDir()
	engine, err := strsql.NewEngine(context.Background(), kvtest.NewMemStorage(), strsql.Options{TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Addr: "127.0.0.1:0", AllowEmptyRootPassword: true}, engine)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	addr := srv.Addr().String()
	execAll(t, openEngineDB(t, addr, "", ""), "CREATE DATABASE d")
	db := openEngineDB(t, addr, "d", "")
	db.SetMaxOpenConns(1)
	execAll(t, db, "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(40), v DECIMAL(10,2))")
	for start := 0; start < 20000; start += 1000 {
		var vals []string
		for i := start; i < start+1000; i++ {
			vals = append(vals, fmt.Sprintf("(%d, 'row %d', %d.%02d)", i, i*7, i%1000, i%100))
		}
		execAll(t, db, "INSERT INTO t VALUES "+strings.Join(vals, ","))
	}
	read := func(prepared bool) (string, error) {
		var args []any
		q := "SELECT id, s, v FROM t WHERE id >= 0 ORDER BY s"
		if prepared {
			q = "SELECT id, s, v FROM t WHERE id >= ? ORDER BY s"
			args = append(args, 0)
		}
		rows, err := db.Query(q, args...)
		if err != nil {
			return "", err
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var id int
			var s, v string
			if err := rows.Scan(&id, &s, &v); err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%d %s %s\n", id, s, v)
		}
		return b.String(), rows.Err()
	}
	want, err := read(false)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(want, "\n"); n != 20000 {
		t.Fatalf("%d rows, want 20000", n)
	}
	execAll(t, db, "SET tidb_mem_quota_query = 500000")
	for _, prepared := range []bool{false, true} {
		files, _ := exec.SpillStats()
		got, err := read(prepared)
		if err != nil {
			t.Fatalf("prepared=%v: %v", prepared, err)
		}
		if got != want {
			t.Errorf("prepared=%v: the spooled result differs (%d bytes, want %d)", prepared, len(got), len(want))
		}
		if after, _ := exec.SpillStats(); after == files {
			t.Errorf("prepared=%v: no temporary file was created", prepared)
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("prepared=%v: %d temporary files left", prepared, len(left))
		}
	}
	var found int
	if err := db.QueryRow("SELECT FOUND_ROWS()").Scan(&found); err != nil || found != 20000 {
		t.Errorf("FOUND_ROWS() = %d, %v; want 20000", found, err)
	}
	execAll(t, db, "SET tidb_enable_tmp_storage_on_oom = OFF")
	if _, err := read(false); err == nil || !strings.Contains(err.Error(), "8175") {
		t.Errorf("without spilling: err = %v, want 8175", err)
	}
}
