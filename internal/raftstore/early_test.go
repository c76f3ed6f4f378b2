package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/kvpb"
)

// ProposeCommitted returns once the entry is durable; release runs exactly
// once per proposal, after the entry is applied.
func TestProposeCommittedReleasesAfterApply(t *testing.T) {
	dir := t.TempDir()
	db, s := openStore(t, dir, true)
	defer db.Close()
	p := waitLeader(t, s, 2)
	const writers, each = 8, 40
	var (
		wg       sync.WaitGroup
		released atomic.Int64
		notYet   atomic.Int64 // releases that ran before the write was in the engine
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("zk%d-%03d", w, i)
				b := s.Engine().NewBatch()
				b.Set([]byte(key), []byte("v"), nil)
				var once atomic.Int32
				err := s.ProposeCommitted(context.Background(), p, p.Region().Epoch, b, func() {
					if once.Add(1) != 1 {
						t.Errorf("release of %s ran twice", key)
					}
					if _, ok, _ := engine.GetCopy(db.KV, []byte(key)); !ok {
						notYet.Add(1)
					}
					released.Add(1)
				})
				b.Close()
				if err != nil {
					t.Errorf("propose %s: %v", key, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() != writers*each && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := released.Load(); got != writers*each {
		t.Fatalf("%d releases for %d proposals", got, writers*each)
	}
	if n := notYet.Load(); n != 0 {
		t.Fatalf("%d releases ran before their write was applied", n)
	}
	s.Close()
	// A closed store refuses, and still releases.
	ran := false
	b := s.Engine().NewBatch()
	defer b.Close()
	if err := s.ProposeCommitted(context.Background(), p, p.Region().Epoch, b, func() { ran = true }); !errors.Is(err, ErrStopped) || !ran {
		t.Fatalf("after Close: err %v, released %v", err, ran)
	}
}

// Writes acknowledged at commit that race a split: each is either applied
// or refused with EpochNotMatch after its apply (never acknowledged and
// then refused, which would panic the store loop), and every proposal is
// released once, after its apply.
func TestProposeCommittedRacingASplit(t *testing.T) {
	h := &splitHarness{t: t, fs: vfs.NewCrashableMem()}
	defer h.close()
	h.open(true)
	var proposals, releases atomic.Int64
	raceWritesAgainstSplit(t, h, func(p *Peer, epoch *kvpb.RegionEpoch, b *pebble.Batch) error {
		proposals.Add(1)
		return h.s.ProposeCommitted(context.Background(), p, epoch, b, func() { releases.Add(1) })
	})
	deadline := time.Now().Add(5 * time.Second)
	for releases.Load() != proposals.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if releases.Load() != proposals.Load() {
		t.Fatalf("%d releases for %d proposals", releases.Load(), proposals.Load())
	}
}

// ProposeThen and ProposeCommittedThen run proposed exactly once, also when
// nothing can be proposed (a closed store).
func TestProposeThenRunsProposedOnce(t *testing.T) {
	dir := t.TempDir()
	db, s := openStore(t, dir, true)
	defer db.Close()
	p := waitLeader(t, s, 2)
	for _, committed := range []bool{false, true} {
		var calls atomic.Int32
		key := []byte(fmt.Sprintf("zthen-%v", committed))
		b := s.Engine().NewBatch()
		b.Set(key, []byte("v"), nil)
		proposed := func() { calls.Add(1) }
		var err error
		if committed {
			err = s.ProposeCommittedThen(context.Background(), p, p.Region().Epoch, b, func() {}, proposed)
		} else {
			err = s.ProposeThen(context.Background(), p, p.Region().Epoch, b, proposed)
		}
		b.Close()
		if err != nil {
			t.Fatalf("committed=%v: %v", committed, err)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("committed=%v: proposed ran %d times", committed, n)
		}
		if _, ok, _ := engine.GetCopy(db.KV, key); !committed && !ok {
			t.Fatalf("ProposeThen returned before its entry was applied")
		}
	}
	s.Close()
	var calls, released atomic.Int32
	b := s.Engine().NewBatch()
	defer b.Close()
	err := s.ProposeCommittedThen(context.Background(), p, p.Region().Epoch, b, func() { released.Add(1) }, func() { calls.Add(1) })
	if !errors.Is(err, ErrStopped) || calls.Load() != 1 || released.Load() != 1 {
		t.Fatalf("after Close: err %v, proposed ran %d times, released %d", err, calls.Load(), released.Load())
	}
	if err := s.ProposeThen(context.Background(), p, p.Region().Epoch, b, func() { calls.Add(1) }); !errors.Is(err, ErrStopped) || calls.Load() != 2 {
		t.Fatalf("after Close: err %v, proposed ran %d times in all", err, calls.Load())
	}
}
