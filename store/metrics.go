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
	queued         prometheus.Gauge
	insertSeconds  prometheus.Histogram
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "flowzero", Subsystem: "store", Name: "flows_dropped_total",
		Help: "Flows the embedded store sink did not store, by reason.",
	}, []string{"reason"})
	m := &metrics{
		flows: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "flows_inserted_total",
			Help: "Flows inserted into the embedded engine.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "bytes_inserted_total",
			Help: "Bytes of encoded flows inserted into the embedded engine.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "batches_inserted_total",
			Help: "INSERT statements run by the embedded store sink.",
		}),
		insertErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "insert_errors_total",
			Help: "INSERT statements the embedded engine refused.",
		}),
		droppedFull:    dropped.WithLabelValues("queue full"),
		droppedError:   dropped.WithLabelValues("insert error"),
		droppedStopped: dropped.WithLabelValues("stopped"),
		droppedInvalid: dropped.WithLabelValues("malformed"),
		notAggregated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "flows_not_aggregated_total",
			Help: "Flows stored in the flows table whose pre-aggregated rows the engine refused: missing from the aggregated tables.",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "batches_queued",
			Help: "Full batches waiting for their INSERT.",
		}),
		insertSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "flowzero", Subsystem: "store", Name: "insert_seconds",
			Help:    "Duration of the embedded sink's INSERT statements.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.flows, m.bytes, m.batches, m.insertErrors, dropped, m.notAggregated, m.queued, m.insertSeconds} {
			if err := r.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
