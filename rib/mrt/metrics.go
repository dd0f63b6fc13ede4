package mrt

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the loader's Prometheus counters, shared by every load of a process (pass them
// in Options). Stats tell one load; these tell an operator that a dump file was damaged.
type Metrics struct {
	corrupt prometheus.Counter
}

// NewMetrics returns the loader's counters registered on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		corrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "flowzero", Subsystem: "mrt", Name: "corrupt_records_total",
			Help: "MRT records skipped because they are malformed, and files whose framing broke (the rest of the file is not read).",
		}),
	}
	if reg != nil {
		if err := reg.Register(m.corrupt); err != nil {
			return nil, err
		}
	}
	return m, nil
}
