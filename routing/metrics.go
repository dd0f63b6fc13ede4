package routing

import "github.com/prometheus/client_golang/prometheus"

// metrics are the component's own series; the RIB, the BMP listener and the MRT loader
// register theirs (flowzero_rib_*, flowzero_bmp_*, flowzero_mrt_*).
type metrics struct {
	mrtEntries *prometheus.GaugeVec // file
	mrtSeconds *prometheus.GaugeVec // file
	mrtExpired prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		mrtEntries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowzero_routing_mrt_entries",
			Help: "RIB entries (TABLE_DUMP) and UPDATE messages (BGP4MP) applied from each MRT dump loaded at start.",
		}, []string{"file"}),
		mrtSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flowzero_routing_mrt_load_seconds",
			Help: "Time taken to load each MRT dump at start.",
		}, []string{"file"}),
		mrtExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_routing_mrt_removed_peers_total",
			Help: "MRT peers whose routes were removed when mrt-keep ended (BMP alone feeds the RIB from then on).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.mrtEntries, m.mrtSeconds, m.mrtExpired} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
