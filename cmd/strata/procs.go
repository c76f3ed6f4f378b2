package main

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The Raft log's group commit is one O_DIRECT|O_DSYNC write per round,
// about 110-190 us on the VMs we benchmark on, and the thread making it
// keeps its Go processor (P) while it waits in the kernel, until the
// runtime's monitor takes the P back. Under sysbench's write workloads at
// 8 threads that write is in progress 70% of the time, and on 2 cores the
// node then runs its goroutines on what is, much of the time, one P:
// sessions woken by an acknowledged commit wait tens of microseconds for
// it (about 80 us per commit, from timestamps taken along a proposal's
// path). One more P than cores lets them run meanwhile: bench/ab.sh,
// GOMAXPROCS=3 against 2 on 2 vCPUs, 3-5 pairs of 15 s, measured
// oltp_update_index 1.225, oltp_update_non_index 1.168, oltp_delete 1.212
// and oltp_insert 1.162; but oltp_point_select 0.877, oltp_read_only 0.906
// and oltp_read_write 0.931, whose CPU-bound work gains nothing from a
// third P and shares the cores with one more runnable thread.
//
// So the node adds the P only while the log's writes keep a thread
// blocked most of the time: walProcs samples the time spent in them and
// raises GOMAXPROCS by one while they fill at least procsRaiseBusy of the
// wall clock, lowering it again once they fall under procsLowerBusy (the
// gap keeps a workload near one threshold from flapping; each change
// stops the world for a few microseconds). Measured fractions at 8
// threads: update_index 0.70, update_non_index 0.78, delete 0.77, insert
// 0.77 (these get the P); read_write 0.26, whose range reads are CPU-bound
// (it keeps the cores' count; with a third P its writes took longer and
// the fraction rose to 0.45); the read-only workloads 0.
const (
	procsSampleInterval = 250 * time.Millisecond
	procsRaiseBusy      = 0.60
	procsLowerBusy      = 0.40
)

var metricProcs = prometheus.NewGauge(prometheus.GaugeOpts{
	Namespace: "strata", Name: "gomaxprocs",
	Help: "Go processors (GOMAXPROCS): the cores, plus one while the Raft log's durable writes keep a thread blocked (see --wal-proc).",
})

func init() {
	metricProcs.Set(float64(runtime.GOMAXPROCS(0))) // also right with --wal-proc=false
	prometheus.MustRegister(metricProcs)
}

// nextProcs is the processor count for the next interval, given the base
// count (the cores), the current count and the fraction of the last
// interval spent in WAL writes.
func nextProcs(base, cur int, busy float64) int {
	switch {
	case busy >= procsRaiseBusy:
		return base + 1
	case busy <= procsLowerBusy:
		return base
	}
	return cur
}

// walProcs adjusts GOMAXPROCS to the WAL's load until ctx ends, unless the
// GOMAXPROCS environment variable fixes it (the environment wins, as for
// every Go program). writeTime reports the cumulative time spent in WAL
// writes (engine.WALWriteTime). The base count is the runtime's default at
// start (the cores, or a container's CPU limit); once walProcs has set the
// count, the runtime no longer follows a later change of that limit.
func walProcs(ctx context.Context, logger *slog.Logger, writeTime func() time.Duration) {
	base := runtime.GOMAXPROCS(0)
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return
	}
	cur := base
	lastBusy, lastAt := writeTime(), time.Now()
	t := time.NewTicker(procsSampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		busy, now := writeTime(), time.Now()
		frac := float64(busy-lastBusy) / float64(now.Sub(lastAt))
		lastBusy, lastAt = busy, now
		if n := nextProcs(base, cur, frac); n != cur {
			runtime.GOMAXPROCS(n)
			logger.Debug("go processors", "from", cur, "to", n, "wal-busy", frac)
			cur = n
			metricProcs.Set(float64(n))
		}
	}
}
