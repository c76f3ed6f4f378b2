package resp

import "github.com/prometheus/client_golang/prometheus"

var (
	metricCommands = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "resp", Name: "commands_total",
		Help: "Redis commands received.",
	})
	metricBatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "strata", Subsystem: "resp", Name: "batch_commands",
		Help:    "Write commands run in one shared batch transaction.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	})
	metricBatchSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "strata", Subsystem: "resp", Name: "batch_seconds",
		Help:    "Time to run and commit one batch transaction, retries included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	metricBatchWaitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "strata", Subsystem: "resp", Name: "batch_wait_seconds",
		Help:    "Time a write command waits before its batch starts.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	metricRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "resp", Name: "txn_retries_total",
		Help: "Transactions re-run after a write conflict.",
	})
	metricAuthFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "resp", Name: "auth_failures_total",
		Help: "AUTH and HELLO AUTH refused (unknown or disabled user, wrong password).",
	})
	metricACLDenied = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "resp", Name: "acl_denied_total",
		Help: "Commands refused by ACL rules (NOPERM).",
	})
)

func init() {
	prometheus.MustRegister(metricCommands, metricBatchSize, metricBatchSeconds, metricBatchWaitSeconds, metricRetries, metricAuthFailures, metricACLDenied)
}
