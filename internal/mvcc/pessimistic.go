package mvcc

import (
	"bytes"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/kvpb"
)

// PessimisticLocks is the table of pessimistic locks a store's region
// leaders hold in memory only, TiKV's in-memory pessimistic locks. A
// pessimistic lock changes no value and blocks no reader; it only keeps
// other writers off a key while a DML statement's transaction runs. Taking
// it in memory costs no Raft round trip and no fsync, which is what lets
// every DML statement of a pessimistic transaction lock its rows.
//
// A lock in the table is found by every write function of this package
// (through a reader from LockSet.Reader, or WithPessimisticLocks) exactly
// like a lock in the engine's lock column family: it makes other
// transactions' prewrites and pessimistic locks fail with *LockedError,
// CheckTxnStatus reports and expires it, TxnHeartBeat extends it, and
// prewrite, rollback, resolve and pessimistic rollback remove it. Changes to
// the table take effect when the command's batch is staged, under the
// command's latches, not when the batch is applied.
//
// Nothing in the table survives a restart or a change of leader, so a
// transaction may find, at prewrite, that a pessimistic lock it took is
// gone. Prewrite then checks the key as the lock did: no commit of another
// transaction after the for-update ts the transaction first locked the key
// at (the request's lock_for_update_ts, which the client keeps per key),
// no other lock. If that holds, no other writer changed the key since the
// transaction read it, which is all the lock was for, and the prewrite
// goes on; otherwise it fails (*PessimisticLockNotFoundError) and so does
// the transaction's commit. A lock found held but taken at a later ts than
// that first one is no proof either (the first was lost and the key locked
// again, which a lock request alone cannot tell from a first lock; or a
// lock request was answered twice): the prewrite checks the commits before
// it the same way (*WriteConflictError). The lock only ever bought the
// waiting; the correctness is the prewrite's.
//
// When the table holds maxBytes, new pessimistic locks go to the engine
// through Raft as before; so do new locks in a range that PersistNewLocks
// marked while the store hands its region over (TiKV keeps no new
// in-memory locks while a leader transfer is pending for the same reason:
// a lock taken after the region's locks were moved would be lost with the
// leadership). A store that loses the leadership of a region
// must drop the region's locks (DropRange): the new leader does not know
// them, and a stale lock here would block writers if the leadership came
// back.
//
// A command that takes locks must not add them after its leader lost the
// region: it checked leadership before it waited for its latches, and a
// DropRange in between would leave its locks behind, to be found as this
// store's own if the leadership came back (a lock found held at prewrite
// is trusted to have kept every other writer off the key since its
// for-update ts, so such a stale lock let a transaction commit over
// writes it never saw). Such a command reads Generation before it checks
// leadership and applies with PessimisticLockAsOf, which refuses its
// locks (ErrLocksDropped) if any DropRange ran since. A change of an
// existing lock (a TTL, a for-update ts) applies only while the lock is
// still in the table: it never brings a dropped lock back.
type PessimisticLocks struct {
	n        atomic.Int64 // entries; zero lets lookups skip the mutex
	mu       sync.Mutex
	m        map[string]*lock
	bytes    int64
	maxBytes int64
	gen      uint64 // DropRange calls; guarded by mu
	// handover: ranges whose new locks go to the engine until a deadline
	// (PersistNewLocks); guarded by mu.
	handover []handoverSpan
}

type handoverSpan struct {
	start, end []byte
	until      time.Time
}

// PersistNewLocks makes new pessimistic locks on keys in [start, end) (an
// empty end: no upper bound) go to the engine, through the command's Raft
// batch, instead of the table for the next d: the store is about to hand
// the region's leadership over, and moves the locks the table holds there
// (PersistPessimisticLocks) after this call. A command that staged a lock
// for the table before this call and applies after it writes the lock to
// its batch instead (apply), so no lock lands in the table after the move
// looked. Once d passes (the handover happened, or failed and the store
// leads on), new locks go to the table again.
func (p *PessimisticLocks) PersistNewLocks(start, end []byte, d time.Duration) {
	if p == nil {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.handover[:0]
	for _, h := range p.handover {
		if now.Before(h.until) {
			live = append(live, h)
		}
	}
	p.handover = append(live, handoverSpan{start: bytes.Clone(start), end: bytes.Clone(end), until: now.Add(d)})
}

// handingOverLocked reports whether new locks on key go to the engine
// (PersistNewLocks). p.mu held.
func (p *PessimisticLocks) handingOverLocked(key []byte) bool {
	if len(p.handover) == 0 {
		return false
	}
	now := time.Now()
	for _, h := range p.handover {
		if now.Before(h.until) && inRange(key, h.start, h.end) {
			return true
		}
	}
	return false
}

// ErrLocksDropped is PessimisticLockAsOf's error when the table dropped
// locks (DropRange: this store lost a region's leadership) after the
// command read its generation: the command must check leadership again.
var ErrLocksDropped = errors.New("mvcc: in-memory pessimistic locks were dropped since the command checked leadership")

// Generation returns the number of DropRange calls so far (see
// PessimisticLockAsOf).
func (p *PessimisticLocks) Generation() uint64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// DefaultPessimisticLockBytes bounds the table of a store (the keys,
// primaries and bookkeeping of its locks).
const DefaultPessimisticLockBytes = 64 << 20

// NewPessimisticLocks returns an empty table bounded by maxBytes (<= 0:
// DefaultPessimisticLockBytes).
func NewPessimisticLocks(maxBytes int64) *PessimisticLocks {
	if maxBytes <= 0 {
		maxBytes = DefaultPessimisticLockBytes
	}
	return &PessimisticLocks{m: make(map[string]*lock), maxBytes: maxBytes}
}

// lockEntryOverhead approximates a table entry's cost beyond its key and
// primary.
const lockEntryOverhead = 120

func entryBytes(key []byte, l *lock) int64 {
	return int64(len(key)+len(l.primary)) + lockEntryOverhead
}

// Len is the number of locks in the table.
func (p *PessimisticLocks) Len() int { return int(p.n.Load()) }

// get returns a copy of key's lock, or nil.
func (p *PessimisticLocks) get(key []byte) *lock {
	if p == nil || p.n.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	l := p.m[string(key)]
	p.mu.Unlock()
	if l == nil {
		return nil
	}
	c := *l
	return &c
}

// hasRoom reports whether a new lock on key may go to the table.
func (p *PessimisticLocks) hasRoom(key []byte, l *lock) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes+entryBytes(key, l) <= p.maxBytes && !p.handingOverLocked(key)
}

// memOp is a staged change of the table: put l on key, or delete key's lock
// of transaction startTS when l is nil. key is only read while the command
// applies its ops. update marks a change of a lock the command found in the
// table, which applies only if it is still there.
type memOp struct {
	key     []byte
	l       *lock
	startTS uint64
	update  bool
}

// apply makes the changes of ops. With checkGen, it makes none and reports
// false if the generation is no longer gen. New locks on keys that
// PersistNewLocks marked since they were staged are not put in the table:
// they are returned, for the caller to write to the engine instead.
func (p *PessimisticLocks) apply(ops []memOp, checkGen bool, gen uint64) (toEngine []memOp, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if checkGen && p.gen != gen {
		return nil, false
	}
	for _, op := range ops {
		k := string(op.key)
		old := p.m[k]
		if op.l != nil && !op.update && old == nil && p.handingOverLocked(op.key) {
			toEngine = append(toEngine, op)
			continue
		}
		if op.update && (old == nil || old.startTS != op.startTS) {
			continue // dropped meanwhile: stays dropped
		}
		if op.l == nil {
			if old != nil && old.startTS == op.startTS {
				delete(p.m, k)
				p.bytes -= entryBytes(op.key, old)
			}
			continue
		}
		if old != nil {
			p.bytes -= entryBytes(op.key, old)
		}
		op.l.mem = true
		p.m[k] = op.l // staged by this command alone: the table owns it now
		p.bytes += entryBytes(op.key, op.l)
	}
	p.n.Store(int64(len(p.m)))
	return toEngine, true
}

// DropRange forgets every lock on a key in [start, end) (an empty end: no
// upper bound): the store no longer leads the region holding them.
func (p *PessimisticLocks) DropRange(start, end []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	for k, l := range p.m {
		if inRange([]byte(k), start, end) {
			delete(p.m, k)
			p.bytes -= entryBytes([]byte(k), l)
		}
	}
	p.n.Store(int64(len(p.m)))
}

func inRange(k, start, end []byte) bool {
	return bytes.Compare(k, start) >= 0 && (len(end) == 0 || bytes.Compare(k, end) < 0)
}

// scan returns the locks on keys in [start, end) whose start ts is at or
// below maxTS, in key order.
func (p *PessimisticLocks) scan(start, end []byte, maxTS uint64) []*kvpb.LockInfo {
	if p == nil || p.n.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	var out []*kvpb.LockInfo
	for k, l := range p.m {
		if l.startTS <= maxTS && inRange([]byte(k), start, end) {
			out = append(out, l.info([]byte(k)))
		}
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Key, out[j].Key) < 0 })
	return out
}

// WithPessimisticLocks returns a reader of r whose lock lookups see the
// locks of p first (LockSet.Reader's readers see the LockSet's table).
func WithPessimisticLocks(r pebble.Reader, p *PessimisticLocks) pebble.Reader {
	return memLockReader{Reader: r, p: p}
}

type memLockReader struct {
	pebble.Reader
	p *PessimisticLocks
}

// pessimisticLocksOf returns the in-memory lock table r reads, or nil.
func pessimisticLocksOf(r pebble.Reader) *PessimisticLocks {
	switch r := r.(type) {
	case lockSetReader:
		return r.ls.pessimistic
	case memLockReader:
		return r.p
	}
	return nil
}

// txnLock returns key's lock as writers see it: a pessimistic lock held in
// memory, else the lock in the engine, else nil. Reads use getLock: no
// in-memory lock blocks a reader.
func txnLock(r pebble.Reader, key []byte) (*lock, error) {
	if l := pessimisticLocksOf(r).get(key); l != nil {
		return l, nil
	}
	if mr, ok := r.(memLockReader); ok {
		r = mr.Reader
	}
	return getLock(r, key)
}

// putLock stages l, a changed copy of key's current lock, as key's lock,
// in memory when l is an in-memory lock.
func (s *staged) putLock(r pebble.Reader, key []byte, l *lock) {
	if l.mem {
		s.memOps = append(s.memOps, memOp{key: key, l: l, startTS: l.startTS, update: true})
		s.memTable = pessimisticLocksOf(r)
		return
	}
	s.set(lockKey(key), l.encode())
}

// delLock stages the removal of key's lock l.
func (s *staged) delLock(r pebble.Reader, key []byte, l *lock) {
	if l.mem {
		s.memOps = append(s.memOps, memOp{key: key, startTS: l.startTS})
		s.memTable = pessimisticLocksOf(r)
		return
	}
	s.del(lockKey(key))
}

// newPessimisticLock stages a new pessimistic lock l on key: in memory when
// the reader has a table with room for it, else in the engine.
func (s *staged) newPessimisticLock(r pebble.Reader, key []byte, l *lock) {
	if p := pessimisticLocksOf(r); p != nil && p.hasRoom(key, l) {
		l.mem = true
		s.memOps = append(s.memOps, memOp{key: key, l: l, startTS: l.startTS})
		s.memTable = p
		return
	}
	s.set(lockKey(key), l.encode())
}

// Keys returns the keys in [start, end) (an empty end: no upper bound)
// holding a lock in the table, in key order, as many as fit in maxBytes of
// the table's accounting (at least one).
func (p *PessimisticLocks) Keys(start, end []byte, maxBytes int64) [][]byte {
	if p == nil || p.n.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	var keys [][]byte
	for k := range p.m {
		if inRange([]byte(k), start, end) {
			keys = append(keys, []byte(k))
		}
	}
	p.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	var used int64
	for i, k := range keys {
		if l := p.get(k); l != nil {
			used += entryBytes(k, l)
		}
		if used > maxBytes && i > 0 {
			return keys[:i]
		}
	}
	return keys
}

// PersistPessimisticLocks stages in b the move of the in-memory locks on
// keys into the engine: each leaves the table and becomes the same lock in
// the engine's lock column, which the batch, proposed through Raft,
// writes on every replica. The locks then outlive this store's leadership
// of their region (a leader transfer, a merge into a region led elsewhere),
// instead of being lost with it and leaving the transactions that hold
// them to check their keys again at prewrite. It returns how many locks it
// moved.
//
// The caller holds the keys' latches from before it stages until the batch
// is applied or its proposal failed (no other command may see a key
// without its lock in between), and read gen = Generation() before it
// checked its leadership: if the table dropped locks since,
// PersistPessimisticLocks moves none and fails with ErrLocksDropped. A
// batch that never applies loses the locks it moved, as a loss of
// leadership would have.
func PersistPessimisticLocks(r pebble.Reader, b *pebble.Batch, keys [][]byte, gen uint64) (int, error) {
	p := pessimisticLocksOf(r)
	var s staged
	n := 0
	for _, key := range keys {
		l := p.get(key)
		if l == nil || !l.mem {
			continue
		}
		s.delLock(r, key, l)
		l.mem = false
		s.set(lockKey(key), l.encode())
		n++
	}
	if n == 0 {
		return 0, nil
	}
	s.checkGen, s.memGen = true, gen
	if err := s.applyTo(b); err != nil {
		return 0, err
	}
	return n, nil
}
