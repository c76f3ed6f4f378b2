// Package pd is the placement driver: it allocates timestamps (the TSO)
// and ids, and keeps the region directory the client library routes by.
//
// Its durable state (the TSO high-water mark, the id allocator's mark and
// the GC safe point) lives in a Raft group of its own, the system region,
// replicated and fsynced like any region. The region directory is soft state rebuilt from
// store heartbeats (Heartbeat): every store reports the regions it holds
// and which of them it leads.
//
// Region ids of split-off regions and their peers come from the id
// allocator (AllocIDs), which never hands out ids up to ReservedIDs. A
// heartbeat carrying a region at a newer epoch (after a split) replaces
// the older entry; a store reports at once after it splits a region.
//
// Scheduling (split by size or load, merge, balance, repair) is not part of
// this package yet; with one store, the directory is the store's own
// regions.
package pd

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/raftstore"
	"github.com/strata-db/strata/kvpb"
)

// SystemRegionID is the region that holds PD's own state.
const SystemRegionID = 1

var (
	tsoLimitKey    = engine.PDKey("tso-limit")
	idLimitKey     = engine.PDKey("id-limit")
	gcSafePointKey = engine.PDKey("gc-safe-point")
)

const idBatch = 1000

// ReservedIDs is the highest id the allocator never hands out: ids up to
// it are for what a node bootstraps before PD runs (its store, the system
// and first data region, their peers).
const ReservedIDs = 100

// Server implements kvpb.PDServer.
type Server struct {
	kvpb.UnimplementedPDServer
	store *raftstore.Store
	tso   *TSO

	idMu    sync.Mutex
	nextID  uint64
	idLimit uint64

	gcMu        sync.Mutex
	gcSafePoint uint64

	dirMu   sync.RWMutex
	regions []regionEntry // sorted by start key
	stores  map[uint64]*kvpb.Store
}

type regionEntry struct {
	region *kvpb.Region
	leader *kvpb.Peer
}

// New starts PD on the local store, which must hold the system region.
func New(store *raftstore.Store) (*Server, error) {
	s := &Server{store: store, stores: make(map[uint64]*kvpb.Store)}
	db := store.Engine()
	limit, err := readUint(db, tsoLimitKey)
	if err != nil {
		return nil, err
	}
	s.tso = newTSO(int64(limit), s.persistTSOLimit)
	idLimit, err := readUint(db, idLimitKey)
	if err != nil {
		return nil, err
	}
	s.nextID, s.idLimit = max(idLimit, ReservedIDs), idLimit
	if s.gcSafePoint, err = readUint(db, gcSafePointKey); err != nil {
		return nil, err
	}
	return s, nil
}

// GCSafePoint returns the GC safe point: no transaction may read below it.
func (s *Server) GCSafePoint() uint64 {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	return s.gcSafePoint
}

// UpdateGCSafePoint advances the GC safe point to sp and returns the safe
// point in force, which is never below an earlier one: a lower sp changes
// nothing. The new value is persisted through the system region before it
// is returned, so it never goes back across restarts.
func (s *Server) UpdateGCSafePoint(ctx context.Context, sp uint64) (uint64, error) {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if sp <= s.gcSafePoint {
		return s.gcSafePoint, nil
	}
	if err := s.persistUint(ctx, gcSafePointKey, sp); err != nil {
		return 0, err
	}
	s.gcSafePoint = sp
	return sp, nil
}

func readUint(db pebble.Reader, key []byte) (uint64, error) {
	v, ok, err := engine.GetCopy(db, key)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("pd: corrupt value at %q", key)
	}
	return binary.BigEndian.Uint64(v), nil
}

func (s *Server) persistUint(ctx context.Context, key []byte, v uint64) error {
	p, ok := s.store.Peer(SystemRegionID)
	if !ok {
		return fmt.Errorf("pd: system region is not on this store")
	}
	b := s.store.Engine().NewBatch()
	defer b.Close()
	if err := b.Set(key, binary.BigEndian.AppendUint64(nil, v), nil); err != nil {
		return err
	}
	return s.store.Propose(ctx, p, p.Region().Epoch, b)
}

func (s *Server) persistTSOLimit(ctx context.Context, limitMs int64) error {
	return s.persistUint(ctx, tsoLimitKey, uint64(limitMs))
}

// AllocIDs returns the first of count fresh ids.
func (s *Server) AllocIDs(ctx context.Context, count uint32) (uint64, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.nextID+uint64(count) > s.idLimit {
		newLimit := s.nextID + uint64(count) + idBatch
		if err := s.persistUint(ctx, idLimitKey, newLimit); err != nil {
			return 0, err
		}
		s.idLimit = newLimit
	}
	first := s.nextID + 1
	s.nextID += uint64(count)
	return first, nil
}

// Heartbeat records the regions a store holds and the ones it leads.
func (s *Server) Heartbeat(store *kvpb.Store, regions []*kvpb.Region, leaders map[uint64]*kvpb.Peer) {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	s.stores[store.Id] = store
	byID := make(map[uint64]regionEntry, len(s.regions)+len(regions))
	for _, e := range s.regions {
		byID[e.region.Id] = e
	}
	for _, r := range regions {
		if r.Id == SystemRegionID {
			continue
		}
		old, ok := byID[r.Id]
		if ok && epochOlder(r.Epoch, old.region.Epoch) {
			continue
		}
		e := regionEntry{region: r, leader: leaders[r.Id]}
		if e.leader == nil && ok {
			e.leader = old.leader
		}
		byID[r.Id] = e
	}
	s.regions = s.regions[:0]
	for _, e := range byID {
		s.regions = append(s.regions, e)
	}
	sort.Slice(s.regions, func(i, j int) bool {
		return bytes.Compare(s.regions[i].region.StartKey, s.regions[j].region.StartKey) < 0
	})
}

func epochOlder(a, b *kvpb.RegionEpoch) bool {
	return a.GetVersion() < b.GetVersion() || a.GetConfVer() < b.GetConfVer()
}

// Tso implements kvpb.PDServer.
func (s *Server) Tso(ctx context.Context, req *kvpb.TsoRequest) (*kvpb.TsoResponse, error) {
	ts, err := s.tso.Next(ctx, req.Count)
	if err != nil {
		return &kvpb.TsoResponse{Error: &kvpb.PDError{Message: err.Error()}}, nil
	}
	return &kvpb.TsoResponse{Timestamp: ts, Count: req.Count}, nil
}

// NextTimestamp returns one timestamp, as Tso with Count 1 does, for a
// client in this process (client.LocalPD), without the protobuf messages.
func (s *Server) NextTimestamp(ctx context.Context) (uint64, error) {
	return s.tso.Next(ctx, 1)
}

// GetRegion implements kvpb.PDServer.
func (s *Server) GetRegion(ctx context.Context, req *kvpb.GetRegionRequest) (*kvpb.GetRegionResponse, error) {
	s.dirMu.RLock()
	defer s.dirMu.RUnlock()
	i := sort.Search(len(s.regions), func(i int) bool {
		return bytes.Compare(s.regions[i].region.StartKey, req.Key) > 0
	}) - 1
	if i >= 0 {
		e := s.regions[i]
		if len(e.region.EndKey) == 0 || bytes.Compare(req.Key, e.region.EndKey) < 0 {
			return &kvpb.GetRegionResponse{Region: e.region, Leader: e.leader}, nil
		}
	}
	return &kvpb.GetRegionResponse{Error: &kvpb.PDError{Message: fmt.Sprintf("no region for key %q", req.Key)}}, nil
}

// GetRegionByID implements kvpb.PDServer.
func (s *Server) GetRegionByID(ctx context.Context, req *kvpb.GetRegionByIDRequest) (*kvpb.GetRegionResponse, error) {
	s.dirMu.RLock()
	defer s.dirMu.RUnlock()
	for _, e := range s.regions {
		if e.region.Id == req.RegionId {
			return &kvpb.GetRegionResponse{Region: e.region, Leader: e.leader}, nil
		}
	}
	return &kvpb.GetRegionResponse{Error: &kvpb.PDError{Message: fmt.Sprintf("region %d not found", req.RegionId)}}, nil
}

// ScanRegions implements kvpb.PDServer.
func (s *Server) ScanRegions(ctx context.Context, req *kvpb.ScanRegionsRequest) (*kvpb.ScanRegionsResponse, error) {
	s.dirMu.RLock()
	defer s.dirMu.RUnlock()
	resp := &kvpb.ScanRegionsResponse{}
	for _, e := range s.regions {
		if len(e.region.EndKey) > 0 && bytes.Compare(e.region.EndKey, req.StartKey) <= 0 {
			continue
		}
		if len(req.EndKey) > 0 && bytes.Compare(e.region.StartKey, req.EndKey) >= 0 {
			break
		}
		resp.Regions = append(resp.Regions, e.region)
		resp.Leaders = append(resp.Leaders, e.leader)
		if req.Limit > 0 && len(resp.Regions) >= int(req.Limit) {
			break
		}
	}
	return resp, nil
}

// GetStore implements kvpb.PDServer.
func (s *Server) GetStore(ctx context.Context, req *kvpb.GetStoreRequest) (*kvpb.GetStoreResponse, error) {
	s.dirMu.RLock()
	defer s.dirMu.RUnlock()
	st, ok := s.stores[req.StoreId]
	if !ok {
		return &kvpb.GetStoreResponse{Error: &kvpb.PDError{Message: fmt.Sprintf("store %d not found", req.StoreId)}}, nil
	}
	return &kvpb.GetStoreResponse{Store: st}, nil
}

// AllocID implements kvpb.PDServer.
func (s *Server) AllocID(ctx context.Context, req *kvpb.AllocIDRequest) (*kvpb.AllocIDResponse, error) {
	id, err := s.AllocIDs(ctx, max(req.Count, 1))
	if err != nil {
		return &kvpb.AllocIDResponse{Error: &kvpb.PDError{Message: err.Error()}}, nil
	}
	return &kvpb.AllocIDResponse{Id: id}, nil
}
