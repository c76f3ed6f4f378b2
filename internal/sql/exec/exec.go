// Package exec runs plans built by package plan against a kv.Txn.
//
// Executors form a pull-based tree; Next returns a batch (a vector of rows,
// up to BatchSize) and nil at the end. Rows of one batch are freshly
// allocated and may be retained by the consumer.
//
// Contract with package sql (the session): the caller owns the transaction.
// Reads go to Context.Txn. Writes of a statement are staged in
// Context.Writes (a StmtBuffer) and reach the transaction only when the
// caller calls Flush after the statement succeeded, which makes every
// statement atomic inside a transaction; reads of the statement itself do
// not see its own staged writes (no Halloween problem), uniqueness checks do.
// Every statement has a memory quota (Context.Mem); exceeding it fails the
// statement with sqlerr.ErMemoryExceeded.
package exec

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/expr"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// BatchSize is the number of rows executors try to return per Next.
const BatchSize = 1024

// DefaultMemQuota is the per-statement memory quota (1 GiB).
const DefaultMemQuota = 1 << 30

// IDAllocator hands out AUTO_INCREMENT values and hidden row handles.
type IDAllocator interface {
	// Alloc returns a fresh id for the table.
	Alloc(ctx context.Context, t *catalog.TableInfo) (int64, error)
	// Rebase makes later Alloc calls return values above v.
	Rebase(ctx context.Context, t *catalog.TableInfo, v int64) error
}

// Context is the state of one statement execution.
type Context struct {
	Ctx    context.Context
	Txn    kv.Txn
	Writes *StmtBuffer
	Eval   *expr.EvalContext
	IDs    IDAllocator
	Mem    *MemTracker

	// TmpDir is where operators past the memory quota spill rows (empty:
	// os.TempDir); NoSpill makes them fail with 8175 instead
	// (tidb_enable_tmp_storage_on_oom = OFF). See spill.go.
	TmpDir  string
	NoSpill bool
	// Concurrency is how many goroutines a hash aggregation or hash join
	// over a large input may use (tidb_executor_concurrency; <= 1:
	// serial). See parallel.go.
	Concurrency int
	tmp         tmpFiles
	// NoVec makes every operator evaluate its expressions row by row
	// (tidb_enable_vectorized_expression = OFF): vecbatch.go.
	NoVec bool

	// DeferDupCheck lets a single-row INSERT leave the primary key's
	// uniqueness check to the commit (kv.Inserter) instead of reading the
	// key first. The session sets it only for a statement that is its own
	// transaction with nothing written before it, so no other statement
	// can read the row before the commit has checked it; the commit's
	// *kv.KeyExistsError then becomes the statement's 1062 through
	// DeferredDup.
	DeferDupCheck bool
	// DeferredDup is the duplicate-key error the statement reports if the
	// commit finds its deferred key taken.
	DeferredDup *DeferredDup

	// Schema is the statement's schema (for foreign keys); FKChecks is
	// foreign_key_checks.
	Schema   *catalog.Schema
	FKChecks bool
	// NonStrict: sql_mode is not strict; a value given for a generated
	// column is then ignored with a warning (as MariaDB does, which lets
	// its mysqldump's output load) instead of failing the statement.
	NonStrict bool
	// FoundRows: the client asked for CLIENT_FOUND_ROWS, so UPDATE (and
	// INSERT ... ON DUPLICATE KEY UPDATE) count the rows they matched,
	// changed or not.
	FoundRows bool
	// CopConcurrency is how many coprocessor requests a plan.CopRead
	// keeps in flight (tidb_distsql_scan_concurrency); 0 runs its
	// fallback instead (strata_enable_coprocessor = OFF).
	CopConcurrency int
	// MaxRecursion bounds a recursive CTE's rounds
	// (cte_max_recursion_depth; <= 0: DefaultMaxRecursion).
	MaxRecursion int

	// Results of a DML statement.
	AffectedRows uint64
	LastInsertID uint64
	// ExplicitInsertID is the first value given explicitly to an
	// AUTO_INCREMENT column: the OK packet reports it when nothing was
	// generated.
	ExplicitInsertID uint64
}

// DeferredDup describes the key of a deferred uniqueness check.
type DeferredDup struct {
	Key []byte
	w   *writer
	val types.Datum
}

// Err is the statement's error when the commit failed with err: the 1062
// error for the deferred key when err says the key exists, otherwise err.
func (d *DeferredDup) Err(err error) error {
	var ke *kv.KeyExistsError
	if d == nil || !errors.As(err, &ke) || !bytes.Equal(ke.Key, d.Key) {
		return err
	}
	return d.w.dupErr([]types.Datum{d.val}, "PRIMARY")
}

// Executor produces rows in batches.
type Executor interface {
	// Next returns the next batch, or nil at the end.
	Next(c *Context) ([][]types.Datum, error)
}

// MemTracker accounts the memory a statement holds in rows. It is safe
// for concurrent use (parallel operators charge it from their workers).
type MemTracker struct {
	Limit int64
	used  atomic.Int64
}

// NewMemTracker returns a tracker with the given quota (<= 0: default).
func NewMemTracker(limit int64) *MemTracker {
	if limit <= 0 {
		limit = DefaultMemQuota
	}
	return &MemTracker{Limit: limit}
}

// Consume charges n bytes and fails once the quota is exceeded.
func (m *MemTracker) Consume(n int64) error {
	if m == nil {
		return nil
	}
	if !m.charge(n) {
		return m.overErr()
	}
	return nil
}

// charge adds n bytes and reports whether the statement is still within
// its quota.
func (m *MemTracker) charge(n int64) bool {
	if m == nil {
		return true
	}
	return m.used.Add(n) <= m.Limit
}

func (m *MemTracker) overErr() error {
	return sqlerr.New(sqlerr.ErMemoryExceeded, "HY000", "Out Of Memory Quota! quota %d bytes exceeded by the statement", m.Limit)
}

// Used is the number of bytes charged now.
func (m *MemTracker) Used() int64 {
	if m == nil {
		return 0
	}
	return m.used.Load()
}

func (m *MemTracker) usedNow() int64 { return m.Used() }

// restore gives back everything charged since Used was used.
func (m *MemTracker) restore(used int64) {
	if m != nil && m.used.Load() > used {
		m.used.Store(used)
	}
}

// Release returns n bytes to the quota.
func (m *MemTracker) Release(n int64) {
	if m != nil {
		m.used.Add(-n)
	}
}

// RowSize estimates the bytes a row holds.
func RowSize(row []types.Datum) int64 {
	n := int64(24 + 40*len(row))
	for _, d := range row {
		n += int64(len(d.Bytes()))
	}
	return n
}

// BindSubqueries prepares the subqueries of a plan for one execution.
func BindSubqueries(c *Context, subs []*plan.Subquery) { bindSubqueries(c, subs, nil) }

// BindSubqueriesAnalyzed is BindSubqueries with the subqueries' operators
// measured into an (a correlated subquery's over all its runs).
func BindSubqueriesAnalyzed(c *Context, subs []*plan.Subquery, an *Analysis) {
	bindSubqueries(c, subs, an)
}

func bindSubqueries(c *Context, subs []*plan.Subquery, an *Analysis) {
	for _, sq := range subs {
		sq := sq
		sq.Reset()
		sq.Run = func() ([][]types.Datum, error) {
			e, err := build(sq.Plan, an)
			if err != nil {
				return nil, err
			}
			if !sq.Correlated {
				// Run once and kept for the statement: its memory stays
				// charged.
				return Drain(c, e, sq.Kind == plan.ExistsSubquery)
			}
			// A correlated subquery runs once per outer row, and its
			// rows are used up by the time the next run starts: what one
			// run holds is charged while it runs and given back after,
			// so the statement's memory stays bounded by one run, not
			// their sum.
			used := c.Mem.usedNow()
			rows, err := Drain(c, e, sq.Kind == plan.ExistsSubquery)
			c.Mem.restore(used)
			return rows, err
		}
	}
}

// Drain runs an executor to the end and returns all rows (the first row
// only when firstOnly).
func Drain(c *Context, e Executor, firstOnly bool) ([][]types.Datum, error) {
	var out [][]types.Datum
	for {
		if err := c.Ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := e.Next(c)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			return out, nil
		}
		for _, r := range batch {
			if err := c.Mem.Consume(RowSize(r)); err != nil {
				return nil, err
			}
		}
		out = append(out, batch...)
		if firstOnly && len(out) > 0 {
			return out[:1], nil
		}
	}
}

// Query builds and runs a read plan and returns its rows.
func Query(c *Context, p plan.Plan) ([][]types.Datum, error) {
	e, err := Build(p)
	if err != nil {
		return nil, err
	}
	return Drain(c, e, false)
}

// Build turns a plan tree into executors.
func Build(p plan.Plan) (Executor, error) { return build(p, nil) }

// build builds p's executors, each measured when an is not nil.
func build(p plan.Plan, an *Analysis) (Executor, error) {
	e, err := buildNode(p, an)
	if err != nil || an == nil {
		return e, err
	}
	// A plan built again (a correlated subquery's, once per outer row)
	// adds its runs to the same measurements.
	st := an.ops[p]
	if st == nil {
		st = &opMeasure{}
		an.ops[p] = st
	}
	st.setExec(e)
	return &analyzeExec{inner: e, m: st}, nil
}

func buildNode(p plan.Plan, an *Analysis) (Executor, error) {
	switch n := p.(type) {
	case *plan.Scan:
		return newScanExec(n), nil
	case *plan.CopRead:
		return &copExec{p: n}, nil
	case *plan.Dual:
		return &dualExec{}, nil
	case *plan.Values:
		if n.Fetch != nil {
			return &valuesExec{rows: n.Fetch()}, nil
		}
		return &valuesExec{rows: n.Rows}, nil
	case *plan.CTEScan:
		return &valuesExec{rows: n.Work.Rows}, nil
	case *plan.RecursiveCTE:
		return &recursiveCTEExec{p: n}, nil
	case *plan.Filter:
		child, err := build(n.Child, an)
		if err != nil {
			return nil, err
		}
		f := &filterExec{child: child, cond: n.Cond}
		if n.ByRange {
			if s := scanUnder(unwrap(child)); s != nil && s.p.Access == plan.TableRangeScan {
				f.byRange = s
			}
		}
		return f, nil
	case *plan.Projection:
		child, err := build(n.Child, an)
		if err != nil {
			return nil, err
		}
		return &projectionExec{child: child, exprs: n.Exprs}, nil
	case *plan.Aggregate:
		child, err := build(n.Child, an)
		if err != nil {
			return nil, err
		}
		return &aggExec{child: child, p: n}, nil
	case *plan.Window:
		child, err := build(n.Child, an)
		if err != nil {
			return nil, err
		}
		return &windowExec{child: child, p: n}, nil
	case *plan.Sort:
		if d, ok := n.Child.(*plan.Distinct); ok && keysAmong(n.Keys, d.N) {
			// DISTINCT then ORDER BY some of the distinct columns: one
			// sort that drops duplicates (sortExec.dedupe), no hash set.
			child, err := build(d.Child, an)
			if err != nil {
				return nil, err
			}
			s := newSortExec(child, n.Keys)
			s.distinct = d.N
			s.dcolls = columnCollations(d.Columns()[:d.N])
			return s, nil
		}
		child, err := build(n.Child, an)
		if err != nil {
			return nil, err
		}
		return newSortExec(child, n.Keys), nil
	case *plan.Limit:
		child, err := build(n.Child, an)
		if err != nil {
			return nil, err
		}
		if s, ok := unwrap(child).(*sortExec); ok {
			s.limit = n // top-N: keep only offset+count rows while sorting
		}
		return &limitExec{child: child, p: n}, nil
	case *plan.Distinct:
		child, err := build(n.Child, an)
		if err != nil {
			return nil, err
		}
		return &distinctExec{child: child, n: n.N, colls: columnCollations(n.Columns()[:n.N])}, nil
	case *plan.Join:
		l, err := build(n.Left, an)
		if err != nil {
			return nil, err
		}
		r, err := build(n.Right, an)
		if err != nil {
			return nil, err
		}
		var colls []*collate.Collation
		for i := range n.LeftKeys {
			if c := expr.PairCollation(n.LeftKeys[i], n.RightKey[i]); c != nil {
				if colls == nil {
					colls = make([]*collate.Collation, len(n.LeftKeys))
				}
				colls[i] = c
			}
		}
		if n.LookupIndex != nil {
			// Reads its right side through the index itself (r stays
			// unused, as for a join by handle).
			return newIndexJoinExec(l, n, colls), nil
		}
		return &joinExec{left: l, right: r, p: n, rightWidth: len(n.Right.Columns()), colls: colls}, nil
	case *plan.SetOp:
		l, err := build(n.Left, an)
		if err != nil {
			return nil, err
		}
		r, err := build(n.Right, an)
		if err != nil {
			return nil, err
		}
		return &setOpExec{left: l, right: r, p: n}, nil
	}
	return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support '%s'", strings.Fields(p.Explain())[0])
}

// keysAmong reports whether every sort key is one of the first n columns.
func keysAmong(keys []plan.SortKey, n int) bool {
	for _, k := range keys {
		if i, ok := expr.ColumnIndex(k.Expr); !ok || i >= n {
			return false
		}
	}
	return true
}

type dualExec struct{ done bool }

func (d *dualExec) Next(*Context) ([][]types.Datum, error) {
	if d.done {
		return nil, nil
	}
	d.done = true
	return [][]types.Datum{{}}, nil
}
