package catalog

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/kv/kvtest"
)

func textColumn(name, coll string) *ColumnInfo {
	ft := ptypes.NewFieldType(mysql.TypeVarchar)
	ft.SetFlen(20)
	ft.SetCharset("utf8mb4")
	ft.SetCollate(coll)
	return &ColumnInfo{Name: name, Type: ft}
}

// TestTablesStoredBeforeCollationsStayBinary: a table entry written before
// collations were in force (no "collations" field) loads with binary
// collations, since its index entries were encoded byte-wise; one stored
// now keeps the collations it records.
func TestTablesStoredBeforeCollationsStayBinary(t *testing.T) {
	ctx := context.Background()
	store := kvtest.NewMemStorage()
	txn, err := store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := PutDB(txn, &DBInfo{ID: 1, Name: "d"}); err != nil {
		t.Fatal(err)
	}
	old := &TableInfo{ID: 2, DBID: 1, Name: "old", Collate: "utf8mb4_0900_ai_ci",
		Columns: []*ColumnInfo{textColumn("a", "utf8mb4_general_ci"), textColumn("b", "utf8mb4_bin")}}
	raw, err := json.Marshal(old) // Collations 0: as stored before
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Set(tableKey(1, 2), raw); err != nil {
		t.Fatal(err)
	}
	cur := &TableInfo{ID: 3, DBID: 1, Name: "new", Collate: "utf8mb4_0900_ai_ci",
		Columns: []*ColumnInfo{textColumn("a", "utf8mb4_general_ci")}}
	if err := PutTable(txn, cur); err != nil {
		t.Fatal(err)
	}
	s, err := Load(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	o := s.Table("d", "old")
	if o.Collate != "utf8mb4_bin" || o.Columns[0].Type.GetCollate() != "utf8mb4_bin" || o.Columns[1].Type.GetCollate() != "utf8mb4_bin" {
		t.Fatalf("old table loads as %s / %s / %s, want utf8mb4_bin throughout", o.Collate, o.Columns[0].Type.GetCollate(), o.Columns[1].Type.GetCollate())
	}
	n := s.Table("d", "new")
	if n.Collations != CollationsInForce || n.Collate != "utf8mb4_0900_ai_ci" || n.Columns[0].Type.GetCollate() != "utf8mb4_general_ci" {
		t.Fatalf("new table loads as %d %s / %s", n.Collations, n.Collate, n.Columns[0].Type.GetCollate())
	}
	// Storing the old table again (any DDL) records what it does.
	if err := PutTable(txn, o.Clone()); err != nil {
		t.Fatal(err)
	}
	s, err = Load(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	if o := s.Table("d", "old"); o.Collations != CollationsInForce || o.Columns[0].Type.GetCollate() != "utf8mb4_bin" {
		t.Fatalf("old table after a DDL: %d %s", o.Collations, o.Columns[0].Type.GetCollate())
	}
}
