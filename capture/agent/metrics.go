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
	// connectErrors counts failed connections and ended streams per reason.
	connectErrors [numConnReasons]prometheus.Counter
}

func newMetrics(r prometheus.Registerer) *metrics {
	f := promauto.With(r)
	drops := f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_agent_drops_total",
		Help: "Packets dropped, per cause (kernel: the capture ring; agent: the send buffer was full or the agent stopped before sending)."}, []string{"cause"})
	errs := f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_agent_connection_errors_total",
		Help: "Connections to the server that failed, and streams that ended on an error, per reason (dial, tls, server-not-tls, no-welcome, tls-required, unauthorized, busy, refused, stream)."}, []string{"reason"})
	m := &metrics{
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
	for r := range numConnReasons {
		m.connectErrors[r] = errs.WithLabelValues(connReasonNames[r])
	}
	return m
}

// connReason is why a connection to the server failed or a stream ended.
type connReason uint8

const (
	connDial         connReason = iota // the TCP connection failed
	connTLS                            // the TLS handshake failed (certificates...)
	connServerNotTLS                   // the agent uses TLS, the server does not
	connNoWelcome                      // no welcome, or not a welcome, after the hello
	connTLSRequired                    // the server requires TLS, the agent does not use it
	connUnauthorized                   // the server refused the token
	connBusy                           // max-agents connected on the server
	connRefused                        // another refusal (version, malformed hello, compression)
	connStream                         // a stream ended on an error
	numConnReasons
)

var connReasonNames = [numConnReasons]string{
	connDial: "dial", connTLS: "tls", connServerNotTLS: "server-not-tls", connNoWelcome: "no-welcome",
	connTLSRequired: "tls-required", connUnauthorized: "unauthorized", connBusy: "busy",
	connRefused: "refused", connStream: "stream",
}
