package netflow

import (
	"github.com/prometheus/client_golang/prometheus"
)

// reason is an error (or drop) reason, a label value of flowzero_netflow_errors_total.
type reason uint8

const (
	reasonNone reason = iota
	reasonTruncatedHeader
	reasonBadVersion
	reasonBadLength
	reasonBadSet
	reasonBadTemplate
	reasonTruncatedRecord
	reasonTemplateNotFound
	reasonTooManyTemplates
	reasonTooManyFields
	reasonPendingFull
	reasonPendingExpired
	reasonDataLink
	reasonTooManySamplers // counted, not returned: the record itself is fine
	reasonStaleTemplate   // counted, not returned: a newer definition is kept (SetObserver)
	reasonCount
)

var reasonNames = [reasonCount]string{
	reasonTruncatedHeader:  "truncated-header",
	reasonBadVersion:       "bad-version",
	reasonBadLength:        "bad-length",
	reasonBadSet:           "bad-set",
	reasonBadTemplate:      "bad-template",
	reasonTruncatedRecord:  "truncated-record",
	reasonTemplateNotFound: "template-not-found",
	reasonTooManyTemplates: "too-many-templates",
	reasonTooManyFields:    "too-many-fields",
	reasonPendingFull:      "pending-full",
	reasonPendingExpired:   "pending-expired",
	reasonDataLink:         "datalink-section",
	reasonTooManySamplers:  "too-many-samplers",
	reasonStaleTemplate:    "stale-template",
}

const (
	verV5 = iota
	verV9
	verIPFIX
	verCount
)

var versionNames = [verCount]string{"5", "9", "10"}

const (
	tplData = iota
	tplOptions
	tplWithdrawn
	tplCount
)

var templateKinds = [tplCount]string{"template", "options-template", "withdrawal"}

// metrics are the decoder's Prometheus vectors; exporterMetrics holds the per-exporter
// handles resolved once when an exporter session is created.
type metrics struct {
	packets         *prometheus.CounterVec
	flows           *prometheus.CounterVec
	errors          *prometheus.CounterVec
	templates       *prometheus.CounterVec
	pending         *prometheus.CounterVec
	samplers        *prometheus.CounterVec
	sessions        prometheus.Gauge
	sessionsDropped prometheus.Counter
	sessionsEvicted *prometheus.CounterVec
	evicted         [evictReasonCount]prometheus.Counter
	saveErrors      prometheus.Counter
}

// evictReason is why a session was evicted, a label value of
// flowzero_netflow_exporter_sessions_evicted_total.
type evictReason uint8

const (
	evictIdle evictReason = iota
	evictNotEstablished
	evictReasonCount
)

var evictReasonNames = [evictReasonCount]string{"idle", "not-established"}

type exporterMetrics struct {
	packets   [verCount]prometheus.Counter
	flows     prometheus.Counter
	errors    [reasonCount]prometheus.Counter
	templates [tplCount]prometheus.Counter
	pending   prometheus.Counter
	samplers  prometheus.Counter
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "packets_total",
			Help: "NetFlow/IPFIX datagrams received, by exporter and version.",
		}, []string{"exporter", "version"}),
		flows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "flows_total",
			Help: "Flows decoded and emitted, by exporter.",
		}, []string{"exporter"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "errors_total",
			Help: "Decoding errors and dropped data, by exporter and reason.",
		}, []string{"exporter", "reason"}),
		templates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "templates_total",
			Help: "Templates learned or changed (refreshes with identical content are not counted) and withdrawals, by exporter and kind.",
		}, []string{"exporter", "kind"}),
		pending: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "pending_sets_total",
			Help: "Data sets kept because their template was not known yet, by exporter.",
		}, []string{"exporter"}),
		samplers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "sampling_rates_total",
			Help: "Sampling rates learned or changed from options records, by exporter.",
		}, []string{"exporter"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "exporter_sessions",
			Help: "Exporter transport sessions (address, source port) with state in memory.",
		}),
		sessionsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "exporter_sessions_dropped_total",
			Help: "Datagrams dropped because max-exporters sessions already exist.",
		}),
		sessionsEvicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "exporter_sessions_evicted_total",
			Help: "Exporter sessions evicted to make room for a new one when max-exporters was reached: idle for session-idle-timeout, or not established (fewer than two datagrams, or no valid template or flow yet).",
		}, []string{"reason"}),
		saveErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "netflow", Name: "templates_save_errors_total",
			Help: "Failed saves of the templates file (retried while templates change, and at stop).",
		}),
	}
	for i := range m.evicted {
		m.evicted[i] = m.sessionsEvicted.WithLabelValues(evictReasonNames[i])
	}
	if r == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.packets, m.flows, m.errors, m.templates, m.pending, m.samplers, m.sessions, m.sessionsDropped, m.sessionsEvicted, m.saveErrors} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forExporter resolves every handle of one exporter (called once per session).
func (m *metrics) forExporter(exporter string) exporterMetrics {
	var em exporterMetrics
	for i := range em.packets {
		em.packets[i] = m.packets.WithLabelValues(exporter, versionNames[i])
	}
	em.flows = m.flows.WithLabelValues(exporter)
	for i := reasonNone + 1; i < reasonCount; i++ {
		em.errors[i] = m.errors.WithLabelValues(exporter, reasonNames[i])
	}
	for i := range em.templates {
		em.templates[i] = m.templates.WithLabelValues(exporter, templateKinds[i])
	}
	em.pending = m.pending.WithLabelValues(exporter)
	em.samplers = m.samplers.WithLabelValues(exporter)
	return em
}

// deleteExporter removes every series of an exporter address (its last session was
// evicted).
func (m *metrics) deleteExporter(exporter string) {
	l := prometheus.Labels{"exporter": exporter}
	for _, v := range []*prometheus.CounterVec{m.packets, m.flows, m.errors, m.templates, m.pending, m.samplers} {
		v.DeletePartialMatch(l)
	}
}
