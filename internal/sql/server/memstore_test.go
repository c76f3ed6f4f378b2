package server

import (
	"bytes"
	"context"
	"sort"
	"sync"

	"github.com/strata-db/strata/internal/kv"
)

// memStore is an in-memory kv.Storage for running the real SQL engine
// behind the server in tests: multi-version values, snapshot reads at the
// transaction's start, first-committer-wins conflicts at commit.
type memStore struct {
	mu       sync.Mutex
	clock    uint64
	versions map[string][]memVersion // ascending commit timestamps
}

type memVersion struct {
	commitTS uint64
	value    []byte
	deleted  bool
}

func newMemStore() *memStore { return &memStore{versions: map[string][]memVersion{}} }

func (s *memStore) Begin(ctx context.Context, opts kv.TxnOptions) (kv.Txn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	return &memTxn{s: s, start: s.clock, writes: map[string]memVersion{}}, nil
}

type memTxn struct {
	s      *memStore
	start  uint64
	writes map[string]memVersion // commitTS unused
}

func (t *memTxn) StartTS() uint64 { return t.start }

// visible returns the value of key in this transaction's view; s.mu held.
func (t *memTxn) visible(key string) ([]byte, bool) {
	if w, ok := t.writes[key]; ok {
		return w.value, !w.deleted
	}
	vs := t.s.versions[key]
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].commitTS <= t.start {
			return vs[i].value, !vs[i].deleted
		}
	}
	return nil, false
}

func (t *memTxn) Get(ctx context.Context, key []byte) ([]byte, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if v, ok := t.visible(string(key)); ok {
		return v, nil
	}
	return nil, kv.ErrNotFound
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
	inRange := func(k string) bool {
		return bytes.Compare([]byte(k), start) >= 0 && (end == nil || bytes.Compare([]byte(k), end) < 0)
	}
	seen := map[string]bool{}
	var keys []string
	for k := range t.s.versions {
		if inRange(k) && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for k := range t.writes {
		if inRange(k) && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if reverse {
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	var out []kv.KeyValue
	for _, k := range keys {
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

func (t *memTxn) Delete(key []byte) error {
	t.writes[string(key)] = memVersion{deleted: true}
	return nil
}

func (t *memTxn) LockKeys(ctx context.Context, keys ...[]byte) error { return nil }

func (t *memTxn) Commit(ctx context.Context) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for k := range t.writes {
		if vs := t.s.versions[k]; len(vs) > 0 && vs[len(vs)-1].commitTS > t.start {
			return &kv.RetryableError{Reason: "write conflict on key " + string(k)}
		}
	}
	t.s.clock++
	for k, w := range t.writes {
		w.commitTS = t.s.clock
		t.s.versions[k] = append(t.s.versions[k], w)
	}
	t.writes = map[string]memVersion{}
	return nil
}

func (t *memTxn) Rollback(ctx context.Context) error {
	t.writes = map[string]memVersion{}
	return nil
}

func (t *memTxn) Len() int { return len(t.writes) }

type memIter struct {
	kvs []kv.KeyValue
	i   int
}

func (it *memIter) Valid() bool                    { return it.i < len(it.kvs) }
func (it *memIter) Key() []byte                    { return it.kvs[it.i].Key }
func (it *memIter) Value() []byte                  { return it.kvs[it.i].Value }
func (it *memIter) Next(ctx context.Context) error { it.i++; return nil }
func (it *memIter) Close()                         {}
