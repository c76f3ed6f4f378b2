package workload

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// RunUnits runs the units of a bulk load (a table's chunk, a warehouse's
// district) on threads goroutines, each taking the next unit not yet
// taken, and prints "loading: N rows in T" to log every `every`, N being
// what rows counts. The first failing unit stops the others; its error is
// returned. unit gets its worker's number, for a per-worker generator.
func RunUnits(ctx context.Context, threads int, units []func(worker int) error, rows *atomic.Int64, log io.Writer, every time.Duration) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	threads = max(threads, 1)
	errs := make(chan error, threads)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	begin := time.Now()
	for t := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(units) || lctx.Err() != nil {
					return
				}
				if err := units[i](t); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintf(log, "loading: %d rows in %s\n", rows.Load(), time.Since(begin).Round(time.Second))
			}
		}
	}()
	wg.Wait()
	close(done)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}
