// Command slt runs sqllogictest files against a MySQL-protocol server (Strata,
// or MariaDB/MySQL as a reference) and prints, per file, how many records
// passed, failed, were skipped or timed out.
//
//	go run ./test/slt -addr 127.0.0.1:4000 -user root [files or directories...]
//
// With no files it runs ../shared/sqllogictest/select*.test, resolved against
// the repository root (the corpus lives beside the repository). It exits 1 if any
// record failed or timed out.
//
// Parsing, the record semantics (engine conditions, sorting, hashing of large
// results, integer results accepted for real columns) and the per-record timeout
// come from github.com/dolthub/sqllogictest/go/logictest. That runner reports
// only by printing one line per record to standard output, so runFile captures
// standard output while a file runs and counts those lines (see results.go).
// Records run with engine name "mysql", each file in a fresh database
// (harness.go). The package's test runs select1-4 against STRATA_SLT_ADDR.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dolthub/sqllogictest/go/logictest"
)

var pid = os.Getpid()

func main() {
	addr := flag.String("addr", "127.0.0.1:4000", "MySQL-protocol server address")
	user := flag.String("user", "root", "user name")
	password := flag.String("password", "", "password")
	timeout := flag.Duration("timeout", time.Minute, "limit per record; after a timeout the rest of the file is not run")
	showFailures := flag.Int("show-failures", 10, "failed records to print per file")
	logPath := flag.String("log", "", "write the runner's full per-record log to this file")
	dbPrefix := flag.String("db-prefix", "slt", "prefix of the per-file database names")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: slt [flags] [files or directories...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	files, err := testFiles(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "slt:", err)
		os.Exit(2)
	}
	var full io.Writer
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "slt:", err)
			os.Exit(2)
		}
		defer f.Close()
		full = f
	}
	h, err := newServerHarness(*addr, *user, *password, *dbPrefix, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slt:", err)
		os.Exit(2)
	}
	names := displayNames(files)
	results := make([]fileResult, 0, len(files))
	for i, file := range files {
		start := time.Now()
		res := runFile(h, file, full, *showFailures)
		res.File = names[i]
		fmt.Fprintf(os.Stderr, "%s: %d records in %s\n", res.File, res.Records, time.Since(start).Round(time.Millisecond))
		for _, f := range res.Failures {
			fmt.Println("  " + abbreviate(strings.ReplaceAll(f, "\n", " "), 600))
		}
		if res.Err != "" {
			fmt.Println("  error: " + res.Err)
		}
		results = append(results, res)
	}
	if err := h.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "slt:", err)
	}
	total := printSummary(os.Stdout, results)
	if total.Failed() {
		os.Exit(1)
	}
}

// repoRoot finds the directory holding this module's go.mod, searching upwards
// from the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/strata-db/strata\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the strata repository; name the test files explicitly")
		}
		dir = parent
	}
}

// defaultCorpus is where the shared corpus lives relative to the repository root.
const defaultCorpus = "../shared/sqllogictest"

// testFiles expands the arguments (files, or directories searched for *.test)
// into a sorted list of files; no arguments means the select*.test files of the
// default corpus.
func testFiles(args []string) ([]string, error) {
	if len(args) == 0 {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		files, err := filepath.Glob(filepath.Join(root, defaultCorpus, "select*.test"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no select*.test files in %s", filepath.Join(root, defaultCorpus))
		}
		return files, nil
	}
	var files []string
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, arg)
			continue
		}
		var found []string
		err = filepath.WalkDir(arg, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".test") {
				found = append(found, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// stdoutMu serialises runFile: it swaps the process-wide os.Stdout.
var stdoutMu sync.Mutex

// runFile runs one test file through the logictest runner in a fresh database
// and counts the outcome of its records. A failure to set up the file (a
// database that cannot be created, a file that does not parse: the runner
// panics on both) is reported in Err.
func runFile(h *serverHarness, file string, full io.Writer, maxFailures int) fileResult {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()

	r, w, err := os.Pipe()
	if err != nil {
		return fileResult{File: file, Err: err.Error()}
	}
	counted := make(chan fileResult, 1)
	go func() {
		counted <- collectResults(r, full, maxFailures)
		r.Close()
	}()

	saved := os.Stdout
	os.Stdout = w
	runErr := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%v", p)
			}
		}()
		logictest.RunTestFiles(h, file)
		return nil
	}()
	os.Stdout = saved
	w.Close()

	res := <-counted
	res.File = filepath.Base(file)
	if runErr != nil && res.Err == "" {
		res.Err = runErr.Error()
	}
	return res
}

// printSummary writes the per-file table and a total line, and returns the total.
func printSummary(out io.Writer, results []fileResult) fileResult {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\trecords\tok\tnot ok\tskipped\ttimeouts\tnot run\t")
	row := func(r fileResult) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.File, r.Records, r.OK, r.NotOK, r.Skipped, r.Timeouts, r.NotRun)
	}
	total := fileResult{File: "total"}
	for _, r := range results {
		row(r)
		total.add(r)
		if r.Err != "" {
			total.Err = r.Err
		}
	}
	row(total)
	tw.Flush()
	if total.Unparsed > 0 {
		fmt.Fprintf(out, "%d log entries had no recognisable outcome (counted as failures)\n", total.Unparsed)
	}
	return total
}

// abbreviate shortens s to at most n bytes by cutting out its middle, which for
// a log entry keeps both the file:line and the failure reason at the end.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const gap = " ... "
	head := (n - len(gap)) / 2
	return s[:head] + gap + s[len(s)-(n-len(gap)-head):]
}

// displayNames names each file by its path below the deepest directory that
// holds all of them, so that index/between/1/slt_good_0.test and
// index/delete/1/slt_good_0.test stay apart; a lone file is named by its base.
func displayNames(files []string) []string {
	abs := make([]string, len(files))
	for i, f := range files {
		a, err := filepath.Abs(f)
		if err != nil {
			a = f
		}
		abs[i] = a
	}
	common := ""
	for i, a := range abs {
		dir := filepath.Dir(a)
		if i == 0 {
			common = dir
			continue
		}
		for common != dir && !strings.HasPrefix(dir, common+string(filepath.Separator)) {
			parent := filepath.Dir(common)
			if parent == common {
				break
			}
			common = parent
		}
	}
	names := make([]string, len(abs))
	for i, a := range abs {
		rel, err := filepath.Rel(common, a)
		if err != nil {
			rel = filepath.Base(a)
		}
		names[i] = rel
	}
	return names
}
