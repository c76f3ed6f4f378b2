// Package workload is Strata's built-in load generator, `strata workload`,
// modelled on `cockroach workload`: the same client program loads data into
// and measures Strata and its peers (Redis, etcd, MySQL servers), so that a
// comparison is between servers, not between benchmark tools.
//
// The pieces, by folder:
//
//   - workload (this package): the Workload and Worker contracts, the load
//     phase (Load: parallel batched inserts with a progress line) and the
//     measured phase (Run: workers, periodic and final reports, the summary
//     line scripts read).
//   - ycsb: the YCSB core workloads A-F (Cooper et al., SoCC 2010).
//   - kv: the KV workload of `cockroach workload run kv` (KV95 is
//     --read-percent 95).
//   - gen: key choosers (uniform, scrambled zipfian, skewed latest), the
//     insert counter, the operation chooser, random values.
//   - driver: Stores over the Redis protocol, the MySQL protocol and etcd,
//     and how each lays out a record.
//   - hist: per-worker HdrHistograms and the report format.
//   - cli: the command line of `strata workload`.
//
// Loading is a phase of its own, as in cockroach workload: `strata workload
// init ycsb|kv` creates the table (sql) and inserts the records with a
// progress line; `run --init` does the same before running, and `--drop`
// deletes the workload's earlier records first.
//
// Contract between the runner and a workload: the runner owns concurrency,
// timing and counting. A Worker belongs to one goroutine; Next chooses the
// operation (no I/O, not timed) and Exec performs it against the Store
// (timed). An error from Exec is counted against the operation type and its
// message reported, never dropped; only successful operations contribute
// latencies and throughput. The run stops at --duration, at --operations,
// or on cancellation of its context, letting operations in flight finish.
package workload

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/internal/workload/driver"
	"github.com/strata-db/strata/internal/workload/hist"
)

// Workload defines what is loaded and what the workers do.
type Workload interface {
	// Name identifies the workload in reports ("ycsb-a", "kv95").
	Name() string
	// Schema describes its records.
	Schema() driver.Schema
	// OpNames are the operation types a Worker's Next may return, in report
	// order.
	OpNames() []string
	// LoadCount is the number of records the load phase inserts.
	LoadCount() uint64
	// LoadRecord returns the key of record i of the load phase and fills
	// fields (Schema().Fields() buffers of Schema().FieldLength bytes).
	LoadRecord(i uint64, r *rand.Rand, fields [][]byte) string
	// NewWorker returns the state of one worker goroutine.
	NewWorker(s driver.Store, r *rand.Rand) Worker
}

// Worker runs operations one at a time.
type Worker interface {
	// Next chooses the next operation and returns its index in OpNames.
	Next() int
	// Exec performs the operation chosen by the last Next.
	Exec(ctx context.Context) error
}

// Noter is implemented by workloads with something to say after a run (for
// example how many reads found no value).
type Noter interface {
	Notes() []string
}

// Options are the knobs of Load and Run.
type Options struct {
	// Threads is the number of concurrent workers (connections in use).
	Threads int
	// Duration ends the run after this long (0: no limit).
	Duration time.Duration
	// Operations ends the run after this many operations, successful or
	// not (0: no limit).
	Operations uint64
	// DisplayEvery is the interval of the periodic report and the load
	// progress line.
	DisplayEvery time.Duration
	// Seed seeds the workers' random generators (worker i uses Seed, i).
	Seed uint64
	// LoadBatch is the number of records per insert batch when loading.
	LoadBatch int
	// Out receives the report; Log the progress line and error messages.
	Out, Log io.Writer
	// Labels are key=value pairs that start the summary line.
	Labels []string
}

func (o *Options) defaults() {
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.DisplayEvery <= 0 {
		o.DisplayEvery = time.Second
	}
	if o.LoadBatch <= 0 {
		o.LoadBatch = 100
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// errorLog counts failures by operation type and message and prints the
// first occurrence of each distinct message.
type errorLog struct {
	mu       sync.Mutex
	w        io.Writer
	byMsg    map[string]int64
	order    []string
	dropped  int64 // failures whose message was past the distinct limit
	distinct int
}

func newErrorLog(w io.Writer) *errorLog {
	return &errorLog{w: w, byMsg: map[string]int64{}, distinct: 10}
}

func (l *errorLog) note(op string, err error) {
	msg := op + ": " + err.Error()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byMsg[msg]; ok {
		l.byMsg[msg]++
		return
	}
	if len(l.order) >= l.distinct {
		l.dropped++
		return
	}
	l.byMsg[msg] = 1
	l.order = append(l.order, msg)
	fmt.Fprintf(l.w, "error: %s\n", msg)
	if len(l.order) == l.distinct {
		fmt.Fprintf(l.w, "error: (further distinct error messages are counted, not printed)\n")
	}
}

func (l *errorLog) write(w io.Writer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.order) == 0 {
		return
	}
	fmt.Fprintln(w, "errors by message:")
	msgs := append([]string(nil), l.order...)
	sort.SliceStable(msgs, func(i, j int) bool { return l.byMsg[msgs[i]] > l.byMsg[msgs[j]] })
	for _, m := range msgs {
		fmt.Fprintf(w, "%10d  %s\n", l.byMsg[m], m)
	}
	if l.dropped > 0 {
		fmt.Fprintf(w, "%10d  (other messages)\n", l.dropped)
	}
}

func (l *errorLog) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.order) == 0 {
		return ""
	}
	return l.order[0]
}

func newRand(seed uint64, worker int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(worker)))
}

// Load inserts the workload's LoadCount records with Threads workers, in
// batches of LoadBatch, printing a progress line to Log every DisplayEvery.
// A failed batch is counted and its first error reported; Load returns an
// error if any record was not inserted.
func Load(ctx context.Context, w Workload, s driver.Store, o Options) error {
	o.defaults()
	total := w.LoadCount()
	schema := w.Schema()
	var next, done, failed atomic.Uint64
	errs := newErrorLog(o.Log)
	batch := uint64(o.LoadBatch)
	start := time.Now()

	var wg sync.WaitGroup
	for t := 0; t < o.Threads; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			r := newRand(o.Seed, -1-t)
			keys := make([]string, 0, batch)
			recs := make([][][]byte, batch)
			for i := range recs {
				recs[i] = make([][]byte, schema.Fields())
				for f := range recs[i] {
					recs[i][f] = make([]byte, schema.FieldLength)
				}
			}
			for ctx.Err() == nil {
				from := next.Add(batch) - batch
				if from >= total {
					return
				}
				to := min(from+batch, total)
				keys = keys[:0]
				for i := from; i < to; i++ {
					keys = append(keys, w.LoadRecord(i, r, recs[i-from]))
				}
				if err := s.InsertBatch(ctx, keys, recs[:to-from]); err != nil {
					failed.Add(to - from)
					errs.note("insert", err)
				} else {
					done.Add(to - from)
				}
			}
		}(t)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	progress := func() {
		d, f := done.Load(), failed.Load()
		el := time.Since(start)
		fmt.Fprintf(o.Log, "load %s: %d/%d records (%.1f%%), %.0f records/s, %d failed, %s\n",
			schema.Table, d, total, 100*float64(d+f)/float64(max(total, 1)), float64(d)/el.Seconds(), f,
			el.Round(time.Second/10))
	}
	tick := time.NewTicker(o.DisplayEvery)
	defer tick.Stop()
loop:
	for {
		select {
		case <-finished:
			break loop
		case <-tick.C:
			progress()
		}
	}
	progress()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("load interrupted after %d of %d records: %w", done.Load(), total, err)
	}
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("load: %d of %d records were not inserted; first error: %s", f, total, errs.first())
	}
	return nil
}

// Result is what a run measured.
type Result struct {
	Elapsed time.Duration
	Ops     int64 // successful operations
	Errors  int64
	// Final holds the cumulative snapshots per operation type, then the
	// total.
	Final []hist.Snapshot
}

// Run runs the workload's workers against s until Duration, Operations or
// the cancellation of ctx, printing the periodic report and then the final
// table, the error messages, the workload's notes and a summary line
// ("_summary key=value ...") to Out.
func Run(ctx context.Context, w Workload, s driver.Store, o Options) Result {
	o.defaults()
	names := w.OpNames()
	reg := hist.NewRegistry(names)
	errs := newErrorLog(o.Log)

	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	if o.Duration > 0 {
		var cancel context.CancelFunc
		stopCtx, cancel = context.WithTimeout(stopCtx, o.Duration)
		defer cancel()
	}
	// Operations in flight when the run stops are allowed to finish: they
	// are measured like any other, not failed by the stop.
	opCtx := context.WithoutCancel(ctx)
	var claimed atomic.Uint64

	recs := make([]*hist.Recorder, o.Threads)
	wks := make([]Worker, o.Threads)
	for t := range wks {
		recs[t] = reg.NewRecorder()
		wks[t] = w.NewWorker(s, newRand(o.Seed, t))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for t := range wks {
		rec, wk := recs[t], wks[t]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stopCtx.Err() == nil {
				if o.Operations > 0 && claimed.Add(1) > o.Operations {
					return
				}
				op := wk.Next()
				t0 := time.Now()
				err := wk.Exec(opCtx)
				d := time.Since(t0)
				if err != nil {
					rec.Error(op)
					errs.note(names[op], err)
				} else {
					rec.Record(op, d)
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	tick := time.NewTicker(o.DisplayEvery)
	defer tick.Stop()
	last := start
	rows := 0
loop:
	for {
		select {
		case <-finished:
			break loop
		case now := <-tick.C:
			in, cum := reg.Tick()
			if rows%20 == 0 {
				fmt.Fprintln(o.Out, hist.TickHeader)
			}
			rows++
			hist.WriteTick(o.Out, now.Sub(start), now.Sub(last), in, cum)
			last = now
		}
	}
	elapsed := time.Since(start)
	_, cum := reg.Tick()

	fmt.Fprintln(o.Out)
	hist.WriteFinal(o.Out, elapsed, cum)
	errs.write(o.Out)
	if n, ok := w.(Noter); ok {
		for _, note := range n.Notes() {
			fmt.Fprintln(o.Out, note)
		}
	}
	fields := append([]string{"_summary", "workload=" + w.Name()}, o.Labels...)
	fields = append(fields, hist.SummaryFields(elapsed, cum)...)
	fmt.Fprintln(o.Out, strings.Join(fields, " "))

	total := cum[len(cum)-1]
	return Result{Elapsed: elapsed, Ops: total.Count, Errors: total.Errors, Final: cum}
}
