package server

import (
	"context"
	"errors"

	"github.com/dolthub/vitess/go/mysql"

	"github.com/strata-db/strata/internal/kv"
	strsql "github.com/strata-db/strata/internal/sql"
	"github.com/strata-db/strata/internal/sql/sqlerr"
)

// wireError classifies err for the client: every error leaving the server
// carries a MySQL error number and SQLSTATE.
func wireError(err error) *mysql.SQLError {
	if err == nil {
		return nil
	}
	var se *sqlerr.Error
	if errors.As(err, &se) {
		state := se.State
		if len(state) != 5 {
			state = "HY000"
		}
		return mysql.NewSQLError(int(se.Code), state, "%s", se.Msg)
	}
	var re *kv.RetryableError
	if errors.As(err, &re) {
		switch {
		case re.LockWaitTimeout:
			return mysql.NewSQLError(sqlerr.ErLockWaitTimeout, "HY000", "Lock wait timeout exceeded; try restarting transaction")
		case re.Deadlock:
			return mysql.NewSQLError(sqlerr.ErLockDeadlock, "40001", "Deadlock found when trying to get lock; try restarting transaction")
		}
		return mysql.NewSQLError(sqlerr.ErLockDeadlock, "40001", "Write conflict with a concurrent transaction; try restarting transaction")
	}
	if errors.Is(err, kv.ErrTxnTooOld) {
		return mysql.NewSQLError(sqlerr.ErGCTooEarly, "HY000", "%s", err.Error())
	}
	var me *mysql.SQLError
	if errors.As(err, &me) {
		return me
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return mysql.NewSQLError(sqlerr.ErQueryInterrupted, "70100", "Query execution was interrupted")
	}
	return mysql.NewSQLError(sqlerr.ErUnknown, "HY000", "%s", strsql.RedactKeys(err.Error()))
}
