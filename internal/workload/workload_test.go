package workload_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/internal/workload"
	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/driver/drivertest"
	"github.com/strata-db/strata/internal/workload/kv"
	"github.com/strata-db/strata/internal/workload/ycsb"
)

func redisStore(t *testing.T, addr string, w workload.Workload) driver.Store {
	t.Helper()
	s, err := driver.Open(drivertest.Context(t), driver.Config{Driver: "resp", Addr: addr, Conns: 4, Timeout: 2 * time.Second}, w.Schema())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLoadInsertsEveryRecordWithProgress(t *testing.T) {
	srv := drivertest.StartRedis(t)
	w, err := ycsb.New(ycsb.Config{Workload: "a", Records: 1234, Fields: 3, FieldLength: 7})
	if err != nil {
		t.Fatal(err)
	}
	s := redisStore(t, srv.Addr, w)
	var log bytes.Buffer
	ctx := drivertest.Context(t)
	if err := workload.Load(ctx, w, s, workload.Options{Threads: 3, LoadBatch: 50, DisplayEvery: time.Hour, Log: &log}); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if n := c.DBSize(ctx).Val(); n != 1234 {
		t.Errorf("%d keys after loading 1234 records", n)
	}
	v, err := c.Get(ctx, "user"+"6284781860667377211").Bytes() // record 0: YCSB's first key
	if err != nil {
		t.Fatalf("record 0 under YCSB's key: %v", err)
	}
	if f, err := driver.DecodeRecord(v, 3); err != nil || len(f[2]) != 7 {
		t.Errorf("record 0: %q %v", v, err)
	}
	// The final progress line.
	if !strings.Contains(log.String(), "load usertable: 1234/1234 records (100.0%)") {
		t.Errorf("progress:\n%s", log.String())
	}
}

func TestRunStopsAtOperationCount(t *testing.T) {
	srv := drivertest.StartRedis(t)
	w, _ := kv.New(kv.Config{Keys: 100, ReadPercent: 50, ValueSize: 10})
	s := redisStore(t, srv.Addr, w)
	var out bytes.Buffer
	res := workload.Run(drivertest.Context(t), w, s, workload.Options{Threads: 7, Operations: 1000, Out: &out,
		Labels: []string{"driver=resp"}})
	if res.Ops+res.Errors != 1000 || res.Errors != 0 {
		t.Errorf("%d ops and %d errors, want 1000 ops", res.Ops, res.Errors)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	sum := lines[len(lines)-1]
	if !strings.HasPrefix(sum, "_summary workload=kv50 driver=resp ") || !strings.Contains(sum, " ops=1000 errors=0 ") {
		t.Errorf("summary line %q", sum)
	}
}

func TestRunReportsPeriodicallyAndStopsAtDuration(t *testing.T) {
	srv := drivertest.StartRedis(t)
	w, _ := kv.New(kv.Config{Keys: 100, ReadPercent: 95, ValueSize: 10})
	s := redisStore(t, srv.Addr, w)
	var out bytes.Buffer
	begin := time.Now()
	res := workload.Run(drivertest.Context(t), w, s, workload.Options{Threads: 2, Duration: 1100 * time.Millisecond,
		DisplayEvery: 250 * time.Millisecond, Out: &out})
	if el := time.Since(begin); el < 1100*time.Millisecond || el > 3*time.Second {
		t.Errorf("a 1.1s run took %v", el)
	}
	if res.Elapsed < time.Second {
		t.Errorf("elapsed %v", res.Elapsed)
	}
	text := out.String()
	if n := strings.Count(text, "   read "); n < 5 {
		// four periodic rows and the final one, at least
		t.Errorf("%d read rows:\n%s", n, text)
	}
	if strings.Count(text, "_elapsed___op__________errors(cum)") != 1 {
		t.Errorf("periodic header missing or repeated:\n%s", text)
	}
	if !strings.Contains(text, "_elapsed___op_______________errors_____ops(total)") {
		t.Errorf("final table missing:\n%s", text)
	}
	// The key space was not loaded: the misses are reported.
	if !strings.Contains(text, "reads found no value") {
		t.Errorf("misses not reported:\n%s", text)
	}
}

// Errors are counted per operation type, each distinct message is printed
// once as it happens and listed with its count at the end.
func TestRunCountsAndReportsErrors(t *testing.T) {
	srv := drivertest.StartRedis(t)
	w, _ := ycsb.New(ycsb.Config{Workload: "c", Records: 50, Fields: 2, FieldLength: 5})
	s := redisStore(t, srv.Addr, w)
	ctx := drivertest.Context(t)
	// No record was loaded: every read is a NOT_FOUND error.
	var out, log bytes.Buffer
	res := workload.Run(ctx, w, s, workload.Options{Threads: 2, Operations: 300, Out: &out, Log: &log})
	if res.Ops != 0 || res.Errors != 300 {
		t.Fatalf("%d ops, %d errors; want 0 and 300", res.Ops, res.Errors)
	}
	if !strings.Contains(log.String(), "error: read: record user") || !strings.Contains(log.String(), "not found") {
		t.Errorf("log:\n%s", log.String())
	}
	if !strings.Contains(out.String(), "errors by message:") || !strings.Contains(out.String(), "read_errors=300") {
		t.Errorf("report:\n%s", out.String())
	}

	// The server dies half way: the failures are counted, the successes
	// before it kept.
	if err := workload.Load(ctx, w, s, workload.Options{Threads: 2}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	log.Reset()
	go func() {
		time.Sleep(400 * time.Millisecond)
		srv.Kill()
	}()
	res = workload.Run(ctx, w, s, workload.Options{Threads: 2, Duration: time.Second, Out: &out, Log: &log})
	if res.Ops == 0 || res.Errors == 0 {
		t.Errorf("%d ops, %d errors: want both", res.Ops, res.Errors)
	}
	if !strings.Contains(out.String(), "connection refused") && !strings.Contains(out.String(), "EOF") {
		t.Errorf("no connection error reported:\n%s", out.String())
	}
}

func TestLoadFailsWhenInsertsFail(t *testing.T) {
	srv := drivertest.StartRedis(t)
	w, _ := ycsb.New(ycsb.Config{Workload: "a", Records: 500, Fields: 2, FieldLength: 5})
	s := redisStore(t, srv.Addr, w)
	srv.Kill()
	err := workload.Load(drivertest.Context(t), w, s, workload.Options{Threads: 2})
	if err == nil || !strings.Contains(err.Error(), "500 of 500 records were not inserted") {
		t.Errorf("load against a dead server: %v", err)
	}
}

// Cancelling the context stops the run gracefully: the operations in
// flight finish and the final report is printed.
func TestRunStopsOnCancel(t *testing.T) {
	srv := drivertest.StartRedis(t)
	w, _ := kv.New(kv.Config{Keys: 10, ReadPercent: 0, ValueSize: 10})
	s := redisStore(t, srv.Addr, w)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	var out bytes.Buffer
	res := workload.Run(ctx, w, s, workload.Options{Threads: 2, Out: &out})
	if res.Errors != 0 || res.Ops == 0 || !strings.Contains(out.String(), "_summary") {
		t.Errorf("%d ops %d errors\n%s", res.Ops, res.Errors, out.String())
	}
}
