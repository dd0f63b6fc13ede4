package snmp

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	hits, misses  prometheus.Counter
	queued        prometheus.Counter
	queueFull     prometheus.Counter
	refreshes     prometheus.Counter
	exportersFull prometheus.Counter
	entries       prometheus.Gauge
	loads         prometheus.Counter
	loadErrors    prometheus.Counter
	saveErrors    prometheus.Counter

	polls, errors, breakerTrips *prometheus.CounterVec
	tooBig, badAnswers          *prometheus.CounterVec
	breakerOpen                 *prometheus.GaugeVec
	seconds                     *prometheus.HistogramVec
}

// exporterMetrics are one exporter's handles, resolved once.
type exporterMetrics struct {
	polls, errors, breakerTrips prometheus.Counter
	tooBig, badAnswers          prometheus.Counter
	breakerOpen                 prometheus.Gauge
	seconds                     prometheus.Observer
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "flowzero", Subsystem: "enrich_snmp", Name: name, Help: help})
	}
	perExporter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flowzero", Subsystem: "enrich_snmp", Name: name, Help: help}, []string{"exporter"})
	}
	m := &metrics{
		hits:          counter("cache_hits_total", "Lookups answered from the cache."),
		misses:        counter("cache_misses_total", "Lookups of interfaces the cache does not hold: the flow goes on without SNMP data and the interface is queued for a poll."),
		queued:        counter("polls_queued_total", "Interfaces queued for a poll (misses and refreshes)."),
		queueFull:     counter("queue_full_total", "Interfaces not queued because queue-size interfaces were already waiting (asked again later)."),
		refreshes:     counter("cache_refreshes_total", "Interfaces in use queued again because their answer was older than cache-refresh."),
		exportersFull: counter("exporters_full_total", "Lookups for a new exporter refused because the cache tracks 4096 exporters."),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flowzero", Subsystem: "enrich_snmp", Name: "cache_entries",
			Help: "Interfaces in the cache."}),
		loads:        counter("cache_loads_total", "Cache files read at start."),
		loadErrors:   counter("cache_load_errors_total", "Cache files, or entries in them, that could not be read."),
		saveErrors:   counter("cache_save_errors_total", "Failed saves of the cache file (retried at the next check and at stop)."),
		polls:        perExporter("polls_total", "Requests answered by the exporter's agent."),
		errors:       perExporter("poll_errors_total", "Requests that failed (timeout after the retries, refused credentials, error status), by exporter."),
		breakerTrips: perExporter("breaker_trips_total", "Times the exporter's circuit breaker opened."),
		tooBig:       perExporter("too_big_total", "Requests the exporter's agent answered tooBig (the answer does not fit in its message size): the request's interfaces are asked again in requests half as large, down to one interface, which is then a failed poll."),
		badAnswers:   perExporter("bad_answers_total", "Interfaces (or sysNames) the exporter's agent answered with values of the wrong type, or left out of its answer: the previous answer is kept and asked again later."),
		breakerOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "flowzero", Subsystem: "enrich_snmp", Name: "breaker_open",
			Help: "1 while the exporter's circuit breaker is open: its agent did not answer breaker-failures polls in a row, and is not polled until the cooldown ends."}, []string{"exporter"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "flowzero", Subsystem: "enrich_snmp", Name: "poll_seconds",
			Help:    "Time to poll an exporter's agent (retries included).",
			Buckets: []float64{0.001, 0.005, 0.02, 0.1, 0.5, 2, 10}}, []string{"exporter"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.hits, m.misses, m.queued, m.queueFull, m.refreshes, m.exportersFull,
			m.entries, m.loads, m.loadErrors, m.saveErrors, m.polls, m.errors, m.breakerTrips, m.tooBig, m.badAnswers, m.breakerOpen, m.seconds} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) forExporter(exporter string) exporterMetrics {
	return exporterMetrics{
		polls:        m.polls.WithLabelValues(exporter),
		errors:       m.errors.WithLabelValues(exporter),
		breakerTrips: m.breakerTrips.WithLabelValues(exporter),
		tooBig:       m.tooBig.WithLabelValues(exporter),
		badAnswers:   m.badAnswers.WithLabelValues(exporter),
		breakerOpen:  m.breakerOpen.WithLabelValues(exporter),
		seconds:      m.seconds.WithLabelValues(exporter),
	}
}

// deleteExporter removes the series of a forgotten exporter.
func (m *metrics) deleteExporter(exporter string) {
	for _, v := range []*prometheus.MetricVec{m.polls.MetricVec, m.errors.MetricVec, m.breakerTrips.MetricVec, m.tooBig.MetricVec,
		m.badAnswers.MetricVec, m.breakerOpen.MetricVec, m.seconds.MetricVec} {
		v.DeleteLabelValues(exporter)
	}
}
