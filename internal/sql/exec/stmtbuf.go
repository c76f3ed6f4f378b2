package exec

import (
	"context"

	"github.com/strata-db/strata/internal/kv"
)

// StmtBuffer stages the writes of one statement on top of a transaction.
// Get reads through it (so a statement sees its own earlier rows when it
// checks uniqueness); Flush applies the writes to the transaction in order.
// Discarding the buffer undoes the statement.
type StmtBuffer struct {
	txn   kv.Txn
	vals  map[string]stmtWrite
	order []string
	size  int64
}

type stmtWrite struct {
	value []byte
	del   bool
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
	return b.txn.Get(ctx, key)
}

func (b *StmtBuffer) put(key []byte, w stmtWrite) {
	if b.vals == nil {
		b.vals = map[string]stmtWrite{}
	}
	k := string(key)
	if _, ok := b.vals[k]; !ok {
		b.order = append(b.order, k)
	}
	b.vals[k] = w
	b.size += int64(len(key) + len(w.value))
}

// Set stages a write.
func (b *StmtBuffer) Set(key, value []byte) { b.put(key, stmtWrite{value: value}) }

// Delete stages a delete.
func (b *StmtBuffer) Delete(key []byte) { b.put(key, stmtWrite{del: true}) }

// Len is the number of staged keys.
func (b *StmtBuffer) Len() int { return len(b.order) }

// Size is the number of bytes staged.
func (b *StmtBuffer) Size() int64 { return b.size }

// Flush applies the staged writes to the transaction and empties the buffer.
func (b *StmtBuffer) Flush() error {
	for _, k := range b.order {
		w := b.vals[k]
		var err error
		if w.del {
			err = b.txn.Delete([]byte(k))
		} else {
			err = b.txn.Set([]byte(k), w.value)
		}
		if err != nil {
			return err
		}
	}
	b.vals, b.order, b.size = nil, nil, 0
	return nil
}
