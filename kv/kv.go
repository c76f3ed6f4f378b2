// Package kv is the contract between the transactional key-value client
// (package client) and its users: Strata's SQL layer and Redis gateway
// inside the binary, and applications that use the client directly.
//
// The SQL layer sees an ordered, transactional key-value map with snapshot
// isolation. It never knows about regions, Raft or Pebble: the client library
// (package client) routes every key to its region leader and runs Percolator
// two-phase commit. A single-node database and a cluster run through the
// same implementation.
//
// Contract:
//   - A Txn reads a consistent snapshot taken at StartTS, plus its own
//     uncommitted writes (read-your-writes).
//   - Writes are buffered in the Txn until Commit; Commit is atomic and
//     returns only after the writes are durable (fsynced through Raft).
//   - A write-write conflict detected at Commit (or at LockKeys) returns an
//     error for which IsRetryable is true; the SQL layer maps it to MySQL
//     ER_LOCK_DEADLOCK (1213) / ER_LOCK_WAIT_TIMEOUT (1205). The transaction
//     is never retried blindly underneath the caller.
//   - A Txn is used by one goroutine at a time.
package kv

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned by Get when the key has no visible value.
var ErrNotFound = errors.New("kv: key not found")

// ErrTxnTooOld is wrapped by errors of a transaction that started before
// the GC safe point: the versions it would read may be gone, so it must
// start over (TiDB's error 9006). It is not retryable in place.
var ErrTxnTooOld = errors.New("GC life time is shorter than transaction duration")

// KeyValue is one entry returned by a scan.
type KeyValue struct {
	Key   []byte
	Value []byte
}

// Storage opens transactions.
type Storage interface {
	// Begin starts a transaction reading at a fresh timestamp.
	Begin(ctx context.Context, opts TxnOptions) (Txn, error)
}

// RangeDestroyer is implemented by storages that can delete a key range's
// data outside MVCC, every version and lock at once (the client's
// DestroyRange; TiKV's UnsafeDestroyRange). It is for data no transaction
// reading or writing at or above safePoint, the GC safe point, can need:
// the SQL engine destroys a dropped table's range once the safe point has
// passed a timestamp at which the drop was committed.
type RangeDestroyer interface {
	DestroyRange(ctx context.Context, start, end []byte, safePoint uint64) error
}

// VersionedKeyValue is a pair to import (Importer) with the timestamp it
// is committed at.
type VersionedKeyValue struct {
	Key, Value []byte
	Version    uint64
}

// Importer is implemented by storages that can write committed versions
// directly, without a transaction (the client's Import; what TiDB's
// ingest-mode index backfill does with SSTs). Each pair becomes a Put of
// its key committed at its version. It is for data derived from a
// snapshot at that version that no transaction writes at that timestamp:
// the entries of an index being added, computed from rows read at the
// version, while every writer already maintains the index. pairs must be
// sorted by key without duplicates.
type Importer interface {
	Import(ctx context.Context, pairs []VersionedKeyValue) error
}

// LatestReader is implemented by storages that can read a key's newest
// committed value outside any transaction, without a timestamp from the
// TSO: linearizable for that one key (client.Client.GetLatest). The SQL
// layer reads an autocommit point select this way.
type LatestReader interface {
	// GetLatest returns the newest committed value of key or
	// ErrNotFound.
	GetLatest(ctx context.Context, key []byte) ([]byte, error)
}

// TxnOptions tunes a transaction.
type TxnOptions struct {
	// Pessimistic makes LockKeys wait for conflicting locks (up to
	// LockWaitTimeout) instead of failing at once, and report a commit
	// newer than the statement's for-update timestamp as a conflict the
	// statement may retry (RetryableError.PessimisticConflict).
	Pessimistic bool
	// ReadCommitted takes a new snapshot for every statement (see
	// StatementTxn).
	ReadCommitted bool
	// LockWaitTimeout bounds each LockKeys wait of a pessimistic
	// transaction (innodb_lock_wait_timeout); zero means the storage's
	// default.
	LockWaitTimeout time.Duration
}

// Txn is a snapshot-isolated transaction.
type Txn interface {
	StartTS() uint64

	// Get returns the value visible to this transaction or ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// BatchGet returns the visible values of the keys that exist, keyed by
	// string(key).
	BatchGet(ctx context.Context, keys [][]byte) (map[string][]byte, error)
	// Scan returns up to limit visible entries in [start, end) in key
	// order (descending when reverse). limit <= 0 means no limit. end nil
	// means the end of the keyspace.
	Scan(ctx context.Context, start, end []byte, limit int, reverse bool) ([]KeyValue, error)
	// Iter returns an iterator over [start, end), fetching in batches.
	Iter(ctx context.Context, start, end []byte, reverse bool) (Iterator, error)

	// Set and Delete buffer a write until Commit.
	Set(key, value []byte) error
	Delete(key []byte) error

	// LockKeys takes pessimistic locks on the keys (SELECT ... FOR UPDATE).
	LockKeys(ctx context.Context, keys ...[]byte) error

	// Commit makes the buffered writes durable and visible atomically.
	Commit(ctx context.Context) error
	// Rollback discards buffered writes and releases any locks taken.
	Rollback(ctx context.Context) error

	// Len is the number of buffered writes.
	Len() int
}

// Inserter is implemented by transactions that can leave the check that a
// new key is absent to Commit, where the storage makes it while it takes
// the key's lock, instead of a read before the write.
type Inserter interface {
	// Insert buffers key = value like Set, and makes Commit fail with a
	// *KeyExistsError, writing nothing, when key has a committed value
	// at the time the commit checks it. A key already written by this
	// transaction is not checked again: over a buffered value Insert
	// returns a *KeyExistsError at once, over a buffered delete it is a
	// plain Set. Later Sets and Deletes of the key keep the check.
	Insert(key, value []byte) error
}

// KeyExistsError is the failure of an Insert's check: Key has a value.
type KeyExistsError struct {
	Key []byte
}

func (e *KeyExistsError) Error() string { return fmt.Sprintf("kv: key %q already exists", e.Key) }

// SizedIterer is implemented by transactions whose iterators can be told
// how many entries the caller expects at most (the SQL layer knows it for
// a primary-key range: BETWEEN 1 AND 100 holds at most 100 rows), so they
// fetch and allocate for that many rather than a fixed batch. The hint
// changes nothing but sizes: an iterator still returns every entry of the
// range when there are more.
type SizedIterer interface {
	IterSized(ctx context.Context, start, end []byte, reverse bool, expect int) (Iterator, error)
}

// FuncScanner is implemented by transactions that can hand the entries of
// a scan to a callback as they are read, rather than materialise them for
// an Iterator. ScanFunc returns a nil cursor (and no error) when it cannot
// serve the range that way (the transaction has buffered writes in it);
// the caller then uses Iter.
type FuncScanner interface {
	ScanFunc(ctx context.Context, start, end []byte, reverse bool) (ScanCursor, error)
}

// ScanCursor reads a range in key order (descending for a reverse scan),
// a batch per Visit.
type ScanCursor interface {
	// Visit calls fn for up to limit entries following those of earlier
	// calls, and reports whether the range is exhausted. key and value are
	// valid only during fn's call. fn returning an error ends the visit
	// with it. After an error, fn's calls of this visit must be
	// disregarded (the cursor is not usable again).
	Visit(ctx context.Context, limit int, fn func(key, value []byte) error) (done bool, err error)
}

// Iterator walks entries of a scan in order. Valid must be checked before
// Key/Value; Next advances. Close releases resources.
type Iterator interface {
	Valid() bool
	Key() []byte
	Value() []byte
	Next(ctx context.Context) error
	Close()
}

// RetryableError marks a transaction failure that the client may retry by
// running the whole transaction again: write conflicts, lock wait timeouts
// and deadlocks. Reason is for logs: it names transactions by start
// timestamp, never keys.
type RetryableError struct {
	Reason string
	// LockWaitTimeout is set when the failure was a timed-out wait for a
	// pessimistic lock (maps to MySQL 1205 rather than 1213).
	LockWaitTimeout bool
	// Deadlock is set when waiting for the lock would have closed a cycle
	// of waiting transactions (1213; this transaction is the victim).
	Deadlock bool
	// PessimisticConflict is set when a pessimistic lock found a commit
	// newer than the statement's for-update timestamp: the transaction is
	// intact and the statement may run again (see StatementTxn).
	PessimisticConflict bool
	// Aborted is set when the transaction cannot go on: a row it locks
	// was committed by another transaction after the snapshot it has read
	// at (snapshot isolation: the first committer wins). The caller must
	// roll it back (1213, as for a deadlock's victim).
	Aborted bool
}

func (e *RetryableError) Error() string { return e.Reason }

// IsRetryable reports whether err is a RetryableError.
func IsRetryable(err error) bool {
	var re *RetryableError
	return errors.As(err, &re)
}

// StatementTxn is implemented by transactions whose statements read at a
// timestamp of their own: the SQL layer calls BeginStatement before each
// statement of a transaction.
//
// A statement that reads in order to write (DML, SELECT ... FOR UPDATE)
// in a pessimistic transaction passes forUpdate: LockKeys locks at the
// timestamp it reads at and fails when a key was committed after it. Under
// ReadCommitted every statement after the first reads at a fresh
// timestamp, and a lock conflict (RetryableError.PessimisticConflict) runs
// the statement again with retry set. Under snapshot isolation, other
// statements read at the transaction's snapshot; a locking statement reads
// the latest data (and the snapshot moves forward with it) only while the
// transaction has read nothing at its snapshot, where a conflict runs the
// statement again; after such a read it reads and locks at the snapshot,
// and a conflict fails the transaction (RetryableError.Aborted): taking
// the lock would overwrite a write the transaction's reads did not see.
type StatementTxn interface {
	BeginStatement(ctx context.Context, forUpdate, retry bool) error
}

// ReadDigest names the part of a value a reader uses. A transaction that
// may move its snapshot forward after a lock conflict (a snapshot refresh,
// see StatementTxn) checks that every value it read at the snapshot is the
// same at the newer timestamp; with a digest it compares only the part the
// reader used, so a row whose other columns changed does not stop the
// refresh. The digest must cover everything the reader's result depends
// on (for a row: every column the statement decodes).
type ReadDigest interface {
	// Sum returns a hash of the part of value the reader uses.
	Sum(value []byte) uint64
	// Same reports whether other uses exactly the same part of a value.
	Same(other ReadDigest) bool
}

// ReadDigester is implemented by transactions that remember their snapshot
// reads for a refresh. SetReadDigest makes the point reads that follow,
// until it is called again (nil: whole values), record d's digest of each
// value read.
type ReadDigester interface {
	SetReadDigest(d ReadDigest)
}

// LockOptions are one locking read's options, as MySQL's FOR UPDATE and
// FOR SHARE take them: NOWAIT, SKIP LOCKED, WAIT n.
type LockOptions struct {
	// NoWait fails at once, with a *RetryableError whose LockWaitTimeout
	// is set, when a key is locked by another live transaction.
	NoWait bool
	// SkipLocked leaves the keys other live transactions hold unlocked,
	// without waiting for them, and returns them; the rest are locked.
	SkipLocked bool
	// Wait, when positive, bounds this call's waits instead of
	// TxnOptions.LockWaitTimeout.
	Wait time.Duration
}

// OptionLocker is implemented by transactions that take locks with
// per-call options (LockKeys with LockOptions).
type OptionLocker interface {
	// LockKeysWith is LockKeys under opts; skipped are the keys left
	// unlocked under SkipLocked.
	LockKeysWith(ctx context.Context, opts LockOptions, keys ...[]byte) (skipped [][]byte, err error)
}

// Savepointer is implemented by transactions that can undo the writes
// buffered after a point (SQL's SAVEPOINT / ROLLBACK TO SAVEPOINT). Locks
// taken after the point stay held until the transaction ends, as InnoDB
// keeps them.
type Savepointer interface {
	// Savepoint returns a token for the transaction's buffered writes now.
	Savepoint() any
	// RollbackToSavepoint restores the buffered writes to what they were
	// when sp was taken; sp must come from this transaction.
	RollbackToSavepoint(sp any)
}
