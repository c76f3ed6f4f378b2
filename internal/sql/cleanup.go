package sql

import (
	"context"
	"log/slog"
	"time"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
)

// The data of dropped tables and indexes (DROP TABLE, TRUNCATE, DROP
// INDEX, DROP DATABASE) is destroyed the way TiDB does it: not row by row
// in transactions, which compete with the workload for the same regions
// and leave a tombstone per row, but as key ranges deleted outside MVCC
// (kv.RangeDestroyer, TiKV's UnsafeDestroyRange), one Raft proposal per
// region, once no transaction can read them any more.
//
// A DDL records a catalog.GCJob for each range in its own transaction. A
// cleanup pass reads the jobs in a transaction; a job it sees for the
// first time gets NotBefore = that transaction's start timestamp, which is
// above the DDL's commit timestamp since the job was visible to it. A job
// whose NotBefore is at or below the GC safe point is destroyed and then
// removed from the catalog: every transaction that could still see the
// dropped table started before the drop committed, hence below the safe
// point, and such transactions can neither read (kv.ErrTxnTooOld) nor
// prewrite any more; every lock at or below the safe point of a finished
// transaction has been resolved before the safe point was published (see
// SafePointSource), so no commit record destroyed with the range is still
// needed by a lock elsewhere.
//
// Passes run every CleanupInterval and when a DDL drops data, one at a
// time; jobs are persistent, so a restart resumes them, and destroying a
// range twice is harmless. With MVCC GC disabled the safe point does not
// move, and nothing is destroyed.

// defaultCleanupInterval is how often the engine looks for dropped data.
const defaultCleanupInterval = 5 * time.Second

// SafePointSource tells the SQL engine how far MVCC garbage collection has
// gone. The node implements it over the placement driver.
type SafePointSource interface {
	// GCSafePoint returns the GC safe point: no transaction reads or
	// prewrites at or below it, and the locks of every finished
	// transaction that started at or below it are resolved. It never goes
	// back.
	GCSafePoint(ctx context.Context) (uint64, error)
}

// CleanupPass is what one pass over the dropped data did.
type CleanupPass struct {
	Pending   int    // jobs recorded when the pass began
	Marked    int    // jobs seen for the first time: NotBefore recorded
	Destroyed int    // jobs whose range was destroyed and which were removed
	SafePoint uint64 // the safe point the pass destroyed at
}

// DestroyDroppedData runs one cleanup pass now (the background loop runs
// one every CleanupInterval): it records NotBefore for new jobs, and
// destroys and removes the jobs the GC safe point has passed. Without a
// SafePointSource it does nothing.
func (e *Engine) DestroyDroppedData(ctx context.Context) (CleanupPass, error) {
	var pass CleanupPass
	if e.safePoint == nil {
		return pass, nil
	}
	e.cleanupMu.Lock()
	defer e.cleanupMu.Unlock()
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return pass, err
	}
	jobs, err := catalog.GCJobs(ctx, txn)
	if err == nil {
		for _, j := range jobs {
			if j.NotBefore != 0 {
				continue
			}
			j.NotBefore = txn.StartTS()
			if err = catalog.PutGCJob(txn, j); err != nil {
				break
			}
			pass.Marked++
		}
	}
	if err == nil && pass.Marked > 0 {
		err = txn.Commit(ctx)
	} else {
		txn.Rollback(ctx)
	}
	if err != nil {
		// A conflict means another node's pass marked the jobs first; the
		// next pass reads its marks.
		return CleanupPass{}, err
	}
	pass.Pending = len(jobs)
	if len(jobs) == 0 {
		return pass, nil
	}
	if pass.SafePoint, err = e.safePoint.GCSafePoint(ctx); err != nil {
		return pass, err
	}
	for _, j := range jobs {
		if j.NotBefore > pass.SafePoint {
			continue
		}
		if err := e.destroyer.DestroyRange(ctx, j.Start, j.End, pass.SafePoint); err != nil {
			return pass, err
		}
		// Removed only once destroyed: a crash in between destroys the
		// range again at the next pass.
		if err := e.finishGCJob(ctx, j.ID); err != nil {
			return pass, err
		}
		pass.Destroyed++
	}
	return pass, nil
}

func (e *Engine) finishGCJob(ctx context.Context, id int64) error {
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	if err := catalog.FinishGCJob(txn, id); err != nil {
		txn.Rollback(ctx)
		return err
	}
	return txn.Commit(ctx)
}

// kickCleanup wakes the cleanup loop after a DDL recorded jobs, so that
// their NotBefore is close to the drop.
func (e *Engine) kickCleanup() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// cleanupLoop runs a pass at once (jobs left by a restart), then every
// interval and after every DDL, until Close.
func (e *Engine) cleanupLoop(interval time.Duration) {
	defer e.gcDone.Done()
	defer func() {
		// The storage may be closed under a pass still running when its
		// owner did not call Close first; the jobs stay recorded and
		// resume at the next start, so stop quietly instead of taking the
		// process down.
		if r := recover(); r != nil {
			slog.Error("sql: cleanup of dropped data stopped; it resumes at the next start", "panic", r)
		}
	}()
	ctx := e.gcCtx
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pass, err := e.DestroyDroppedData(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !kv.IsRetryable(err):
			slog.Warn("sql: cleanup of dropped data failed; retrying later", "err", err)
		case pass.Destroyed > 0:
			slog.Info("sql: destroyed dropped data", "ranges", pass.Destroyed, "safe_point", pass.SafePoint,
				"pending", pass.Pending-pass.Destroyed)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.kick:
		}
	}
}
