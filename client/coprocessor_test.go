package client

import (
	"bytes"
	"testing"
)

// splitKeys cuts the key space between a range's first and last key
// into parts of about equal size, each boundary strictly inside.
func TestSplitKeys(t *testing.T) {
	prefix := []byte("t\x80\x00\x00\x00\x00\x00\x00\x07_r")
	key := func(h uint64) []byte {
		k := append(bytes.Clone(prefix), 0, 0, 0, 0, 0, 0, 0, 0)
		for i := 0; i < 8; i++ {
			k[len(prefix)+i] = byte(h >> (56 - 8*i))
		}
		return k
	}
	first, last := key(1<<63+1), key(1<<63+1_000_000)
	got := splitKeys(first, last, 4)
	if len(got) != 3 {
		t.Fatalf("%d boundaries, want 3", len(got))
	}
	prev := first
	for _, k := range got {
		if bytes.Compare(k, prev) <= 0 || bytes.Compare(k, last) >= 0 {
			t.Fatalf("boundary %x not between %x and %x", k, prev, last)
		}
		prev = k
	}
	// About a quarter of the handles fall below the first boundary.
	if lo, hi := key(1<<63+1+249_000), key(1<<63+1+251_000); bytes.Compare(got[0], lo) < 0 || bytes.Compare(got[0], hi) > 0 {
		t.Errorf("first boundary %x is not about a quarter of the way", got[0])
	}
	if got := splitKeys(first, first, 4); got != nil {
		t.Errorf("one key split into %d parts", len(got)+1)
	}
	if got := splitKeys(first, last, 1); got != nil {
		t.Errorf("one part has boundaries %x", got)
	}
	// Keys that differ after the prefix in a shorter tail.
	if got := splitKeys([]byte("a"), []byte("b"), 2); len(got) != 1 || bytes.Compare(got[0], []byte("a")) <= 0 || bytes.Compare(got[0], []byte("b")) >= 0 {
		t.Errorf("split of [a, b]: %q", got)
	}
}
