// Package sqlerr defines the errors the SQL layer returns to clients: every
// user-visible failure carries a MySQL error code and SQLSTATE so drivers,
// ORMs and sysbench can classify it (duplicate key, deadlock, syntax ...).
package sqlerr

import "fmt"

// Error is a MySQL-classified error.
type Error struct {
	Code  uint16
	State string // SQLSTATE, 5 characters
	Msg   string
}

func (e *Error) Error() string { return fmt.Sprintf("ERROR %d (%s): %s", e.Code, e.State, e.Msg) }

// New builds an error with an explicit code and state.
func New(code uint16, state string, format string, args ...any) *Error {
	return &Error{Code: code, State: state, Msg: fmt.Sprintf(format, args...)}
}

// MySQL error codes used by Strata. The numbers and states are MySQL's.
const (
	ErDupEntry              = 1062 // 23000
	ErParse                 = 1064 // 42000
	ErNoSuchTable           = 1146 // 42S02
	ErBadField              = 1054 // 42S22
	ErNoDB                  = 1046 // 3D000
	ErBadDB                 = 1049 // 42000
	ErDBCreateExists        = 1007 // HY000
	ErDBDropExists          = 1008 // HY000
	ErTableExists           = 1050 // 42S01
	ErBadNull               = 1048 // 23000
	ErWarnDataOutOfRange    = 1264 // 22003
	ErDataTooLong           = 1406 // 22001
	ErTruncatedWrongValue   = 1292 // 22007
	ErLockWaitTimeout       = 1205 // HY000
	ErLockDeadlock          = 1213 // 40001
	ErLockNowait            = 3572 // HY000
	ErUnknown               = 1105 // HY000
	ErNotSupportedYet       = 1235 // 42000
	ErWrongValueCount       = 1136 // 21S01
	ErNonUniq               = 1052 // 23000 (ambiguous column)
	ErKeyDoesNotExist       = 1176 // 42000
	ErDupKeyName            = 1061 // 42000
	ErCantDropFieldOrKey    = 1091 // 42000
	ErUnknownSystemVariable = 1193 // HY000
	ErWrongArguments        = 1210 // HY000
	ErDivisionByZero        = 1365 // 22012
	ErAccessDenied          = 1045 // 28000
	ErSubqueryNo1Row        = 1242 // 21000
	ErOperandColumns        = 1241 // 21000
	ErMultiplePriKey        = 1068 // 42000
	ErFieldSpecifiedTwice   = 1110 // 42000
	ErNoDefaultForField     = 1364 // HY000
	ErInvalidGroupFuncUse   = 1111 // HY000
	ErWrongFieldWithGroup   = 1055 // 42000
	ErUnknownTable          = 1051 // 42S02
	ErTooBigRowsize         = 1118 // 42000
	ErQueryInterrupted      = 1317 // 70100
	ErMemoryExceeded        = 8175 // HY000 (TiDB's code for a statement over its memory quota)
	ErGCTooEarly            = 9006 // HY000 (TiDB: the transaction is older than the GC life time)
)
