package sql

import (
	"context"
	"errors"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/strata-db/strata/internal/sql/plan"
	"github.com/strata-db/strata/kv"
)

// Autocommit point selects without a timestamp.
//
// An autocommit SELECT whose plan reads one row by its primary key reads
// that row's newest committed value (kv.LatestReader, the client's
// GetLatest) instead of opening a transaction: no TSO request, which on a
// node that does not lead PD is a round trip to the node that does. One
// key read at its newest committed version is a consistent snapshot of
// everything the statement reads, and linearizable: every write
// acknowledged before the read is in it. A statement that reads anything
// else (a second key, a range, an index, a subquery, a lock) opens a
// transaction as before.

// beginLatest plans an autocommit SELECT before any transaction is open
// and, when the plan reads one row by primary key, opens the session's
// transaction as a latestTxn. It returns the plan it compiled (for the
// caller to reuse when its schema is the one the caller's transaction
// reads), or nil when it did not compile one. Errors are left to the
// caller's ordinary path, which reports them.
func (s *Session) beginLatest(ctx context.Context, st ast.StmtNode, p *prepared) *compiled {
	lr, ok := s.e.store.(kv.LatestReader)
	if !ok {
		return nil
	}
	if _, ok := st.(*ast.SelectStmt); !ok {
		return nil
	}
	if s.e.ensureLease(ctx) != nil {
		return nil
	}
	schema := s.withTemp(s.e.schema.Load())
	var c *compiled
	if p != nil && s.planFits(p.cached, schema) {
		c = p.cached
	} else {
		saved := s.schema
		s.schema = schema
		var err error
		c, err = s.compile(st)
		s.schema = saved
		if err != nil {
			return nil
		}
		if p != nil {
			p.cached = c
		}
	}
	if c.query == nil || c.forUpdate || len(c.subqueries) > 0 || !readsOneRow(c.query) {
		return c
	}
	s.txn, s.schema, s.txnOpts = &latestTxn{r: lr}, schema, kv.TxnOptions{}
	s.nextIsolation = ""
	return c
}

// readsOneRow reports whether a plan's only storage read is one point get
// by primary key of a stored table, under operators that read nothing
// themselves.
func readsOneRow(p plan.Plan) bool {
	scans := 0
	var walk func(plan.Plan) bool
	walk = func(p plan.Plan) bool {
		switch n := p.(type) {
		case *plan.Scan:
			scans++
			return n.Access == plan.PointGet && len(n.Handles) == 1 && !n.Lock && !n.WithHandle && !n.Table.Temporary
		case *plan.Projection, *plan.Filter, *plan.Limit:
		default:
			return false
		}
		for _, c := range p.Children() {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	return walk(p) && scans == 1
}

// errLatestOnly is what a latestTxn answers to anything but its one read:
// the planner's check (readsOneRow) makes that unreachable.
var errLatestOnly = errors.New("sql: an autocommit point read did more than one read")

// latestTxn is the transaction of an autocommit point select: its one Get
// reads the newest committed value. It has no snapshot timestamp; any
// other read or write fails.
type latestTxn struct {
	r    kv.LatestReader
	read bool
}

func (t *latestTxn) StartTS() uint64 { return 0 }

func (t *latestTxn) Get(ctx context.Context, key []byte) ([]byte, error) {
	if t.read {
		return nil, errLatestOnly
	}
	t.read = true
	return t.r.GetLatest(ctx, key)
}

func (t *latestTxn) BatchGet(context.Context, [][]byte) (map[string][]byte, error) {
	return nil, errLatestOnly
}

func (t *latestTxn) Scan(context.Context, []byte, []byte, int, bool) ([]kv.KeyValue, error) {
	return nil, errLatestOnly
}

func (t *latestTxn) Iter(context.Context, []byte, []byte, bool) (kv.Iterator, error) {
	return nil, errLatestOnly
}

func (t *latestTxn) Set([]byte, []byte) error                  { return errLatestOnly }
func (t *latestTxn) Delete([]byte) error                       { return errLatestOnly }
func (t *latestTxn) LockKeys(context.Context, ...[]byte) error { return errLatestOnly }
func (t *latestTxn) Commit(context.Context) error              { return nil }
func (t *latestTxn) Rollback(context.Context) error            { return nil }
func (t *latestTxn) Len() int                                  { return 0 }
