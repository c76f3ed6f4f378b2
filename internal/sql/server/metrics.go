package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-db/strata/internal/sql/exec"
)

// Process-wide metrics of the MySQL front end, registered with the default
// Prometheus registry (served by the node's /metrics).
var (
	metricConnectionsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "connections_open",
		Help: "Client connections currently open (authenticated or not).",
	})
	metricConnectionsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "connections_total",
		Help: "Client connections accepted.",
	})
	metricConnectionsAborted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "connections_aborted_total",
		Help: "Connections dropped before the handshake completed (failed authentication, malformed handshake).",
	})
	metricLogins = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "logins_total",
		Help: "Successful logins.",
	})
	metricLoginFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "login_failures_total",
		Help: "Refused logins, by reason (wrong_password, unknown_user, account_locked, blocked_after_failures, ssl_required, x509_required, insecure_transport).",
	}, []string{"reason"})
	metricPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "panics_total",
		Help: "Panics recovered while serving a command; each cost its connection.",
	})
	metricCommands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "commands_total",
		Help: "Protocol commands served, by command.",
	}, []string{"command"})
	metricCommandErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "mysql", Name: "command_errors_total",
		Help: "Protocol commands answered with an error, by command.",
	}, []string{"command"})
)

// commandMetrics are the per-command counters, resolved once.
type commandMetrics struct {
	served, failed prometheus.Counter
}

func newCommandMetrics(command string) commandMetrics {
	return commandMetrics{served: metricCommands.WithLabelValues(command), failed: metricCommandErrors.WithLabelValues(command)}
}

var (
	metricsQuery   = newCommandMetrics("query")
	metricsPrepare = newCommandMetrics("prepare")
	metricsExecute = newCommandMetrics("execute")
	metricsInitDB  = newCommandMetrics("init_db")
)

// observe counts one command and whether it failed.
func (m commandMetrics) observe(err error) {
	m.served.Inc()
	if err != nil {
		m.failed.Inc()
	}
}

// metricPolls counts pollReader's polls by how they ended: data (the
// client's next request arrived while polling), idle (pollFor passed) or
// other (another connection opened, end of stream, an error).
var metricPolls = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "strata", Subsystem: "mysql", Name: "socket_polls_total",
	Help: "Polls of an idle server's client socket before waiting in the poller, by outcome: data, idle, other.",
}, []string{"outcome"})

var (
	pollData  = metricPolls.WithLabelValues("data")
	pollIdle  = metricPolls.WithLabelValues("idle")
	pollOther = metricPolls.WithLabelValues("other")
)

// Statements past their memory quota that spilled to temporary files.
var (
	metricSpillFiles = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "sql", Name: "spill_files_total",
		Help: "Temporary files created by statements past their memory quota (tidb_mem_quota_query) to spill rows to.",
	}, func() float64 { f, _ := exec.SpillStats(); return float64(f) })
	metricSpillBytes = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "sql", Name: "spill_bytes_total",
		Help: "Bytes written to temporary files by statements past their memory quota (counted when a file is removed).",
	}, func() float64 { _, b := exec.SpillStats(); return float64(b) })
)

func init() {
	prometheus.MustRegister(metricSpillFiles, metricSpillBytes, metricConnectionsOpen, metricConnectionsTotal, metricConnectionsAborted,
		metricPanics, metricCommands, metricCommandErrors, metricPolls, metricLogins, metricLoginFailures)
}
