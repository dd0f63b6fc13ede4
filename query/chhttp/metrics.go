package chhttp

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a request, the result label of flowzero_query_clickhouse_http_requests_total.
const (
	resultOK           = "ok"
	resultBad          = "bad-request"  // refused: not a SELECT, a setting, a parameter, too large
	resultUnauthorized = "unauthorized" // wrong user or password
	resultBusy         = "busy"         // more statements at once than allowed
	resultFailed       = "failed"       // the engine failed the statement (or timed out)
)

type metrics struct {
	requests map[string]prometheus.Counter
	duration prometheus.Observer
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_query_clickhouse_http_requests_total",
		Help: "Statements received over ClickHouse's HTTP protocol, by result (ok, bad-request, unauthorized, busy, failed).",
	}, []string{"result"})
	duration := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "flowzero_query_clickhouse_http_duration_seconds",
		Help:    "Time to answer a statement received over ClickHouse's HTTP protocol, answered ones only.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
	})
	for _, c := range []prometheus.Collector{requests, duration} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	m := &metrics{requests: map[string]prometheus.Counter{}, duration: duration}
	for _, res := range []string{resultOK, resultBad, resultUnauthorized, resultBusy, resultFailed} {
		m.requests[res] = requests.WithLabelValues(res)
	}
	return m, nil
}

// done counts a request by result; d is its duration when answered (0 otherwise).
func (m *metrics) done(result string, d time.Duration) {
	m.requests[result].Inc()
	if d > 0 {
		m.duration.Observe(d.Seconds())
	}
}
