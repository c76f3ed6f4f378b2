package loginguard

import (
	"testing"
	"time"
)

func TestDelays(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	g := New(time.Second, "test")
	g.now = func() time.Time { return now }
	var slept time.Duration
	g.sleep = func(d time.Duration) { slept += d }

	var got []time.Duration
	for i := 0; i < 15; i++ {
		got = append(got, g.Wait("bob", "10.0.0.1"))
		g.Failed("bob", "10.0.0.1")
	}
	want := []time.Duration{0, 0, 0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 5}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("attempt %d waited %v, want %vs (all: %v)", i+1, got[i], want[i], got)
		}
	}
	if slept == 0 {
		t.Fatal("Wait did not sleep")
	}
	// Other users and other addresses are not delayed.
	if d := g.Delay("alice", "10.0.0.1"); d != 0 {
		t.Fatalf("alice delayed %v", d)
	}
	if d := g.Delay("bob", "10.0.0.2"); d != 0 {
		t.Fatalf("bob from another address delayed %v", d)
	}
	// Failures are forgotten after Forget, and at once on success.
	now = now.Add(Forget + time.Second)
	if d := g.Delay("bob", "10.0.0.1"); d != 0 {
		t.Fatalf("delay after Forget: %v", d)
	}
	for i := 0; i < 5; i++ {
		g.Failed("bob", "10.0.0.1")
	}
	if g.Delay("bob", "10.0.0.1") == 0 {
		t.Fatal("no delay after 5 failures")
	}
	g.Succeeded("bob", "10.0.0.1")
	if d := g.Delay("bob", "10.0.0.1"); d != 0 {
		t.Fatalf("delay after success: %v", d)
	}
	var off *Guard
	off.Failed("x", "y")
	if off.Wait("x", "y") != 0 {
		t.Fatal("nil guard delays")
	}
}
