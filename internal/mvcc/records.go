package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/strata-db/strata/kvpb"
)

// maxShortValue is the largest value stored inline in a lock or write record.
// Larger values go to the data column family, written once at prewrite.
//
// TiKV inlines up to 255 bytes. We inline up to 4 KiB: a read of an inlined
// value is one seek instead of two (write CF, then data CF), and records of
// a few hundred bytes to a few KiB are common (YCSB's 1 KB records, SQL rows
// with text columns, Redis values). Profiles of YCSB A over the Redis
// protocol showed the data-CF lookup at 18% of CPU with 255.
const maxShortValue = 4096

var errCorruptRecord = errors.New("mvcc: corrupt record")

// lock is the decoded value of a lock-CF entry. typ is one of kvpb.Op_Put,
// Op_Del, Op_Lock (prewrite locks) or Op_PessimisticLock.
type lock struct {
	typ         kvpb.Op
	primary     []byte
	startTS     uint64
	ttl         uint64 // ms after PhysicalMs(startTS)
	forUpdateTS uint64
	minCommitTS uint64
	txnSize     uint64
	hasValue    bool // value is inlined; a Put lock without it has its value in the data CF
	value       []byte
	mem         bool // a pessimistic lock held in memory only (PessimisticLocks); never encoded
}

func (l *lock) info(key []byte) *kvpb.LockInfo {
	return &kvpb.LockInfo{
		PrimaryLock:     l.primary,
		LockVersion:     l.startTS,
		Key:             key,
		LockTtl:         l.ttl,
		TxnSize:         l.txnSize,
		LockType:        l.typ,
		LockForUpdateTs: l.forUpdateTS,
		MinCommitTs:     l.minCommitTS,
	}
}

// expired reports whether the lock's TTL has run out at currentTS.
func (l *lock) expired(currentTS uint64) bool {
	return PhysicalMs(currentTS) >= PhysicalMs(l.startTS)+l.ttl
}

// Lock encoding: type byte, uvarints startTS ttl forUpdateTS minCommitTS
// txnSize len(primary), primary, then optionally 'v' and the inline value.
func (l *lock) encode() []byte {
	b := make([]byte, 0, 1+5*binary.MaxVarintLen64+len(l.primary)+1+len(l.value))
	b = append(b, byte(l.typ))
	b = binary.AppendUvarint(b, l.startTS)
	b = binary.AppendUvarint(b, l.ttl)
	b = binary.AppendUvarint(b, l.forUpdateTS)
	b = binary.AppendUvarint(b, l.minCommitTS)
	b = binary.AppendUvarint(b, l.txnSize)
	b = binary.AppendUvarint(b, uint64(len(l.primary)))
	b = append(b, l.primary...)
	if l.hasValue {
		b = append(b, 'v')
		b = append(b, l.value...)
	}
	return b
}

// decodeLock decodes a lock record; the result does not alias b.
func decodeLock(b []byte) (*lock, error) {
	if len(b) < 1 {
		return nil, errCorruptRecord
	}
	l := &lock{typ: kvpb.Op(b[0])}
	switch l.typ {
	case kvpb.Op_Put, kvpb.Op_Del, kvpb.Op_Lock, kvpb.Op_PessimisticLock:
	default:
		return nil, fmt.Errorf("mvcc: corrupt lock: type %d", b[0])
	}
	b = b[1:]
	var primaryLen uint64
	for _, dst := range []*uint64{&l.startTS, &l.ttl, &l.forUpdateTS, &l.minCommitTS, &l.txnSize, &primaryLen} {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errCorruptRecord
		}
		*dst = v
		b = b[n:]
	}
	if uint64(len(b)) < primaryLen {
		return nil, errCorruptRecord
	}
	l.primary = append([]byte(nil), b[:primaryLen]...)
	b = b[primaryLen:]
	if len(b) > 0 {
		if b[0] != 'v' {
			return nil, errCorruptRecord
		}
		l.hasValue = true
		l.value = append([]byte{}, b[1:]...)
	}
	return l, nil
}

// writeKind is the type of a write-CF record.
type writeKind byte

const (
	writePut      writeKind = 'P'
	writeDelete   writeKind = 'D'
	writeLock     writeKind = 'L' // a committed lock-only key: no value change
	writeRollback writeKind = 'R' // at commitTS == startTS: the txn is rolled back on this key
)

func (k writeKind) String() string {
	switch k {
	case writePut:
		return "put"
	case writeDelete:
		return "delete"
	case writeLock:
		return "lock"
	case writeRollback:
		return "rollback"
	}
	return fmt.Sprintf("writeKind(%d)", byte(k))
}

func writeKindOf(lockType kvpb.Op) writeKind {
	switch lockType {
	case kvpb.Op_Put:
		return writePut
	case kvpb.Op_Del:
		return writeDelete
	default:
		return writeLock
	}
}

// write is the decoded value of a write-CF entry.
type write struct {
	kind    writeKind
	startTS uint64
	// overlappedRollback records that the transaction whose startTS equals
	// this record's commitTS was rolled back on this key: its Rollback
	// record would have had this very engine key.
	overlappedRollback bool
	hasValue           bool // value is inlined; a put without it has its value in the data CF
	value              []byte
	// owned: value is a private copy (from the version cache), which a
	// reader may return without copying it again.
	owned bool
}

const (
	writeFlagOverlappedRollback = 1 << iota
	writeFlagHasValue
)

// Write encoding: kind byte, uvarint startTS, flags byte, inline value.
func (w *write) encode() []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+1+len(w.value))
	b = append(b, byte(w.kind))
	b = binary.AppendUvarint(b, w.startTS)
	var flags byte
	if w.overlappedRollback {
		flags |= writeFlagOverlappedRollback
	}
	if w.hasValue {
		flags |= writeFlagHasValue
	}
	b = append(b, flags)
	if w.hasValue {
		b = append(b, w.value...)
	}
	return b
}

// decodeWrite decodes a write record. w.value aliases b: copy it to keep it
// beyond the life of b.
func decodeWrite(b []byte) (write, error) {
	var w write
	if len(b) < 1 {
		return w, errCorruptRecord
	}
	w.kind = writeKind(b[0])
	switch w.kind {
	case writePut, writeDelete, writeLock, writeRollback:
	default:
		return w, fmt.Errorf("mvcc: corrupt write: kind %d", b[0])
	}
	v, n := binary.Uvarint(b[1:])
	if n <= 0 || len(b) < 1+n+1 {
		return w, errCorruptRecord
	}
	w.startTS = v
	flags := b[1+n]
	w.overlappedRollback = flags&writeFlagOverlappedRollback != 0
	w.hasValue = flags&writeFlagHasValue != 0
	rest := b[1+n+1:]
	if w.hasValue {
		w.value = rest
	} else if len(rest) != 0 {
		return w, errCorruptRecord
	}
	return w, nil
}

// inlineWrite is decodeWrite for a scan's common records, a put with its
// value inline or a delete, without decoding the start ts: it finds the
// end of the start ts's varint from one 8-byte load (a TSO timestamp takes
// 9 bytes). ok is false for every other record, short or malformed ones
// included: decodeWrite then decides.
func inlineWrite(b []byte) (kind writeKind, value []byte, ok bool) {
	if len(b) < 10 {
		return 0, nil, false
	}
	kind = writeKind(b[0])
	if kind != writePut && kind != writeDelete {
		return 0, nil, false
	}
	// The varint's last byte is its first without the continuation bit.
	n := 9
	if stop := ^binary.LittleEndian.Uint64(b[1:9]) & 0x8080808080808080; stop != 0 {
		n = bits.TrailingZeros64(stop)>>3 + 1
	} else if b[9]&0x80 != 0 || len(b) < 11 {
		return 0, nil, false
	}
	flags, rest := b[1+n], b[2+n:]
	if flags&writeFlagHasValue == 0 || kind != writePut {
		if kind == writePut || len(rest) != 0 {
			return 0, nil, false
		}
		return kind, nil, true
	}
	return kind, rest, true
}
