package client

import "github.com/google/btree"

// savepoint is a frozen copy of a transaction's buffered writes.
type savepoint struct {
	tree    *btree.BTreeG[bufEntry]
	absents bool
}

// Savepoint implements kv.Savepointer: the buffer is copied on write, so
// taking a savepoint costs O(1).
func (t *Txn) Savepoint() any {
	return savepoint{tree: t.buf.snapshot(), absents: t.buf.absents}
}

// RollbackToSavepoint implements kv.Savepointer. Pessimistic locks taken
// since the savepoint stay held (and are released at the end of the
// transaction), as InnoDB keeps them.
func (t *Txn) RollbackToSavepoint(sp any) {
	s := sp.(savepoint)
	if s.tree == nil {
		t.buf.tree, t.buf.absents = nil, false
		return
	}
	t.buf.tree, t.buf.absents = s.tree.Clone(), s.absents
}
