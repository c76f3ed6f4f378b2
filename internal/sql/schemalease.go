package sql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// Schema-version leases: how an engine keeps its promise that it never runs
// more than one schema version behind (F1). DESIGN.md, "Online schema
// change", states the protocol; this file is the engine's side of it:
//
//   - the engine's lease (catalog.EngineLease in KV): the version it has
//     loaded and its floor, renewed every lease/4 and whenever either
//     changed;
//   - the floor: the oldest version any of the engine's write
//     transactions may still commit under, computed from the transactions'
//     pins;
//   - the commit check, TiDB's schema validator with F1's one-version
//     tolerance.

// Clock tells the time for leases. Leases compare times taken on different
// nodes, so clocks must agree within maxClockOffset.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

const (
	defaultSchemaLease = 10 * time.Second
	defaultSchemaPoll  = 50 * time.Millisecond
	// maxClockOffset is how far two nodes' clocks may disagree. Another
	// engine's lease counts as expired only this long after its expiry.
	maxClockOffset = 500 * time.Millisecond
)

var (
	// errSchemaExpired: the engine could not renew its lease, so the
	// schema it has may be more than one version old (TiDB's 8027).
	errSchemaExpired = sqlerr.New(8027, "HY000", "Information schema is out of date: schema failed to update in 1 lease, please make sure the node can reach the storage")
	// errSchemaChanged: a table the transaction writes changed after the
	// transaction began, by more than the one version it may lag (TiDB's
	// 8028). An autocommit statement that meets it is run again.
	errSchemaChanged = sqlerr.New(8028, "HY000", "Information schema is changed during the execution of the statement (for example, table definition may be updated by other DDL ran in parallel). If you see this error often, try again later")
	// errLeaseHeld is what a held engine (tests) gets from every renewal.
	errLeaseHeld = errors.New("sql: the engine's schema lease is held")
)

// txnPin is a write transaction's claim on the schema version it runs
// under. The engine's floor is the oldest version a pinned transaction may
// still commit under.
type txnPin struct {
	version int64   // the transaction's schema version
	epoch   uint64  // the lease epoch it was pinned in
	tables  []int64 // the tables it writes
	// eff is the newest version up to which none of tables changed: the
	// transaction writes them as a transaction of version eff would.
	eff        int64
	committing bool  // between a passed commit check and the commit's end
	doomed     bool  // it held the floor back for a whole lease: it may commit only if nothing it writes changed
	holdSince  int64 // clock ns since it holds the floor back; 0 when it does not
}

// schemaLease is the engine's lease state.
type schemaLease struct {
	clock Clock
	lease time.Duration
	poll  time.Duration

	// validUntil (clock ns): the engine may run its schema until then.
	validUntil atomic.Int64

	mu     sync.Mutex
	pins   map[*txnPin]struct{}
	floor  int64
	epoch  uint64        // bumped when the lease lapsed: older pins are doomed
	settle chan struct{} // closed (and replaced) when the floor or version rises
	held   bool          // tests: renewals and loads fail

	renewMu   sync.Mutex // one renewal at a time
	lastRenew int64      // clock ns when the last renewal that succeeded began
	reported  catalog.EngineLease
}

func newEngineID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (e *Engine) now() int64 { return e.sl.clock.Now().UnixNano() }

// affected reports whether a table of p changed after version p.eff in
// schema s: it was dropped, or its Revision is newer.
func (p *txnPin) affected(s *catalog.Schema) bool {
	if s.Version <= p.eff {
		return false
	}
	for _, id := range p.tables {
		if stale(s, id, p.eff) {
			return true
		}
	}
	return false
}

func stale(s *catalog.Schema, tableID, since int64) bool {
	t := s.TableByID(tableID)
	return t == nil || t.Revision > since
}

// pinTables records that the transaction of session state *p (nil: not
// pinned yet), running under schema version sv, writes tables; a new pin
// is made in buf, which must not be pinned. A table that changed since sv
// fails the statement with errSchemaChanged: the transaction would write
// it as it was, and the engine may already have promised that no
// transaction of that version commits.
func (e *Engine) pinTables(p **txnPin, buf *txnPin, sv int64, tables []int64) error {
	e.sl.mu.Lock()
	defer e.sl.mu.Unlock()
	cur := e.schema.Load()
	pin := *p
	if pin == nil {
		pin = buf
		*pin = txnPin{version: sv, epoch: e.sl.epoch, eff: sv, tables: buf.tables[:0]}
	}
	added := false
	for _, id := range tables {
		if containsID(pin.tables, id) {
			continue
		}
		if cur.Version > pin.version && stale(cur, id, pin.version) {
			return errSchemaChanged
		}
		pin.tables = append(pin.tables, id)
		added = true
	}
	if *p == nil {
		if !added {
			return nil
		}
		// A new pin starts at the loaded version when its tables are
		// unchanged since sv: it holds nothing back.
		if !pin.affected(cur) {
			pin.eff = cur.Version
		}
		if e.sl.pins == nil {
			e.sl.pins = map[*txnPin]struct{}{}
		}
		e.sl.pins[pin] = struct{}{}
		*p = pin
	}
	return nil
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// commitCheck decides whether the pinned transaction may commit now, and
// if so marks it committing, so that the floor counts it until
// unpin. A transaction whose tables did not change since it began commits
// as of the loaded version; one whose tables changed commits under its own
// version, which the floor still covers, unless it was doomed.
func (e *Engine) commitCheck(p *txnPin) error {
	e.sl.mu.Lock()
	defer e.sl.mu.Unlock()
	if e.now() >= e.sl.validUntil.Load() {
		return errSchemaExpired
	}
	cur := e.schema.Load()
	if p.affected(cur) {
		if p.doomed || p.epoch != e.sl.epoch || cur.Version > p.eff+1 {
			return errSchemaChanged
		}
	} else {
		p.eff = max(p.eff, cur.Version)
	}
	p.committing = true
	return nil
}

// unpin forgets a finished transaction's pin; the floor may rise.
func (e *Engine) unpin(p *txnPin) {
	if p == nil {
		return
	}
	e.sl.mu.Lock()
	delete(e.sl.pins, p)
	if e.sl.floor < e.schema.Load().Version {
		e.refreshFloorLocked()
	}
	e.sl.mu.Unlock()
}

// refreshFloorLocked recomputes the floor after the loaded version, a pin
// or the time changed. A pin whose tables changed after its eff holds the
// floor at eff, for at most a lease; then it is doomed: the floor moves on
// and the transaction fails at commit. The floor never goes back: a pin
// that starts holding has eff = the version loaded before, which the floor
// had already reached.
func (e *Engine) refreshFloorLocked() {
	now := e.now()
	cur := e.schema.Load()
	floor := cur.Version
	for p := range e.sl.pins {
		switch {
		case p.committing:
			floor = min(floor, p.eff)
		case p.doomed || p.epoch != e.sl.epoch:
		case !p.affected(cur):
			p.eff, p.holdSince = cur.Version, 0
		default:
			if p.holdSince == 0 {
				p.holdSince = now
			}
			if now-p.holdSince >= int64(e.sl.lease) {
				p.doomed = true
				continue
			}
			floor = min(floor, p.eff)
		}
	}
	if floor > e.sl.floor {
		e.sl.floor = floor
		e.notifySettleLocked()
	}
}

func (e *Engine) notifySettleLocked() {
	if e.sl.settle != nil {
		close(e.sl.settle)
	}
	e.sl.settle = make(chan struct{})
	e.kickOwner() // a job may wait for this engine
}

// settleChanged returns a channel closed when the floor or the loaded
// version rises next.
func (e *Engine) settleChanged() <-chan struct{} {
	e.sl.mu.Lock()
	defer e.sl.mu.Unlock()
	if e.sl.settle == nil {
		e.sl.settle = make(chan struct{})
	}
	return e.sl.settle
}

// loadSchema reads the latest schema and installs it.
func (e *Engine) loadSchema(ctx context.Context) (*catalog.Schema, error) {
	e.sl.mu.Lock()
	held := e.sl.held
	e.sl.mu.Unlock()
	if held {
		return nil, errLeaseHeld
	}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return nil, err
	}
	defer txn.Rollback(ctx)
	s, err := catalog.Load(ctx, txn)
	if err != nil {
		return nil, err
	}
	e.installSchema(s)
	return e.schema.Load(), nil
}

// schemaFor returns the schema at version ver, which txn reads: the
// engine's when it is at ver, else loaded through txn (and not installed:
// the engine installs versions in order, as it polls).
func (e *Engine) schemaFor(ctx context.Context, txn kv.Txn, ver int64) (*catalog.Schema, error) {
	if s := e.schema.Load(); s != nil && s.Version == ver {
		return s, nil
	}
	return catalog.Load(ctx, txn)
}

// installSchema makes s the engine's schema unless a newer one is in place.
// Transactions that begin afterwards run under it (ddlMu orders the two).
func (e *Engine) installSchema(s *catalog.Schema) {
	e.ddlMu.Lock()
	if cur := e.schema.Load(); cur == nil || cur.Version < s.Version {
		e.schema.Store(s)
	}
	e.ddlMu.Unlock()
	e.sl.mu.Lock()
	e.refreshFloorLocked()
	e.notifySettleLocked()
	e.sl.mu.Unlock()
}

// selfLease is the engine's lease as it stands in memory (the stored one
// may lag behind: floors and versions only rise).
func (e *Engine) selfLease() *catalog.EngineLease {
	e.sl.mu.Lock()
	defer e.sl.mu.Unlock()
	return &catalog.EngineLease{ID: e.id, Addr: e.addr, Loaded: e.schema.Load().Version, Floor: e.sl.floor,
		Expires: e.sl.validUntil.Load()}
}

// renewLease writes the engine's lease: the loaded version, the floor and
// a new expiry a lease from now. The write guards the schema version
// (catalog.GuardVersion), so it is ordered with every DDL step: either the
// step's owner sees this lease, or this renewal sees the step's version
// and loads it first. A renewal that began or ended after the previous
// lease expired cannot know what the owner did meanwhile: the engine then
// dooms every transaction pinned before (they commit only where nothing
// they write changed).
func (e *Engine) renewLease(ctx context.Context) error { return e.renew(ctx, false) }

// renew is renewLease; with ifExpired it does nothing when the lease is
// valid by the time it is this call's turn (another caller renewed it).
func (e *Engine) renew(ctx context.Context, ifExpired bool) error {
	e.sl.renewMu.Lock()
	defer e.sl.renewMu.Unlock()
	if ifExpired && e.now() < e.sl.validUntil.Load() {
		return nil
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		e.sl.mu.Lock()
		held := e.sl.held
		e.sl.mu.Unlock()
		if held {
			return errLeaseHeld
		}
		start := e.now()
		var txn kv.Txn
		if txn, err = e.store.Begin(ctx, kv.TxnOptions{}); err != nil {
			return err
		}
		var ver int64
		if ver, err = catalog.GuardVersion(ctx, txn); err != nil {
			txn.Rollback(ctx)
			return err
		}
		if ver > e.schema.Load().Version {
			txn.Rollback(ctx)
			if _, err = e.loadSchema(ctx); err != nil {
				return err
			}
			continue
		}
		e.sl.mu.Lock()
		lapsed := start >= e.sl.validUntil.Load()
		if lapsed {
			e.sl.epoch++
			e.refreshFloorLocked()
		}
		l := catalog.EngineLease{ID: e.id, Addr: e.addr, Loaded: e.schema.Load().Version, Floor: e.sl.floor,
			Expires: start + int64(e.sl.lease)}
		e.sl.mu.Unlock()
		if err = catalog.PutEngineLease(txn, &l); err != nil {
			txn.Rollback(ctx)
			return err
		}
		if err = txn.Commit(ctx); err != nil {
			if kv.IsRetryable(err) {
				continue // a DDL step moved the version meanwhile
			}
			return err
		}
		e.sl.mu.Lock()
		if !lapsed && e.now() >= e.sl.validUntil.Load() {
			// Expired while the renewal was under way.
			e.sl.epoch++
			e.refreshFloorLocked()
		}
		e.sl.validUntil.Store(start + int64(e.sl.lease))
		e.sl.lastRenew = start
		e.sl.reported = l
		e.sl.mu.Unlock()
		return nil
	}
	return err
}

// leaseStale reports whether the stored lease should be written again: it
// is due (a quarter of the lease passed) or behind the engine's state.
func (e *Engine) leaseStale() bool {
	e.sl.mu.Lock()
	defer e.sl.mu.Unlock()
	r := e.sl.reported
	return e.now()-e.sl.lastRenew >= int64(e.sl.lease)/4 || r.Loaded != e.schema.Load().Version || r.Floor != e.sl.floor
}

// ensureLease makes sure the engine may run its schema now: when its lease
// expired, it renews it (loading the latest schema) or fails with 8027.
func (e *Engine) ensureLease(ctx context.Context) error {
	if e.now() < e.sl.validUntil.Load() {
		return nil
	}
	if err := e.renew(ctx, true); err != nil {
		if !errors.Is(err, errLeaseHeld) {
			slog.Warn("sql: cannot renew the schema lease", "engine", e.id, "err", err)
		}
		return errSchemaExpired
	}
	return nil
}

// refreshFloor recomputes the floor (pins may have held it long enough to
// be doomed).
func (e *Engine) refreshFloor() {
	e.sl.mu.Lock()
	e.refreshFloorLocked()
	e.sl.mu.Unlock()
}

// deregister removes the engine's lease when it stops, so that the owner
// does not wait for it to expire.
func (e *Engine) deregister(ctx context.Context) {
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return
	}
	if err := catalog.DeleteEngineLease(txn, e.id); err != nil {
		txn.Rollback(ctx)
		return
	}
	if o, err := catalog.GetOwner(ctx, txn); err == nil && o != nil && o.ID == e.id {
		_ = catalog.DeleteOwner(txn)
	}
	_ = txn.Commit(ctx)
}

// waitBarrier waits, at most a lease, until the engine runs a schema in
// which table id takes writes again (or is gone).
func (e *Engine) waitBarrier(ctx context.Context, id int64) {
	t := time.NewTimer(e.sl.poll)
	defer t.Stop()
	deadline := time.Now().Add(e.sl.lease)
	for time.Now().Before(deadline) {
		e.pace.Touch() // the version that lifts the barrier is near
		changed := e.settleChanged()
		if tbl := e.schema.Load().TableByID(id); tbl == nil || !tbl.WriteBarrier {
			return
		}
		t.Reset(e.sl.poll)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
