package node

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/pd"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// storeObserver is the raft store's view of what the regions' data are:
// the system region holds the placement driver's keys, every other region
// the MVCC records of its user keys (and its GC safe point record), which
// the store's mvcc.LockSet indexes.
type storeObserver struct{ *mvcc.LockSet }

var _ raftstore.Observer = storeObserver{}

// pdSpan holds the placement driver's state (engine.PDKey).
var pdSpan = raftstore.Span{Start: []byte{0x02}, End: []byte{0x03}}

func (o storeObserver) Spans(r *kvpb.Region) []raftstore.Span {
	if r.Id == pd.SystemRegionID {
		return []raftstore.Span{pdSpan}
	}
	var out []raftstore.Span
	for _, sp := range mvcc.RegionSpans(r.Id, r.StartKey, r.EndKey) {
		out = append(out, raftstore.Span{Start: sp[0], End: sp[1]})
	}
	return out
}

func mvccSpans(spans []raftstore.Span) [][2][]byte {
	out := make([][2][]byte, len(spans))
	for i, sp := range spans {
		out[i] = [2][]byte{sp.Start, sp.End}
	}
	return out
}

func (o storeObserver) SnapshotApplied(spans []raftstore.Span, meta []byte, b *pebble.Batch) error {
	return o.LockSet.SnapshotApplied(mvccSpans(spans), meta, b)
}

func (o storeObserver) SpansDestroyed(spans []raftstore.Span) error {
	return o.LockSet.SpansDestroyed(mvccSpans(spans))
}
