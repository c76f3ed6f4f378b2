package node

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
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

// metricsKVEngine is the KV engine the compaction metrics below report.
var metricsKVEngine atomic.Pointer[pebble.DB]

func registerKVEngineMetrics(db *pebble.DB) { metricsKVEngine.Store(db) }

// kvCompactions returns the KV engine's estimated compaction debt, the
// compactions running and those run since it opened (zeros before an
// engine is open).
func kvCompactions() (debt uint64, running, total int64) {
	db := metricsKVEngine.Load()
	if db == nil {
		return 0, 0, 0
	}
	m := db.Metrics()
	return m.Compact.EstimatedDebt, m.Compact.NumInProgress, m.Compact.Count
}

func init() {
	prometheus.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "strata", Subsystem: "storage", Name: "compaction_debt_bytes",
			Help: "Bytes the KV engine estimates it would compact to bring every level to its target size (Pebble's estimated debt). Files that flushes put in level 0 without overlapping one another count in full although reads find one file per key there, so it need not reach zero.",
		}, func() float64 { d, _, _ := kvCompactions(); return float64(d) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "strata", Subsystem: "storage", Name: "compactions_running",
			Help: "Compactions the KV engine is running.",
		}, func() float64 { _, n, _ := kvCompactions(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "storage", Name: "compactions_total",
			Help: "Compactions the KV engine has run since it opened.",
		}, func() float64 { _, _, n := kvCompactions(); return float64(n) }),
	)
}
