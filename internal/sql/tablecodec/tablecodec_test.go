package tablecodec

import (
	"bytes"
	"testing"

	"github.com/strata-db/strata/internal/sql/types"
)

func TestRecordKeysSortByHandle(t *testing.T) {
	handles := []int64{-1 << 63, -5, -1, 0, 1, 2, 255, 256, 1<<63 - 1}
	for i := 1; i < len(handles); i++ {
		a, b := RecordKey(7, handles[i-1]), RecordKey(7, handles[i])
		if bytes.Compare(a, b) >= 0 {
			t.Fatalf("key(%d) >= key(%d)", handles[i-1], handles[i])
		}
	}
	for _, h := range handles {
		tid, got, err := DecodeRecordKey(RecordKey(7, h))
		if err != nil || tid != 7 || got != h {
			t.Fatalf("decode %d: %d %d %v", h, tid, got, err)
		}
	}
	// All rows of a table lie inside [RecordPrefix, PrefixEnd(RecordPrefix)).
	p := RecordPrefix(7)
	if !bytes.HasPrefix(RecordKey(7, -3), p) || bytes.Compare(RecordKey(7, 1<<63-1), PrefixEnd(p)) >= 0 {
		t.Fatal("record keys escape the record prefix range")
	}
	if bytes.HasPrefix(RecordKey(8, 1), p) {
		t.Fatal("another table's row shares the prefix")
	}
	if _, _, err := DecodeRecordKey([]byte("t1234")); err == nil {
		t.Fatal("decoded a malformed key")
	}
}

func TestIndexEntries(t *testing.T) {
	vals := []types.Datum{types.NewInt(5), types.NewString("x")}
	// Unique: keyed by the values, handle in the value.
	k1, v1, err := IndexEntry(3, 1, true, vals, 10)
	if err != nil {
		t.Fatal(err)
	}
	k2, _, _ := IndexEntry(3, 1, true, vals, 11)
	if !bytes.Equal(k1, k2) {
		t.Fatal("unique entries for equal values must collide")
	}
	if h, err := IndexEntryHandle(k1, v1); err != nil || h != 10 {
		t.Fatalf("unique handle %d %v", h, err)
	}
	// Non-unique: handle appended, distinct keys.
	n1, nv1, _ := IndexEntry(3, 2, false, vals, 10)
	n2, _, _ := IndexEntry(3, 2, false, vals, 11)
	if bytes.Equal(n1, n2) {
		t.Fatal("non-unique entries must not collide")
	}
	if h, err := IndexEntryHandle(n1, nv1); err != nil || h != 10 {
		t.Fatalf("non-unique handle %d %v", h, err)
	}
	// A NULL in a unique index is stored in the non-unique form.
	withNull := []types.Datum{types.Null, types.NewString("x")}
	u1, _, _ := IndexEntry(3, 1, true, withNull, 10)
	u2, _, _ := IndexEntry(3, 1, true, withNull, 11)
	if bytes.Equal(u1, u2) || DistinctIndexKey(true, withNull) {
		t.Fatal("NULLs in a unique index must not collide")
	}
	// Entries sort by value under the index prefix.
	lo, _, _ := IndexEntry(3, 2, false, []types.Datum{types.NewInt(-1)}, 99)
	hi, _, _ := IndexEntry(3, 2, false, []types.Datum{types.NewInt(1)}, 1)
	p := IndexPrefix(3, 2)
	if !bytes.HasPrefix(lo, p) || bytes.Compare(lo, hi) >= 0 {
		t.Fatal("index entries out of value order")
	}
}

func TestPrefixEnd(t *testing.T) {
	if got := PrefixEnd([]byte{1, 2, 0xff}); !bytes.Equal(got, []byte{1, 3}) {
		t.Fatalf("PrefixEnd = %v", got)
	}
	if got := PrefixEnd([]byte{0xff, 0xff}); got != nil {
		t.Fatalf("PrefixEnd of all-0xff = %v, want nil", got)
	}
}
