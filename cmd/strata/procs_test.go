package main

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestNextProcs(t *testing.T) {
	for _, c := range []struct {
		cur  int
		busy float64
		want int
	}{
		{2, 0, 2},
		{2, 0.45, 2}, // under the raise threshold: stays
		{2, 0.60, 3},
		{2, 0.9, 3},
		{3, 0.7, 3},
		{3, 0.5, 3}, // between the thresholds: no flapping
		{3, 0.40, 2},
		{3, 0, 2},
	} {
		if got := nextProcs(2, c.cur, c.busy); got != c.want {
			t.Errorf("nextProcs(2, %d, %.2f) = %d, want %d", c.cur, c.busy, got, c.want)
		}
	}
}

// walProcs raises GOMAXPROCS by one while the reported WAL write time
// grows faster than the raise threshold, and restores it once it stops.
func TestWALProcsFollowsWriteTime(t *testing.T) {
	// walProcs does nothing when GOMAXPROCS is set at all.
	unsetenv(t, "GOMAXPROCS")
	base := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(base)

	// While busy, the simulated WAL writer is blocked all the time: its
	// write time grows with the wall clock.
	var busy atomic.Bool
	var total, lastSample atomic.Int64
	lastSample.Store(time.Now().UnixNano())
	writeTime := func() time.Duration {
		now := time.Now().UnixNano()
		prev := lastSample.Swap(now)
		if busy.Load() {
			total.Add(now - prev)
		}
		return time.Duration(total.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { walProcs(ctx, slog.Default(), writeTime); close(done) }()
	defer func() { cancel(); <-done }()

	waitProcs := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.GOMAXPROCS(0) != want {
			if time.Now().After(deadline) {
				t.Fatalf("GOMAXPROCS = %d, want %d", runtime.GOMAXPROCS(0), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(2 * procsSampleInterval)
	waitProcs(base)
	busy.Store(true)
	waitProcs(base + 1)
	busy.Store(false)
	waitProcs(base)
}

// GOMAXPROCS in the environment fixes the processor count.
func TestWALProcsRespectsEnvironment(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(base)
	t.Setenv("GOMAXPROCS", strconv.Itoa(base))
	start := time.Now()
	always := func() time.Duration { return time.Since(start) } // blocked all the time
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { walProcs(ctx, slog.Default(), always); close(done) }()
	time.Sleep(3 * procsSampleInterval)
	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("GOMAXPROCS = %d with GOMAXPROCS=%d in the environment", got, base)
	}
}
