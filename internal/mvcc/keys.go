package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Prefix is the engine key prefix under which all transactional (MVCC) data
// lives. The raft store owns every other prefix of the engine.
const Prefix byte = 'z'

// Column-family bytes: the second byte of every MVCC engine key. Their
// relative order (d < l < w) fixes the order of the spans EngineSpans returns.
const (
	dataCF  byte = 'd'
	lockCF  byte = 'l'
	writeCF byte = 'w'
)

// logicalBits is the width of the logical counter in a TSO timestamp.
const logicalBits = 18

// PhysicalMs returns the physical part (milliseconds since the Unix epoch, as
// issued by the TSO) of a timestamp.
func PhysicalMs(ts uint64) uint64 { return ts >> logicalBits }

// ComposeTS builds a timestamp from its physical milliseconds and its logical
// counter. logical must be below 1<<18; higher bits are discarded.
func ComposeTS(ms, logical uint64) uint64 {
	return ms<<logicalBits | logical&(1<<logicalBits-1)
}

// appendEscaped appends the order-preserving, prefix-free encoding of key to
// dst: every 0x00 becomes 0x00 0xFF and the key ends with 0x00 0x01. Because
// 0x00 inside an escaped key is always followed by 0xFF, the terminator cannot
// occur inside it, so no escaped key is a prefix of another; and because the
// terminator sorts below both 0x00 0xFF and any byte > 0x00, a key sorts
// before every key it is a proper prefix of.
func appendEscaped(dst, key []byte) []byte {
	for _, c := range key {
		if c == 0 {
			dst = append(dst, 0, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0, 1)
}

var errBadEscape = errors.New("mvcc: malformed escaped key")

// decodeEscaped decodes an escaped key from the front of b and returns the
// user key and what follows the terminator.
func decodeEscaped(b []byte) (key, rest []byte, err error) {
	return appendUnescaped(make([]byte, 0, len(b)), b)
}

// appendUnescaped is decodeEscaped appending the user key to dst.
func appendUnescaped(dst, b []byte) (key, rest []byte, err error) {
	key = dst
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != 0 {
			key = append(key, c)
			continue
		}
		if i+1 >= len(b) {
			return nil, nil, errBadEscape
		}
		switch b[i+1] {
		case 0xFF:
			key = append(key, 0)
			i++
		case 1:
			return key, b[i+2:], nil
		default:
			return nil, nil, errBadEscape
		}
	}
	return nil, nil, errBadEscape
}

func appendInvertedTS(dst []byte, ts uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, ^ts)
}

// lockKey is 'z' 'l' + userKey. A key has at most one lock, so the user key
// needs no escaping and no timestamp suffix.
func lockKey(key []byte) []byte {
	k := make([]byte, 0, 2+len(key))
	return append(append(k, Prefix, lockCF), key...)
}

// versionPrefix is 'z' cf + escaped(userKey): the common prefix of all of one
// user key's versions in the write or data column family.
func versionPrefix(cf byte, key []byte) []byte {
	k := make([]byte, 0, 2+len(key)+2+8)
	return appendEscaped(append(k, Prefix, cf), key)
}

// writeKey is 'z' 'w' + escaped(userKey) + ^commitTS: newest version first.
func writeKey(key []byte, commitTS uint64) []byte {
	return appendInvertedTS(versionPrefix(writeCF, key), commitTS)
}

// dataKey is 'z' 'd' + escaped(userKey) + ^startTS.
func dataKey(key []byte, startTS uint64) []byte {
	return appendInvertedTS(versionPrefix(dataCF, key), startTS)
}

// versionPrefixEnd returns the smallest engine key above every version of the
// user key whose versionPrefix is p. p ends with the terminator 0x00 0x01, so
// bumping its last byte to 0x02 stays below the escaped forms of longer keys
// (which continue with 0x00 0xFF or a byte > 0x00 at that position).
func versionPrefixEnd(p []byte) []byte {
	end := make([]byte, len(p))
	copy(end, p)
	end[len(end)-1]++
	return end
}

// decodeWriteKey splits a write-CF engine key into user key and commit ts.
func decodeWriteKey(k []byte) (key []byte, commitTS uint64, err error) {
	return appendWriteKeyUserKey(nil, k)
}

// appendWriteKeyUserKey is decodeWriteKey appending the user key to dst.
func appendWriteKeyUserKey(dst, k []byte) (key []byte, commitTS uint64, err error) {
	if len(k) < 2 || k[0] != Prefix || k[1] != writeCF {
		return nil, 0, fmt.Errorf("mvcc: %q is not a write key", k)
	}
	if dst == nil {
		dst = make([]byte, 0, len(k))
	}
	key, rest, err := appendUnescaped(dst, k[2:])
	if err != nil {
		return nil, 0, err
	}
	if len(rest) != 8 {
		return nil, 0, fmt.Errorf("mvcc: write key %q has a %d-byte timestamp", k, len(rest))
	}
	return key, ^binary.BigEndian.Uint64(rest), nil
}

// cfBounds returns the engine key bounds [lower, upper) of the user key range
// [start, end) inside column family cf. An empty end means no upper bound.
func cfBounds(cf byte, start, end []byte) (lower, upper []byte) {
	if cf == lockCF {
		lower = append([]byte{Prefix, cf}, start...)
		if len(end) == 0 {
			upper = []byte{Prefix, cf + 1}
		} else {
			upper = append([]byte{Prefix, cf}, end...)
		}
		return lower, upper
	}
	if len(start) == 0 {
		lower = []byte{Prefix, cf}
	} else {
		lower = versionPrefix(cf, start)
	}
	if len(end) == 0 {
		upper = []byte{Prefix, cf + 1}
	} else {
		// Every key k < end has escaped(k) < escaped(end) and, the encoding
		// being prefix-free, they differ before either ends, so all of k's
		// versions sort below escaped(end) too.
		upper = versionPrefix(cf, end)
	}
	return lower, upper
}

// EngineSpans returns the engine key spans, in engine key order, that hold
// the MVCC state (data, locks and writes) of the user keys in [start, end).
// An empty end means the end of the keyspace. The raft store uses them to
// copy, delete or measure a region's transactional data.
func EngineSpans(start, end []byte) [][2][]byte {
	spans := make([][2][]byte, 0, 3)
	for _, cf := range []byte{dataCF, lockCF, writeCF} {
		lo, hi := cfBounds(cf, start, end)
		spans = append(spans, [2][]byte{lo, hi})
	}
	return spans
}
