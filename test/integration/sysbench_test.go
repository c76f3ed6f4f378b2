package integration

import (
	"context"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	sysbenchTransactions  = regexp.MustCompile(`(?m)^\s*transactions:\s+(\d+)`)
	sysbenchIgnoredErrors = regexp.MustCompile(`(?m)^\s*ignored errors:\s+(\d+)`)
	sysbenchReconnects    = regexp.MustCompile(`(?m)^\s*reconnects:\s+(\d+)`)
)

// TestSysbenchSmoke runs a short sysbench oltp_read_write (prepared
// statements, transactions, range scans, index updates) and requires it to
// finish without errors: sysbench stops a thread with FATAL and exits
// non-zero on any error other than the ones it is told to retry (1213
// deadlock / write conflict and 1205 lock wait timeout, its default
// --mysql-ignore-errors); those are counted as "ignored errors" and are the
// expected cost of optimistic transactions under its skewed key choice.
// The connection must never be lost (reconnects: 0).
func TestSysbenchSmoke(t *testing.T) {
	sysbench, err := exec.LookPath("sysbench")
	if err != nil {
		t.Skip("sysbench is not on PATH")
	}
	n := StartNode(t)
	mustExec(t, n.DB(t, ""), "CREATE DATABASE sbtest")
	_, port, err := net.SplitHostPort(n.SQLAddr)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"oltp_read_write", "--tables=2", "--table-size=1000", "--threads=4", "--time=10",
		"--mysql-host=127.0.0.1", "--mysql-port=" + port, "--mysql-user=root", "--mysql-db=sbtest"}
	for _, phase := range []string{"prepare", "run", "cleanup"} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		out, err := exec.CommandContext(ctx, sysbench, append(args, phase)...).CombinedOutput()
		cancel()
		text := string(out)
		if err != nil || strings.Contains(text, "FATAL") {
			t.Fatalf("sysbench %s failed (%v):\n%s", phase, err, text)
		}
		if phase != "run" {
			continue
		}
		count := func(re *regexp.Regexp) int {
			m := re.FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("sysbench run output has no %s line:\n%s", re, text)
			}
			v, _ := strconv.Atoi(m[1])
			return v
		}
		if txns := count(sysbenchTransactions); txns == 0 {
			t.Fatalf("sysbench committed no transactions:\n%s", text)
		}
		if r := count(sysbenchReconnects); r != 0 {
			t.Fatalf("sysbench lost its connection %d times:\n%s", r, text)
		}
		t.Logf("sysbench retried %d transactions after write conflicts", count(sysbenchIgnoredErrors))
		t.Logf("sysbench run:\n%s", text)
	}
}
