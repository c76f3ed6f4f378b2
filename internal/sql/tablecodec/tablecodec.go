// Package tablecodec maps SQL tables onto the ordered transactional key space.
//
// Layout (TiDB-compatible in shape):
//
//	row:          t{tableID}_r{handle}                      -> codec.EncodeRow of the non-handle columns
//	unique index: t{tableID}_i{indexID}{EncodeKey(values)}  -> handle (8 bytes)
//	other index:  t{tableID}_i{indexID}{EncodeKey(values)}{handle} -> "0"
//	catalog meta: m...                                       (owned by package catalog)
//
// tableID, indexID and handle use the 8-byte sign-flipped big-endian integer
// encoding (the same bytes as codec.EncodeInt), so keys of one table sort by
// handle and all keys of a table are contiguous. A unique index entry whose
// values contain a NULL is stored in the non-unique form (handle appended),
// because SQL allows any number of NULLs in a unique index.
//
// Contract: callers pass index values already converted to the column types
// (types.Convert); the encoding is then order-preserving, so a range of SQL
// values is a range of keys.
package tablecodec

import (
	"encoding/binary"
	"errors"

	"github.com/strata-db/strata/internal/sql/codec"
	"github.com/strata-db/strata/internal/sql/types"
)

const (
	tablePrefix  = 't'
	recordSep    = "_r"
	indexSep     = "_i"
	intLen       = 8
	signMask     = uint64(1) << 63
	recordKeyLen = 1 + intLen + 2 + intLen
)

// MetaPrefix is the first byte of every catalog key.
const MetaPrefix = 'm'

// ErrInvalidKey reports a key that is not in the expected layout.
var ErrInvalidKey = errors.New("tablecodec: invalid key")

// AppendInt appends the order-preserving 8-byte encoding of v.
func AppendInt(buf []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(buf, uint64(v)^signMask)
}

// DecodeInt decodes the first 8 bytes written by AppendInt.
func DecodeInt(b []byte) (int64, []byte, error) {
	if len(b) < intLen {
		return 0, nil, ErrInvalidKey
	}
	return int64(binary.BigEndian.Uint64(b) ^ signMask), b[intLen:], nil
}

// TablePrefix returns t{tableID}: every key of the table starts with it.
func TablePrefix(tableID int64) []byte {
	return AppendInt([]byte{tablePrefix}, tableID)
}

// RecordPrefix returns t{tableID}_r, the prefix of all row keys.
func RecordPrefix(tableID int64) []byte {
	b := make([]byte, 0, recordKeyLen)
	b = append(b, tablePrefix)
	b = AppendInt(b, tableID)
	return append(b, recordSep...)
}

// AppendRecordKey appends the key of row handle in table tableID.
func AppendRecordKey(buf []byte, tableID, handle int64) []byte {
	buf = append(buf, tablePrefix)
	buf = AppendInt(buf, tableID)
	buf = append(buf, recordSep...)
	return AppendInt(buf, handle)
}

// RecordKey returns the key of row handle in table tableID.
func RecordKey(tableID, handle int64) []byte {
	return AppendRecordKey(make([]byte, 0, recordKeyLen), tableID, handle)
}

// DecodeRecordKey returns the handle of a row key.
func DecodeRecordKey(key []byte) (tableID, handle int64, err error) {
	if len(key) != recordKeyLen || key[0] != tablePrefix || string(key[1+intLen:1+intLen+2]) != recordSep {
		return 0, 0, ErrInvalidKey
	}
	tableID, _, _ = DecodeInt(key[1:])
	handle, _, _ = DecodeInt(key[1+intLen+2:])
	return tableID, handle, nil
}

// TableIDOf returns the id of the table a row or index key belongs to.
func TableIDOf(key []byte) (int64, bool) {
	if len(key) < 1+intLen || key[0] != tablePrefix {
		return 0, false
	}
	id, _, _ := DecodeInt(key[1:])
	return id, true
}

// IndexPrefix returns t{tableID}_i{indexID}.
func IndexPrefix(tableID, indexID int64) []byte {
	b := make([]byte, 0, 32)
	b = append(b, tablePrefix)
	b = AppendInt(b, tableID)
	b = append(b, indexSep...)
	return AppendInt(b, indexID)
}

// AppendIndexValues appends the memcomparable encoding of index values to an
// index prefix (a seek key for ranges).
func AppendIndexValues(buf []byte, vals []types.Datum) ([]byte, error) {
	return codec.EncodeKey(buf, vals...)
}

// IndexEntry returns the key and value of an index entry for one row. A
// unique index entry is keyed by the values only (so a second row with the
// same values collides on the key) unless a value is NULL.
func IndexEntry(tableID, indexID int64, unique bool, vals []types.Datum, handle int64) (key, value []byte, err error) {
	key, err = codec.EncodeKey(IndexPrefix(tableID, indexID), vals...)
	if err != nil {
		return nil, nil, err
	}
	if unique && !hasNull(vals) {
		return key, AppendInt(nil, handle), nil
	}
	return AppendInt(key, handle), []byte{'0'}, nil
}

// DistinctIndexKey reports whether an entry of a unique index with these
// values is keyed by values alone (and so must be checked for duplicates).
func DistinctIndexKey(unique bool, vals []types.Datum) bool {
	return unique && !hasNull(vals)
}

// IndexEntryHandle returns the row handle an index entry points to.
func IndexEntryHandle(key, value []byte) (int64, error) {
	if len(value) == intLen {
		h, _, err := DecodeInt(value)
		return h, err
	}
	if len(key) < intLen {
		return 0, ErrInvalidKey
	}
	h, _, err := DecodeInt(key[len(key)-intLen:])
	return h, err
}

// PrefixEnd returns the smallest key greater than every key that starts
// with prefix (nil when there is none).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

func hasNull(vals []types.Datum) bool {
	for _, v := range vals {
		if v.IsNull() {
			return true
		}
	}
	return false
}
