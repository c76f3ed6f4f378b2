package sql

import (
	"context"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// ADMIN CHECK TABLE / INDEX find an index entry that is missing, one that
// belongs to no row and one that points to the wrong row, and name them.
func TestAdminCheckFindsInconsistentIndexes(t *testing.T) {
	e := newTestEngine(t)
	s := e.NewSession("root", "localhost")
	ctx := context.Background()
	mustExec(t, s, "CREATE DATABASE d; USE d; CREATE TABLE t (id INT PRIMARY KEY, v INT, u INT, KEY iv (v), UNIQUE KEY uu (u))")
	mustExec(t, s, "INSERT INTO t VALUES (1, 10, 100), (2, 20, 200), (3, 30, 300)")
	mustExec(t, s, "ADMIN CHECK TABLE t")
	mustExec(t, s, "ADMIN CHECK INDEX t iv")

	tbl := e.schema.Load().Table("d", "t")
	entry := func(ix string, v, h int64) []byte {
		x := tbl.Index(ix)
		k, _, err := tablecodec.IndexEntry(tbl.ID, x.ID, x.Unique, []types.Datum{types.NewInt(v)}, h)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = txn.Delete(entry("iv", 20, 2))                             // row 2 loses its entry
	_ = txn.Set(entry("iv", 40, 4), []byte{'0'})                   // an entry of no row
	_ = txn.Set(entry("uu", 300, 0), tablecodec.AppendInt(nil, 1)) // u=300 points to row 1
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	_, err = s.Execute(ctx, "ADMIN CHECK TABLE t")
	se, ok := err.(*sqlerr.Error)
	if !ok || se.Code != 8003 {
		t.Fatalf("ADMIN CHECK TABLE of a damaged table: %v", err)
	}
	for _, want := range []string{
		"index iv has no entry for row 2 (values 20)",
		"index iv has an entry for row 4 (values 40) that matches no row",
		"index uu has no entry for row 3 (values 300)",
		"index uu has an entry for row 1 (values 300) that matches no row",
	} {
		if !strings.Contains(se.Msg, want) {
			t.Errorf("ADMIN CHECK TABLE: %q\nlacks %q", se.Msg, want)
		}
	}
	if _, err := s.Execute(ctx, "ADMIN CHECK INDEX t uu"); err == nil || strings.Contains(err.Error(), "index iv") {
		t.Errorf("ADMIN CHECK INDEX t uu: %v", err)
	}
	expectCode(t, s, "ADMIN CHECK INDEX t nosuch", sqlerr.ErKeyDoesNotExist)
	expectCode(t, s, "ADMIN CHECK TABLE nosuch", sqlerr.ErNoSuchTable)
}
