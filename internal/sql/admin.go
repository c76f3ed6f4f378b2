package sql

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	ptypes "github.com/pingcap/tidb/pkg/parser/types"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/catalog"
	"github.com/strata-db/strata/internal/sql/exec"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// ADMIN statements, as TiDB spells them: SHOW DDL, SHOW DDL JOBS, CANCEL
// DDL JOBS, CHECK TABLE and CHECK INDEX.

// errAdminCheck is TiDB's 8003, the failure of ADMIN CHECK TABLE / INDEX.
const errAdminCheck = 8003

// maxCheckProblems bounds the inconsistencies ADMIN CHECK reports.
const maxCheckProblems = 10

func (s *Session) runAdmin(ctx context.Context, n *ast.AdminStmt) (*Result, error) {
	switch n.Tp {
	case ast.AdminShowDDL:
		return s.adminShowDDL(ctx)
	case ast.AdminShowDDLJobs:
		if n.Where != nil {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support ADMIN SHOW DDL JOBS ... WHERE")
		}
		return s.adminShowDDLJobs(ctx, int(n.JobNumber))
	case ast.AdminCancelDDLJobs:
		return s.adminCancelDDLJobs(ctx, n.JobIDs)
	case ast.AdminCheckTable:
		for _, tn := range n.Tables {
			if err := s.adminCheck(ctx, tn, ""); err != nil {
				return nil, err
			}
		}
		return &Result{}, nil
	case ast.AdminCheckIndex:
		if len(n.Tables) != 1 {
			return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this ADMIN statement")
		}
		return &Result{}, s.adminCheck(ctx, n.Tables[0], n.Index)
	}
	return nil, sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support this ADMIN statement")
}

func intColumns(cols []*Column, names ...string) {
	for _, c := range cols {
		for _, n := range names {
			if c.Name == n {
				ft := ptypes.NewFieldType(mysql.TypeLonglong)
				ft.SetFlen(20)
				ft.SetCharset("binary")
				ft.SetCollate("binary")
				c.Type = ft
			}
		}
	}
}

// readOnly runs f in a read-only transaction of its own.
func (e *Engine) readOnly(ctx context.Context, f func(txn kv.Txn) error) error {
	txn, err := e.store.Begin(ctx, kv.TxnOptions{})
	if err != nil {
		return err
	}
	defer txn.Rollback(ctx)
	return f(txn)
}

// adminShowDDL shows the schema version, the DDL owner and the running job,
// and this engine's id.
func (s *Session) adminShowDDL(ctx context.Context) (*Result, error) {
	var (
		ver   int64
		owner *catalog.Owner
		jobs  []*catalog.Job
	)
	err := s.e.readOnly(ctx, func(txn kv.Txn) error {
		var err error
		if ver, err = catalog.Version(ctx, txn); err != nil {
			return err
		}
		if owner, err = catalog.GetOwner(ctx, txn); err != nil {
			return err
		}
		if jobs, err = catalog.Jobs(ctx, txn); err != nil {
			return err
		}
		return countBackfilled(ctx, txn, jobs)
	})
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: textColumns("SCHEMA_VER", "OWNER_ID", "OWNER_ADDRESS", "RUNNING_JOBS", "SELF_ID", "QUERY")}
	intColumns(res.Columns, "SCHEMA_VER")
	ownerID, ownerAddr := "", ""
	if owner != nil {
		ownerID, ownerAddr = owner.ID, owner.Addr
	}
	running, query := "", ""
	if len(jobs) > 0 {
		j := jobs[0]
		running = fmt.Sprintf("ID:%d, Type:%s, State:%s, SchemaState:%s, SchemaID:%d, TableID:%d, RowCount:%d",
			j.ID, j.Type, j.State, j.SchemaState, j.SchemaID, j.TableID, j.RowCount)
		query = j.Query
	}
	row := textRow("", ownerID, ownerAddr, running, s.e.id, query)
	row[0] = types.NewInt(ver)
	res.Rows = append(res.Rows, row)
	return res, nil
}

// adminShowDDLJobs lists the queued and running jobs, then the last n
// finished ones (10 by default), newest first.
func (s *Session) adminShowDDLJobs(ctx context.Context, n int) (*Result, error) {
	if n <= 0 {
		n = 10
	}
	var queued, history []*catalog.Job
	err := s.e.readOnly(ctx, func(txn kv.Txn) error {
		var err error
		if queued, err = catalog.Jobs(ctx, txn); err != nil {
			return err
		}
		if err := countBackfilled(ctx, txn, queued); err != nil {
			return err
		}
		history, err = catalog.RecentHistory(ctx, txn, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: textColumns("JOB_ID", "DB_NAME", "TABLE_NAME", "JOB_TYPE", "SCHEMA_STATE", "SCHEMA_ID",
		"TABLE_ID", "ROW_COUNT", "CREATE_TIME", "START_TIME", "END_TIME", "STATE")}
	intColumns(res.Columns, "JOB_ID", "SCHEMA_ID", "TABLE_ID", "ROW_COUNT")
	for i := len(queued) - 1; i >= 0; i-- {
		res.Rows = append(res.Rows, jobRow(queued[i]))
	}
	for _, j := range history {
		res.Rows = append(res.Rows, jobRow(j))
	}
	return res, nil
}

// countBackfilled sets the row count of jobs whose backfill runs from
// their shares' progress.
func countBackfilled(ctx context.Context, txn kv.Txn, jobs []*catalog.Job) error {
	for _, j := range jobs {
		if j.SchemaState != catalog.StateWriteReorg || j.ReorgDone {
			continue
		}
		ranges, err := catalog.ReorgRanges(ctx, txn, j.ID)
		if err != nil {
			return err
		}
		j.RowCount = 0
		for _, r := range ranges {
			j.RowCount += r.Rows
		}
	}
	return nil
}

func jobRow(j *catalog.Job) []types.Datum {
	ts := func(ms int64) types.Datum {
		if ms == 0 {
			return types.Null
		}
		return types.NewString(time.UnixMilli(ms).Format("2006-01-02 15:04:05"))
	}
	typ := j.Type
	if j.ReorgMode != "" {
		typ += " /* " + j.ReorgMode + " */"
	}
	return []types.Datum{types.NewInt(j.ID), types.NewString(j.SchemaName), types.NewString(j.TableName),
		types.NewString(typ), types.NewString(j.SchemaState.String()), types.NewInt(j.SchemaID),
		types.NewInt(j.TableID), types.NewInt(j.RowCount), ts(j.Created), ts(j.Started), ts(j.Finished),
		types.NewString(string(j.State))}
}

// adminCancelDDLJobs asks the owner to cancel jobs: a queued one ends at
// once, one adding indexes is rolled back (until its indexes are public);
// any other running job cannot be cancelled any more.
func (s *Session) adminCancelDDLJobs(ctx context.Context, ids []int64) (*Result, error) {
	res := &Result{Columns: textColumns("JOB_ID", "RESULT")}
	intColumns(res.Columns, "JOB_ID")
	for _, id := range ids {
		msg, err := s.e.cancelJob(ctx, id)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, []types.Datum{types.NewInt(id), types.NewString(msg)})
	}
	s.e.kickOwner()
	return res, nil
}

func (e *Engine) cancelJob(ctx context.Context, id int64) (string, error) {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		var txn kv.Txn
		if txn, err = e.store.Begin(ctx, kv.TxnOptions{}); err != nil {
			return "", err
		}
		var j *catalog.Job
		if j, err = catalog.QueuedJob(ctx, txn, id); err != nil || j == nil {
			txn.Rollback(ctx)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("error: [ddl:8212]DDL Job:%d not found", id), nil
		}
		switch {
		case j.Cancel || j.State == catalog.JobRollingBack:
			txn.Rollback(ctx)
			return fmt.Sprintf("error: [ddl:8213]This job:%d is almost finished, can't be cancelled now", id), nil
		case j.State == catalog.JobRunning && j.Applied && (len(j.Adding) == 0 || j.SchemaState == catalog.StatePublic):
			txn.Rollback(ctx)
			return fmt.Sprintf("error: [ddl:8213]This job:%d is almost finished, can't be cancelled now", id), nil
		}
		j.Cancel = true
		if err = catalog.PutJob(txn, j); err != nil {
			txn.Rollback(ctx)
			return "", err
		}
		if err = txn.Commit(ctx); err == nil {
			return "successful", nil
		}
		if !kv.IsRetryable(err) {
			return "", err
		}
	}
	return "", err
}

// adminCheck verifies a table's public indexes (or the one named index)
// against its rows at a snapshot: every row has its entries and every
// entry is a row's. An inconsistency fails with 8003, naming what is wrong.
func (s *Session) adminCheck(ctx context.Context, tn *ast.TableName, index string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer func() {
		if !s.InTxn() {
			s.finish(ctx, false)
		}
	}()
	t, err := s.tableOf(s.schema, tn)
	if err != nil {
		return err
	}
	if t.IsView() {
		return sqlerr.New(sqlerr.ErNotSupportedYet, "42000", "This version of Strata doesn't yet support ADMIN CHECK of a view")
	}
	ixs := t.Indexes
	if index != "" {
		ix := t.Index(index)
		if ix == nil {
			return sqlerr.New(sqlerr.ErKeyDoesNotExist, "42000", "Key '%s' doesn't exist in table '%s'", index, t.Name)
		}
		ixs = []*catalog.IndexInfo{ix}
	}
	ec := &exec.Context{Ctx: ctx, Txn: s.txn, Mem: exec.NewMemTracker(s.memQuota())}
	problems, err := exec.CheckIndexes(ec, t, ixs, maxCheckProblems)
	if err != nil {
		return err
	}
	if len(problems) == 0 {
		return nil
	}
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.String()
	}
	more := ""
	if len(problems) == maxCheckProblems {
		more = " (and maybe more)"
	}
	return sqlerr.New(errAdminCheck, "HY000", "admin check table %s failed: %s%s", t.Name, strings.Join(parts, "; "), more)
}
