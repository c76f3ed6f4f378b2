// Package kv is the public package github.com/strata-db/strata/kv under
// its former internal path: the SQL layer and the Redis gateway import it
// here. Every name is an alias of the public one.
package kv

import pub "github.com/strata-db/strata/kv"

type (
	KeyValue       = pub.KeyValue
	Storage        = pub.Storage
	RangeDestroyer = pub.RangeDestroyer
	TxnOptions     = pub.TxnOptions
	Txn            = pub.Txn
	Inserter       = pub.Inserter
	KeyExistsError = pub.KeyExistsError
	SizedIterer    = pub.SizedIterer
	FuncScanner    = pub.FuncScanner
	ScanCursor     = pub.ScanCursor
	Iterator       = pub.Iterator
	RetryableError = pub.RetryableError
	Savepointer    = pub.Savepointer
	StatementTxn   = pub.StatementTxn
)

var (
	ErrNotFound  = pub.ErrNotFound
	ErrTxnTooOld = pub.ErrTxnTooOld
	IsRetryable  = pub.IsRetryable
)
