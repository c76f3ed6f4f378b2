package kvserver

import (
	"context"
	"errors"
	"time"

	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// maxPersistLockBytes bounds the in-memory locks of a region that
// PersistPessimisticLocks moves in one Raft entry (TiKV bounds a region's
// in-memory locks to 512 KiB for the same reason: they travel in one
// message). Locks past it stay in memory and go with the leadership.
const maxPersistLockBytes = 512 << 10

// handoverWindow is how long after PersistPessimisticLocks new locks in the
// region go to the engine: longer than a leader transfer may take (etcd
// raft abandons one after an election timeout, 1-2 s here).
const handoverWindow = 3 * time.Second

// PersistPessimisticLocks moves the in-memory pessimistic locks of region
// regionID, which this store leads, into the engine through one Raft entry
// (mvcc.PersistPessimisticLocks), before the store hands the region's
// leadership to another store on purpose: a transfer PD asks for, or a
// merge whose target is led elsewhere (TiKV proposes its in-memory locks
// before a leader transfer and a merge the same way). The next leader then
// has them, and their transactions keep their keys instead of finding the
// locks gone at prewrite (and aborting when someone wrote a key
// meanwhile). It returns once the entry is committed; the transferee
// applies it before it serves.
//
// From its call until handoverWindow later, new locks in the region go to
// the engine through Raft as well (mvcc.PessimisticLocks.PersistNewLocks),
// so a lock taken between the move and the handover is not left behind in
// memory; after the window (the handover happened, or failed and this
// store leads on) they go to memory again.
//
// It is an optimization, not a guarantee: locks past maxPersistLockBytes
// and every lock of a leader that crashes or is cut off are still lost
// with the leadership, and a prewrite re-checks their keys
// (mvcc.PessimisticLocks).
func (s *Server) PersistPessimisticLocks(ctx context.Context, regionID uint64) (int, error) {
	table := s.locks.PessimisticLocks()
	p, ok := s.store.Peer(regionID)
	if !ok {
		return 0, nil
	}
	r := p.Region()
	// Before the look: a lock request that staged its lock for the table
	// earlier and applies after this writes it to its batch instead.
	table.PersistNewLocks(r.StartKey, r.EndKey, handoverWindow)
	if table.Len() == 0 {
		return 0, nil
	}
	// As for a lock request: a loss of leadership after this look drops
	// the locks, and none may come back through the engine.
	gen := table.Generation()
	keys := table.Keys(r.StartKey, r.EndKey, maxPersistLockBytes)
	if len(keys) == 0 {
		return 0, nil
	}
	p, r, rerr := s.route(&kvpb.Context{RegionId: regionID, RegionEpoch: r.Epoch}, keys...)
	if rerr != nil {
		return 0, &raftstore.RegionErr{E: rerr}
	}
	// The latches stay held until the entry is applied (or its proposal
	// failed): no command may find a key without its lock in between.
	guard, err := s.acquire(ctx, keys)
	if err != nil {
		return 0, err
	}
	b := s.engine.NewBatch()
	defer b.Close()
	n, err := mvcc.PersistPessimisticLocks(s.db, b, keys, gen)
	if errors.Is(err, mvcc.ErrLocksDropped) {
		guard.Release()
		return 0, nil // the leadership is gone already, and the locks with it
	}
	if err != nil || n == 0 {
		guard.Release()
		return 0, err
	}
	if err := s.store.ProposeCommitted(ctx, p, r.Epoch, b, guard.Release); err != nil {
		return 0, err
	}
	return n, nil
}
