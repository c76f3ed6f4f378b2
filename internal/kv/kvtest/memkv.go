// Package kvtest provides an in-memory kv.Storage for unit tests of the
// layers above the transactional client (the SQL engine, the wire server).
// It is a test double: snapshot reads and first-committer-wins conflicts
// like the real client, no Raft, no Pebble, nothing durable. Tests that
// need the real stack start an in-process node instead.
package kvtest

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"sync"

	"github.com/strata-db/strata/internal/kv"
)

// memStorage is an ordered in-memory multi-version map with snapshot reads
// and first-committer-wins write conflicts.
type memStorage struct {
	mu    sync.Mutex
	clock uint64
	data  map[string][]memVersion // versions in commit order
}

type memVersion struct {
	ts    uint64
	value []byte
	del   bool
}

// NewMemStorage returns an empty in-memory kv.Storage test double.
func NewMemStorage() kv.Storage { return &memStorage{data: map[string][]memVersion{}} }

func (s *memStorage) Begin(ctx context.Context, opts kv.TxnOptions) (kv.Txn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	return &memTxn{s: s, start: s.clock, writes: map[string]memVersion{}}, nil
}

type memTxn struct {
	s      *memStorage
	start  uint64
	writes map[string]memVersion
	locked map[string]bool
	absent map[string]bool // keys written by Insert: checked at Commit
	done   bool
}

func (t *memTxn) StartTS() uint64 { return t.start }

func (t *memTxn) visible(k string) ([]byte, bool) {
	if w, ok := t.writes[k]; ok {
		return w.value, !w.del
	}
	vs := t.s.data[k]
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].ts <= t.start {
			return vs[i].value, !vs[i].del
		}
	}
	return nil, false
}

func (t *memTxn) Get(ctx context.Context, key []byte) ([]byte, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	v, ok := t.visible(string(key))
	if !ok {
		return nil, kv.ErrNotFound
	}
	return v, nil
}

func (t *memTxn) BatchGet(ctx context.Context, keys [][]byte) (map[string][]byte, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	out := map[string][]byte{}
	for _, k := range keys {
		if v, ok := t.visible(string(k)); ok {
			out[string(k)] = v
		}
	}
	return out, nil
}

func (t *memTxn) Scan(ctx context.Context, start, end []byte, limit int, reverse bool) ([]kv.KeyValue, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	keys := map[string]bool{}
	in := func(k string) bool {
		return bytes.Compare([]byte(k), start) >= 0 && (end == nil || bytes.Compare([]byte(k), end) < 0)
	}
	for k := range t.s.data {
		if in(k) {
			keys[k] = true
		}
	}
	for k := range t.writes {
		if in(k) {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	if reverse {
		for i, j := 0, len(sorted)-1; i < j; i, j = i+1, j-1 {
			sorted[i], sorted[j] = sorted[j], sorted[i]
		}
	}
	var out []kv.KeyValue
	for _, k := range sorted {
		if v, ok := t.visible(k); ok {
			out = append(out, kv.KeyValue{Key: []byte(k), Value: v})
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

func (t *memTxn) Iter(ctx context.Context, start, end []byte, reverse bool) (kv.Iterator, error) {
	kvs, err := t.Scan(ctx, start, end, 0, reverse)
	if err != nil {
		return nil, err
	}
	return &memIter{kvs: kvs}, nil
}

func (t *memTxn) Set(key, value []byte) error {
	t.writes[string(key)] = memVersion{value: append([]byte(nil), value...)}
	return nil
}

// Insert is kv.Inserter's: Set, with the check that key has no committed
// value left to Commit.
func (t *memTxn) Insert(key, value []byte) error {
	if w, ok := t.writes[string(key)]; ok {
		if !w.del {
			return &kv.KeyExistsError{Key: bytes.Clone(key)}
		}
		return t.Set(key, value)
	}
	if t.absent == nil {
		t.absent = map[string]bool{}
	}
	t.absent[string(key)] = true
	return t.Set(key, value)
}

func (t *memTxn) Delete(key []byte) error {
	t.writes[string(key)] = memVersion{del: true}
	return nil
}

// conflict reports whether key was committed by someone else after start.
func (t *memTxn) conflict(k string) bool {
	vs := t.s.data[k]
	return len(vs) > 0 && vs[len(vs)-1].ts > t.start
}

func (t *memTxn) LockKeys(ctx context.Context, keys ...[]byte) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for _, k := range keys {
		if t.conflict(string(k)) {
			return &kv.RetryableError{Reason: "write conflict on locked key"}
		}
		if t.locked == nil {
			t.locked = map[string]bool{}
		}
		t.locked[string(k)] = true
	}
	return nil
}

// LockKeysWith is LockKeys: this store's transactions never hold locks
// another one must wait for, so NOWAIT and SKIP LOCKED change nothing.
func (t *memTxn) LockKeysWith(ctx context.Context, opts kv.LockOptions, keys ...[]byte) ([][]byte, error) {
	return nil, t.LockKeys(ctx, keys...)
}

func (t *memTxn) Commit(ctx context.Context) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.done {
		return nil
	}
	t.done = true
	for k := range t.writes {
		if t.conflict(k) {
			return &kv.RetryableError{Reason: "write conflict"}
		}
	}
	for k := range t.locked {
		if t.conflict(k) {
			return &kv.RetryableError{Reason: "write conflict on locked key"}
		}
	}
	for k := range t.absent {
		if vs := t.s.data[k]; len(vs) > 0 && !vs[len(vs)-1].del {
			return &kv.KeyExistsError{Key: []byte(k)}
		}
	}
	t.s.clock++
	for k, w := range t.writes {
		w.ts = t.s.clock
		t.s.data[k] = append(t.s.data[k], w)
	}
	return nil
}

func (t *memTxn) Rollback(ctx context.Context) error { t.done = true; return nil }

func (t *memTxn) Len() int { return len(t.writes) }

type memIter struct {
	kvs []kv.KeyValue
	pos int
}

func (it *memIter) Valid() bool                    { return it.pos < len(it.kvs) }
func (it *memIter) Key() []byte                    { return it.kvs[it.pos].Key }
func (it *memIter) Value() []byte                  { return it.kvs[it.pos].Value }
func (it *memIter) Next(ctx context.Context) error { it.pos++; return nil }
func (it *memIter) Close()                         {}

// GetLatest returns the newest committed value of key (the double of
// client.Client.GetLatest).
func (s *memStorage) GetLatest(ctx context.Context, key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vs := s.data[string(key)]
	if len(vs) == 0 || vs[len(vs)-1].del {
		return nil, kv.ErrNotFound
	}
	return append([]byte(nil), vs[len(vs)-1].value...), nil
}

// DestroyRange implements kv.RangeDestroyer: every version of every key in
// [start, end) is forgotten. The double keeps no safe point, so reads
// below safePoint are not refused.
func (s *memStorage) DestroyRange(ctx context.Context, start, end []byte, safePoint uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.data {
		if bytes.Compare([]byte(k), start) >= 0 && (len(end) == 0 || bytes.Compare([]byte(k), end) < 0) {
			delete(s.data, k)
		}
	}
	return nil
}

// Import implements kv.Importer: each pair becomes a version committed at
// its own timestamp, placed among the key's versions in timestamp order.
func (s *memStorage) Import(ctx context.Context, pairs []kv.VersionedKeyValue) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pairs {
		vs := s.data[string(p.Key)]
		i := sort.Search(len(vs), func(i int) bool { return vs[i].ts >= p.Version })
		v := memVersion{ts: p.Version, value: append([]byte(nil), p.Value...)}
		if i < len(vs) && vs[i].ts == p.Version {
			vs[i] = v
			continue
		}
		s.data[string(p.Key)] = slices.Insert(vs, i, v)
	}
	return nil
}

// Savepoint implements kv.Savepointer.
func (t *memTxn) Savepoint() any {
	w := make(map[string]memVersion, len(t.writes))
	for k, v := range t.writes {
		w[k] = v
	}
	a := make(map[string]bool, len(t.absent))
	for k, v := range t.absent {
		a[k] = v
	}
	return [2]any{w, a}
}

// RollbackToSavepoint implements kv.Savepointer.
func (t *memTxn) RollbackToSavepoint(sp any) {
	s := sp.([2]any)
	t.writes = map[string]memVersion{}
	for k, v := range s[0].(map[string]memVersion) {
		t.writes[k] = v
	}
	t.absent = map[string]bool{}
	for k, v := range s[1].(map[string]bool) {
		t.absent[k] = v
	}
}
