package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/tablecodec"
)

func startSplitNode(t *testing.T, cfg Config) (*Node, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := freeAddr(t)
	cfg.DataDir, cfg.HTTPAddr = t.TempDir(), addr
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, "http://" + addr
}

func putRows(t *testing.T, n *Node, table int64, from, to int, value []byte) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < to; i += 100 {
		txn, err := n.Storage().Begin(ctx, kv.TxnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for h := i; h < min(i+100, to); h++ {
			_ = txn.Set(tablecodec.RecordKey(table, int64(h)), value)
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func waitRegions(t *testing.T, base string, want int, d time.Duration) []regionJSON {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		rs := dataRegions(t, base)
		if len(rs) >= want || time.Now().After(deadline) {
			return rs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A table that outgrows --region-max-size is split by the checker, each
// time at a row's key (never inside one), until every region is below
// the limit; every row stays readable.
func TestSplitBySize(t *testing.T) {
	n, base := startSplitNode(t, Config{RegionMaxSize: 64 << 10, SplitCheckInterval: 100 * time.Millisecond})
	putRows(t, n, 100, 0, 2000, bytes.Repeat([]byte("v"), 200)) // about 450 KiB
	rs := waitRegions(t, base, 6, 20*time.Second)
	if len(rs) < 6 {
		t.Fatalf("%d regions after 450 KiB with a 64 KiB limit", len(rs))
	}
	for _, r := range rs[1:] {
		k, _ := url.QueryUnescape(r.StartKey)
		if !bytes.Equal([]byte(k), tablecodec.TablePrefix(100)) {
			tid, h, err := tablecodec.DecodeRecordKey([]byte(k))
			if err != nil || tid != 100 || !bytes.Equal([]byte(k), tablecodec.RecordKey(tid, h)) {
				t.Fatalf("region %d starts at %q: not a row's key", r.ID, k)
			}
		}
	}
	ctx := context.Background()
	txn, _ := n.Storage().Begin(ctx, kv.TxnOptions{})
	for _, h := range []int64{0, 777, 1999} {
		if v, err := txn.Get(ctx, tablecodec.RecordKey(100, h)); err != nil || len(v) != 200 {
			t.Fatalf("row %d: %d bytes, %v", h, len(v), err)
		}
	}
}

// A region whose queries per second stay above --region-split-qps is
// split at the median of the keys it serves; the split leaves both halves
// busy. A single node splits by load only when told to (the halves could
// go nowhere).
func TestSplitByLoad(t *testing.T) {
	n, base := startSplitNode(t, Config{RegionSplitQPS: 100, SplitCheckInterval: 300 * time.Millisecond})
	n.split.loadAlone.Store(true) // a cluster of one does not split by load
	putRows(t, n, 200, 0, 500, []byte("x"))
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	deadline := time.Now().Add(15 * time.Second)
	split := false
	for !split && time.Now().Before(deadline) {
		for i := 0; i < 200; i++ {
			txn, _ := n.Storage().Begin(ctx, kv.TxnOptions{})
			if _, err := txn.Get(ctx, tablecodec.RecordKey(200, int64(rng.Intn(500)))); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range dataRegions(t, base) {
			k, _ := url.QueryUnescape(r.StartKey)
			if tid, h, err := tablecodec.DecodeRecordKey([]byte(k)); err == nil && tid == 200 && h > 50 && h < 450 {
				split = true
			}
		}
	}
	if !split {
		t.Fatalf("no split by load inside the busy table: %+v", dataRegions(t, base))
	}
}

// With SplitTable every table's rows begin a region of their own.
func TestSplitAtTables(t *testing.T) {
	n, base := startSplitNode(t, Config{SplitTable: true, SplitCheckInterval: 100 * time.Millisecond})
	for _, tid := range []int64{300, 301, 302} {
		putRows(t, n, tid, 0, 10, []byte("x"))
	}
	rs := waitRegions(t, base, 3, 10*time.Second)
	starts := map[string]bool{}
	for _, r := range rs {
		k, _ := url.QueryUnescape(r.StartKey)
		starts[k] = true
	}
	for _, tid := range []int64{301, 302} {
		if !starts[string(tablecodec.TablePrefix(tid))] {
			t.Fatalf("no region starts at table %d: %v", tid, fmt.Sprint(rs))
		}
	}
}

// SPLIT TABLE and SHOW TABLE ... REGIONS, TiDB's statements: regions at
// even handle ranges or given handles and index values, listed with
// TiDB's key names; bad input gets MySQL errors.
func TestSplitTableSQL(t *testing.T) {
	n, _ := startSplitNode(t, Config{SplitCheckInterval: -1})
	ctx := context.Background()
	s := n.SQL().NewSession("root", "localhost")
	exec := func(q string) [][]string {
		t.Helper()
		res, err := s.Execute(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var out [][]string
		for _, r := range res[len(res)-1].Rows {
			var row []string
			for _, d := range r {
				row = append(row, d.String())
			}
			out = append(out, row)
		}
		return out
	}
	exec("CREATE DATABASE d")
	exec("USE d")
	exec("CREATE TABLE t (id BIGINT PRIMARY KEY, c INT, KEY ic (c))")
	exec("INSERT INTO t VALUES (1, 1), (5000, 2), (9999, 3)")
	if got := exec("SPLIT TABLE t BETWEEN (0) AND (10000) REGIONS 4"); got[0][0] != "4" {
		t.Fatalf("split between: %v", got)
	}
	rows := exec("SHOW TABLE t REGIONS")
	var starts []string
	for _, r := range rows {
		starts = append(starts, r[1])
	}
	want := []string{"t_0_r_0", "t_0_r_2500", "t_0_r_5000", "t_0_r_7500"}
	if len(rows) != 5 {
		t.Fatalf("SHOW TABLE t REGIONS: %v", rows)
	}
	for i, w := range want {
		if !strings.HasSuffix(starts[i+1], strings.TrimPrefix(w, "t_0")) {
			t.Fatalf("region %d starts at %s, want ..%s (all: %v)", i+1, starts[i+1], strings.TrimPrefix(w, "t_0"), starts)
		}
	}
	if got := exec("SPLIT TABLE t BY (100), (2500), (200)"); got[0][0] != "2" { // 2500 is a boundary already
		t.Fatalf("split by: %v", got)
	}
	if got := exec("SPLIT TABLE t INDEX ic BY (10), (20)"); got[0][0] != "2" {
		t.Fatalf("split index: %v", got)
	}
	if rows := exec("SHOW TABLE t INDEX ic REGIONS"); len(rows) != 3 {
		t.Fatalf("SHOW TABLE t INDEX ic REGIONS: %v", rows)
	}
	if rows := exec("SELECT COUNT(*) FROM t WHERE c > 0"); rows[0][0] != "3" {
		t.Fatalf("rows after the splits: %v", rows)
	}
	for q, code := range map[string]string{
		"SPLIT TABLE nosuch BY (1)":                          "1146",
		"SPLIT TABLE t INDEX nosuch BY (1)":                  "1176",
		"SPLIT TABLE t BETWEEN (10) AND (1) REGIONS 4":       "1210",
		"SPLIT TABLE t BETWEEN (0) AND (100) REGIONS 100000": "1210",
		"SHOW TABLE nosuch REGIONS":                          "1146",
	} {
		if _, err := s.Execute(ctx, q); err == nil || !strings.Contains(err.Error(), code) {
			t.Fatalf("%s: %v, want error %s", q, err, code)
		}
	}
}

// AUTO_RANDOM and SHARD_ROW_ID_BITS (TiDB's): generated keys carry shard
// bits, so consecutive inserts scatter over the key space; one
// transaction's rows share a shard; SHOW CREATE TABLE keeps the options;
// misuse gets TiDB's error.
func TestAutoRandom(t *testing.T) {
	n, _ := startSplitNode(t, Config{SplitCheckInterval: -1})
	ctx := context.Background()
	s := n.SQL().NewSession("root", "localhost")
	exec := func(q string) [][]string {
		t.Helper()
		res, err := s.Execute(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var out [][]string
		for _, r := range res[len(res)-1].Rows {
			var row []string
			for _, d := range r {
				row = append(row, d.String())
			}
			out = append(out, row)
		}
		return out
	}
	exec("CREATE DATABASE d")
	exec("USE d")
	exec("CREATE TABLE ar (id BIGINT PRIMARY KEY AUTO_RANDOM(4), v INT)")
	exec("CREATE TABLE sr (v INT) SHARD_ROW_ID_BITS = 3")
	for i := 0; i < 40; i++ {
		exec(fmt.Sprintf("INSERT INTO ar (v) VALUES (%d)", i))
		exec(fmt.Sprintf("INSERT INTO sr (v) VALUES (%d)", i))
	}
	shards := map[int64]bool{}
	for _, r := range exec("SELECT id FROM ar") {
		var id int64
		fmt.Sscan(r[0], &id)
		if id <= 0 {
			t.Fatalf("id %d", id)
		}
		shards[id>>59] = true
	}
	if len(shards) < 6 {
		t.Fatalf("40 inserts used %d of 16 shards", len(shards))
	}
	exec("BEGIN")
	exec("INSERT INTO ar (v) VALUES (100), (101), (102)")
	exec("COMMIT")
	ids := exec("SELECT id >> 59 FROM ar WHERE v >= 100")
	if len(ids) != 3 || ids[0][0] != ids[1][0] || ids[1][0] != ids[2][0] {
		t.Fatalf("one transaction's rows in shards %v", ids)
	}
	if rows := exec("SELECT COUNT(*) FROM sr"); rows[0][0] != "40" {
		t.Fatalf("sr rows: %v", rows)
	}
	if sc := exec("SHOW CREATE TABLE ar")[0][1]; !strings.Contains(sc, "AUTO_RANDOM(4)") {
		t.Fatalf("SHOW CREATE TABLE: %s", sc)
	}
	if sc := exec("SHOW CREATE TABLE sr")[0][1]; !strings.Contains(sc, "SHARD_ROW_ID_BITS=3") {
		t.Fatalf("SHOW CREATE TABLE: %s", sc)
	}
	// What SHOW CREATE TABLE prints creates the same table (a dump's
	// round trip).
	exec(strings.Replace(exec("SHOW CREATE TABLE ar")[0][1], "`ar`", "`ar2`", 1))
	if sc := exec("SHOW CREATE TABLE ar2")[0][1]; !strings.Contains(sc, "AUTO_RANDOM(4)") {
		t.Fatalf("SHOW CREATE TABLE after the round trip: %s", sc)
	}
	// PRE_SPLIT_REGIONS: 2^n regions from the start, one per shard range.
	exec("CREATE TABLE ps (id BIGINT PRIMARY KEY AUTO_RANDOM(5), v INT) PRE_SPLIT_REGIONS = 2")
	if rows := exec("SHOW TABLE ps REGIONS"); len(rows) != 4 {
		t.Fatalf("SHOW TABLE ps REGIONS after PRE_SPLIT_REGIONS = 2: %v", rows)
	}
	for _, q := range []string{
		"CREATE TABLE bad1 (id INT PRIMARY KEY AUTO_RANDOM, v INT)",
		"CREATE TABLE bad2 (id BIGINT AUTO_RANDOM, v INT)",
		"CREATE TABLE bad3 (id BIGINT PRIMARY KEY AUTO_RANDOM(16))",
	} {
		if _, err := s.Execute(ctx, q); err == nil || !strings.Contains(err.Error(), "8216") {
			t.Fatalf("%s: %v, want 8216", q, err)
		}
	}
}
