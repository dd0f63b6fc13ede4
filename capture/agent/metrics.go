package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are the agent's own metrics.
type metrics struct {
	captured   prometheus.Counter
	sent       prometheus.Counter
	dropKernel prometheus.Counter
	dropAgent  prometheus.Counter
	reconnects prometheus.Counter
	buffered   prometheus.Gauge
	connected  prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) *metrics {
	f := promauto.With(r)
	drops := f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_agent_drops_total",
		Help: "Packets dropped, per cause (kernel: the capture ring; agent: the send buffer was full or the agent stopped before sending)."}, []string{"cause"})
	return &metrics{
		captured: f.NewCounter(prometheus.CounterOpts{Name: "flowzero_capture_agent_packets_total",
			Help: "Packets captured or read from files."}),
		sent: f.NewCounter(prometheus.CounterOpts{Name: "flowzero_capture_agent_sent_packets_total",
			Help: "Packets acknowledged by the server."}),
		dropKernel: drops.WithLabelValues("kernel"),
		dropAgent:  drops.WithLabelValues("agent"),
		reconnects: f.NewCounter(prometheus.CounterOpts{Name: "flowzero_capture_agent_reconnects_total",
			Help: "Connections to the server after the first one."}),
		buffered: f.NewGauge(prometheus.GaugeOpts{Name: "flowzero_capture_agent_buffered_bytes",
			Help: "Bytes of frames waiting to be sent or acknowledged."}),
		connected: f.NewGauge(prometheus.GaugeOpts{Name: "flowzero_capture_agent_connected",
			Help: "1 while connected to the server."}),
	}
}
