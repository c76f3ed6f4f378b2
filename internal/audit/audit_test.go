package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLogAndRotate writes events until the file passes its size limit
// and checks that it was rotated, every line in every file is a whole
// JSON event, and no backup beyond MaxBackups is kept.
func TestLogAndRotate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l := Open(Config{Path: path, MaxSizeMB: 1, MaxBackups: 2})
	stmt := strings.Repeat("x", 1000)
	const n = 4000 // about 4 MB: three rotations
	for i := 0; i < n; i++ {
		if err := l.Log(Event{Event: "statement", Protocol: "mysql", User: "u", Host: "h", ConnID: uint64(i), Class: "ddl",
			Statement: stmt, Outcome: "success"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// lumberjack removes backups past MaxBackups in a goroutine of its
	// own after each rotation, so the last removal may land after Close.
	var files []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		files, _ = filepath.Glob(filepath.Join(dir, "audit*.log"))
		if len(files) == 3 || time.Now().After(deadline) {
			break
		}
	}
	if len(files) != 3 {
		t.Fatalf("files %v, want the log and 2 backups", files)
	}
	lines := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Time.IsZero() || e.Outcome != "success" {
				t.Fatalf("%s: bad line %q: %v", f, sc.Text(), err)
			}
			lines++
		}
		fh.Close()
	}
	if lines == 0 || lines >= n {
		t.Fatalf("%d lines kept of %d: old backups should be gone", lines, n)
	}
	var nilLogger *Logger
	if err := nilLogger.Log(Event{}); err != nil {
		t.Fatal(err)
	}
}
