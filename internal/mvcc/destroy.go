package mvcc

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// DestroyRange adds to b one range deletion per column family (data, lock,
// write) covering every record of the user keys in [start, end): values,
// locks and write records of every version. An empty end means no upper
// bound. It reads nothing and takes no latches: it is TiKV's
// UnsafeDestroyRange, for data no reader at or above the GC safe point can
// need (the rows of a table dropped before the safe point), so the caller
// promises that, not this function. The GC safe point records ('z' 'g')
// are outside the three families and are kept.
//
// A store that applies the batch must drop the range's locks from its
// LockSet too; LockSet.Observe does so for range deletions.
func DestroyRange(b *pebble.Batch, start, end []byte) error {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil
	}
	for _, span := range EngineSpans(start, end) {
		if err := b.DeleteRange(span[0], span[1], nil); err != nil {
			return err
		}
	}
	return nil
}
