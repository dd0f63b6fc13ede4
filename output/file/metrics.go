package file

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	flowsWritten   prometheus.Counter
	bytesWritten   prometheus.Counter
	flowsDropped   prometheus.Counter
	batchesDropped prometheus.Counter
	writeErrors    prometheus.Counter
	rotations      prometheus.Counter
	queueLength    prometheus.GaugeFunc
}

func newMetrics(r prometheus.Registerer, s *Sink) *metrics {
	m := &metrics{
		flowsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_file_flows_written_total", Help: "Flows written to archive files."}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_file_bytes_written_total", Help: "Bytes of protobuf written to archive files, before compression."}),
		flowsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_file_flows_dropped_total", Help: "Flows dropped because the write queue was full or a write failed."}),
		batchesDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_file_batches_dropped_total", Help: "Batches dropped because the write queue was full or a write failed."}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_file_write_errors_total", Help: "Errors writing, rotating or closing archive files."}),
		rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_file_rotations_total", Help: "Archive files started."}),
		queueLength: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_file_queue_batches", Help: "Batches waiting to be written."},
			func() float64 { return float64(len(s.queue)) }),
	}
	if r != nil {
		r.MustRegister(m.flowsWritten, m.bytesWritten, m.flowsDropped, m.batchesDropped,
			m.writeErrors, m.rotations, m.queueLength)
	}
	return m
}
