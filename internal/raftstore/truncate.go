package raftstore

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// Log truncation. The KV engine has no WAL of its own (the Raft log is
// its WAL), so a replica's log may only be deleted up to an applied index
// a completed KV-engine flush made durable. Once a region's log passes a
// size threshold the store asks for a flush, remembering for each region
// the index its log may be truncated to, and when the flush completes
// deletes the logs up to those indexes.
//
// The index: on a follower, its applied index (its log serves no one
// else). On a leader, also no further than the slowest follower that is
// keeping up (recently active, and less than maxLagEntries behind): a
// follower that is down or far behind is not waited for, and will be
// sent a snapshot instead. Truncation is decided by each replica for
// itself, not through the log: every store flushes on its own schedule.

// A region's log is truncated once it holds this many entries or bytes
// past its truncated index. Truncation needs a flush of the KV engine, so
// the bounds are set near a memtable's worth of writes: smaller ones would
// flush tiny memtables into many small tables. The count matters for small
// entries: at 32k, sysbench's updates (about 300 bytes an entry) forced a
// flush of a 10 MiB memtable every few seconds, and each of the small L0
// tables it made was compacted with all of Lbase (/debug/lsm showed a
// write amplification of 12.5 into L5); at 256k the size bound decides.
var (
	raftLogGCCountThreshold uint64 = 256 << 10
	raftLogGCSizeThreshold  uint64 = 48 << 20
	// maxLagEntries: a follower further behind than this does not hold
	// truncation back; it catches up by snapshot.
	maxLagEntries uint64 = 64 << 10
)

// The KV memtable is also flushed early, once it is older than
// memtableMaxAge and holds at least agedFlushBytes, while range scans run
// (at least agedFlushScannedKeys keys read since the last flush). Every
// update adds a version of its row, and a scan steps over the older
// versions of each key it reads. In an SST that step is cheap (the data
// block marks where a key's versions end); in the memtable skiplist it is
// a Next per version and then a seek. sysbench oltp_read_write updates the
// rows its range scans read: with 64 MiB memtables filled in ~40 s, a hot
// row had tens of versions in the memtable, and stepping over them took
// half of the node's CPU (arenaskl Next and SeekGE under mvcc.Scan).
// bench/ab.sh, 4 x 100000 rows, 8 threads, median of 2-3 pairs:
//   - 5 s / 8 MiB against no early flush: read_write 1.283 (90 s runs),
//     update_index 0.989;
//   - 2 s / 4 MiB against 5 s / 8 MiB: read_write 1.051, update_index
//     0.959 (more, smaller tables to compact). Writes without scans
//     therefore keep whole memtables: the rule needs scans.
var (
	memtableMaxAge              = 2 * time.Second
	agedFlushBytes       uint64 = 4 << 20
	agedFlushScannedKeys uint64 = 64 << 10
)

// TruncateLogs asks the store to flush the KV engine and truncate every
// region's log as far as it may now, whatever the logs' sizes.
func (s *Store) TruncateLogs() {
	s.truncateNow.Store(true)
	s.wake()
}

// compactIndex is the index p's log may be truncated to now (0: none).
func (p *Peer) compactIndex(applied uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isLeader {
		return applied
	}
	to := applied
	merging := p.merge.Load() != nil
	p.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		// A merging source keeps what every replica lacks: its
		// CommitMerge carries those entries (merge.go).
		if id == p.id || (!merging && (!pr.RecentActive || pr.Match+maxLagEntries < applied)) {
			return
		}
		if pr.Match < to {
			to = pr.Match
		}
	})
	return to
}

// maybeRequestFlush starts a KV-engine flush when some region's log has
// grown past raftLogGCCountThreshold entries or raftLogGCSizeThreshold
// bytes beyond its truncated index, remembering every region's compact
// index at this moment: once the flush completes, everything applied up
// to those indexes is durable in the KV engine and the log below them can
// go (truncateLogs).
func (s *Store) maybeRequestFlush(peers []*Peer) {
	if s.flushDone != nil {
		return
	}
	aged := s.memtableAged()
	force := s.truncateNow.Swap(false)
	if aged || force {
		// peers are the replicas this round looked at; the sleeping
		// ones count now too.
		peers = s.Peers()
	}
	var compact map[uint64]uint64
	for _, p := range peers {
		if !p.Initialized() || p.removed.Load() {
			continue
		}
		// A sleeping replica's log does not grow: it is looked at when
		// the memtable is flushed for its age (or on request), not every
		// round.
		if p.Asleep() && !aged && !force {
			continue
		}
		st := p.storage.applyState()
		n, size := p.storage.logSize()
		if st.AppliedIndex <= st.TruncatedIndex ||
			(!aged && !force && n < raftLogGCCountThreshold && size < raftLogGCSizeThreshold) {
			continue
		}
		to := p.compactIndex(st.AppliedIndex)
		if to <= st.TruncatedIndex {
			continue
		}
		if compact == nil {
			compact = make(map[uint64]uint64)
		}
		compact[p.regionID] = to
	}
	if compact == nil && !aged {
		return
	}
	token := s.obs.FlushStarting()
	done, err := s.db.AsyncFlush()
	if err != nil {
		s.log.Warn("raftstore: cannot flush the KV engine; log truncation postponed", "err", err)
		return
	}
	s.flushDone, s.flushCompact, s.flushToken = done, compact, token
	s.restartMemtableAge()
}

// memtableAged reports whether the KV memtable is due for an early flush
// (see memtableMaxAge). A flush the engine started on its own (its
// memtable filled) restarts the clock instead.
func (s *Store) memtableAged() bool {
	if s.memtableBytes < agedFlushBytes ||
		time.Since(s.memtableSince) < memtableMaxAge ||
		s.obs.ScannedKeys()-s.scannedAt < agedFlushScannedKeys {
		return false
	}
	if n := s.db.Metrics().Flush.Count; n != s.flushes {
		s.restartMemtableAge()
		s.flushes = n
		return false
	}
	return true
}

// restartMemtableAge starts the early-flush clock for a new memtable.
func (s *Store) restartMemtableAge() {
	s.memtableBytes, s.memtableSince = 0, time.Now()
	s.scannedAt = s.obs.ScannedKeys()
}

// truncateLogs deletes log entries up to the given indexes, which a
// completed KV-engine flush made durable. The deletion and the new
// truncated state are one Raft-engine batch.
func (s *Store) truncateLogs(compact map[uint64]uint64) error {
	b := s.raftDB.NewBatch()
	defer b.Close()
	type cut struct {
		ps          *peerStorage
		index, term uint64
	}
	var cuts []cut
	for id, to := range compact {
		p, ok := s.Peer(id)
		if !ok || p.removed.Load() {
			continue
		}
		st := p.storage.applyState()
		if to <= st.TruncatedIndex || to > st.AppliedIndex {
			continue
		}
		term := p.storage.termAt(to)
		if term == 0 {
			continue
		}
		if err := b.DeleteRange(engine.RaftLogKey(id, st.TruncatedIndex+1), engine.RaftLogKey(id, to+1), nil); err != nil {
			return err
		}
		if err := b.Set(engine.TruncatedStateKey(id), engine.EncodeTruncatedState(to, term), nil); err != nil {
			return err
		}
		cuts = append(cuts, cut{p.storage, to, term})
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	for _, c := range cuts {
		c.ps.truncateTo(c.index, c.term)
	}
	return nil
}
