package mvcc

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/kvpb"
)

// staged collects one command's engine writes. They reach the caller's batch
// only when the whole command succeeds, so a failed command changes nothing.
type staged struct {
	ops []stagedOp
	// memOps change the in-memory pessimistic locks of memTable.
	memOps   []memOp
	memTable *PessimisticLocks
	// checkGen: memOps apply only at table generation memGen
	// (PessimisticLockAsOf).
	checkGen bool
	memGen   uint64
}

type stagedOp struct {
	key, value []byte
	del        bool
}

func (s *staged) set(key, value []byte) { s.ops = append(s.ops, stagedOp{key: key, value: value}) }
func (s *staged) del(key []byte)        { s.ops = append(s.ops, stagedOp{key: key, del: true}) }

// applyTo adds the engine writes to b and makes the changes of in-memory
// locks at once (see PessimisticLocks).
func (s *staged) applyTo(b *pebble.Batch) error {
	if len(s.memOps) > 0 {
		toEngine, ok := s.memTable.apply(s.memOps, s.checkGen, s.memGen)
		if !ok {
			return ErrLocksDropped
		}
		for _, op := range toEngine {
			l := *op.l
			l.mem = false
			s.set(lockKey(op.key), l.encode())
		}
	}
	for _, op := range s.ops {
		if invariantsEnabled {
			checkStagedOp(op)
		}
		var err error
		if op.del {
			err = b.Delete(op.key, nil)
		} else {
			err = b.Set(op.key, op.value, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkStagedOp panics if op is not a well-formed MVCC engine write.
func checkStagedOp(op stagedOp) {
	k := op.key
	if len(k) < 2 || k[0] != Prefix {
		panic(fmt.Sprintf("mvcc: staged key %q outside the MVCC prefix", k))
	}
	switch k[1] {
	case lockCF:
		if !op.del {
			if _, err := decodeLock(op.value); err != nil {
				panic(fmt.Sprintf("mvcc: staged lock of %q does not decode: %v", k, err))
			}
		}
	case writeCF:
		if _, _, err := decodeWriteKey(k); err != nil {
			panic(err)
		}
		if !op.del {
			if _, err := decodeWrite(op.value); err != nil {
				panic(fmt.Sprintf("mvcc: staged write of %q does not decode: %v", k, err))
			}
		}
	case dataCF:
		if _, rest, err := decodeEscaped(k[2:]); err != nil || len(rest) != 8 {
			panic(fmt.Sprintf("mvcc: malformed data key %q", k))
		}
	default:
		panic(fmt.Sprintf("mvcc: staged key %q in unknown column family", k))
	}
}

// putWrite stages write record w of key at commitTS, taking care of an
// existing record at the same engine key: a rollback record there (of the
// transaction whose start ts equals commitTS) survives as the
// overlappedRollback flag; another transaction's commit there would mean two
// commits of one key at one ts, which the protocol rules out. fresh: the
// key is known to have no record at or above commitTS, so there is none
// to look for.
func (s *staged) putWrite(r pebble.Reader, key []byte, commitTS uint64, w *write, fresh bool) error {
	if fresh {
		// No record at or above its start ts, let alone at commitTS.
		s.set(writeKey(key, commitTS), w.encode())
		return nil
	}
	existing, err := getWriteAt(r, key, commitTS)
	if err != nil {
		return err
	}
	if existing != nil {
		switch {
		case existing.startTS == w.startTS && existing.kind == w.kind:
			return nil // already written
		case existing.kind == writeRollback:
			w.overlappedRollback = true
		default:
			return &InvalidRequestError{Key: key, Reason: "another transaction committed this key at the same commit ts"}
		}
	}
	s.set(writeKey(key, commitTS), w.encode())
	return nil
}

// commitLock stages the commit of lock l (of a prewrite) on key at commitTS,
// and the removal of old, the lock it replaces (nil if none): a one-phase
// commit's lock never was stored, unless it replaces a pessimistic lock (a
// deletion of nothing would still be a tombstone for every memtable, flush
// and compaction to carry). fresh: the prewrite's check found no record of
// key at or above the start ts (noRecordSince), so none at commitTS either.
func (s *staged) commitLock(r pebble.Reader, key []byte, l *lock, commitTS uint64, fresh bool, old *lock) error {
	w := &write{kind: writeKindOf(l.typ), startTS: l.startTS, hasValue: l.hasValue, value: l.value}
	if err := s.putWrite(r, key, commitTS, w, fresh && commitTS >= l.startTS); err != nil {
		return err
	}
	if old != nil {
		s.delLock(r, key, old)
	}
	return nil
}

// rollbackKey stages the rollback of transaction startTS on key: removes its
// lock l (nil if none) and any value it stored, and leaves a rollback record
// at startTS so that a prewrite arriving late cannot lock the key again.
func (s *staged) rollbackKey(r pebble.Reader, key []byte, startTS uint64, l *lock) error {
	if l != nil {
		s.delLock(r, key, l)
		if l.typ == kvpb.Op_Put && !l.hasValue {
			s.del(dataKey(key, startTS))
		}
	}
	existing, err := getWriteAt(r, key, startTS)
	if err != nil {
		return err
	}
	switch {
	case existing == nil:
		s.set(writeKey(key, startTS), (&write{kind: writeRollback, startTS: startTS}).encode())
	case existing.kind == writeRollback || existing.overlappedRollback:
		// already rolled back
	default:
		// Another transaction committed this key at commit ts == startTS;
		// keep its record and mark our rollback on it.
		existing.overlappedRollback = true
		s.set(writeKey(key, startTS), existing.encode())
	}
	return nil
}

// errAlreadyCommitted is checkNewerWrites' signal that the mutation's own
// transaction has already committed the key (a duplicate request).
var errAlreadyCommitted = errors.New("mvcc: already committed")

// checkNewerWrites enforces first-committer-wins for transaction startTS on
// key: any Put, Delete or Lock record committed after snapshotTS (start ts,
// or for-update ts for pessimistic locks) by another transaction is a write
// conflict. Rollback records of other transactions do not conflict. It also
// detects the transaction's own rollback (*AlreadyRolledBackError) and its own
// commit (errAlreadyCommitted).
//
// fresh reports that the key certainly has no record at or above startTS.
func checkNewerWrites(r pebble.Reader, key, primary []byte, startTS, snapshotTS uint64) (fresh bool, err error) {
	// One walk down the versions, newest first, answers both questions: is
	// there a commit above the snapshot (conflict), and is there our own
	// rollback record at commit ts == startTS. It usually stops at the
	// first version. Most keys have no record at or above startTS; for
	// one the version cache does not hold, the SSTs alone may say so.
	var result error
	fresh, err = forEachVersionSince(r, key, math.MaxUint64, startTS, func(commitTS uint64, w *write) (bool, error) {
		if commitTS <= snapshotTS {
			if commitTS > startTS {
				return true, nil // walk down to startTS
			}
			if commitTS == startTS && ((w.kind == writeRollback && w.startTS == startTS) || w.overlappedRollback) {
				result = &AlreadyRolledBackError{Key: key, StartTS: startTS}
			}
			return false, nil
		}
		if w.startTS == startTS {
			if w.kind == writeRollback {
				result = &AlreadyRolledBackError{Key: key, StartTS: startTS}
			} else {
				result = errAlreadyCommitted
			}
			return false, nil
		}
		if w.kind == writeRollback {
			return true, nil
		}
		result = &WriteConflictError{Conflict: &kvpb.WriteConflict{
			StartTs:          startTS,
			ConflictTs:       w.startTS,
			Key:              key,
			Primary:          primary,
			ConflictCommitTs: commitTS,
		}}
		return false, nil
	})
	if err != nil {
		return false, err
	}
	return fresh, result
}

// prewriteCheck runs the prewrite checks of one mutation. It returns the lock
// to write, or nil when the key needs no new state: an idempotent retry, a
// CheckNotExists, a key already committed by this transaction.
//
// fresh reports that the key certainly has no write record at or above the
// start ts (see checkNewerWrites); held is this transaction's pessimistic
// lock on the key, which the new lock replaces (nil if none).
//
// pendingTS, for a pessimistic mutation, is the commit ts of another
// transaction's commit of the key that was pending when the key was locked
// (early lock release; zero: none): the lock, and what the transaction
// read, depend on that commit, so a lock that is gone (or was taken again)
// is no proof unless the commit record is there.
func prewriteCheck(r pebble.Reader, req *kvpb.PrewriteRequest, m *kvpb.Mutation, pessimistic bool, lockTS, pendingTS uint64, onePC bool) (newLock *lock, fresh bool, held *lock, err error) {
	key, startTS := m.Key, req.StartVersion
	var typ kvpb.Op
	switch m.Op {
	case kvpb.Op_Put, kvpb.Op_Insert:
		typ = kvpb.Op_Put
	case kvpb.Op_Del:
		typ = kvpb.Op_Del
	case kvpb.Op_Lock, kvpb.Op_CheckNotExists:
		typ = kvpb.Op_Lock
	default:
		return nil, false, nil, &InvalidRequestError{Key: key, Reason: "op " + m.Op.String() + " cannot be prewritten"}
	}

	l, err := txnLock(r, key)
	if err != nil {
		return nil, false, nil, err
	}
	switch {
	case l != nil && l.startTS != startTS:
		return nil, false, nil, &LockedError{Lock: l.info(key)}
	case l != nil && l.typ != kvpb.Op_PessimisticLock && onePC:
		return nil, false, nil, &InvalidRequestError{Key: key, Reason: "already prewritten by this transaction: commit it with Commit"}
	case l != nil && l.typ != kvpb.Op_PessimisticLock:
		return nil, false, nil, nil // prewritten already: idempotent
	case l != nil:
		held = l // which checked conflicts up to its for-update ts
		// A lock taken over a pending commit proves nothing about that
		// commit: the commit's proposal may have failed while the lock
		// stayed (or went to the engine). The prewrite comes after the
		// commit's entry was applied or failed (the leader's writers
		// wait for it), so its record settles it.
		if err := checkPendingCommitted(r, key, startTS, pendingTS); err != nil {
			return nil, false, nil, err
		}
		if pessimistic && l.forUpdateTS > lockTS {
			// The lock was taken at a later ts than the one the
			// transaction locked the key at first (lockTS), when
			// its statement read the key: that lock was lost and the
			// key locked again, or a lock request's answer (a
			// conflict) was lost and the request sent again. It
			// guards the key only from its own ts; check the commits
			// before it, as for a lock that is gone.
			fresh, err = checkNewerWrites(r, key, req.PrimaryLock, startTS, lockTS)
			if err == errAlreadyCommitted {
				return nil, false, nil, nil
			}
			if err != nil {
				return nil, false, nil, err
			}
		}
	case pessimistic:
		// The pessimistic lock is gone: it lived in the memory of a
		// leader that restarted or lost the region, or another
		// transaction's lock resolution removed it (leaving a rollback
		// record), or this is a duplicate of a prewrite that already
		// committed. Check the key as the lock did, from the for-update
		// ts the lock was taken at (lockTS: the transaction's locks may
		// have been taken at different ones, and a commit after this
		// key's is one its statement did not read): if no other
		// transaction committed it since, nothing the lock guarded
		// against happened (see PessimisticLocks). A lock taken over a
		// pending commit of another transaction also needs that commit
		// to have happened: the transaction read its value.
		if err := checkPendingCommitted(r, key, startTS, pendingTS); err != nil {
			state, _, terr := txnRecord(r, key, startTS)
			if terr != nil {
				return nil, false, nil, terr
			}
			if state == stateCommitted {
				return nil, false, nil, nil // a duplicate of a prewrite that committed
			}
			return nil, false, nil, err
		}
		fresh, err = checkNewerWrites(r, key, req.PrimaryLock, startTS, lockTS)
		var wc *WriteConflictError
		switch {
		case err == errAlreadyCommitted:
			return nil, false, nil, nil
		case errors.As(err, &wc):
			state, _, err := txnRecord(r, key, startTS)
			if err != nil {
				return nil, false, nil, err
			}
			if state == stateCommitted {
				return nil, false, nil, nil
			}
			return nil, false, nil, &PessimisticLockNotFoundError{Key: key, StartTS: startTS}
		case err != nil:
			return nil, false, nil, err
		}
	default:
		if fresh, err = checkNewerWrites(r, key, req.PrimaryLock, startTS, startTS); err != nil {
			if err == errAlreadyCommitted {
				return nil, false, nil, nil
			}
			return nil, false, nil, err
		}
	}

	if m.Op == kvpb.Op_Insert || m.Op == kvpb.Op_CheckNotExists {
		_, exists, err := latestValue(r, key, math.MaxUint64)
		if err != nil {
			return nil, false, nil, err
		}
		if exists {
			return nil, false, nil, &AlreadyExistError{Key: key}
		}
		if m.Op == kvpb.Op_CheckNotExists && held == nil {
			return nil, false, nil, nil // a pure check: nothing to lock
		}
	}
	newLock = &lock{
		typ:         typ,
		primary:     req.PrimaryLock,
		startTS:     startTS,
		ttl:         req.LockTtl,
		minCommitTS: req.MinCommitTs,
		txnSize:     req.TxnSize,
	}
	if held != nil || pessimistic {
		newLock.forUpdateTS = req.ForUpdateTs
	}
	if typ == kvpb.Op_Put && len(m.Value) <= maxShortValue {
		newLock.hasValue, newLock.value = true, m.Value
	}
	return newLock, fresh, held, nil
}

// Prewrite runs the first phase of two-phase commit: it checks every mutation
// and locks its key. It returns one error per mutation (nil where the
// mutation succeeded) and, separately, an engine error. Only when every
// mutation succeeds are the locks (and values too large to inline, in the
// data CF) added to b; otherwise b is left untouched.
//
// Per mutation: another transaction's lock -> *LockedError; a Put/Del/Lock
// committed by another transaction after the start ts -> *WriteConflictError
// (for keys holding this transaction's pessimistic lock, which checked up to
// its for-update ts, only when that lock is newer than the key's
// LockForUpdateTs: then after that ts); this transaction's rollback record ->
// *AlreadyRolledBackError; Insert/CheckNotExists over a visible value ->
// *AlreadyExistError; a key flagged in IsPessimisticLock whose pessimistic
// lock is gone -> *PessimisticLockNotFoundError. A key this transaction has
// already prewritten or committed is left as it is (retries are idempotent).
// CheckNotExists only checks.
func Prewrite(r pebble.Reader, b *pebble.Batch, req *kvpb.PrewriteRequest) ([]error, error) {
	return prewrite(r, b, req, 0)
}

// OnePC commits a transaction whose every key is in req in a single step at
// commitTS: Prewrite's checks, then commit records instead of locks (and
// this transaction's pessimistic locks removed). Errors are as for Prewrite.
//
// commitTS must exceed the start ts, the for-update ts and every read ts this
// region has served (Concurrency.MaxTS), and be at least the requested min
// commit ts; see Concurrency. Exceeding the for-update ts matters: a
// pessimistic transaction allows writes committed up to it, and a commit
// below one of those would hide under it (a lost update). A commitTS that
// breaks these rules is the caller's bug: OnePC then returns
// *InvalidRequestError as its second result and writes nothing.
//
// A retry of a one-phase commit that already succeeded writes nothing and
// succeeds; the keys then keep their original commit ts, not commitTS.
func OnePC(r pebble.Reader, b *pebble.Batch, req *kvpb.PrewriteRequest, commitTS uint64) ([]error, error) {
	if commitTS <= req.StartVersion || commitTS <= req.ForUpdateTs || commitTS < req.MinCommitTs {
		return nil, &InvalidRequestError{Reason: "one-phase commit ts must exceed start and for-update ts and reach min commit ts"}
	}
	return prewrite(r, b, req, commitTS)
}

func prewrite(r pebble.Reader, b *pebble.Batch, req *kvpb.PrewriteRequest, onePCCommitTS uint64) ([]error, error) {
	errs := make([]error, len(req.Mutations))
	failed := false
	var s staged
	seen := make(map[string]struct{}, len(req.Mutations))
	for i, m := range req.Mutations {
		if _, dup := seen[string(m.Key)]; dup {
			errs[i], failed = &InvalidRequestError{Key: m.Key, Reason: "key appears twice in one request"}, true
			continue
		}
		seen[string(m.Key)] = struct{}{}
		pessimistic := i < len(req.IsPessimisticLock) && req.IsPessimisticLock[i]
		lockTS := req.ForUpdateTs
		if i < len(req.LockForUpdateTs) && req.LockForUpdateTs[i] != 0 {
			lockTS = req.LockForUpdateTs[i]
		}
		var pendingTS uint64
		if i < len(req.LockPendingCommitTs) {
			pendingTS = req.LockPendingCommitTs[i]
		}
		newLock, fresh, held, err := prewriteCheck(r, req, m, pessimistic, lockTS, pendingTS, onePCCommitTS != 0)
		if err != nil {
			if !isKeyError(err) {
				return nil, err
			}
			errs[i], failed = err, true
			continue
		}
		if failed {
			continue // keep checking to report every error, but stage nothing
		}
		if newLock == nil {
			continue
		}
		if !newLock.hasValue && newLock.typ == kvpb.Op_Put {
			s.set(dataKey(m.Key, req.StartVersion), m.Value)
		}
		if onePCCommitTS == 0 {
			if held != nil && held.mem {
				s.delLock(r, m.Key, held)
			}
			s.set(lockKey(m.Key), newLock.encode())
			continue
		}
		// Latches keep other writers off the key until this batch is
		// applied, so the lock the check saw (or its absence) stands.
		if err := s.commitLock(r, m.Key, newLock, onePCCommitTS, fresh, held); err != nil {
			if !isKeyError(err) {
				return nil, err
			}
			errs[i], failed = err, true
		}
	}
	if failed {
		return errs, nil
	}
	return errs, s.applyTo(b)
}

// Commit runs the second phase of two-phase commit for the keys: each of
// transaction startTS's prewrite locks becomes a commit record at commitTS.
// A key already committed by the transaction is left as it is (idempotent).
// A key with neither the lock nor a commit record -> *TxnLockNotFoundError
// (the transaction was rolled back: abort). A commit ts below the lock's min
// commit ts -> *CommitTSExpiredError. A pessimistic lock that was never
// prewritten -> *InvalidRequestError. Writes reach b only if every key
// succeeds.
func Commit(r pebble.Reader, b *pebble.Batch, keys [][]byte, startTS, commitTS uint64) error {
	if commitTS <= startTS {
		return &InvalidRequestError{Reason: "commit ts must exceed start ts"}
	}
	var s staged
	for _, key := range keys {
		if err := commitKey(r, &s, key, startTS, commitTS); err != nil {
			return err
		}
	}
	return s.applyTo(b)
}

func commitKey(r pebble.Reader, s *staged, key []byte, startTS, commitTS uint64) error {
	l, err := txnLock(r, key)
	if err != nil {
		return err
	}
	if l == nil || l.startTS != startTS {
		state, _, err := txnRecord(r, key, startTS)
		if err != nil {
			return err
		}
		if state == stateCommitted {
			return nil
		}
		return &TxnLockNotFoundError{Key: key, StartTS: startTS}
	}
	if l.typ == kvpb.Op_PessimisticLock {
		return &InvalidRequestError{Key: key, Reason: "the key holds only a pessimistic lock: prewrite it before commit"}
	}
	if commitTS < l.minCommitTS {
		return &CommitTSExpiredError{Key: key, StartTS: startTS, CommitTS: commitTS, MinCommitTS: l.minCommitTS}
	}
	return s.commitLock(r, key, l, commitTS, false, l)
}

// Rollback aborts transaction startTS on the keys: removes its locks (of any
// type) and stored values, and writes rollback records, also on keys it never
// locked, so that a prewrite arriving late fails. A key already committed by
// the transaction -> *AlreadyCommittedError, and nothing is written.
func Rollback(r pebble.Reader, b *pebble.Batch, keys [][]byte, startTS uint64) error {
	var s staged
	for _, key := range keys {
		l, err := txnLock(r, key)
		if err != nil {
			return err
		}
		if l == nil || l.startTS != startTS {
			state, commitTS, err := txnRecord(r, key, startTS)
			if err != nil {
				return err
			}
			switch state {
			case stateCommitted:
				return &AlreadyCommittedError{Key: key, StartTS: startTS, CommitTS: commitTS}
			case stateRolledBack:
				continue
			}
			l = nil
		}
		if err := s.rollbackKey(r, key, startTS, l); err != nil {
			return err
		}
	}
	return s.applyTo(b)
}

// TxnStatus is the outcome of CheckTxnStatus. Exactly one holds: TTL > 0
// (the transaction is alive, Lock describes its primary lock), CommitTS > 0
// (committed), or both zero (rolled back; Action says whether this call did
// it).
type TxnStatus struct {
	TTL      uint64
	CommitTS uint64
	Action   kvpb.Action
	Lock     *kvpb.LockInfo
}

// CheckTxnStatus decides the fate of transaction lockTS from its primary key,
// on behalf of a transaction (callerStartTS) that met one of its locks:
//   - primary lock present and expired at currentTS: roll it back
//     (Action TTLExpireRollback);
//   - present and alive: report its TTL; if the lock has a min commit ts
//     (the owner accepts pushes) at or below callerStartTS, push it to
//     callerStartTS+1 (Action MinCommitTSPushed): the transaction now
//     commits above the caller's read ts, so the caller may read past all
//     its locks by passing lockTS in Get's bypassLocks;
//   - committed: report the commit ts; rolled back: report zeros;
//   - no trace at all: write a rollback record when rollbackIfNotExist
//     (Action LockNotExistRollback), else *TxnNotFoundError.
func CheckTxnStatus(r pebble.Reader, b *pebble.Batch, primary []byte, lockTS, callerStartTS, currentTS uint64, rollbackIfNotExist bool) (TxnStatus, error) {
	var s staged
	l, err := txnLock(r, primary)
	if err != nil {
		return TxnStatus{}, err
	}
	if l != nil && l.startTS == lockTS {
		if l.expired(currentTS) {
			if err := s.rollbackKey(r, primary, lockTS, l); err != nil {
				return TxnStatus{}, err
			}
			return TxnStatus{Action: kvpb.Action_TTLExpireRollback}, s.applyTo(b)
		}
		status := TxnStatus{TTL: l.ttl, Action: kvpb.Action_NoAction}
		if l.minCommitTS > 0 && l.typ != kvpb.Op_PessimisticLock &&
			callerStartTS != math.MaxUint64 && l.minCommitTS <= callerStartTS {
			l.minCommitTS = callerStartTS + 1
			s.putLock(r, primary, l)
			status.Action = kvpb.Action_MinCommitTSPushed
		}
		status.Lock = l.info(primary)
		return status, s.applyTo(b)
	}
	state, commitTS, err := txnRecord(r, primary, lockTS)
	if err != nil {
		return TxnStatus{}, err
	}
	switch state {
	case stateCommitted:
		return TxnStatus{CommitTS: commitTS}, nil
	case stateRolledBack:
		return TxnStatus{}, nil
	}
	if !rollbackIfNotExist {
		return TxnStatus{}, &TxnNotFoundError{StartTS: lockTS, Primary: primary}
	}
	if err := s.rollbackKey(r, primary, lockTS, nil); err != nil {
		return TxnStatus{}, err
	}
	return TxnStatus{Action: kvpb.Action_LockNotExistRollback}, s.applyTo(b)
}

// ResolveLock settles transaction startTS's locks on the keys once its fate
// is known from its primary: commits them at commitTS, or rolls them back
// when commitTS is 0. Pessimistic locks are only removed (their keys were
// never prewritten, so they hold nothing to commit). Keys without a lock of
// the transaction are skipped. Use ScanLocks to find the keys.
func ResolveLock(r pebble.Reader, b *pebble.Batch, startTS, commitTS uint64, keys [][]byte) error {
	if commitTS != 0 && commitTS <= startTS {
		return &InvalidRequestError{Reason: "commit ts must exceed start ts"}
	}
	var s staged
	for _, key := range keys {
		l, err := txnLock(r, key)
		if err != nil {
			return err
		}
		if l == nil || l.startTS != startTS {
			continue
		}
		switch {
		case commitTS == 0:
			err = s.rollbackKey(r, key, startTS, l)
		case l.typ == kvpb.Op_PessimisticLock:
			s.delLock(r, key, l)
		case commitTS < l.minCommitTS:
			err = &CommitTSExpiredError{Key: key, StartTS: startTS, CommitTS: commitTS, MinCommitTS: l.minCommitTS}
		default:
			err = s.commitLock(r, key, l, commitTS, false, l)
		}
		if err != nil {
			return err
		}
	}
	return s.applyTo(b)
}

// PessimisticLock takes pessimistic locks (SELECT ... FOR UPDATE) on the
// mutations' keys for transaction req.StartVersion. With
// req.LockWithConflict, a key committed after req.ForUpdateTs is locked
// anyway, at that commit's ts, and reported as *LockedWithConflictError
// (the locks reach b when no other error occurs). Per key: another
// transaction's lock -> *LockedError; a Put/Del/Lock committed by another
// transaction after req.ForUpdateTs -> *WriteConflictError; the transaction
// already rolled back or committed on the key -> *AlreadyRolledBackError /
// *AlreadyCommittedError. A lock the transaction already holds is kept (its
// for-update ts raised); held at a later for-update ts than the request's
// (the request is a copy sent again after its answer was lost), the commits
// after the request's ts are reported again, as *LockedWithConflictError
// with req.LockWithConflict. The locks do not block readers. When
// req.ReturnValues is set, values holds each key's latest committed value
// (nil if none). Locks reach b only if every key succeeds.
func PessimisticLock(r pebble.Reader, b *pebble.Batch, req *kvpb.PessimisticLockRequest) (errs []error, values [][]byte, err error) {
	errs, values, _, err = pessimisticLock(r, b, req, false, 0, nil)
	return errs, values, err
}

// PessimisticLockAsOf is PessimisticLock for a region leader that read
// gen = PessimisticLocks.Generation() before it checked its leadership: if
// the table dropped locks since (the store may have lost the region), it
// takes no lock in memory and fails with ErrLocksDropped, and the caller
// checks its leadership again.
func PessimisticLockAsOf(r pebble.Reader, b *pebble.Batch, req *kvpb.PessimisticLockRequest, gen uint64) (errs []error, values [][]byte, err error) {
	errs, values, _, err = pessimisticLock(r, b, req, true, gen, nil)
	return errs, values, err
}

// PessimisticLockPending is PessimisticLockAsOf on a leader where a key
// may have a pending commit (pending returns it, or nil): the commit of
// another transaction staged by a command whose Raft entry is proposed but
// not yet applied, which gave up the key's latches at its proposal (early
// lock release). The key is then treated as committed by it: the
// transaction's own lock, if still in the engine, no longer holds the key;
// a for-update ts below the commit ts is a write conflict (locked at the
// commit ts with req.LockWithConflict); a returned value is the pending
// one. over[i] is the pending put or delete the key of mutation i was
// locked over (nil if none): the lock depends on that commit, and must not
// be trusted if the commit never applies (see PendingWrite).
func PessimisticLockPending(r pebble.Reader, b *pebble.Batch, req *kvpb.PessimisticLockRequest, gen uint64, pending func(key []byte) *PendingWrite) (errs []error, values [][]byte, over []*PendingWrite, err error) {
	return pessimisticLock(r, b, req, true, gen, pending)
}

func pessimisticLock(r pebble.Reader, b *pebble.Batch, req *kvpb.PessimisticLockRequest, checkGen bool, gen uint64, pending func([]byte) *PendingWrite) (errs []error, values [][]byte, over []*PendingWrite, err error) {
	errs = make([]error, len(req.Mutations))
	if req.ReturnValues {
		values = make([][]byte, len(req.Mutations))
	}
	failed := false
	var s staged
	for i, m := range req.Mutations {
		var pw *PendingWrite
		if pending != nil {
			pw = pending(m.Key)
		}
		kerr, err := pessimisticLockKey(r, &s, req, m.Key, pw)
		if err != nil {
			return nil, nil, nil, err
		}
		if pw != nil && !pw.Lock && (kerr == nil || isLockedWithConflict(kerr)) {
			if over == nil {
				over = make([]*PendingWrite, len(req.Mutations))
			}
			over[i] = pw
		}
		if kerr != nil {
			errs[i] = kerr
			var lwc *LockedWithConflictError
			if !errors.As(kerr, &lwc) {
				failed = true
				continue
			}
		}
		if req.ReturnValues {
			if pw != nil && !pw.Lock {
				values[i] = pw.Value // nil for a delete
				continue
			}
			v, _, err := latestValue(r, m.Key, math.MaxUint64)
			if err != nil {
				return nil, nil, nil, err
			}
			values[i] = v
		}
	}
	if failed {
		return errs, nil, nil, nil
	}
	s.checkGen, s.memGen = checkGen, gen
	return errs, values, over, s.applyTo(b)
}

func isLockedWithConflict(err error) bool {
	var lwc *LockedWithConflictError
	return errors.As(err, &lwc)
}

// pessimisticLockKey locks key for req; pw is the key's pending commit
// (PessimisticLockPending), or nil.
func pessimisticLockKey(r pebble.Reader, s *staged, req *kvpb.PessimisticLockRequest, key []byte, pw *PendingWrite) (keyErr, err error) {
	startTS := req.StartVersion
	l, err := txnLock(r, key)
	if err != nil {
		return nil, err
	}
	if pw != nil {
		if pw.StartTS == startTS {
			return &AlreadyCommittedError{Key: key, StartTS: startTS, CommitTS: pw.CommitTS}, nil
		}
		if l != nil && l.startTS == pw.StartTS {
			l = nil // the lock the pending commit removes
		}
	}
	if l != nil {
		if l.startTS != startTS {
			return &LockedError{Lock: l.info(key)}, nil
		}
		if l.typ == kvpb.Op_PessimisticLock && l.forUpdateTS > req.ForUpdateTs {
			// The lock is the transaction's but newer than this
			// request: an earlier copy of the request locked the key
			// with a conflict and its answer was lost. The requester
			// read the key at req.ForUpdateTs: report the commits
			// since then again, or it would take the lock for a clean
			// one and write over a commit it never read.
			_, err := checkNewerWrites(r, key, req.PrimaryLock, startTS, req.ForUpdateTs)
			var wc *WriteConflictError
			switch {
			case err == nil, err == errAlreadyCommitted:
				return nil, nil
			case errors.As(err, &wc) && req.LockWithConflict:
				return &LockedWithConflictError{Conflict: wc.Conflict}, nil
			case isKeyError(err):
				return err, nil
			default:
				return nil, err
			}
		}
		if l.typ == kvpb.Op_PessimisticLock && l.forUpdateTS < req.ForUpdateTs {
			l.forUpdateTS = req.ForUpdateTs
			s.putLock(r, key, l)
		}
		return nil, nil
	}
	forUpdateTS := req.ForUpdateTs
	_, err = checkNewerWrites(r, key, req.PrimaryLock, startTS, req.ForUpdateTs)
	if pw != nil && pw.CommitTS > req.ForUpdateTs {
		// The pending commit is the key's newest: a conflict above any
		// the engine holds.
		var wc *WriteConflictError
		if err == nil || errors.As(err, &wc) {
			err = &WriteConflictError{Conflict: &kvpb.WriteConflict{
				StartTs: startTS, ConflictTs: pw.StartTS, Key: key, Primary: req.PrimaryLock, ConflictCommitTs: pw.CommitTS,
			}}
		}
	}
	if err != nil {
		var wc *WriteConflictError
		switch {
		case err == errAlreadyCommitted:
			state, commitTS, err := txnRecord(r, key, startTS)
			if err != nil {
				return nil, err
			}
			if state == stateCommitted {
				return &AlreadyCommittedError{Key: key, StartTS: startTS, CommitTS: commitTS}, nil
			}
			return &AlreadyRolledBackError{Key: key, StartTS: startTS}, nil
		case errors.As(err, &wc) && req.LockWithConflict:
			// Lock it all the same, as of the newer commit: the caller
			// reads the key again holding the lock.
			keyErr = &LockedWithConflictError{Conflict: wc.Conflict}
			forUpdateTS = max(forUpdateTS, wc.Conflict.ConflictCommitTs)
		case isKeyError(err):
			return err, nil
		default:
			return nil, err
		}
	}
	nl := &lock{
		typ:         kvpb.Op_PessimisticLock,
		primary:     req.PrimaryLock,
		startTS:     startTS,
		ttl:         req.LockTtl,
		forUpdateTS: forUpdateTS,
	}
	s.newPessimisticLock(r, key, nl)
	return keyErr, nil
}

// PessimisticRollback removes transaction startTS's pessimistic locks taken
// at or below forUpdateTS on the keys (a statement of a pessimistic
// transaction failed). Prewrite locks and other transactions' locks are left
// alone; no rollback record is written, the transaction goes on.
func PessimisticRollback(r pebble.Reader, b *pebble.Batch, keys [][]byte, startTS, forUpdateTS uint64) error {
	var s staged
	for _, key := range keys {
		l, err := txnLock(r, key)
		if err != nil {
			return err
		}
		if l != nil && l.startTS == startTS && l.typ == kvpb.Op_PessimisticLock && l.forUpdateTS <= forUpdateTS {
			s.delLock(r, key, l)
		}
	}
	return s.applyTo(b)
}

// TxnHeartBeat extends the TTL of transaction startTS's primary lock to
// adviseTTL (it never shortens it) and returns the lock's TTL. No lock of the
// transaction on primary -> *TxnNotFoundError.
func TxnHeartBeat(r pebble.Reader, b *pebble.Batch, primary []byte, startTS, adviseTTL uint64) (uint64, error) {
	l, err := txnLock(r, primary)
	if err != nil {
		return 0, err
	}
	if l == nil || l.startTS != startTS {
		return 0, &TxnNotFoundError{StartTS: startTS, Primary: slices.Clone(primary)}
	}
	var s staged
	if adviseTTL > l.ttl {
		l.ttl = adviseTTL
		s.putLock(r, primary, l)
	}
	return l.ttl, s.applyTo(b)
}

// checkPendingCommitted checks, for a key transaction startTS locked over
// another transaction's pending commit at pendingTS (zero: none), that
// the commit record is there: otherwise the commit never applied (it was
// lost with its leader, or its proposal failed), the value the
// transaction read never existed, and its lock is no proof
// (*PessimisticLockNotFoundError).
func checkPendingCommitted(r pebble.Reader, key []byte, startTS, pendingTS uint64) error {
	if pendingTS == 0 {
		return nil
	}
	w, err := getWriteAt(r, key, pendingTS)
	if err != nil {
		return err
	}
	if w == nil || w.kind == writeRollback || w.startTS == startTS {
		return &PessimisticLockNotFoundError{Key: key, StartTS: startTS}
	}
	return nil
}
