// Package mvcc owns Strata's transactional storage logic: the Percolator
// protocol (TiKV's flavour) over one Pebble engine, and the in-memory
// concurrency control the KV service runs on a region leader.
//
// # Key layout
//
// All transactional data lives under the engine prefix 'z' (Prefix); the raft
// store owns the other prefixes. Three "column families" follow as a second
// byte:
//
//	lock:  'z' 'l' + userKey                      -> lock record
//	write: 'z' 'w' + escaped(userKey) + ^commitTS -> write record
//	data:  'z' 'd' + escaped(userKey) + ^startTS  -> value
//	gc:    'z' 'g' + regionID                     -> GC safe point (see below)
//
// Timestamps are stored big-endian and bit-inverted, so a key's newest
// version sorts first and "the newest version at or below ts" is one SeekGE
// to escaped(key)+^ts. escaped() turns 0x00 into 0x00 0xFF and appends the
// terminator 0x00 0x01: it preserves order and no escaped key is a prefix of
// another, so such a seek never lands among another key's versions (user key
// "a" and "a\x00b" do not interleave). A key has at most one lock, so the
// lock family needs neither escaping nor timestamps. EngineSpans gives the
// engine spans of a user key range for the raft store (splits, snapshots).
//
// A lock record holds the lock type (Put, Del, Lock, PessimisticLock), the
// primary key, start ts, TTL, for-update ts, min commit ts, transaction size
// and, for values of at most 4 KiB (maxShortValue), the value itself. A write record
// holds its type (Put, Delete, Lock, Rollback), the start ts of the
// transaction that committed it, and the value when it is at most 4 KiB.
// Larger values are written to the data family once, at prewrite, and stay
// there; commit moves only the small lock record.
//
// # Protocol
//
// Percolator two-phase commit: Prewrite locks every key (the lock on the
// primary key is the transaction's single point of truth); Commit turns the
// primary's lock into a write record at the commit ts, which commits the
// transaction, then the secondaries' locks. A reader at ts that meets a Put
// or Del lock of a transaction that started at or below ts cannot know the
// key's value and fails with *LockedError (Lock and PessimisticLock locks
// change no value and never block readers); the client asks the primary's region
// (CheckTxnStatus), which rolls the transaction back once its lock's TTL has
// expired, and then resolves the lock (ResolveLock) to the primary's fate.
// Rollback records at ts == start ts keep a prewrite that arrives late from
// locking again. Pessimistic locks (PessimisticLock) are taken during the
// transaction at a for-update ts, do not block readers, and are replaced by
// ordinary locks at prewrite. A leader keeps them in memory
// (PessimisticLocks), where every write function here finds them as if
// they were in the lock family; a prewrite that finds its lock lost checks
// the key up to the for-update ts itself. One-phase commit (OnePC) writes commit records
// directly when one request holds all of a transaction's keys; Concurrency
// documents how its commit ts is chosen without asking the TSO.
//
// Timestamps come from the TSO: physical milliseconds << 18 | logical
// (PhysicalMs, ComposeTS). A lock's TTL counts milliseconds from the physical
// part of its start ts.
//
// # Garbage collection
//
// Every write adds a version; GC removes the ones nobody can read any more.
// The GC safe point is a timestamp below which no transaction reads (PD
// keeps it: now minus the GC life time, never moving back). GC computes,
// for a key range, the deletions that keep everything a read at or above
// the safe point sees: per user key, every write record above the safe
// point, and the newest Put at or below it. Older records, Rollback and
// Lock records at or below it, and a Delete that is the newest version at
// or below it (after everything under it) go, with the data-CF values of
// deleted Puts. Locks are never touched. Deletions are bounded per call
// (limit) and the call says where to resume; each chunk is proposed through
// Raft like any write.
//
// A read below the safe point could see partial history, so it fails with
// *TooOldError ("GC life time is shorter than transaction duration"), and so
// do prewrites and pessimistic locks of transactions that started at or
// below it (their rollback records may be gone). The KV service checks
// LockSet.CheckReadTS before and after a read; the LockSet holds the
// store's safe point, raised by the leader before it proposes deletions
// (RaiseGCSafePoint) and on every replica by the record each GC batch
// carries (PutGCSafePoint, under 'z' 'g' + region id; outside EngineSpans).
// Before collecting at a safe point, the caller resolves every lock of a
// transaction that started at or below it: a secondary lock whose primary
// committed at or below the safe point would otherwise outlive the commit
// record that decides it.
//
// DestroyRange is the other way data goes (TiKV's UnsafeDestroyRange): for
// a key range no reader at or above the safe point needs at all (a table
// dropped before it), one range deletion per column family removes every
// lock, write record and value at once, without reading them and without
// leaving tombstones per key. LockSet.Observe drops the range's locks from
// the lock index.
//
// Import is the bulk way data comes in (TiDB's ingest-mode backfill): a
// Put committed at a given version, with no lock, no two-phase commit and
// no read, for data the caller derived from its own snapshot at that
// version (the entries of an index being added). It goes through Raft and
// the apply path like any commit, so the version cache and the recent-write
// bounds learn of it as of any other record; only Import needs no latches.
//
// # Contract with the KV service
//
// The functions are pure over a pebble.Reader (a snapshot or the DB): they
// read state and append their writes to the caller's *pebble.Batch, which the
// caller proposes through Raft and applies. They never write to the engine,
// never sync, never start goroutines. A command that fails writes nothing to
// the batch. The caller must hold the Concurrency latches of every key a
// write command touches from before it takes the snapshot until the batch is
// applied; otherwise two commands may compute conflicting batches from the
// same state. Readers call Concurrency.UpdateMaxTS and then CheckReadKey or
// CheckReadRange before they take their snapshot.
//
// # Reading the live engine
//
// The KV service reads applied state from the engine itself, not from a
// snapshot, so every Get and every iterator sees the engine as of the
// moment it is opened, and Raft applies commit in between. A read at
// readTS therefore looks at a key's lock before its write records (Get
// reads the lock first; Scan and ScanFunc open their lock iterator first). That order is
// safe: a lock absent from the earlier view was either already committed
// or rolled back, so its record is in the later view too, or it was
// prewritten after the read began, so its transaction takes its commit ts
// from the TSO after the read took readTS and commits above it. (One-phase
// commits write no lock; Concurrency covers them.) The reverse order is
// not: a commit landing between the two views shows neither the lock nor
// the commit record, and the read returns the previous value of a key
// whose new value it should see or wait for. Through LockSet.Reader, the
// lock set stands in for the lock view (Get skips the lock lookup, Scan its
// lock iterator, when the set has no lock there); LockSet explains why that
// view is as good as the engine's, and it is taken at the same point.
//
// Point reads and the prewrite check for newer commits consult the
// lock set's VersionCache (through LockSet.Reader) for the key's newest
// write record before they open an iterator; it documents why its entries
// are exact. For keys it does not hold, the checks for a record at or
// above a timestamp (newer commits, a record at a commit's own ts) consult
// the lock set's RecentWrites, and read nothing when its bounds rule out
// every record, or the SSTs without the memtables when they rule out the
// memtables; it documents why that is sound.
//
// Errors of the protocol (locked, write conflict, already exists, rolled
// back, ...) are typed and deterministic; KeyErrorOf converts them into
// kvpb.KeyError for the response. Any other error is an engine failure.
//
// An empty end key means "no upper bound" everywhere in this package.
package mvcc
