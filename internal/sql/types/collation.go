package types

import (
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"
	"github.com/strata-db/strata/internal/sql/collate"
)

// CollationOf returns the collation text of type ft compares by, or nil
// when its values compare byte-wise: not text, a binary string, a binary
// collation (binary, utf8mb4_bin) or a type whose collation is unknown
// until run time (a ? parameter).
func CollationOf(ft *ptypes.FieldType) *collate.Collation {
	if ft == nil || ft.GetType() == mysql.TypeUnspecified || KindForFieldType(ft) != KindString {
		return nil
	}
	return collate.Lookup(ft.GetCollate())
}

// CompareCollated is Compare with two text values ordered by coll (nil:
// byte-wise, exactly Compare).
func CompareCollated(a, b Datum, coll *collate.Collation) (int, error) {
	if coll != nil && a.k == KindString && b.k == KindString {
		return coll.Compare(a.b(), b.b()), nil
	}
	return Compare(a, b)
}

// AppendHashKeyCollated is AppendHashKey with a text value keyed by its
// collation's sort key, so that values equal under coll share a key (nil:
// exactly AppendHashKey).
func (d Datum) AppendHashKeyCollated(buf []byte, coll *collate.Collation) []byte {
	if coll == nil || d.k != KindString {
		return d.AppendHashKey(buf)
	}
	// 'c', the key's length in 4 bytes (filled in after), the key:
	// self-delimiting, and built in place.
	buf = append(buf, 'c', 0, 0, 0, 0)
	start := len(buf)
	buf = coll.Key(buf, d.b())
	n := len(buf) - start
	buf[start-4], buf[start-3], buf[start-2], buf[start-1] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return buf
}

// IndexKeyValue returns the value an index entry of a column of collation
// coll stores for d: d itself, or for text under a non-binary collation
// its sort key, so that key order is the collation's order and values
// equal under it share one entry (which is how a unique index refuses
// 'hello' after 'Hello').
func IndexKeyValue(d Datum, coll *collate.Collation) Datum {
	if coll == nil || d.k != KindString {
		return d
	}
	return NewStringBytes(coll.Key(nil, d.b()))
}
