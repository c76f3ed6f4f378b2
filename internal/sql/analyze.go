package sql

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axiomhq/hyperloglog"
	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/collate"
	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// ANALYZE TABLE (MySQL 8's statement and result set): for each table, one
// full scan at a snapshot of its own counts the rows and, per column, the
// NULLs and the distinct values (a HyperLogLog sketch, so memory stays
// bounded whatever the table's size), and per index the distinct prefixes
// of its columns. The statistics are stored through the transactional KV
// path (catalog.PutStats) under a new statistics version; every engine
// loads them when it sees the version move (Tick), so the planner of every
// node uses them (plan/cost.go).

// refreshStats installs the statistics visible to txn when their version
// is newer than the engine's.
func (e *Engine) refreshStats(ctx context.Context, txn kv.Txn) error {
	ver, err := catalog.StatsVersion(ctx, txn)
	if err != nil {
		return err
	}
	if cur := e.stats.Load(); cur != nil && ver <= cur.Version {
		return nil
	}
	st, err := catalog.LoadStats(ctx, txn)
	if err != nil {
		return err
	}
	for {
		cur := e.stats.Load()
		if cur != nil && cur.Version >= st.Version {
			return nil
		}
		if e.stats.CompareAndSwap(cur, st) {
			return nil
		}
	}
}

// runAnalyze answers ANALYZE TABLE t [, t2 ...] with MySQL's result set:
// per table a row (Table, Op, Msg_type, Msg_text); a table that cannot be
// analyzed gets an Error row and "Operation failed", the others are still
// analyzed (as in MySQL).
func (s *Session) runAnalyze(ctx context.Context, n *ast.AnalyzeTableStmt) (*Result, error) {
	if len(n.PartitionNames) > 0 || n.IndexFlag || len(n.IndexNames) > 0 || len(n.ColumnNames) > 0 || n.HistogramOperation != ast.HistogramOperationNop {
		return nil, notSupported("ANALYZE TABLE with options")
	}
	// ANALYZE TABLE commits the open transaction, as in MySQL.
	if s.txn != nil {
		if err := s.finish(ctx, true); err != nil {
			return nil, err
		}
	}
	schema, err := s.currentSchema(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: textColumns("Table", "Op", "Msg_type", "Msg_text")}
	for _, tn := range n.TableNames {
		db, err := s.dbName(tn.Schema.O)
		if err != nil {
			return nil, err
		}
		name := db + "." + tn.Name.O
		fail := func(msg string) {
			res.Rows = append(res.Rows, textRow(name, "analyze", "Error", msg), textRow(name, "analyze", "status", "Operation failed"))
		}
		if s.tempIndex(tn) >= 0 {
			res.Rows = append(res.Rows, textRow(name, "analyze", "note", "The storage engine for the table doesn't support analyze"))
			continue
		}
		t := schema.Table(db, tn.Name.O)
		switch {
		case t == nil:
			fail(fmt.Sprintf("Table '%s' doesn't exist", name))
			continue
		case t.IsView():
			fail(fmt.Sprintf("'%s' is not BASE TABLE", name))
			continue
		}
		if err := s.analyzeTable(ctx, db, t); err != nil {
			if ctx.Err() != nil {
				return nil, interruptedError(context.Cause(ctx))
			}
			var se *sqlerr.Error
			if !errors.As(err, &se) {
				return nil, err
			}
			fail(se.Msg)
			continue
		}
		res.Rows = append(res.Rows, textRow(name, "analyze", "status", "OK"))
	}
	// The statistics this session stored are in force for its next
	// statement (other engines load them at their next poll).
	if err := s.e.readOnly(ctx, func(txn kv.Txn) error { return s.e.refreshStats(ctx, txn) }); err != nil {
		return nil, err
	}
	return res, nil
}

// analyzeTable collects and stores the statistics of t.
func (s *Session) analyzeTable(ctx context.Context, db string, t *catalog.TableInfo) error {
	name := t.Name
	txn, err := s.e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	defer txn.Rollback(ctx)
	// The table as it is at the scan's snapshot.
	ver, err := catalog.Version(ctx, txn)
	if err != nil {
		return err
	}
	schema, err := s.e.schemaFor(ctx, txn, ver)
	if err != nil {
		return err
	}
	if t = schema.TableByID(t.ID); t == nil {
		return noSuchTable(db, name)
	}
	st, err := s.collectStats(ctx, txn, schema, db, t)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		w, err := s.e.store.Begin(ctx, kv.TxnOptions{})
		if err != nil {
			return err
		}
		if _, err = catalog.PutStats(ctx, w, st); err == nil {
			err = w.Commit(ctx)
		} else {
			w.Rollback(ctx)
		}
		if err == nil || !kv.IsRetryable(err) || attempt >= 10 {
			return err
		}
	}
}

// collectStats scans t at txn's snapshot.
func (s *Session) collectStats(ctx context.Context, txn kv.Txn, schema *catalog.Schema, db string, t *catalog.TableInfo) (*catalog.TableStats, error) {
	stmts, err := parseSQL(s.parser, "SELECT * FROM "+quoteName(db)+"."+quoteName(t.Name))
	if err != nil {
		return nil, err
	}
	b := plan.NewBuilder(schema, db)
	b.NoCoprocessor = s.copConcurrency() == 0
	p, err := b.BuildQuery(stmts[0].(*ast.SelectStmt))
	if err != nil {
		return nil, err
	}
	if len(p.Columns()) != len(t.Columns) {
		return nil, fmt.Errorf("sql: ANALYZE TABLE %s read %d columns of %d", t.Name, len(p.Columns()), len(t.Columns))
	}
	set := s.execSettings()
	ec := &exec.Context{
		Ctx: ctx, Txn: txn, Eval: s.evalContext(nil), IDs: s.e.ids,
		Mem: exec.NewMemTracker(set.quota), TmpDir: s.e.tmpDir, NoSpill: !set.spill, Concurrency: set.concurrency, MaxRecursion: set.recursion, NoVec: set.noVec,
		Schema: schema, CopConcurrency: s.copConcurrency(),
	}
	ec.Eval.Ctx = ctx
	defer ec.Close()
	e, err := exec.Build(p)
	if err != nil {
		return nil, err
	}
	c := newStatsCollector(t)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := e.Next(ec)
		if err != nil {
			return nil, err
		}
		if batch == nil {
			break
		}
		for _, row := range batch {
			c.add(row)
		}
	}
	st := c.result()
	st.Snapshot = txn.StartTS()
	st.Analyzed = time.Now().Unix()
	return st, nil
}

// statsCollector counts what ANALYZE TABLE stores, one row at a time.
type statsCollector struct {
	t     *catalog.TableInfo
	rows  int64
	colls []*collate.Collation
	ndv   []*hyperloglog.Sketch // per column
	nulls []int64
	// ranges hold the least and greatest values of the columns with
	// values on a linear scale.
	ranges []catalog.ColumnStats
	ix     [][]*hyperloglog.Sketch // per index, per prefix
	key    []byte
}

func newStatsCollector(t *catalog.TableInfo) *statsCollector {
	c := &statsCollector{t: t, colls: make([]*collate.Collation, len(t.Columns)), ndv: make([]*hyperloglog.Sketch, len(t.Columns)),
		nulls: make([]int64, len(t.Columns)), ranges: make([]catalog.ColumnStats, len(t.Columns)), ix: make([][]*hyperloglog.Sketch, len(t.Indexes))}
	for i, col := range t.Columns {
		c.colls[i] = collate.Lookup(col.Type.GetCollate())
		c.ndv[i] = hyperloglog.New16()
	}
	for i, ix := range t.Indexes {
		c.ix[i] = make([]*hyperloglog.Sketch, len(ix.Columns))
		for k := range ix.Columns {
			c.ix[i][k] = hyperloglog.New16()
		}
	}
	return c
}

func (c *statsCollector) add(row []types.Datum) {
	c.rows++
	for i, d := range row {
		if d.IsNull() {
			c.nulls[i]++
			continue
		}
		c.key = d.AppendHashKeyCollated(c.key[:0], c.colls[i])
		c.ndv[i].Insert(c.key)
		if v, ok := plan.StatPos(d); ok {
			r := &c.ranges[i]
			if !r.HasRange {
				r.HasRange, r.Min, r.Max = true, v, v
			} else {
				r.Min, r.Max = min(r.Min, v), max(r.Max, v)
			}
		}
	}
	for i, ix := range c.t.Indexes {
		c.key = c.key[:0]
		for k, off := range ix.Columns {
			// A NULL is a value of its own in an index prefix (InnoDB's
			// nulls_equal counting).
			c.key = row[off].AppendHashKeyCollated(c.key, c.colls[off])
			c.ix[i][k].Insert(c.key)
		}
	}
}

func (c *statsCollector) result() *catalog.TableStats {
	st := &catalog.TableStats{TableID: c.t.ID, Rows: c.rows, Columns: map[int64]*catalog.ColumnStats{}, Indexes: map[int64][]int64{}}
	for i, col := range c.t.Columns {
		// The sketch's estimate may pass the count of non-NULL values
		// by its error: a column cannot have more.
		ndv := min(int64(c.ndv[i].Estimate()), c.rows-c.nulls[i])
		r := c.ranges[i]
		st.Columns[col.ID] = &catalog.ColumnStats{NDV: ndv, Nulls: c.nulls[i], HasRange: r.HasRange, Min: r.Min, Max: r.Max}
	}
	for i, ix := range c.t.Indexes {
		card := make([]int64, len(ix.Columns))
		for k := range ix.Columns {
			card[k] = min(int64(c.ix[i][k].Estimate()), c.rows)
			if ix.Unique && k == len(ix.Columns)-1 && card[k] > 0 {
				// Every row has its own entry (NULLs aside).
				card[k] = c.rows
			}
		}
		st.Indexes[ix.ID] = card
	}
	return st
}
