package main

import (
	"bufio"
	"io"
	"regexp"
	"strings"
)

// fileResult counts the outcome of every record of one test file.
type fileResult struct {
	File     string
	Records  int // every record the runner logged, whatever its outcome
	OK       int
	NotOK    int
	Skipped  int // records excluded for the mysql engine (skipif / onlyif)
	Timeouts int
	NotRun   int // records after a timeout, which the runner does not execute
	Unparsed int // log entries whose outcome could not be recognised
	Err      string
	// Failures holds the log entries of records that failed or timed out, up
	// to the limit given to collectResults, in file order.
	Failures []string
}

// Failed reports whether anything in the file did not pass.
func (r *fileResult) Failed() bool {
	return r.NotOK+r.Timeouts+r.NotRun+r.Unparsed > 0 || r.Err != ""
}

func (r *fileResult) add(o fileResult) {
	r.Records += o.Records
	r.OK += o.OK
	r.NotOK += o.NotOK
	r.Skipped += o.Skipped
	r.Timeouts += o.Timeouts
	r.NotRun += o.NotRun
	r.Unparsed += o.Unparsed
}

// entryStart matches the start of a logictest result line:
// "<RFC 3339 time> <milliseconds> <file>:<line>: <query> <outcome>". The query
// may span lines, so an entry runs until the next line that matches.
var entryStart = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) \d+ `)

// outcome classifies one complete log entry. "not ok: <reason>" is searched
// first because the reason is free text that may itself end in "ok".
func outcome(entry string) string {
	switch {
	case strings.Contains(entry, " not ok: "):
		return "not ok"
	case strings.HasSuffix(entry, " ok"):
		return "ok"
	case strings.HasSuffix(entry, " skipped"):
		return "skipped"
	case strings.HasSuffix(entry, " timeout"):
		return "timeout"
	case strings.HasSuffix(entry, " did not run"):
		return "did not run"
	}
	return ""
}

// collectResults reads the logictest runner's log for one file and counts the
// outcomes. Every line it reads is also copied to full, when full is not nil.
// Lines before the first entry (there are none in practice) are ignored.
func collectResults(log io.Reader, full io.Writer, maxFailures int) fileResult {
	var res fileResult
	var entry strings.Builder
	flush := func() {
		if entry.Len() == 0 {
			return
		}
		e := strings.TrimRight(entry.String(), "\n")
		entry.Reset()
		res.Records++
		switch outcome(e) {
		case "ok":
			res.OK++
			return
		case "skipped":
			res.Skipped++
			return
		case "not ok":
			res.NotOK++
		case "timeout":
			res.Timeouts++
		case "did not run":
			// Follows a timeout, which is already listed.
			res.NotRun++
			return
		default:
			res.Unparsed++
		}
		if len(res.Failures) < maxFailures {
			res.Failures = append(res.Failures, e)
		}
	}
	sc := bufio.NewScanner(log)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if full != nil {
			io.WriteString(full, line+"\n")
		}
		if entryStart.MatchString(line) {
			flush()
		} else if entry.Len() == 0 {
			continue
		}
		entry.WriteString(line)
		entry.WriteByte('\n')
	}
	flush()
	if err := sc.Err(); err != nil {
		res.Err = "reading runner output: " + err.Error()
	}
	return res
}
