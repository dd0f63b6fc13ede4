package kafka

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	flowsSent      prometheus.Counter
	flowsDelivered prometheus.Counter
	flowsDropped   *prometheus.CounterVec
	bytesDelivered prometheus.Counter
	errors         *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		flowsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_kafka_flows_sent_total", Help: "Flows handed to the Kafka producer."}),
		flowsDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_kafka_flows_delivered_total", Help: "Flows acknowledged by Kafka."}),
		flowsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_kafka_flows_dropped_total", Help: "Flows dropped, by reason (buffer-full, delivery-failed)."},
			[]string{"reason"}),
		bytesDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_kafka_bytes_delivered_total", Help: "Record bytes acknowledged by Kafka."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_kafka_errors_total", Help: "Kafka errors, by operation."}, []string{"op"}),
	}
	if r != nil {
		r.MustRegister(m.flowsSent, m.flowsDelivered, m.flowsDropped, m.bytesDelivered, m.errors)
	}
	return m
}
