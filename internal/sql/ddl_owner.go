package sql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/tablecodec"
	"github.com/strata-db/strata/internal/sql/types"
)

// The DDL owner: the one engine of the cluster that runs DDL jobs, one
// step at a time (DESIGN.md, "Online schema change"). Ownership is a
// record in KV with a lease that the owner renews; any engine takes it
// over once the lease expired. Ownership only avoids wasted work: every
// step is a transaction that rewrites the job and the schema version it
// read, so two engines that both think they own DDL conflict, and one step
// wins.

// defaultBackfillBatch is how many rows one backfill transaction covers;
// defaultBackfillWorkers how many shares of a table are filled at once.
const (
	defaultBackfillBatch   = 1024
	defaultBackfillWorkers = 4
)

// errJobCancelled ends a job cancelled by ADMIN CANCEL DDL JOBS (TiDB's 8214).
var errJobCancelled = sqlerr.New(8214, "HY000", "Cancelled DDL job")

// ownerState is the engine's part in DDL ownership.
type ownerState struct {
	step      sync.Mutex   // one step at a time on this engine
	until     atomic.Int64 // clock ns: the engine owns DDL until then
	lastRenew atomic.Int64
	kick      chan struct{} // wakes the owner loop

	doneMu   sync.Mutex
	jobsDone chan struct{} // closed (and replaced) when this engine finished a job
}

func (e *Engine) isOwner() bool { return e.now() < e.own.until.Load() }

// kickOwner wakes the owner loop (a job was submitted here, or the floor rose).
func (e *Engine) kickOwner() {
	select {
	case e.own.kick <- struct{}{}:
	default:
	}
}

func (e *Engine) jobsDoneChan() <-chan struct{} {
	e.own.doneMu.Lock()
	defer e.own.doneMu.Unlock()
	return e.own.jobsDone
}

func (e *Engine) notifyJobsDone() {
	e.own.doneMu.Lock()
	close(e.own.jobsDone)
	e.own.jobsDone = make(chan struct{})
	e.own.doneMu.Unlock()
}

// campaign takes DDL ownership when nobody holds it (or the holder's lease
// expired), and renews it when this engine holds it and a quarter of the
// lease passed.
func (e *Engine) campaign(ctx context.Context) error {
	start := e.now()
	if start < e.own.until.Load() && start-e.own.lastRenew.Load() < int64(e.sl.lease)/4 {
		return nil
	}
	e.sl.mu.Lock()
	held := e.sl.held
	e.sl.mu.Unlock()
	if held {
		return errLeaseHeld
	}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	o, err := catalog.GetOwner(ctx, txn)
	if err != nil {
		txn.Rollback(ctx)
		return err
	}
	if o != nil && o.ID != e.id && start <= o.Expires+int64(maxClockOffset) {
		txn.Rollback(ctx)
		e.own.until.Store(0)
		return nil
	}
	if err := catalog.PutOwner(txn, &catalog.Owner{ID: e.id, Addr: e.addr, Expires: start + int64(e.sl.lease)}); err != nil {
		txn.Rollback(ctx)
		return err
	}
	if err := txn.Commit(ctx); err != nil {
		if kv.IsRetryable(err) {
			return nil // another engine campaigned at the same time
		}
		return err
	}
	was := e.isOwner()
	e.own.until.Store(start + int64(e.sl.lease))
	e.own.lastRenew.Store(start)
	if !was {
		slog.Debug("sql: this engine now runs DDL jobs", "engine", e.id)
		e.kickOwner()
	}
	return nil
}

// Tick does one round of the engine's background work, which the schema
// loop runs at the engine's pace (pollwatch.go): it reads the counters the
// engine watches in one batch, loads a newer schema version (and accounts,
// statistics), recomputes the floor, renews the lease when it is due or
// behind, and takes or renews DDL ownership. Tests with Options.Manual
// call it themselves.
func (e *Engine) Tick(ctx context.Context) error {
	_, err := e.tick(ctx)
	return err
}

// tick is Tick; it also reports whether a watched counter moved since the
// last tick.
func (e *Engine) tick(ctx context.Context) (bool, error) {
	e.sl.mu.Lock()
	held := e.sl.held
	e.sl.mu.Unlock()
	if held {
		return false, errLeaseHeld
	}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return false, err
	}
	w, owner, err := readWatched(ctx, txn)
	if err == nil && w.privileges > e.privs.Load().Version {
		err = e.refreshPrivileges(ctx, txn)
	}
	if cur := e.stats.Load(); err == nil && (cur == nil || w.stats > cur.Version) {
		err = e.refreshStats(ctx, txn)
	}
	txn.Rollback(ctx)
	if err != nil {
		return false, err
	}
	changed := e.observe(w)
	if w.schema > e.schema.Load().Version {
		if _, err := e.loadSchema(ctx); err != nil {
			return changed, err
		}
	}
	e.refreshFloor()
	if e.leaseStale() {
		if err := e.renewLease(ctx); err != nil {
			return changed, err
		}
	}
	if owner != nil && owner.ID != e.id && e.now() <= owner.Expires+int64(maxClockOffset) {
		e.own.until.Store(0) // another engine owns DDL: nothing to campaign for
	} else if err := e.campaign(ctx); err != nil {
		return changed, err
	}
	if changed && e.isOwner() {
		e.kickOwner() // a job may have been queued on another engine
	}
	if !e.manual {
		e.autoAnalyze(e.gcCtx)
	}
	return changed, nil
}

func (e *Engine) schemaLoop() {
	defer e.loops.Done()
	ctx := e.gcCtx
	t := time.NewTimer(e.pace.Interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.pace.Wake():
		}
		changed, err := e.tick(ctx)
		if err != nil && ctx.Err() == nil && !kv.IsRetryable(err) {
			slog.Warn("sql: schema lease renewal failed; retrying", "engine", e.id, "err", err)
		}
		// A failed tick is retried at the short interval: the lease may
		// be running out.
		t.Reset(e.pace.Next(changed || err != nil))
	}
}

// ownerLoop runs DDL steps while this engine owns DDL: when kicked (a job
// queued here or seen queued elsewhere, the floor rose) and at the
// engine's pace, which stays short while a job moves or waits.
func (e *Engine) ownerLoop() {
	defer e.loops.Done()
	ctx := e.gcCtx
	t := time.NewTimer(e.pace.Interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.own.kick:
		}
		busy := false
		for ctx.Err() == nil && e.isOwner() {
			r, err := e.RunDDLStep(ctx)
			if err != nil {
				if ctx.Err() == nil && !kv.IsRetryable(err) {
					slog.Warn("sql: DDL job step failed; retrying", "engine", e.id, "job", r.JobID, "err", err)
				}
				busy = true
				break
			}
			if r.Idle || r.NotOwner {
				break
			}
			busy = true
			if r.Blocked != "" {
				break
			}
		}
		if busy {
			// A job moves or waits for other engines: look again soon,
			// and have the schema loop renew this engine's lease with
			// what it loads.
			e.pace.Touch()
		}
		t.Reset(e.pace.Interval())
	}
}

// StepResult is what one RunDDLStep did.
type StepResult struct {
	JobID    int64
	Idle     bool   // no job waits
	NotOwner bool   // this engine does not run DDL jobs
	Blocked  string // why the job cannot move yet: the engines it waits for
	Did      string // what it did
}

func (r StepResult) String() string {
	switch {
	case r.NotOwner:
		return "not the DDL owner"
	case r.Idle:
		return "no job"
	case r.Blocked != "":
		return fmt.Sprintf("job %d waits: %s", r.JobID, r.Blocked)
	}
	return fmt.Sprintf("job %d: %s", r.JobID, r.Did)
}

// settled returns the live engines (self standing for its own stored
// lease) whose floor is below ver: version ver+1 may be committed only
// when there are none, so that no engine runs more than one version
// behind. A lease counts as live until maxClockOffset after it expired by
// now, the owner's clock read before the step's snapshot was taken: an
// engine renews before it expires (by its own clock) or stops serving.
func settled(leases []*catalog.EngineLease, self *catalog.EngineLease, now, ver int64) []*catalog.EngineLease {
	var waiting []*catalog.EngineLease
	seen := false
	for _, l := range leases {
		if self != nil && l.ID == self.ID {
			l, seen = self, true
		}
		if now > l.Expires+int64(maxClockOffset) {
			continue
		}
		if l.Floor < ver {
			waiting = append(waiting, l)
		}
	}
	if self != nil && !seen && self.Floor < ver {
		waiting = append(waiting, self)
	}
	return waiting
}

func describeWaiting(ls []*catalog.EngineLease, ver int64) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("engine %s has loaded version %d, its transactions may commit under version %d, version %d needs %d", l.ID, l.Loaded, l.Floor, ver+1, ver)
	}
	return strings.Join(parts, "; ")
}

// RunDDLStep does one unit of the first queued job's work, if this engine
// owns DDL: one schema state change (one new schema version, committed
// only once every live engine has settled on the current one), or one
// backfill batch. The owner loop calls it until the job waits; tests with
// Options.Manual call it themselves.
func (e *Engine) RunDDLStep(ctx context.Context) (StepResult, error) {
	e.own.step.Lock()
	defer e.own.step.Unlock()
	if !e.isOwner() {
		return StepResult{NotOwner: true}, nil
	}
	if err := e.ensureLease(ctx); err != nil {
		return StepResult{}, err
	}
	var res StepResult
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if res, err = e.ddlStep(ctx); err == nil || !kv.IsRetryable(err) {
			break
		}
	}
	return res, err
}

func (e *Engine) ddlStep(ctx context.Context) (StepResult, error) {
	now := e.now()
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return StepResult{}, err
	}
	defer txn.Rollback(ctx) // a no-op after Commit
	jobs, err := catalog.Jobs(ctx, txn)
	if err != nil || len(jobs) == 0 {
		return StepResult{Idle: err == nil}, err
	}
	job := jobs[0]
	res := StepResult{JobID: job.ID}
	if job.State == catalog.JobRunning && !job.Cancel && job.SchemaState == catalog.StateWriteReorg && !job.ReorgDone {
		txn.Rollback(ctx)
		return e.backfillStep(ctx, job)
	}
	ver, err := catalog.Version(ctx, txn)
	if err != nil {
		return res, err
	}
	if job.State == catalog.JobQueueing && job.Cancel {
		return e.finishJob(ctx, txn, job, catalog.JobCancelled, errJobCancelled, "cancelled")
	}
	leases, err := catalog.EngineLeases(ctx, txn)
	if err != nil {
		return res, err
	}
	if w := settled(leases, e.selfLease(), now, ver); len(w) > 0 {
		res.Blocked = describeWaiting(w, ver)
		return res, nil
	}
	if job.Started == 0 {
		job.Started = e.now() / int64(time.Millisecond)
	}
	schema, err := catalog.Load(ctx, txn)
	if err != nil {
		return res, err
	}
	switch {
	case job.Applied:
		return e.advanceJob(ctx, txn, job, schema)
	case job.Barrier && job.State == catalog.JobQueueing:
		return e.barrierStep(ctx, txn, job, schema)
	}
	return e.applyJob(ctx, txn, job, schema)
}

// commitStep commits a step's transaction, which moved the schema to a
// new version, and installs that version on this engine.
func (e *Engine) commitStep(ctx context.Context, txn kv.Txn) error {
	if err := txn.Commit(ctx); err != nil {
		return err
	}
	_, err := e.loadSchema(ctx)
	return err
}

// finishJob ends a job in txn, without a schema change of its own.
func (e *Engine) finishJob(ctx context.Context, txn kv.Txn, job *catalog.Job, state catalog.JobState, cause error, did string) (StepResult, error) {
	job.State = state
	job.Finished = e.now() / int64(time.Millisecond)
	if cause != nil {
		job.Error = jobError(cause)
	}
	if err := catalog.FinishJob(txn, job); err != nil {
		return StepResult{JobID: job.ID}, err
	}
	if err := txn.Commit(ctx); err != nil {
		return StepResult{JobID: job.ID}, err
	}
	e.notifyJobsDone()
	return StepResult{JobID: job.ID, Did: did}, nil
}

func jobError(err error) *catalog.JobError {
	var se *sqlerr.Error
	if errors.As(err, &se) {
		return &catalog.JobError{Code: se.Code, State: se.State, Message: se.Msg}
	}
	return &catalog.JobError{Code: sqlerr.ErUnknown, State: "HY000", Message: err.Error()}
}

// applyJob applies a job's statement: its catalog change, made as a
// session of the submitter would (its database and variables). Most
// statements are done with it; one that adds or drops indexes leaves them
// in TableInfo.Changing (delete-only when added, write-only when dropped),
// and the job goes on through advanceJob. A job with a write barrier
// lifts it in the same version.
func (e *Engine) applyJob(ctx context.Context, txn kv.Txn, job *catalog.Job, schema *catalog.Schema) (StepResult, error) {
	res := StepResult{JobID: job.ID}
	barrier := job.Barrier && job.State == catalog.JobRunning // set by barrierStep
	if barrier && job.Cancel {
		txn.Rollback(ctx)
		return e.liftBarrier(ctx, job, errJobCancelled)
	}
	s := e.NewSession("root", "localhost")
	s.db = job.DB
	for k, v := range job.Vars {
		s.vars[k] = decodeVar(v)
	}
	text := job.Stmt
	if text == "" {
		text = job.Query
	}
	st, err := s.parser.ParseOneStmt(text, "", "")
	if err != nil {
		if barrier {
			txn.Rollback(ctx)
			return e.liftBarrier(ctx, job, parseError(err))
		}
		return e.finishJob(ctx, txn, job, catalog.JobCancelled, parseError(err), "failed")
	}
	next := schema.Version + 1
	rt := &revisionTxn{Txn: txn, version: next}
	changed, err := s.applyDDL(ctx, rt, schema, st)
	for _, w := range s.warnings {
		job.Warnings = append(job.Warnings, *jobError(w))
	}
	var se *sqlerr.Error
	switch {
	case errors.As(err, &se):
		// The statement failed as it would have on one node: nothing of
		// it is kept.
		txn.Rollback(ctx)
		if barrier {
			return e.liftBarrier(ctx, job, se)
		}
		if txn, err = e.store.Begin(ctx, kv.TxnOptions{}); err != nil {
			return res, err
		}
		defer txn.Rollback(ctx)
		return e.finishJob(ctx, txn, job, catalog.JobCancelled, se, "failed: "+se.Msg)
	case err != nil:
		return res, err
	case rt.err != nil:
		return res, rt.err
	case !changed && !barrier:
		return e.finishJob(ctx, txn, job, catalog.JobSynced, nil, "nothing to change")
	}
	if barrier && rt.tables[job.TableID] == nil {
		if t := schema.TableByID(job.TableID); t != nil {
			if err := catalog.PutTable(rt, t.Clone()); err != nil { // lifts the barrier
				return res, err
			}
		}
	}
	if _, err := catalog.NextVersion(ctx, txn); err != nil {
		return res, err
	}
	job.Version, job.Applied = next, true
	var changing *catalog.TableInfo
	for _, t := range rt.tables {
		if len(t.Changing) > 0 {
			changing = t
		}
	}
	var did string
	if changing == nil {
		if job.TableID == 0 {
			for _, t := range rt.tables { // the table created or changed
				if job.TableID == 0 || t.ID < job.TableID {
					job.SchemaID, job.TableID = t.DBID, t.ID
				}
			}
		}
		job.State, job.SchemaState = catalog.JobSynced, catalog.StatePublic
		job.Finished = e.now() / int64(time.Millisecond)
		if err := catalog.FinishJob(txn, job); err != nil {
			return res, err
		}
		did = fmt.Sprintf("%s: done at version %d", job.Type, next)
	} else {
		job.TableID, job.SchemaID = changing.ID, changing.DBID
		for _, ix := range changing.Changing {
			if ix.State == catalog.StateDeleteOnly {
				job.Adding = append(job.Adding, ix.ID)
			} else {
				job.Dropping = append(job.Dropping, ix.ID)
			}
		}
		job.State = catalog.JobRunning
		job.SchemaState = jobSchemaState(job, changing)
		if err := catalog.PutJob(txn, job); err != nil {
			return res, err
		}
		did = fmt.Sprintf("%s: none -> %s at version %d", job.Type, job.SchemaState, next)
	}
	if barrier {
		did += ", writes resume"
	}
	if err := e.commitStep(ctx, txn); err != nil {
		return res, err
	}
	if job.Done() {
		e.notifyJobsDone()
	}
	e.kickCleanup()
	res.Did = did
	return res, nil
}

// barrierStep is the first step of a job with a write barrier: writers
// stop writing the job's table (they wait for the next version). The
// statement is applied at the next step, once every engine has this
// version: no transaction that could still commit writes the table under
// the definition the statement changes.
func (e *Engine) barrierStep(ctx context.Context, txn kv.Txn, job *catalog.Job, schema *catalog.Schema) (StepResult, error) {
	t := schema.Table(job.SchemaName, job.TableName)
	if t == nil || t.IsView() {
		job.Barrier = false // nothing to stop: the statement reports the error
		return e.applyJob(ctx, txn, job, schema)
	}
	next := schema.Version + 1
	nt := t.Clone()
	nt.WriteBarrier, nt.Revision = true, next
	if err := catalog.PutTable(txn, nt); err != nil {
		return StepResult{JobID: job.ID}, err
	}
	if _, err := catalog.NextVersion(ctx, txn); err != nil {
		return StepResult{JobID: job.ID}, err
	}
	job.State, job.Version = catalog.JobRunning, next
	job.TableID, job.SchemaID = t.ID, t.DBID
	if err := catalog.PutJob(txn, job); err != nil {
		return StepResult{JobID: job.ID}, err
	}
	if err := e.commitStep(ctx, txn); err != nil {
		return StepResult{JobID: job.ID}, err
	}
	return StepResult{JobID: job.ID, Did: fmt.Sprintf("%s: writes to %s stop at version %d", job.Type, t.Name, next)}, nil
}

// liftBarrier ends a job whose statement failed (or was cancelled) after
// its write barrier went up: the table is as it was, writable again.
func (e *Engine) liftBarrier(ctx context.Context, job *catalog.Job, cause error) (StepResult, error) {
	res := StepResult{JobID: job.ID}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return res, err
	}
	defer txn.Rollback(ctx)
	schema, err := catalog.Load(ctx, txn)
	if err != nil {
		return res, err
	}
	next := schema.Version + 1
	if t := schema.TableByID(job.TableID); t != nil && t.WriteBarrier {
		nt := t.Clone()
		nt.WriteBarrier, nt.Revision = false, next
		if err := catalog.PutTable(txn, nt); err != nil {
			return res, err
		}
	}
	if _, err := catalog.NextVersion(ctx, txn); err != nil {
		return res, err
	}
	job.Version, job.State, job.Error = next, catalog.JobRollbackDone, jobError(cause)
	job.Finished = e.now() / int64(time.Millisecond)
	if err := catalog.FinishJob(txn, job); err != nil {
		return res, err
	}
	if err := e.commitStep(ctx, txn); err != nil {
		return res, err
	}
	e.notifyJobsDone()
	res.Did = fmt.Sprintf("%s: failed (%s), writes resume at version %d", job.Type, job.Error.Message, next)
	return res, nil
}

// jobSchemaState is the state a job shows: that of the indexes it adds
// (they move together), or, when it drops indexes or rolls back, of those
// still changing; public once all it adds are, none once all it drops are
// gone.
func jobSchemaState(job *catalog.Job, t *catalog.TableInfo) catalog.SchemaState {
	adding := job.State == catalog.JobRunning && len(job.Adding) > 0
	if t != nil {
		for _, ix := range t.Changing {
			if slices.Contains(job.Adding, ix.ID) || (!adding && slices.Contains(job.Dropping, ix.ID)) {
				return ix.State
			}
		}
	}
	if adding {
		return catalog.StatePublic
	}
	return catalog.StateAbsent
}

// nextIndexStates moves every index a job changes one state on, the pure
// core of advanceJob. An index being added goes delete-only -> write-only
// -> write reorganization (backfill) -> public, the last only once the
// backfill is done. One being dropped, or whose add is rolled back,
// goes write-only (or write reorganization) -> delete-only -> gone; the
// index ranges of the indexes that left the schema are returned for
// destruction.
func nextIndexStates(job *catalog.Job, t *catalog.TableInfo) (nt *catalog.TableInfo, gone []int64) {
	nt = t.Clone()
	var keep []*catalog.IndexInfo
	for _, ix := range nt.Changing {
		ours := slices.Contains(job.Adding, ix.ID) || slices.Contains(job.Dropping, ix.ID)
		if !ours {
			keep = append(keep, ix)
			continue
		}
		adding := job.State == catalog.JobRunning && slices.Contains(job.Adding, ix.ID)
		switch {
		case adding && ix.State == catalog.StateDeleteOnly:
			ix.State = catalog.StateWriteOnly
		case adding && ix.State == catalog.StateWriteOnly:
			ix.State = catalog.StateWriteReorg
		case adding && ix.State == catalog.StateWriteReorg:
			ix.State = catalog.StatePublic
			nt.Indexes = append(nt.Indexes, ix)
			continue
		case ix.State == catalog.StateDeleteOnly:
			gone = append(gone, ix.ID)
			continue
		default: // dropping: write-only or write reorganization
			ix.State = catalog.StateDeleteOnly
		}
		keep = append(keep, ix)
	}
	nt.Changing = keep
	return nt, gone
}

// advanceJob moves a running (or rolling back) job's indexes one state on
// in txn, and finishes the job once none is left changing.
func (e *Engine) advanceJob(ctx context.Context, txn kv.Txn, job *catalog.Job, schema *catalog.Schema) (StepResult, error) {
	res := StepResult{JobID: job.ID}
	t := schema.TableByID(job.TableID)
	if t == nil {
		// Only a job runs DDL, one at a time: the table cannot be gone.
		return e.finishJob(ctx, txn, job, catalog.JobCancelled, fmt.Errorf("table %d of job %d is gone", job.TableID, job.ID), "failed")
	}
	if job.State == catalog.JobRunning && job.Cancel {
		if jobSchemaState(job, t) == catalog.StatePublic {
			job.Cancel = false // too late: the index is in use
		} else {
			job.State, job.Error = catalog.JobRollingBack, jobError(errJobCancelled)
		}
	}
	if job.State == catalog.JobRunning && job.SchemaState == catalog.StateWriteReorg && !job.ReorgDone {
		return res, fmt.Errorf("sql: job %d: index state change before its backfill finished", job.ID)
	}
	before := jobSchemaState(job, t)
	nt, gone := nextIndexStates(job, t)
	next := schema.Version + 1
	nt.Revision = next
	if err := catalog.PutTable(txn, nt); err != nil {
		return res, err
	}
	for _, id := range gone {
		p := tablecodec.IndexPrefix(t.ID, id)
		if err := catalog.AddGCJob(ctx, txn, p, tablecodec.PrefixEnd(p)); err != nil {
			return res, err
		}
	}
	if _, err := catalog.NextVersion(ctx, txn); err != nil {
		return res, err
	}
	job.Version = next
	job.SchemaState = jobSchemaState(job, nt)
	switch {
	case job.SchemaState == catalog.StateWriteReorg && before != catalog.StateWriteReorg:
		// The backfill's shares, stored with the state that starts it.
		parts, err := e.splitBackfill(ctx, txn, t, reorgSetting(job, "tidb_ddl_reorg_worker_cnt", e.backfillWorkers, 1, 64),
			reorgSetting(job, "tidb_ddl_reorg_batch_size", e.backfillBatch, 1, 10240))
		if err != nil {
			return res, err
		}
		for i, p := range parts {
			if err := catalog.PutReorgRange(txn, &catalog.ReorgRange{Job: job.ID, Part: i, Next: p[0], End: p[1]}); err != nil {
				return res, err
			}
		}
		job.ReorgMode = catalog.ReorgTxn
		if _, ok := e.store.(kv.Importer); ok && importable(job, addingIndexes(nt, job)) {
			job.ReorgMode = catalog.ReorgIngest
		}
		job.ReorgDone, job.RowCount = len(parts) == 0, 0
	case before == catalog.StateWriteReorg:
		// Deleting the shares makes any batch still running for them
		// conflict with this step instead of writing after it.
		ranges, err := catalog.ReorgRanges(ctx, txn, job.ID)
		if err != nil {
			return res, err
		}
		if !job.ReorgDone {
			job.RowCount = 0
			for _, r := range ranges {
				job.RowCount += r.Rows
			}
		}
		for _, r := range ranges {
			if err := catalog.DeleteReorgRange(txn, r); err != nil {
				return res, err
			}
		}
	}
	done := true
	for _, ix := range nt.Changing {
		if slices.Contains(job.Adding, ix.ID) || slices.Contains(job.Dropping, ix.ID) {
			done = false
		}
	}
	if done {
		job.Finished = e.now() / int64(time.Millisecond)
		if job.State == catalog.JobRollingBack {
			job.State = catalog.JobRollbackDone
		} else {
			job.State = catalog.JobSynced
		}
		if err := catalog.FinishJob(txn, job); err != nil {
			return res, err
		}
	} else if err := catalog.PutJob(txn, job); err != nil {
		return res, err
	}
	if err := e.commitStep(ctx, txn); err != nil {
		return res, err
	}
	if done {
		e.notifyJobsDone()
	}
	if len(gone) > 0 {
		e.kickCleanup()
	}
	res.Did = fmt.Sprintf("%s: %s -> %s at version %d", job.Type, before, job.SchemaState, next)
	if done {
		res.Did += " (" + string(job.State) + ")"
	}
	return res, nil
}

// reorgSetting is a backfill setting: the variable name as the job's
// statement saw it (TiDB's tidb_ddl_reorg_worker_cnt and
// tidb_ddl_reorg_batch_size, set on the submitting engine), else def; kept
// within [lo, hi].
func reorgSetting(job *catalog.Job, name string, def, lo, hi int) int {
	if v, ok := job.Vars[name]; ok {
		if n, err := decodeVar(v).ToInt64(); err == nil {
			return int(min(max(n, int64(lo)), int64(hi)))
		}
	}
	return def
}

// splitBackfill divides t's rows into up to workers shares of about equal
// handle ranges (returned as record key ranges; the last ends at the
// table's end, nil), none for an empty table, one for a table of fewer
// than a batch per worker.
func (e *Engine) splitBackfill(ctx context.Context, txn kv.Txn, t *catalog.TableInfo, workers, batch int) ([][2][]byte, error) {
	prefix := tablecodec.RecordPrefix(t.ID)
	end := tablecodec.PrefixEnd(prefix)
	first, err := txn.Scan(ctx, prefix, end, 1, false)
	if err != nil || len(first) == 0 {
		return nil, err
	}
	last, err := txn.Scan(ctx, prefix, end, 1, true)
	if err != nil || len(last) == 0 {
		return nil, err
	}
	_, lo, err := tablecodec.DecodeRecordKey(first[0].Key)
	if err != nil {
		return nil, err
	}
	_, hi, err := tablecodec.DecodeRecordKey(last[0].Key)
	if err != nil {
		return nil, err
	}
	parts := uint64(workers)
	span := uint64(hi) - uint64(lo) // hi >= lo: no overflow as unsigned
	if parts <= 1 || span/parts < uint64(batch) {
		return [][2][]byte{{prefix, nil}}, nil
	}
	out := make([][2][]byte, 0, parts)
	from := prefix
	for i := uint64(1); i < parts; i++ {
		b := tablecodec.RecordKey(t.ID, int64(uint64(lo)+span/parts*i))
		out = append(out, [2][]byte{from, b})
		from = b
	}
	return append(out, [2][]byte{from, nil}), nil
}

// backfillStep runs one batch of each share of a job's backfill that is
// not done, at the same time, each in a transaction of its own that also
// records its share's progress (so a new owner resumes every share where
// it stopped). Once every share is done it records that the backfill is.
// A duplicate in a unique index rolls the job back with the 1062 error.
func (e *Engine) backfillStep(ctx context.Context, queued *catalog.Job) (StepResult, error) {
	res := StepResult{JobID: queued.ID}
	var ranges []*catalog.ReorgRange
	if err := e.readOnly(ctx, func(txn kv.Txn) error {
		var err error
		ranges, err = catalog.ReorgRanges(ctx, txn, queued.ID)
		return err
	}); err != nil {
		return res, err
	}
	var pending []*catalog.ReorgRange
	var total int64
	for _, r := range ranges {
		total += r.Rows
		if !r.Done {
			pending = append(pending, r)
		}
	}
	if len(pending) == 0 {
		return e.finishBackfill(ctx, queued.ID)
	}
	schema := e.schema.Load()
	if schema.Version < queued.Version {
		var err error
		if schema, err = e.loadSchema(ctx); err != nil {
			return res, err
		}
	}
	t := schema.TableByID(queued.TableID)
	if t == nil || t.Revision != queued.Version {
		return res, fmt.Errorf("sql: job %d: table %d is not at the job's version %d", queued.ID, queued.TableID, queued.Version)
	}
	ixs := addingIndexes(t, queued)
	batch := reorgSetting(queued, "tidb_ddl_reorg_batch_size", e.backfillBatch, 1, 10240)
	fill := e.fillShare
	if imp, ok := e.store.(kv.Importer); ok && queued.ReorgMode == catalog.ReorgIngest {
		fill = func(ctx context.Context, job int64, part int, t *catalog.TableInfo, ixs []*catalog.IndexInfo, batch int) (int, error) {
			return e.fillShareImport(ctx, imp, job, part, t, ixs, batch)
		}
	}
	rows := make([]int, len(pending))
	errs := make([]error, len(pending))
	var wg sync.WaitGroup
	for i, r := range pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i], errs[i] = fill(ctx, queued.ID, r.Part, t, ixs, batch)
		}()
	}
	wg.Wait()
	n := 0
	for i, err := range errs {
		var se *sqlerr.Error
		switch {
		case errors.As(err, &se):
			return e.rollBack(ctx, queued.ID, se)
		case err != nil && !kv.IsRetryable(err):
			return res, err
		}
		n += rows[i]
	}
	res.Did = fmt.Sprintf("backfilled %d rows (%d in all)", n, total+int64(n))
	return res, nil
}

// fillShare fills one batch of share part of a job's backfill.
func (e *Engine) fillShare(ctx context.Context, job int64, part int, t *catalog.TableInfo, ixs []*catalog.IndexInfo, batch int) (int, error) {
	return e.fillProgress(ctx, job, part, func(txn kv.Txn, r *catalog.ReorgRange) ([]byte, int, bool, error) {
		ec := &exec.Context{Ctx: ctx, Txn: txn, Mem: exec.NewMemTracker(0)}
		return exec.BackfillBatch(ec, t, ixs, r.Next, r.End, batch)
	})
}

// fillProgress runs fill for share part of a job's backfill in a
// transaction that reads the share's progress record first and writes it
// after, as fill returns it (the key the next fill starts from, the rows
// it read, whether the share is done), and commits. A share that is gone
// or done is not filled.
func (e *Engine) fillProgress(ctx context.Context, job int64, part int, fill func(txn kv.Txn, r *catalog.ReorgRange) ([]byte, int, bool, error)) (int, error) {
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return 0, err
	}
	defer txn.Rollback(ctx)
	r, err := catalog.GetReorgRange(ctx, txn, job, part)
	if err != nil || r == nil || r.Done {
		return 0, err // gone: the job moved on
	}
	next, n, done, err := fill(txn, r)
	if err != nil {
		return 0, err
	}
	r.Next, r.Done = next, done
	r.Rows += int64(n)
	if err := catalog.PutReorgRange(txn, r); err != nil {
		return 0, err
	}
	return n, txn.Commit(ctx)
}

// One run of a share of an ingest-mode backfill (fillShareImport) reads
// at most importRunBatches batches (Options.ImportRunBatches) and ends
// once it holds importRunBytes of index keys and values.
const (
	defaultImportRunBatches = 64
	importRunBytes          = 16 << 20
)

// addingIndexes returns the indexes of t in backfill that job adds.
func addingIndexes(t *catalog.TableInfo, job *catalog.Job) []*catalog.IndexInfo {
	var ixs []*catalog.IndexInfo
	for _, ix := range t.Changing {
		if ix.State == catalog.StateWriteReorg && slices.Contains(job.Adding, ix.ID) {
			ixs = append(ixs, ix)
		}
	}
	return ixs
}

// importable reports whether a job's backfill of ixs runs in ingest mode
// (fillShareImport): tidb_ddl_enable_fast_reorg is on (TiDB's name and
// default) and no index is unique. A unique index's entries go through
// transactions (fillShare), whose conflicts with writers are what makes
// its duplicate check sound; imported entries conflict with nothing.
func importable(job *catalog.Job, ixs []*catalog.IndexInfo) bool {
	if reorgSetting(job, "tidb_ddl_enable_fast_reorg", 1, 0, 1) == 0 {
		return false
	}
	for _, ix := range ixs {
		if ix.Unique {
			return false
		}
	}
	return true
}

// fillShareImport is fillShare in ingest mode: it reads share part's rows
// batch by batch, each batch at a snapshot of its own, for a run of
// importRunBatches batches (fewer if the share ends or the entries reach
// importRunBytes); sorts the entries and
// imports them (kv.Importer), each committed at the timestamp of the
// snapshot its row was read at, without locks or a two-phase commit; then
// records the share's progress in a transaction that began before the
// first read.
//
// An entry at its row's read timestamp is the index as of that snapshot:
// every engine was at least write-only before the backfill began, so any
// transaction that changes the row later writes the row's entries itself
// and commits above that timestamp (a transaction's commit timestamp is
// above every read of its keys' regions that came before its commit), so
// its records hide the imported one; a change committed below it is what
// the read saw. Nothing reads the index below those timestamps: it turns
// public after the backfill. Entries are written again after a crash
// between the import and the progress record (the same records), and a
// progress record that a job step deleted meanwhile makes the commit fail
// as in fillShare; entries imported by such a stale run are for an index
// the job has moved past (correct if it turned public; unread garbage if
// the job rolled back and its entries' range was already destroyed).
//
// Sorted runs are what make it fast: the entries reach the storage engine
// in key order, next to one another, instead of in row order scattered over
// the index, and one record per entry instead of a lock, its removal and
// the commit record.
func (e *Engine) fillShareImport(ctx context.Context, imp kv.Importer, job int64, part int, t *catalog.TableInfo, ixs []*catalog.IndexInfo, batch int) (int, error) {
	return e.fillProgress(ctx, job, part, func(_ kv.Txn, r *catalog.ReorgRange) ([]byte, int, bool, error) {
		var pairs []kv.VersionedKeyValue
		size, rows := 0, 0
		next, done := r.Next, false
		for batches := 0; !done && size < importRunBytes && batches < e.importRunBatches; batches++ {
			read, err := e.store.Begin(ctx, kv.TxnOptions{})
			if err != nil {
				return nil, 0, false, err
			}
			ts := read.StartTS()
			ec := &exec.Context{Ctx: ctx, Txn: read, Mem: exec.NewMemTracker(0)}
			var n int
			next, n, done, err = exec.BackfillEntries(ec, t, ixs, next, r.End, batch,
				func(_ *catalog.IndexInfo, k, v []byte, _ bool, _ int64, _ []types.Datum) error {
					pairs = append(pairs, kv.VersionedKeyValue{Key: k, Value: v, Version: ts})
					size += len(k) + len(v)
					return nil
				})
			read.Rollback(ctx)
			if err != nil {
				return nil, 0, false, err
			}
			rows += n
		}
		slices.SortFunc(pairs, func(a, b kv.VersionedKeyValue) int { return bytes.Compare(a.Key, b.Key) })
		if err := imp.Import(ctx, pairs); err != nil {
			return nil, 0, false, err
		}
		return next, rows, done, nil
	})
}

// finishBackfill records that every share of a job's backfill is done.
func (e *Engine) finishBackfill(ctx context.Context, id int64) (StepResult, error) {
	res := StepResult{JobID: id}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return res, err
	}
	defer txn.Rollback(ctx)
	job, err := catalog.QueuedJob(ctx, txn, id)
	if err != nil || job == nil {
		return res, err
	}
	ranges, err := catalog.ReorgRanges(ctx, txn, id)
	if err != nil {
		return res, err
	}
	job.RowCount = 0
	for _, r := range ranges {
		if !r.Done {
			return res, nil // a share was reset meanwhile
		}
		job.RowCount += r.Rows
	}
	job.ReorgDone = true
	if err := catalog.PutJob(txn, job); err != nil {
		return res, err
	}
	if err := txn.Commit(ctx); err != nil {
		return res, err
	}
	res.Did = fmt.Sprintf("backfill done (%d rows)", job.RowCount)
	return res, nil
}

// rollBack turns a running job into one rolling back with cause.
func (e *Engine) rollBack(ctx context.Context, id int64, cause error) (StepResult, error) {
	res := StepResult{JobID: id}
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return res, err
	}
	defer txn.Rollback(ctx)
	job, err := catalog.QueuedJob(ctx, txn, id)
	if err != nil || job == nil {
		return res, err
	}
	job.State, job.Error = catalog.JobRollingBack, jobError(cause)
	if err := catalog.PutJob(txn, job); err != nil {
		return res, err
	}
	if err := txn.Commit(ctx); err != nil {
		return res, err
	}
	res.Did = "rolling back: " + job.Error.Message
	return res, nil
}

// revisionTxn is the transaction of the step applying a job's statement
// as the statement's code sees it: every table definition it stores gets
// the new schema version as its Revision (and no write barrier), and is
// remembered for the job.
type revisionTxn struct {
	kv.Txn
	version int64
	tables  map[int64]*catalog.TableInfo
	err     error
}

func (t *revisionTxn) Set(key, value []byte) error {
	if !catalog.IsTableKey(key) {
		return t.Txn.Set(key, value)
	}
	var ti catalog.TableInfo
	if err := json.Unmarshal(value, &ti); err != nil {
		t.err = err
		return t.Txn.Set(key, value)
	}
	ti.Revision, ti.WriteBarrier = t.version, false
	b, err := json.Marshal(&ti)
	if err != nil {
		return err
	}
	if t.tables == nil {
		t.tables = map[int64]*catalog.TableInfo{}
	}
	t.tables[ti.ID] = &ti
	return t.Txn.Set(key, b)
}
