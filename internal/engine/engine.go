// Package engine owns the Pebble instances of a store (node) and the
// layout of the keys in them.
//
// A store has two engines (Engines), as TiKV has a raft engine beside its
// KV engine:
//
// The Raft engine holds every region's Raft log and HardState:
//
//	0x01 0x03 regionID 0x01           Raft HardState of the replica
//	0x01 0x03 regionID 0x03 index     Raft log entry
//	0x01 0x03 regionID 0x05           truncated state (index, term of the last deleted entry)
//	0x01 0x04 regionID                tombstone: the replica was removed from the region (its peer id)
//	0x01 0x05 regionID                a snapshot being applied (raftpb.Snapshot), until its data is durable in the KV engine
//
// It is written with one batch and one fsync per round of the store loop
// (group commit across all regions). Its entries live briefly: they are
// deleted once applied, so they never need compacting with the data.
//
// The KV engine holds the state machine: what the entries did, and how far
// they were applied, in the same batch (so applied data and applied index
// move together). It has no write-ahead log of its own (the Raft log is
// one): after a crash it comes back as of its last memtable flush, with
// the applied index of that moment, and the Raft log replays the rest. The
// log is truncated only up to an applied index a completed flush made
// durable.
//
//	0x01 0x01                         store identity (cluster id, store id)
//	0x01 0x02 regionID                region descriptor (kvpb.Region) of a local replica
//	0x01 0x03 regionID 0x02           apply state (applied index, truncated index/term)
//	0x02 ...                          placement-driver state (TSO high-water mark, id allocator)
//	'z' ...                           transactional MVCC data (package mvcc: lock/write/data)
package engine

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// memTableSize is the size of each engine's memtables.
const memTableSize = 64 << 20

// dataBlockSize is the target size of an SST data block (Pebble's default
// is 4 KiB). Range scans step from block to block, and each step looks the
// next block up in the block cache; a profile of sysbench oltp_read_only on
// tables with a few versions per row spent a fifth of the CPU loading
// blocks. Point reads, which pay for larger blocks, mostly hit the version
// cache instead. TiKV and CockroachDB use 32 KiB as well.
const dataBlockSize = 32 << 10

// Tables are compressed with Pebble's "fastest" profile (MinLZ on amd64,
// Snappy elsewhere) rather than its default, Snappy: MinLZ compresses
// about as well and faster. Block compression was 1.7% of the CPU of
// sysbench oltp_update_index (flushes and compactions) and 1.3% with it.

// l0CompactionThreshold is the L0 read amplification at which Pebble
// compacts L0 into the level below (Pebble's default is 4). Rows updated
// at random keys make every L0 file overlap the whole of that level, so a
// compaction rewrites all of it; doubling the threshold halves how often.
// Measured on sysbench oltp_update_index (4 x 100000 rows, 8 threads, 60
// s): CPU per transaction 76.3 -> 69.6 us, throughput +6.5%; oltp_read_only
// run right after the writes was not slower (2,555 -> 2,690 TPS).
const l0CompactionThreshold = 8

// Options configures Open.
type Options struct {
	// CacheBytes is the block cache size. Default 256 MiB.
	CacheBytes int64
	// InMemory keeps everything in memory (tests only; nothing is durable).
	InMemory bool
	// FS overrides the filesystem (tests: vfs.NewStrictMem to simulate a
	// crash that loses everything not synced).
	FS vfs.FS
	// DisableWAL turns off Pebble's write-ahead log: writes are durable only
	// once flushed (Flush, AsyncFlush). Synced writes are refused.
	DisableWAL bool
}

// Open opens (creating if needed) the Pebble DB at dir.
func Open(dir string, o Options) (*pebble.DB, error) {
	if o.CacheBytes == 0 {
		o.CacheBytes = 256 << 20
	}
	cache := pebble.NewCache(o.CacheBytes)
	defer cache.Unref()
	opts := &pebble.Options{
		Comparer:                    Comparer,
		Cache:                       cache,
		MemTableSize:                memTableSize,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       l0CompactionThreshold,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
		CompactionConcurrencyRange:  func() (int, int) { return 1, 2 },
		FormatMajorVersion:          pebble.FormatNewest,
		DisableWAL:                  o.DisableWAL,
	}
	if o.DisableWAL {
		// An SST ingested over an unflushed memtable must reach the LSM
		// at once (Pebble then flushes the memtable first) instead of
		// queueing behind it as a flushable: without a WAL, a queued
		// ingestion is durable only after that flush, and reads of the
		// SSTs alone (OnlyReadGuaranteedDurable) would not see it.
		opts.Experimental.DisableIngestAsFlushable = func() bool { return true }
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].BlockSize = dataBlockSize
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.FastestCompression }
	}
	if o.InMemory {
		opts.FS = vfs.NewMem()
	}
	if o.FS != nil {
		opts.FS = o.FS
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("engine: open %s: %w", dir, err)
	}
	return db, nil
}

// Comparer orders keys bytewise, like Pebble's default, and tells Pebble
// where the MVCC timestamp suffix of a key starts (Split), so that bloom
// filters are built on the key without its version and a point read of
// "the newest version of k at or below ts" can use SeekPrefixGE, which
// skips every SST whose filter rules k out.
//
// Versioned keys are the write and data column families of package mvcc:
// 'z' cf escaped(userKey) ts, where escaped() ends with the terminator
// 0x00 0x01 and contains 0x00 0x01 nowhere else, and ts is 8 bytes. A key
// is split only when the terminator sits right before its last 8 bytes, so
// unversioned keys (locks, scan bounds, everything outside 'z') are their
// own prefix. The escaping is prefix-free, so ordering by prefix then by
// suffix is the same as bytewise order (Pebble's contract for Split).
var Comparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Split = splitMVCC
	c.ImmediateSuccessor = immediateSuccessorMVCC
	c.Separator = separatorMVCC
	c.Successor = successorMVCC
	c.Name = "strata.mvcc.v1"
	return &c
}()

// separatorMVCC and successorMVCC are the default comparer's shortening
// of the keys an SST's index blocks hold (a key between two blocks, a key
// above the last), except in the versioned keyspace ('z'): there a
// shortened key can end inside a version (the prefix of a versioned key
// followed by part of its timestamp), which Split does not recognise as
// versioned, so ordering by prefix then suffix, Pebble's contract,
// disagrees with bytewise order for it and a versioned key it prefixes
// (Pebble's invariant checks, built in under -race, caught one). Those
// keep the whole key: a itself lies between a and b, and at or above a.
func separatorMVCC(dst, a, b []byte) []byte {
	if len(a) > 0 && a[0] == 'z' {
		return append(dst, a...)
	}
	return pebble.DefaultComparer.Separator(dst, a, b)
}

func successorMVCC(dst, a []byte) []byte {
	if len(a) > 0 && a[0] == 'z' {
		return append(dst, a...)
	}
	return pebble.DefaultComparer.Successor(dst, a)
}

// MVCCSuffixLen is the length of the timestamp suffix of a versioned key.
const MVCCSuffixLen = 8

// immediateSuccessorMVCC returns the smallest key above every key with
// prefix a (Pebble seeks there to move to the next prefix, NextPrefix). For
// the prefix of a versioned key, which ends in the escape terminator 0x00
// 0x01, appending a byte would sort below the versions; raising the
// terminator's last byte to 0x02 sorts above them all and below any other
// escaped key.
func immediateSuccessorMVCC(dst, a []byte) []byte {
	n := len(a)
	if n >= 4 && a[0] == 'z' && (a[1] == 'w' || a[1] == 'd') && a[n-2] == 0 && a[n-1] == 1 {
		dst = append(dst, a[:n-1]...)
		return append(dst, 2)
	}
	return append(append(dst, a...), 0)
}

func splitMVCC(k []byte) int {
	n := len(k)
	if n >= 4+MVCCSuffixLen && k[0] == 'z' && (k[1] == 'w' || k[1] == 'd') &&
		k[n-MVCCSuffixLen-2] == 0 && k[n-MVCCSuffixLen-1] == 1 {
		return n - MVCCSuffixLen
	}
	return n
}

// TruncatedStateKey holds the index and term of the last entry deleted
// from a replica's Raft log. It lives in the Raft engine, written in the
// same batch as the deletion.
func TruncatedStateKey(regionID uint64) []byte { return raftPrefix(regionID, truncatedStateSuffix) }

// Engines are the two Pebble instances of a store.
type Engines struct {
	KV   *pebble.DB
	Raft *pebble.DB
	// FS and Dir are the filesystem and directory both engines live in;
	// the raft store keeps snapshot files under Dir/snap, on the same
	// filesystem as the KV engine so that they can be ingested.
	FS  vfs.FS
	Dir string

	wal *walFS // the Raft engine's WAL files; nil in memory or on a test FS
}

// OpenEngines opens (creating if needed) the KV engine in dir/kv and the
// Raft engine in dir/raft. The KV engine runs without a write-ahead log:
// everything written to it is either re-derivable from the Raft log (the
// raft store truncates the log only up to what a flush made durable) or
// flushed explicitly (bootstrap).
func OpenEngines(dir string, o Options) (Engines, error) {
	if o.InMemory && o.FS == nil {
		// One in-memory filesystem for both engines and the snapshot
		// files the KV engine ingests.
		o.FS = vfs.NewMem()
	}
	ko := o
	ko.DisableWAL = true
	kv, err := Open(filepath.Join(dir, "kv"), ko)
	if err != nil {
		return Engines{}, err
	}
	ro := o
	ro.CacheBytes = 32 << 20
	raftDir := filepath.Join(dir, "raft")
	var wal *walFS
	if !o.InMemory && o.FS == nil && os.Getenv("STRATA_RAFT_WAL") != "buffered" {
		// A spare holds about one memtable's worth of log.
		if wal, err = newWALFS(vfs.Default, raftDir, memTableSize+memTableSize/8); err != nil {
			kv.Close()
			return Engines{}, err
		}
		ro.FS = wal
	}
	raft, err := Open(raftDir, ro)
	if err != nil {
		kv.Close()
		return Engines{}, err
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	return Engines{KV: kv, Raft: raft, FS: fs, Dir: dir, wal: wal}, nil
}

// Close closes both engines.
func (e Engines) Close() error {
	err := e.Raft.Close()
	if e.wal != nil {
		e.wal.close()
	}
	if err2 := e.KV.Close(); err == nil {
		err = err2
	}
	return err
}

// Key prefixes.
const (
	localPrefix byte = 0x01
	pdPrefix    byte = 0x02

	storeIdentSuffix  byte = 0x01
	regionStateSuffix byte = 0x02
	raftSuffix        byte = 0x03

	hardStateSuffix  byte = 0x01
	applyStateSuffix byte = 0x02
	raftLogSuffix    byte = 0x03
	// 0x04 is RaftLogEnd, the exclusive end of the log span.
	truncatedStateSuffix  byte = 0x05
	pendingSnapshotSuffix byte = 0x06
	mergeStateSuffix      byte = 0x07
	tombstoneSuffix       byte = 0x04
)

// StoreIdentKey holds the store's identity.
func StoreIdentKey() []byte { return []byte{localPrefix, storeIdentSuffix} }

// RegionStateKey holds the descriptor of a local replica's region.
func RegionStateKey(regionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{localPrefix, regionStateSuffix}, regionID)
}

// RegionStatePrefix spans every RegionStateKey.
func RegionStatePrefix() []byte { return []byte{localPrefix, regionStateSuffix} }

// RegionIDFromStateKey extracts the region id from a RegionStateKey.
func RegionIDFromStateKey(k []byte) uint64 { return binary.BigEndian.Uint64(k[2:]) }

func raftPrefix(regionID uint64, suffix byte) []byte {
	b := make([]byte, 0, 19)
	b = append(b, localPrefix, raftSuffix)
	b = binary.BigEndian.AppendUint64(b, regionID)
	return append(b, suffix)
}

// HardStateKey holds the replica's raftpb.HardState.
func HardStateKey(regionID uint64) []byte { return raftPrefix(regionID, hardStateSuffix) }

// ApplyStateKey holds the replica's apply state.
func ApplyStateKey(regionID uint64) []byte { return raftPrefix(regionID, applyStateSuffix) }

// MergeStateKey holds a merge source's kvpb.MergeState (KV engine), from
// its PrepareMerge until the merge commits or rolls back.
func MergeStateKey(regionID uint64) []byte { return raftPrefix(regionID, mergeStateSuffix) }

// RaftLogKey is the key of the log entry at index.
func RaftLogKey(regionID, index uint64) []byte {
	return binary.BigEndian.AppendUint64(raftPrefix(regionID, raftLogSuffix), index)
}

// PDKey is a placement-driver state key.
func PDKey(name string) []byte { return append([]byte{pdPrefix}, name...) }

// ApplyState is what a replica has applied and what it has truncated from
// its log. Each half is persisted where it must move atomically with what
// it describes: the applied index in the KV engine, in the same batch as
// the effects of the entries it covers (EncodeAppliedIndex); the truncated
// index and term in the Raft engine, in the same batch as the deletion of
// the log (EncodeTruncatedState).
type ApplyState struct {
	AppliedIndex   uint64
	TruncatedIndex uint64
	TruncatedTerm  uint64
}

// EncodeAppliedIndex is the persistent form stored at ApplyStateKey.
func EncodeAppliedIndex(index uint64) []byte { return binary.BigEndian.AppendUint64(nil, index) }

// DecodeAppliedIndex parses EncodeAppliedIndex's output.
func DecodeAppliedIndex(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("engine: corrupt apply state (%d bytes)", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// EncodeTruncatedState is the persistent form stored at TruncatedStateKey.
func EncodeTruncatedState(index, term uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), index), term)
}

// DecodeTruncatedState parses EncodeTruncatedState's output.
func DecodeTruncatedState(b []byte) (index, term uint64, err error) {
	if len(b) != 16 {
		return 0, 0, fmt.Errorf("engine: corrupt truncated state (%d bytes)", len(b))
	}
	return binary.BigEndian.Uint64(b[0:8]), binary.BigEndian.Uint64(b[8:16]), nil
}

// GetCopy reads key from r and returns a copy of its value, or nil and
// false when absent.
func GetCopy(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// PendingSnapshotKey holds, in the Raft engine, the header of a snapshot
// whose application to the KV engine is not known to be durable yet.
func PendingSnapshotKey(regionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{localPrefix, pendingSnapshotSuffix}, regionID)
}

// PendingSnapshotPrefix spans every PendingSnapshotKey.
func PendingSnapshotPrefix() []byte { return []byte{localPrefix, pendingSnapshotSuffix} }

// TombstoneKey marks, in the Raft engine, a region whose replica on this
// store was removed: messages to that replica (or an older one) are
// dropped instead of re-creating it.
func TombstoneKey(regionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{localPrefix, tombstoneSuffix}, regionID)
}

// TombstonePrefix spans every TombstoneKey.
func TombstonePrefix() []byte { return []byte{localPrefix, tombstoneSuffix} }

// RaftStatePrefix spans every per-region key of the Raft engine of one region.
func RaftStatePrefix(regionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{localPrefix, raftSuffix}, regionID)
}

// RaftLogEnd is the exclusive upper bound of a region's raft log keys.
func RaftLogEnd(regionID uint64) []byte { return raftPrefix(regionID, raftLogSuffix+1) }

// NewSSTWriter returns a writer of an SST that db can ingest, with the
// options db writes its own tables with (comparer, blocks, filters,
// compression). Keys must be added in order; Close finishes the file.
func NewSSTWriter(db *pebble.DB, f vfs.File) *sstable.Writer {
	return sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
		Comparer:     Comparer,
		TableFormat:  db.TableFormat(),
		BlockSize:    dataBlockSize,
		FilterPolicy: bloom.FilterPolicy(10),
		Compression:  sstable.FastestCompression,
	})
}
