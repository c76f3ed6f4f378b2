package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/workload/driver"
)

// Native reaches the server behind a Store through its own client, to
// check what the Store wrote.
type Native struct {
	// Peek returns the fields of the record at key, nil if there is none.
	Peek func(ctx context.Context, key string) ([][]byte, error)
	// PutRaw stores a raw value at key outside the workload's layout, and
	// Exists says whether a key exists; both nil for servers where that makes
	// no sense (sql).
	PutRaw func(ctx context.Context, key string, value []byte) error
	Exists func(ctx context.Context, key string) (bool, error)
	// Scans says whether the Store supports ordered scans.
	Scans bool
}

// Schema is the schema Conformance uses: a YCSB-like table of four
// ten-byte fields.
func Schema() driver.Schema {
	return driver.Schema{Table: "usertable", KeyColumn: "YCSB_KEY", KeyPrefix: "user", FieldLength: 10,
		Columns: []string{"FIELD0", "FIELD1", "FIELD2", "FIELD3"}, HashFields: []string{"field0", "field1", "field2", "field3"}}
}

func mustPeek(t *testing.T, ctx context.Context, n Native, key string) [][]byte {
	t.Helper()
	got, err := n.Peek(ctx, key)
	if err != nil {
		t.Fatalf("peek %s: %v", key, err)
	}
	return got
}

func sameFields(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d fields %q, want %d %q", what, len(got), got, len(want), want)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: field %d = %q, want %q", what, i, got[i], want[i])
		}
	}
}

// Conformance checks the behaviour the workloads rely on, for a Store
// opened on Schema() against a server reachable through n. It leaves the
// workload's records dropped-and-reloaded state behind.
func Conformance(t *testing.T, s driver.Store, n Native) {
	ctx := Context(t)
	schema := Schema()
	nf := schema.Fields()
	if err := s.Init(ctx, true); err != nil {
		t.Fatalf("init: %v", err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("check after init: %v", err)
	}

	// A missing record is found=false, not an error.
	if found, err := s.Read(ctx, "user-missing"); err != nil || found {
		t.Fatalf("read of a missing record: found=%v err=%v", found, err)
	}

	// Insert, then read back through the server's own client.
	v1 := Fields(nf, 10, "a")
	if err := s.Insert(ctx, "user1", v1); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if found, err := s.Read(ctx, "user1"); err != nil || !found {
		t.Fatalf("read after insert: found=%v err=%v", found, err)
	}
	sameFields(t, "after insert", mustPeek(t, ctx, n, "user1"), v1)

	// An update of one field: field-level stores change only that field,
	// whole-record stores write every field given.
	v2 := Fields(nf, 10, "b")
	if err := s.Update(ctx, "user1", 2, v2); err != nil {
		t.Fatalf("update: %v", err)
	}
	want := v1
	if s.WholeRecordUpdates() {
		want = v2
	} else {
		want = append([][]byte(nil), v1...)
		want[2] = v2[2]
	}
	sameFields(t, "after update of field 2", mustPeek(t, ctx, n, "user1"), want)
	// Every field.
	v3 := Fields(nf, 10, "c")
	if err := s.Update(ctx, "user1", -1, v3); err != nil {
		t.Fatalf("update of every field: %v", err)
	}
	sameFields(t, "after update of every field", mustPeek(t, ctx, n, "user1"), v3)

	// Write is an upsert.
	v4 := Fields(nf, 10, "d")
	for _, k := range []string{"user1", "user2"} {
		if err := s.Write(ctx, k, v4); err != nil {
			t.Fatalf("write %s: %v", k, err)
		}
		sameFields(t, "after write of "+k, mustPeek(t, ctx, n, k), v4)
	}

	// A load batch larger than etcd's 128 operations per transaction.
	var keys []string
	var recs [][][]byte
	for i := 0; i < 300; i++ {
		keys = append(keys, fmt.Sprintf("user5%03d", i))
		recs = append(recs, Fields(nf, 10, fmt.Sprintf("L%d", i)))
	}
	if err := s.InsertBatch(ctx, keys, recs); err != nil {
		t.Fatalf("insert batch: %v", err)
	}
	for _, i := range []int{0, 127, 128, 299} {
		sameFields(t, "batch record "+keys[i], mustPeek(t, ctx, n, keys[i]), recs[i])
		if found, err := s.Read(ctx, keys[i]); err != nil || !found {
			t.Fatalf("read %s: found=%v err=%v", keys[i], found, err)
		}
	}

	if n.PutRaw != nil {
		// A key outside the workload survives drop and is not scanned.
		if err := n.PutRaw(ctx, "zebra", []byte("not a record")); err != nil {
			t.Fatal(err)
		}
	}

	if n.Scans {
		for _, c := range []struct {
			start string
			n     int
			want  int
		}{
			{"user5000", 10, 10},     // from an existing key
			{"user5295", 100, 5},     // runs into the end of the workload's keys
			{"user50995", 1000, 200}, // from between keys: user51.. to user5299
			{"user6", 10, 0},         // past every record
			{"user", 3, 3},           // from before the first
		} {
			got, err := s.Scan(ctx, c.start, c.n)
			if err != nil {
				t.Fatalf("scan %s %d: %v", c.start, c.n, err)
			}
			if got != c.want {
				t.Errorf("scan from %s, up to %d: %d records, want %d", c.start, c.n, got, c.want)
			}
		}
	} else if _, err := s.Scan(ctx, "user", 10); err == nil {
		t.Errorf("scan succeeded on a store without ordered scans")
	}

	if n.PutRaw != nil {
		// A value that is not a record is an error, not a success.
		if err := n.PutRaw(ctx, "user-bad", []byte{200}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(ctx, "user-bad"); err == nil {
			t.Errorf("read of a malformed record succeeded")
		}
	}

	// Drop deletes the workload's records only.
	if err := s.Init(ctx, true); err != nil {
		t.Fatalf("init --drop: %v", err)
	}
	for _, k := range []string{"user1", "user2", "user5000", "user5299"} {
		if found, err := s.Read(ctx, k); err != nil || found {
			t.Errorf("read %s after drop: found=%v err=%v", k, found, err)
		}
	}
	if n.PutRaw != nil {
		if ok, err := n.Exists(ctx, "zebra"); err != nil || !ok {
			t.Errorf("a key outside the workload was dropped (exists=%v, %v)", ok, err)
		}
	}
}
