package kafka

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	flowsSent      prometheus.Counter
	flowsDelivered prometheus.Counter
	flowsDropped   [dropReasons]prometheus.Counter
	bytesDelivered prometheus.Counter
	errors         *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) *metrics {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_kafka_flows_dropped_total", Help: "Flows dropped, by reason (buffer-full, delivery-failed)."},
		[]string{"reason"})
	m := &metrics{
		flowsSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_kafka_flows_sent_total", Help: "Flows handed to the Kafka producer."}),
		flowsDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_kafka_flows_delivered_total", Help: "Flows acknowledged by Kafka."}),
		bytesDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_kafka_bytes_delivered_total", Help: "Record bytes acknowledged by Kafka."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_kafka_errors_total", Help: "Kafka errors, by operation (create-topic: the topic could not be checked or created; produce: a record failed for another reason than a full buffer)."}, []string{"op"}),
	}
	// Every series exists from the start, at 0: an alert on an increase needs the series
	// before the first error.
	for i, name := range dropReasonNames {
		m.flowsDropped[i] = dropped.WithLabelValues(name)
	}
	m.errors.WithLabelValues("create-topic")
	m.errors.WithLabelValues("produce")
	if r != nil {
		r.MustRegister(m.flowsSent, m.flowsDelivered, dropped, m.bytesDelivered, m.errors)
	}
	return m
}
