package mvcc

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// PendingWrite is a commit record staged by a command whose Raft entry is
// proposed but not yet applied, on a key whose latches the command gave up
// before the apply (kvserver's early lock release): a one-phase commit or
// the commit of a prewritten key. Pessimistic lock requests treat the key
// as committed by it (PessimisticLockPending); every other writer waits
// for the entry's apply.
type PendingWrite struct {
	Key      []byte
	StartTS  uint64 // the committing transaction's
	CommitTS uint64
	// Lock: a lock-only record (the key's value does not change). Deleted:
	// a delete. Otherwise a put of Value.
	Lock, Deleted bool
	Value         []byte
}

// PendingWrites returns the commit records (puts, deletes, lock records;
// not rollbacks) that b stages, with the value of each put, read from b
// or, for a value a prewrite stored before, from r.
func PendingWrites(r pebble.Reader, b *pebble.Batch) ([]PendingWrite, error) {
	var (
		out  []PendingWrite
		data map[string][]byte // data-CF sets of b, by engine key
	)
	rd := b.Reader()
	for {
		kind, k, v, ok, err := rd.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if kind != pebble.InternalKeyKindSet || len(k) < 2 || k[0] != Prefix {
			continue
		}
		switch k[1] {
		case dataCF:
			if data == nil {
				data = make(map[string][]byte)
			}
			data[string(k)] = v
		case writeCF:
			key, commitTS, err := decodeWriteKey(k)
			if err != nil {
				return nil, err
			}
			w, err := decodeWrite(v)
			if err != nil {
				return nil, err
			}
			if w.kind == writeRollback || commitTS == w.startTS {
				continue // a rollback, or a commit overlapping one: not worth the care
			}
			pw := PendingWrite{Key: key, StartTS: w.startTS, CommitTS: commitTS,
				Lock: w.kind == writeLock, Deleted: w.kind == writeDelete}
			if w.kind == writePut && w.hasValue {
				pw.Value = append([]byte{}, w.value...)
			}
			out = append(out, pw)
		}
	}
	for i := range out {
		pw := &out[i]
		if pw.Lock || pw.Deleted || pw.Value != nil {
			continue
		}
		dk := dataKey(pw.Key, pw.StartTS)
		if v, ok := data[string(dk)]; ok {
			pw.Value = append([]byte{}, v...)
			continue
		}
		v, closer, err := r.Get(dk)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, errors.New("mvcc: committed value missing from the data column family")
		}
		if err != nil {
			return nil, err
		}
		pw.Value = append([]byte{}, v...)
		closer.Close()
	}
	return out, nil
}
