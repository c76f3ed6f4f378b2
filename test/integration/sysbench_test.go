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

var sysbenchErrors = regexp.MustCompile(`(?m)^\s*errors:\s+(\d+)`)

// TestSysbenchSmoke runs a short sysbench oltp_read_write (prepared
// statements, transactions, range scans, index updates) and requires it to
// finish without errors.
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
		m := sysbenchErrors.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("sysbench run printed no error count:\n%s", text)
		}
		if errs, _ := strconv.Atoi(m[1]); errs != 0 {
			t.Fatalf("sysbench run reported %d errors:\n%s", errs, text)
		}
		t.Logf("sysbench run:\n%s", text)
	}
}
