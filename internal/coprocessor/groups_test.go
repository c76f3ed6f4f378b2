package coprocessor

import (
	"math/rand"
	"testing"
)

// TestGroupTable: every key finds its own group, however long and
// however alike the keys (they differ in one byte at any position, or
// only in length), across the table's growth; absent keys find none.
func TestGroupTable(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	tbl := newGroupTable()
	seen := map[string]*group{}
	var keys []string
	add := func(k string) {
		if _, ok := seen[k]; ok {
			return
		}
		h := tbl.hash([]byte(k))
		if g := tbl.find([]byte(k), h); g != nil {
			t.Fatalf("%x found %x before it was added", k, g.hashKey)
		}
		g := &group{hashKey: k}
		tbl.insert(g, h)
		seen[k] = g
		keys = append(keys, k)
	}
	for n := 0; n <= 40; n++ {
		base := make([]byte, n)
		for i := range base {
			base[i] = byte(rng.Intn(4))
		}
		add(string(base))
		for i := 0; i < n; i++ {
			k := append([]byte{}, base...)
			k[i] ^= 0x80
			add(string(k))
		}
	}
	for range 5000 {
		k := make([]byte, rng.Intn(20))
		rng.Read(k)
		add(string(k))
	}
	for _, k := range keys {
		if g := tbl.find([]byte(k), tbl.hash([]byte(k))); g != seen[k] {
			t.Fatalf("%x found the wrong group", k)
		}
	}
	for range 1000 {
		k := make([]byte, 1+rng.Intn(30))
		rng.Read(k)
		if _, ok := seen[string(k)]; ok {
			continue
		}
		if g := tbl.find(k, tbl.hash(k)); g != nil {
			t.Fatalf("absent %x found %x", k, g.hashKey)
		}
	}
	if tbl.groups != len(keys) || 2*tbl.groups > len(tbl.slots) {
		t.Fatalf("%d groups in %d slots, want %d at most half full", tbl.groups, len(tbl.slots), len(keys))
	}
}
