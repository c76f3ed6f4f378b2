package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// TestTooOldTransactionIsError9006: a transaction older than the GC life
// time reaches MySQL clients as TiDB's 9006, not as a generic error.
func TestTooOldTransactionIsError9006(t *testing.T) {
	err := fmt.Errorf("client: transaction aborted: %w: ts 5 below safe point 9", kv.ErrTxnTooOld)
	se := wireError(err)
	if se.Num != sqlerr.ErGCTooEarly || se.State != "HY000" {
		t.Fatalf("wireError = %d %s, want %d HY000", se.Num, se.State, sqlerr.ErGCTooEarly)
	}
	if se := wireError(errors.New("something else")); se.Num == sqlerr.ErGCTooEarly {
		t.Fatal("an unrelated error mapped to 9006")
	}
}
