package bmp

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/rib"
)

// metrics are the BMP listener's Prometheus collectors. Handles are resolved once per router
// (session, from its initiation message on) and per peer and kept in their state, never
// looked up per message.
type metrics struct {
	opened         *prometheus.CounterVec
	closed         *prometheus.CounterVec
	messages       *prometheus.CounterVec
	errors         *prometheus.CounterVec
	peers          *prometheus.GaugeVec
	routes         *routesCollector
	announced      *prometheus.CounterVec
	withdrawn      *prometheus.CounterVec
	endOfRIB       *prometheus.CounterVec
	adjRIBIn       *prometheus.GaugeVec
	rejected       *prometheus.GaugeVec
	ignoredNLRI    *prometheus.CounterVec
	ignoredUpdates *prometheus.CounterVec
	removedPeers   *prometheus.CounterVec
	// Connections refused, ended before their initiation message or closed for silence
	// carry no router label: their source addresses are whatever reaches the port, so only
	// the rate-limited log names them.
	refusedNotAllowed        prometheus.Counter
	refusedMaxSessions       prometheus.Counter
	uninitiatedClosed        prometheus.Counter
	uninitiatedBroken        prometheus.Counter
	uninitiatedNotInitiation prometheus.Counter
	uninitiatedEvicted       prometheus.Counter
	initiationTimeouts       prometheus.Counter
	idleTimeouts             prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, table *rib.RIB) (*metrics, error) {
	const ns, sub = "flowzero", "bmp"
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, labels)
	}
	m := &metrics{
		opened:   counter("opened_connections_total", "BMP sessions opened: connections whose initiation message was accepted.", "router"),
		closed:   counter("closed_connections_total", "BMP sessions closed after their initiation message.", "router"),
		messages: counter("received_messages_total", "BMP messages received by type.", "router", "type"),
		errors:   counter("errors_total", "Malformed BMP messages and broken sessions, by reason.", "router", "reason"),
		peers:    gauge("peers", "BGP peers currently known (stale ones included until removed).", "router"),
		routes: &routesCollector{table: table, desc: prometheus.NewDesc(ns+"_"+sub+"_routes",
			"Routes held in the RIB for a BMP peer (per route distinguisher for VPN routes).",
			[]string{"router", "peer"}, nil)},
		announced:      counter("announced_prefixes_total", "Prefixes announced by the peer and kept.", "router", "peer"),
		withdrawn:      counter("withdrawn_prefixes_total", "Prefixes withdrawn by the peer.", "router", "peer"),
		endOfRIB:       counter("end_of_rib_total", "End-of-RIB markers received (RFC 4724), one per family.", "router", "peer"),
		adjRIBIn:       gauge("stats_adj_rib_in_routes", "Routes in the peer's Adj-RIB-In as reported by the router's statistics (type 7).", "router", "peer"),
		rejected:       gauge("stats_rejected_prefixes", "Prefixes rejected by the peer's inbound policy as reported by the router's statistics (type 0).", "router", "peer"),
		ignoredNLRI:    counter("ignored_nlri_total", "NLRI skipped because their family is not decoded.", "router", "family"),
		ignoredUpdates: counter("ignored_updates_total", "Route monitoring messages skipped, by reason.", "router", "reason"),
		removedPeers:   counter("removed_peers_total", "Peers whose routes were removed, by reason.", "router", "reason"),
	}
	refused := counter("refused_connections_total", "Connections closed at accept, by reason (not-allowed, max-sessions).", "reason")
	m.refusedNotAllowed = refused.WithLabelValues("not-allowed")
	m.refusedMaxSessions = refused.WithLabelValues("max-sessions")
	uninitiated := counter("uninitiated_connections_total", "Connections that ended before their initiation message, by reason (closed, broken, not-initiation, evicted: closed at max-sessions for a newer connection); those that timed out are in session_timeouts_total.", "reason")
	m.uninitiatedClosed = uninitiated.WithLabelValues("closed")
	m.uninitiatedBroken = uninitiated.WithLabelValues("broken")
	m.uninitiatedNotInitiation = uninitiated.WithLabelValues("not-initiation")
	m.uninitiatedEvicted = uninitiated.WithLabelValues("evicted")
	timeouts := counter("session_timeouts_total", "Sessions closed because the router sent nothing in time: no initiation message within initiation-timeout, or nothing within idle-timeout.", "phase")
	m.initiationTimeouts = timeouts.WithLabelValues("initiation")
	m.idleTimeouts = timeouts.WithLabelValues("idle")
	for _, c := range []prometheus.Collector{refused, uninitiated, timeouts, m.opened, m.closed, m.messages, m.errors, m.peers, m.routes,
		m.announced, m.withdrawn, m.endOfRIB, m.adjRIBIn, m.rejected, m.ignoredNLRI, m.ignoredUpdates, m.removedPeers} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// routerMetrics are the handles of one router (label value: its address).
type routerMetrics struct {
	messages [MsgRouteMirroring + 2]prometheus.Counter // last slot: unknown types
	peers    prometheus.Gauge
	closed   prometheus.Counter
}

func (m *metrics) forRouter(router string) *routerMetrics {
	rm := &routerMetrics{
		peers:  m.peers.WithLabelValues(router),
		closed: m.closed.WithLabelValues(router),
	}
	for i := range rm.messages {
		rm.messages[i] = m.messages.WithLabelValues(router, MessageType(i).String())
	}
	m.opened.WithLabelValues(router).Inc()
	return rm
}

func (rm *routerMetrics) message(t MessageType) {
	if int(t) >= len(rm.messages)-1 {
		t = MessageType(len(rm.messages) - 1)
	}
	rm.messages[t].Inc()
}

// peerMetrics are the handles of one peer of one router.
type peerMetrics struct {
	announced prometheus.Counter
	withdrawn prometheus.Counter
	endOfRIB  prometheus.Counter
	adjRIBIn  prometheus.Gauge
	rejected  prometheus.Gauge
}

func (m *metrics) forPeer(router, peer string) peerMetrics {
	return peerMetrics{
		announced: m.announced.WithLabelValues(router, peer),
		withdrawn: m.withdrawn.WithLabelValues(router, peer),
		endOfRIB:  m.endOfRIB.WithLabelValues(router, peer),
		adjRIBIn:  m.adjRIBIn.WithLabelValues(router, peer),
		rejected:  m.rejected.WithLabelValues(router, peer),
	}
}

// routesCollector reports the RIB's per-peer route counts at scrape time for the peers BMP
// registered (those with a router address), so no counter is touched per route.
type routesCollector struct {
	table *rib.RIB
	desc  *prometheus.Desc
}

func (rc *routesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- rc.desc }

func (rc *routesCollector) Collect(ch chan<- prometheus.Metric) {
	seen := make(map[[2]string]bool)
	for _, p := range rc.table.Peers() {
		if !p.Router.IsValid() || p.Routes == 0 {
			continue
		}
		label := p.Address.String()
		if p.Distinguisher != 0 {
			label += "%" + RD(p.Distinguisher).String()
		}
		if p.PostPolicy {
			label += " post-policy"
		}
		k := [2]string{p.Router.String(), label}
		if seen[k] {
			k[1] = fmt.Sprintf("%s AS%d", label, p.AS)
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(rc.desc, prometheus.GaugeValue, float64(p.Routes), k[0], k[1])
	}
}
