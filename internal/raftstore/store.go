package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	// raftInitIndex is the index a freshly bootstrapped region starts at, as
	// if a snapshot at (index 5, term 5) had been applied.
	raftInitIndex = 5
	raftInitTerm  = 5

	tickInterval   = 100 * time.Millisecond
	electionTicks  = 10
	heartbeatTicks = 2

	// maxChildrenRemembered bounds how many regions split off a region are
	// named in its EpochNotMatch errors.
	maxChildrenRemembered = 16
)

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

// ErrStopped is returned for proposals when the store is shutting down.
var ErrStopped = errors.New("raftstore: store stopped")

// ErrInvalidSplitKey is wrapped by Split errors for a split key that is not
// strictly inside the region (empty, the region's start key, or outside
// it): such a split would leave one half empty.
var ErrInvalidSplitKey = errors.New("raftstore: invalid split key")

// errEpochChanged marks a command refused at apply because the region's
// epoch moved on since it was proposed; the proposer gets EpochNotMatch.
var errEpochChanged = errors.New("raftstore: region epoch changed")

var (
	metricFsyncSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "fsync_seconds",
		Help:    "Latency of the group-commit fsync of Raft entries.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	metricEntriesPerSync = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "entries_per_fsync",
		Help:    "Raft entries persisted by one group-commit fsync.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	metricProposeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "propose_seconds",
		Help:    "Time from proposing a write to its being applied on this replica.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	metricProposals = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "proposals_total",
		Help: "Write proposals applied.",
	})
)

func init() {
	prometheus.MustRegister(metricFsyncSeconds, metricEntriesPerSync, metricProposals, metricProposeSeconds)
}

// Transport sends Raft messages to peers on other stores.
type Transport interface {
	Send(msgs []*pb.Message)
}

// Peer is a replica of one region on this store.
type Peer struct {
	id      uint64
	storage *peerStorage
	store   *Store

	region atomic.Pointer[kvpb.Region]
	// children are the ids of the latest regions split off this one; their
	// descriptors go into EpochNotMatch errors so that a client learns the
	// new layout without asking PD.
	children atomic.Pointer[[]uint64]

	mu        sync.Mutex
	rn        *raft.RawNode
	proposals map[uint64]*proposal

	// leaderReady is true while this replica is leader and has applied an
	// entry of its own term: only then does the applied state reflect every
	// committed write, so reads may be served from the engine.
	leaderReady atomic.Bool
	isLeader    bool
	term        uint64
	leaderID    atomic.Uint64
}

type proposal struct {
	done chan error
	// regions is what an applied split produced (left, right); set before
	// done is signalled.
	regions []*kvpb.Region
	// early: done is signalled once the entry is committed, durable here
	// and certain to apply (ProposeCommitted); acked records that it was.
	early, acked bool
	// release, when set, runs once the entry is applied or the proposal
	// fails, after done is signalled (ProposeCommitted).
	release func()
}

// finish signals the proposer and runs release. p.mu held.
func (prop *proposal) finish(err error) {
	if !prop.acked {
		prop.done <- err
	}
	if prop.release != nil {
		prop.release()
		prop.release = nil
	}
}

// Region returns the replica's current region descriptor (do not mutate).
func (p *Peer) Region() *kvpb.Region { return p.region.Load() }

// ID is the replica's raft peer id.
func (p *Peer) ID() uint64 { return p.id }

// Store owns the engine and all local replicas and runs the store loop.
type Store struct {
	db      *pebble.DB // KV engine: region state, apply state, data
	raftDB  *pebble.DB // Raft engine: logs and hard states
	storeID uint64
	log     *slog.Logger

	mu    sync.RWMutex
	peers map[uint64]*Peer
	// peerSnap is a copy of peers for Peer, which every request calls:
	// replaced (under mu) whenever peers changes, read without a lock.
	peerSnap atomic.Pointer[map[uint64]*Peer]

	transport    Transport
	onApply      func(repr []byte) error
	beforeApply  func(repr []byte) error
	beforeCommit func(ab *pebble.Batch) error
	// flushStarting, flushDone: Config's; flushToken is flushStarting's
	// result for the pending flush (flushDone below).
	flushStarting func() uint64
	flushDoneHook func(uint64)
	flushToken    uint64

	// Log truncation waits for a KV-engine flush (see truncateLogs):
	// flushDone is the pending flush, flushApplied the applied index of
	// each region when it was requested.
	flushDone    <-chan struct{}
	flushApplied map[uint64]uint64
	// The early flush (memtableMaxAge), store loop only: memtableBytes is
	// how many bytes the apply path committed to the KV engine since the
	// last flush, memtableSince when that flush was requested (or the
	// engine was seen to flush on its own), scannedAt the scanned-key
	// count then, and flushes the engine's flush count after it.
	memtableBytes uint64
	memtableSince time.Time
	scannedAt     uint64
	flushes       int64
	scannedKeys   func() uint64
	notify        chan struct{}
	stop          chan struct{}
	stopped       chan struct{}
	nextProp      atomic.Uint64
	closed        atomic.Bool
}

// Config configures a Store.
type Config struct {
	StoreID   uint64
	Transport Transport // nil when every region has only local replicas
	Logger    *slog.Logger
	// OnApply, when set, sees the write batch representation of every
	// applied proposal, after it is committed to the engine and before its
	// proposer is woken (mvcc.LockSet uses it).
	OnApply func(repr []byte) error
	// BeforeApply, when set, sees the same representations as OnApply,
	// each before the apply batch holding it commits to the engine (the
	// version cache of mvcc.LockSet uses it).
	BeforeApply func(repr []byte) error
	// BeforeCommit, when set, is called with each apply batch after
	// BeforeApply has seen every representation in it, just before it
	// commits; it may add records of its own, which commit atomically
	// with the batch (mvcc.LockSet persists its timestamp ceiling so).
	BeforeCommit func(ab *pebble.Batch) error
	// ScannedKeys, when set, counts the keys range scans have read from
	// the KV engine so far (mvcc.LockSet.ScannedKeys); the store flushes
	// its memtable early only while that count grows (memtableMaxAge).
	ScannedKeys func() uint64
	// FlushStarting, when set, is called on the store loop, between apply
	// rounds, right before each KV-engine flush the store requests;
	// FlushDone gets its result once that flush has completed, when
	// everything applied before it is in the SSTs
	// (mvcc.RecentWrites.FlushStarting).
	FlushStarting func() uint64
	FlushDone     func(uint64)
}

// BootstrapRegion writes the initial state of a region with a single
// local voter, as part of first-time store initialization. It must run
// before Open.
func BootstrapRegion(eng engine.Engines, region *kvpb.Region) error {
	hs := &pb.HardState{Term: proto.Uint64(raftInitTerm), Commit: proto.Uint64(raftInitIndex)}
	hsData, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	rb := eng.Raft.NewBatch()
	defer rb.Close()
	if err := rb.Set(engine.HardStateKey(region.Id), hsData, nil); err != nil {
		return err
	}
	if err := rb.Set(engine.TruncatedStateKey(region.Id), engine.EncodeTruncatedState(raftInitIndex, raftInitTerm), nil); err != nil {
		return err
	}
	if err := rb.Commit(pebble.Sync); err != nil {
		return err
	}
	b := eng.KV.NewBatch()
	defer b.Close()
	data, err := proto.Marshal(region)
	if err != nil {
		return err
	}
	if err := b.Set(engine.RegionStateKey(region.Id), data, nil); err != nil {
		return err
	}
	if err := b.Set(engine.ApplyStateKey(region.Id), engine.EncodeAppliedIndex(raftInitIndex), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	// The KV engine has no WAL: a flush makes the bootstrap durable.
	return eng.KV.Flush()
}

// Open loads every replica persisted in the engines and starts the store
// loop.
func Open(eng engine.Engines, cfg Config) (*Store, error) {
	db := eng.KV
	s := &Store{
		db:            db,
		raftDB:        eng.Raft,
		storeID:       cfg.StoreID,
		log:           cfg.Logger,
		peers:         make(map[uint64]*Peer),
		transport:     cfg.Transport,
		onApply:       cfg.OnApply,
		beforeApply:   cfg.BeforeApply,
		beforeCommit:  cfg.BeforeCommit,
		flushStarting: cfg.FlushStarting,
		flushDoneHook: cfg.FlushDone,
		scannedKeys:   cfg.ScannedKeys,
		notify:        make(chan struct{}, 1),
		stop:          make(chan struct{}),
		stopped:       make(chan struct{}),
	}
	s.memtableSince, s.flushes = time.Now(), db.Metrics().Flush.Count
	s.publishPeers()
	if s.log == nil {
		s.log = slog.Default()
	}
	// Proposal ids only need to be unique among proposals that can be in
	// flight at once, including entries replayed after a restart; starting
	// from the clock keeps a replayed entry from waking a new proposal.
	s.nextProp.Store(uint64(time.Now().UnixNano()))
	iter, err := db.NewIter(&pebble.IterOptions{
		LowerBound: engine.RegionStatePrefix(),
		UpperBound: []byte{engine.RegionStatePrefix()[0], engine.RegionStatePrefix()[1] + 1},
	})
	if err != nil {
		return nil, err
	}
	var regions []*kvpb.Region
	for iter.First(); iter.Valid(); iter.Next() {
		r := &kvpb.Region{}
		if err := proto.Unmarshal(iter.Value(), r); err != nil {
			iter.Close()
			return nil, fmt.Errorf("raftstore: corrupt region state: %w", err)
		}
		regions = append(regions, r)
	}
	if err := iter.Close(); err != nil {
		return nil, err
	}
	for _, r := range regions {
		p, err := s.newPeer(r)
		if err != nil {
			return nil, err
		}
		s.peers[r.Id] = p
	}
	s.publishPeers()
	// A region with this store as its only voter elects itself at once.
	for _, p := range s.peers {
		if len(p.Region().Peers) == 1 {
			p.mu.Lock()
			err := p.rn.Campaign()
			p.mu.Unlock()
			if err != nil {
				return nil, err
			}
		}
	}
	go s.run()
	s.wake()
	return s, nil
}

func (s *Store) newPeer(r *kvpb.Region) (*Peer, error) {
	var local *kvpb.Peer
	conf := &pb.ConfState{}
	for _, rp := range r.Peers {
		conf.Voters = append(conf.Voters, rp.Id)
		if rp.StoreId == s.storeID {
			local = rp
		}
	}
	if local == nil {
		return nil, fmt.Errorf("raftstore: region %d has no replica on store %d", r.Id, s.storeID)
	}
	ps, err := loadPeerStorage(engine.Engines{KV: s.db, Raft: s.raftDB}, r.Id, conf)
	if err != nil {
		return nil, err
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        local.Id,
		ElectionTick:              electionTicks,
		HeartbeatTick:             heartbeatTicks,
		Storage:                   ps,
		Applied:                   ps.apply.AppliedIndex,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 256 << 20,
		MaxCommittedSizePerReady:  64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		Logger:                    raftLogger{s.log.With("region", r.Id)},
	})
	if err != nil {
		return nil, err
	}
	p := &Peer{id: local.Id, storage: ps, store: s, rn: rn, proposals: make(map[uint64]*proposal)}
	p.region.Store(r)
	return p, nil
}

// Peer returns the local replica of a region.
func (s *Store) Peer(regionID uint64) (*Peer, bool) {
	p, ok := (*s.peerSnap.Load())[regionID]
	return p, ok
}

// publishPeers makes the current peers what Peer sees. s.mu held for
// writing, or the store not yet shared.
func (s *Store) publishPeers() {
	snap := make(map[uint64]*Peer, len(s.peers))
	for id, p := range s.peers {
		snap[id] = p
	}
	s.peerSnap.Store(&snap)
}

// Regions returns the descriptors of all local replicas, ordered by start key.
func (s *Store) Regions() []*kvpb.Region {
	s.mu.RLock()
	out := make([]*kvpb.Region, 0, len(s.peers))
	for _, p := range s.peers {
		out = append(out, p.Region())
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].StartKey, out[j].StartKey) < 0 })
	return out
}

// LeaderOf returns the raft peer id this replica believes leads its region
// (0 when unknown).
func (p *Peer) LeaderOf() uint64 { return p.leaderID.Load() }

// Check validates a request against one snapshot of the replica's region
// and returns that snapshot: the client's epoch (when given) must be
// current, this replica must be the region's leader and ready to serve,
// and every key must be in the region. A caller that goes on to read or
// propose must use the returned region (its range for clipping, its epoch
// for Propose), not a later Region(), which a split may have changed.
func (p *Peer) Check(ctx *kvpb.Context, keys ...[]byte) (*kvpb.Region, *kvpb.RegionError) {
	r := p.Region()
	if ctx != nil && ctx.RegionEpoch != nil {
		e := r.Epoch
		if ctx.RegionEpoch.Version != e.GetVersion() || ctx.RegionEpoch.ConfVer != e.GetConfVer() {
			return nil, p.epochNotMatch(r)
		}
	}
	if !p.leaderReady.Load() {
		nl := &kvpb.NotLeader{RegionId: r.Id}
		if lid := p.leaderID.Load(); lid != 0 && lid != p.id {
			for _, rp := range r.Peers {
				if rp.Id == lid {
					nl.Leader = rp
				}
			}
		}
		return nil, &kvpb.RegionError{Message: fmt.Sprintf("peer %d is not the ready leader of region %d", p.id, r.Id), NotLeader: nl}
	}
	for _, k := range keys {
		if rerr := keyInRegion(r, k); rerr != nil {
			return nil, rerr
		}
	}
	return r, nil
}

// CheckRequest is Check without keys.
func (p *Peer) CheckRequest(ctx *kvpb.Context) *kvpb.RegionError {
	_, rerr := p.Check(ctx)
	return rerr
}

// CheckKey reports KeyNotInRegion when key is outside the region.
func (p *Peer) CheckKey(key []byte) *kvpb.RegionError { return keyInRegion(p.Region(), key) }

func keyInRegion(r *kvpb.Region, key []byte) *kvpb.RegionError {
	if bytes.Compare(key, r.StartKey) < 0 || (len(r.EndKey) > 0 && bytes.Compare(key, r.EndKey) >= 0) {
		return &kvpb.RegionError{
			Message:        fmt.Sprintf("key %q is not in region %d", key, r.Id),
			KeyNotInRegion: &kvpb.KeyNotInRegion{Key: key, RegionId: r.Id, StartKey: r.StartKey, EndKey: r.EndKey},
		}
	}
	return nil
}

// epochNotMatch is the error for a request or proposal made under an older
// epoch of r. It names r and the regions split off it (as they are now),
// which together cover the range an older epoch of r covered when r's
// only changes were splits.
func (p *Peer) epochNotMatch(r *kvpb.Region) *kvpb.RegionError {
	current := []*kvpb.Region{r}
	if ids := p.children.Load(); ids != nil && p.store != nil {
		for _, id := range *ids {
			if c, ok := p.store.Peer(id); ok {
				current = append(current, c.Region())
			}
		}
	}
	return &kvpb.RegionError{
		Message:       fmt.Sprintf("epoch not match for region %d (now version %d)", r.Id, r.Epoch.GetVersion()),
		EpochNotMatch: &kvpb.EpochNotMatch{CurrentRegions: current},
	}
}

// NotLeaderError builds the region error for a proposal that raft dropped.
func (p *Peer) notLeaderError() *RegionErr {
	return &RegionErr{E: &kvpb.RegionError{
		Message:   fmt.Sprintf("peer %d is not leader of region %d", p.id, p.Region().Id),
		NotLeader: &kvpb.NotLeader{RegionId: p.Region().Id},
	}}
}

// RegionErr wraps a region error returned from Propose.
type RegionErr struct{ E *kvpb.RegionError }

func (e *RegionErr) Error() string { return e.E.Message }

// Engine returns the store's Pebble DB (reads of applied state).
func (s *Store) Engine() *pebble.DB { return s.db }

// Propose replicates the writes in batch through the region's Raft group
// and returns once they are committed (fsynced on a quorum) and applied on
// this replica. epoch is the region epoch the batch was computed under
// (the one Check returned): if a split changes the region before the entry
// is applied, the entry is refused on every replica and Propose returns a
// *RegionErr with EpochNotMatch. The batch is not used after Propose
// returns.
func (s *Store) Propose(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, batch *pebble.Batch) error {
	if s.closed.Load() {
		return ErrStopped
	}
	if r := p.Region(); epoch.GetVersion() != r.Epoch.GetVersion() {
		return &RegionErr{E: p.epochNotMatch(r)}
	}
	id := s.nextProp.Add(1)
	prop, err := s.startProposal(p, id, encodeWrite(id, epoch.GetVersion(), batch.Repr()))
	if err != nil {
		return err
	}
	return s.wait(ctx, prop)
}

// ProposeCommitted is Propose for a write whose effects no one can observe
// before release runs (the caller holds latches and in-memory locks over
// its keys until then): it returns once the entry is committed and durable
// on this replica and nothing before it in the log can make its apply
// refuse it (no split is applied between its proposal and its apply), so
// the proposer's client hears of the write while it is being applied
// instead of after. release runs on the store loop once the entry is
// applied, or when the proposal fails; it always runs exactly once, also
// when ProposeCommitted returns an error before proposing. It must not
// block.
func (s *Store) ProposeCommitted(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, batch *pebble.Batch, release func()) error {
	if s.closed.Load() {
		release()
		return ErrStopped
	}
	if r := p.Region(); epoch.GetVersion() != r.Epoch.GetVersion() {
		release()
		return &RegionErr{E: p.epochNotMatch(r)}
	}
	id := s.nextProp.Add(1)
	prop := &proposal{done: make(chan error, 1), early: true, release: release}
	if err := s.register(p, id, prop, encodeWrite(id, epoch.GetVersion(), batch.Repr())); err != nil {
		release()
		return err
	}
	return s.wait(ctx, prop)
}

// Split splits p's region at splitKey through its Raft log: once applied,
// the region keeps [start, splitKey) and a new region newRegionID gets
// [splitKey, end), both at epoch version+1; the new region's replica on
// store Peers[i].StoreId has id newPeerIDs[i]. The ids must be fresh (PD's
// allocator). epoch is the region epoch the caller decided the split under;
// if it changed by the time the split applies, nothing is split and a
// *RegionErr with EpochNotMatch is returned. Data does not move: both
// regions live in the same engine. Split returns the two regions as
// applied.
func (s *Store) Split(ctx context.Context, p *Peer, epoch *kvpb.RegionEpoch, splitKey []byte, newRegionID uint64, newPeerIDs []uint64) (left, right *kvpb.Region, err error) {
	if s.closed.Load() {
		return nil, nil, ErrStopped
	}
	r := p.Region()
	if epoch.GetVersion() != r.Epoch.GetVersion() || epoch.GetConfVer() != r.Epoch.GetConfVer() {
		return nil, nil, &RegionErr{E: p.epochNotMatch(r)}
	}
	if err := validSplitKey(r, splitKey); err != nil {
		return nil, nil, err
	}
	cmd := &splitCmd{confVer: epoch.GetConfVer(), version: epoch.GetVersion(), newRegionID: newRegionID,
		newPeerIDs: newPeerIDs, splitKey: splitKey}
	// Refuse now what the apply would refuse, without a log entry.
	if _, _, err := splitRegion(r, cmd); err != nil {
		return nil, nil, err
	}
	if _, ok := s.Peer(newRegionID); ok {
		return nil, nil, fmt.Errorf("raftstore: split of region %d: region %d already exists", r.Id, newRegionID)
	}
	id := s.nextProp.Add(1)
	prop, err := s.startProposal(p, id, encodeSplit(id, cmd))
	if err != nil {
		return nil, nil, err
	}
	if err := s.wait(ctx, prop); err != nil {
		return nil, nil, err
	}
	return prop.regions[0], prop.regions[1], nil
}

// startProposal hands a command to p's RawNode and registers its waiter.
func (s *Store) startProposal(p *Peer, id uint64, data []byte) (*proposal, error) {
	prop := &proposal{done: make(chan error, 1)}
	if err := s.register(p, id, prop, data); err != nil {
		return nil, err
	}
	return prop, nil
}

// register hands a command to p's RawNode with prop as its waiter.
func (s *Store) register(p *Peer, id uint64, prop *proposal, data []byte) error {
	p.mu.Lock()
	if !p.isLeader {
		p.mu.Unlock()
		return p.notLeaderError()
	}
	p.proposals[id] = prop
	err := p.rn.Propose(data)
	if err != nil {
		delete(p.proposals, id)
	}
	p.mu.Unlock()
	if errors.Is(err, raft.ErrProposalDropped) {
		return p.notLeaderError()
	} else if err != nil {
		return err
	}
	s.wake()
	return nil
}

// wait blocks until prop's entry is applied (or refused) on this replica.
func (s *Store) wait(ctx context.Context, prop *proposal) error {
	start := time.Now()
	select {
	case err := <-prop.done:
		metricProposeSeconds.Observe(time.Since(start).Seconds())
		return err
	case <-s.stopped:
		return ErrStopped
	case <-ctx.Done():
		// The entry may still be applied; the caller reports an
		// indeterminate outcome.
		return ctx.Err()
	}
}

func (s *Store) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Close stops the store loop. In-flight proposals fail with ErrStopped.
func (s *Store) Close() {
	if s.closed.Swap(true) {
		return
	}
	close(s.stop)
	<-s.stopped
}

type readyPeer struct {
	p  *Peer
	rd raft.Ready
}

func (s *Store) run() {
	defer close(s.stopped)
	ticker := time.NewTicker(tickInterval)
	defer ticker.Stop()
	var readies []readyPeer
	peers := make([]*Peer, 0, 8)
	for {
		select {
		case <-s.stop:
			s.failAll(ErrStopped)
			return
		case <-ticker.C:
			s.mu.RLock()
			for _, p := range s.peers {
				p.mu.Lock()
				p.rn.Tick()
				p.mu.Unlock()
			}
			s.mu.RUnlock()
		case <-s.notify:
		case <-s.flushDone:
			s.flushDone = nil
			if s.flushDoneHook != nil {
				s.flushDoneHook(s.flushToken)
			}
			s.flushes = s.db.Metrics().Flush.Count
			if err := s.truncateLogs(s.flushApplied); err != nil {
				s.log.Error("raftstore: fatal error truncating logs", "err", err)
				panic(err)
			}
		}
		for {
			peers = peers[:0]
			s.mu.RLock()
			for _, p := range s.peers {
				peers = append(peers, p)
			}
			s.mu.RUnlock()
			readies = readies[:0]
			for _, p := range peers {
				p.mu.Lock()
				if p.rn.HasReady() {
					readies = append(readies, readyPeer{p: p, rd: p.rn.Ready()})
				}
				p.mu.Unlock()
			}
			if len(readies) == 0 {
				break
			}
			if err := s.handleReadies(readies); err != nil {
				// A failed write or apply leaves this store's state unknown;
				// continuing could diverge replicas. Stop hard.
				s.log.Error("raftstore: fatal error in store loop", "err", err)
				panic(err)
			}
		}
		s.maybeRequestFlush(peers)
	}
}

func (s *Store) handleReadies(readies []readyPeer) error {
	// 1. Apply the committed entries that are already durable in the local
	// log, before the fsync of this round: their proposers need not wait
	// for the next batch's fsync. (Without async storage writes, raft may
	// hand out committed entries that are still in this Ready's unstable
	// Entries; those are applied after the fsync, in step 4.)
	pre := make([][]*pb.Entry, len(readies))
	post := make([][]*pb.Entry, len(readies))
	for i, r := range readies {
		persisted := r.p.storage.lastIndex()
		ents := r.rd.CommittedEntries
		j := len(ents)
		for j > 0 && ents[j-1].GetIndex() > persisted {
			j--
		}
		pre[i], post[i] = ents[:j], ents[j:]
	}
	noteStates(readies)

	// 2. Persist entries and hard states of every replica: one batch, one
	// fsync, running while step 1 applies (the two touch different engines,
	// and what step 1 applies is durable already), so the fsync of this
	// round's proposals starts without waiting for the last round's apply.
	wb := s.raftDB.NewBatch()
	defer wb.Close() // once handed to ApplyNoSyncWait, it is waited for (SyncWait) before any return
	nEntries := 0
	mustSync := false
	for _, r := range readies {
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			return fmt.Errorf("raftstore: region %d: receiving snapshots is not supported", r.p.Region().Id)
		}
		if err := r.p.storage.stageAppend(wb, r.rd.Entries, r.rd.HardState); err != nil {
			return err
		}
		nEntries += len(r.rd.Entries)
		mustSync = mustSync || r.rd.MustSync
	}
	// The batch goes into the Raft engine's memtable and its WAL write is
	// queued; the store loop waits for the write only after step 1's
	// apply (Pebble's ApplyNoSyncWait, as CockroachDB does for its log),
	// without a goroutine and a channel hand-off per round.
	start := time.Now()
	synced := mustSync && !wb.Empty()
	var err error
	switch {
	case synced:
		err = s.raftDB.ApplyNoSyncWait(wb, pebble.Sync)
	case !wb.Empty():
		err = wb.Commit(pebble.NoSync)
	}
	if err != nil {
		return err
	}
	// 1, continued: apply while the batch is being made durable.
	s.ackCommitted(readies, pre)
	applyErr := s.applyRound(readies, pre)
	if synced {
		if err := wb.SyncWait(); err != nil {
			return err
		}
		metricFsyncSeconds.Observe(time.Since(start).Seconds())
		metricEntriesPerSync.Observe(float64(nEntries))
	}
	if applyErr != nil {
		return applyErr
	}

	// 3. Only now may messages leave the node.
	for _, r := range readies {
		if len(r.rd.Messages) > 0 && s.transport != nil {
			s.transport.Send(r.rd.Messages)
		}
	}

	// 4. Apply what was committed but not yet durable locally before step 2.
	s.ackCommitted(readies, post)
	if err := s.applyRound(readies, post); err != nil {
		return err
	}
	for _, r := range readies {
		r.p.mu.Lock()
		r.p.rn.Advance(r.rd)
		r.p.mu.Unlock()
	}

	// 5. Advance stepped the leader's acknowledgement of the entries this
	// round made durable; those it committed come back as CommittedEntries
	// of the next Ready and are applied there. Their ProposeCommitted
	// proposers are told now instead of after the next round's batch is
	// built and queued (about 25 us later under sysbench write load).
	for _, r := range readies {
		s.ackDurable(r)
	}
	return nil
}

// ackDurable acknowledges the ProposeCommitted writes among r's new
// entries, just made durable here, that Advance committed, when every
// entry before them is applied (so no split can come between).
func (s *Store) ackDurable(r readyPeer) {
	ents := r.rd.Entries
	if len(ents) == 0 {
		return
	}
	r.p.mu.Lock()
	st := r.p.rn.BasicStatus()
	r.p.mu.Unlock()
	if st.Applied+1 < ents[0].GetIndex() {
		return // committed entries before these are still to be applied
	}
	commit := st.HardState.GetCommit()
	n := len(ents)
	for n > 0 && ents[n-1].GetIndex() > commit {
		n--
	}
	s.ackEntries(r.p, ents[:n])
}

// ackCommitted signals the proposers of ProposeCommitted writes among
// ents[i] (committed entries of readies[i].p, durable here, about to be
// applied in order) whose apply cannot refuse them: a write is refused
// only when its epoch version is not the region's when it applies, and
// the version changes only by an applied split. So a write proposed under
// the region's current version, with no split before it among the entries
// still to apply, will apply.
func (s *Store) ackCommitted(readies []readyPeer, ents [][]*pb.Entry) {
	for i, r := range readies {
		s.ackEntries(r.p, ents[i])
	}
}

// ackEntries is ackCommitted for one replica's entries.
func (s *Store) ackEntries(p *Peer, ents []*pb.Entry) {
	if len(ents) == 0 {
		return
	}
	version := p.Region().Epoch.GetVersion()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal || len(e.Data) < cmdHeaderLen {
			continue
		}
		kind := e.Data[0]
		if kind == cmdSplit {
			break // later writes wait for their apply
		}
		if kind != cmdWrite || len(e.Data) < cmdHeaderLen+8 ||
			binary.BigEndian.Uint64(e.Data[cmdHeaderLen:]) != version {
			continue
		}
		prop, ok := p.proposals[binary.BigEndian.Uint64(e.Data[1:cmdHeaderLen])]
		if ok && prop.early && !prop.acked {
			prop.acked = true
			prop.done <- nil
		}
	}
}

// noteStates records leadership changes (SoftState) and the current term
// (HardState) of each Ready, before anything of the round is applied, so
// the leader-ready bit is computed against the right term.
func noteStates(readies []readyPeer) {
	for _, r := range readies {
		r.p.mu.Lock()
		if r.rd.SoftState != nil {
			wasLeader := r.p.isLeader
			r.p.isLeader = r.rd.SoftState.RaftState == raft.StateLeader
			r.p.leaderID.Store(r.rd.SoftState.Lead)
			if !r.p.isLeader {
				r.p.leaderReady.Store(false)
				if wasLeader {
					r.p.failProposalsLocked(r.p.notLeaderError())
				}
			}
		}
		if r.rd.HardState != nil && !raft.IsEmptyHardState(r.rd.HardState) {
			r.p.term = r.rd.HardState.GetTerm()
		}
		r.p.mu.Unlock()
	}
}

// applyRound applies ents[i] to readies[i].p for every replica in one
// batch, together with each replica's new applied index, then wakes the
// proposers of the applied entries.
//
// A split changes the region for the entries after it in the same round
// (a write proposed under the old epoch is refused), and its effects go
// into the same batch: the parent's shrunk descriptor, the new region's
// descriptor and applied index (raftInitIndex). Only the new region's
// initial Raft state lives in the Raft engine; it is written (synced)
// before the batch commits, and only if the region has none, so a split
// replayed after a crash keeps the log the new region wrote since. The new
// replica is created once the batch is committed.
func (s *Store) applyRound(readies []readyPeer, ents [][]*pb.Entry) error {
	ab := s.db.NewBatch()
	defer ab.Close()
	type result struct {
		id      uint64
		err     error          // a deterministic refusal, for the proposer
		regions []*kvpb.Region // an applied split: left, right
	}
	type applied struct {
		p        *Peer
		results  []result
		reprs    [][]byte
		writes   int
		state    engine.ApplyState
		ready    bool
		isLeader bool
		region   *kvpb.Region   // after this round's splits; nil if unchanged
		children []*kvpb.Region // regions split off in this round
	}
	var done []applied
	var raftBatch *pebble.Batch // new regions' initial Raft state
	defer func() {
		if raftBatch != nil {
			raftBatch.Close()
		}
	}()
	created := make(map[uint64]bool)
	for i, r := range readies {
		if len(ents[i]) == 0 {
			continue
		}
		a := applied{p: r.p, state: r.p.storage.applyState()}
		r.p.mu.Lock()
		term, isLeader := r.p.term, r.p.isLeader
		r.p.mu.Unlock()
		a.isLeader = isLeader
		region := r.p.Region()
		for _, e := range ents[i] {
			switch e.GetType() {
			case pb.EntryNormal:
				if len(e.Data) == 0 {
					break
				}
				cmd, err := decodeCommand(e.Data)
				if err != nil {
					return fmt.Errorf("region %d entry %d: %w", region.Id, e.GetIndex(), err)
				}
				res := result{id: cmd.id}
				switch cmd.kind {
				case cmdWrite, cmdWriteBatch:
					if cmd.kind == cmdWrite && cmd.version != region.Epoch.GetVersion() {
						res.err = errEpochChanged
						break
					}
					if err := applyWriteBatch(ab, cmd.id, cmd.repr); err != nil {
						return fmt.Errorf("region %d entry %d: %w", region.Id, e.GetIndex(), err)
					}
					a.writes++
					if s.onApply != nil || s.beforeApply != nil {
						a.reprs = append(a.reprs, cmd.repr)
					}
				case cmdSplit:
					left, right, err := splitRegion(region, cmd.split)
					if err == nil {
						if _, exists := s.Peer(right.Id); exists || created[right.Id] {
							err = fmt.Errorf("raftstore: split of region %d: region %d already exists", region.Id, right.Id)
						}
					}
					if err != nil {
						res.err = err
						break
					}
					if err := stageSplit(ab, left, right); err != nil {
						return err
					}
					if raftBatch == nil {
						raftBatch = s.raftDB.NewBatch()
					}
					if err := stageInitialRaftState(s.raftDB, raftBatch, right.Id); err != nil {
						return err
					}
					created[right.Id] = true
					region, a.region = left, left
					a.children = append(a.children, right)
					res.regions = []*kvpb.Region{left, right}
				}
				a.results = append(a.results, res)
			case pb.EntryConfChange, pb.EntryConfChangeV2:
				return fmt.Errorf("raftstore: region %d: membership changes are not supported yet", region.Id)
			}
			a.state.AppliedIndex = e.GetIndex()
			if isLeader && e.GetTerm() == term {
				a.ready = true
			}
		}

		if err := ab.Set(engine.ApplyStateKey(region.Id), engine.EncodeAppliedIndex(a.state.AppliedIndex), nil); err != nil {
			return err
		}
		done = append(done, a)
	}
	if len(done) == 0 {
		return nil
	}
	if raftBatch != nil && !raftBatch.Empty() {
		if err := raftBatch.Commit(pebble.Sync); err != nil {
			return err
		}
	}
	if s.beforeApply != nil {
		for _, a := range done {
			for _, repr := range a.reprs {
				if err := s.beforeApply(repr); err != nil {
					return err
				}
			}
		}
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ab); err != nil {
			return err
		}
	}
	if err := ab.Commit(pebble.NoSync); err != nil {
		return err
	}
	s.memtableBytes += uint64(ab.Len())
	for _, a := range done {
		// The new regions are registered before the parent's range
		// shrinks, so a client sent away by the parent finds them.
		for _, child := range a.children {
			if err := s.addSplitPeer(a.p, child, a.isLeader); err != nil {
				return err
			}
		}
		if a.region != nil {
			a.p.region.Store(a.region)
		}
		if s.onApply != nil {
			for _, repr := range a.reprs {
				if err := s.onApply(repr); err != nil {
					return err
				}
			}
		}
		a.p.storage.setApplied(a.state.AppliedIndex)
		var stale *kvpb.RegionError
		a.p.mu.Lock()
		for _, res := range a.results {
			prop, ok := a.p.proposals[res.id]
			if !ok {
				continue
			}
			delete(a.p.proposals, res.id)
			err := res.err
			if errors.Is(err, errEpochChanged) {
				if stale == nil {
					stale = a.p.epochNotMatch(a.p.Region())
				}
				err = &RegionErr{E: stale}
			}
			prop.regions = res.regions
			if prop.acked && err != nil {
				// ackCommitted promised this entry would apply.
				panic(fmt.Sprintf("raftstore: region %d: proposal %d acknowledged at commit was refused at apply: %v",
					a.p.Region().Id, res.id, err))
			}
			prop.finish(err)
		}
		if a.ready && a.p.isLeader {
			a.p.leaderReady.Store(true)
		}
		a.p.mu.Unlock()
		metricProposals.Add(float64(a.writes))
	}
	return nil
}

// stageSplit writes a split's region descriptors and the new region's
// applied index into the apply batch.
func stageSplit(ab *pebble.Batch, left, right *kvpb.Region) error {
	for _, r := range []*kvpb.Region{left, right} {
		data, err := proto.Marshal(r)
		if err != nil {
			return err
		}
		if err := ab.Set(engine.RegionStateKey(r.Id), data, nil); err != nil {
			return err
		}
	}
	return ab.Set(engine.ApplyStateKey(right.Id), engine.EncodeAppliedIndex(raftInitIndex), nil)
}

// stageInitialRaftState writes the Raft state a region created by a split
// starts from (as if a snapshot at raftInitIndex, raftInitTerm had been
// applied), unless the Raft engine already holds a state for it: then the
// split is being replayed after a crash, and the region's log since then
// must be kept.
func stageInitialRaftState(raftDB *pebble.DB, b *pebble.Batch, regionID uint64) error {
	if _, ok, err := engine.GetCopy(raftDB, engine.TruncatedStateKey(regionID)); err != nil || ok {
		return err
	}
	hs, err := proto.Marshal(&pb.HardState{Term: proto.Uint64(raftInitTerm), Commit: proto.Uint64(raftInitIndex)})
	if err != nil {
		return err
	}
	if err := b.Set(engine.HardStateKey(regionID), hs, nil); err != nil {
		return err
	}
	return b.Set(engine.TruncatedStateKey(regionID), engine.EncodeTruncatedState(raftInitIndex, raftInitTerm), nil)
}

// addSplitPeer creates and registers the local replica of a region split
// off parent (its state was just committed). It campaigns at once when
// the parent's replica here was the leader, as TiKV does, so the new
// region is served without waiting for an election timeout; a region
// whose only voter is this store campaigns in any case.
func (s *Store) addSplitPeer(parent *Peer, r *kvpb.Region, parentLeader bool) error {
	cp, err := s.newPeer(r)
	if err != nil {
		return fmt.Errorf("raftstore: create region %d split off region %d: %w", r.Id, parent.Region().Id, err)
	}
	s.mu.Lock()
	s.peers[r.Id] = cp
	s.publishPeers()
	s.mu.Unlock()
	var ids []uint64
	if old := parent.children.Load(); old != nil {
		ids = append(ids, *old...)
	}
	ids = append(ids, r.Id)
	if len(ids) > maxChildrenRemembered {
		ids = ids[len(ids)-maxChildrenRemembered:]
	}
	parent.children.Store(&ids)
	if parentLeader || len(r.Peers) == 1 {
		cp.mu.Lock()
		err = cp.rn.Campaign()
		cp.mu.Unlock()
	}
	return err
}

// applyWriteBatch merges a proposal's writes into the apply batch. The
// representation is decoded in place: it belongs to the Raft entry (also
// held by the in-memory log) and must not be handed to a pooled Pebble
// batch, which would reuse it as a buffer.
func applyWriteBatch(ab *pebble.Batch, id uint64, repr []byte) error {
	h, ok := batchrepr.ReadHeader(repr)
	if !ok {
		return fmt.Errorf("raftstore: proposal %d: %w", id, pebble.ErrInvalidBatch)
	}
	r := batchrepr.Read(repr)
	var n uint32
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return fmt.Errorf("raftstore: proposal %d: %w", id, err)
		}
		if !ok {
			break
		}
		n++
		switch kind {
		case pebble.InternalKeyKindSet:
			err = ab.Set(k, v, nil)
		case pebble.InternalKeyKindDelete:
			err = ab.Delete(k, nil)
		case pebble.InternalKeyKindSingleDelete:
			err = ab.SingleDelete(k, nil)
		case pebble.InternalKeyKindDeleteSized:
			err = ab.Delete(k, nil)
		case pebble.InternalKeyKindRangeDelete:
			err = ab.DeleteRange(k, v, nil)
		case pebble.InternalKeyKindLogData:
		default:
			err = fmt.Errorf("raftstore: proposal %d: unsupported batch operation %v", id, kind)
		}
		if err != nil {
			return err
		}
	}
	if n != h.Count {
		return fmt.Errorf("raftstore: proposal %d: batch holds %d operations, header says %d", id, n, h.Count)
	}
	return nil
}

// maybeRequestFlush starts a KV-engine flush when some single-voter
// region's log has grown past raftLogGCCountThreshold entries or
// raftLogGCSizeThreshold bytes beyond its truncated
// index, remembering every region's applied index at this moment: once the
// flush completes, everything applied up to those indexes is durable in
// the KV engine and the log below them can go (truncateLogs). With
// followers, truncation must also wait for the slowest one; such regions
// are not truncated yet.
func (s *Store) maybeRequestFlush(peers []*Peer) {
	if s.flushDone != nil {
		return
	}
	aged := s.memtableAged()
	var applied map[uint64]uint64
	for _, p := range peers {
		st := p.storage.applyState()
		n, size := p.storage.logSize()
		if len(p.Region().Peers) != 1 || st.AppliedIndex <= st.TruncatedIndex ||
			(!aged && n < raftLogGCCountThreshold && size < raftLogGCSizeThreshold) {
			continue
		}
		if applied == nil {
			applied = make(map[uint64]uint64)
		}
		applied[p.Region().Id] = st.AppliedIndex
	}
	if applied == nil && !aged {
		return
	}
	var token uint64
	if s.flushStarting != nil {
		token = s.flushStarting()
	}
	done, err := s.db.AsyncFlush()
	if err != nil {
		s.log.Warn("raftstore: cannot flush the KV engine; log truncation postponed", "err", err)
		return
	}
	s.flushDone, s.flushApplied, s.flushToken = done, applied, token
	s.restartMemtableAge()
}

// memtableAged reports whether the KV memtable is due for an early flush
// (see memtableMaxAge). A flush the engine started on its own (its
// memtable filled) restarts the clock instead.
func (s *Store) memtableAged() bool {
	if s.scannedKeys == nil || s.memtableBytes < agedFlushBytes ||
		time.Since(s.memtableSince) < memtableMaxAge ||
		s.scannedKeys()-s.scannedAt < agedFlushScannedKeys {
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
	if s.scannedKeys != nil {
		s.scannedAt = s.scannedKeys()
	}
}

// truncateLogs deletes log entries up to the given applied indexes, which a
// completed KV-engine flush made durable. The deletion and the new
// truncated state are one Raft-engine batch.
func (s *Store) truncateLogs(applied map[uint64]uint64) error {
	b := s.raftDB.NewBatch()
	defer b.Close()
	type cut struct {
		ps          *peerStorage
		index, term uint64
	}
	var cuts []cut
	for id, to := range applied {
		p, ok := s.Peer(id)
		if !ok {
			continue
		}
		st := p.storage.applyState()
		if to <= st.TruncatedIndex {
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

func (p *Peer) failProposalsLocked(err error) {
	for id, prop := range p.proposals {
		if prop.acked && !errors.Is(err, ErrStopped) {
			// Committed: it will be applied here like every committed
			// entry, and release must wait for that.
			continue
		}
		delete(p.proposals, id)
		prop.finish(err)
	}
}

func (s *Store) failAll(err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.peers {
		p.mu.Lock()
		p.failProposalsLocked(err)
		p.mu.Unlock()
	}
}

// raftLogger adapts slog to raft.Logger.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 {}
func (r raftLogger) Debugf(format string, v ...any) {}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  {}
func (r raftLogger) Infof(format string, v ...any)  {}
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Fatal(v ...any) { r.l.Error(fmt.Sprint(v...)); panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) {
	r.l.Error(fmt.Sprintf(format, v...))
	panic(fmt.Sprintf(format, v...))
}
func (r raftLogger) Panic(v ...any) { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) {
	panic(fmt.Sprintf(format, v...))
}
