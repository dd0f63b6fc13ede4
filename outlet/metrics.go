package outlet

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	datagrams, invalid, flows, commits, units, pendingDropped prometheus.Counter
	pauses, waitTimeouts                                      prometheus.Counter
	decodeErrors, errors, replayed, clockAhead                *prometheus.CounterVec
	held, ready, paused                                       prometheus.Gauge
}

func newMetrics(r prometheus.Registerer, _ *Outlet) (*metrics, error) {
	m := &metrics{
		datagrams: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_datagrams_total",
			Help: "Datagrams consumed from the datagrams topic (a batch record holds several)."}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_invalid_records_total",
			Help: "Datagrams of the datagrams topic that cannot be read, skipped: an entry of a batch record that does not parse, or the rest of a record whose framing fails."}),
		flows: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_flows_total",
			Help: "Flows decoded and handed to the sinks."}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_commits_total",
			Help: "Offset commits, each after the sinks acknowledged the flows of the committed datagrams."}),
		units: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_units_total",
			Help: "Units (a partition's flows of an offset range) inserted into the unit sinks (the store output), each with its deduplication token."}),
		pendingDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_pending_dropped_total",
			Help: "Data sets dropped from the pending buffer without their template (also in the NetFlow decoder's metrics)."}),
		pauses: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_pauses_total",
			Help: "Times a partition stopped at a NetFlow/IPFIX datagram whose data sets have no template yet and do not fit in the pending buffer."}),
		waitTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "flowzero_outlet_wait_timeouts_total",
			Help: "Datagrams decoded after waiting outlet.template-wait for a template (their data sets that did not fit in the pending buffer were dropped, counted by the NetFlow decoder as pending-full)."}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flowzero_outlet_paused_partitions",
			Help: "Partitions stopped at a datagram waiting for a template; their offsets are not committed past it."}),
		decodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_outlet_decode_errors_total",
			Help: "Datagrams that did not decode, by protocol."}, []string{"protocol"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_outlet_errors_total",
			Help: "Errors by operation: fetch, acknowledge (a sink failed: the partitions are read again from the committed offsets), commit, plan (the units' ranges of the partitions assigned could not be read)."},
			[]string{"op"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_outlet_units_replayed_total",
			Help: "Units cut again at a range recorded before (after a crash or a rewind) by what the store held of their flows: none (inserted with a new token), some (logged as an error: flows may be missing) or all (inserted with their token, which stores only what the aggregated tables lack)."},
			[]string{"held"}),
		clockAhead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_outlet_clock_ahead_total",
			Help: "Datagrams and state records whose receive time was more than a minute ahead of this outlet's clock (a wrong clock, or a record written by someone else), taken with the outlet's time instead, by kind: datagram, state."},
			[]string{"kind"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flowzero_outlet_held_sets",
			Help: "Data sets waiting for their template in the pending buffer; their datagrams' offsets are not committed."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flowzero_outlet_ready",
			Help: "1 once the decoder state topic was read and the outlet consumes datagrams."}),
	}
	for _, op := range []string{"fetch", "acknowledge", "commit", "plan"} {
		m.errors.WithLabelValues(op)
	}
	for _, held := range []string{"none", "some", "all"} {
		m.replayed.WithLabelValues(held)
	}
	for _, kind := range []string{"datagram", "state"} {
		m.clockAhead.WithLabelValues(kind)
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.datagrams, m.invalid, m.flows, m.commits, m.units, m.pendingDropped, m.pauses, m.waitTimeouts, m.decodeErrors, m.errors, m.replayed, m.clockAhead, m.held, m.ready, m.paused} {
			if err := r.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
