package httpapi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a request failed, the reason label of flowzero_query_errors_total.
const (
	reasonBadRequest = "bad-request" // 400: bad JSON, field or filter
	reasonTooLarge   = "body-too-large"
	reasonMethod     = "method"
	reasonNotFound   = "not-found"
	reasonBusy       = "busy"    // 429: more queries than max-concurrent + max-queued
	reasonTimeout    = "timeout" // 504
	reasonMemory     = "memory"  // 503: the query needed more than max-memory
	reasonEngine     = "engine"  // 500: the engine failed
	reasonCanceled   = "canceled"
	reasonCount      = 9
)

var reasons = [reasonCount]string{reasonBadRequest, reasonTooLarge, reasonMethod, reasonNotFound, reasonBusy,
	reasonTimeout, reasonMemory, reasonEngine, reasonCanceled}

// routeMetrics are the metric handles of one route, held so that a request looks nothing up.
type routeMetrics struct {
	requests  prometheus.Counter
	cacheHits prometheus.Counter
	duration  prometheus.Observer
	errors    map[string]prometheus.Counter
}

type metrics struct {
	routes  map[string]*routeMetrics
	running prometheus.Gauge
	queued  prometheus.Gauge
}

func newMetrics(r prometheus.Registerer, routes []string) (*metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_query_requests_total",
		Help: "Query API requests, by route.",
	}, []string{"route"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_query_errors_total",
		Help: "Query API requests that failed, by route and reason (bad-request, body-too-large, method, not-found, busy, timeout, memory, engine, canceled).",
	}, []string{"route", "reason"})
	hits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_query_cache_hits_total",
		Help: "Query API requests answered from the cache (or by a query running for the same request), by route.",
	}, []string{"route"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flowzero_query_duration_seconds",
		Help:    "Time to answer a query API request, by route.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.3, 1, 3, 10, 30},
	}, []string{"route"})
	m := &metrics{
		routes: map[string]*routeMetrics{},
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flowzero_query_running",
			Help: "Query API requests running in the engine.",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flowzero_query_queued",
			Help: "Query API requests waiting for their turn (query.max-concurrent).",
		}),
	}
	for _, route := range routes {
		rm := &routeMetrics{requests: requests.WithLabelValues(route), cacheHits: hits.WithLabelValues(route),
			duration: duration.WithLabelValues(route), errors: map[string]prometheus.Counter{}}
		for _, reason := range reasons {
			rm.errors[reason] = errs.WithLabelValues(route, reason)
		}
		m.routes[route] = rm
	}
	if r != nil {
		for _, c := range []prometheus.Collector{requests, errs, hits, duration, m.running, m.queued} {
			if err := r.Register(c); err != nil {
				return nil, fmt.Errorf("httpapi: %w", err)
			}
		}
	}
	return m, nil
}
