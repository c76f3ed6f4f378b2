package engine

import (
	"bytes"
	"encoding/binary"
	"math/rand"
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
}
