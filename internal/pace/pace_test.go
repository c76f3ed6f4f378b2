package pace

import (
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestBackOffAndSnapBack: the interval holds the minimum for Hold after a
// change, doubles up to the maximum while nothing changes, and snaps back
// on a change seen or a touch (which also wakes the loop).
func TestBackOffAndSnapBack(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	p := newWithClock(50*time.Millisecond, time.Second, 2*time.Second, c.now)
	step := func(changed bool, want time.Duration) {
		t.Helper()
		got := p.Next(changed)
		if got != want {
			t.Fatalf("Next(%v) at +%v = %v, want %v", changed, c.t.Sub(time.Unix(1000, 0)), got, want)
		}
		c.t = c.t.Add(got)
	}
	// Held at the minimum for 2 s from the start.
	for c.t.Before(time.Unix(1002, 0)) {
		step(false, 50*time.Millisecond)
	}
	for _, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		step(false, want*time.Millisecond)
	}
	if p.Interval() != time.Second {
		t.Fatalf("idle interval %v", p.Interval())
	}
	// A change seen: back to the minimum, held.
	step(true, 50*time.Millisecond)
	step(false, 50*time.Millisecond)
	c.t = c.t.Add(3 * time.Second)
	step(false, 100*time.Millisecond)
	step(false, 200*time.Millisecond)
	// A touch: at once, and the loop is woken.
	select {
	case <-p.Wake():
		t.Fatal("woken without a touch")
	default:
	}
	p.Touch()
	p.Touch()
	if p.Interval() != 50*time.Millisecond {
		t.Fatalf("interval after a touch %v", p.Interval())
	}
	select {
	case <-p.Wake():
	default:
		t.Fatal("a touch did not wake the loop")
	}
	step(false, 50*time.Millisecond)
}

func TestMaxBelowMin(t *testing.T) {
	p := New(100*time.Millisecond, 10*time.Millisecond, 0)
	for range 5 {
		if d := p.Next(false); d != 100*time.Millisecond {
			t.Fatalf("interval %v", d)
		}
	}
}
