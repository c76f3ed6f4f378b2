package sql_test

import (
	"context"
	"testing"

	"github.com/strata-db/strata/internal/node"
	"github.com/strata-db/strata/internal/sql"
)

// nodeSession starts an in-process node (client, Raft, Pebble in memory,
// no GC) for the test and returns a session on it and a function that runs
// a statement, failing the test on an error.
func nodeSession(tb testing.TB) (*sql.Session, func(q string) []*sql.Result) {
	tb.Helper()
	ctx := context.Background()
	n, err := node.Start(ctx, node.Config{DataDir: tb.TempDir(), InMemory: true, GCInterval: -1})
	if err != nil {
		tb.Fatalf("start node: %v", err)
	}
	tb.Cleanup(func() { n.Close() })
	s := n.SQL().NewSession("root", "localhost")
	return s, func(q string) []*sql.Result {
		tb.Helper()
		rs, err := s.Execute(ctx, q)
		if err != nil {
			tb.Fatalf("%.80s: %v", q, err)
		}
		return rs
	}
}
