package sql

import (
	"context"
	"testing"

	"github.com/strata-db/strata/internal/sql/types"
)

// TestPreparedPointGetAllocations bounds the allocations of the sysbench hot
// path (a prepared primary-key point select) in the SQL layer: the plan is
// cached, parameters go straight to one Get, and only the result row, the
// transaction and small per-statement state are allocated. The in-memory
// kv double contributes its own few allocations per transaction.
func TestPreparedPointGetAllocations(t *testing.T) {
	if testStorage != nil {
		t.Skip("the bound covers the SQL layer over the in-memory double")
	}
	s := newTestSession(t)
	setupSbtest(t, s)
	ctx := context.Background()
	ps, err := s.Prepare(ctx, "SELECT c FROM sbtest1 WHERE id=?")
	if err != nil {
		t.Fatal(err)
	}
	params := []types.Datum{types.NewInt(2)}
	allocs := testing.AllocsPerRun(200, func() {
		r, err := s.ExecutePrepared(ctx, ps.ID, params)
		if err != nil || len(r.Rows) != 1 {
			t.Fatalf("%v %v", r, err)
		}
	})
	t.Logf("allocations per prepared point select: %.0f", allocs)
	if allocs > 24 {
		t.Errorf("prepared point select allocates %.0f times, want <= 24", allocs)
	}
}
