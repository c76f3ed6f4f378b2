package client

import (
	"bytes"

	"github.com/google/btree"
)

// bufEntry is one buffered write: a value, or a delete marker. absent
// marks a key written by Insert: the commit checks that it has no
// committed value.
type bufEntry struct {
	key     []byte
	value   []byte
	deleted bool
	absent  bool
}

func bufEntryLess(a, b bufEntry) bool { return bytes.Compare(a.key, b.key) < 0 }

// memBuffer holds a transaction's uncommitted writes in key order. It owns
// copies of the keys and values given to it. The zero value is empty; the
// tree is allocated on the first write, so read-only transactions (point
// selects) never pay for it.
type memBuffer struct {
	tree    *btree.BTreeG[bufEntry]
	absents bool // some entry is marked absent
}

func (m *memBuffer) put(e bufEntry) {
	if m.tree == nil {
		m.tree = btree.NewG(32, bufEntryLess)
	}
	m.tree.ReplaceOrInsert(e)
}

// set buffers key = value. absent asks the commit to check that key has
// no committed value; a key already marked keeps its mark.
func (m *memBuffer) set(key, value []byte, absent bool) {
	v := make([]byte, len(value))
	copy(v, value)
	m.put(bufEntry{key: bytes.Clone(key), value: v, absent: absent || m.marked(key)})
	m.absents = m.absents || absent
}

func (m *memBuffer) delete(key []byte) {
	m.put(bufEntry{key: bytes.Clone(key), deleted: true, absent: m.marked(key)})
}

// marked reports whether key's buffered write is marked absent.
func (m *memBuffer) marked(key []byte) bool {
	if !m.absents {
		return false
	}
	e, ok := m.get(key)
	return ok && e.absent
}

// get returns the buffered write for key, if any.
func (m *memBuffer) get(key []byte) (bufEntry, bool) {
	if m.tree == nil {
		return bufEntry{}, false
	}
	return m.tree.Get(bufEntry{key: key})
}

func (m *memBuffer) len() int {
	if m.tree == nil {
		return 0
	}
	return m.tree.Len()
}

// snapshot returns a frozen view of the buffer for an iterator: later writes
// to the transaction do not show through it. It is O(1) (copy on write).
func (m *memBuffer) snapshot() *btree.BTreeG[bufEntry] {
	if m.tree == nil {
		return nil
	}
	return m.tree.Clone()
}

// each calls fn for every entry in key order.
func (m *memBuffer) each(fn func(bufEntry) bool) {
	if m.tree != nil {
		m.tree.Ascend(fn)
	}
}

// bufferCursor walks the entries of a frozen buffer inside [start, end)
// (end nil: unbounded), ascending or descending, a chunk at a time.
type bufferCursor struct {
	tree       *btree.BTreeG[bufEntry]
	start, end []byte
	reverse    bool

	chunk []bufEntry
	pos   int
	// resume is where the next chunk starts: inclusive going forward,
	// exclusive going backward (nil: the range bound).
	resume []byte
	done   bool
}

const bufferChunk = 64

func newBufferCursor(tree *btree.BTreeG[bufEntry], start, end []byte, reverse bool) *bufferCursor {
	c := &bufferCursor{tree: tree, start: start, end: end, reverse: reverse}
	if reverse {
		c.resume = end
	} else {
		c.resume = start
	}
	c.fill()
	return c
}

// current returns the entry under the cursor; ok is false at the end.
func (c *bufferCursor) current() (bufEntry, bool) {
	if c.pos < len(c.chunk) {
		return c.chunk[c.pos], true
	}
	return bufEntry{}, false
}

func (c *bufferCursor) next() {
	c.pos++
	if c.pos >= len(c.chunk) {
		c.fill()
	}
}

func (c *bufferCursor) fill() {
	c.chunk = c.chunk[:0]
	c.pos = 0
	if c.done || c.tree == nil || c.tree.Len() == 0 {
		c.done = true
		return
	}
	if !c.reverse {
		c.tree.AscendGreaterOrEqual(bufEntry{key: c.resume}, func(e bufEntry) bool {
			if c.end != nil && bytes.Compare(e.key, c.end) >= 0 {
				return false
			}
			c.chunk = append(c.chunk, e)
			return len(c.chunk) < bufferChunk
		})
	} else {
		visit := func(e bufEntry) bool {
			if c.resume != nil && bytes.Compare(e.key, c.resume) >= 0 {
				return true // the exclusive upper bound itself
			}
			if bytes.Compare(e.key, c.start) < 0 {
				return false
			}
			c.chunk = append(c.chunk, e)
			return len(c.chunk) < bufferChunk
		}
		if c.resume == nil {
			c.tree.Descend(visit)
		} else {
			c.tree.DescendLessOrEqual(bufEntry{key: c.resume}, visit)
		}
	}
	if len(c.chunk) < bufferChunk {
		c.done = true
	}
	if n := len(c.chunk); n > 0 {
		last := c.chunk[n-1].key
		if c.reverse {
			c.resume = last
		} else {
			c.resume = append(bytes.Clone(last), 0)
		}
	}
}

// hasIn reports whether some buffered write's key is in [start, end) (end
// nil: no upper bound).
func (m *memBuffer) hasIn(start, end []byte) bool {
	if m.tree == nil {
		return false
	}
	found := false
	m.tree.AscendGreaterOrEqual(bufEntry{key: start}, func(e bufEntry) bool {
		found = end == nil || bytes.Compare(e.key, end) < 0
		return false
	})
	return found
}
