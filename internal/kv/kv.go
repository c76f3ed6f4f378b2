// Package kv is the public package github.com/strata-db/strata/kv under
// its former internal path: the SQL layer and the Redis gateway import it
// here. Every name is an alias of the public one.
package kv

import (
	"context"

	pub "github.com/strata-db/strata/kv"
	"github.com/strata-db/strata/kvpb"
)

type (
	KeyValue          = pub.KeyValue
	Storage           = pub.Storage
	RangeDestroyer    = pub.RangeDestroyer
	Importer          = pub.Importer
	VersionedKeyValue = pub.VersionedKeyValue
	TxnOptions        = pub.TxnOptions
	Txn               = pub.Txn
	Inserter          = pub.Inserter
	KeyExistsError    = pub.KeyExistsError
	SizedIterer       = pub.SizedIterer
	FuncScanner       = pub.FuncScanner
	ScanCursor        = pub.ScanCursor
	Iterator          = pub.Iterator
	RetryableError    = pub.RetryableError
	Savepointer       = pub.Savepointer
	LockOptions       = pub.LockOptions
	OptionLocker      = pub.OptionLocker
	StatementTxn      = pub.StatementTxn
	ReadDigest        = pub.ReadDigest
	ReadDigester      = pub.ReadDigester
)

var (
	ErrNotFound  = pub.ErrNotFound
	ErrTxnTooOld = pub.ErrTxnTooOld
	IsRetryable  = pub.IsRetryable
)

// CopRequest is a plan fragment (package coprocessor) to evaluate over
// key ranges next to the data.
type CopRequest struct {
	DAG *kvpb.CopDAG
	// Ranges are ascending and disjoint.
	Ranges []KeyRange
	// Concurrency bounds the requests in flight (at least 1).
	Concurrency int
	// KeepOrder returns the responses in the scan's key order (descending
	// when DAG.Reverse); otherwise in the order they complete.
	KeepOrder bool
	// PagingRows, when > 0, bounds the rows of a response (the groups of
	// an aggregation's; not a top-N's).
	PagingRows int
	// NoSplit keeps each of a few ranges one task instead of cutting it
	// into sub-ranges for the workers (which costs two probes a range):
	// for ranges known to be small, such as an index join's lookups.
	NoSplit bool
}

// KeyRange is [Start, End); End nil means +infinity.
type KeyRange struct{ Start, End []byte }

// CopIterator returns the responses of a coprocessor request. It is used
// by one goroutine.
type CopIterator interface {
	// Next returns the next response (its batch and warnings), or nil at
	// the end.
	Next(ctx context.Context) (*kvpb.CopResponse, error)
	// Close stops the requests still to be sent.
	Close()
}

// Coprocessor is implemented by transactions that can evaluate a plan
// fragment on the region leaders, at the transaction's snapshot.
// Coprocess returns a nil iterator (and no error) when it cannot serve the
// request (the transaction has buffered writes in the ranges): the caller
// then reads the rows itself.
type Coprocessor interface {
	Coprocess(ctx context.Context, req *CopRequest) (CopIterator, error)
}
