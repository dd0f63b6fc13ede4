package store

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	flows          prometheus.Counter
	bytes          prometheus.Counter
	batches        prometheus.Counter
	insertErrors   prometheus.Counter
	droppedFull    prometheus.Counter
	droppedError   prometheus.Counter
	droppedStopped prometheus.Counter
	droppedInvalid prometheus.Counter
	notAggregated  prometheus.Counter
	groups         prometheus.Counter
	pendingFlows   prometheus.Gauge
	pendingGroups  prometheus.Gauge
	queued         prometheus.Gauge
	insertSeconds  prometheus.Histogram
}

// counter and gauge make the sink's metrics, all named flowzero_store_<name>.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowzero", Subsystem: "store", Name: name, Help: help})
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flowzero", Subsystem: "store", Name: name, Help: help})
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "flowzero", Subsystem: "store", Name: "flows_dropped_total",
		Help: "Flows the embedded store sink did not store, by reason.",
	}, []string{"reason"})
	m := &metrics{
		flows: counter("flows_inserted_total",
			"Flows inserted into the embedded engine."),
		bytes: counter("bytes_inserted_total",
			"Bytes of encoded flows inserted into the embedded engine."),
		batches: counter("batches_inserted_total",
			"INSERT statements run by the embedded store sink."),
		insertErrors: counter("insert_errors_total",
			"INSERT statements the embedded engine refused."),
		droppedFull:    dropped.WithLabelValues("queue full"),
		droppedError:   dropped.WithLabelValues("insert error"),
		droppedStopped: dropped.WithLabelValues("stopped"),
		droppedInvalid: dropped.WithLabelValues("malformed"),
		notAggregated: counter("flows_not_aggregated_total",
			"Flows stored in the flows table whose pre-aggregated rows the engine refused: missing from the aggregated tables."),
		groups: counter("groups_inserted_total",
			"Rows the sink pre-aggregated and inserted into the finest aggregated table."),
		pendingFlows: gauge("pending_aggregated_flows",
			"Flows stored in the flows table and summed into groups not inserted yet (embedded.pre-aggregate-interval)."),
		pendingGroups: gauge("pending_groups",
			"Pre-aggregated rows waiting for their INSERT into the finest aggregated table."),
		queued: gauge("batches_queued",
			"Full batches waiting for their INSERT."),
		insertSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "insert_seconds",
			Help:    "Duration of the embedded sink's INSERT statements.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.flows, m.bytes, m.batches, m.insertErrors, dropped, m.notAggregated, m.groups, m.pendingFlows, m.pendingGroups, m.queued, m.insertSeconds} {
			if err := r.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
