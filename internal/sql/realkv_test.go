package sql_test

import (
	"context"
	"os"
	"testing"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/node"
	"github.com/strata-db/strata/internal/sql"
)

// TestMain runs the package's tests over a real in-process node (client,
// Raft, Pebble in memory) instead of the in-memory kv double when
// STRATA_SQL_REALKV=1.
func TestMain(m *testing.M) {
	if os.Getenv("STRATA_SQL_REALKV") == "1" {
		sql.SetTestStorage(func(t *testing.T) kv.Storage {
			n, err := node.Start(context.Background(), node.Config{DataDir: t.TempDir(), InMemory: true})
			if err != nil {
				t.Fatalf("start node: %v", err)
			}
			t.Cleanup(func() { n.Close() })
			return n.Storage()
		})
	}
	os.Exit(m.Run())
}
