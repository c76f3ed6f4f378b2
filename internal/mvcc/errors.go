package mvcc

import (
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/strata-db/strata/kvpb"
)

// The errors below are deterministic outcomes of the transaction protocol:
// every replica computing from the same state reaches the same one, and the
// KV service returns them to the client (KeyErrorOf converts them). Any other
// error returned by this package comes from the engine and is not a protocol
// outcome.

// LockedError: the key is locked by another transaction. The client resolves
// the lock (CheckTxnStatus on its primary, then ResolveLock) and retries.
type LockedError struct {
	Lock *kvpb.LockInfo
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("key is locked (primary=%s, start=%d)", fmtKey(e.Lock.PrimaryLock), e.Lock.LockVersion)
}

// WriteConflictError: another transaction committed a write to the key after
// this transaction's snapshot (start ts, or for-update ts when pessimistic).
// First committer wins; the transaction must be retried from the start.
type WriteConflictError struct {
	Conflict *kvpb.WriteConflict
}

func (e *WriteConflictError) Error() string {
	c := e.Conflict
	return fmt.Sprintf("write conflict on key %s (start=%d, conflict start=%d, conflict commit=%d)",
		fmtKey(c.Key), c.StartTs, c.ConflictTs, c.ConflictCommitTs)
}

// AlreadyExistError: an Insert or CheckNotExists found a visible value.
type AlreadyExistError struct {
	Key []byte
}

func (e *AlreadyExistError) Error() string {
	return fmt.Sprintf("key %s already exists", fmtKey(e.Key))
}

// TxnNotFoundError: the primary key has neither a lock nor a commit or
// rollback record of the transaction.
type TxnNotFoundError struct {
	StartTS uint64
	Primary []byte
}

func (e *TxnNotFoundError) Error() string {
	return fmt.Sprintf("txn not found (primary=%s, start=%d)", fmtKey(e.Primary), e.StartTS)
}

// TxnLockNotFoundError: Commit found neither the transaction's lock nor its
// commit record on the key: the transaction was rolled back (for example by
// another transaction's lock resolution) and must abort.
type TxnLockNotFoundError struct {
	Key     []byte
	StartTS uint64
}

func (e *TxnLockNotFoundError) Error() string {
	return fmt.Sprintf("txn lock not found on key %s (start=%d): rolled back", fmtKey(e.Key), e.StartTS)
}

// AlreadyCommittedError: a rollback (or a late pessimistic lock) met a
// transaction that is already committed on the key.
type AlreadyCommittedError struct {
	Key      []byte
	StartTS  uint64
	CommitTS uint64
}

func (e *AlreadyCommittedError) Error() string {
	return fmt.Sprintf("txn start=%d already committed at %d on key %s", e.StartTS, e.CommitTS, fmtKey(e.Key))
}

// AlreadyRolledBackError: a prewrite or pessimistic lock arrived after the
// transaction was rolled back on the key.
type AlreadyRolledBackError struct {
	Key     []byte
	StartTS uint64
}

func (e *AlreadyRolledBackError) Error() string {
	return fmt.Sprintf("txn start=%d was rolled back on key %s", e.StartTS, fmtKey(e.Key))
}

// CommitTSExpiredError: the commit ts is below the lock's min commit ts (a
// reader pushed it). The client may retry the commit with a newer ts.
type CommitTSExpiredError struct {
	Key         []byte
	StartTS     uint64
	CommitTS    uint64
	MinCommitTS uint64
}

func (e *CommitTSExpiredError) Error() string {
	return fmt.Sprintf("commit ts %d of txn start=%d is below min commit ts %d on key %s",
		e.CommitTS, e.StartTS, e.MinCommitTS, fmtKey(e.Key))
}

// PessimisticLockNotFoundError: a pessimistic transaction's prewrite (or
// commit) found its pessimistic lock gone; it was resolved by another
// transaction and the transaction must abort.
type PessimisticLockNotFoundError struct {
	Key     []byte
	StartTS uint64
}

func (e *PessimisticLockNotFoundError) Error() string {
	return fmt.Sprintf("pessimistic lock not found on key %s (start=%d)", fmtKey(e.Key), e.StartTS)
}

// InvalidRequestError: the request violates the protocol (an op that cannot
// be prewritten, a key twice in one request, a commit ts not above the start
// ts).
type InvalidRequestError struct {
	Key    []byte
	Reason string
}

func (e *InvalidRequestError) Error() string {
	if e.Key == nil {
		return "invalid request: " + e.Reason
	}
	return fmt.Sprintf("invalid request on key %s: %s", fmtKey(e.Key), e.Reason)
}

// TooOldError: a read at a timestamp below the GC safe point, or a
// prewrite or pessimistic lock of a transaction that started at or below it. Versions it would need may have been garbage
// collected, so it fails rather than return partial history; the
// transaction is older than the GC life time and must start over.
type TooOldError struct {
	ReadTS    uint64
	SafePoint uint64
}

func (e *TooOldError) Error() string {
	return fmt.Sprintf("GC life time is shorter than transaction duration: transaction ts %d is too old for the GC safe point %d", e.ReadTS, e.SafePoint)
}

// LockedWithConflictError reports a key that a pessimistic lock request
// with lock_with_conflict locked although another transaction had
// committed it after the request's for-update ts.
type LockedWithConflictError struct {
	Conflict *kvpb.WriteConflict
}

func (e *LockedWithConflictError) Error() string {
	return fmt.Sprintf("locked key %s with a conflict (commit %d of txn start=%d)", fmtKey(e.Conflict.Key), e.Conflict.ConflictCommitTs, e.Conflict.ConflictTs)
}

// KeyErrorOf converts a protocol error of this package into the wire form
// the KV service returns. It returns nil for nil and for errors that are not
// protocol outcomes (engine failures), which the service must treat as
// internal errors instead.
func KeyErrorOf(err error) *kvpb.KeyError {
	if err == nil {
		return nil
	}
	var (
		locked     *LockedError
		lwc        *LockedWithConflictError
		conflict   *WriteConflictError
		exists     *AlreadyExistError
		notFound   *TxnNotFoundError
		lockGone   *TxnLockNotFoundError
		committed  *AlreadyCommittedError
		rolledBack *AlreadyRolledBackError
		expired    *CommitTSExpiredError
		pessGone   *PessimisticLockNotFoundError
		invalid    *InvalidRequestError
		tooOld     *TooOldError
	)
	switch {
	case errors.As(err, &locked):
		return &kvpb.KeyError{Locked: locked.Lock}
	case errors.As(err, &conflict):
		return &kvpb.KeyError{Conflict: conflict.Conflict}
	case errors.As(err, &lwc):
		return &kvpb.KeyError{Conflict: lwc.Conflict}
	case errors.As(err, &exists):
		return &kvpb.KeyError{AlreadyExist: &kvpb.AlreadyExist{Key: exists.Key}}
	case errors.As(err, &notFound):
		return &kvpb.KeyError{TxnNotFound: &kvpb.TxnNotFound{StartTs: notFound.StartTS, PrimaryKey: notFound.Primary}}
	case errors.As(err, &lockGone), errors.As(err, &rolledBack), errors.As(err, &pessGone):
		// The transaction cannot commit (its locks were rolled back, or
		// a lost pessimistic lock found a newer commit): running it again
		// may succeed.
		return &kvpb.KeyError{Retryable: err.Error()}
	case errors.As(err, &committed), errors.As(err, &expired), errors.As(err, &invalid), errors.As(err, &tooOld):
		return &kvpb.KeyError{Abort: err.Error()}
	}
	return nil
}

// isKeyError reports whether err is a protocol outcome rather than an engine
// failure.
func isKeyError(err error) bool { return KeyErrorOf(err) != nil }

// fmtKey renders a key for messages: as is when printable, quoted otherwise.
func fmtKey(k []byte) string {
	if utf8.Valid(k) {
		printable := true
		for _, r := range string(k) {
			if !unicode.IsPrint(r) || r == ' ' {
				printable = false
				break
			}
		}
		if printable && len(k) > 0 {
			return string(k)
		}
	}
	return strconv.Quote(string(k))
}
