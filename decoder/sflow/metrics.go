package sflow

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// reason is an error (or drop) reason, a label value of flowzero_sflow_errors_total.
type reason uint8

const (
	reasonNone reason = iota
	reasonTruncatedDatagram
	reasonBadVersion
	reasonBadAgentAddress
	reasonTruncatedSample
	reasonTruncatedRecord
	reasonBadAddress
	reasonHeaderTruncated
	reasonHeaderBadIP
	reasonHeaderMPLS
	reasonNotEncapsulated
	reasonTrailingBytes
	reasonHeaderLength
	reasonHeaderTooDeep
	reasonCount
)

var reasonNames = [reasonCount]string{
	reasonTruncatedDatagram: "truncated-datagram",
	reasonBadVersion:        "bad-version",
	reasonBadAgentAddress:   "bad-agent-address",
	reasonTruncatedSample:   "truncated-sample",
	reasonTruncatedRecord:   "truncated-record",
	reasonBadAddress:        "bad-address",
	reasonHeaderTruncated:   "header-truncated",
	reasonHeaderBadIP:       "header-bad-ip",
	reasonHeaderMPLS:        "header-mpls-payload",
	reasonNotEncapsulated:   "not-encapsulated",
	reasonTrailingBytes:     "trailing-bytes",
	reasonHeaderLength:      "header-longer-than-frame",
	reasonHeaderTooDeep:     "header-too-deep",
}

// sampleType is a label value of flowzero_sflow_samples_total.
type sampleType uint8

const (
	sampleFlow sampleType = iota
	sampleExpandedFlow
	sampleCounters
	sampleExpandedCounters
	sampleDiscard
	sampleOther
	sampleTypeCount
)

var sampleTypeNames = [sampleTypeCount]string{"flow", "expanded-flow", "counters", "expanded-counters", "discard", "other"}

// metrics are the decoder's Prometheus vectors.
type metrics struct {
	packets        *prometheus.CounterVec
	flows          *prometheus.CounterVec
	samples        *prometheus.CounterVec
	skippedRecords *prometheus.CounterVec
	errors         *prometheus.CounterVec
	agents         prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	labels := []string{"exporter", "agent"}
	m := &metrics{
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "sflow", Name: "packets_total",
			Help: "sFlow datagrams received, by exporter (UDP source) and agent.",
		}, labels),
		flows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "sflow", Name: "flows_total",
			Help: "Flows decoded and emitted, by exporter and agent.",
		}, labels),
		samples: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "sflow", Name: "samples_total",
			Help: "Samples received, by exporter, agent and type (counter samples are only counted).",
		}, append(labels, "type")),
		skippedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "sflow", Name: "skipped_records_total",
			Help: "Flow records not decoded (unsupported or enterprise formats, other header protocols), by exporter and agent.",
		}, labels),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "sflow", Name: "errors_total",
			Help: "Decoding errors and dropped samples, by exporter, agent and reason.",
		}, append(labels, "reason")),
		agents: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "flowzero", Subsystem: "sflow", Name: "agents",
			Help: "(exporter, agent) pairs with their own metrics (bounded by max-agents).",
		}),
	}
	if r == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.packets, m.flows, m.samples, m.skippedRecords, m.errors, m.agents} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// agentKey identifies the source of a datagram: the exporter is the UDP source address,
// the agent the address inside the datagram (several agents may share an exporter).
type agentKey struct {
	exporter, agent netip.Addr
}

// agentState holds the metric handles of one agent. Packets, flows and skipped records are
// resolved when the state is created; per-type and per-reason handles on first use, so that
// an agent does not export a zero series for every reason.
type agentState struct {
	m               *metrics
	exporter, agent string
	packets, flows  prometheus.Counter
	skippedRecords  prometheus.Counter
	samples         [sampleTypeCount]atomic.Pointer[prometheus.Counter]
	errors          [reasonCount]atomic.Pointer[prometheus.Counter]
	// details is what ExporterDetails reports (sub-agents, data sources, sampling rates).
	details agentDetails
}

func (m *metrics) newAgentState(exporter, agent string) *agentState {
	return &agentState{
		m:              m,
		exporter:       exporter,
		agent:          agent,
		packets:        m.packets.WithLabelValues(exporter, agent),
		flows:          m.flows.WithLabelValues(exporter, agent),
		skippedRecords: m.skippedRecords.WithLabelValues(exporter, agent),
	}
}

func (a *agentState) sample(t sampleType) prometheus.Counter {
	if c := a.samples[t].Load(); c != nil {
		return *c
	}
	c := a.m.samples.WithLabelValues(a.exporter, a.agent, sampleTypeNames[t])
	a.samples[t].Store(&c)
	return c
}

func (a *agentState) error(r reason) prometheus.Counter {
	if c := a.errors[r].Load(); c != nil {
		return *c
	}
	c := a.m.errors.WithLabelValues(a.exporter, a.agent, reasonNames[r])
	a.errors[r].Store(&c)
	return c
}

// agentTable maps (exporter, agent) to their state, bounded in size.
type agentTable struct {
	mu     sync.RWMutex
	states map[agentKey]*agentState
	max    int
	// overflow collects, per exporter, the agents beyond max (agent label "other"); it is
	// bounded by max as well, after which one shared state takes everything.
	overflow map[netip.Addr]*agentState
	shared   *agentState
}

const (
	agentUnknown = "unknown" // the datagram ended before its agent address
	agentOther   = "other"   // max-agents reached
)

// get returns the state of (exporter, agent), creating it if needed. An invalid agent
// means the datagram's agent address could not be read.
func (t *agentTable) get(m *metrics, key agentKey) *agentState {
	t.mu.RLock()
	s := t.states[key]
	t.mu.RUnlock()
	if s != nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.states[key]; s != nil {
		return s
	}
	exporter := key.exporter.String()
	if len(t.states) < t.max {
		agent := agentUnknown
		if key.agent.IsValid() {
			agent = key.agent.String()
		}
		s = m.newAgentState(exporter, agent)
		t.states[key] = s
		m.agents.Set(float64(len(t.states)))
		return s
	}
	if s := t.overflow[key.exporter]; s != nil {
		return s
	}
	if len(t.overflow) < t.max {
		s = m.newAgentState(exporter, agentOther)
		t.overflow[key.exporter] = s
		return s
	}
	if t.shared == nil {
		t.shared = m.newAgentState(agentOther, agentOther)
	}
	return t.shared
}
