package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
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

// ErrStopped is returned for proposals when the store is shutting down.
var ErrStopped = errors.New("raftstore: store stopped")

// ErrInvalidSplitKey is wrapped by Split errors for a split key that is not
// strictly inside the region (empty, the region's start key, or outside
// it): such a split would leave one half empty.
var ErrInvalidSplitKey = errors.New("raftstore: invalid split key")

// errEpochChanged marks a command refused at apply because the region's
// epoch moved on since it was proposed; the proposer gets EpochNotMatch.
var errEpochChanged = errors.New("raftstore: region epoch changed")

// errFrozen marks a write, split or membership change refused at apply
// because a merge froze the region (merge.go).
var errFrozen = fmt.Errorf("%w: the region is frozen", ErrMerging)

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
	metricSnapshots = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "snapshots_total",
		Help: "Snapshots generated (sent) and applied (received) by this store.",
	}, []string{"kind"})
	metricReadIndex = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "read_index_total",
		Help: "Reads that confirmed leadership with a ReadIndex round instead of a lease.",
	})
	metricCoalesced = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "messages_coalesced_total",
		Help: "Raft messages merged into another one to the same peer before sending (coalesce.go).",
	})
	metricAsleep = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "strata", Subsystem: "raftstore", Name: "hibernating_replicas",
		Help: "Replicas of this store that hibernate (no ticks), as of the last tick.",
	})
)

func init() {
	prometheus.MustRegister(metricFsyncSeconds, metricEntriesPerSync, metricProposals, metricProposeSeconds,
		metricSnapshots, metricReadIndex, metricAsleep, metricCoalesced)
}

// Store owns the engines and all local replicas and runs the store loop.
// Its job: the set of replicas (create from disk, split, message or
// snapshot; destroy on removal), and the loop that drives them (loop.go).
type Store struct {
	db      *pebble.DB // KV engine: region state, apply state, data
	raftDB  *pebble.DB // Raft engine: logs and hard states
	fs      vfs.FS
	snapDir string
	storeID uint64
	log     *slog.Logger
	obs     Observer

	mu    sync.RWMutex
	peers map[uint64]*Peer
	// peerSnap is a copy of peers for Peer, which every request calls:
	// replaced (under mu) whenever peers changes, read without a lock.
	peerSnap atomic.Pointer[map[uint64]*Peer]
	// overlap finds the replica holding a range's data (overlap.go).
	overlap overlapState
	// tombstones: regions whose replica here was removed, with the id of
	// that replica; messages to it (or an older one) are dropped.
	tombstones map[uint64]uint64
	// pendingVotes are vote requests for regions a split has not created
	// here yet (transport.go).
	pendingVotes []*kvpb.RaftMessage
	// stale: replicas found removed without having heard of it, for the
	// store loop to destroy (stale.go).
	staleMu sync.Mutex
	stale   []staleRequest
	// hibernate: idle regions stop ticking (hibernate.go).
	hibernate   bool
	alwaysAwake func(regionID uint64) bool

	transport   Transport
	manualTicks bool
	start       time.Time
	clockOffset atomic.Int64 // tests: added to the store clock
	clockRate   float64      // fault tests: rate of the store clock
	onLeader    func(regionID uint64, leader bool)
	// onMergeCommitted: Config.OnMergeCommitted; mergeDrivers counts the
	// merge drivers running (merge.go).
	onMergeCommitted func(source *kvpb.Region, targetLeads bool)
	mergeDrivers     atomic.Int64

	// Log truncation waits for a KV-engine flush (truncate.go): flushDone
	// is the pending flush, flushCompact the index up to which each
	// region's log may go once it completes.
	flushDone    <-chan struct{}
	flushCompact map[uint64]uint64
	flushToken   uint64
	truncateNow  atomic.Bool // TruncateLogs
	// The early flush (memtableMaxAge), store loop only: memtableBytes is
	// how many bytes the apply path committed to the KV engine since the
	// last flush, memtableSince when that flush was requested (or the
	// engine was seen to flush on its own), scannedAt the scanned-key
	// count then, and flushes the engine's flush count after it.
	memtableBytes uint64
	memtableSince time.Time
	scannedAt     uint64
	flushes       int64

	// snapshots being generated, by region (snapshot.go).
	snapMu  sync.Mutex
	snapGen map[uint64]bool

	// The replicas the store loop looks at (loop.go): poked, queued by
	// poke for the next round; awake, store loop only, those awake at the
	// last tick or woken since; round counts the loop's rounds.
	pokeMu sync.Mutex
	poked  []*Peer
	awake  []*Peer
	round  uint64
	looked atomic.Uint64 // replicas the loop looked at (tests)
	// Store loop only (tickAll): merging, the replicas a merge froze;
	// tickCount, the ticks so far; tickSpare, a buffer.
	merging   []*Peer
	tickCount uint64
	tickSpare []*Peer

	tick     chan struct{}
	ticks    atomic.Uint64 // ticks done on request (Tick)
	busy     atomic.Bool   // a round of the loop is running (idle)
	notify   chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	nextProp atomic.Uint64
	closed   atomic.Bool
}

// Config configures a Store.
type Config struct {
	StoreID uint64
	// Transport sends Raft messages to other stores; nil when every
	// region has only local replicas.
	Transport Transport
	Logger    *slog.Logger
	// Observer is told what the apply path does (nil: the store's data are
	// raw keys, not indexed; tests of the store alone).
	Observer Observer
	// ManualTicks stops the store's own ticker and clock: raft ticks only
	// when Tick is called, and the store clock (leases) moves only by
	// AdvanceClock (deterministic tests).
	ManualTicks bool
	// OnLeaderChange, when set, is called on the store loop whenever a
	// local replica becomes a ready leader (true) or stops leading (false).
	OnLeaderChange func(regionID uint64, leader bool)
	// OnMergeCommitted, when set, is called on the store loop when a
	// replica here applies a CommitMerge that took region source in:
	// targetLeads tells whether this store's replica of the merged region
	// is its ready leader. What the layer above keeps in memory for the
	// source's keys (pessimistic locks, taken while this store led the
	// source, which has served nothing since its PrepareMerge) stays
	// valid only then; otherwise it must go, as on a loss of leadership.
	OnMergeCommitted func(source *kvpb.Region, targetLeads bool)
	// Hibernate lets idle regions stop ticking (hibernate.go), except
	// those AlwaysAwake names (PD's own region: its followers must notice
	// a dead leader without asking PD).
	Hibernate   bool
	AlwaysAwake func(regionID uint64) bool
	// ClockRate, for fault tests only, makes the store clock (leases) run
	// at this rate of real time (0: 1). A rate below 1 - leaseMargin /
	// (electionTicks-1) x tickInterval (about 0.78) lets a leader
	// believe in a lease longer than it is safe: the fault suite uses it
	// to check that the margin is what keeps reads linearizable.
	ClockRate float64
}

// BootstrapRegion writes the initial state of a region whose replicas are
// region.Peers, as part of first-time store initialization. It must run
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

// Open loads every replica persisted in the engines, finishes what a
// crash interrupted (a snapshot's application, a replica's destruction),
// and starts the store loop.
func Open(eng engine.Engines, cfg Config) (*Store, error) {
	db := eng.KV
	s := &Store{
		db:               db,
		raftDB:           eng.Raft,
		fs:               eng.FS,
		snapDir:          eng.FS.PathJoin(eng.Dir, "snap"),
		storeID:          cfg.StoreID,
		log:              cfg.Logger,
		obs:              cfg.Observer,
		peers:            make(map[uint64]*Peer),
		tombstones:       make(map[uint64]uint64),
		transport:        cfg.Transport,
		manualTicks:      cfg.ManualTicks,
		onLeader:         cfg.OnLeaderChange,
		onMergeCommitted: cfg.OnMergeCommitted,
		clockRate:        cfg.ClockRate,
		hibernate:        cfg.Hibernate,
		alwaysAwake:      cfg.AlwaysAwake,
		start:            time.Now(),
		snapGen:          make(map[uint64]bool),
		tick:             make(chan struct{}, 1),
		notify:           make(chan struct{}, 1),
		stop:             make(chan struct{}),
		stopped:          make(chan struct{}),
	}
	if s.fs == nil {
		s.fs = vfs.Default
	}
	if s.obs == nil {
		s.obs = rawObserver{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := s.fs.MkdirAll(s.snapDir, 0o755); err != nil {
		return nil, err
	}
	s.memtableSince, s.flushes = time.Now(), db.Metrics().Flush.Count
	s.publishPeers()
	// Proposal ids only need to be unique among proposals that can be in
	// flight at once, including entries replayed after a restart; starting
	// from the clock keeps a replayed entry from waking a new proposal.
	s.nextProp.Store(uint64(time.Now().UnixNano()))
	if err := s.loadTombstones(); err != nil {
		return nil, err
	}
	if err := s.finishPendingSnapshots(); err != nil {
		return nil, err
	}
	regions, err := s.loadRegions()
	if err != nil {
		return nil, err
	}
	for _, r := range regions {
		local := localPeer(r, s.storeID)
		if tomb, ok := s.tombstones[r.Id]; ok && (local == nil || local.Id <= tomb) {
			// Removed before a crash finished destroying it.
			if err := s.destroyData(r); err != nil {
				return nil, err
			}
			continue
		}
		p, err := s.newPeer(r)
		if err != nil {
			return nil, err
		}
		s.peers[r.Id] = p
	}
	s.publishPeers()
	s.removeStaleSnapshotFiles()
	// A region with this store as its only voter elects itself at once.
	for _, p := range s.peers {
		if onlyVoter(p.Region(), p.id) {
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

func (s *Store) loadRegions() ([]*kvpb.Region, error) {
	iter, err := s.db.NewIter(&pebble.IterOptions{
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
	return regions, iter.Close()
}

// localPeer is r's replica on store (nil if it has none).
func localPeer(r *kvpb.Region, store uint64) *kvpb.Peer {
	for _, rp := range r.Peers {
		if rp.StoreId == store {
			return rp
		}
	}
	return nil
}

// onlyVoter reports whether peer id is the only voter of r (and r is not
// in a joint configuration): its votes alone elect it, so no other replica
// can ever be elected while that holds.
func onlyVoter(r *kvpb.Region, id uint64) bool {
	n := 0
	for _, rp := range r.Peers {
		switch rp.Role {
		case kvpb.PeerRole_Voter:
			if rp.Id != id {
				return false
			}
			n++
		case kvpb.PeerRole_IncomingVoter, kvpb.PeerRole_DemotingVoter:
			return false
		}
	}
	return n == 1
}

// raftConfig is the etcd raft configuration of a replica.
func (s *Store) raftConfig(id uint64, ps *peerStorage, applied uint64, regionID uint64) *raft.Config {
	return &raft.Config{
		ID:                        id,
		ElectionTick:              electionTicks,
		HeartbeatTick:             heartbeatTicks,
		Storage:                   ps,
		Applied:                   applied,
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxUncommittedEntriesSize: 256 << 20,
		MaxCommittedSizePerReady:  64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		// A leader demoted or removed (an election won by a demoting
		// voter in a joint configuration, then left) steps down
		// instead of leading as a learner.
		StepDownOnRemoval: true,
		ReadOnlyOption:    raft.ReadOnlySafe,
		Logger:            raftLogger{s.log.With("region", regionID)},
	}
}

// newPeer creates the replica of an initialized region from its persisted
// state.
func (s *Store) newPeer(r *kvpb.Region) (*Peer, error) {
	local := localPeer(r, s.storeID)
	if local == nil {
		return nil, fmt.Errorf("raftstore: region %d has no replica on store %d", r.Id, s.storeID)
	}
	ps, err := loadPeerStorage(engine.Engines{KV: s.db, Raft: s.raftDB}, r.Id, confStateOf(r))
	if err != nil {
		return nil, err
	}
	rn, err := raft.NewRawNode(s.raftConfig(local.Id, ps, ps.apply.AppliedIndex, r.Id))
	if err != nil {
		return nil, err
	}
	ms, err := loadMergeState(s.db, r.Id)
	if err != nil {
		return nil, err
	}
	p := &Peer{id: local.Id, regionID: r.Id, storage: ps, store: s, rn: rn,
		proposals: make(map[uint64]*proposal), peerStores: make(map[uint64]uint64)}
	p.merge.Store(ms)
	p.region.Store(r)
	p.initialized.Store(true)
	p.heardAt.Store(time.Now().UnixNano())
	return p, nil
}

// newUninitializedPeer creates replica id of region regionID that has no
// data yet: a leader's message named it, and it waits for a snapshot.
func (s *Store) newUninitializedPeer(regionID, id uint64) (*Peer, error) {
	ps := newPeerStorage(engine.Engines{KV: s.db, Raft: s.raftDB}, regionID)
	rn, err := raft.NewRawNode(s.raftConfig(id, ps, 0, regionID))
	if err != nil {
		return nil, err
	}
	p := &Peer{id: id, regionID: regionID, storage: ps, store: s, rn: rn,
		proposals: make(map[uint64]*proposal), peerStores: make(map[uint64]uint64)}
	p.region.Store(&kvpb.Region{Id: regionID, Epoch: &kvpb.RegionEpoch{}})
	p.heardAt.Store(time.Now().UnixNano())
	return p, nil
}

// Peer returns the local replica of a region.
func (s *Store) Peer(regionID uint64) (*Peer, bool) {
	p, ok := (*s.peerSnap.Load())[regionID]
	return p, ok
}

// StoreID is the id of this store.
func (s *Store) StoreID() uint64 { return s.storeID }

// publishPeers makes the current peers what Peer sees. s.mu held for
// writing, or the store not yet shared.
func (s *Store) publishPeers() {
	snap := make(map[uint64]*Peer, len(s.peers))
	for id, p := range s.peers {
		snap[id] = p
	}
	s.peerSnap.Store(&snap)
	s.layoutChanged()
}

// addPeer registers p (replacing an uninitialized replica of its region).
func (s *Store) addPeer(p *Peer) {
	s.mu.Lock()
	s.peers[p.regionID] = p
	s.publishPeers()
	s.mu.Unlock()
	s.poke(p)
}

// Regions returns the descriptors of all initialized local replicas,
// ordered by start key.
func (s *Store) Regions() []*kvpb.Region {
	s.mu.RLock()
	out := make([]*kvpb.Region, 0, len(s.peers))
	for _, p := range s.peers {
		if p.Initialized() {
			out = append(out, p.Region())
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if c := bytes.Compare(out[i].StartKey, out[j].StartKey); c != 0 {
			return c < 0
		}
		return out[i].Id < out[j].Id
	})
	return out
}

// Peers returns every local replica, initialized or not.
func (s *Store) Peers() []*Peer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Peer, 0, len(s.peers))
	for _, p := range s.peers {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].regionID < out[j].regionID })
	return out
}

// Engine returns the store's Pebble DB (reads of applied state).
func (s *Store) Engine() *pebble.DB { return s.db }

// now is the store clock: monotonic time since the store opened (plus a
// test offset). Leases are measured on it.
func (s *Store) now() time.Duration {
	if s.manualTicks {
		// Deterministic tests: time moves only by AdvanceClock.
		return time.Duration(s.clockOffset.Load())
	}
	elapsed := time.Since(s.start)
	if s.clockRate > 0 && s.clockRate != 1 {
		elapsed = time.Duration(float64(elapsed) * s.clockRate)
	}
	return elapsed + time.Duration(s.clockOffset.Load())
}

// AdvanceClock moves the store clock forward (tests of lease expiry).
func (s *Store) AdvanceClock(d time.Duration) { s.clockOffset.Add(int64(d)) }

// Tick advances every replica's raft clock by one tick (stores opened
// with ManualTicks; a running store ticks itself every tickInterval).
func (s *Store) Tick() {
	select {
	case s.tick <- struct{}{}:
	default:
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

// raftLogger adapts slog to raft.Logger. Raft's info messages (elections,
// terms, votes) are logged at debug level (`--log-level debug`); its own
// debug messages are dropped.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 {}
func (r raftLogger) Debugf(format string, v ...any) {}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprint(v...))
	}
}
func (r raftLogger) Infof(format string, v ...any) {
	if r.l.Enabled(context.Background(), slog.LevelDebug) {
		r.l.Debug(fmt.Sprintf(format, v...))
	}
}
func (r raftLogger) Warning(v ...any) { r.l.Warn(fmt.Sprint(v...)) }
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
