package console

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	// rejected counts API requests refused, by reason (see rejectReasons).
	rejected *prometheus.CounterVec
	// writes counts the rewrites of the views file, by result (ok, error).
	writes *prometheus.CounterVec
	// assets counts the requests for the pages, by kind (index, asset, not-modified,
	// not-found, method).
	assets *prometheus.CounterVec
	views  prometheus.GaugeFunc
	broken prometheus.GaugeFunc
}

// rejectReasons are the label values of flowzero_console_rejected_total.
var rejectReasons = []string{
	"no-request-header", "no-user", "bad-user", "body-too-large", "invalid-json",
	"invalid-view", "too-many-views", "not-found", "not-owner",
}

func newMetrics(r prometheus.Registerer, store *viewStore) (*metrics, error) {
	m := &metrics{
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_console_rejected_total",
			Help: "Console API requests refused, by reason (no-request-header, no-user, bad-user, body-too-large, invalid-json, invalid-view, too-many-views, not-found, not-owner).",
		}, []string{"reason"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_console_views_writes_total",
			Help: "Rewrites of the saved views file, by result (ok, error).",
		}, []string{"result"}),
		assets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowzero_console_page_requests_total",
			Help: "Requests for the console's pages and assets, by kind (index, asset, not-modified, not-found, method).",
		}, []string{"kind"}),
		views: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_console_views",
			Help: "Saved views served.",
		}, func() float64 { n, _ := store.counts(); return float64(n) }),
		broken: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_console_views_unreadable",
			Help: "Records of the saved views file that no migration reads (kept in the file, not served).",
		}, func() float64 { _, n := store.counts(); return float64(n) }),
	}
	// Every label value exists from the start, so that rates work before the first event.
	for _, reason := range rejectReasons {
		m.rejected.WithLabelValues(reason)
	}
	for _, result := range []string{"ok", "error"} {
		m.writes.WithLabelValues(result)
	}
	for _, kind := range []string{"index", "asset", "not-modified", "not-found", "method"} {
		m.assets.WithLabelValues(kind)
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.rejected, m.writes, m.assets, m.views, m.broken} {
			if err := r.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
