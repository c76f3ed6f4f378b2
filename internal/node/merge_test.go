package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The server drives PD's merge checker: regions that SPLIT TABLE made and
// that stay small and cold merge back into their neighbours once
// --split-merge-interval has passed, while a client keeps writing and
// reading the table, and every acknowledged write is there afterwards.
func TestMergeColdRegions(t *testing.T) {
	n, base := startSplitNode(t, Config{SplitCheckInterval: -1, SplitMergeInterval: time.Second})
	ctx := context.Background()
	s := n.SQL().NewSession("root", "localhost")
	exec := func(q string) ([][]string, error) {
		res, err := s.Execute(ctx, q)
		if err != nil {
			return nil, err
		}
		var out [][]string
		for _, r := range res[len(res)-1].Rows {
			var row []string
			for _, d := range r {
				row = append(row, d.String())
			}
			out = append(out, row)
		}
		return out, nil
	}
	must := func(q string) [][]string {
		t.Helper()
		rows, err := exec(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return rows
	}
	must("CREATE DATABASE d")
	must("USE d")
	must("CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
	for i := 0; i < 800; i += 100 {
		q := "INSERT INTO t VALUES "
		for j := i; j < i+100; j++ {
			if j > i {
				q += ","
			}
			q += fmt.Sprintf("(%d, 0)", j)
		}
		must(q)
	}
	must("SPLIT TABLE t BETWEEN (0) AND (800) REGIONS 8")
	before := len(dataRegions(t, base))
	if before < 8 {
		t.Fatalf("%d data regions after SPLIT TABLE ... REGIONS 8", before)
	}
	must("DELETE FROM t WHERE id >= 100")
	// A pessimistic transaction locks a row of a region that will merge
	// (the lock lives in the leader's memory only) and holds it through
	// the merges.
	locker := n.SQL().NewSession("root", "localhost")
	for _, q := range []string{"USE d", "INSERT INTO t VALUES (500, 0)", "BEGIN PESSIMISTIC", "SELECT v FROM t WHERE id = 500 FOR UPDATE"} {
		if _, err := locker.Execute(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// A writer on its own session: each acknowledged UPDATE sets v of one
	// row to its sequence number.
	var acked sync.Map // id -> last acknowledged v
	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes, failures atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		ws := n.SQL().NewSession("root", "localhost")
		if _, err := ws.Execute(ctx, "USE d"); err != nil {
			t.Error(err)
			return
		}
		for seq := 1; !stop.Load(); seq++ {
			id := seq % 100
			if _, err := ws.Execute(ctx, fmt.Sprintf("UPDATE t SET v = %d WHERE id = %d", seq, id)); err != nil {
				failures.Add(1)
				continue
			}
			acked.Store(id, seq)
			writes.Add(1)
			if _, err := ws.Execute(ctx, fmt.Sprintf("SELECT v FROM t WHERE id = %d", (seq*7)%100)); err != nil {
				failures.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	after := before
	for time.Now().Before(deadline) {
		if after = len(dataRegions(t, base)); after <= 2 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if after > 2 {
		t.Fatalf("%d data regions 60 s after the table's regions went cold (were %d)", after, before)
	}
	t.Logf("data regions %d -> %d; %d writes acknowledged, %d statements failed meanwhile", before, after, writes.Load(), failures.Load())
	// The lock taken before the merges still keeps other writers off the
	// row: the merged region's leader is the store that held it.
	other := n.SQL().NewSession("root", "localhost")
	for _, q := range []string{"USE d", "SET innodb_lock_wait_timeout = 1"} {
		if _, err := other.Execute(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Execute(ctx, "UPDATE t SET v = 1 WHERE id = 500"); err == nil || !strings.Contains(err.Error(), "1205") {
		t.Fatalf("an UPDATE of the row locked before the merges: %v, want a lock wait timeout (1205)", err)
	}
	for _, q := range []string{"UPDATE t SET v = 7 WHERE id = 500", "COMMIT"} {
		if _, err := locker.Execute(ctx, q); err != nil {
			t.Fatalf("the locking transaction after the merges: %s: %v", q, err)
		}
	}
	if _, err := other.Execute(ctx, "UPDATE t SET v = v + 1 WHERE id = 500"); err != nil {
		t.Fatal(err)
	}
	if rows := must("SELECT v FROM t WHERE id = 500"); rows[0][0] != "8" {
		t.Fatalf("row 500: v=%s, want 8", rows[0][0])
	}
	if writes.Load() == 0 {
		t.Fatal("no write was acknowledged during the merges")
	}
	rows := must("SELECT id, v FROM t WHERE id < 100 ORDER BY id")
	if len(rows) != 100 {
		t.Fatalf("%d rows, want 100", len(rows))
	}
	for _, r := range rows {
		id, _ := strconv.Atoi(r[0])
		v, _ := strconv.Atoi(r[1])
		if w, ok := acked.Load(id); ok && v < w.(int) {
			t.Fatalf("row %d has v=%d, below the acknowledged %d", id, v, w)
		}
	}
	// The merged layout is what SQL shows too.
	if rows := must("SHOW TABLE t REGIONS"); len(rows) > 2 {
		t.Fatalf("SHOW TABLE t REGIONS: %d regions after the merges", len(rows))
	}
}
