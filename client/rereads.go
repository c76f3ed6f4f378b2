package client

import "bytes"

// Rereads. A statement often reads a key the transaction read before at
// the same snapshot: TPC-C's New-Order selects its stock rows FOR UPDATE
// and then updates each of them, and every UPDATE looks up the row's
// unique key and the row again; Payment reads the warehouse and district
// rows it has just updated. A read at a timestamp returns the same answer
// every time it is made (snapshot isolation rests on that: no commit lands
// at or below a timestamp that has been read, and a read waits for the
// locks below its timestamp to resolve), so the transaction keeps the
// answers of its point reads at readTS and serves a read again from there.
//
// The transaction's own writes (the memBuffer) and the values of keys it
// locked over a pending commit (pendingAt) are consulted first, as before:
// the cache only stands in for the request to the store. The answers are
// kept for one timestamp: when readTS moves (read committed, a statement
// that locks at a fresh timestamp, a snapshot refresh) they are dropped.
// Reads record themselves for a snapshot refresh (notePoint) whether
// answered here or by the store.

// maxRereadBytes bounds the keys and values a transaction keeps.
const maxRereadBytes = 256 << 10

// maxInlineKey is the longest key the first answer keeps without an
// allocation: a transaction that reads one key (an autocommit point
// select) allocates nothing for the cache.
const maxInlineKey = 48

type rereadCache struct {
	ts uint64 // the timestamp the answers were read at
	// The first answer, its key in oneKey[:oneLen]; later ones in reads.
	hasOne bool
	oneLen int
	oneKey [maxInlineKey]byte
	one    pointAnswer
	reads  map[string]pointAnswer
	bytes  int
}

// pointAnswer is the answer of a point read: the value, or not found.
type pointAnswer struct {
	value []byte
	found bool
}

// holds reports whether the cache may hold answers at ts.
func (c *rereadCache) holds(ts uint64) bool {
	return c.ts == ts && (c.hasOne || len(c.reads) > 0)
}

// get returns the answer of an earlier read of key at ts.
func (c *rereadCache) get(ts uint64, key []byte) (pointAnswer, bool) {
	if c.ts != ts {
		return pointAnswer{}, false
	}
	if c.hasOne && bytes.Equal(c.oneKey[:c.oneLen], key) {
		return c.one, true
	}
	if c.reads == nil {
		return pointAnswer{}, false
	}
	a, ok := c.reads[string(key)]
	return a, ok
}

// put records the answer of a read of key at ts. The value is kept, not
// copied: values read are never modified.
func (c *rereadCache) put(ts uint64, key, value []byte, found bool) {
	if c.ts != ts {
		c.hasOne = false
		clear(c.reads)
		c.ts, c.bytes = ts, 0
	}
	n := len(key) + len(value)
	if c.bytes+n > maxRereadBytes {
		return
	}
	if _, ok := c.get(ts, key); ok {
		return
	}
	// Full slice: a caller appending to an answer never writes into the
	// kept value's spare capacity.
	a := pointAnswer{value: value[:len(value):len(value)], found: found}
	c.bytes += n
	if !c.hasOne && len(key) <= maxInlineKey {
		c.hasOne, c.oneLen, c.one = true, copy(c.oneKey[:], key), a
		return
	}
	if c.reads == nil {
		c.reads = make(map[string]pointAnswer, 8)
	}
	c.reads[string(key)] = a
}
