package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Snapshots. A replica that is too far behind for the leader's log (it
// was added, or was down while the log was truncated) is sent the
// region's state instead: the SST files of its spans (Observer.Spans) at
// one applied index, written from a Pebble snapshot of the leader's KV
// engine, never held in memory.
//
// Sender: raft asks Storage.Snapshot; the store generates the files in
// the background under snap/gen-<region>-<term>-<index>/ and hands raft a
// raftpb.Snapshot whose data is a kvpb.SnapshotHeader naming them. The
// transport streams the header and the files (SnapshotFiles) and reports
// the outcome (ReportSnapshot).
//
// Receiver: the transport writes the files under snap/rcv-<same id>/,
// checks their checksums, and hands the MsgSnap to the store (Receive).
// When raft accepts it, the store loop records the snapshot as pending in
// the Raft engine in the round's synced batch, together with the log's
// replacement (truncated at the snapshot's index); then it ingests the
// files, each replacing its span atomically (IngestAndExcise), writes the
// region descriptor and applied index, lets the observer raise its
// in-memory bounds (SnapshotApplied), flushes the KV engine (which has no
// WAL) and only then drops the pending record and the files. A crash in
// between finds the pending record at Open and ingests again.

// snapshotID names a snapshot's files: region, term and index.
func snapshotID(region, term, index uint64) string {
	return fmt.Sprintf("%d-%d-%d", region, term, index)
}

func (s *Store) genDir(id string) string { return s.fs.PathJoin(s.snapDir, "gen-"+id) }

// ReceiveDir is where the transport writes the files of snapshot id.
func (s *Store) ReceiveDir(id string) string { return s.fs.PathJoin(s.snapDir, "rcv-"+id) }

// generateSnapshot starts building a snapshot of p's region in the
// background, unless one is being built.
func (s *Store) generateSnapshot(p *Peer) {
	s.snapMu.Lock()
	if s.snapGen[p.regionID] {
		s.snapMu.Unlock()
		return
	}
	s.snapGen[p.regionID] = true
	s.snapMu.Unlock()
	go func() {
		defer func() {
			s.snapMu.Lock()
			delete(s.snapGen, p.regionID)
			s.snapMu.Unlock()
		}()
		snap, err := s.buildSnapshot(p)
		if err != nil {
			if !s.closed.Load() {
				s.log.Warn("raftstore: cannot generate a snapshot", "region", p.regionID, "err", err)
			}
			return
		}
		p.storage.setSnapshot(snap)
		metricSnapshots.WithLabelValues("generated").Inc()
		s.poke(p)
	}()
}

// buildSnapshot writes the files of a snapshot of p's region as the KV
// engine holds it now.
func (s *Store) buildSnapshot(p *Peer) (*pb.Snapshot, error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	v, ok, err := engine.GetCopy(snap, engine.RegionStateKey(p.regionID))
	if err != nil || !ok {
		return nil, fmt.Errorf("no region state: %v", err)
	}
	region := &kvpb.Region{}
	if err := proto.Unmarshal(v, region); err != nil {
		return nil, err
	}
	v, ok, err = engine.GetCopy(snap, engine.ApplyStateKey(p.regionID))
	if err != nil || !ok {
		return nil, fmt.Errorf("no apply state: %v", err)
	}
	index, err := engine.DecodeAppliedIndex(v)
	if err != nil {
		return nil, err
	}
	term, err := p.storage.Term(index)
	if err != nil {
		return nil, fmt.Errorf("term of applied index %d: %w", index, err)
	}
	// The observer's bounds are read after the snapshot was taken, so they
	// cover every record in it.
	meta := s.obs.SnapshotMeta()
	id := snapshotID(p.regionID, term, index)
	dir := s.genDir(id)
	if err := s.fs.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ms, err := loadMergeState(snap, p.regionID)
	if err != nil {
		return nil, err
	}
	header := &kvpb.SnapshotHeader{Region: region, ObserverMeta: meta, Id: id, MergeState: ms}
	for i, sp := range s.obs.Spans(region) {
		f, err := s.writeSpan(snap, sp, s.fs.PathJoin(dir, fmt.Sprintf("%d.sst", i)))
		if err != nil {
			s.fs.RemoveAll(dir)
			return nil, err
		}
		if f.Name != "" {
			f.Name = fmt.Sprintf("%d.sst", i)
		}
		header.Files = append(header.Files, f)
	}
	data, err := proto.Marshal(header)
	if err != nil {
		return nil, err
	}
	// Drop older generations of this region's snapshot.
	if old, err := s.fs.List(s.snapDir); err == nil {
		prefix := fmt.Sprintf("gen-%d-", p.regionID)
		for _, name := range old {
			if strings.HasPrefix(name, prefix) && name != "gen-"+id {
				s.fs.RemoveAll(s.fs.PathJoin(s.snapDir, name))
			}
		}
	}
	return &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{
		ConfState: confStateOf(region), Index: proto.Uint64(index), Term: proto.Uint64(term)}}, nil
}

// writeSpan writes the keys of sp in snap to an SST at path. An empty span
// writes no file (Name empty).
func (s *Store) writeSpan(snap *pebble.Snapshot, sp Span, path string) (*kvpb.SnapshotFile, error) {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.First() {
		return &kvpb.SnapshotFile{}, it.Error()
	}
	f, err := s.fs.Create(path, "snapshot")
	if err != nil {
		return nil, err
	}
	w := engine.NewSSTWriter(s.db, f)
	for ; it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			w.Close()
			return nil, err
		}
		if err := w.Set(it.Key(), v); err != nil {
			w.Close()
			return nil, err
		}
	}
	if err := it.Error(); err != nil {
		w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return s.describeFile(path)
}

// describeFile returns the size and checksum of a snapshot file.
func (s *Store) describeFile(path string) (*kvpb.SnapshotFile, error) {
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	return &kvpb.SnapshotFile{Name: path, Size: uint64(n), Crc32C: h.Sum32()}, nil
}

// SnapshotFiles opens the files of a snapshot this store generated, in
// the order its header lists them (the transport streams them). The
// caller closes them.
func (s *Store) SnapshotFiles(h *kvpb.SnapshotHeader) ([]io.ReadCloser, error) {
	var out []io.ReadCloser
	for _, f := range h.Files {
		if f.Name == "" {
			continue
		}
		r, err := s.fs.Open(s.fs.PathJoin(s.genDir(h.Id), f.Name))
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// WriteSnapshotFile creates file f of received snapshot h in ReceiveDir,
// for the transport to fill. The caller closes it and checks it with
// CheckSnapshotFile.
func (s *Store) WriteSnapshotFile(h *kvpb.SnapshotHeader, f *kvpb.SnapshotFile) (io.WriteCloser, error) {
	if strings.ContainsAny(f.Name, "/\\") || strings.Contains(h.Id, "..") || strings.ContainsAny(h.Id, "/\\") {
		return nil, fmt.Errorf("raftstore: bad snapshot file name %q/%q", h.Id, f.Name)
	}
	dir := s.ReceiveDir(h.Id)
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return s.fs.Create(s.fs.PathJoin(dir, f.Name), "snapshot")
}

// CheckSnapshotFile verifies a received file's size and checksum.
func (s *Store) CheckSnapshotFile(h *kvpb.SnapshotHeader, f *kvpb.SnapshotFile) error {
	got, err := s.describeFile(s.fs.PathJoin(s.ReceiveDir(h.Id), f.Name))
	if err != nil {
		return err
	}
	if got.Size != f.Size || got.Crc32C != f.Crc32C {
		return fmt.Errorf("raftstore: snapshot %s file %s: %d bytes crc %x, want %d bytes crc %x",
			h.Id, f.Name, got.Size, got.Crc32C, f.Size, f.Crc32C)
	}
	return nil
}

// DiscardReceived removes the files of a received snapshot that was not
// handed to the store.
func (s *Store) DiscardReceived(id string) { s.fs.RemoveAll(s.ReceiveDir(id)) }

// applySnapshot ingests a snapshot raft accepted for p (its Raft state was
// persisted this round) and makes p serve the region it describes.
func (s *Store) applySnapshot(p *Peer, snap *pb.Snapshot) error {
	h := &kvpb.SnapshotHeader{}
	if err := proto.Unmarshal(snap.Data, h); err != nil {
		return fmt.Errorf("raftstore: region %d: corrupt snapshot header: %w", p.regionID, err)
	}
	index := snap.GetMetadata().GetIndex()
	if err := s.ingestSnapshot(h, index); err != nil {
		return fmt.Errorf("raftstore: region %d: apply snapshot %s: %w", p.regionID, h.Id, err)
	}
	p.merge.Store(h.MergeState)
	s.noteMerging(p)
	p.region.Store(h.Region)
	p.initialized.Store(true)
	s.layoutChanged()
	p.storage.setApplied(index)
	p.mu.Lock()
	for _, rp := range h.Region.Peers {
		p.peerStores[rp.Id] = rp.StoreId
	}
	p.mu.Unlock()
	metricSnapshots.WithLabelValues("applied").Inc()
	return nil
}

// ingestSnapshot replaces the region's spans by the snapshot's files,
// records its descriptor and applied index, and makes all of it durable
// before dropping the pending record and the files. Idempotent: Open runs
// it again for a pending record a crash left.
func (s *Store) ingestSnapshot(h *kvpb.SnapshotHeader, index uint64) error {
	ctx := context.Background()
	spans := s.obs.Spans(h.Region)
	if len(spans) != len(h.Files) {
		return fmt.Errorf("%d files for %d spans", len(h.Files), len(spans))
	}
	dir := s.ReceiveDir(h.Id)
	for i, sp := range spans {
		kr := pebble.KeyRange{Start: sp.Start, End: sp.End}
		if h.Files[i].Name == "" {
			if err := s.db.Excise(ctx, kr); err != nil {
				return err
			}
			continue
		}
		path := s.fs.PathJoin(dir, h.Files[i].Name)
		if _, err := s.db.IngestAndExcise(ctx, []string{path}, nil, nil, kr); err != nil {
			return err
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := stageRegion(b, h.Region); err != nil {
		return err
	}
	if err := b.Set(engine.ApplyStateKey(h.Region.Id), engine.EncodeAppliedIndex(index), nil); err != nil {
		return err
	}
	if err := stageMergeState(b, h.Region.Id, h.MergeState); err != nil {
		return err
	}
	if err := s.obs.SnapshotApplied(spans, h.ObserverMeta, b); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	if err := s.db.Flush(); err != nil {
		return err
	}
	if err := s.raftDB.Delete(engine.PendingSnapshotKey(h.Region.Id), pebble.Sync); err != nil {
		return err
	}
	return s.fs.RemoveAll(dir)
}

// stageMergeState writes a region's merge state (nil: deletes it).
func stageMergeState(b *pebble.Batch, regionID uint64, ms *kvpb.MergeState) error {
	if ms == nil {
		return b.Delete(engine.MergeStateKey(regionID), nil)
	}
	data, err := proto.Marshal(ms)
	if err != nil {
		return err
	}
	return b.Set(engine.MergeStateKey(regionID), data, nil)
}

// finishPendingSnapshots ingests the snapshots a crash interrupted (Open).
func (s *Store) finishPendingSnapshots() error {
	prefix := engine.PendingSnapshotPrefix()
	it, err := s.raftDB.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: []byte{prefix[0], prefix[1] + 1}})
	if err != nil {
		return err
	}
	var pending []*pb.Snapshot
	for it.First(); it.Valid(); it.Next() {
		snap := &pb.Snapshot{}
		if err := proto.Unmarshal(it.Value(), snap); err != nil {
			it.Close()
			return fmt.Errorf("raftstore: corrupt pending snapshot: %w", err)
		}
		pending = append(pending, snap)
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, snap := range pending {
		h := &kvpb.SnapshotHeader{}
		if err := proto.Unmarshal(snap.Data, h); err != nil {
			return fmt.Errorf("raftstore: corrupt pending snapshot header: %w", err)
		}
		if err := s.ingestSnapshot(h, snap.GetMetadata().GetIndex()); err != nil {
			return fmt.Errorf("raftstore: region %d: finish applying snapshot %s: %w", h.Region.GetId(), h.Id, err)
		}
	}
	return nil
}

// removeStaleSnapshotFiles deletes generated snapshots (a new leader
// generates its own) and received ones no pending record needs (Open,
// after finishPendingSnapshots).
func (s *Store) removeStaleSnapshotFiles() {
	names, err := s.fs.List(s.snapDir)
	if err != nil {
		return
	}
	for _, name := range names {
		s.fs.RemoveAll(s.fs.PathJoin(s.snapDir, name))
	}
}

// snapshotOverlaps reports whether the region a snapshot describes
// overlaps an initialized replica of another region on this store (a
// region this store has not seen split yet, say): such a snapshot is
// refused until the local replica catches up, as TiKV does.
func (s *Store) snapshotOverlaps(r *kvpb.Region) bool {
	return s.overlappingPeer(r, r.Id) != nil
}

// destroyMergedAway queues for destruction the local replicas a snapshot
// of r (or a leader's message for r, which this store has no replica of)
// overlaps that r's range covers at a newer version: r took their range
// in by a merge this store did not apply in its log (its replica of r was
// too far behind and gets the merged region by snapshot, or was removed
// before it took a frozen source in). A region
// split off r later would have a newer version than r's, and a region r
// was split from an older version but a wider range, so neither is
// touched. The snapshot is refused until they are gone (the leader sends
// it again), and it brings their data back.
//
// With orphansOnly (a leader's message, not a snapshot), only frozen merge
// sources whose target has no initialized replica here go: a target
// replica here that has still to apply the merge needs its source.
func (s *Store) destroyMergedAway(r *kvpb.Region, orphansOnly bool) {
	for _, q := range s.Peers() {
		if q.regionID == r.Id || !q.Initialized() || q.removed.Load() {
			continue
		}
		if orphansOnly {
			s.mu.RLock()
			orphan := s.orphanedSourceLocked(q)
			s.mu.RUnlock()
			if !orphan {
				continue
			}
		}
		qr := q.Region()
		if s.dataOverlaps(qr, r) && coveredAtNewer(qr, r) {
			s.queueStale(q, 0, fmt.Sprintf("region %d at version %d covers its range", r.Id, r.Epoch.GetVersion()))
		}
	}
}

// orphanedSourceLocked reports whether q is a merge's source frozen here
// whose target has no initialized replica on this store: nothing here
// will apply the CommitMerge that takes it in (a target replica that will
// needs its store's source replica, catchUpSource). s.mu held.
func (s *Store) orphanedSourceLocked(q *Peer) bool {
	ms := q.merge.Load()
	if ms == nil {
		return false
	}
	t, ok := s.peers[ms.Target.GetId()]
	return !ok || !t.Initialized() || t.removed.Load()
}

// coveredAtNewer reports whether r's range covers q's and r's version is
// newer than q's.
func coveredAtNewer(q, r *kvpb.Region) bool {
	inside := bytes.Compare(q.StartKey, r.StartKey) >= 0 &&
		(len(r.EndKey) == 0 || (len(q.EndKey) > 0 && bytes.Compare(q.EndKey, r.EndKey) <= 0))
	return inside && q.Epoch.GetVersion() < r.Epoch.GetVersion()
}

// dataOverlaps reports whether two regions' data share engine keys (their
// Observer spans overlap). Regions of different kinds (the system region
// and the data regions) may cover the same user keys without sharing any
// data.
func (s *Store) dataOverlaps(a, b *kvpb.Region) bool {
	for _, x := range s.obs.Spans(a) {
		for _, y := range s.obs.Spans(b) {
			if bytes.Compare(x.Start, y.End) < 0 && bytes.Compare(y.Start, x.End) < 0 {
				return true
			}
		}
	}
	return false
}

// destroyPeer removes a replica this store no longer holds (a membership
// change removed it): its Raft state goes and a tombstone stays (so late
// messages do not re-create it), then its data. Store loop.
func (s *Store) destroyPeer(p *Peer) error {
	p.removed.Store(true)
	p.mu.Lock()
	p.failProposalsLocked(&RegionErr{E: &kvpb.RegionError{Message: fmt.Sprintf("region %d not found", p.regionID),
		RegionNotFound: &kvpb.RegionNotFound{RegionId: p.regionID}}})
	p.failReadsLocked(p.notLeaderError())
	wasReady := p.leaderReady.Swap(false)
	p.mu.Unlock()
	if wasReady && s.onLeader != nil {
		s.onLeader(p.regionID, false)
	}
	s.mu.Lock()
	if s.peers[p.regionID] == p {
		delete(s.peers, p.regionID)
		s.publishPeers()
	}
	s.tombstones[p.regionID] = p.id
	s.mu.Unlock()
	if err := s.writeTombstone(p); err != nil {
		return err
	}
	if !p.Initialized() {
		return nil
	}
	return s.destroyData(p.Region())
}

// destroyData deletes a region's data and its descriptor from the KV
// engine, durably.
func (s *Store) destroyData(r *kvpb.Region) error {
	spans := s.obs.Spans(r)
	for _, sp := range spans {
		if err := s.db.Excise(context.Background(), pebble.KeyRange{Start: sp.Start, End: sp.End}); err != nil {
			return err
		}
	}
	if err := s.obs.SpansDestroyed(spans); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Delete(engine.RegionStateKey(r.Id), nil); err != nil {
		return err
	}
	if err := b.Delete(engine.ApplyStateKey(r.Id), nil); err != nil {
		return err
	}
	if err := b.Delete(engine.MergeStateKey(r.Id), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	return s.db.Flush()
}

// loadTombstones reads the tombstones of removed replicas (Open).
func (s *Store) loadTombstones() error {
	prefix := engine.TombstonePrefix()
	it, err := s.raftDB.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: []byte{prefix[0], prefix[1] + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != len(prefix)+8 || len(v) != 8 {
			it.Close()
			return errors.New("raftstore: corrupt tombstone")
		}
		s.tombstones[binary.BigEndian.Uint64(k[len(prefix):])] = binary.BigEndian.Uint64(v)
	}
	return it.Close()
}

// writeTombstone durably replaces p's Raft state with a tombstone (late
// messages to it are then dropped, and a restart does not load it).
func (s *Store) writeTombstone(p *Peer) error {
	wb := s.raftDB.NewBatch()
	defer wb.Close()
	if err := wb.Set(engine.TombstoneKey(p.regionID), binary.BigEndian.AppendUint64(nil, p.id), nil); err != nil {
		return err
	}
	if err := wb.DeleteRange(engine.RaftStatePrefix(p.regionID), engine.RaftStatePrefix(p.regionID+1), nil); err != nil {
		return err
	}
	if err := wb.Delete(engine.PendingSnapshotKey(p.regionID), nil); err != nil {
		return err
	}
	return wb.Commit(pebble.Sync)
}
