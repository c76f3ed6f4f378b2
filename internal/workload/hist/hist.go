// Package hist measures the latency and throughput of workload operations and
// prints them the way `strata workload` reports: a row per operation type
// every display interval, and a final table and summary line.
//
// Each worker records into its own Recorder (a mutex no one else takes
// except the reporter, once per tick), so recording does not contend across
// workers. Registry.Tick moves what every Recorder holds into the interval
// snapshot and the cumulative totals. Latencies go into HdrHistograms
// (github.com/HdrHistogram/hdrhistogram-go) at microsecond resolution with
// two significant digits, so p95/p99 are within 1%; the mean and the maximum
// are kept exactly beside them. Only successful operations have latencies;
// failed ones are counted as errors.
package hist

import (
	"fmt"
	"io"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

const (
	lowestMicros  = 1
	highestMicros = 100_000_000 // 100 s; slower operations are recorded as 100 s
	sigFigs       = 2
)

// stats is what is known about one operation type over some span.
type stats struct {
	h      *hdrhistogram.Histogram // microseconds
	count  int64
	errors int64
	sum    time.Duration
	max    time.Duration
}

func newStats() *stats {
	return &stats{h: hdrhistogram.New(lowestMicros, highestMicros, sigFigs)}
}

func (s *stats) add(o *stats) {
	s.h.Merge(o.h)
	s.count += o.count
	s.errors += o.errors
	s.sum += o.sum
	if o.max > s.max {
		s.max = o.max
	}
}

func (s *stats) reset() {
	s.h.Reset()
	s.count, s.errors, s.sum, s.max = 0, 0, 0, 0
}

// Snapshot describes one operation type (or the total) over an interval or
// since the start.
type Snapshot struct {
	Name          string
	Count         int64 // successful operations
	Errors        int64
	Mean, P50     time.Duration
	P95, P99, Max time.Duration
}

func (s *stats) snapshot(name string) Snapshot {
	snap := Snapshot{Name: name, Count: s.count, Errors: s.errors, Max: s.max}
	if s.count > 0 {
		snap.Mean = s.sum / time.Duration(s.count)
		snap.P50 = time.Duration(s.h.ValueAtQuantile(50)) * time.Microsecond
		snap.P95 = time.Duration(s.h.ValueAtQuantile(95)) * time.Microsecond
		snap.P99 = time.Duration(s.h.ValueAtQuantile(99)) * time.Microsecond
		// The histogram rounds within 1%; never report a percentile above
		// the exact maximum.
		for _, p := range []*time.Duration{&snap.P50, &snap.P95, &snap.P99} {
			if *p > snap.Max {
				*p = snap.Max
			}
		}
	}
	return snap
}

// Recorder collects one worker's measurements. It is safe for use by its
// worker and the Registry's Tick at the same time.
type Recorder struct {
	mu  sync.Mutex
	ops []*stats
}

// Record notes a successful operation of type op (an index into the
// Registry's names) that took d.
func (r *Recorder) Record(op int, d time.Duration) {
	us := d.Microseconds()
	if us < lowestMicros {
		us = lowestMicros
	} else if us > highestMicros {
		us = highestMicros
	}
	r.mu.Lock()
	s := r.ops[op]
	s.h.RecordValue(us) // in range by construction
	s.count++
	s.sum += d
	if d > s.max {
		s.max = d
	}
	r.mu.Unlock()
}

// Error notes a failed operation of type op.
func (r *Recorder) Error(op int) {
	r.mu.Lock()
	r.ops[op].errors++
	r.mu.Unlock()
}

// Registry owns the Recorders of a run and the cumulative totals.
type Registry struct {
	names []string

	mu        sync.Mutex
	recorders []*Recorder
	interval  []*stats // scratch, reset every Tick
	cum       []*stats
	cumTotal  *stats
}

// NewRegistry measures the operation types names (Record's op indexes into
// it).
func NewRegistry(names []string) *Registry {
	g := &Registry{names: names, cumTotal: newStats()}
	for range names {
		g.interval = append(g.interval, newStats())
		g.cum = append(g.cum, newStats())
	}
	return g
}

// Names are the operation types, in report order.
func (g *Registry) Names() []string { return g.names }

// NewRecorder returns a Recorder for one worker.
func (g *Registry) NewRecorder() *Recorder {
	r := &Recorder{}
	for range g.names {
		r.ops = append(r.ops, newStats())
	}
	g.mu.Lock()
	g.recorders = append(g.recorders, r)
	g.mu.Unlock()
	return r
}

// Tick collects everything recorded since the previous Tick. It returns,
// per operation type, the interval's snapshot and the cumulative one; the
// last element of each is the total over all types (named "total").
func (g *Registry) Tick() (interval, cumulative []Snapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.interval {
		s.reset()
	}
	for _, r := range g.recorders {
		r.mu.Lock()
		for i, s := range r.ops {
			if s.count > 0 || s.errors > 0 {
				g.interval[i].add(s)
				s.reset()
			}
		}
		r.mu.Unlock()
	}
	intTotal := newStats()
	for i, s := range g.interval {
		g.cum[i].add(s)
		g.cumTotal.add(s)
		intTotal.add(s)
		interval = append(interval, s.snapshot(g.names[i]))
		cumulative = append(cumulative, g.cum[i].snapshot(g.names[i]))
	}
	interval = append(interval, intTotal.snapshot("total"))
	cumulative = append(cumulative, g.cumTotal.snapshot("total"))
	return interval, cumulative
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func fmtElapsed(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// TickHeader is printed above the periodic rows.
const TickHeader = "_elapsed___op__________errors(cum)__ops/sec(inst)___ops/sec(cum)__avg(ms)__p95(ms)__p99(ms)__max(ms)"

// WriteTick prints one row per operation type that has run so far: errors
// since the start, throughput over the last interval (of length since) and
// since the start (elapsed), and the interval's latencies. The total row is
// printed only when there is more than one type.
func WriteTick(w io.Writer, elapsed, since time.Duration, interval, cumulative []Snapshot) {
	for i := range interval {
		in, cum := interval[i], cumulative[i]
		if cum.Count == 0 && cum.Errors == 0 {
			continue
		}
		if in.Name == "total" && len(interval) == 2 {
			continue
		}
		fmt.Fprintf(w, "%8s   %-12s %12d %14.1f %14.1f %8.2f %8.2f %8.2f %8.2f\n",
			fmtElapsed(elapsed), in.Name, cum.Errors, rate(in.Count, since), rate(cum.Count, elapsed),
			ms(in.Mean), ms(in.P95), ms(in.P99), ms(in.Max))
	}
}

// FinalHeader is printed above the final table.
const FinalHeader = "_elapsed___op_______________errors_____ops(total)___ops/sec(cum)__avg(ms)__p95(ms)__p99(ms)__max(ms)"

// WriteFinal prints the final table: per operation type and in total, the
// errors, successful operations, throughput and latencies since the start.
func WriteFinal(w io.Writer, elapsed time.Duration, cumulative []Snapshot) {
	fmt.Fprintln(w, FinalHeader)
	for _, c := range cumulative {
		if c.Count == 0 && c.Errors == 0 && c.Name != "total" {
			continue
		}
		fmt.Fprintf(w, "%8s   %-12s %12d %14d %14.1f %8.2f %8.2f %8.2f %8.2f\n",
			fmtElapsed(elapsed), c.Name, c.Errors, c.Count, rate(c.Count, elapsed),
			ms(c.Mean), ms(c.P95), ms(c.P99), ms(c.Max))
	}
}

// SummaryFields are the key=value pairs of the machine-readable summary line
// for the cumulative snapshots: for the total, ops=, errors=, ops/sec=,
// avg_ms=, p95_ms=, p99_ms=, max_ms=; then, per operation type that ran,
// <type>_ops/sec=, <type>_p99_ms= and <type>_errors=.
func SummaryFields(elapsed time.Duration, cumulative []Snapshot) []string {
	total := cumulative[len(cumulative)-1]
	f := []string{
		fmt.Sprintf("elapsed_s=%.2f", elapsed.Seconds()),
		fmt.Sprintf("ops=%d", total.Count),
		fmt.Sprintf("errors=%d", total.Errors),
		fmt.Sprintf("ops/sec=%.1f", rate(total.Count, elapsed)),
		fmt.Sprintf("avg_ms=%.3f", ms(total.Mean)),
		fmt.Sprintf("p95_ms=%.3f", ms(total.P95)),
		fmt.Sprintf("p99_ms=%.3f", ms(total.P99)),
		fmt.Sprintf("max_ms=%.3f", ms(total.Max)),
	}
	for _, c := range cumulative[:len(cumulative)-1] {
		if c.Count == 0 && c.Errors == 0 {
			continue
		}
		f = append(f,
			fmt.Sprintf("%s_ops/sec=%.1f", c.Name, rate(c.Count, elapsed)),
			fmt.Sprintf("%s_p99_ms=%.3f", c.Name, ms(c.P99)),
			fmt.Sprintf("%s_errors=%d", c.Name, c.Errors))
	}
	return f
}
