package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/strata-db/strata/internal/workload/driver/drivertest"
)

func parse(t *testing.T, args string) (*Invocation, string, error) {
	t.Helper()
	var stderr bytes.Buffer
	inv, err := Parse(strings.Fields(args), &stderr)
	return inv, stderr.String(), err
}

func TestParseDefaults(t *testing.T) {
	inv, _, err := parse(t, "run ycsb")
	if err != nil {
		t.Fatal(err)
	}
	d := inv.Driver
	if d.Driver != "resp" || d.Addr != "127.0.0.1:6380" || d.Conns != 8 || d.RESPRecords != "value" || d.Database != "ycsb" {
		t.Errorf("driver defaults %+v", d)
	}
	y := inv.YCSB
	if y.Workload != "a" || y.Records != 10000 || y.Fields != 10 || y.FieldLength != 100 || y.Distribution != "" {
		t.Errorf("ycsb defaults %+v", y)
	}
	if inv.Init || inv.Options.Threads != 8 || inv.Options.DisplayEvery != time.Second || inv.Options.Seed == 0 {
		t.Errorf("run defaults %+v %+v", inv, inv.Options)
	}

	inv, _, err = parse(t, "init kv --driver sql --read-percent 95 --keys 500 --value-size 8 --threads 3")
	if err != nil {
		t.Fatal(err)
	}
	if !inv.Init || inv.Driver.Addr != "127.0.0.1:4000" || inv.Driver.Database != "kv" || inv.Driver.Conns != 3 ||
		inv.KV.Keys != 500 || inv.KV.ReadPercent != 95 || inv.KV.ValueSize != 8 {
		t.Errorf("init kv: %+v", inv)
	}

	inv, _, err = parse(t, "run ycsb --driver etcd --threads 40 --endpoints a:1,b:2 --workload D --distribution uniform --duration 1m --operations 5 --seed 9")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(inv.Driver.Endpoints, " "); got != "a:1 b:2" || inv.Driver.Conns != 3 {
		t.Errorf("etcd endpoints %q conns %d", got, inv.Driver.Conns)
	}
	if inv.YCSB.Workload != "D" || inv.YCSB.Distribution != "uniform" || inv.Options.Duration != time.Minute ||
		inv.Options.Operations != 5 || inv.YCSB.Operations != 5 || inv.Options.Seed != 9 {
		t.Errorf("flags not taken: %+v %+v", inv.YCSB, inv.Options)
	}
	inv, _, _ = parse(t, "run ycsb --driver etcd")
	if got := strings.Join(inv.Driver.Endpoints, " "); got != "127.0.0.1:2379" {
		t.Errorf("etcd default endpoints %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args, want string
		usage      bool // ErrUsage, message on stderr
	}{
		{"", "Usage:", true},
		{"help", "--records", true},
		{"load ycsb", `unknown command "load"`, true},
		{"run", "name the workload", true},
		{"run --driver sql", "name the workload", true},
		{"run tpcc", `unknown workload "tpcc"`, true},
		{"run ycsb --no-such-flag", "flag provided but not defined: -no-such-flag", true},
		{"run ycsb --threads x", "invalid value", true},
		{"run ycsb extra", `unexpected argument "extra"`, true},
		{"run ycsb --driver mongo", `unknown --driver "mongo"`, false},
		{"run ycsb --workload z", `unknown YCSB workload "z"`, false},
		{"run ycsb --distribution pareto", `unknown request distribution "pareto"`, false},
		{"run kv --distribution latest", `unknown key distribution "latest"`, false},
		{"run kv --read-percent 120", "between 0 and 100", false},
		{"run ycsb --threads 0", "--threads must be at least 1", false},
		{"run ycsb --endpoints x:1", "--endpoints is for --driver etcd", false},
		{"run ycsb --drop", "--drop deletes the records before loading", false},
		{"run ycsb --resp-records list", "--resp-records must be value or hash", false},
		{"run ycsb --records 0", "records must be at least 1", false},
		{"run ycsb --display-every 0s", "--display-every must be positive", false},
	} {
		_, stderr, err := parse(t, c.args)
		if err == nil {
			t.Errorf("%q: accepted", c.args)
			continue
		}
		msg := err.Error()
		if c.usage {
			if !errors.Is(err, ErrUsage) {
				t.Errorf("%q: %v, want a usage error", c.args, err)
			}
			msg = stderr
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("%q: %q, want it to contain %q", c.args, msg, c.want)
		}
	}
	// Accepted with init, or run --init.
	for _, ok := range []string{"init ycsb --drop", "run ycsb --init --drop"} {
		if _, _, err := parse(t, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

func mainOut(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Main(drivertest.Context(t), args, &out, &errb)
	return out.String(), errb.String(), err
}

// The resp driver refuses workload e before connecting, saying why.
func TestWorkloadEOnRESPIsRefused(t *testing.T) {
	_, _, err := mainOut(t, "run", "ycsb", "--workload", "e", "--addr", drivertest.FreeAddr(t))
	if err == nil || !strings.Contains(err.Error(), "scans ranges") || !strings.Contains(err.Error(), "SCAN walks it in no key order") {
		t.Errorf("workload e on resp: %v", err)
	}
}

func TestInitRunAgainstRedis(t *testing.T) {
	srv := drivertest.StartRedis(t)
	common := []string{"--addr", srv.Addr, "--records", "300", "--threads", "3"}
	_, stderr, err := mainOut(t, append([]string{"init", "ycsb"}, common...)...)
	if err != nil {
		t.Fatal(err, stderr)
	}
	if !strings.Contains(stderr, "loaded 300 records into usertable") {
		t.Errorf("init output:\n%s", stderr)
	}
	out, stderr, err := mainOut(t, append([]string{"run", "ycsb", "--workload", "b", "--operations", "500", "--seed", "7"}, common...)...)
	if err != nil {
		t.Fatal(err, stderr)
	}
	if !strings.Contains(out, "_summary workload=ycsb-b driver=resp threads=3 seed=7 ") || !strings.Contains(out, " ops=500 errors=0 ") {
		t.Errorf("run output:\n%s", out)
	}

	// Records laid out as hashes, read back as values: every read is a
	// server error (WRONGTYPE), and a run where everything failed fails.
	if _, stderr, err := mainOut(t, append([]string{"init", "ycsb", "--drop", "--resp-records", "hash"}, common...)...); err != nil {
		t.Fatal(err, stderr)
	}
	out, stderr, err = mainOut(t, append([]string{"run", "ycsb", "--workload", "c", "--operations", "100"}, common...)...)
	if !errors.Is(err, ErrAllFailed) {
		t.Errorf("all reads failing: %v", err)
	}
	if !strings.Contains(out, "WRONGTYPE") || !strings.Contains(stderr, "error: read: WRONGTYPE") || !strings.Contains(out, "errors=100") {
		t.Errorf("WRONGTYPE not reported:\n%s\n%s", out, stderr)
	}

	// Nothing listening: a clear error before any run.
	srv.Kill()
	_, _, err = mainOut(t, append([]string{"run", "ycsb", "--operations", "10", "--timeout", "1s"}, common...)...)
	if err == nil || !strings.Contains(err.Error(), "resp server at "+srv.Addr) {
		t.Errorf("dead server: %v", err)
	}
}

func TestRunInitKV95AgainstRedis(t *testing.T) {
	srv := drivertest.StartRedis(t)
	out, stderr, err := mainOut(t, "run", "kv", "--read-percent", "95", "--init", "--keys", "200", "--addr", srv.Addr,
		"--duration", "500ms", "--display-every", "100ms")
	if err != nil {
		t.Fatal(err, stderr)
	}
	if !strings.Contains(out, "workload=kv95") || strings.Contains(out, "found no value") {
		t.Errorf("kv95 after init:\n%s", out)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	if n := c.DBSize(context.Background()).Val(); n != 200 {
		t.Errorf("%d keys after loading 200", n)
	}
}
