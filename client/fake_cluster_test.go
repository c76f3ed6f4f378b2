package client

// TEST DOUBLE. fakeCluster stands in for PD and the region leaders of a
// cluster so the coordinator's own logic (routing, retries, Percolator
// commit, lock resolution, merging) can be tested alone. It implements a
// deliberately small in-memory Percolator with the semantics of kvpb.proto;
// it is not the storage engine and proves nothing about it. End-to-end
// behaviour against the real server is tested in e2e_test.go.

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-db/strata/kvpb"
)

type fakeWrite struct {
	startTS, commitTS uint64
	op                kvpb.Op // Put, Del, Lock or Rollback
	value             []byte
}

type fakeLock struct {
	primary     []byte
	startTS     uint64
	ttl         uint64
	op          kvpb.Op
	value       []byte
	forUpdateTS uint64
}

type fakeKey struct {
	lock   *fakeLock
	writes []fakeWrite // newest commit first
}

type fakeRegion struct {
	region *kvpb.Region
	leader uint64 // store id
}

// fakeCluster is a test double of PD plus every store.
type fakeCluster struct {
	mu      sync.Mutex
	regions []*fakeRegion // sorted, covering the keyspace
	keys    map[string]*fakeKey
	tsoLast uint64
	nextID  uint64

	// intercept, when set, runs before every KV request; a non-nil
	// response or error replaces the real handling.
	intercept func(store uint64, method string, req any) (any, error)
	calls     map[string]int
	tsoCalls  int
	pdCalls   int
}

// newFakeCluster makes regions split at the given keys, each led by store 1
// with peers on stores 1..3.
func newFakeCluster(splits ...string) *fakeCluster {
	fc := &fakeCluster{keys: make(map[string]*fakeKey), calls: make(map[string]int)}
	bounds := append([]string{""}, splits...)
	for i, s := range bounds {
		r := &kvpb.Region{
			Id:       uint64(i + 10),
			StartKey: []byte(s),
			Epoch:    &kvpb.RegionEpoch{Version: 1, ConfVer: 1},
			Peers:    []*kvpb.Peer{{Id: uint64(100 + i*3), StoreId: 1}, {Id: uint64(101 + i*3), StoreId: 2}, {Id: uint64(102 + i*3), StoreId: 3}},
		}
		if i+1 < len(bounds) {
			r.EndKey = []byte(bounds[i+1])
		}
		fc.regions = append(fc.regions, &fakeRegion{region: r, leader: 1})
	}
	return fc
}

func (fc *fakeCluster) newClient(opts Options) *Client {
	return New(fakePD{fc}, fakeRouter{fc}, opts)
}

func (fc *fakeCluster) callCount(method string) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.calls[method]
}

// split splits the region containing key at key, bumping epochs.
func (fc *fakeCluster) split(key string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for i, fr := range fc.regions {
		r := fr.region
		if bytes.Compare([]byte(key), r.StartKey) > 0 && (len(r.EndKey) == 0 || bytes.Compare([]byte(key), r.EndKey) < 0) {
			fc.nextID++
			right := &kvpb.Region{Id: 1000 + fc.nextID, StartKey: []byte(key), EndKey: r.EndKey,
				Epoch: &kvpb.RegionEpoch{Version: r.Epoch.Version + 1, ConfVer: r.Epoch.ConfVer}, Peers: r.Peers}
			left := &kvpb.Region{Id: r.Id, StartKey: r.StartKey, EndKey: []byte(key),
				Epoch: &kvpb.RegionEpoch{Version: r.Epoch.Version + 1, ConfVer: r.Epoch.ConfVer}, Peers: r.Peers}
			fc.regions[i] = &fakeRegion{region: left, leader: fr.leader}
			fc.regions = append(fc.regions[:i+1], append([]*fakeRegion{{region: right, leader: fr.leader}}, fc.regions[i+1:]...)...)
			return
		}
	}
}

// setLeader moves the leadership of the region containing key.
func (fc *fakeCluster) setLeader(key string, store uint64) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.regionOf([]byte(key)).leader = store
}

func (fc *fakeCluster) regionOf(key []byte) *fakeRegion {
	for _, fr := range fc.regions {
		r := fr.region
		if bytes.Compare(key, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(key, r.EndKey) < 0) {
			return fr
		}
	}
	panic("fake cluster does not cover key")
}

func (fc *fakeCluster) key(k []byte) *fakeKey {
	fk, ok := fc.keys[string(k)]
	if !ok {
		fk = &fakeKey{}
		fc.keys[string(k)] = fk
	}
	return fk
}

func (fc *fakeCluster) nextTS() uint64 {
	ts := uint64(time.Now().UnixMilli()) << physicalShift
	if ts <= fc.tsoLast {
		ts = fc.tsoLast + 1
	}
	fc.tsoLast = ts
	return ts
}

// check validates routing like a region leader does.
func (fc *fakeCluster) check(store uint64, rctx *kvpb.Context, keys ...[]byte) *kvpb.RegionError {
	var fr *fakeRegion
	for _, r := range fc.regions {
		if r.region.Id == rctx.GetRegionId() {
			fr = r
		}
	}
	if fr == nil {
		return &kvpb.RegionError{RegionNotFound: &kvpb.RegionNotFound{RegionId: rctx.GetRegionId()}}
	}
	if fr.leader != store {
		return &kvpb.RegionError{NotLeader: &kvpb.NotLeader{RegionId: fr.region.Id, Leader: peerOnStore(fr.region, fr.leader)}}
	}
	if rctx.RegionEpoch.GetVersion() != fr.region.Epoch.Version {
		var cur []*kvpb.Region
		for _, r := range fc.regions {
			cur = append(cur, r.region)
		}
		return &kvpb.RegionError{EpochNotMatch: &kvpb.EpochNotMatch{CurrentRegions: cur}}
	}
	for _, k := range keys {
		r := fr.region
		if bytes.Compare(k, r.StartKey) < 0 || (len(r.EndKey) > 0 && bytes.Compare(k, r.EndKey) >= 0) {
			return &kvpb.RegionError{KeyNotInRegion: &kvpb.KeyNotInRegion{Key: k, RegionId: r.Id}}
		}
	}
	return nil
}

func (fc *fakeCluster) lockInfo(k []byte, l *fakeLock) *kvpb.LockInfo {
	return &kvpb.LockInfo{PrimaryLock: l.primary, LockVersion: l.startTS, Key: k, LockTtl: l.ttl, LockType: l.op, LockForUpdateTs: l.forUpdateTS}
}

// read returns the value visible at ts, or a lock in the way.
func (fc *fakeCluster) read(k []byte, ts uint64) (val []byte, found bool, ke *kvpb.KeyError) {
	fk := fc.keys[string(k)]
	if fk == nil {
		return nil, false, nil
	}
	if l := fk.lock; l != nil && l.startTS <= ts && l.op != kvpb.Op_PessimisticLock && l.op != kvpb.Op_Lock {
		return nil, false, &kvpb.KeyError{Locked: fc.lockInfo(k, l)}
	}
	for _, w := range fk.writes {
		if w.commitTS > ts || w.op == kvpb.Op_Rollback || w.op == kvpb.Op_Lock {
			continue
		}
		if w.op == kvpb.Op_Del {
			return nil, false, nil
		}
		return w.value, true, nil
	}
	return nil, false, nil
}

func (fc *fakeCluster) addWrite(k []byte, w fakeWrite) {
	fk := fc.key(k)
	fk.writes = append(fk.writes, w)
	sort.Slice(fk.writes, func(i, j int) bool { return fk.writes[i].commitTS > fk.writes[j].commitTS })
}

// commitKey commits k's lock of startTS; idempotent.
func (fc *fakeCluster) commitKey(k []byte, startTS, commitTS uint64) *kvpb.KeyError {
	fk := fc.key(k)
	if l := fk.lock; l != nil && l.startTS == startTS {
		op := l.op
		if op == kvpb.Op_PessimisticLock {
			op = kvpb.Op_Lock
		}
		fc.addWrite(k, fakeWrite{startTS: startTS, commitTS: commitTS, op: op, value: l.value})
		fk.lock = nil
		return nil
	}
	for _, w := range fk.writes {
		if w.startTS == startTS {
			if w.op == kvpb.Op_Rollback {
				return &kvpb.KeyError{Abort: "transaction rolled back"}
			}
			return nil
		}
	}
	return &kvpb.KeyError{TxnNotFound: &kvpb.TxnNotFound{StartTs: startTS, PrimaryKey: k}}
}

func (fc *fakeCluster) rollbackKey(k []byte, startTS uint64) *kvpb.KeyError {
	fk := fc.key(k)
	for _, w := range fk.writes {
		if w.startTS == startTS {
			if w.op != kvpb.Op_Rollback {
				return &kvpb.KeyError{Abort: "already committed"}
			}
			return nil
		}
	}
	if l := fk.lock; l != nil && l.startTS == startTS {
		fk.lock = nil
	}
	fc.addWrite(k, fakeWrite{startTS: startTS, commitTS: startTS, op: kvpb.Op_Rollback})
	return nil
}

func (fc *fakeCluster) handle(store uint64, method string, req any) (any, error) {
	fc.mu.Lock()
	fc.calls[method]++
	hook := fc.intercept
	fc.mu.Unlock()
	if hook != nil {
		if resp, err := hook(store, method, req); resp != nil || err != nil {
			return resp, err
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	switch r := req.(type) {
	case *kvpb.GetRequest:
		if re := fc.check(store, r.Context, r.Key); re != nil {
			return &kvpb.GetResponse{RegionError: re}, nil
		}
		v, found, ke := fc.read(r.Key, r.Version)
		return &kvpb.GetResponse{Value: v, NotFound: !found && ke == nil, Error: ke}, nil
	case *kvpb.BatchGetRequest:
		if re := fc.check(store, r.Context, r.Keys...); re != nil {
			return &kvpb.BatchGetResponse{RegionError: re}, nil
		}
		resp := &kvpb.BatchGetResponse{}
		for _, k := range r.Keys {
			v, found, ke := fc.read(k, r.Version)
			if ke != nil || found {
				resp.Pairs = append(resp.Pairs, &kvpb.KvPair{Key: k, Value: v, Error: ke})
			}
		}
		return resp, nil
	case *kvpb.ScanRequest:
		return fc.scan(store, r), nil
	case *kvpb.PrewriteRequest:
		return fc.prewrite(store, r), nil
	case *kvpb.CommitRequest:
		if re := fc.check(store, r.Context, r.Keys...); re != nil {
			return &kvpb.CommitResponse{RegionError: re}, nil
		}
		for _, k := range r.Keys {
			if ke := fc.commitKey(k, r.StartVersion, r.CommitVersion); ke != nil {
				return &kvpb.CommitResponse{Error: ke}, nil
			}
		}
		return &kvpb.CommitResponse{CommitVersion: r.CommitVersion}, nil
	case *kvpb.BatchRollbackRequest:
		if re := fc.check(store, r.Context, r.Keys...); re != nil {
			return &kvpb.BatchRollbackResponse{RegionError: re}, nil
		}
		for _, k := range r.Keys {
			if ke := fc.rollbackKey(k, r.StartVersion); ke != nil {
				return &kvpb.BatchRollbackResponse{Error: ke}, nil
			}
		}
		return &kvpb.BatchRollbackResponse{}, nil
	case *kvpb.CheckTxnStatusRequest:
		return fc.checkTxnStatus(store, r), nil
	case *kvpb.ResolveLockRequest:
		if re := fc.check(store, r.Context, r.Keys...); re != nil {
			return &kvpb.ResolveLockResponse{RegionError: re}, nil
		}
		for _, k := range r.Keys {
			fk := fc.key(k)
			if fk.lock == nil || fk.lock.startTS != r.StartVersion {
				continue
			}
			if r.CommitVersion != 0 {
				fc.commitKey(k, r.StartVersion, r.CommitVersion)
			} else {
				fc.rollbackKey(k, r.StartVersion)
			}
		}
		return &kvpb.ResolveLockResponse{}, nil
	case *kvpb.PessimisticLockRequest:
		return fc.pessimisticLock(store, r), nil
	case *kvpb.PessimisticRollbackRequest:
		if re := fc.check(store, r.Context, r.Keys...); re != nil {
			return &kvpb.PessimisticRollbackResponse{RegionError: re}, nil
		}
		for _, k := range r.Keys {
			if fk := fc.key(k); fk.lock != nil && fk.lock.startTS == r.StartVersion && fk.lock.op == kvpb.Op_PessimisticLock {
				fk.lock = nil
			}
		}
		return &kvpb.PessimisticRollbackResponse{}, nil
	case *kvpb.DestroyRangeRequest:
		if re := fc.check(store, r.Context); re != nil {
			return &kvpb.DestroyRangeResponse{RegionError: re}, nil
		}
		if r.SafePoint == 0 {
			return &kvpb.DestroyRangeResponse{Error: "no safe point"}, nil
		}
		reg := fc.regionOf(r.StartKey).region
		for k := range fc.keys {
			b := []byte(k)
			in := bytes.Compare(b, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(b, r.EndKey) < 0)
			inRegion := bytes.Compare(b, reg.StartKey) >= 0 && (len(reg.EndKey) == 0 || bytes.Compare(b, reg.EndKey) < 0)
			if in && inRegion {
				delete(fc.keys, k)
			}
		}
		return &kvpb.DestroyRangeResponse{}, nil
	case *kvpb.TxnHeartBeatRequest:
		if re := fc.check(store, r.Context, r.PrimaryLock); re != nil {
			return &kvpb.TxnHeartBeatResponse{RegionError: re}, nil
		}
		fk := fc.key(r.PrimaryLock)
		if fk.lock == nil || fk.lock.startTS != r.StartVersion {
			return &kvpb.TxnHeartBeatResponse{Error: &kvpb.KeyError{TxnNotFound: &kvpb.TxnNotFound{StartTs: r.StartVersion}}}, nil
		}
		fk.lock.ttl = max(fk.lock.ttl, r.AdviseLockTtl)
		return &kvpb.TxnHeartBeatResponse{LockTtl: fk.lock.ttl}, nil
	}
	return nil, errors.New("fake: unknown request")
}

func (fc *fakeCluster) scan(store uint64, r *kvpb.ScanRequest) *kvpb.ScanResponse {
	if re := fc.check(store, r.Context, r.StartKey); re != nil {
		return &kvpb.ScanResponse{RegionError: re}
	}
	var all []string
	for k := range fc.keys {
		kb := []byte(k)
		if bytes.Compare(kb, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(kb, r.EndKey) < 0) {
			all = append(all, k)
		}
	}
	sort.Strings(all)
	if r.Reverse {
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
	}
	resp := &kvpb.ScanResponse{}
	for _, k := range all {
		if r.Limit > 0 && len(resp.Pairs) >= int(r.Limit) {
			break
		}
		v, found, ke := fc.read([]byte(k), r.Version)
		if ke != nil || found {
			resp.Pairs = append(resp.Pairs, &kvpb.KvPair{Key: []byte(k), Value: v, Error: ke})
		}
	}
	return resp
}

func (fc *fakeCluster) prewrite(store uint64, r *kvpb.PrewriteRequest) *kvpb.PrewriteResponse {
	keys := make([][]byte, len(r.Mutations))
	for i, m := range r.Mutations {
		keys[i] = m.Key
	}
	if re := fc.check(store, r.Context, keys...); re != nil {
		return &kvpb.PrewriteResponse{RegionError: re}
	}
	var errs []*kvpb.KeyError
	for i, m := range r.Mutations {
		fk := fc.key(m.Key)
		pessimistic := i < len(r.IsPessimisticLock) && r.IsPessimisticLock[i]
		if l := fk.lock; l != nil {
			if l.startTS != r.StartVersion {
				errs = append(errs, &kvpb.KeyError{Locked: fc.lockInfo(m.Key, l)})
			}
			continue
		}
		if pessimistic {
			errs = append(errs, &kvpb.KeyError{Abort: "pessimistic lock not found"})
			continue
		}
		for _, w := range fk.writes {
			if w.startTS == r.StartVersion && w.op == kvpb.Op_Rollback {
				errs = append(errs, &kvpb.KeyError{Abort: "already rolled back"})
				break
			}
			if w.commitTS >= r.StartVersion {
				errs = append(errs, &kvpb.KeyError{Conflict: &kvpb.WriteConflict{StartTs: r.StartVersion, ConflictTs: w.startTS, Key: m.Key, ConflictCommitTs: w.commitTS}})
				break
			}
		}
	}
	if len(errs) > 0 {
		return &kvpb.PrewriteResponse{Errors: errs}
	}
	var commitTS uint64
	if r.TryOnePc {
		commitTS = fc.nextTS()
	}
	for _, m := range r.Mutations {
		if commitTS != 0 {
			fc.key(m.Key).lock = nil
			fc.addWrite(m.Key, fakeWrite{startTS: r.StartVersion, commitTS: commitTS, op: m.Op, value: m.Value})
			continue
		}
		fc.key(m.Key).lock = &fakeLock{primary: r.PrimaryLock, startTS: r.StartVersion, ttl: r.LockTtl, op: m.Op, value: m.Value, forUpdateTS: r.ForUpdateTs}
	}
	return &kvpb.PrewriteResponse{OnePcCommitTs: commitTS}
}

func (fc *fakeCluster) checkTxnStatus(store uint64, r *kvpb.CheckTxnStatusRequest) *kvpb.CheckTxnStatusResponse {
	if re := fc.check(store, r.Context, r.PrimaryKey); re != nil {
		return &kvpb.CheckTxnStatusResponse{RegionError: re}
	}
	fk := fc.key(r.PrimaryKey)
	if l := fk.lock; l != nil && l.startTS == r.LockTs {
		if lockExpiresIn(l.startTS, l.ttl, r.CurrentTs) <= 0 {
			fc.rollbackKey(r.PrimaryKey, r.LockTs)
			return &kvpb.CheckTxnStatusResponse{Action: kvpb.Action_TTLExpireRollback}
		}
		return &kvpb.CheckTxnStatusResponse{LockTtl: l.ttl, LockInfo: fc.lockInfo(r.PrimaryKey, l)}
	}
	for _, w := range fk.writes {
		if w.startTS == r.LockTs {
			if w.op == kvpb.Op_Rollback {
				return &kvpb.CheckTxnStatusResponse{}
			}
			return &kvpb.CheckTxnStatusResponse{CommitVersion: w.commitTS}
		}
	}
	if r.RollbackIfNotExist {
		fc.rollbackKey(r.PrimaryKey, r.LockTs)
		return &kvpb.CheckTxnStatusResponse{Action: kvpb.Action_LockNotExistRollback}
	}
	return &kvpb.CheckTxnStatusResponse{Error: &kvpb.KeyError{TxnNotFound: &kvpb.TxnNotFound{StartTs: r.LockTs, PrimaryKey: r.PrimaryKey}}}
}

func (fc *fakeCluster) pessimisticLock(store uint64, r *kvpb.PessimisticLockRequest) *kvpb.PessimisticLockResponse {
	keys := make([][]byte, len(r.Mutations))
	for i, m := range r.Mutations {
		keys[i] = m.Key
	}
	if re := fc.check(store, r.Context, keys...); re != nil {
		return &kvpb.PessimisticLockResponse{RegionError: re}
	}
	var errs []*kvpb.KeyError
	for _, m := range r.Mutations {
		fk := fc.key(m.Key)
		if l := fk.lock; l != nil {
			if l.startTS != r.StartVersion {
				errs = append(errs, &kvpb.KeyError{Locked: fc.lockInfo(m.Key, l)})
			}
			continue
		}
		for _, w := range fk.writes {
			if w.op != kvpb.Op_Rollback && w.commitTS > r.ForUpdateTs {
				errs = append(errs, &kvpb.KeyError{Conflict: &kvpb.WriteConflict{StartTs: r.StartVersion, ConflictTs: w.startTS, Key: m.Key, ConflictCommitTs: w.commitTS}})
				break
			}
		}
	}
	if len(errs) > 0 {
		return &kvpb.PessimisticLockResponse{Errors: errs}
	}
	for _, m := range r.Mutations {
		fk := fc.key(m.Key)
		if fk.lock == nil {
			fk.lock = &fakeLock{primary: r.PrimaryLock, startTS: r.StartVersion, ttl: r.LockTtl, op: kvpb.Op_PessimisticLock, forUpdateTS: r.ForUpdateTs}
		}
	}
	return &kvpb.PessimisticLockResponse{}
}

// fakePD is the PD half of the test double.
type fakePD struct{ fc *fakeCluster }

func (p fakePD) Tso(_ context.Context, in *kvpb.TsoRequest, _ ...grpc.CallOption) (*kvpb.TsoResponse, error) {
	p.fc.mu.Lock()
	defer p.fc.mu.Unlock()
	p.fc.tsoCalls++
	var last uint64
	for i := uint32(0); i < in.Count; i++ {
		last = p.fc.nextTS()
	}
	return &kvpb.TsoResponse{Timestamp: last, Count: in.Count}, nil
}

func (p fakePD) GetRegion(_ context.Context, in *kvpb.GetRegionRequest, _ ...grpc.CallOption) (*kvpb.GetRegionResponse, error) {
	p.fc.mu.Lock()
	defer p.fc.mu.Unlock()
	p.fc.pdCalls++
	fr := p.fc.regionOf(in.Key)
	return &kvpb.GetRegionResponse{Region: fr.region, Leader: peerOnStore(fr.region, fr.leader)}, nil
}

func (p fakePD) ScanRegions(_ context.Context, in *kvpb.ScanRegionsRequest, _ ...grpc.CallOption) (*kvpb.ScanRegionsResponse, error) {
	p.fc.mu.Lock()
	defer p.fc.mu.Unlock()
	p.fc.pdCalls++
	resp := &kvpb.ScanRegionsResponse{}
	for _, fr := range p.fc.regions {
		r := fr.region
		if len(r.EndKey) > 0 && bytes.Compare(r.EndKey, in.StartKey) <= 0 {
			continue
		}
		if len(in.EndKey) > 0 && bytes.Compare(r.StartKey, in.EndKey) >= 0 {
			break
		}
		if in.Limit > 0 && len(resp.Regions) >= int(in.Limit) {
			break
		}
		resp.Regions = append(resp.Regions, r)
		resp.Leaders = append(resp.Leaders, peerOnStore(r, fr.leader))
	}
	return resp, nil
}

func (p fakePD) GetStore(_ context.Context, in *kvpb.GetStoreRequest, _ ...grpc.CallOption) (*kvpb.GetStoreResponse, error) {
	return &kvpb.GetStoreResponse{Store: &kvpb.Store{Id: in.StoreId, Address: "fake"}}, nil
}

// fakeRouter hands out the fake store of each store id.
type fakeRouter struct{ fc *fakeCluster }

func (r fakeRouter) KvClient(storeID uint64) (kvpb.KvClient, error) {
	return LocalKv(fakeStore{fc: r.fc, id: storeID}), nil
}

// fakeStore is one store of the test double, as a kvpb.KvServer.
type fakeStore struct {
	kvpb.UnimplementedKvServer
	fc *fakeCluster
	id uint64
}

func fakeCall[Resp any](s fakeStore, method string, req any) (Resp, error) {
	var zero Resp
	resp, err := s.fc.handle(s.id, method, req)
	if err != nil {
		return zero, err
	}
	return resp.(Resp), nil
}

func (s fakeStore) KvGet(_ context.Context, r *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	return fakeCall[*kvpb.GetResponse](s, "Get", r)
}

func (s fakeStore) KvBatchGet(_ context.Context, r *kvpb.BatchGetRequest) (*kvpb.BatchGetResponse, error) {
	return fakeCall[*kvpb.BatchGetResponse](s, "BatchGet", r)
}

func (s fakeStore) KvScan(_ context.Context, r *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	return fakeCall[*kvpb.ScanResponse](s, "Scan", r)
}

func (s fakeStore) KvPrewrite(_ context.Context, r *kvpb.PrewriteRequest) (*kvpb.PrewriteResponse, error) {
	return fakeCall[*kvpb.PrewriteResponse](s, "Prewrite", r)
}

func (s fakeStore) KvCommit(_ context.Context, r *kvpb.CommitRequest) (*kvpb.CommitResponse, error) {
	return fakeCall[*kvpb.CommitResponse](s, "Commit", r)
}

func (s fakeStore) KvBatchRollback(_ context.Context, r *kvpb.BatchRollbackRequest) (*kvpb.BatchRollbackResponse, error) {
	return fakeCall[*kvpb.BatchRollbackResponse](s, "BatchRollback", r)
}

func (s fakeStore) KvCheckTxnStatus(_ context.Context, r *kvpb.CheckTxnStatusRequest) (*kvpb.CheckTxnStatusResponse, error) {
	return fakeCall[*kvpb.CheckTxnStatusResponse](s, "CheckTxnStatus", r)
}

func (s fakeStore) KvResolveLock(_ context.Context, r *kvpb.ResolveLockRequest) (*kvpb.ResolveLockResponse, error) {
	return fakeCall[*kvpb.ResolveLockResponse](s, "ResolveLock", r)
}

func (s fakeStore) KvPessimisticLock(_ context.Context, r *kvpb.PessimisticLockRequest) (*kvpb.PessimisticLockResponse, error) {
	return fakeCall[*kvpb.PessimisticLockResponse](s, "PessimisticLock", r)
}

func (s fakeStore) KvPessimisticRollback(_ context.Context, r *kvpb.PessimisticRollbackRequest) (*kvpb.PessimisticRollbackResponse, error) {
	return fakeCall[*kvpb.PessimisticRollbackResponse](s, "PessimisticRollback", r)
}

func (s fakeStore) KvTxnHeartBeat(_ context.Context, r *kvpb.TxnHeartBeatRequest) (*kvpb.TxnHeartBeatResponse, error) {
	return fakeCall[*kvpb.TxnHeartBeatResponse](s, "TxnHeartBeat", r)
}

func (s fakeStore) KvDestroyRange(_ context.Context, r *kvpb.DestroyRangeRequest) (*kvpb.DestroyRangeResponse, error) {
	return fakeCall[*kvpb.DestroyRangeResponse](s, "DestroyRange", r)
}
