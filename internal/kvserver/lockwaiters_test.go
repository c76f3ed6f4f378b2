package kvserver

import "testing"

// A release wakes the oldest transaction's waiter on the key at once and
// tells the others to try again soon; a waiter woken first owes the next
// one the wake-up when it leaves without the lock.
func TestLockWaitersWakeOldestFirst(t *testing.T) {
	var lw lockWaiters
	key := []byte("k")
	w30 := lw.add(key, 30)
	w10 := lw.add(key, 10)
	w20 := lw.add(key, 20)
	if n := lw.waitingKeys()["k"]; n != 3 {
		t.Fatalf("waiters on k = %d, want 3", n)
	}
	closed := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}

	lw.wake(key)
	if !closed(w10.ch) || closed(w20.ch) || closed(w30.ch) {
		t.Fatalf("woken first: 10=%v 20=%v 30=%v, want only 10", closed(w10.ch), closed(w20.ch), closed(w30.ch))
	}
	if !closed(w20.soon) || !closed(w30.soon) {
		t.Fatal("the other waiters were not told to try again soon")
	}
	if !lw.remove(w10) {
		t.Fatal("remove of the waiter woken first does not report it")
	}
	if lw.remove(w30) {
		t.Fatal("remove of a waiter not woken reports it woken")
	}

	// A second release (the first woken left without the lock and passed
	// the wake-up on) wakes the next oldest; a release with nobody waiting
	// is free.
	lw.wake(key)
	if !closed(w20.ch) {
		t.Fatal("the next oldest waiter was not woken")
	}
	lw.remove(w20)
	if n := lw.n.Load(); n != 0 {
		t.Fatalf("registered waiters = %d, want 0", n)
	}
	lw.wake(key)
}
