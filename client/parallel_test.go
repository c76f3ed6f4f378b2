package client

import (
	"errors"
	"sync/atomic"
	"testing"
)

// forEachParallel calls fn once per index, none for zero, and returns the
// error of the lowest index that failed, whichever finished first.
func TestForEachParallelCallsEachIndexOnce(t *testing.T) {
	if err := forEachParallel(0, func(int) error { t.Fatal("called for n = 0"); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 5} {
		calls := make([]atomic.Int32, n)
		errs := make([]error, n)
		for i := 1; i < n; i++ {
			errs[i] = errors.New("failed")
		}
		err := forEachParallel(n, func(i int) error {
			calls[i].Add(1)
			return errs[i]
		})
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Fatalf("n = %d: index %d called %d times", n, i, c)
			}
		}
		if n > 1 && err != errs[1] {
			t.Fatalf("n = %d: error %v, want index 1's", n, err)
		}
		if n == 1 && err != nil {
			t.Fatalf("n = 1: error %v", err)
		}
	}
}
