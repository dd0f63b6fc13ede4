package inlet

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	sent, delivered, bytes     prometheus.Counter
	records                    prometheus.Counter
	droppedFull, droppedFailed prometheus.Counter
	droppedTooLarge            prometheus.Counter
	errors                     *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_inlet_datagrams_dropped_total",
		Help: "Datagrams the inlet could not deliver to Kafka, by reason (buffer-full: max-buffered-bytes reached; too-large: in a record batch the broker refused as over the topic's max.message.bytes, see inlet.max-message-bytes; delivery-failed: refused by Kafka for another reason, or still buffered at the end of flush-timeout when stopping)."},
		[]string{"reason"})
	m := &metrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_inlet_datagrams_sent_total",
			Help: "Datagrams handed to the Kafka producer."}),
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_inlet_records_sent_total",
			Help: "Kafka records handed to the producer: a record holds the datagrams of one read of a socket, or of batch-wait."}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_inlet_datagrams_delivered_total",
			Help: "Datagrams acknowledged by Kafka."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_inlet_bytes_delivered_total",
			Help: "Bytes of datagram records acknowledged by Kafka (before compression)."}),
		droppedFull:     dropped.WithLabelValues("buffer-full"),
		droppedFailed:   dropped.WithLabelValues("delivery-failed"),
		droppedTooLarge: dropped.WithLabelValues("too-large"),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_inlet_errors_total",
			Help: "Errors of the inlet's Kafka client, by operation (create-topic; check-limit: the topic's max.message.bytes could not be read)."}, []string{"op"}),
	}
	m.errors.WithLabelValues("create-topic")
	m.errors.WithLabelValues("check-limit")
	if r != nil {
		for _, c := range []prometheus.Collector{m.sent, m.records, m.delivered, m.bytes, dropped, m.errors} {
			if err := r.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
