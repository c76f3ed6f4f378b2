package sql

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// A DDL statement as a job: the session submits it to the queue in KV and
// waits for the DDL owner (ddl_owner.go) to finish it, then for every live
// engine to settle on the schema version it ended at, so that once the
// statement returns no engine can commit under the schema before it. The
// data of dropped tables and indexes is destroyed in the background once
// the GC safe point passes the drop (catalog.GCJob, cleanup.go).

// runDDL commits any open transaction (MySQL's implicit commit), runs the
// statement as a DDL job and waits for it.
func (s *Session) runDDL(ctx context.Context, st ast.StmtNode) (*Result, error) {
	if s.explicit && s.readOnly {
		return nil, sqlerr.New(1792, "25006", "Cannot execute statement in a READ ONLY transaction.")
	}
	if r, ok, err := s.tempDDL(ctx, st); ok {
		return r, err // a temporary table: the session's own, no job
	}
	if s.txn != nil {
		if err := s.finish(ctx, true); err != nil {
			return nil, err
		}
	}
	job := s.newJob(st)
	id, err := s.e.submitJob(ctx, job)
	if err != nil {
		return nil, err
	}
	done, err := s.e.waitJob(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, w := range done.Warnings {
		s.warnings = append(s.warnings, sqlerr.New(w.Code, w.State, "%s", w.Message))
	}
	if done.Error != nil {
		return nil, sqlerr.New(done.Error.Code, done.Error.State, "%s", done.Error.Message)
	}
	if done.Version > 0 {
		if err := s.e.waitSettled(ctx, done.Version); err != nil {
			return nil, err
		}
	}
	if s.db != "" && s.e.schema.Load().DB(s.db) == nil {
		s.db = "" // the current database was dropped
	}
	if ct, ok := st.(*ast.CreateTableStmt); ok {
		s.preSplit(ctx, ct)
	}
	return &Result{}, nil
}

// newJob describes st as a job of this session.
func (s *Session) newJob(st ast.StmtNode) *catalog.Job {
	// The owner applies the statement as restored from its syntax tree,
	// which may differ from the text (DROP TABLE leaves out the session's
	// temporary tables).
	var sb strings.Builder
	restored := ""
	if err := st.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &sb)); err == nil {
		restored = sb.String()
	}
	q := st.Text()
	if q == "" {
		q = restored
	}
	j := &catalog.Job{Type: ddlJobType(st), Query: q, Stmt: restored, DB: s.db, State: catalog.JobQueueing,
		SchemaState: catalog.StateAbsent, Barrier: needsBarrier(st)}
	// The variables the statement sees here (this engine's globals, then
	// the session's), since the owner may be another engine.
	j.Vars = map[string]string{}
	s.e.mu.Lock()
	for k, v := range s.e.globalVars {
		j.Vars[k] = encodeVar(v)
	}
	s.e.mu.Unlock()
	for k, v := range s.vars {
		j.Vars[k] = encodeVar(v)
	}
	var tn *ast.TableName
	switch n := st.(type) {
	case *ast.CreateDatabaseStmt:
		j.SchemaName = n.Name.O
	case *ast.DropDatabaseStmt:
		j.SchemaName = n.Name.O
	case *ast.CreateTableStmt:
		tn = n.Table
	case *ast.DropTableStmt:
		if len(n.Tables) > 0 {
			tn = n.Tables[0]
		}
	case *ast.TruncateTableStmt:
		tn = n.Table
	case *ast.CreateViewStmt:
		tn = n.ViewName
	case *ast.CreateIndexStmt:
		tn = n.Table
	case *ast.DropIndexStmt:
		tn = n.Table
	case *ast.AlterTableStmt:
		tn = n.Table
	case *ast.RenameTableStmt:
		if len(n.TableToTables) > 0 {
			tn = n.TableToTables[0].OldTable
		}
	}
	if tn != nil {
		j.SchemaName, j.TableName = tn.Schema.O, tn.Name.O
		if j.SchemaName == "" {
			j.SchemaName = s.db
		}
	}
	return j
}

// ddlJobType names a statement's job as TiDB's ADMIN SHOW DDL JOBS does.
func ddlJobType(st ast.StmtNode) string {
	switch n := st.(type) {
	case *ast.CreateDatabaseStmt:
		return "create schema"
	case *ast.DropDatabaseStmt:
		return "drop schema"
	case *ast.CreateTableStmt:
		return "create table"
	case *ast.DropTableStmt:
		if n.IsView {
			return "drop view"
		}
		return "drop table"
	case *ast.TruncateTableStmt:
		return "truncate table"
	case *ast.CreateViewStmt:
		return "create view"
	case *ast.CreateIndexStmt:
		return "add index"
	case *ast.DropIndexStmt:
		return "drop index"
	case *ast.RenameTableStmt:
		if len(n.TableToTables) > 1 {
			return "rename tables"
		}
		return "rename table"
	case *ast.AlterTableStmt:
		var kinds []string
		for _, spec := range n.Specs {
			k := "alter table"
			switch spec.Tp {
			case ast.AlterTableAddConstraint:
				k = "add index"
				if spec.Constraint != nil && spec.Constraint.Tp == ast.ConstraintPrimaryKey {
					k = "add primary key"
				}
			case ast.AlterTableDropIndex:
				k = "drop index"
			case ast.AlterTableAddColumns:
				k = "add column"
			case ast.AlterTableDropColumn:
				k = "drop column"
			case ast.AlterTableOption:
				continue
			}
			if len(kinds) == 0 || kinds[len(kinds)-1] != k {
				kinds = append(kinds, k)
			}
		}
		switch len(kinds) {
		case 0:
			return "alter table"
		case 1:
			return kinds[0]
		}
		return "alter table multi-schema change"
	}
	return "ddl"
}

// needsBarrier reports whether st changes a table in a way that a writer
// one schema version behind would get wrong, so that its job must stop
// writes to the table before applying it: its columns (a row rewritten
// without a column just added, a value encoded as the old type) or its
// constraints (rows written unchecked). Indexes have states of their own;
// names, comments and dropped constraints are safe in one step.
func needsBarrier(st ast.StmtNode) bool {
	n, ok := st.(*ast.AlterTableStmt)
	if !ok {
		return false
	}
	for _, spec := range n.Specs {
		switch spec.Tp {
		case ast.AlterTableOption, ast.AlterTableDropIndex, ast.AlterTableRenameTable, ast.AlterTableRenameIndex,
			ast.AlterTableRenameColumn, ast.AlterTableDropForeignKey, ast.AlterTableAlterColumn,
			ast.AlterTableEnableKeys, ast.AlterTableDisableKeys:
		case ast.AlterTableAddConstraint:
			switch spec.Constraint.Tp {
			case ast.ConstraintKey, ast.ConstraintIndex, ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
			default:
				return true
			}
		default:
			return true
		}
	}
	return false
}

// startIndexAdd turns an index just added to t's public indexes (by
// addIndex) into one being added: delete-only, in t.Changing. The DDL job
// moves it on to public once its backfill is done.
func startIndexAdd(t *catalog.TableInfo, ix *catalog.IndexInfo) {
	for i, x := range t.Indexes {
		if x == ix {
			t.Indexes = append(t.Indexes[:i], t.Indexes[i+1:]...)
			break
		}
	}
	ix.State = catalog.StateDeleteOnly
	t.Changing = append(t.Changing, ix)
}

// startIndexDrop turns the public index named name into one being dropped:
// write-only, in t.Changing. It reports whether there was such an index.
func startIndexDrop(t *catalog.TableInfo, name string) bool {
	for i, ix := range t.Indexes {
		if strings.EqualFold(ix.Name, name) {
			t.Indexes = append(t.Indexes[:i], t.Indexes[i+1:]...)
			ix.State = catalog.StateWriteOnly
			t.Changing = append(t.Changing, ix)
			return true
		}
	}
	return false
}

// submitJob adds a job to the queue and wakes this engine's owner loop.
func (e *Engine) submitJob(ctx context.Context, j *catalog.Job) (int64, error) {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		var txn kv.Txn
		if txn, err = e.store.Begin(ctx, kv.TxnOptions{}); err != nil {
			return 0, err
		}
		if j.ID, err = catalog.AllocID(ctx, txn); err == nil {
			j.Created = e.now() / int64(time.Millisecond)
			err = catalog.PutJob(txn, j)
		}
		if err != nil {
			txn.Rollback(ctx)
			return 0, err
		}
		if err = txn.Commit(ctx); err == nil {
			e.kickOwner()
			e.pace.Touch()
			return j.ID, nil
		}
		if !kv.IsRetryable(err) {
			return 0, err
		}
	}
	return 0, err
}

// waitJob waits until job id is in the history and returns it.
func (e *Engine) waitJob(ctx context.Context, id int64) (*catalog.Job, error) {
	t := time.NewTimer(e.sl.poll)
	defer t.Stop()
	for {
		e.pace.Touch() // the job's steps need this engine's lease to follow
		done := e.jobsDoneChan()
		txn, err := e.store.Begin(ctx, kv.TxnOptions{})
		if err != nil {
			return nil, err
		}
		j, err := catalog.HistoryJob(ctx, txn, id)
		txn.Rollback(ctx)
		if err != nil || j != nil {
			return j, err
		}
		t.Reset(e.sl.poll)
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// waitSettled waits until every live engine's floor reached ver: none of
// them can commit under an older schema version any more. This engine
// loads ver first if it has not.
func (e *Engine) waitSettled(ctx context.Context, ver int64) error {
	t := time.NewTimer(e.sl.poll)
	defer t.Stop()
	for {
		if e.schema.Load().Version < ver {
			if _, err := e.loadSchema(ctx); err != nil {
				return err
			}
		}
		changed := e.settleChanged()
		now := e.now()
		txn, err := e.store.Begin(ctx, kv.TxnOptions{})
		if err != nil {
			return err
		}
		leases, err := catalog.EngineLeases(ctx, txn)
		txn.Rollback(ctx)
		if err != nil {
			return err
		}
		if len(settled(leases, e.selfLease(), now, ver)) == 0 {
			return nil
		}
		t.Reset(e.sl.poll)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// encodeVar writes a session variable's value for a job: its kind's letter
// and its text (integers, floats and NULL keep their kind; anything else
// becomes a string, as SET would store it).
func encodeVar(v types.Datum) string {
	switch v.Kind() {
	case types.KindNull:
		return "n"
	case types.KindInt64:
		return "i" + strconv.FormatInt(v.Int(), 10)
	case types.KindUint64:
		return "u" + strconv.FormatUint(v.Uint(), 10)
	case types.KindFloat64:
		return "f" + strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return "s" + string(v.AppendText(nil))
}

func decodeVar(s string) types.Datum {
	if s == "" {
		return types.NewString("")
	}
	text := s[1:]
	switch s[0] {
	case 'n':
		return types.Null
	case 'i':
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return types.NewInt(n)
		}
	case 'u':
		if n, err := strconv.ParseUint(text, 10, 64); err == nil {
			return types.NewUint(n)
		}
	case 'f':
		if f, err := strconv.ParseFloat(text, 64); err == nil {
			return types.NewFloat(f)
		}
	}
	return types.NewString(text)
}
