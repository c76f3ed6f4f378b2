package pd

import (
	"context"
	"errors"
	"sync"
	"time"
)

const (
	logicalBits = 18
	maxLogical  = 1 << logicalBits
	// tsoWindow is how far ahead of the clock the persisted high-water mark
	// is kept. A restarted oracle starts above the mark, so a window bounds
	// how far the physical part can jump after a restart.
	tsoWindow = 3 * time.Second
)

// TSO is the timestamp oracle. Timestamps are physical milliseconds shifted
// left by 18 bits plus a logical counter, strictly increasing across
// restarts: before a timestamp with physical part p is issued, a limit
// above p has been persisted (through the PD Raft group), and a restarted
// oracle starts at the persisted limit.
type TSO struct {
	persist func(ctx context.Context, limitMs int64) error

	mu       sync.Mutex
	physical int64
	logical  int64
	limit    int64 // exclusive bound on the physical part that may be issued
	saving   bool
	now      func() time.Time
}

// newTSO builds an oracle whose previous incarnation persisted limitMs.
func newTSO(limitMs int64, persist func(ctx context.Context, limitMs int64) error) *TSO {
	return &TSO{persist: persist, physical: limitMs, limit: limitMs, now: time.Now}
}

// ErrTSOCount is returned for a zero or oversized batch request.
var ErrTSOCount = errors.New("pd: tso count must be in [1, 2^18)")

// Next allocates count consecutive timestamps and returns the last.
func (t *TSO) Next(ctx context.Context, count uint32) (uint64, error) {
	if count == 0 || count >= maxLogical {
		return 0, ErrTSOCount
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := t.now().UnixMilli(); now > t.physical {
		t.physical, t.logical = now, 0
	}
	if t.logical+int64(count) >= maxLogical {
		// The logical counter is exhausted for this millisecond: borrow
		// the next one.
		t.physical++
		t.logical = 0
	}
	if t.physical >= t.limit {
		// Rare: the background extension did not keep up. Extend
		// synchronously; nothing at or above limit may be handed out first.
		newLimit := t.physical + tsoWindow.Milliseconds()
		if err := t.persist(ctx, newLimit); err != nil {
			return 0, err
		}
		t.limit = newLimit
	} else if t.limit-t.physical < tsoWindow.Milliseconds()*2/3 && !t.saving {
		t.saving = true
		newLimit := t.physical + tsoWindow.Milliseconds()
		go t.extend(newLimit)
	}
	t.logical += int64(count)
	return uint64(t.physical)<<logicalBits | uint64(t.logical), nil
}

func (t *TSO) extend(newLimit int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := t.persist(ctx, newLimit)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.saving = false
	if err == nil && newLimit > t.limit {
		t.limit = newLimit
	}
}
