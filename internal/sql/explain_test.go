package sql

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestExplain checks the planner's access-path choices: testdata/explain
// holds a schema, queries and the EXPLAIN trees they must produce.
//
//	exec      statements; prints "ok" or the error
//	explain   one statement; prints its plan tree
//	query     one statement; prints its rows
func TestExplain(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.Contains(path, "/fuzz/") {
			t.Skip("a fuzz corpus (FuzzExecute), not a script")
		}
		if strings.Contains(path, "/schema_change/") {
			t.Skip("TestSchemaChange's scripts")
		}
		if strings.Contains(path, "/privileges/") {
			t.Skip("TestPrivileges' scripts")
		}
		s := newTestSession(t)
		ctx := context.Background()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "exec":
				if _, err := s.Execute(ctx, d.Input); err != nil {
					return "error: " + err.Error() + "\n"
				}
				return "ok\n"
			case "explain":
				rs, err := s.Execute(ctx, "EXPLAIN "+d.Input)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return rowsText(rs[0].Rows) + "\n"
			case "explain-tree":
				rs, err := s.Execute(ctx, "EXPLAIN FORMAT=TREE "+d.Input)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return rowsText(rs[0].Rows) + "\n"
			case "explain-analyze":
				// Times and memory sizes vary: masked; whether a node
				// spilled (disk) is kept.
				rs, err := s.Execute(ctx, "EXPLAIN ANALYZE "+d.Input)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return maskAnalyze(rowsText(rs[0].Rows)) + "\n"
			case "query":
				rs, err := s.Execute(ctx, d.Input)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				out := rowsText(rs[len(rs)-1].Rows)
				if out == "" {
					return "(no rows)\n"
				}
				return strings.TrimRight(out, "\n") + "\n"
			}
			t.Fatalf("unknown command %s", d.Cmd)
			return ""
		})
	})
}

var (
	analyzeTime   = regexp.MustCompile(`actual time=[0-9.]+\.\.[0-9.]+`)
	analyzeMemory = regexp.MustCompile(`memory=[0-9.]+ (bytes|KiB|MiB|GiB)`)
	analyzeDisk   = regexp.MustCompile(`disk=[1-9][0-9.]* (bytes|KiB|MiB|GiB)`)
)

// maskAnalyze replaces what varies between runs of EXPLAIN ANALYZE.
func maskAnalyze(s string) string {
	s = analyzeTime.ReplaceAllString(s, "actual time=T..T")
	s = analyzeMemory.ReplaceAllString(s, "memory=M")
	return analyzeDisk.ReplaceAllString(s, "disk=D")
}
