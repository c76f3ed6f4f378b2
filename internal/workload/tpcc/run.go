package tpcc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/workload/hist"
)

// maxRetries bounds how often a transaction that hit a conflict runs again.
const maxRetries = 10

// Result is what a run measured.
type Result struct {
	Elapsed          time.Duration
	NewOrders        int64 // completed, including the intended rollbacks
	Rollbacks        int64
	Retries, Errors  int64
	TpmC, Efficiency float64
	PerType          []hist.Snapshot
	FirstErrorOfType [txTypes]string
	ErrorsOfType     [txTypes]int64
	RetriesOfType    [txTypes]int64
	CompletedOfType  [txTypes]int64
}

// keying and think times of clause 5.2.5.4, in seconds.
var keying = [txTypes]float64{18, 3, 2, 2, 2}
var thinkMean = [txTypes]float64{12, 12, 10, 5, 5}

// Run drives cfg.Threads terminals for duration (until ctx ends when
// zero), printing a report every display interval to out and the final
// table, tpmC and efficiency at the end.
func Run(ctx context.Context, cfg Config, duration, display time.Duration, out io.Writer) (*Result, error) {
	db, err := open(ctx, cfg, cfg.Database, cfg.Threads)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var nw int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM warehouse").Scan(&nw); err != nil {
		return nil, fmt.Errorf("no TPC-C data in %s (run 'strata workload init tpcc'): %w", cfg.Database, err)
	}
	if nw < cfg.Warehouses {
		return nil, fmt.Errorf("%s holds %d warehouses, fewer than --warehouses %d", cfg.Database, nw, cfg.Warehouses)
	}
	nw = cfg.Warehouses
	reg := hist.NewRegistry(txNames)
	res := &Result{}
	var mu sync.Mutex
	var rollbacks, retries atomic.Int64
	runCtx := ctx
	if duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	workers := make([]*worker, cfg.Threads)
	for i := range workers {
		k, err := newWorker(ctx, db, newRng(cfg.Seed, i), cfg.sizes(), i%nw+1, nw)
		if err != nil {
			for _, w := range workers[:i] {
				w.close()
			}
			return nil, err
		}
		workers[i] = k
	}
	defer func() {
		for _, k := range workers {
			k.close()
		}
	}()
	fmt.Fprintf(out, "tpcc: %d warehouses, %d terminals, wait %v\n", nw, cfg.Threads, cfg.Wait)
	fmt.Fprintln(out, hist.TickHeader)
	begin := time.Now()
	var wg sync.WaitGroup
	for _, k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := reg.NewRecorder()
			for runCtx.Err() == nil {
				t := k.pick()
				if cfg.Wait && !sleepCtx(runCtx, time.Duration(keying[t]*float64(time.Second))) {
					return
				}
				start := time.Now()
				var err error
				for attempt := 0; ; attempt++ {
					err = k.run(runCtx, t)
					if err == nil || !retryable(err) || attempt == maxRetries || runCtx.Err() != nil {
						break
					}
					retries.Add(1)
					mu.Lock()
					res.RetriesOfType[t]++
					mu.Unlock()
				}
				if runCtx.Err() != nil && err != nil {
					return // cut off by the end of the run: not counted
				}
				switch {
				case errors.Is(err, errRollback):
					rollbacks.Add(1)
					rec.Record(t, time.Since(start))
				case err != nil:
					rec.Error(t)
					mu.Lock()
					res.ErrorsOfType[t]++
					if res.FirstErrorOfType[t] == "" {
						res.FirstErrorOfType[t] = err.Error()
						fmt.Fprintf(out, "error: %s: %v\n", txNames[t], err)
					}
					mu.Unlock()
				default:
					rec.Record(t, time.Since(start))
				}
				if cfg.Wait {
					think := time.Duration(-thinkMean[t] * logUniform(k.r) * float64(time.Second))
					if !sleepCtx(runCtx, think) {
						return
					}
				}
			}
		}()
	}
	ticker := time.NewTicker(display)
	last := begin
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case now := <-ticker.C:
			interval, cum := reg.Tick()
			hist.WriteTick(out, now.Sub(begin), now.Sub(last), interval, cum)
			last = now
		}
	}
	ticker.Stop()
	wg.Wait()
	res.Elapsed = time.Since(begin)
	_, cum := reg.Tick()
	res.PerType = cum
	for t := 0; t < txTypes; t++ {
		res.CompletedOfType[t] = cum[t].Count
	}
	res.NewOrders = cum[txNewOrder].Count
	res.Rollbacks = rollbacks.Load()
	res.Retries = retries.Load()
	res.Errors = cum[len(cum)-1].Errors
	res.TpmC = float64(res.NewOrders) / res.Elapsed.Minutes()
	res.Efficiency = 100 * res.TpmC / (maxTpmCPerWarehouse * float64(nw))
	fmt.Fprintln(out)
	hist.WriteFinal(out, res.Elapsed, cum)
	fmt.Fprintf(out, "\ntpmC %.1f, efficiency %.1f%% (of %.2f tpmC per warehouse), %d new orders (%d rolled back as the spec asks), %d retries after conflicts, %d errors\n",
		res.TpmC, res.Efficiency, maxTpmCPerWarehouse, res.NewOrders, res.Rollbacks, res.Retries, res.Errors)
	f := []string{"_summary workload=tpcc", fmt.Sprintf("warehouses=%d", nw), fmt.Sprintf("threads=%d", cfg.Threads),
		fmt.Sprintf("tpmC=%.1f", res.TpmC), fmt.Sprintf("efficiency=%.1f", res.Efficiency),
		fmt.Sprintf("retries=%d", res.Retries)}
	f = append(f, hist.SummaryFields(res.Elapsed, cum)...)
	for _, c := range cum[:len(cum)-1] {
		f = append(f, fmt.Sprintf("%s_p95_ms=%.3f", c.Name, float64(c.P95)/float64(time.Millisecond)))
	}
	for t, n := range res.RetriesOfType {
		f = append(f, fmt.Sprintf("%s_retries=%d", txNames[t], n))
	}
	fmt.Fprintln(out, strings.Join(f, " "))
	return res, nil
}

// pick draws the next transaction type from the mix.
func (k *worker) pick() int {
	x := k.r.IntN(100)
	for t, p := range mix {
		if x < p {
			return t
		}
		x -= p
	}
	return txNewOrder
}

func (k *worker) run(ctx context.Context, t int) error {
	switch t {
	case txNewOrder:
		return k.newOrder(ctx)
	case txPayment:
		return k.payment(ctx)
	case txOrderStatus:
		return k.orderStatus(ctx)
	case txDelivery:
		return k.delivery(ctx)
	}
	return k.stockLevel(ctx)
}

// logUniform is ln(U) for U uniform in (0, 1]: think times are
// -mean * ln(U) (clause 5.2.5.4).
func logUniform(r rng) float64 {
	u := 1 - r.Float64()
	return math.Log(u)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
