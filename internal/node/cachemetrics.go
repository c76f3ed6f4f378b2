package node

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-db/strata/internal/mvcc"
)

// metricsVersionCache is the version cache the metrics below report: the
// node started last in this process (one, outside tests).
var metricsVersionCache atomic.Pointer[mvcc.VersionCache]

func registerVersionCacheMetrics(c *mvcc.VersionCache) { metricsVersionCache.Store(c) }

// metricsRecentWrites is the recent-write table the metrics below report.
var metricsRecentWrites atomic.Pointer[mvcc.RecentWrites]

func registerRecentWritesMetrics(rw *mvcc.RecentWrites) { metricsRecentWrites.Store(rw) }

func recentWritesStats() mvcc.RecentWritesStats { return metricsRecentWrites.Load().Stats() }

func versionCacheStats() mvcc.VersionCacheStats { return metricsVersionCache.Load().Stats() }

func init() {
	prometheus.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "version_cache", Name: "hits_total",
			Help: "Point reads of a key's versions answered by the cache of newest versions.",
		}, func() float64 { return float64(versionCacheStats().Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "version_cache", Name: "misses_total",
			Help: "Point reads of a key's versions that went to the engine.",
		}, func() float64 { return float64(versionCacheStats().Misses) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "strata", Subsystem: "version_cache", Name: "bytes",
			Help: "Approximate memory held by the cache of newest versions.",
		}, func() float64 { return float64(versionCacheStats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "strata", Subsystem: "version_cache", Name: "entries",
			Help: "Keys in the cache of newest versions.",
		}, func() float64 { return float64(versionCacheStats().Entries) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "mvcc", Name: "newer_write_checks_bounded_total",
			Help: "Checks for a record at or above a timestamp (prewrite conflicts, commit records) answered without reading the engine: the key's recent-write bound and the engine's timestamp floor were both below it.",
		}, func() float64 { return float64(recentWritesStats().Bounded) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "mvcc", Name: "newer_write_checks_sst_only_total",
			Help: "Checks for a record at or above a timestamp (prewrite conflicts, commit records) answered from the SSTs alone, without searching the memtables.",
		}, func() float64 { return float64(recentWritesStats().SSTOnly) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "mvcc", Name: "newer_write_checks_full_total",
			Help: "Checks for a record at or above a timestamp that had to search the memtables too (a recent write shared the key's slot, or the SSTs held a record).",
		}, func() float64 { return float64(recentWritesStats().Full) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "mvcc", Name: "version_reads_sst_only_total",
			Help: "Reads of a key's versions (after a version cache miss) that read the SSTs alone: no memtable could hold a record of the key.",
		}, func() float64 { return float64(recentWritesStats().MemtableSkips) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "mvcc", Name: "version_reads_full_total",
			Help: "Reads of a key's versions (after a version cache miss) that searched the memtables too: a batch applied since the last completed flush wrote a key of the same slot, or a range deletion.",
		}, func() float64 { return float64(recentWritesStats().FullReads) }),
	)
}
