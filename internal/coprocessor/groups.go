package coprocessor

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// groupTable finds an aggregation's groups by their hash keys (the bytes
// types.AppendHashKeyCollated gives the group-by values): open addressing
// with linear probing over a power-of-two array of slots, at most half
// full. It stands in for a map[string]*group on the per-row path, where
// the keys are short (an integer's is 9 bytes): a key of up to 16 bytes
// is hashed as two words with one multiply (wyhash's mix), under a seed
// drawn per table; longer keys go through hash/maphash.
type groupTable struct {
	seed   maphash.Seed
	word   uint64 // the seed of the short-key hash
	slots  []groupSlot
	groups int
}

type groupSlot struct {
	hash uint64
	g    *group // nil: empty
}

func newGroupTable() *groupTable {
	seed := maphash.MakeSeed()
	return &groupTable{seed: seed, word: maphash.Comparable(seed, 0), slots: make([]groupSlot, 16)}
}

// hash is key's hash.
func (t *groupTable) hash(key []byte) uint64 {
	n := len(key)
	var a, b uint64
	switch {
	case n > 16:
		return maphash.Bytes(t.seed, key)
	case n >= 8:
		a, b = binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[n-8:])
	case n >= 4:
		a, b = uint64(binary.LittleEndian.Uint32(key)), uint64(binary.LittleEndian.Uint32(key[n-4:]))
	case n > 0:
		a = uint64(key[0])<<16 | uint64(key[n>>1])<<8 | uint64(key[n-1])
	}
	hi, lo := bits.Mul64(a^t.word^0xa0761d6478bd642f, b^uint64(n)^0xe7037ed1a0b428db)
	return hi ^ lo
}

// find returns the group of key, or nil; h is key's hash.
func (t *groupTable) find(key []byte, h uint64) *group {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.g == nil {
			return nil
		}
		if s.hash == h && s.g.hashKey == string(key) {
			return s.g
		}
	}
}

// insert adds g, whose hashKey is not in the table, under its hash h.
func (t *groupTable) insert(g *group, h uint64) {
	if 2*(t.groups+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]groupSlot, 2*len(old))
		for _, s := range old {
			if s.g != nil {
				t.place(s)
			}
		}
	}
	t.place(groupSlot{hash: h, g: g})
	t.groups++
}

func (t *groupTable) place(s groupSlot) {
	mask := uint64(len(t.slots) - 1)
	i := s.hash & mask
	for t.slots[i].g != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}
