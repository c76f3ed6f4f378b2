// Package kvserver is the transactional KV service of a store: the
// Percolator API of kvpb.KvServer, served by region leaders.
//
// Every request is routed to the local replica named by its context and
// checked (region epoch, key range, leadership); a failed check returns a
// RegionError, which the client library answers by refreshing its region
// cache and retrying.
//
// Reads run on the leader against applied state: they first raise the
// concurrency manager's max_ts and wait out in-memory locks of one-phase
// commits in flight (see mvcc.Concurrency), then read the engine.
// Writes take latches on their keys, compute their MVCC effects from the
// applied state into a batch (package mvcc), propose the batch through Raft
// and release the latches only after it is applied, so two writers never
// decide from the same state. The same Server is called in-process (as a
// plain method call by the client library) or over gRPC.
//
// Pessimistic lock requests take their locks in the leader's memory
// (mvcc.PessimisticLocks), without a proposal, and wait here, on the leader,
// for another transaction's lock (lockwait.go): parked until a command that
// can release it has applied, after asking the cluster's deadlock detector
// whether the wait closes a cycle. A commit with such waiters releases
// its keys to them when it is proposed rather than when it is applied
// (early.go).
//
// GC garbage-collects a region's old versions at a safe point, in chunks
// proposed through the region's Raft log like any write; KvDestroyRange
// deletes a whole key range no reader needs (a dropped table's) in one
// proposal of range deletions; KvImport writes committed versions in
// bulk (an ingest-mode index backfill's sorted entries). Reads below the
// store's GC safe point fail (mvcc.TooOldError) instead of returning
// partial history; they check it before and after reading the engine, and
// the leader raises it before it proposes deletions, so a read that
// overlaps a GC never passes both checks. Prewrites and pessimistic locks
// of transactions that started at or below it are refused too.
package kvserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/deadlock"
	"github.com/strata-db/strata/internal/mvcc"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// Server implements kvpb.KvServer on a store.
type Server struct {
	kvpb.UnimplementedKvServer
	store *raftstore.Store
	// db reads the engine through the lock index: lock lookups of keys
	// known to be unlocked do not reach Pebble. Batches come from engine.
	db     pebble.Reader
	engine *pebble.DB
	cm     *mvcc.Concurrency
	locks  *mvcc.LockSet
	tso    func(context.Context) (uint64, error)

	// maxTSMu serializes the max_ts syncs of new leaders (syncMaxTS).
	maxTSMu sync.Mutex

	// waiters are the pessimistic lock requests waiting for a lock
	// (lockwait.go); detector is this store's deadlock detector and
	// detectorSvc, when set, the one its waiters consult instead.
	waiters     lockWaiters
	detector    *deadlock.Detector
	detectorSvc atomic.Pointer[deadlock.Service]

	// flows counts each region's traffic (flow.go): region id -> *regionFlow.
	flows sync.Map

	// pending holds the commit records of commits proposed but not yet
	// applied that released their latches early (early.go).
	pending pendingTable
}

// New returns the KV service of store. locks must be the LockSet that
// observes the store's apply path; pessimistic locks are kept in its table
// of in-memory locks (a new one unless it has one). tso returns a fresh
// timestamp from the timestamp oracle: a replica that becomes leader
// raises max_ts to one before it serves a one-phase commit (see
// mvcc.Concurrency).
func New(store *raftstore.Store, locks *mvcc.LockSet, tso func(context.Context) (uint64, error)) *Server {
	if locks.PessimisticLocks() == nil {
		locks.SetPessimisticLocks(mvcc.NewPessimisticLocks(0))
	}
	return &Server{store: store, db: locks.Reader(store.Engine()), engine: store.Engine(), cm: mvcc.NewConcurrency(),
		locks: locks, tso: tso, detector: deadlock.New(0)}
}

func (s *Server) get(key []byte, ts uint64) ([]byte, bool, error) {
	return mvcc.Get(s.db, key, ts, nil)
}

// route finds and checks the replica a request addresses. The region it
// returns is the one the request was checked against: reads clip to its
// range and writes are proposed under its epoch, so a split in between
// makes the write fail with EpochNotMatch instead of landing in a range the
// region no longer owns.
func (s *Server) route(rctx *kvpb.Context, keys ...[]byte) (*raftstore.Peer, *kvpb.Region, *kvpb.RegionError) {
	if rctx == nil {
		return nil, nil, &kvpb.RegionError{Message: "request has no region context"}
	}
	p, ok := s.store.Peer(rctx.RegionId)
	if !ok {
		return nil, nil, &kvpb.RegionError{Message: "region not found", RegionNotFound: &kvpb.RegionNotFound{RegionId: rctx.RegionId}}
	}
	r, rerr := p.Check(rctx, keys...)
	if rerr != nil {
		return nil, nil, rerr
	}
	return p, r, nil
}

// routeRead is route for a read: once the replica is found and checked,
// it waits until the leader knows it is still the leader (its lease, or a
// ReadIndex round; raftstore.Store.ReadReady), so that the applied state
// it reads holds every write acknowledged before the request arrived.
func (s *Server) routeRead(ctx context.Context, rctx *kvpb.Context, keys ...[]byte) (*raftstore.Peer, *kvpb.Region, *kvpb.RegionError, error) {
	p, r, rerr := s.route(rctx, keys...)
	if rerr != nil {
		return nil, nil, rerr, nil
	}
	if err := s.store.ReadReady(ctx, p); err != nil {
		var re *raftstore.RegionErr
		if errors.As(err, &re) {
			return nil, nil, re.E, nil
		}
		return nil, nil, nil, err
	}
	return p, r, nil, nil
}

// syncMaxTS raises max_ts to a fresh timestamp once per term in which p
// leads, before p serves a one-phase commit: reads served by an earlier
// leader raised that leader's max_ts, not this one's, and a one-phase
// commit timestamp below one of those reads would change what the read
// saw. The earlier leader stopped serving reads before this one was
// elected (its lease ran out), so every such read's timestamp came from
// the oracle before the one fetched here.
func (s *Server) syncMaxTS(ctx context.Context, p *raftstore.Peer) *kvpb.RegionError {
	term := p.ReadyTerm()
	if p.MaxTSSyncedTerm() == term {
		return nil
	}
	s.maxTSMu.Lock()
	defer s.maxTSMu.Unlock()
	if p.MaxTSSyncedTerm() == term {
		return nil
	}
	ts, err := s.tso(ctx)
	if err != nil {
		return &kvpb.RegionError{Message: fmt.Sprintf("max timestamp of region %d not synced: %v", p.RegionID(), err),
			ServerBusy: &kvpb.ServerBusy{Reason: "max timestamp not synced", BackoffMs: 10}}
	}
	s.cm.UpdateMaxTS(ts)
	p.SetMaxTSSynced(term)
	return nil
}

// propose replicates b and waits for it to apply. A region error (lost
// leadership, a split since r was checked) is returned separately so it
// reaches the client as such.
func (s *Server) propose(ctx context.Context, p *raftstore.Peer, r *kvpb.Region, b *pebble.Batch) (*kvpb.RegionError, error) {
	return s.proposeThen(ctx, p, r, b, nil)
}

// proposeThen is propose that runs proposed (unless nil) once the entry is
// handed to Raft, or could not be, before waiting for it
// (raftstore.Store.ProposeThen).
func (s *Server) proposeThen(ctx context.Context, p *raftstore.Peer, r *kvpb.Region, b *pebble.Batch, proposed func()) (*kvpb.RegionError, error) {
	if b.Empty() {
		if proposed != nil {
			proposed()
		}
		return nil, nil
	}
	err := s.store.ProposeThen(ctx, p, r.Epoch, b, proposed)
	var re *raftstore.RegionErr
	if errors.As(err, &re) {
		return re.E, nil
	}
	return nil, err
}

// write runs one write command on the replica rctx names: it takes
// latches on keys, lets fn compute the command's MVCC effects from applied
// state into a batch, and proposes the batch, returning once it is applied.
// An error of fn that is a transaction-level error comes back as a
// KeyError, and nothing is proposed.
func (s *Server) write(ctx context.Context, rctx *kvpb.Context, keys [][]byte, fn func(b *pebble.Batch) error) (*kvpb.RegionError, *kvpb.KeyError, error) {
	rerr, ke, _, err := s.writeMaybeEarly(ctx, rctx, keys, false, fn)
	return rerr, ke, err
}

// writeMaybeEarly is write; with early, a command that commits keys
// another transaction waits to lock releases them at its proposal
// (releaseEarly) instead of at its apply, and reports that it did (the
// keys' waiters were woken then).
func (s *Server) writeMaybeEarly(ctx context.Context, rctx *kvpb.Context, keys [][]byte, early bool, fn func(b *pebble.Batch) error) (_ *kvpb.RegionError, _ *kvpb.KeyError, woken bool, _ error) {
	p, r, rerr := s.route(rctx, keys...)
	if rerr != nil {
		return rerr, nil, false, nil
	}
	guard, err := s.acquire(ctx, keys)
	if err != nil {
		return nil, nil, false, err
	}
	defer guard.Release()
	b := s.engine.NewBatch()
	defer b.Close()
	if err := fn(b); err != nil {
		ke, err := keyError(err)
		return nil, ke, false, err
	}
	if len(keys) > 0 && !b.Empty() {
		s.noteWrite(r.Id, keys[0], int(b.Count()), b.Len())
	}
	var proposed func()
	if early && !b.Empty() {
		if e := s.releaseEarly(guard, b, keys); e != nil {
			// Finished when Propose returns: applied, refused, or (the
			// context ended) undetermined, as the latches would have been.
			defer s.pending.finish(e)
			woken = true
			proposed = func() { s.waiters.wake(keys...) }
		}
	}
	rerr, err = s.proposeThen(ctx, p, r, b, proposed)
	return rerr, nil, woken, err
}

// KvGet implements kvpb.KvServer.
func (s *Server) KvGet(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	resp := &kvpb.GetResponse{}
	_, region, rerr, err := s.routeRead(ctx, req.Context, req.Key)
	if rerr != nil || err != nil {
		resp.RegionError = rerr
		return resp, err
	}
	var (
		val   []byte
		found bool
	)
	if req.Latest {
		// The newest committed value. A one-phase commit is acknowledged
		// once its entry is durable, possibly before it is applied here;
		// its in-memory lock stays until the apply, so wait for those on
		// the key, and every write acknowledged before this read is then
		// applied (or left a lock, which the client resolves). No snapshot
		// timestamp, so max_ts stays. GC never removes a key's newest
		// version, so no safe-point check applies.
		if err := s.cm.CheckReadKey(ctx, req.Key, math.MaxUint64); err != nil {
			return nil, err
		}
		val, found, err = mvcc.Get(s.db, req.Key, math.MaxUint64, req.BypassLocks)
	} else {
		if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
			return resp, nil
		}
		s.cm.UpdateMaxTS(req.Version)
		if err := s.cm.CheckReadKey(ctx, req.Key, req.Version); err != nil {
			return nil, err
		}
		val, found, err = s.get(req.Key, req.Version)
	}
	if err != nil {
		if ke := mvcc.KeyErrorOf(err); ke != nil {
			resp.Error = ke
			return resp, nil
		}
		return nil, err
	}
	if !req.Latest {
		if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
			return resp, nil
		}
	}
	resp.Value, resp.NotFound = val, !found
	s.noteRead(region.Id, req.Key, 1, len(req.Key)+len(val))
	return resp, nil
}

// KvBatchGet implements kvpb.KvServer.
func (s *Server) KvBatchGet(ctx context.Context, req *kvpb.BatchGetRequest) (*kvpb.BatchGetResponse, error) {
	resp := &kvpb.BatchGetResponse{}
	_, region, rerr, err := s.routeRead(ctx, req.Context, req.Keys...)
	if rerr != nil || err != nil {
		resp.RegionError = rerr
		return resp, err
	}
	if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
		return resp, nil
	}
	s.cm.UpdateMaxTS(req.Version)
	for _, k := range req.Keys {
		if err := s.cm.CheckReadKey(ctx, k, req.Version); err != nil {
			return nil, err
		}
		val, found, err := mvcc.BatchGetKey(s.db, k, req.Version, nil)
		if err != nil {
			if ke := mvcc.KeyErrorOf(err); ke != nil {
				resp.Pairs = append(resp.Pairs, &kvpb.KvPair{Key: k, Error: ke})
				continue
			}
			return nil, err
		}
		if found {
			resp.Pairs = append(resp.Pairs, &kvpb.KvPair{Key: k, Value: val})
		}
	}
	if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
		resp.Pairs = nil
	}
	n := 0
	for _, kv := range resp.Pairs {
		n += len(kv.Key) + len(kv.Value)
	}
	if len(req.Keys) > 0 {
		s.noteRead(region.Id, req.Keys[0], len(resp.Pairs), n)
	}
	return resp, nil
}

// KvScan implements kvpb.KvServer.
func (s *Server) KvScan(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	var pairs []*kvpb.KvPair
	resp, err := s.scan(ctx, req, func(r pebble.Reader, start, end []byte) (keys, bytes int, err error) {
		pairs, err = mvcc.Scan(r, start, end, int(req.Limit), req.Version, req.Reverse)
		for _, kv := range pairs {
			bytes += len(kv.Key) + len(kv.Value)
		}
		return len(pairs), bytes, err
	})
	if err != nil || resp.RegionError != nil || resp.Error != nil {
		return resp, err
	}
	if req.KeyOnly {
		for _, kv := range pairs {
			kv.Value = nil
		}
	}
	resp.Pairs = pairs
	return resp, nil
}

// KvScanFunc is KvScan handing each pair to fn as it is read, for a client
// in the same process (client.LocalKv): nothing is copied or collected, and
// key and value are valid only during the call. The response carries the
// errors KvScan would return and no pairs. When it carries an error, fn may
// already have seen pairs: those before a lock (Error.Locked) are good,
// while after any other error the caller must drop what it was given (the
// final check that the read timestamp is still above the GC safe point
// failed).
func (s *Server) KvScanFunc(ctx context.Context, req *kvpb.ScanRequest, fn func(key, value []byte) error) (*kvpb.ScanResponse, error) {
	return s.scan(ctx, req, func(r pebble.Reader, start, end []byte) (keys, bytes int, err error) {
		err = mvcc.ScanFunc(r, start, end, int(req.Limit), req.Version, req.Reverse, func(key, value []byte) error {
			keys++
			bytes += len(key) + len(value)
			if req.KeyOnly {
				return fn(key, nil)
			}
			return fn(key, value)
		})
		return keys, bytes, err
	})
}

// scan runs a scan request's checks around read, which scans [start, end)
// (the request's range clipped to the region) of the engine.
func (s *Server) scan(ctx context.Context, req *kvpb.ScanRequest, read func(r pebble.Reader, start, end []byte) (keys, bytes int, err error)) (*kvpb.ScanResponse, error) {
	resp := &kvpb.ScanResponse{}
	_, r, rerr, err := s.routeRead(ctx, req.Context)
	if rerr != nil || err != nil {
		resp.RegionError = rerr
		return resp, err
	}
	// Clip the scan to the region the request was checked against (the
	// client's view of it); the client walks region by region.
	start, end := clip(r, req.StartKey, req.EndKey)
	if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
		return resp, nil
	}
	s.cm.UpdateMaxTS(req.Version)
	if err := s.cm.CheckReadRange(ctx, start, end, req.Version); err != nil {
		return nil, err
	}
	keys, bytes, err := read(s.db, start, end)
	s.noteRead(r.Id, start, keys, bytes)
	if err != nil {
		if ke := mvcc.KeyErrorOf(err); ke != nil {
			resp.Error = ke
			return resp, nil
		}
		return nil, err
	}
	if resp.Error = s.checkReadTS(req.Version); resp.Error != nil {
		return resp, nil
	}
	return resp, nil
}

// checkReadTS refuses a read at ts below the store's GC safe point.
func (s *Server) checkReadTS(ts uint64) *kvpb.KeyError {
	return mvcc.KeyErrorOf(s.locks.CheckReadTS(ts))
}

// checkStartTS refuses a prewrite or pessimistic lock of a transaction
// that started at or below the GC safe point: its rollback record, which
// keeps a late prewrite out, may have been collected.
func (s *Server) checkStartTS(startTS uint64) *kvpb.KeyError {
	if sp := s.locks.GCSafePoint(); startTS <= sp {
		return mvcc.KeyErrorOf(&mvcc.TooOldError{ReadTS: startTS, SafePoint: sp})
	}
	return nil
}

func clip(r *kvpb.Region, start, end []byte) ([]byte, []byte) {
	if string(start) < string(r.StartKey) {
		start = r.StartKey
	}
	if len(r.EndKey) > 0 && (len(end) == 0 || string(end) > string(r.EndKey)) {
		end = r.EndKey
	}
	return start, end
}

func mutationKeys(ms []*kvpb.Mutation) [][]byte {
	keys := make([][]byte, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	return keys
}

// KvPrewrite implements kvpb.KvServer. With try_one_pc the transaction is
// committed in this single step: its commit timestamp is chosen above every
// timestamp read so far on this leader (max_ts), and in-memory locks make
// readers at or above it wait until the write is applied.
func (s *Server) KvPrewrite(ctx context.Context, req *kvpb.PrewriteRequest) (*kvpb.PrewriteResponse, error) {
	resp := &kvpb.PrewriteResponse{}
	keys := mutationKeys(req.Mutations)
	p, r, rerr := s.route(req.Context, keys...)
	if rerr != nil {
		resp.RegionError = rerr
		return resp, nil
	}
	if ke := s.checkStartTS(req.StartVersion); ke != nil {
		resp.Errors = []*kvpb.KeyError{ke}
		return resp, nil
	}
	if req.TryOnePc {
		if rerr := s.syncMaxTS(ctx, p); rerr != nil {
			resp.RegionError = rerr
			return resp, nil
		}
	}
	guard, err := s.acquire(ctx, keys)
	if err != nil {
		return nil, err
	}
	b := s.engine.NewBatch()
	defer b.Close()
	if req.TryOnePc {
		return s.onePC(ctx, req, keys, p, r, guard, b)
	}
	defer guard.Release()
	{
		errs, err := mvcc.Prewrite(s.db, b, req)
		if err != nil {
			return nil, err
		}
		if hasErr(errs) {
			resp.Errors = keyErrors(errs)
			return resp, nil
		}
	}
	if rerr, err := s.propose(ctx, p, r, b); rerr != nil || err != nil {
		resp.RegionError = rerr
		return resp, err
	}
	return resp, nil
}

// onePC runs a one-phase commit under guard (released here) into b. The
// client hears of the commit once its entry is committed and durable
// (raftstore.ProposeCommitted), while it is applied: until then the latches
// keep writers off the keys and the memory locks make readers at or above
// the commit ts wait (Concurrency), so no one sees the state before it.
func (s *Server) onePC(ctx context.Context, req *kvpb.PrewriteRequest, keys [][]byte, p *raftstore.Peer, r *kvpb.Region,
	guard *mvcc.Guard, b *pebble.Batch) (*kvpb.PrewriteResponse, error) {
	resp := &kvpb.PrewriteResponse{}
	ml := s.cm.LockMemory(keys, req.StartVersion)
	var early *pendingEntry
	release := func() {
		ml.Release()
		if early != nil {
			s.pending.finish(early) // the waiters were woken at the proposal
			return
		}
		guard.Release()
		s.waiters.wake(keys...) // the transaction's pessimistic locks are gone
	}
	commitTS := max(s.cm.MaxTS()+1, req.StartVersion+1, req.ForUpdateTs+1, req.MinCommitTs)
	ml.SetCommitTS(commitTS)
	errs, err := mvcc.OnePC(s.db, b, req, commitTS)
	if err != nil || hasErr(errs) || b.Empty() {
		release()
		if err != nil {
			return nil, err
		}
		resp.Errors = keyErrors(errs)
		if !hasErr(errs) {
			resp.OnePcCommitTs = commitTS
		}
		return resp, nil
	}
	if len(keys) > 0 {
		s.noteWrite(r.Id, keys[0], int(b.Count()), b.Len())
	}
	early = s.releaseEarly(guard, b, keys)
	var proposed func()
	if early != nil {
		proposed = func() { s.waiters.wake(keys...) }
	}
	err = s.store.ProposeCommittedThen(ctx, p, r.Epoch, b, release, proposed)
	var re *raftstore.RegionErr
	if errors.As(err, &re) {
		resp.RegionError = re.E
		return resp, nil
	}
	if err != nil {
		return resp, err
	}
	resp.OnePcCommitTs = commitTS
	return resp, nil
}

func hasErr(errs []error) bool {
	for _, e := range errs {
		if e != nil {
			return true
		}
	}
	return false
}

func keyErrors(errs []error) []*kvpb.KeyError {
	var out []*kvpb.KeyError
	for _, e := range errs {
		if e == nil {
			continue
		}
		if ke := mvcc.KeyErrorOf(e); ke != nil {
			out = append(out, ke)
		} else {
			out = append(out, &kvpb.KeyError{Abort: e.Error()})
		}
	}
	return out
}

func keyError(err error) (*kvpb.KeyError, error) {
	if err == nil {
		return nil, nil
	}
	if ke := mvcc.KeyErrorOf(err); ke != nil {
		return ke, nil
	}
	return nil, err
}

// KvCommit implements kvpb.KvServer.
func (s *Server) KvCommit(ctx context.Context, req *kvpb.CommitRequest) (*kvpb.CommitResponse, error) {
	resp := &kvpb.CommitResponse{}
	var err error
	var woken bool
	resp.RegionError, resp.Error, woken, err = s.writeMaybeEarly(ctx, req.Context, req.Keys, true, func(b *pebble.Batch) error {
		return mvcc.Commit(s.db, b, req.Keys, req.StartVersion, req.CommitVersion)
	})
	if !woken {
		s.waiters.wake(req.Keys...)
	}
	if resp.RegionError == nil && resp.Error == nil && err == nil {
		resp.CommitVersion = req.CommitVersion
	}
	return resp, err
}

// KvBatchRollback implements kvpb.KvServer.
func (s *Server) KvBatchRollback(ctx context.Context, req *kvpb.BatchRollbackRequest) (*kvpb.BatchRollbackResponse, error) {
	resp := &kvpb.BatchRollbackResponse{}
	var err error
	resp.RegionError, resp.Error, err = s.write(ctx, req.Context, req.Keys, func(b *pebble.Batch) error {
		return mvcc.Rollback(s.db, b, req.Keys, req.StartVersion)
	})
	s.waiters.wake(req.Keys...)
	return resp, err
}

// KvCheckTxnStatus implements kvpb.KvServer.
func (s *Server) KvCheckTxnStatus(ctx context.Context, req *kvpb.CheckTxnStatusRequest) (*kvpb.CheckTxnStatusResponse, error) {
	resp := &kvpb.CheckTxnStatusResponse{}
	var st mvcc.TxnStatus
	var err error
	resp.RegionError, resp.Error, err = s.write(ctx, req.Context, [][]byte{req.PrimaryKey}, func(b *pebble.Batch) error {
		var err error
		st, err = mvcc.CheckTxnStatus(s.db, b, req.PrimaryKey, req.LockTs, req.CallerStartTs, req.CurrentTs, req.RollbackIfNotExist)
		return err
	})
	if resp.RegionError == nil && resp.Error == nil && err == nil {
		resp.LockTtl, resp.CommitVersion, resp.Action, resp.LockInfo = st.TTL, st.CommitTS, st.Action, st.Lock
		if st.Action == kvpb.Action_TTLExpireRollback {
			s.waiters.wake(req.PrimaryKey)
		}
	}
	return resp, err
}

// KvResolveLock implements kvpb.KvServer.
func (s *Server) KvResolveLock(ctx context.Context, req *kvpb.ResolveLockRequest) (*kvpb.ResolveLockResponse, error) {
	resp := &kvpb.ResolveLockResponse{}
	_, r, rerr := s.route(req.Context, req.Keys...)
	if rerr != nil {
		resp.RegionError = rerr
		return resp, nil
	}
	keys := req.Keys
	if len(keys) == 0 {
		locks, err := mvcc.ScanLocks(s.db, r.StartKey, r.EndKey, req.StartVersion, 0)
		if err != nil {
			return nil, err
		}
		for _, l := range locks {
			if l.LockVersion == req.StartVersion {
				keys = append(keys, l.Key)
			}
		}
		if len(keys) == 0 {
			return resp, nil
		}
	}
	var err error
	resp.RegionError, resp.Error, err = s.write(ctx, req.Context, keys, func(b *pebble.Batch) error {
		return mvcc.ResolveLock(s.db, b, req.StartVersion, req.CommitVersion, keys)
	})
	s.waiters.wake(keys...)
	return resp, err
}

// KvPessimisticLock implements kvpb.KvServer. The locks are taken in memory
// (mvcc.PessimisticLocks): no Raft proposal, unless the table is full.
//
// A key locked by another transaction makes the request wait here, on the
// leader, for up to wait_timeout_ms (0: not at all), in slices of
// waitSlice: it parks until a command that may release the lock finishes
// and then tries again. Before each wait it asks the deadlock detector;
// when the wait would close a cycle the request fails at once with a
// Deadlock key error. When a slice or the timeout passes, the request
// returns the lock (a Locked key error): the client checks its owner and
// asks again with what remains of its timeout.
func (s *Server) KvPessimisticLock(ctx context.Context, req *kvpb.PessimisticLockRequest) (*kvpb.PessimisticLockResponse, error) {
	keys := mutationKeys(req.Mutations)
	if ke := s.checkStartTS(req.StartVersion); ke != nil {
		return &kvpb.PessimisticLockResponse{Errors: []*kvpb.KeyError{ke}}, nil
	}
	// A pessimistic transaction may later commit in one phase with a commit
	// ts derived from max_ts; it must land above for_update_ts.
	s.cm.UpdateMaxTS(req.ForUpdateTs)
	deadline := time.Now().Add(time.Duration(req.WaitTimeoutMs) * time.Millisecond)
	// woken is the key this request was woken first for after a release;
	// unless the request then locks it, the key's next waiter is woken.
	var woken []byte
	defer func() {
		if woken != nil {
			s.waiters.wake(woken)
		}
	}()
	for {
		resp := &kvpb.PessimisticLockResponse{}
		// The generation of the in-memory lock table before the
		// leadership check: if this store loses the region while the
		// request waits for its latches, the loss drops the region's
		// locks, and this request's locks must not land after that
		// (they would outlive the leadership they were taken under and
		// be trusted at prewrite if it came back; mvcc.PessimisticLocks).
		gen := s.locks.PessimisticLocks().Generation()
		p, r, rerr := s.route(req.Context, keys...)
		if rerr != nil {
			resp.RegionError = rerr
			return resp, nil
		}
		guard := s.cm.Acquire(keys)
		b := s.engine.NewBatch()
		// Keys whose commit by another transaction is proposed but not
		// yet applied are locked over it (early.go); the latches do not
		// wait for that commit.
		var pending func([]byte) *mvcc.PendingWrite
		if s.pending.n.Load() != 0 {
			pending = s.pending.lookup
		}
		errs, values, over, err := mvcc.PessimisticLockPending(s.db, b, req, gen, pending)
		if errors.Is(err, mvcc.ErrLocksDropped) {
			b.Close()
			guard.Release()
			continue // check the leadership again
		}
		if err != nil {
			b.Close()
			guard.Release()
			return nil, err
		}
		hard, conflicts := splitLockErrors(errs)
		if hasErr(hard) {
			b.Close()
			resp.Errors = keyErrors(hard)
			l := onlyLocked(resp.Errors)
			wait := time.Until(deadline)
			if l == nil || wait <= 0 {
				guard.Release()
				return resp, nil
			}
			w := s.waiters.add(l.Key, req.StartVersion) // under the latches: no release is missed
			guard.Release()
			if woken != nil && !bytes.Equal(woken, l.Key) {
				s.waiters.wake(woken) // woken for a key it no longer waits for
			}
			woken = nil
			outcome, dl, err := s.waitForLock(ctx, req.StartVersion, l, w, min(wait, waitSlice))
			switch {
			case err != nil:
				return nil, err
			case outcome == waitDeadlock:
				resp.Errors = []*kvpb.KeyError{{Deadlock: dl}}
				return resp, nil
			case outcome == waitTimedOut:
				return resp, nil
			case outcome == waitWoken:
				woken = l.Key
			}
			continue
		}
		rerr, err = s.propose(ctx, p, r, b)
		b.Close()
		guard.Release()
		if rerr == nil && err == nil {
			woken = nil // locked
		}
		resp.RegionError = rerr
		if req.ReturnValues {
			resp.Values = values
		}
		if len(conflicts) > 0 && rerr == nil {
			resp.Errors, resp.LockedWithConflict = keyErrors(conflicts), true
		}
		if rerr == nil && err == nil {
			for _, pw := range over {
				if pw != nil {
					metricPendingLocks.Inc()
					resp.Pending = append(resp.Pending, &kvpb.PendingValue{Key: pw.Key, CommitTs: pw.CommitTS, Value: pw.Value, Deleted: pw.Deleted})
				}
			}
		}
		return resp, err
	}
}

// splitLockErrors separates the keys a lock request failed on from those
// it locked with a conflict (mvcc.LockedWithConflictError).
func splitLockErrors(errs []error) (hard, conflicts []error) {
	for _, e := range errs {
		var lwc *mvcc.LockedWithConflictError
		switch {
		case e == nil:
		case errors.As(e, &lwc):
			conflicts = append(conflicts, e)
		default:
			hard = append(hard, e)
		}
	}
	return hard, conflicts
}

// onlyLocked returns the first lock of errs when every error is a lock met,
// nil otherwise.
func onlyLocked(errs []*kvpb.KeyError) *kvpb.LockInfo {
	for _, e := range errs {
		if e.Locked == nil {
			return nil
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs[0].Locked
}

// KvPessimisticRollback implements kvpb.KvServer.
func (s *Server) KvPessimisticRollback(ctx context.Context, req *kvpb.PessimisticRollbackRequest) (*kvpb.PessimisticRollbackResponse, error) {
	resp := &kvpb.PessimisticRollbackResponse{}
	rerr, ke, err := s.write(ctx, req.Context, req.Keys, func(b *pebble.Batch) error {
		return mvcc.PessimisticRollback(s.db, b, req.Keys, req.StartVersion, req.ForUpdateTs)
	})
	s.waiters.wake(req.Keys...)
	resp.RegionError = rerr
	if ke != nil {
		resp.Errors = []*kvpb.KeyError{ke}
	}
	return resp, err
}

// KvTxnHeartBeat implements kvpb.KvServer.
func (s *Server) KvTxnHeartBeat(ctx context.Context, req *kvpb.TxnHeartBeatRequest) (*kvpb.TxnHeartBeatResponse, error) {
	resp := &kvpb.TxnHeartBeatResponse{}
	var ttl uint64
	var err error
	resp.RegionError, resp.Error, err = s.write(ctx, req.Context, [][]byte{req.PrimaryLock}, func(b *pebble.Batch) error {
		var err error
		ttl, err = mvcc.TxnHeartBeat(s.db, b, req.PrimaryLock, req.StartVersion, req.AdviseLockTtl)
		return err
	})
	if resp.RegionError == nil && resp.Error == nil && err == nil {
		resp.LockTtl = ttl
	}
	return resp, err
}

// KvDestroyRange implements kvpb.KvServer: TiKV's UnsafeDestroyRange for
// the part of [start_key, end_key) in the region the request was checked
// against. One proposal carries a range deletion per column family
// (mvcc.DestroyRange), so every replica deletes the same records at the
// same log index, and a record of the safe point (mvcc.PutGCSafePoint).
// Like GC, the leader raises the store's GC safe point before it
// proposes: a read below it, which could find the range empty instead of
// its old contents, fails before or after it reads.
//
// No latches are taken and nothing is read: the caller promises that no
// transaction reads or writes the range at or above the safe point (the
// data of a table dropped before it). A record that an old transaction's
// lock resolution writes into the range after it is destroyed stays as
// garbage; it is never read.
func (s *Server) KvDestroyRange(ctx context.Context, req *kvpb.DestroyRangeRequest) (*kvpb.DestroyRangeResponse, error) {
	resp := &kvpb.DestroyRangeResponse{}
	p, r, rerr := s.route(req.Context)
	if rerr != nil {
		resp.RegionError = rerr
		return resp, nil
	}
	if req.SafePoint == 0 {
		resp.Error = "destroy range: no GC safe point given"
		return resp, nil
	}
	start, end := clip(r, req.StartKey, req.EndKey)
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return resp, nil // nothing of the range is in this region
	}
	// Never lower the region's record below the store's safe point, which
	// may come from another region's GC.
	sp := max(req.SafePoint, s.locks.GCSafePoint())
	s.locks.RaiseGCSafePoint(sp)
	b := s.engine.NewBatch()
	defer b.Close()
	if err := mvcc.DestroyRange(b, start, end); err != nil {
		return nil, err
	}
	if err := mvcc.PutGCSafePoint(b, r.Id, sp); err != nil {
		return nil, err
	}
	rerr, err := s.propose(ctx, p, r, b)
	resp.RegionError = rerr
	return resp, err
}

// KvImport implements kvpb.KvServer: it writes the request's pairs as
// Puts committed at their versions (mvcc.Import), in one proposal under
// the region's epoch. The pairs must be sorted and inside the region (a
// pair outside it is KeyNotInRegion: the client's cache is stale). A
// version at or below the store's GC safe point is refused, since GC may
// already have passed over the key's history there. No latches are
// taken and nothing is read: the records are new versions that no
// transaction writes (see mvcc.Import for the caller's promise), and the
// apply path tells the version cache and the recent-write bounds about
// them like any commit.
func (s *Server) KvImport(ctx context.Context, req *kvpb.ImportRequest) (*kvpb.ImportResponse, error) {
	resp := &kvpb.ImportResponse{}
	if len(req.Pairs) == 0 {
		return resp, nil
	}
	first, last := req.Pairs[0].Key, req.Pairs[len(req.Pairs)-1].Key
	p, r, rerr := s.route(req.Context, first, last)
	if rerr != nil {
		resp.RegionError = rerr
		return resp, nil
	}
	sp := s.locks.GCSafePoint()
	// Sized for the records up front: growing a batch of a few hundred
	// KiB by doubling copies it over and over.
	size := 0
	for _, kv := range req.Pairs {
		size += 2*len(kv.Key) + len(kv.Value) + 48
	}
	b := s.engine.NewBatchWithSize(size)
	defer b.Close()
	var prev []byte
	for i, kv := range req.Pairs {
		if i > 0 && bytes.Compare(prev, kv.Key) >= 0 {
			resp.Error = "import: pairs are not sorted by key or repeat a key"
			return resp, nil
		}
		prev = kv.Key
		if kv.Version <= sp {
			resp.Error = (&mvcc.TooOldError{ReadTS: kv.Version, SafePoint: sp}).Error()
			return resp, nil
		}
		if err := mvcc.Import(b, kv.Key, kv.Value, kv.Version); err != nil {
			return nil, err
		}
	}
	// Counted like any write: the split checker adds the bytes to the
	// region's size, and PD sees the traffic.
	s.noteWrite(r.Id, first, int(b.Count()), b.Len())
	rerr, err := s.propose(ctx, p, r, b)
	resp.RegionError = rerr
	return resp, err
}

// GCStats is what one GC of a region deleted.
type GCStats struct {
	Versions, Values int // write records, data-CF values
	Chunks           int // proposals
}

// GC garbage-collects the region regionID, led by this store, at
// safePoint: the deletions of mvcc.GC over the region's range, computed
// from applied state in chunks of at most chunk keys (<= 0: 4096), each
// proposed through the region's Raft log under the region's epoch, so every
// replica applies the same deletions and a crash replays them. Each chunk
// also records the safe point (mvcc.PutGCSafePoint). A region with nothing
// to delete proposes nothing.
//
// Before the first chunk it raises the store's GC safe point: from then on
// reads below safePoint fail. safePoint must not be below the store's
// current one. The caller must have resolved the locks of transactions
// that started at or below safePoint (see mvcc.GC). A region error (not
// leader, split) ends the GC with an error; the next pass starts over.
func (s *Server) GC(ctx context.Context, regionID, safePoint uint64, chunk int) (GCStats, error) {
	var st GCStats
	if chunk <= 0 {
		chunk = 4096
	}
	p, ok := s.store.Peer(regionID)
	if !ok {
		return st, fmt.Errorf("kvserver: gc: region %d is not on this store", regionID)
	}
	r, rerr := p.Check(nil)
	if rerr != nil {
		return st, fmt.Errorf("kvserver: gc of region %d: %s", regionID, rerr.Message)
	}
	if cur := s.locks.GCSafePoint(); safePoint < cur {
		return st, fmt.Errorf("kvserver: gc of region %d: safe point %d is below the store's %d", regionID, safePoint, cur)
	}
	s.locks.RaiseGCSafePoint(safePoint)
	start := r.StartKey
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		b := s.engine.NewBatch()
		res, err := mvcc.GC(s.db, b, start, r.EndKey, safePoint, chunk)
		if err == nil && res.Versions == 0 {
			// Nothing (more) to delete: nothing is proposed. An idle
			// region's GC is then a read of its applied state, which
			// neither writes its Raft log nor wakes it from hibernation
			// every pass; reads below safePoint see what they always saw,
			// and the record of the last chunk that deleted something
			// keeps the safe point of those deletions across restarts.
			b.Close()
			return st, nil
		}
		if err == nil {
			err = mvcc.PutGCSafePoint(b, r.Id, safePoint)
		}
		if err != nil {
			b.Close()
			return st, err
		}
		rerr, err := s.propose(ctx, p, r, b)
		b.Close()
		if err != nil {
			return st, err
		}
		if rerr != nil {
			return st, fmt.Errorf("kvserver: gc of region %d: %s", regionID, rerr.Message)
		}
		st.Chunks++
		st.Versions += res.Versions
		st.Values += res.Values
		if res.Resume == nil {
			return st, nil
		}
		start = res.Resume
	}
}

// KvScanLock implements kvpb.KvServer: the locks of old transactions in
// a region, for GC to resolve.
func (s *Server) KvScanLock(ctx context.Context, req *kvpb.ScanLockRequest) (*kvpb.ScanLockResponse, error) {
	resp := &kvpb.ScanLockResponse{}
	_, r, rerr, err := s.routeRead(ctx, req.Context)
	if rerr != nil || err != nil {
		resp.RegionError = rerr
		return resp, err
	}
	start, end := clip(r, req.StartKey, req.EndKey)
	locks, err := mvcc.ScanLocks(s.db, start, end, req.MaxVersion, int(req.Limit))
	if err != nil {
		resp.Error = err.Error()
		return resp, nil
	}
	resp.Locks = locks
	return resp, nil
}
