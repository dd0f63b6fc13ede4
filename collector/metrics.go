package collector

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	datagrams   *prometheus.CounterVec // listener, socket
	bytes       *prometheus.CounterVec
	kernelDrops *prometheus.CounterVec
	readErrors  *prometheus.CounterVec // listener, socket
	ringErrors  *prometheus.CounterVec // listener, reason
	rcvbuf      *prometheus.GaugeVec
	flows       *prometheus.CounterVec // exporter
	dropped     *prometheus.CounterVec // stage, reason
	decodeErrs  *prometheus.CounterVec // protocol
	batches     prometheus.Counter
	// httpRejected counts API requests refused by reason: host (a Host header that is
	// not loopback while bound to loopback), no-request-header.
	httpRejected *prometheus.CounterVec
	// httpPanics counts the requests whose handler panicked (answered 500).
	httpPanics prometheus.Counter
	// apiInFlight counts the API requests being served.
	apiInFlight    prometheus.Gauge
	exporters      prometheus.GaugeFunc
	foreignSockets *prometheus.GaugeVec // listener
}

func newMetrics(r prometheus.Registerer, c *Collector) *metrics {
	m := &metrics{
		datagrams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_datagrams_total", Help: "UDP datagrams received, per listener and socket."},
			[]string{"listener", "socket"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_bytes_total", Help: "UDP payload bytes received, per listener and socket."},
			[]string{"listener", "socket"}),
		kernelDrops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_kernel_drops_total", Help: "Datagrams the kernel dropped because the socket buffer (or the af-packet ring) was full (SO_RXQ_OVFL, PACKET_STATISTICS)."},
			[]string{"listener", "socket"}),
		readErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_read_errors_total", Help: "Socket reads that failed (other than at shutdown), per listener and socket."},
			[]string{"listener", "socket"}),
		ringErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_ring_errors_total", Help: "Frames an af-packet listener's rings held that were not passed on, by reason: truncated, malformed (IP or UDP header), checksum (IP header or UDP), fragment (not reassembled: IPv6), vlan (802.1Q-tagged on the interface: read the VLAN device instead)."},
			[]string{"listener", "reason"}),
		rcvbuf: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowzero_collector_receive_buffer_bytes", Help: "Socket receive buffer granted by the kernel (with receive: af-packet, each ring's size)."},
			[]string{"listener"}),
		flows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_flows_total", Help: "Flows encoded and handed to the sinks, per exporter."},
			[]string{"exporter"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_dropped_total", Help: "Datagrams or flows dropped by the collector, by stage and reason."},
			[]string{"stage", "reason"}),
		decodeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_decode_errors_total", Help: "Datagrams whose decoding returned an error (details in the decoder's metrics)."},
			[]string{"protocol"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_collector_batches_total", Help: "Batches handed to the sinks."}),
		httpRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_collector_http_rejected_total", Help: "HTTP requests refused, by reason (host: not addressed as localhost while bound to loopback; no-request-header: a state-changing request without X-Flowzero-Request; busy: an API request beyond http.max-concurrent-requests and http.max-queued-requests, answered 429; busy-timeout: one that waited its turn in vain, answered 503)."},
			[]string{"reason"}),
		httpPanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_collector_http_panics_total", Help: "HTTP requests whose handler panicked: answered 500 and logged with the stack."}),
		apiInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flowzero_collector_http_api_requests_in_flight", Help: "API requests being served (at most http.max-concurrent-requests)."}),
		foreignSockets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowzero_collector_foreign_sockets", Help: "Sockets of other processes (or of another collector of this one) bound to a listener's port on an overlapping address: the kernel splits the exporters' datagrams with them."},
			[]string{"listener"}),
		exporters: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_collector_exporters", Help: "Exporters seen since start."},
			func() float64 { return float64(c.exporterCount.Load()) }),
	}
	for _, reason := range []string{"host", "no-request-header", "busy", "busy-timeout"} {
		m.httpRejected.WithLabelValues(reason)
	}
	if r != nil {
		r.MustRegister(m.datagrams, m.bytes, m.kernelDrops, m.readErrors, m.ringErrors, m.rcvbuf, m.flows, m.dropped,
			m.decodeErrs, m.batches, m.httpRejected, m.httpPanics, m.apiInFlight, m.exporters, m.foreignSockets)
	}
	return m
}
