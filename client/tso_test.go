package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strata-db/strata/kvpb"
)

// blockingPD is a TEST DOUBLE of PD's Tso: each call records its count and
// can be held until the test releases it.
type blockingPD struct {
	PD      // only Tso is used
	mu      sync.Mutex
	next    uint64
	counts  []uint32
	hold    chan struct{} // when non-nil, the first call waits on it
	entered chan struct{}
	fail    error
	reply   func(count uint32, last uint64) *kvpb.TsoResponse
}

func (p *blockingPD) Tso(ctx context.Context, in *kvpb.TsoRequest, _ ...grpc.CallOption) (*kvpb.TsoResponse, error) {
	p.mu.Lock()
	hold := p.hold
	p.hold = nil
	p.counts = append(p.counts, in.Count)
	p.mu.Unlock()
	if hold != nil {
		close(p.entered)
		<-hold
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return nil, p.fail
	}
	p.next += uint64(in.Count)
	if p.reply != nil {
		return p.reply(in.Count, p.next), nil
	}
	return &kvpb.TsoResponse{Timestamp: p.next, Count: in.Count}, nil
}

func TestTSOBatchesConcurrentCallersBehindOneInflightRPC(t *testing.T) {
	release := make(chan struct{})
	pd := &blockingPD{next: 1000, hold: release, entered: make(chan struct{})}
	b := newTSOBatcher(pd)
	defer b.close()

	ctx := context.Background()
	first := make(chan uint64, 1)
	go func() {
		ts, err := b.getTS(ctx)
		if err != nil {
			t.Error(err)
		}
		first <- ts
	}()
	<-pd.entered // the first RPC is in flight and held

	const waiters = 50
	var wg sync.WaitGroup
	got := make(chan uint64, waiters)
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, err := b.getTS(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- ts
		}()
	}
	// Wait until all of them are queued behind the in-flight RPC.
	deadline := time.Now().Add(5 * time.Second)
	for len(b.queue) < waiters && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := len(b.queue); n != waiters {
		t.Fatalf("queued %d callers, want %d", n, waiters)
	}
	close(release)
	wg.Wait()
	close(got)

	if ts := <-first; ts != 1001 {
		t.Fatalf("first caller got %d, want 1001", ts)
	}
	seen := map[uint64]bool{}
	for ts := range got {
		if ts < 1002 || ts > 1001+waiters || seen[ts] {
			t.Fatalf("timestamp %d out of the batch's range or duplicated", ts)
		}
		seen[ts] = true
	}
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if len(pd.counts) != 2 || pd.counts[0] != 1 || pd.counts[1] != waiters {
		t.Fatalf("Tso RPC counts = %v, want [1 %d]", pd.counts, waiters)
	}
}

func TestTSOTimestampsStrictlyIncreasePerCaller(t *testing.T) {
	pd := &blockingPD{next: 1 << 20}
	b := newTSOBatcher(pd)
	defer b.close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev uint64
			for i := 0; i < 200; i++ {
				ts, err := b.getTS(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if ts <= prev {
					t.Errorf("timestamp %d after %d", ts, prev)
					return
				}
				prev = ts
			}
		}()
	}
	wg.Wait()
}

func TestTSOErrorsReachEveryCallerOfTheBatch(t *testing.T) {
	pd := &blockingPD{fail: errors.New("pd down")}
	b := newTSOBatcher(pd)
	defer b.close()
	if _, err := b.getTS(context.Background()); err == nil || !errors.Is(err, pd.fail) {
		t.Fatalf("err = %v, want wrapped pd failure", err)
	}
}

func TestTSORefusesTimestampsThatGoBackwards(t *testing.T) {
	pd := &blockingPD{next: 100}
	b := newTSOBatcher(pd)
	defer b.close()
	if _, err := b.getTS(context.Background()); err != nil {
		t.Fatal(err)
	}
	pd.mu.Lock()
	pd.reply = func(count uint32, last uint64) *kvpb.TsoResponse {
		return &kvpb.TsoResponse{Timestamp: 50, Count: count} // a PD that lost its state
	}
	pd.mu.Unlock()
	if _, err := b.getTS(context.Background()); err == nil {
		t.Fatal("a timestamp going backwards was handed out")
	}
}

func TestTSOCallerContextAndClose(t *testing.T) {
	release := make(chan struct{})
	pd := &blockingPD{next: 1, hold: release, entered: make(chan struct{})}
	b := newTSOBatcher(pd)
	go func() { _, _ = b.getTS(context.Background()) }()
	<-pd.entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.getTS(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	close(release)
	b.close()
	if _, err := b.getTS(context.Background()); !errors.Is(err, errClientClosed) {
		t.Fatalf("after close: err = %v, want errClientClosed", err)
	}
}
