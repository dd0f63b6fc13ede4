package networks

import (
	"net/netip"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counterStripes spreads the per-flow counters over several cache lines, picked by the
// flow's source address, so that workers on different cores rarely write the same line.
const counterStripes = 4

// metrics of the enricher. Per flow it costs one atomic add: counts holds, per stripe, one
// counter per combination of the sources that gave the source address's attributes (3
// bits) and the destination's (3 bits); the hit and miss counters per source are summed
// from them when scraped.
type metrics struct {
	counts [counterStripes]struct {
		c [64]atomic.Uint64
	}
	builds     prometheus.Counter
	dropped    prometheus.Counter
	lookups    *prometheus.Desc
	sourceVecs struct {
		errors, updates, invalid *prometheus.CounterVec
		entries                  *prometheus.GaugeVec
	}
	e *Enricher
}

type sourceMetrics struct {
	errors, updates, invalid prometheus.Counter
	entries                  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, e *Enricher) *metrics {
	m := &metrics{e: e}
	m.builds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flowzero_networks_builds_total", Help: "Network attribute tables built (at start and when a source or GeoIP database changed)."})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flowzero_networks_dropped_values_total", Help: "Attribute values left out of the flows' columns at a table build, all the values of an address being too long together (counted at each build)."})
	m.lookups = prometheus.NewDesc("flowzero_networks_lookups_total",
		"Flow addresses looked up, by source of network attributes (networks, network-sources, geoip): hit when that source gave the address an attribute.",
		[]string{"source", "result"}, nil)
	m.sourceVecs.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_network_sources_errors_total", Help: "Network source fetches or cached copies that failed (the previous entries stay)."}, []string{"source"})
	m.sourceVecs.updates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_network_sources_updates_total", Help: "Network source answers that changed the entries."}, []string{"source"})
	m.sourceVecs.invalid = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flowzero_network_sources_invalid_entries_total", Help: "Network source entries skipped (no or bad prefix, bad country, AS number or VRF)."}, []string{"source"})
	m.sourceVecs.entries = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "flowzero_network_sources_entries", Help: "Entries of each network source in use."}, []string{"source"})
	prefixes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flowzero_networks_prefixes", Help: "Prefixes of the merged network attribute table (all sources and VRFs)."},
		func() float64 { return float64(e.table.Load().prefixes) })
	records := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flowzero_networks_records", Help: "Distinct resolved attribute records of the merged table."},
		func() float64 { return float64(e.table.Load().leaves) })
	if reg != nil {
		reg.MustRegister(m.builds, m.dropped, prefixes, records, (*lookupCollector)(m), m.sourceVecs.errors,
			m.sourceVecs.updates, m.sourceVecs.invalid, m.sourceVecs.entries)
	}
	return m
}

func (m *metrics) source(name string) *sourceMetrics {
	return &sourceMetrics{
		errors:  m.sourceVecs.errors.WithLabelValues(name),
		updates: m.sourceVecs.updates.WithLabelValues(name),
		invalid: m.sourceVecs.invalid.WithLabelValues(name),
		entries: m.sourceVecs.entries.WithLabelValues(name),
	}
}

// count records one flow: seen is the source address's sources of attributes (fromXxx bits)
// shifted by 3, or'ed with the destination's.
func (m *metrics) count(src netip.Addr, seen uint8) {
	m.counts[src.As16()[15]%counterStripes].c[seen&63].Add(1)
}

// hits returns, per source bit, the address lookups it answered and those it did not.
func (m *metrics) hits() (hit, miss [3]uint64) {
	for s := range m.counts {
		for combo := range m.counts[s].c {
			n := m.counts[s].c[combo].Load()
			if n == 0 {
				continue
			}
			for _, from := range []uint8{uint8(combo >> 3), uint8(combo & 7)} {
				for bit := range 3 {
					if from&(1<<bit) != 0 {
						hit[bit] += n
					} else {
						miss[bit] += n
					}
				}
			}
		}
	}
	return hit, miss
}

type lookupCollector metrics

var lookupSources = [3]string{"networks", "network-sources", "geoip"}

func (c *lookupCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.lookups }

func (c *lookupCollector) Collect(ch chan<- prometheus.Metric) {
	hit, miss := (*metrics)(c).hits()
	for i, name := range lookupSources {
		ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(hit[i]), name, "hit")
		ch <- prometheus.MustNewConstMetric(c.lookups, prometheus.CounterValue, float64(miss[i]), name, "miss")
	}
}
