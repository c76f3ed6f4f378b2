package exec

import (
	"context"
	"slices"

	"github.com/strata-db/strata/internal/kv"
	"github.com/strata-db/strata/internal/sql/tablecodec"
)

// StmtBuffer stages the writes of one statement on top of a transaction.
// Get reads through it (so a statement sees its own earlier rows when it
// checks uniqueness); Flush applies the writes to the transaction in order.
// Discarding the buffer undoes the statement.
type StmtBuffer struct {
	txn    kv.Txn
	vals   map[string]stmtWrite
	order  []string
	size   int64
	tables []int64 // ids of the tables whose keys are staged
	// pre holds values read ahead with Prefetch (until Flush).
	pre map[string]prefetched
}

type prefetched struct {
	value []byte
	found bool
}

// Prefetch reads keys from the transaction in one batch, so that the Gets
// of a multi-row statement's uniqueness checks do not each make a round
// trip; the statement's own staged writes still take precedence.
func (b *StmtBuffer) Prefetch(ctx context.Context, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	got, err := b.txn.BatchGet(ctx, keys)
	if err != nil {
		return err
	}
	if b.pre == nil {
		b.pre = make(map[string]prefetched, len(keys))
	}
	for _, k := range keys {
		v, ok := got[string(k)]
		b.pre[string(k)] = prefetched{value: v, found: ok}
	}
	return nil
}

// Covers reports whether Get answers key without reading the
// transaction: the statement wrote key, or read it ahead.
func (b *StmtBuffer) Covers(key []byte) bool {
	if _, ok := b.vals[string(key)]; ok {
		return true
	}
	_, ok := b.pre[string(key)]
	return ok
}

type stmtWrite struct {
	value  []byte
	del    bool
	insert bool // flushed with kv.Inserter.Insert
}

// NewStmtBuffer returns an empty buffer over txn.
func NewStmtBuffer(txn kv.Txn) *StmtBuffer {
	return &StmtBuffer{txn: txn}
}

// Get returns the value visible to the statement.
func (b *StmtBuffer) Get(ctx context.Context, key []byte) ([]byte, error) {
	if w, ok := b.vals[string(key)]; ok {
		if w.del {
			return nil, kv.ErrNotFound
		}
		return w.value, nil
	}
	if p, ok := b.pre[string(key)]; ok {
		if !p.found {
			return nil, kv.ErrNotFound
		}
		return p.value, nil
	}
	return b.txn.Get(ctx, key)
}

func (b *StmtBuffer) put(key []byte, w stmtWrite) {
	if b.vals == nil {
		b.vals = map[string]stmtWrite{}
	}
	k := string(key)
	if _, ok := b.vals[k]; !ok {
		b.order = append(b.order, k)
		if id, ok := tablecodec.TableIDOf(key); ok && (len(b.tables) == 0 || b.tables[len(b.tables)-1] != id) && !slices.Contains(b.tables, id) {
			b.tables = append(b.tables, id)
		}
	}
	b.vals[k] = w
	b.size += int64(len(key) + len(w.value))
}

// Set stages a write.
func (b *StmtBuffer) Set(key, value []byte) { b.put(key, stmtWrite{value: value}) }

// Insert stages a write of a key the statement found absent in its own
// writes but did not read from storage: the transaction's commit checks
// that storage has no value for it (kv.Inserter), and fails with a
// *kv.KeyExistsError otherwise. Only a statement that will be committed on
// its own, before anything else reads or writes in its transaction, may
// use it (see Context.DeferDupCheck).
func (b *StmtBuffer) Insert(key, value []byte) { b.put(key, stmtWrite{value: value, insert: true}) }

// Staged returns the statement's own write of key: its value, or del for
// a staged delete; ok is false when the statement did not write key.
func (b *StmtBuffer) Staged(key []byte) (value []byte, del, ok bool) {
	w, ok := b.vals[string(key)]
	return w.value, w.del, ok
}

// Delete stages a delete.
func (b *StmtBuffer) Delete(key []byte) { b.put(key, stmtWrite{del: true}) }

// Keys returns the staged keys, in the order first staged.
func (b *StmtBuffer) Keys() [][]byte {
	keys := make([][]byte, len(b.order))
	for i, k := range b.order {
		keys[i] = []byte(k)
	}
	return keys
}

// Len is the number of staged keys.
func (b *StmtBuffer) Len() int { return len(b.order) }

// Tables returns the ids of the tables the staged writes belong to.
func (b *StmtBuffer) Tables() []int64 { return b.tables }

// Size is the number of bytes staged.
func (b *StmtBuffer) Size() int64 { return b.size }

// Flush applies the staged writes to the transaction and empties the buffer.
func (b *StmtBuffer) Flush() error {
	for _, k := range b.order {
		w := b.vals[k]
		var err error
		switch {
		case w.del:
			err = b.txn.Delete([]byte(k))
		case w.insert:
			err = b.txn.(kv.Inserter).Insert([]byte(k), w.value)
		default:
			err = b.txn.Set([]byte(k), w.value)
		}
		if err != nil {
			return err
		}
	}
	b.vals, b.order, b.size, b.tables, b.pre = nil, nil, 0, b.tables[:0], nil
	return nil
}
