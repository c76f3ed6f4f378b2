package raftstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata/internal/engine"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestEntryCacheEviction appends, applies, overwrites and truncates a log
// in many small rounds with a cache budget of a few entries, and after
// every round reads each live index back: from the cache, from the Raft
// engine, or across both. Eviction moves the cache's window over its
// backing array; an entry served from a wrong slot, or one evicted before
// it is applied, fails here.
func TestEntryCacheEviction(t *testing.T) {
	defer func(old uint64) { maxCachedLogBytes = old }(maxCachedLogBytes)
	maxCachedLogBytes = 5 * 100

	eng, err := engine.OpenEngines(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ps := newPeerStorage(eng, 7)
	rng := rand.New(rand.NewPCG(1, 2))

	// want[i] is the data of log index i as the last append left it.
	want := map[uint64]string{}
	term := uint64(1)
	var last, applied, truncated uint64
	entry := func(i uint64) *pb.Entry {
		d := fmt.Sprintf("t%d-i%d-", term, i)
		for len(d) < 100 {
			d += "x"
		}
		return &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(term), Data: []byte(d)}
	}
	for round := 0; round < 600; round++ {
		var ents []*pb.Entry
		start := last + 1
		if round%37 == 36 && last > applied {
			// A new leader overwrites the unapplied tail.
			term++
			start = applied + 1 + uint64(rng.IntN(int(last-applied)))
		}
		n := 1 + rng.IntN(6)
		for i := start; i < start+uint64(n); i++ {
			e := entry(i)
			ents = append(ents, e)
			want[i] = string(e.Data)
		}
		for i := start + uint64(n); i <= last; i++ {
			delete(want, i)
		}
		last = start + uint64(n) - 1
		b := eng.Raft.NewBatch()
		if err := ps.stageAppend(b, ents, &pb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(applied)}); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if last > applied {
			applied += uint64(rng.IntN(int(last-applied) + 1))
		}
		ps.setApplied(applied)
		if round%53 == 52 && applied > truncated+3 {
			truncated = applied - 3
			tt, err := ps.Term(truncated)
			if err != nil {
				t.Fatal(err)
			}
			b := eng.Raft.NewBatch()
			for i := ps.apply.TruncatedIndex + 1; i <= truncated; i++ {
				if err := b.Delete(engine.RaftLogKey(7, i), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
			b.Close()
			ps.truncateTo(truncated, tt)
		}
		if ps.entsBytes > maxCachedLogBytes+100 && ps.ents[0].GetIndex() <= applied {
			t.Fatalf("round %d: cache holds %d bytes from index %d, applied %d", round, ps.entsBytes, ps.ents[0].GetIndex(), applied)
		}
		if ps.cacheFirst <= applied && len(ps.ents) == 0 {
			t.Fatalf("round %d: empty cache", round)
		}
		lo := truncated + 1
		got, err := ps.Entries(lo, last+1, 1<<30)
		if err != nil {
			t.Fatalf("round %d: Entries(%d, %d): %v", round, lo, last+1, err)
		}
		if uint64(len(got)) != last+1-lo {
			t.Fatalf("round %d: Entries(%d, %d) returned %d entries", round, lo, last+1, len(got))
		}
		for k, e := range got {
			i := lo + uint64(k)
			if e.GetIndex() != i || string(e.Data) != want[i] {
				t.Fatalf("round %d: index %d read as %d %q, want %q (cache from %d)", round, i, e.GetIndex(), e.Data, want[i], ps.cacheFirst)
			}
		}
	}
	if ps.cacheFirst <= truncated+1 {
		t.Fatalf("the cache never evicted (first cached %d)", ps.cacheFirst)
	}
}
