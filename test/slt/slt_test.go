package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCollectResultsCountsEveryOutcome(t *testing.T) {
	log := strings.Join([]string{
		"2026-11-21T08:41:20.95Z 0 select1.test:10: SELECT 1 ok",
		"2026-11-21T08:41:20.95Z 3 select1.test:14: CREATE TABLE t1(",
		"  a INTEGER, b INTEGER",
		") ok",
		"2026-11-21T08:41:20.951-07:00 1 select1.test:20: SELECT a FROM t1 not ok: Incorrect result at position 0. Expected ok, got 2",
		"2026-11-21T08:41:20.952Z 0 select1.test:30: SELECT c FROM t1 skipped",
		"2026-11-21T08:41:21Z 60000 select1.test:40: SELECT slow() timeout",
		"2026-11-21T08:41:21Z 0 select1.test:50: SELECT 2 did not run",
		"2026-11-21T08:41:21Z 0 select1.test:60: SELECT 3 not ok: Caught panic: boom",
		"stacktrace from panic: ",
		"goroutine 1 [running]:",
		"2026-11-21T08:41:21Z 0 select1.test:70: SELECT 4 exploded",
	}, "\n") + "\n"
	var full strings.Builder
	res := collectResults(strings.NewReader(log), &full, 3)
	want := fileResult{Records: 8, OK: 2, NotOK: 2, Skipped: 1, Timeouts: 1, NotRun: 1, Unparsed: 1}
	got := res
	got.Failures = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if len(res.Failures) != 3 {
		t.Fatalf("kept %d failures, want the limit of 3: %q", len(res.Failures), res.Failures)
	}
	if !strings.Contains(res.Failures[0], "select1.test:20") || !strings.Contains(res.Failures[1], "timeout") ||
		!strings.Contains(res.Failures[2], "select1.test:60") {
		t.Errorf("failures out of order: %q", res.Failures)
	}
	if full.String() != log {
		t.Errorf("full log is not a verbatim copy")
	}
	if !res.Failed() {
		t.Errorf("Failed() = false for a file with failures")
	}
	if clean := collectResults(strings.NewReader(strings.Split(log, "\n")[0]+"\n"), nil, 10); clean.Failed() || clean.OK != 1 {
		t.Errorf("a passing file: %+v", clean)
	}
}

func TestSchemaLetter(t *testing.T) {
	for typ, want := range map[string]byte{
		"BIGINT": 'I', "UNSIGNED BIGINT": 'I', "INT": 'I', "TINYINT": 'I', "NULL": 'I',
		"DECIMAL": 'R', "DOUBLE": 'R', "FLOAT": 'R',
		"VARCHAR": 'T', "CHAR": 'T', "TEXT": 'T', "LONGTEXT": 'T', "DATETIME": 'T',
	} {
		got, err := schemaLetter(typ)
		if err != nil || got != want {
			t.Errorf("schemaLetter(%q) = %q, %v; want %q", typ, got, err, want)
		}
	}
	if _, err := schemaLetter("GEOMETRY"); err == nil {
		t.Errorf("schemaLetter(GEOMETRY) accepted a type it cannot render")
	}
}

func TestRenderValue(t *testing.T) {
	cases := []struct {
		letter byte
		in     sql.RawBytes
		want   string
	}{
		{'I', nil, "NULL"},
		{'T', sql.RawBytes{}, ""},
		{'I', sql.RawBytes("-42"), "-42"},
		{'I', sql.RawBytes{0x01, 0x00}, "256"}, // BIT(16)
		{'R', sql.RawBytes("12.50000"), "12.500"},
		{'R', sql.RawBytes("-0.0004"), "-0.000"},
		{'R', sql.RawBytes("2.6665"), "2.667"},
		{'R', sql.RawBytes("7"), "7.000"},
		{'T', sql.RawBytes("abc def"), "abc def"},
	}
	for _, c := range cases {
		got, err := renderValue(c.letter, c.in)
		if err != nil || got != c.want {
			t.Errorf("renderValue(%c, %q) = %q, %v; want %q", c.letter, c.in, got, err, c.want)
		}
	}
	if _, err := renderValue('R', sql.RawBytes("x")); err == nil {
		t.Errorf("renderValue accepted a non-numeric real")
	}
}

func TestAbbreviateKeepsBothEnds(t *testing.T) {
	s := "start" + strings.Repeat("x", 100) + "end"
	got := abbreviate(s, 20)
	if len(got) != 20 || !strings.HasPrefix(got, "start") || !strings.HasSuffix(got, "end") {
		t.Errorf("abbreviate = %q", got)
	}
	if abbreviate("short", 20) != "short" {
		t.Errorf("abbreviate changed a short string")
	}
}

func TestDisplayNamesStayDistinct(t *testing.T) {
	got := displayNames([]string{
		"/c/index/between/1/slt_good_0.test",
		"/c/index/delete/1/slt_good_0.test",
		"/c/index/delete/10/slt_good_1.test",
	})
	want := []string{"between/1/slt_good_0.test", "delete/1/slt_good_0.test", "delete/10/slt_good_1.test"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("displayNames = %q, want %q", got, want)
	}
	if got := displayNames([]string{"/c/select1.test"}); got[0] != "select1.test" {
		t.Errorf("a lone file is named %q", got[0])
	}
	if got := displayNames([]string{"/c/a/x.test", "/c/ab/y.test"}); got[0] != "a/x.test" || got[1] != "ab/y.test" {
		t.Errorf("sibling directories sharing a prefix: %q", got)
	}
}

func TestDefaultFilesAreTheSelectCorpus(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, defaultCorpus)); err != nil {
		t.Skipf("corpus not present: %v", err)
	}
	files, err := testFiles(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasPrefix(filepath.Base(f), "select") || filepath.Ext(f) != ".test" {
			t.Errorf("unexpected default file %s", f)
		}
	}
	if len(files) < 4 {
		t.Errorf("found %d select*.test files, want at least select1-4", len(files))
	}
}

// TestSelect1To4 is the correctness gate run by scripts/test.sh: every record of
// select1-4 must pass against the server at STRATA_SLT_ADDR (user
// STRATA_SLT_USER, default root). MariaDB 10.11 passes all of them.
func TestSelect1To4(t *testing.T) {
	addr := os.Getenv("STRATA_SLT_ADDR")
	if addr == "" {
		t.Skip("STRATA_SLT_ADDR not set; start a server and set it to run select1-4")
	}
	user := os.Getenv("STRATA_SLT_USER")
	if user == "" {
		user = "root"
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	h, err := newServerHarness(addr, user, os.Getenv("STRATA_SLT_PASSWORD"), "slt_gotest", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, name := range []string{"select1.test", "select2.test", "select3.test", "select4.test"} {
		res := runFile(h, filepath.Join(root, defaultCorpus, name), nil, 5)
		t.Logf("%s: %d records, %d ok, %d not ok, %d skipped, %d timeouts, %d not run",
			name, res.Records, res.OK, res.NotOK, res.Skipped, res.Timeouts, res.NotRun)
		if res.Records == 0 {
			t.Errorf("%s: no records ran", name)
		}
		if res.Failed() {
			t.Errorf("%s: %d not ok, %d timeouts, %d not run, %d unparsed %s",
				name, res.NotOK, res.Timeouts, res.NotRun, res.Unparsed, res.Err)
			for _, f := range res.Failures {
				t.Log("  " + abbreviate(strings.ReplaceAll(f, "\n", " "), 600))
			}
		}
	}
}
