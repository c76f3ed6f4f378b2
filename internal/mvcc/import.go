package mvcc

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Import stages in b a Put of value to key committed at version: a write
// record at commit ts = start ts = version, with the value inline when it
// is at most maxShortValue bytes and in the data family otherwise. It is
// the storage side of a bulk import (the KV service's KvImport), which
// writes data derived from a snapshot without a two-phase commit.
//
// Nothing is locked, checked or read: the caller promises that value is
// what key holds at version in the data it read at version (an index
// entry computed from a row read then), and that no transaction commits
// key at exactly version (version is the caller's own snapshot timestamp,
// which no other transaction is given). Then any transaction that changed
// key's row after the snapshot commits above version, so its record
// hides this one, and any that committed below it is what the snapshot
// showed. Staging the same pair twice writes the same record: a retry is
// harmless.
func Import(b *pebble.Batch, key, value []byte, version uint64) error {
	if version == 0 {
		return errors.New("mvcc: import at version 0")
	}
	w := write{kind: writePut, startTS: version}
	if len(value) <= maxShortValue {
		w.hasValue, w.value = true, value
	} else if err := b.Set(dataKey(key, version), value, nil); err != nil {
		return err
	}
	return b.Set(writeKey(key, version), w.encode(), nil)
}
