// Package workload runs `strata workload` against a real strata process
// (started by test/integration's harness), over its MySQL and Redis
// listeners, the way bench/kv.sh does.
package workload

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/internal/workload/cli"
	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/driver/drivertest"
	"github.com/strata-db/strata/test/integration"
)

func TestMain(m *testing.M) {
	code := m.Run()
	integration.CleanupBinary()
	os.Exit(code)
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cli.Main(ctx, args, &out, &errb)
	if err != nil {
		t.Logf("strata workload %s:\n%s\n%s", strings.Join(args, " "), out.String(), errb.String())
	}
	return out.String(), err
}

var summaryOps = regexp.MustCompile(`(?m)^_summary .* ops=(\d+) errors=(\d+) `)

// mustSucceed checks that a run did n operations (any number when n < 0),
// all successful.
func mustSucceed(t *testing.T, n int, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	m := summaryOps.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line:\n%s", out)
	}
	ops, _ := strconv.Atoi(m[1])
	if m[2] != "0" || ops == 0 || (n >= 0 && ops != n) {
		t.Fatalf("ops=%s errors=%s, want %d successful operations:\n%s", m[1], m[2], n, out)
	}
	return out
}

func TestYCSBOverSQL(t *testing.T) {
	n := integration.StartNode(t)
	sqlArgs := []string{"--driver", "sql", "--addr", n.SQLAddr, "--threads", "4"}
	// Before init there is no table: the run says what to do.
	_, err := run(t, append([]string{"run", "ycsb", "--operations", "10"}, sqlArgs...)...)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "strata workload init ycsb") {
		t.Fatalf("run before init: %v", err)
	}
	mustSucceed(t, 300, append([]string{"run", "ycsb", "--workload", "a", "--init", "--records", "400", "--operations", "300"}, sqlArgs...)...)
	for _, w := range []string{"b", "c", "f", "d"} {
		mustSucceed(t, 200, append([]string{"run", "ycsb", "--workload", w, "--records", "400", "--operations", "200"}, sqlArgs...)...)
	}
	// d inserted records 400 on; e inserts the same numbers, so it starts
	// from a fresh load, as YCSB requires.
	out := mustSucceed(t, 100, append([]string{"run", "ycsb", "--workload", "e", "--init", "--drop", "--records", "400", "--operations", "100", "--max-scan-length", "10"}, sqlArgs...)...)
	if !strings.Contains(out, "scan_ops/sec=") {
		t.Errorf("workload e ran no scans:\n%s", out)
	}
	// The table is YCSB's usertable and holds the loaded records plus e's
	// inserts.
	var count int
	if err := n.DB(t, "ycsb").QueryRow("SELECT COUNT(*) FROM usertable").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count < 400 || count > 400+100 {
		t.Errorf("usertable holds %d rows", count)
	}
}

func TestKV95OverSQL(t *testing.T) {
	n := integration.StartNode(t)
	out := mustSucceed(t, 500, "run", "kv", "--read-percent", "95", "--init", "--keys", "300", "--driver", "sql", "--addr", n.SQLAddr, "--operations", "500")
	if strings.Contains(out, "found no value") {
		t.Errorf("reads missed after init:\n%s", out)
	}
}

func TestYCSBAndKVOverRESP(t *testing.T) {
	n := integration.StartNode(t)
	respArgs := []string{"--driver", "resp", "--addr", n.RESPAddr, "--threads", "4"}
	mustSucceed(t, 400, append([]string{"run", "ycsb", "--workload", "a", "--init", "--records", "300", "--operations", "400"}, respArgs...)...)
	mustSucceed(t, 400, append([]string{"run", "ycsb", "--workload", "c", "--records", "300", "--operations", "400"}, respArgs...)...)
	mustSucceed(t, 400, append([]string{"run", "ycsb", "--workload", "f", "--records", "300", "--operations", "400", "--resp-records", "hash", "--init", "--drop"}, respArgs...)...)
	mustSucceed(t, 400, append([]string{"run", "kv", "--read-percent", "95", "--init", "--keys", "200", "--operations", "400"}, respArgs...)...)
	_, err := run(t, append([]string{"run", "ycsb", "--workload", "e"}, respArgs...)...)
	if err == nil || !strings.Contains(err.Error(), "cannot scan a range of keys in order") {
		t.Errorf("workload e over resp: %v", err)
	}
}

func TestSQLStoreConformance(t *testing.T) {
	n := integration.StartNode(t)
	ctx := drivertest.Context(t)
	s, err := driver.Open(ctx, driver.Config{Driver: "sql", Addr: n.SQLAddr, Database: "ycsb", Conns: 4, Timeout: 10 * time.Second}, drivertest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := n.DB(t, "ycsb")
	drivertest.Conformance(t, s, drivertest.Native{
		Peek: func(ctx context.Context, key string) ([][]byte, error) {
			f := make([][]byte, 4)
			err := db.QueryRowContext(ctx, "SELECT FIELD0, FIELD1, FIELD2, FIELD3 FROM usertable WHERE YCSB_KEY = ?", key).
				Scan(&f[0], &f[1], &f[2], &f[3])
			if errors.Is(err, sql.ErrNoRows) {
				return nil, nil
			}
			return f, err
		},
		Scans: true,
	})
	// An update of a record that is not there is an error on SQL.
	if err := s.Update(ctx, "user-none", 0, drivertest.Fields(4, 10, "x")); err == nil {
		t.Errorf("update of a missing row succeeded")
	}
}

func TestRESPStoreConformanceOnStrata(t *testing.T) {
	n := integration.StartNode(t)
	c := redis.NewClient(&redis.Options{Addr: n.RESPAddr, Protocol: 2})
	defer c.Close()
	s, err := driver.Open(drivertest.Context(t), driver.Config{Driver: "resp", Addr: n.RESPAddr, Conns: 4, Timeout: 10 * time.Second}, drivertest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	drivertest.Conformance(t, s, redisNative(c, false))
}

// redisNative reads and writes the records of a Strata node through its
// Redis port (records in the resp driver's value layout).
func redisNative(c *redis.Client, scans bool) drivertest.Native {
	return drivertest.Native{
		Peek: func(ctx context.Context, key string) ([][]byte, error) {
			v, err := c.Get(ctx, key).Bytes()
			if errors.Is(err, redis.Nil) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return driver.DecodeRecord(v, 4)
		},
		PutRaw: func(ctx context.Context, key string, v []byte) error { return c.Set(ctx, key, v, 0).Err() },
		Exists: func(ctx context.Context, key string) (bool, error) {
			k, err := c.Exists(ctx, key).Result()
			return k == 1, err
		},
		Scans: scans,
	}
}

// The strata driver (Strata's Go client, each request to its region's
// leader) keeps records in the resp driver's layout: redis-cli reads what
// it wrote, and it reads what Redis clients wrote; it scans in key order,
// so YCSB's workload e runs on it.
func TestStrataStoreConformance(t *testing.T) {
	n := integration.StartNode(t)
	c := redis.NewClient(&redis.Options{Addr: n.RESPAddr, Protocol: 2})
	defer c.Close()
	s, err := driver.Open(drivertest.Context(t), driver.Config{Driver: "strata", Addr: n.GRPCAddr, Timeout: 10 * time.Second}, drivertest.Schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	drivertest.Conformance(t, s, redisNative(c, true))
	// Writers of one key conflict; each write is retried until it lands,
	// as Strata's SET does, so none fails.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if err := s.Update(drivertest.Context(t), "user-hot", -1, drivertest.Fields(4, 10, fmt.Sprint(w))); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("update of a contended key: %v", err)
	}
	args := []string{"--driver", "strata", "--addr", n.GRPCAddr, "--threads", "4"}
	mustSucceed(t, 400, append([]string{"run", "ycsb", "--workload", "a", "--init", "--drop", "--records", "300", "--operations", "400"}, args...)...)
	mustSucceed(t, 100, append([]string{"run", "ycsb", "--workload", "e", "--records", "300", "--operations", "100", "--max-scan-length", "10"}, args...)...)
	mustSucceed(t, 400, append([]string{"run", "kv", "--read-percent", "95", "--init", "--keys", "200", "--operations", "400"}, args...)...)
}

// TPC-C end to end on a scaled-down warehouse: init loads it, run drives
// the five transactions without an error, and every consistency condition
// holds afterwards.
func TestTPCC(t *testing.T) {
	n := integration.StartNode(t)
	common := []string{"--addr", n.SQLAddr, "--warehouses", "1", "--scale", "100"}
	if _, err := run(t, append([]string{"init", "tpcc", "--threads", "4"}, common...)...); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, append([]string{"run", "tpcc", "--threads", "4", "--duration", "4s", "--display-every", "2s"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^_summary workload=tpcc .* tpmC=([0-9.]+) .* ops=(\d+) errors=(\d+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line:\n%s", out)
	}
	if m[3] != "0" || m[2] == "0" {
		t.Fatalf("tpmC=%s ops=%s errors=%s:\n%s", m[1], m[2], m[3], out)
	}
	for _, tx := range []string{"new_order", "payment", "order_status", "delivery", "stock_level"} {
		if !strings.Contains(out, tx) {
			t.Errorf("no %s in the report:\n%s", tx, out)
		}
	}
	out, err = run(t, append([]string{"check", "tpcc"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "all 11 consistency conditions hold") {
		t.Fatalf("check:\n%s", out)
	}
	// Under a quota far below what the check's joins and aggregations
	// hold, they spill to disk and the conditions still hold; without
	// spilling they fail with 8175.
	db := n.DB(t, "")
	if _, err := db.Exec("SET GLOBAL tidb_mem_quota_query = 262144"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("SET GLOBAL tidb_enable_tmp_storage_on_oom = OFF"); err != nil {
		t.Fatal(err)
	}
	if out, err = run(t, append([]string{"check", "tpcc"}, common...)...); err == nil || !strings.Contains(out, "8175") {
		t.Fatalf("check under a small quota without spilling: err=%v\n%s", err, out)
	}
	if _, err := db.Exec("SET GLOBAL tidb_enable_tmp_storage_on_oom = ON"); err != nil {
		t.Fatal(err)
	}
	if out, err = run(t, append([]string{"check", "tpcc"}, common...)...); err != nil || !strings.Contains(out, "all 11 consistency conditions hold") {
		t.Fatalf("check under a small quota, spilling: err=%v\n%s", err, out)
	}
}
