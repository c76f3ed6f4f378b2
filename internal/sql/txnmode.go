package sql

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/sqlerr"
	"github.com/strata-db/strata/internal/sql/types"
)

// Transactions are pessimistic by default, as in TiDB since 3.0.8 and as
// MySQL applications expect: a DML statement (and SELECT ... FOR UPDATE)
// reads the latest committed rows at a for-update timestamp, then locks
// every key it is about to write (kv.Txn.LockKeys), waiting for other
// transactions' locks up to innodb_lock_wait_timeout (then 1205) and
// failing at once when a wait would close a deadlock (1213; the
// transaction is rolled back, as InnoDB does to its victim). A lock that
// finds a row committed after the statement read it makes the statement
// run again at a fresh timestamp (kv.StatementTxn), so concurrent
// read-modify-write statements queue instead of failing. Plain SELECTs read
// the transaction's snapshot: the start timestamp under REPEATABLE READ
// (snapshot isolation), a fresh one per statement under READ COMMITTED.
//
// tidb_txn_mode = 'optimistic' (or BEGIN OPTIMISTIC) takes no locks before
// COMMIT, where a write conflict fails the transaction with 1213.
//
// An autocommit statement first runs optimistically, which costs nothing
// when nobody else writes its rows (TiDB's pessimistic-auto-commit=false);
// if it meets a conflict it runs again, pessimistically, so it waits
// rather than fails.

// maxPessimisticRetries bounds how often one statement runs again after
// its locks found newer commits (TiDB's pessimistic-txn.max-retry-count).
const maxPessimisticRetries = 256

// Transaction modes (tidb_txn_mode, BEGIN PESSIMISTIC / OPTIMISTIC).
const (
	txnModePessimistic = "pessimistic"
	txnModeOptimistic  = "optimistic"
)

// txnOptions says what kind of transaction begin opens now.
func (s *Session) txnOptions() kv.TxnOptions {
	opts := kv.TxnOptions{
		Pessimistic:     s.sessionTxnMode() == txnModePessimistic,
		ReadCommitted:   s.isolation() == "READ-COMMITTED",
		LockWaitTimeout: s.lockWaitTimeout(),
	}
	switch {
	case s.beginMode == ast.Pessimistic:
		opts.Pessimistic = true
	case s.beginMode == ast.Optimistic:
		opts.Pessimistic = false
	case s.autocommitStmt() && !s.autoPessimistic:
		opts.Pessimistic = false
	}
	return opts
}

// sessionTxnMode is tidb_txn_mode: pessimistic unless set to optimistic
// (or empty, as in TiDB).
func (s *Session) sessionTxnMode() string {
	v, _ := s.GetVar("tidb_txn_mode", true, "")
	if str, _ := v.ToString(); str == "" || strings.EqualFold(str, txnModeOptimistic) {
		return txnModeOptimistic // TiDB's '' is optimistic too
	}
	return txnModePessimistic
}

// isolation is the isolation level of the next transaction: a one-shot SET
// TRANSACTION ISOLATION LEVEL, else transaction_isolation.
func (s *Session) isolation() string {
	if s.nextIsolation != "" {
		return s.nextIsolation
	}
	v, _ := s.GetVar("transaction_isolation", true, "")
	str, _ := v.ToString()
	return str
}

// lockWaitTimeout is innodb_lock_wait_timeout.
func (s *Session) lockWaitTimeout() time.Duration {
	v, _ := s.GetVar("innodb_lock_wait_timeout", true, "")
	n, err := v.ToInt64()
	if err != nil || n <= 0 {
		return 50 * time.Second
	}
	return time.Duration(n) * time.Second
}

// setTxnVar handles the session variables of this file; ok is false for
// others.
func (s *Session) setTxnVar(name string, val types.Datum, global bool) (ok bool, err error) {
	switch name {
	case "tidb_txn_mode":
		str, _ := val.ToString()
		str = strings.ToLower(str)
		if str != "" && str != txnModeOptimistic && str != txnModePessimistic {
			return true, sqlerr.New(1231, "42000", "Variable 'tidb_txn_mode' can't be set to the value of '%s'", str)
		}
		val = types.NewString(str)
	case "innodb_lock_wait_timeout":
		str, _ := val.ToString()
		n, perr := strconv.ParseInt(str, 10, 64)
		if perr != nil {
			return true, sqlerr.New(1232, "42000", "Incorrect argument type to variable 'innodb_lock_wait_timeout'")
		}
		// MySQL clamps to [1, 1073741824] with a warning.
		val = types.NewInt(min(max(n, 1), 1073741824))
	case "tx_isolation_one_shot", "transaction_isolation_one_shot":
		str, err := isolationLevel(name, val)
		if err != nil {
			return true, err
		}
		s.nextIsolation = str
		return true, nil
	default:
		return false, nil
	}
	if global {
		s.setGlobal(name, val)
	} else {
		s.vars[name] = val
	}
	return true, nil
}

// isolationLevel checks and normalises an isolation level value.
func isolationLevel(name string, val types.Datum) (string, error) {
	str, _ := val.ToString()
	str = strings.ToUpper(strings.ReplaceAll(str, " ", "-"))
	switch str {
	case "REPEATABLE-READ", "READ-COMMITTED", "SERIALIZABLE", "READ-UNCOMMITTED":
		return str, nil
	}
	return "", sqlerr.New(1231, "42000", "Variable '%s' can't be set to the value of '%s'", name, str)
}

// beginStatement starts a statement in the session's transaction: it sets
// the timestamp the statement reads at (kv.StatementTxn), a for-update one
// when the statement reads to write in a pessimistic transaction.
func (s *Session) beginStatement(ctx context.Context, forUpdate, retry bool) error {
	st, ok := s.txn.(kv.StatementTxn)
	if !ok {
		return nil
	}
	return st.BeginStatement(ctx, forUpdate, retry)
}

// lockWrites locks the keys a statement is about to write, in a
// pessimistic transaction.
func (s *Session) lockWrites(ctx context.Context, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	return s.txn.LockKeys(ctx, keys...)
}

// isPessimisticConflict reports whether err asks the statement to run again
// at a fresh for-update timestamp.
func isPessimisticConflict(err error) bool {
	var re *kv.RetryableError
	return errors.As(err, &re) && re.PessimisticConflict
}

// isDeadlock reports whether err made this transaction a deadlock's victim.
func isDeadlock(err error) bool {
	var re *kv.RetryableError
	return errors.As(err, &re) && re.Deadlock
}

// isAborted reports whether err ended this transaction under snapshot
// isolation (a row it locks was committed after its snapshot).
func isAborted(err error) bool {
	var re *kv.RetryableError
	return errors.As(err, &re) && re.Aborted
}

// retryableSQLError is the MySQL error of a transaction conflict. The texts
// are MySQL's (InnoDB's), and name no keys.
func retryableSQLError(re *kv.RetryableError) *sqlerr.Error {
	switch {
	case re.LockWaitTimeout:
		return sqlerr.New(sqlerr.ErLockWaitTimeout, "HY000", "Lock wait timeout exceeded; try restarting transaction")
	case re.Deadlock:
		return sqlerr.New(sqlerr.ErLockDeadlock, "40001", "Deadlock found when trying to get lock; try restarting transaction")
	}
	return sqlerr.New(sqlerr.ErLockDeadlock, "40001", "Write conflict with a concurrent transaction; try restarting transaction")
}

// sqlModeHas reports whether the session's sql_mode holds mode.
func (s *Session) sqlModeHas(mode string) bool {
	v, _ := s.GetVar("sql_mode", true, "")
	str, _ := v.ToString()
	for _, m := range strings.Split(str, ",") {
		if strings.EqualFold(strings.TrimSpace(m), mode) {
			return true
		}
	}
	return false
}
