package pd

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Timestamps are strictly increasing, including across a restart that
// resumes from the persisted limit, even when the clock goes backwards.
func TestTSOStrictlyIncreasingAcrossRestart(t *testing.T) {
	var mu sync.Mutex
	var persisted int64
	persist := func(ctx context.Context, l int64) error {
		mu.Lock()
		defer mu.Unlock()
		if l > persisted {
			persisted = l
		}
		return nil
	}
	tso := newTSO(0, persist)
	var last uint64
	for i := 0; i < 10000; i++ {
		ts, err := tso.Next(context.Background(), uint32(1+i%7))
		if err != nil {
			t.Fatal(err)
		}
		if ts <= last {
			t.Fatalf("ts %d after %d", ts, last)
		}
		last = ts
	}
	time.Sleep(10 * time.Millisecond) // let a background extension finish
	mu.Lock()
	limit := persisted
	mu.Unlock()
	if uint64(limit)<<logicalBits <= last {
		t.Fatalf("persisted limit %d is not above issued ts %d", limit, last>>logicalBits)
	}
	// Restart with a clock one hour behind.
	tso2 := newTSO(limit, persist)
	tso2.now = func() time.Time { return time.Now().Add(-time.Hour) }
	ts, err := tso2.Next(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if ts <= last {
		t.Fatalf("restarted oracle issued %d <= %d", ts, last)
	}
}

// Logical overflow borrows the next millisecond instead of repeating.
func TestTSOLogicalOverflow(t *testing.T) {
	tso := newTSO(0, func(context.Context, int64) error { return nil })
	frozen := time.Now()
	tso.now = func() time.Time { return frozen }
	var last uint64
	for i := 0; i < 5; i++ {
		ts, err := tso.Next(context.Background(), maxLogical/2)
		if err != nil {
			t.Fatal(err)
		}
		if ts <= last {
			t.Fatalf("ts %d after %d", ts, last)
		}
		last = ts
	}
	if _, err := tso.Next(context.Background(), 0); err == nil {
		t.Fatal("count 0 accepted")
	}
}
