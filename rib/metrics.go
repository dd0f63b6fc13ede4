package rib

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are updated by writers and read by the metrics collectors.
type counters struct {
	adds, withdraws, peerRemovals atomic.Uint64
	snapshotSaves, snapshotErrors atomic.Uint64
}

// registerMetrics registers the RIB's metrics on reg. Gauges read the table at scrape time.
func (r *RIB) registerMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_rib_prefixes", Help: "Prefixes in the lookup table.",
			ConstLabels: prometheus.Labels{"family": "ipv4"},
		}, func() float64 { return float64(r.cur.Load().Size4()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_rib_prefixes", Help: "Prefixes in the lookup table.",
			ConstLabels: prometheus.Labels{"family": "ipv6"},
		}, func() float64 { return float64(r.cur.Load().Size6()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_rib_routes", Help: "Paths over all prefixes and peers.",
		}, func() float64 { return float64(r.Stats().Routes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_rib_attribute_sets", Help: "Distinct interned attribute sets.",
		}, func() float64 { return float64(r.Stats().AttributeSets) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flowzero_rib_peers", Help: "Registered peers.",
		}, func() float64 { return float64(r.Stats().Peers) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flowzero_rib_adds_total", Help: "Paths added or replaced.",
		}, func() float64 { return float64(r.stats.adds.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flowzero_rib_withdraws_total", Help: "Paths withdrawn.",
		}, func() float64 { return float64(r.stats.withdraws.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flowzero_rib_peer_removals_total", Help: "Peers whose routes were all removed.",
		}, func() float64 { return float64(r.stats.peerRemovals.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flowzero_rib_snapshot_saves_total", Help: "Snapshots written.",
		}, func() float64 { return float64(r.stats.snapshotSaves.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flowzero_rib_snapshot_errors_total", Help: "Snapshots that failed to save or load.",
		}, func() float64 { return float64(r.stats.snapshotErrors.Load()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
