package geoip

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	reloads prometheus.Counter
	errors  prometheus.Counter
	invalid prometheus.Counter
}

func newMetrics(r prometheus.Registerer, d *Databases) *metrics {
	m := &metrics{
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_geoip_reloads_total", Help: "GeoIP databases read (at start and when a file changed)."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_geoip_errors_total", Help: "GeoIP database files that could not be read (missing, truncated, corrupt)."}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flowzero_geoip_invalid_values_total", Help: "GeoIP values left out at load, once per record and load: a country that is not two letters, a state or city longer than 256 bytes."}),
	}
	networks := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flowzero_geoip_networks", Help: "Networks of the loaded GeoIP databases, merged."},
		func() float64 { return float64(d.Layer().Size()) })
	records := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "flowzero_geoip_records", Help: "Distinct records (country, state, city, AS) of the loaded GeoIP databases."},
		func() float64 {
			if l := d.Layer(); l != nil {
				return float64(l.Records)
			}
			return 0
		})
	if r != nil {
		r.MustRegister(m.reloads, m.errors, m.invalid, networks, records)
	}
	return m
}
