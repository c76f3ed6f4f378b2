// Package sql is the front of the SQL layer: an Engine per node and a
// Session per client connection. The MySQL wire server (internal/sql/server)
// calls Session.Execute / Prepare / ExecutePrepared and renders Results.
//
// A Session owns at most one kv.Txn, pessimistic unless tidb_txn_mode or
// BEGIN OPTIMISTIC say otherwise (txnmode.go): a statement that writes
// locks its rows and waits for others' locks, and runs again at a fresh
// timestamp when its locks find newer commits. Outside BEGIN each statement
// runs in its own transaction (autocommit), optimistically first and, after
// a conflict, pessimistically. Deadlock victims (1213) are rolled back;
// lock wait timeouts (1205) fail the statement only. Every statement is
// atomic: its writes are staged (exec.StmtBuffer) and reach the transaction
// only when it succeeds.
//
// The schema is read from KV (package catalog): each transaction reads the
// version key once and reloads the catalog only when it changed. DDL runs in
// a transaction of its own (an open transaction is committed first, as in
// MySQL). Prepared statements are planned once and re-planned only when the
// schema version changes; a primary-key point select goes from parameters to
// one txn.Get.
package sql

import (
	"context"
	"errors"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/types"
)

// autoIDBatch is how many AUTO_INCREMENT / row ids a node reserves at once.
const autoIDBatch = 1000

// Engine is the SQL layer of one node: it caches the schema and allocates
// ids; it is shared by all sessions.
type Engine struct {
	store   kv.Storage
	schema  atomic.Pointer[catalog.Schema]
	ids     *idAllocator
	cluster infoschema.ClusterSource

	// ddlMu orders local DDL commits against transaction starts;
	// schemaChecked is when the version key was last read (unix ns).
	ddlMu         sync.RWMutex
	schemaChecked atomic.Int64

	mu         sync.Mutex
	globalVars map[string]types.Datum
	nextConnID atomic.Uint32
	procs      processList // sessions and their running statements (process.go)

	// The cleanup of dropped data (cleanup.go); nil safePoint: none.
	safePoint SafePointSource
	destroyer kv.RangeDestroyer
	cleanupMu sync.Mutex    // one pass at a time
	kick      chan struct{} // a DDL recorded a job
	gcDone    sync.WaitGroup
	gcCtx     context.Context // canceled by Close
	gcStop    context.CancelFunc
}

// Options configures an Engine. The zero value never destroys the data of
// dropped tables (the jobs stay recorded; see SafePoint).
type Options struct {
	// SafePoint tells the engine the GC safe point, so that it can destroy
	// the data of dropped tables and indexes once no transaction can read
	// it (cleanup.go). The storage must then implement kv.RangeDestroyer.
	// Nil: dropped data is kept, its jobs stay recorded.
	SafePoint SafePointSource
	// CleanupInterval is how often the engine looks for dropped data to
	// destroy (default 5s); a DDL that drops data also wakes it.
	CleanupInterval time.Duration
	// Cluster reads the cluster's state for INFORMATION_SCHEMA.CLUSTER_NODES
	// and REGIONS (nil: they are empty).
	Cluster infoschema.ClusterSource
}

// Close cancels the running statements (they fail with 1053) and refuses
// new ones, stops background work (the cleanup of dropped data) and waits
// for both; call it before closing the storage underneath.
func (e *Engine) Close() {
	// Running statements stop before the storage underneath them closes.
	e.shutdownStatements(10 * time.Second)
	e.gcStop()
	e.gcDone.Wait()
}

// NewEngine opens the SQL layer over store and loads the catalog.
func NewEngine(ctx context.Context, store kv.Storage, opts Options) (*Engine, error) {
	e := &Engine{store: store, globalVars: map[string]types.Datum{}, kick: make(chan struct{}, 1), cluster: opts.Cluster}
	e.gcCtx, e.gcStop = context.WithCancel(context.Background())
	e.ids = &idAllocator{store: store, tables: map[int64]*idRange{}}
	txn, err := store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return nil, err
	}
	defer txn.Rollback(ctx)
	s, err := catalog.Load(ctx, txn)
	if err != nil {
		return nil, err
	}
	e.schema.Store(s)
	if opts.SafePoint != nil {
		d, ok := store.(kv.RangeDestroyer)
		if !ok {
			return nil, errors.New("sql: a GC safe point source needs a storage that destroys key ranges (kv.RangeDestroyer)")
		}
		e.safePoint, e.destroyer = opts.SafePoint, d
		interval := opts.CleanupInterval
		if interval <= 0 {
			interval = defaultCleanupInterval
		}
		e.gcDone.Add(1)
		go e.cleanupLoop(interval) // its first pass resumes jobs left by a restart
	}
	return e, nil
}

// schemaCheckInterval bounds how stale the cached schema may be with
// respect to DDL committed by another node: a transaction that begins more
// than this long after the last check re-reads the version key.
const schemaCheckInterval = time.Second

// beginTxn starts a transaction and returns the schema it runs with.
//
// The schema comes from the node's cache instead of a read of the version
// key in every transaction (that read was a fifth of a point select's CPU).
// DDL on this node commits and installs its new schema while holding
// ddlMu exclusively, and beginTxn takes the start timestamp and the cached
// schema under ddlMu shared, so a transaction that starts after a local
// DDL committed always sees that DDL's schema. DDL committed by other
// nodes is picked up by the periodic version check.
func (e *Engine) beginTxn(ctx context.Context, opts kv.TxnOptions) (kv.Txn, *catalog.Schema, error) {
	e.ddlMu.RLock()
	txn, err := e.store.Begin(ctx, opts)
	schema := e.schema.Load()
	e.ddlMu.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now().UnixNano()
	if last := e.schemaChecked.Load(); now-last > int64(schemaCheckInterval) && e.schemaChecked.CompareAndSwap(last, now) {
		ver, err := catalog.Version(ctx, txn)
		if err == nil && ver != schema.Version {
			schema, err = e.schemaFor(ctx, txn, ver)
		}
		if err != nil {
			txn.Rollback(ctx)
			return nil, nil, err
		}
	}
	return txn, schema, nil
}

// commitDDL commits a DDL transaction and installs the schema it created
// before any transaction can start after it (see beginTxn).
func (e *Engine) commitDDL(ctx context.Context, txn kv.Txn) error {
	e.ddlMu.Lock()
	defer e.ddlMu.Unlock()
	if err := txn.Commit(ctx); err != nil {
		return err
	}
	after, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	defer after.Rollback(ctx)
	s, err := catalog.Load(ctx, after)
	if err != nil {
		return err
	}
	e.schema.Store(s)
	return nil
}

// schemaFor returns the schema at version ver, loading it through txn when
// the cached one is different.
func (e *Engine) schemaFor(ctx context.Context, txn kv.Txn, ver int64) (*catalog.Schema, error) {
	if s := e.schema.Load(); s != nil && s.Version == ver {
		return s, nil
	}
	s, err := catalog.Load(ctx, txn)
	if err != nil {
		return nil, err
	}
	if cur := e.schema.Load(); cur == nil || cur.Version < s.Version {
		e.schema.Store(s)
	}
	return s, nil
}

// idAllocator hands out AUTO_INCREMENT values and hidden row handles from
// per-node batches reserved in short transactions of their own, so ids are
// never reused and user transactions never conflict on the counter.
type idAllocator struct {
	store  kv.Storage
	mu     sync.Mutex
	tables map[int64]*idRange
}

type idRange struct{ next, end int64 } // next <= end means ids available

func (a *idAllocator) reserve(ctx context.Context, f func(txn kv.Txn) error) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		var txn kv.Txn
		if txn, err = a.store.Begin(ctx, kv.TxnOptions{}); err != nil {
			return err
		}
		if err = f(txn); err != nil {
			txn.Rollback(ctx)
			return err
		}
		if err = txn.Commit(ctx); err == nil || !kv.IsRetryable(err) {
			return err
		}
	}
	return err
}

// Alloc implements exec.IDAllocator.
func (a *idAllocator) Alloc(ctx context.Context, t *catalog.TableInfo) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.tables[t.ID]
	if r == nil {
		r = &idRange{next: 1, end: 0}
		a.tables[t.ID] = r
	}
	if r.next > r.end {
		var last int64
		err := a.reserve(ctx, func(txn kv.Txn) error {
			var err error
			last, err = catalog.AllocAutoIDs(ctx, txn, t.ID, autoIDBatch)
			return err
		})
		if err != nil {
			return 0, err
		}
		r.next, r.end = last-autoIDBatch+1, last
	}
	id := r.next
	r.next++
	return id, nil
}

// Rebase implements exec.IDAllocator: an explicit value v moves later ids
// above it.
func (a *idAllocator) Rebase(ctx context.Context, t *catalog.TableInfo, v int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.tables[t.ID]
	if r == nil {
		r = &idRange{next: 1, end: 0}
		a.tables[t.ID] = r
	}
	if v < r.next {
		return nil
	}
	if v < r.end {
		r.next = v + 1
		return nil
	}
	// Reserve a fresh batch above v so that a run of explicit ids (bulk
	// loads) costs one reservation per batch, not one per row.
	var last int64
	err := a.reserve(ctx, func(txn kv.Txn) error {
		if err := catalog.RebaseAutoID(ctx, txn, t.ID, v); err != nil {
			return err
		}
		var err error
		last, err = catalog.AllocAutoIDs(ctx, txn, t.ID, autoIDBatch)
		return err
	})
	if err != nil {
		return err
	}
	r.next, r.end = last-autoIDBatch+1, last
	return nil
}

// forget drops cached ranges of a dropped or truncated table.
func (a *idAllocator) forget(tableID int64) {
	a.mu.Lock()
	delete(a.tables, tableID)
	a.mu.Unlock()
}
