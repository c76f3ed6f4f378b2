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
// The schema is read from KV (package catalog) and cached by the engine,
// which polls the version key and holds a lease on the version it runs
// (schemalease.go). DDL statements become jobs that the DDL owner, one
// engine of the cluster, runs through F1's schema states (ddl_job.go,
// ddl_owner.go; DESIGN.md, "Online schema change"); an open transaction is
// committed first, as in MySQL. Prepared statements are planned once and
// re-planned only when the schema version changes; a primary-key point
// select goes from parameters to one txn.Get.
package sql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/audit"
	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/pace"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/infoschema"
	"github.com/strata-db/strata/internal/sql/privilege"
	"github.com/strata-db/strata/internal/sql/types"
)

// autoIDBatch is how many AUTO_INCREMENT / row ids a node reserves at once.
const autoIDBatch = 1000

// Engine is the SQL layer of one node: it caches the schema and allocates
// ids; it is shared by all sessions.
type Engine struct {
	store   kv.Storage
	schema  atomic.Pointer[catalog.Schema]
	privs   atomic.Pointer[privilege.Snapshot] // accounts (privileges.go)
	stats   atomic.Pointer[catalog.Stats]      // table statistics (analyze.go)
	mods    modCounts                          // rows changed since (autoanalyze.go)
	ids     *idAllocator
	cluster infoschema.ClusterSource
	regions RegionAdmin
	audit   *audit.Logger

	// ddlMu orders schema installs against transaction starts.
	ddlMu sync.RWMutex

	// Online schema change: the engine's identity, its schema lease
	// (schemalease.go) and its part in running DDL jobs (ddl_owner.go).
	id              string
	addr            string
	sl              schemaLease
	own             ownerState
	backfillBatch   int
	backfillWorkers int
	manual          bool
	loops           sync.WaitGroup
	// pace sets the schema loop's interval (and the DDL owner's between
	// job scans): SchemaPoll while things change, up to SchemaIdlePoll
	// while nothing does (pollwatch.go).
	pace *pace.Pace
	seen watched

	mu         sync.Mutex
	globalVars map[string]types.Datum
	// execGlobals are the global values of execVarNames (vars.go).
	execGlobals atomic.Pointer[execSettings]
	tmpDir      string
	nextConnID  atomic.Uint32
	procs       processList // sessions and their running statements (process.go)

	// The cleanup of dropped data (cleanup.go); nil safePoint: none.
	safePoint SafePointSource
	destroyer kv.RangeDestroyer
	// importRunBatches: Options.ImportRunBatches.
	importRunBatches int
	cleanupMu        sync.Mutex    // one pass at a time
	kick             chan struct{} // a DDL recorded a job
	gcDone           sync.WaitGroup
	gcCtx            context.Context // canceled by Close
	gcStop           context.CancelFunc
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

	// ID names the engine among the cluster's SQL engines (its schema
	// lease, DDL ownership). A node passes a stable one, so that after a
	// crash its restart replaces its old lease instead of leaving the
	// owner to wait for that lease to expire. Empty: a random one.
	ID string
	// Addr is where the engine serves, shown by ADMIN SHOW DDL.
	Addr string
	// SchemaLease is how long the engine may run a schema version without
	// renewing its lease (default 10s): a node cut off from the storage
	// stops serving after it, and a dead node holds DDL back for at most
	// this long (plus a clock offset margin).
	SchemaLease time.Duration
	// SchemaPoll is how often the engine looks for a new schema version
	// and, as the DDL owner, for jobs (default 50ms) while things change:
	// for SchemaHotHold after it saw a change or made one, and while one
	// of its statements waits for a DDL job.
	SchemaPoll time.Duration
	// SchemaIdlePoll is the longest interval between two looks while
	// nothing changes (default 500ms; at most an eighth of SchemaLease): the
	// interval doubles from SchemaPoll up to it. A change made on another
	// node reaches an idle engine at most this much later.
	SchemaIdlePoll time.Duration
	// SchemaHotHold is how long the engine looks every SchemaPoll after a
	// change (default 30s) before it backs off.
	SchemaHotHold time.Duration
	// BackfillBatch is the number of rows an index backfill writes per
	// transaction (default 1024).
	BackfillBatch int
	// BackfillWorkers is how many shares of a table an index backfill
	// fills at the same time (default 4), so that their commits share
	// fsyncs.
	BackfillWorkers int
	// ImportRunBatches is how many batches of BackfillBatch rows one share
	// of an ingest-mode backfill reads, sorts and imports at a time before
	// it records its progress (default 64; a run also ends at 16 MiB of
	// index entries).
	ImportRunBatches int
	// Clock replaces the wall clock for leases (tests).
	Clock Clock
	// Manual runs no background loop: the caller drives the engine with
	// Tick and RunDDLStep (tests of the protocol).
	Manual bool
	// Cluster reads the cluster's state for INFORMATION_SCHEMA.CLUSTER_NODES
	// and REGIONS (nil: they are empty).
	Cluster infoschema.ClusterSource
	// Regions splits and lists regions for SPLIT TABLE and SHOW TABLE
	// REGIONS (nil: they are refused).
	Regions RegionAdmin
	// Audit, when set, records every DDL and DCL statement (audit.go).
	Audit *audit.Logger
	// TmpDir is where statements past their memory quota spill rows
	// (exec/spill.go); NewEngine empties it. Empty: os.TempDir.
	TmpDir string
}

// Close cancels the running statements (they fail with 1053) and refuses
// new ones, stops background work (the cleanup of dropped data) and waits
// for both; call it before closing the storage underneath.
func (e *Engine) Close() {
	// Running statements stop before the storage underneath them closes.
	e.shutdownStatements(10 * time.Second)
	e.gcStop()
	e.gcDone.Wait()
	e.loops.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	e.deregister(ctx)
}

// NewEngine opens the SQL layer over store and loads the catalog.
func NewEngine(ctx context.Context, store kv.Storage, opts Options) (*Engine, error) {
	e := &Engine{store: store, globalVars: map[string]types.Datum{}, kick: make(chan struct{}, 1), cluster: opts.Cluster, regions: opts.Regions,
		id: opts.ID, addr: opts.Addr, backfillBatch: opts.BackfillBatch, backfillWorkers: opts.BackfillWorkers,
		manual: opts.Manual, audit: opts.Audit}
	e.gcCtx, e.gcStop = context.WithCancel(context.Background())
	if opts.TmpDir != "" {
		// Files a crashed process left behind.
		if err := os.RemoveAll(opts.TmpDir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(opts.TmpDir, 0o755); err != nil {
			return nil, err
		}
		e.tmpDir = opts.TmpDir
	}
	e.ids = &idAllocator{store: store, tables: map[int64]*idRange{}}
	if e.id == "" {
		e.id = newEngineID()
	}
	if e.backfillBatch <= 0 {
		e.backfillBatch = defaultBackfillBatch
	}
	if e.backfillWorkers <= 0 {
		e.backfillWorkers = defaultBackfillWorkers
	}
	if e.importRunBatches = opts.ImportRunBatches; e.importRunBatches <= 0 {
		e.importRunBatches = defaultImportRunBatches
	}
	e.sl.clock, e.sl.lease, e.sl.poll = opts.Clock, opts.SchemaLease, opts.SchemaPoll
	if e.sl.clock == nil {
		e.sl.clock = wallClock{}
	}
	if e.sl.lease <= 0 {
		e.sl.lease = defaultSchemaLease
	}
	if e.sl.poll <= 0 {
		e.sl.poll = defaultSchemaPoll
	}
	idle := opts.SchemaIdlePoll
	if idle <= 0 {
		idle = defaultSchemaIdlePoll
	}
	hold := opts.SchemaHotHold
	if hold <= 0 {
		hold = schemaHotHold
	}
	e.pace = pace.New(e.sl.poll, min(idle, e.sl.lease/8), hold)
	e.own.kick = make(chan struct{}, 1)
	e.own.jobsDone = make(chan struct{})
	if _, err := e.loadSchema(ctx); err != nil {
		return nil, err
	}
	if err := e.loadPrivileges(ctx); err != nil {
		return nil, fmt.Errorf("sql: load accounts: %w", err)
	}
	if err := e.readOnly(ctx, func(txn kv.Txn) error { return e.refreshStats(ctx, txn) }); err != nil {
		return nil, fmt.Errorf("sql: load table statistics: %w", err)
	}
	// Registered and (when nobody is) the DDL owner before the first
	// statement, so that a single node runs its first DDL at once.
	if err := e.renewLease(ctx); err != nil {
		return nil, fmt.Errorf("sql: register the schema lease: %w", err)
	}
	if err := e.campaign(ctx); err != nil {
		return nil, fmt.Errorf("sql: DDL owner election: %w", err)
	}
	if !e.manual {
		e.loops.Add(2)
		go e.schemaLoop()
		go e.ownerLoop()
	}
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

// beginTxn starts a transaction and returns the schema it runs with: the
// engine's cached schema, which its lease promises is at most one version
// behind the latest. An engine whose lease expired renews it first, or
// fails with 8027.
//
// The start timestamp and the schema are taken under ddlMu shared and a
// schema is installed under ddlMu exclusively, so a transaction that
// starts after an install runs under the installed schema.
func (e *Engine) beginTxn(ctx context.Context, opts kv.TxnOptions) (kv.Txn, *catalog.Schema, error) {
	if err := e.ensureLease(ctx); err != nil {
		return nil, nil, err
	}
	e.ddlMu.RLock()
	txn, err := e.store.Begin(ctx, opts)
	schema := e.schema.Load()
	e.ddlMu.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	return txn, schema, nil
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
