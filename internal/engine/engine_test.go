package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"sort"
	"testing"
)

func escaped(k []byte) []byte {
	var out []byte
	for _, c := range k {
		if c == 0 {
			out = append(out, 0, 0xFF)
		} else {
			out = append(out, c)
		}
	}
	return append(out, 0, 1)
}

// The comparer's Split must satisfy Pebble's contract on every key shape
// the store writes or seeks: versioned write/data keys, their unversioned
// scan bounds, lock keys and non-MVCC keys.
func TestComparerSplitContract(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var keys [][]byte
	for i := 0; i < 400; i++ {
		uk := make([]byte, rng.Intn(6))
		for j := range uk {
			uk[j] = byte(rng.Intn(4)) // small alphabet: many shared prefixes and zero bytes
		}
		for _, cf := range []byte{'w', 'd'} {
			base := append([]byte{'z', cf}, escaped(uk)...)
			keys = append(keys, append([]byte(nil), base...)) // a scan bound
			keys = append(keys, binary.BigEndian.AppendUint64(append([]byte(nil), base...), ^uint64(rng.Int63())))
		}
		keys = append(keys, append([]byte{'z', 'l'}, uk...), RaftLogKey(uint64(rng.Intn(3)), uint64(rng.Intn(100))))
	}
	cmp := Comparer.Compare
	prefix := func(k []byte) []byte { return k[:Comparer.Split(k)] }
	for _, a := range keys {
		if n := Comparer.Split(a); n < len(a) {
			if n != len(a)-MVCCSuffixLen {
				t.Fatalf("split %x at %d", a, n)
			}
			if cmp(prefix(a), a) >= 0 {
				t.Fatalf("prefix of %x does not sort first", a)
			}
		}
		for _, b := range keys {
			c := cmp(a, b)
			if c != bytes.Compare(a, b) {
				t.Fatal("comparer is not bytewise")
			}
			pc := cmp(prefix(a), prefix(b))
			if c <= 0 && pc > 0 {
				t.Fatalf("%x <= %x but prefixes order the other way", a, b)
			}
			if pc < 0 && c >= 0 {
				t.Fatalf("prefix of %x < prefix of %x but keys do not", a, b)
			}
			if pc == 0 && c != Comparer.ComparePointSuffixes(a[len(prefix(a)):], b[len(prefix(b)):]) {
				t.Fatalf("equal prefixes of %x and %x but suffix order differs", a, b)
			}
			// The successor of a's prefix sorts above every key with that
			// prefix and at or below every key with a greater prefix.
			succ := Comparer.ImmediateSuccessor(nil, prefix(a))
			if pc == 0 && cmp(b, succ) >= 0 {
				t.Fatalf("key %x with the prefix of %x sorts at or above its successor %x", b, a, succ)
			}
			if pc < 0 && cmp(succ, b) > 0 {
				t.Fatalf("successor %x of %x's prefix skips past %x", succ, a, b)
			}
		}
	}
	// The keys an SST's index holds (the separator between two blocks'
	// keys, the successor of the last) must order the same bytewise and
	// by prefix then suffix against every key: Pebble's contract, checked
	// under -race by its invariants. Neighbours in key order are the
	// pairs a flush separates.
	sorted := append([][]byte(nil), keys...)
	sort.Slice(sorted, func(i, j int) bool { return cmp(sorted[i], sorted[j]) < 0 })
	for i := 0; i+1 < len(sorted); i++ {
		a, b := sorted[i], sorted[i+1]
		if cmp(a, b) == 0 {
			continue
		}
		sep, succ := Comparer.Separator(nil, a, b), Comparer.Successor(nil, a)
		if cmp(a, sep) > 0 || cmp(sep, b) >= 0 || cmp(a, succ) > 0 {
			t.Fatalf("index keys %x, %x out of place for %x, %x", sep, succ, a, b)
		}
		for _, ik := range [][]byte{sep, succ} {
			for _, k := range keys {
				if got, want := cmp(ik, k), splitOrder(ik, k); got != want {
					t.Fatalf("index key %x (for %x, %x) against %x: bytewise %d, by prefix and suffix %d", ik, a, b, k, got, want)
				}
			}
		}
	}
}

// splitOrder orders a and b by Split's prefix, then suffix: the order
// Pebble requires Compare to agree with.
func splitOrder(a, b []byte) int {
	an, bn := Comparer.Split(a), Comparer.Split(b)
	if c := bytes.Compare(a[:an], b[:bn]); c != 0 {
		return c
	}
	return Comparer.ComparePointSuffixes(a[an:], b[bn:])
}
