package client

import (
	"context"
	"strings"
	"testing"

	"github.com/strata-db/strata/kv"
)

// A key read again at the same snapshot is answered without a request, and
// with the answer of the first read (found or not), by Get and BatchGet
// alike; own writes still come first, and a snapshot that moves (read
// committed) reads the store again.
func TestRereadAtTheSameSnapshotSendsNoRequest(t *testing.T) {
	ctx := context.Background()
	fc := newFakeCluster("m")
	c := fc.newClient(Options{})
	defer c.Close()
	load(t, c, "a=1", "b=2", "x=9")
	reads := func() int { return fc.callCount("Get") + fc.callCount("BatchGet") }

	txn := begin(t, c, kv.TxnOptions{Pessimistic: true})
	if get(t, txn, "a") != "1" || get(t, txn, "q") != "<none>" {
		t.Fatal("first reads")
	}
	got, err := txn.BatchGet(ctx, [][]byte{[]byte("b"), []byte("x")})
	if err != nil || string(got["b"]) != "2" || string(got["x"]) != "9" {
		t.Fatalf("BatchGet = %v, %v", got, err)
	}
	load(t, c, "a=100", "q=new", "b=200") // committed after the snapshot
	before := reads()
	if get(t, txn, "a") != "1" || get(t, txn, "q") != "<none>" || get(t, txn, "x") != "9" {
		t.Fatal("a reread differs from the first read")
	}
	got, err = txn.BatchGet(ctx, [][]byte{[]byte("a"), []byte("b"), []byte("q")})
	if err != nil || len(got) != 2 || string(got["a"]) != "1" || string(got["b"]) != "2" {
		t.Fatalf("BatchGet again = %v, %v", got, err)
	}
	if n := reads() - before; n != 0 {
		t.Fatalf("rereads sent %d requests", n)
	}
	// A key not read before is fetched, alone.
	got, err = txn.BatchGet(ctx, [][]byte{[]byte("a"), []byte("m")})
	if err != nil || len(got) != 1 || string(got["a"]) != "1" {
		t.Fatalf("BatchGet with a new key = %v, %v", got, err)
	}
	if n := reads() - before; n != 1 {
		t.Fatalf("a new key cost %d requests, want 1", n)
	}
	// Own writes first.
	_ = txn.Set([]byte("a"), []byte("own"))
	_ = txn.Delete([]byte("x"))
	if get(t, txn, "a") != "own" || get(t, txn, "x") != "<none>" {
		t.Fatal("own writes hidden by earlier reads")
	}

	// Read committed: each statement reads at a fresh timestamp.
	rc := begin(t, c, kv.TxnOptions{ReadCommitted: true})
	if get(t, rc, "b") != "200" {
		t.Fatal("read committed first read")
	}
	load(t, c, "b=300")
	if err := rc.RefreshSnapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if get(t, rc, "b") != "300" {
		t.Fatal("a read at a newer snapshot answered from an older read")
	}
}

// The kept values are full slices: appending to one answer does not show in
// the next.
func TestRereadAnswersDoNotShareSpareCapacity(t *testing.T) {
	var c rereadCache
	v := make([]byte, 1, 8)
	v[0] = 'v'
	c.put(5, []byte("k"), v, true)
	a, _ := c.get(5, []byte("k"))
	_ = append(a.value, 'x')
	b, _ := c.get(5, []byte("k"))
	if cap(b.value) != 1 || string(append(b.value, 'y')) != "vy" || string(append(v, 'z')) != "vz" {
		t.Fatal("answers share capacity")
	}
	if _, ok := c.get(6, []byte("k")); ok {
		t.Fatal("an answer served at another timestamp")
	}
	c.put(6, []byte("j"), nil, false)
	if _, ok := c.get(5, []byte("k")); ok {
		t.Fatal("answers of an old timestamp kept")
	}
	long := []byte(strings.Repeat("l", maxInlineKey+1))
	c.put(6, long, []byte("long"), true)
	c.put(6, []byte("i"), []byte("i"), true)
	for key, want := range map[string]string{"j": "", string(long): "long", "i": "i"} {
		if a, ok := c.get(6, []byte(key)); !ok || string(a.value) != want || a.found != (want != "") {
			t.Fatalf("%.5s: %q %v %v", key, a.value, a.found, ok)
		}
	}
}
