package transport

import "github.com/prometheus/client_golang/prometheus"

var (
	metricSentBatches = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "transport", Name: "sent_batches_total",
		Help: "Batches of Raft messages sent to other stores.",
	})
	metricSentMsgs = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "transport", Name: "sent_messages_total",
		Help: "Raft messages sent to other stores.",
	})
	metricReceivedMsgs = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "transport", Name: "received_messages_total",
		Help: "Raft messages received from other stores.",
	})
	metricDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "transport", Name: "dropped_messages_total",
		Help: "Raft messages dropped because the queue to their store was full.",
	})
	metricSnapshotsSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "transport", Name: "snapshots_sent_total",
		Help: "Snapshots streamed to other stores, by outcome.",
	}, []string{"outcome"})
	metricSnapshotsReceived = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "strata", Subsystem: "transport", Name: "snapshots_received_total",
		Help: "Snapshots received from other stores and handed to the store.",
	})
)

func init() {
	prometheus.MustRegister(metricSentBatches, metricSentMsgs, metricReceivedMsgs, metricDropped,
		metricSnapshotsSent, metricSnapshotsReceived)
}
