package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// serverMetrics are the server's metric vectors; handles per agent live in agentMetrics so
// that the per-packet path never looks labels up.
type serverMetrics struct {
	packets     *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	drops       *prometheus.CounterVec
	reconnects  *prometheus.CounterVec
	frames      *prometheus.CounterVec
	connections prometheus.Gauge
	// errors counts per reason (see connlog.go); the server holds a handle per reason.
	errors *prometheus.CounterVec
	// outputsWaiting counts FIFO outputs without a reader, whose agents' frames wait.
	outputsWaiting prometheus.Gauge
}

func newServerMetrics(r prometheus.Registerer) *serverMetrics {
	f := promauto.With(r)
	m := &serverMetrics{
		packets: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_server_packets_total",
			Help: "Packets written out to the output, per agent."}, []string{"agent"}),
		bytes: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_server_bytes_total",
			Help: "Captured bytes written, per agent."}, []string{"agent"}),
		drops: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_server_drops_total",
			Help: "Packets dropped, per agent and cause (kernel and agent as reported by the agent; server: malformed frames, unknown interfaces, failed writes)."}, []string{"agent", "cause"}),
		reconnects: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_server_reconnects_total",
			Help: "Connections of an agent after its first one."}, []string{"agent"}),
		frames: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_server_frames_total",
			Help: "Frames received, per agent."}, []string{"agent"}),
		connections: f.NewGauge(prometheus.GaugeOpts{Name: "flowzero_capture_server_connections",
			Help: "Agent connections open."}),
		errors: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_server_errors_total",
			Help: "Refused connections, stream errors and dropped parts of streams, per reason (docs/design/capture.md lists them)."}, []string{"reason"}),
		outputsWaiting: f.NewGauge(prometheus.GaugeOpts{Name: "flowzero_capture_server_outputs_waiting",
			Help: "FIFO outputs that no reader has opened; their agents' frames wait."}),
	}
	return m
}

// agentMetrics holds one agent's metric handles on the server.
type agentMetrics struct {
	packets, bytes, frames, reconnects prometheus.Counter
	dropKernel, dropAgent, dropServer  prometheus.Counter
}

func (m *serverMetrics) forAgent(name string) agentMetrics {
	return agentMetrics{
		packets:    m.packets.WithLabelValues(name),
		bytes:      m.bytes.WithLabelValues(name),
		frames:     m.frames.WithLabelValues(name),
		reconnects: m.reconnects.WithLabelValues(name),
		dropKernel: m.drops.WithLabelValues(name, "kernel"),
		dropAgent:  m.drops.WithLabelValues(name, "agent"),
		dropServer: m.drops.WithLabelValues(name, "server"),
	}
}

// forget deletes the series of an agent name.
func (m *serverMetrics) forget(name string) {
	for _, v := range []*prometheus.CounterVec{m.packets, m.bytes, m.frames, m.reconnects} {
		v.DeleteLabelValues(name)
	}
	m.drops.DeletePartialMatch(prometheus.Labels{"agent": name})
}
