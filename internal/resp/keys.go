package resp

import (
	"encoding/binary"
	"errors"
)

// The Redis keyspace lives in the transactional (MVCC) keyspace under the
// prefix 'r', apart from SQL's 't' (tables) and 'm' (catalog), so the two
// never collide. Every Redis key has one metadata record; a hash keeps its
// fields in records of their own; keys with a TTL have an entry in the
// expiry index so the reaper finds them without scanning everything.
//
//	rm<key>                         -> meta (type, stamp, expiry, payload)
//	rh<uvarint len(key)><key><field> -> field value
//	re<expireAt ms, 8 bytes BE><key> -> "" (expiry index)
//
// The length prefix makes a hash's field prefix unique: no other key's
// fields start with it.
const (
	keyspacePrefix = 'r'
	metaTag        = 'm'
	fieldTag       = 'h'
	expiryTag      = 'e'
)

// MetaKey returns the MVCC key that holds the metadata (and, for strings,
// the value) of Redis key k. Tests use it to pick split points between
// Redis keys.
func MetaKey(k []byte) []byte { return appendMetaKey(nil, k) }

func appendMetaKey(dst, k []byte) []byte {
	dst = append(dst, keyspacePrefix, metaTag)
	return append(dst, k...)
}

// metaSpan is the range of all metadata records: [rm, rn).
func metaSpan() (start, end []byte) {
	return []byte{keyspacePrefix, metaTag}, []byte{keyspacePrefix, metaTag + 1}
}

// userKey strips the metadata prefix from an MVCC key of metaSpan.
func userKey(metaKey []byte) []byte { return metaKey[2:] }

// MetaPrefixSpan returns the range of the metadata records of the Redis
// keys that start with p.
func MetaPrefixSpan(p []byte) (start, end []byte) {
	start = MetaKey(p)
	return start, prefixEnd(start)
}

// RedisKey returns the Redis key whose metadata record is at metaKey
// (MetaKey's inverse).
func RedisKey(metaKey []byte) []byte { return userKey(metaKey) }

// fieldPrefix is the common prefix of the field records of hash k.
func fieldPrefix(k []byte) []byte {
	p := make([]byte, 0, 2+binary.MaxVarintLen64+len(k))
	p = append(p, keyspacePrefix, fieldTag)
	p = binary.AppendUvarint(p, uint64(len(k)))
	return append(p, k...)
}

func fieldKey(prefix, field []byte) []byte {
	fk := make([]byte, 0, len(prefix)+len(field))
	fk = append(fk, prefix...)
	return append(fk, field...)
}

// prefixEnd is the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func expiryKey(at int64, k []byte) []byte {
	ek := make([]byte, 0, 10+len(k))
	ek = append(ek, keyspacePrefix, expiryTag)
	ek = binary.BigEndian.AppendUint64(ek, uint64(at))
	return append(ek, k...)
}

// expirySpanUntil covers expiry entries due at or before now.
func expirySpanUntil(now int64) (start, end []byte) {
	start = []byte{keyspacePrefix, expiryTag}
	end = binary.BigEndian.AppendUint64([]byte{keyspacePrefix, expiryTag}, uint64(now)+1)
	return start, end
}

func decodeExpiryKey(ek []byte) (at int64, k []byte, ok bool) {
	if len(ek) < 10 || ek[0] != keyspacePrefix || ek[1] != expiryTag {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(ek[2:10])), ek[10:], true
}

// Value types, as TYPE names them.
type valueType byte

const (
	typeString valueType = 's'
	typeHash   valueType = 'h'
)

func (t valueType) String() string {
	switch t {
	case typeString:
		return "string"
	case typeHash:
		return "hash"
	}
	return "none"
}

// meta is a decoded metadata record.
//
//	byte 0     type
//	byte 1     flags (bit 0: expireAt present)
//	bytes 2-9  stamp: start timestamp of the transaction that last wrote the
//	           key (WATCH compares it)
//	bytes 10-17 expireAt, unix ms (only with flag bit 0)
//	rest       payload: a string's bytes; a hash's uvarint field count
type meta struct {
	typ      valueType
	stamp    uint64
	expireAt int64 // 0: no TTL
	payload  []byte
}

const (
	metaHeaderLen = 10
	flagExpiry    = 1
)

var errCorruptMeta = errors.New("resp: corrupt key metadata")

func decodeMeta(b []byte) (meta, error) {
	if len(b) < metaHeaderLen {
		return meta{}, errCorruptMeta
	}
	m := meta{typ: valueType(b[0]), stamp: binary.BigEndian.Uint64(b[2:10])}
	rest := b[metaHeaderLen:]
	if b[1]&flagExpiry != 0 {
		if len(rest) < 8 {
			return meta{}, errCorruptMeta
		}
		m.expireAt = int64(binary.BigEndian.Uint64(rest))
		rest = rest[8:]
	}
	m.payload = rest
	return m, nil
}

func (m meta) encode() []byte {
	n := metaHeaderLen + len(m.payload)
	if m.expireAt != 0 {
		n += 8
	}
	b := make([]byte, metaHeaderLen, n)
	b[0] = byte(m.typ)
	binary.BigEndian.PutUint64(b[2:], m.stamp)
	if m.expireAt != 0 {
		b[1] = flagExpiry
		b = binary.BigEndian.AppendUint64(b, uint64(m.expireAt))
	}
	return append(b, m.payload...)
}

// expired reports whether m has a TTL that has passed at now (unix ms).
func (m meta) expired(now int64) bool { return m.expireAt != 0 && m.expireAt <= now }

func (m meta) hashLen() int64 {
	n, _ := binary.Uvarint(m.payload)
	return int64(n)
}

func hashPayload(n int64) []byte { return binary.AppendUvarint(nil, uint64(n)) }

// StringRecord returns the metadata record (stored at MetaKey(k)) that
// makes k the Redis string v with no TTL, as written by the transaction
// with start timestamp stamp. Programs that write Redis strings through
// Strata's Go client (the workload's strata driver) use it, so that
// redis-cli reads what they wrote.
func StringRecord(v []byte, stamp uint64) []byte {
	return meta{typ: typeString, stamp: stamp, payload: v}.encode()
}

// StringValue decodes a metadata record read at MetaKey(k) at unix time
// nowMs: k's string value, or found=false when k is not a live key (its
// TTL passed). A key of another type is an error.
func StringValue(b []byte, nowMs int64) (v []byte, found bool, err error) {
	m, err := decodeMeta(b)
	if err != nil {
		return nil, false, err
	}
	if m.expired(nowMs) {
		return nil, false, nil
	}
	if m.typ != typeString {
		return nil, false, errors.New("resp: the key holds a " + m.typ.String() + ", not a string")
	}
	return m.payload, true, nil
}
