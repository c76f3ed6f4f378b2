package raftstore

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/kvpb"
)

// Span is a half-open range [Start, End) of KV-engine keys.
type Span struct{ Start, End []byte }

// Observer is what the layer above the store (package mvcc's LockSet, the
// in-memory indexes of the applied state) learns from the apply path, and
// what it tells the store about the engine. Every method is called from the
// store loop, one call at a time, in the order below for each apply round:
// BeforeApply for every write of the round, BeforeCommit, the commit of
// the apply batch, then AfterApply for every write, before any proposer of
// the round is woken.
type Observer interface {
	// Spans are the KV-engine spans that hold region r's state machine
	// data: what a snapshot of r carries and what removing r's replica
	// deletes.
	Spans(r *kvpb.Region) []Span
	// BeforeApply sees each applied write batch's representation before
	// the apply batch holding it commits to the engine.
	BeforeApply(repr []byte) error
	// BeforeCommit is called with each apply batch after BeforeApply has
	// seen every representation in it, just before it commits; it may add
	// records of its own, which commit atomically with the batch.
	BeforeCommit(ab *pebble.Batch) error
	// AfterApply sees each applied write batch's representation after the
	// batch is committed to the engine and before its proposer is woken.
	AfterApply(repr []byte) error
	// SnapshotMeta is attached to every snapshot this store sends (bounds
	// on what the engine holds that the receiver's indexes need).
	SnapshotMeta() []byte
	// SnapshotApplied is told that spans were replaced by a snapshot's
	// data (ingested, not passed through BeforeApply) carrying meta, the
	// sender's SnapshotMeta. It may add records to b, which the store
	// commits, and makes durable with the ingested data, before the
	// snapshot counts as applied.
	SnapshotApplied(spans []Span, meta []byte, b *pebble.Batch) error
	// SpansDestroyed is told that spans were emptied (a removed replica's
	// data).
	SpansDestroyed(spans []Span) error
	// ScannedKeys counts the keys range scans have read from the KV
	// engine so far; the store flushes its memtable early only while that
	// count grows (memtableMaxAge).
	ScannedKeys() uint64
	// FlushStarting is called right before each KV-engine flush the store
	// requests; FlushDone gets its result once that flush has completed,
	// when everything applied before it is in the SSTs.
	FlushStarting() uint64
	FlushDone(token uint64)
}

// rawObserver is the Observer of a store whose data are not MVCC records
// (tests of the store alone): a region's data are the engine keys in its
// range, above the store's own local keys (0x01, 0x02), and nothing is
// indexed.
type rawObserver struct{}

func (rawObserver) Spans(r *kvpb.Region) []Span {
	sp := Span{Start: r.StartKey, End: r.EndKey}
	if string(sp.Start) < "\x03" {
		sp.Start = []byte{0x03}
	}
	if len(sp.End) == 0 {
		sp.End = []byte{0xff, 0xff}
	}
	return []Span{sp}
}
func (rawObserver) BeforeApply([]byte) error                            { return nil }
func (rawObserver) BeforeCommit(*pebble.Batch) error                    { return nil }
func (rawObserver) AfterApply([]byte) error                             { return nil }
func (rawObserver) SnapshotMeta() []byte                                { return nil }
func (rawObserver) SnapshotApplied([]Span, []byte, *pebble.Batch) error { return nil }
func (rawObserver) SpansDestroyed([]Span) error                         { return nil }
func (rawObserver) ScannedKeys() uint64                                 { return 0 }
func (rawObserver) FlushStarting() uint64                               { return 0 }
func (rawObserver) FlushDone(uint64)                                    {}
