package resp

import (
	"strconv"
	"sync"
)

// cursorTable maps the numeric cursors SCAN and HSCAN hand out to the key
// where the next call resumes. Redis cursors are numbers, our positions
// are keys, so the server remembers them; the table is bounded (oldest
// cursors are forgotten first), which makes a very old cursor fail with
// "invalid cursor" instead of growing memory forever. Cursors work from
// any connection to this node.
type cursorTable struct {
	mu    sync.Mutex
	next  uint64
	pos   map[uint64][]byte
	order []uint64 // ring of issued cursors, oldest at head
	head  int
}

const maxCursors = 1 << 16

func (t *cursorTable) init() {
	t.pos = make(map[uint64][]byte)
	t.order = make([]uint64, 0, maxCursors)
	t.next = 1
}

// put registers a resume position and returns its cursor.
func (t *cursorTable) put(resume []byte) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.next
	t.next++
	if len(t.order) < maxCursors {
		t.order = append(t.order, id)
	} else {
		delete(t.pos, t.order[t.head])
		t.order[t.head] = id
		t.head = (t.head + 1) % maxCursors
	}
	t.pos[id] = append([]byte(nil), resume...)
	return id
}

// get returns the resume position of a cursor argument: nil for "0" (start),
// ok=false for a cursor that is not a number or not known.
func (t *cursorTable) get(arg []byte) (resume []byte, ok bool) {
	id, err := strconv.ParseUint(string(arg), 10, 64)
	if err != nil {
		return nil, false
	}
	if id == 0 {
		return nil, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pos[id]
	return p, ok
}
