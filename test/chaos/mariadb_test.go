package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/strata-db/strata/test/chaos/checker"
	"github.com/strata-db/strata/test/chaos/history"
)

// The list-append checkers are tested against a database with known
// anomalies: MariaDB (Debian's mariadb-server). Its REPEATABLE READ reads
// from a snapshot but writes to the latest row, so transactions that read
// the same version of a key both append to it (lost update) and write skew
// (G2-item) goes through; in SERIALIZABLE every read locks, and neither
// checker may find anything. Jepsen documented the same of MySQL.
//
// The test skips when mariadbd is not installed, unless
// CHAOS_REQUIRE_MARIADB=1 (scripts/test.sh installs it and sets that).
func TestCheckersAgainstMariaDB(t *testing.T) {
	mariadbd, err := exec.LookPath("mariadbd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mariadbd"); serr != nil {
			if os.Getenv("CHAOS_REQUIRE_MARIADB") == "1" {
				t.Fatal("mariadbd is not installed (apt-get install mariadb-server)")
			}
			t.Skip("mariadbd is not installed (apt-get install mariadb-server)")
		}
		mariadbd = "/usr/sbin/mariadbd"
	}
	addr := startMariaDB(t, mariadbd)
	for _, tc := range []struct {
		level string
		want  []string // anomaly types both checkers must find; none means valid
	}{
		{"REPEATABLE-READ", []string{"lost-update", "G2-item"}},
		{"SERIALIZABLE", nil},
	} {
		t.Run(tc.level, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.jsonl")
			ops := runListAppendOn(t, addr, tc.level, path, 8, 6*time.Second)
			ours := checker.CheckListAppend(ops, checker.ListAppendOptions{Model: checker.Serializable})
			theirs := checker.CheckAdya(path, checker.Serializable)
			t.Logf("%s: %d history records; %s; %s", tc.level, len(ops), ours.Summary(), theirs.Summary())
			if ours.Counts["txn ok"] < 100 {
				t.Fatalf("only %d transactions committed", ours.Counts["txn ok"])
			}
			if tc.want == nil {
				if ours.Verdict != checker.Valid {
					t.Errorf("our checker: want valid in %s, got %s: %v", tc.level, ours.Summary(), ours.Anomalies)
				}
				if theirs.Verdict == checker.Invalid {
					t.Errorf("adya: want valid in %s, got %s", tc.level, theirs.Summary())
				}
				return
			}
			for _, typ := range tc.want {
				if ours.Found[typ] == 0 {
					t.Errorf("our checker did not find %s in %s: %s", typ, tc.level, ours.Summary())
				}
			}
			if ours.Verdict != checker.Invalid {
				t.Errorf("our checker: want invalid, got %s", ours.Summary())
			}
			if theirs.Verdict != checker.Unknown {
				if d := checker.Agree(ours, theirs); d != "" {
					t.Errorf("the checkers disagree: %s", d)
				}
				if !slices.Contains(theirs.Types(), "lost-update") {
					t.Errorf("adya did not find lost-update: %s", theirs.Summary())
				}
			}
		})
	}
}

// startMariaDB initialises a data directory and starts mariadbd on a free
// loopback port with grant tables off (any user, no password), stopped by
// PID when the test ends.
func startMariaDB(t *testing.T, mariadbd string) string {
	t.Helper()
	dir := t.TempDir()
	install := exec.Command("mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(mariadbd, "--no-defaults", "--user=root", "--datadir="+filepath.Join(dir, "data"),
		"--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port), "--socket="+filepath.Join(dir, "m.sock"),
		"--pid-file="+filepath.Join(dir, "m.pid"), "--log-error="+filepath.Join(dir, "error.log"),
		"--skip-log-bin", "--skip-grant-tables", "--innodb-buffer-pool-size=64M", "--innodb-lock-wait-timeout=2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, _ := sql.Open("mysql", "root@tcp("+addr+")/")
		err := db.Ping()
		if err == nil {
			_, err = db.Exec("CREATE DATABASE IF NOT EXISTS chaos")
		}
		db.Close()
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("mariadbd did not start: %v\n%s", err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runListAppendOn runs the list-append workload (the harness's generator
// and transactions) against addr at the given isolation level and returns
// the history, also written to path.
func runListAppendOn(t *testing.T, addr, level, path string, workers int, d time.Duration) []history.Op {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", addr, "chaos"
	cfg.Params = map[string]string{"tx_isolation": "'" + level + "'"}
	cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 5*time.Second
	setupDB, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer setupDB.Close()
	wl, _ := NewWorkload("list-append")
	la := wl.(*listAppend)
	la.slots = 4 // few keys: contention
	if err := wl.Setup(context.Background(), setupDB, nil); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := setupDB.QueryRow("SELECT @@tx_isolation").Scan(&got); err != nil || !strings.EqualFold(got, level) {
		t.Fatalf("session isolation %q (%v), want %s", got, err, level)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rec := history.NewRecorder(time.Now(), f)
	gen := &generator{wl: wl, r: rand.New(rand.NewSource(1))}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			db, _ := sql.Open("mysql", cfg.FormatDSN())
			db.SetMaxOpenConns(1)
			defer db.Close()
			process := w
			for ctx.Err() == nil {
				fn, value := gen.next()
				rec.Add(history.Op{Type: history.Invoke, F: fn, Process: process, Value: history.Value(value)})
				typ, out, err := listAppendTxn(context.Background(), db, fn, value)
				op := history.Op{Type: typ, F: fn, Process: process, Value: history.Value(out)}
				if err != nil {
					op.Error = err.Error()
				}
				rec.Add(op)
				if typ == history.Info {
					process += workers
				}
			}
		}(w)
	}
	wg.Wait()
	// A final read of every key, so every append's place is known.
	var mops []checker.Mop
	for k := int64(0); k < la.nextKey; k++ {
		mops = append(mops, checker.Mop{F: "r", K: k})
	}
	rec.Add(history.Op{Type: history.Invoke, F: "txn", Process: 10 * workers, Value: history.Value(mops)})
	typ, out, err := listAppendTxn(context.Background(), setupDB, "txn", mops)
	if typ != history.OK {
		t.Fatalf("final read: %v", err)
	}
	rec.Add(history.Op{Type: typ, F: "txn", Process: 10 * workers, Value: history.Value(out)})
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	return rec.Ops()
}
