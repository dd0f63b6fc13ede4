package bmp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"flowzero/internal/health"
	"flowzero/internal/lockedbuf"
	"flowzero/internal/testutil"
	"flowzero/rib"
)

// harness is a BMP server on 127.0.0.1:0 writing into a fresh RIB.
type harness struct {
	t     *testing.T
	table *rib.RIB
	srv   *Server
	reg   *prometheus.Registry
	logs  lockedbuf.Buffer
}

func newHarness(t *testing.T, tweak func(*Configuration)) *harness {
	t.Helper()
	cfg := DefaultConfiguration()
	cfg.Listen = "127.0.0.1:0"
	if tweak != nil {
		tweak(&cfg)
	}
	h := &harness{t: t, table: rib.NewTable(rib.DefaultConfiguration()), reg: prometheus.NewRegistry()}
	var err error
	h.srv, err = New(h.reg, cfg, h.table, slog.New(slog.NewTextHandler(&h.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.srv.Stop() })
	return h
}

// newPipeHarness is newHarness for a testing/synctest bubble: the server does not listen, and
// router sessions run over in-memory pipes (pipe), so that timers and deadlines follow the
// bubble's clock. It returns the end of a first router's pipe.
func newPipeHarness(t *testing.T, tweak func(*Configuration)) (*harness, net.Conn) {
	t.Helper()
	cfg := DefaultConfiguration()
	if tweak != nil {
		tweak(&cfg)
	}
	h := &harness{t: t, table: rib.NewTable(rib.DefaultConfiguration()), reg: prometheus.NewRegistry()}
	var err error
	h.srv, err = New(h.reg, cfg, h.table, slog.New(slog.NewTextHandler(&h.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.srv.Stop() })
	return h, h.pipe("192.0.2.100:40000")
}

// pipe starts a session of the router at addr over an in-memory pipe and returns the
// router's end.
func (h *harness) pipe(addr string) net.Conn {
	h.t.Helper()
	router, server := net.Pipe()
	h.srv.serveConn(server, netip.MustParseAddrPort(addr))
	h.t.Cleanup(func() { router.Close() })
	return router
}

func (h *harness) dial() net.Conn {
	h.t.Helper()
	conn, err := net.Dial("tcp", h.srv.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	return conn
}

// send writes the TCP payloads of captures segment by segment, as the router did.
func (h *harness) send(conn net.Conn, files ...string) {
	h.t.Helper()
	for _, f := range files {
		if _, err := conn.Write(captureStream(h.t, f)); err != nil {
			h.t.Fatalf("sending %s: %v", f, err)
		}
	}
}

// metric returns the sum of a metric's samples whose labels contain all of match.
func (h *harness) metric(name string, match ...string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := labelString(m)
			for _, want := range match {
				if !strings.Contains(labels, want) {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return strings.Join(parts, ",")
}

// waitMessages waits until the server has handled n messages in total (a message is counted
// once applied to the RIB).
func (h *harness) waitMessages(n float64) {
	h.t.Helper()
	testutil.WaitUntil(h.t, fmt.Sprintf("%v BMP messages handled", n), func() bool {
		return h.metric("flowzero_bmp_received_messages_total") >= n
	})
}

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	testutil.WaitUntil(h.t, what, cond)
}

// probes are the prefixes of every route in the captures.
var probes = []string{
	"192.0.2.0/31", "192.0.2.4/31", "192.0.2.6/31", "192.0.2.8/31",
	"198.51.100.0/25", "198.51.100.128/25", "198.51.100.0/26", "198.51.100.0/29",
	"2001:db8:1::/64", "2001:db8:2::/64", "2001:db8::2/127", "2001:db8::6/127", "2001:db8:4::/64",
}

// dump lists the RIB's paths as "peer%rd prefix via nexthop #pathid path [..] comm [..] large [..]".
// It fails the test if the RIB holds routes outside the probed prefixes.
func (h *harness) dump() []string {
	h.t.Helper()
	peers := h.table.Peers()
	var out []string
	for _, s := range probes {
		p := netip.MustParsePrefix(s)
		for _, pi := range h.table.Paths(lastAddr(p)) {
			if pi.Prefix != p {
				continue
			}
			pk := peers[pi.Peer]
			a := pi.Attrs
			out = append(out, fmt.Sprintf("%s%%%s %s via %s #%d path %v comm %v large %v",
				pk.Address, RD(pk.Distinguisher), p, a.NextHop, pi.PathID, a.ASPath, a.Communities, a.LargeCommunities))
		}
	}
	slices.Sort(out)
	if st := h.table.Stats(); st.Routes != len(out) {
		h.t.Errorf("RIB holds %d routes, %d probed: %v", st.Routes, len(out), out)
	}
	return out
}

func (h *harness) expectRIB(want []string) {
	h.t.Helper()
	got := h.dump()
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		h.t.Errorf("RIB:\ngot:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Routes of the Juniper vMX captures, as Akvorado's tests read them too.
var (
	routesPeer3 = []string{
		"2001:db8::3%0:0 2001:db8:1::/64 via 2001:db8::3 #0 path [65013 65013 174 174 174] comm [4260691978 4260691988] large []",
		"2001:db8::3%0:0 2001:db8:2::/64 via 2001:db8::3 #0 path [65013 65013 1299 1299 1299 12322] comm [4260691998] large []",
		"2001:db8::3%0:0 2001:db8::2/127 via 2001:db8::3 #0 path [65013] comm [] large []",
	}
	routesPeer7Unicast = []string{
		"2001:db8::7%0:0 192.0.2.6/31 via 192.0.2.7 #0 path [65017] comm [] large []",
		"2001:db8::7%0:0 2001:db8:1::/64 via 2001:db8::7 #0 path [65017 65013 174 174 174] comm [4260954122 4260954132] large [{65017 300 4}]",
		"2001:db8::7%0:0 2001:db8:2::/64 via 2001:db8::7 #0 path [65017 65017 1299 1299 1299 12322] comm [4260954142] large [{65017 400 2}]",
		"2001:db8::7%0:0 2001:db8::6/127 via 2001:db8::7 #0 path [65017] comm [] large []",
	}
	routesPeer7EVPN = []string{
		"2001:db8::7%65017:104 198.51.100.0/26 via 2001:db8::7 #0 path [65017 65017 3356 64476] comm [4260955215] large []",
	}
	routesPeer7VPN = []string{
		"2001:db8::7%65017:101 198.51.100.0/25 via 192.0.2.7 #0 path [65017 65017 174 1299 64476] comm [4260954122 4260954132] large []",
		"2001:db8::7%65017:102 198.51.100.0/25 via 192.0.2.7 #0 path [65017 65017 174 3356 3356 3356 64476] comm [4260954122 4260954132] large []",
		"2001:db8::7%65017:103 198.51.100.0/26 via 192.0.2.7 #0 path [65017 65017 3356 64476] comm [4260955215] large []",
		"2001:db8::7%65017:101 198.51.100.128/25 via 192.0.2.7 #0 path [65017 65017 174 29447 396919] comm [4260954124] large []",
		"2001:db8::7%65017:102 198.51.100.128/25 via 192.0.2.7 #0 path [65017 65017 6453 396919] comm [4260954131] large []",
		"2001:db8::7%65017:101 2001:db8:4::/64 via 2001:db8::7 #0 path [65017 65017 1299 1299 1299 29447] comm [4260954412] large []",
	}
	routesPeer1 = []string{
		"192.0.2.1%0:0 192.0.2.0/31 via 192.0.2.1 #0 path [65011] comm [] large []",
		"192.0.2.1%0:0 198.51.100.0/25 via 192.0.2.1 #0 path [65011 65011 174 1299 64476] comm [4260560906 4260560916] large []",
		"192.0.2.1%0:0 198.51.100.128/25 via 192.0.2.1 #0 path [65011 65011 174 29447 396919] comm [4260560908] large []",
	}
	routesAddPath = []string{
		"192.0.2.5%0:0 192.0.2.4/31 via 192.0.2.5 #1 path [] comm [] large []",
	}
	routesL3VPN = []string{
		"192.0.2.9%65500:108 192.0.2.8/31 via 192.0.2.9 #0 path [65019] comm [] large []",
		"192.0.2.9%65500:108 198.51.100.0/29 via 192.0.2.9 #0 path [65019 65019 64476] comm [] large []",
	}
)

func concat(ls ...[]string) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

func TestServer(t *testing.T) {
	t.Run("init-terminate", func(t *testing.T) {
		h := newHarness(t, nil)
		conn := h.dial()
		h.send(conn, "bmp-init.pcap", "bmp-terminate.pcap")
		h.waitFor("the session to close", func() bool { return h.metric("flowzero_bmp_closed_connections_total") == 1 })
		if v := h.metric("flowzero_bmp_received_messages_total", `type="initiation"`); v != 1 {
			t.Errorf("initiation messages = %v", v)
		}
		if v := h.metric("flowzero_bmp_received_messages_total", `type="termination"`); v != 1 {
			t.Errorf("termination messages = %v", v)
		}
		// The server closed the connection after the termination message.
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read after termination: %v, want EOF", err)
		}
	})

	t.Run("peers-up-eor", func(t *testing.T) {
		h := newHarness(t, nil)
		h.send(h.dial(), "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap")
		h.waitMessages(1 + 7 + 9)
		if v := h.metric("flowzero_bmp_peers"); v != 4 {
			t.Errorf("peers = %v, want 4", v)
		}
		if v := h.metric("flowzero_bmp_end_of_rib_total"); v != 8 {
			t.Errorf("end-of-RIB markers = %v, want 8", v)
		}
		if v := h.metric("flowzero_bmp_stats_rejected_prefixes", `peer="192.0.2.1"`); v != 3 {
			t.Errorf("rejected prefixes statistic of 192.0.2.1 = %v, want 3", v)
		}
		if v := h.metric("flowzero_bmp_stats_rejected_prefixes", `peer="192.0.2.5"`); v != 1 {
			t.Errorf("rejected prefixes statistic of 192.0.2.5 = %v, want 1", v)
		}
		h.expectRIB(nil)
	})

	t.Run("reach-addpath", func(t *testing.T) {
		h := newHarness(t, nil)
		h.send(h.dial(), "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap", "bmp-reach.pcap", "bmp-reach-addpath.pcap")
		h.waitMessages(1 + 7 + 9 + 17 + 1)
		h.expectRIB(concat(routesPeer3, routesPeer7Unicast, routesPeer7EVPN, routesPeer7VPN, routesPeer1, routesAddPath))
		if v := h.metric("flowzero_bmp_routes", `peer="2001:db8::7%65017:101"`); v != 3 {
			t.Errorf("routes of 2001:db8::7 in 65017:101 = %v, want 3", v)
		}
		if v := h.metric("flowzero_bmp_errors_total"); v != 0 {
			t.Errorf("errors = %v", v)
		}
	})

	t.Run("reach-without-peer-up", func(t *testing.T) {
		// Without the peer up, Add-Path is unknown: the rest is still learned.
		h := newHarness(t, nil)
		h.send(h.dial(), "bmp-init.pcap", "bmp-reach.pcap")
		h.waitMessages(1 + 17)
		h.expectRIB(concat(routesPeer3, routesPeer7Unicast, routesPeer7EVPN, routesPeer7VPN, routesPeer1))
		if v := h.metric("flowzero_bmp_peers"); v != 3 {
			t.Errorf("peers = %v, want 3", v)
		}
	})

	t.Run("peer-down", func(t *testing.T) {
		h := newHarness(t, nil)
		h.send(h.dial(), "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap", "bmp-reach.pcap", "bmp-peer-down.pcap")
		h.waitMessages(1 + 7 + 9 + 17 + 2)
		// The peer down is for 192.0.2.1: its three routes are gone at once.
		h.expectRIB(concat(routesPeer3, routesPeer7Unicast, routesPeer7EVPN, routesPeer7VPN))
		if v := h.metric("flowzero_bmp_removed_peers_total", `reason="down"`); v != 1 {
			t.Errorf("removed peers = %v", v)
		}
		if v := h.metric("flowzero_bmp_peers"); v != 3 {
			t.Errorf("peers = %v, want 3", v)
		}
	})

	t.Run("unreach", func(t *testing.T) {
		h := newHarness(t, func(c *Configuration) { c.RDs = []RD{0} })
		h.send(h.dial(), "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap", "bmp-reach.pcap", "bmp-unreach.pcap")
		h.waitMessages(1 + 7 + 9 + 17 + 8)
		h.expectRIB(nil)
		if v := h.metric("flowzero_bmp_withdrawn_prefixes_total"); v != 11 {
			t.Errorf("withdrawn prefixes = %v, want 11", v)
		}
	})

	t.Run("unreach-same-session", func(t *testing.T) {
		h := newHarness(t, nil)
		h.send(h.dial(), "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap", "bmp-reach.pcap", "bmp-unreach.pcap")
		h.waitMessages(1 + 7 + 9 + 17 + 8)
		// Every route is withdrawn but the EVPN one, which the capture announces with a
		// different RD than it withdraws (as in Akvorado's test).
		h.expectRIB(routesPeer7EVPN)
		if v := h.metric("flowzero_bmp_withdrawn_prefixes_total"); v == 0 {
			t.Error("no withdrawal counted")
		}
	})

	t.Run("rd-filter", func(t *testing.T) {
		for _, tc := range []struct {
			rds  []string
			want []string
		}{
			{[]string{"65017:104"}, routesPeer7EVPN},
			{[]string{"0:0"}, concat(routesPeer3, routesPeer7Unicast, routesPeer1)},
			{[]string{"65017:101"}, []string{routesPeer7VPN[0], routesPeer7VPN[3], routesPeer7VPN[5]}},
		} {
			t.Run(strings.Join(tc.rds, ","), func(t *testing.T) {
				h := newHarness(t, func(c *Configuration) {
					for _, s := range tc.rds {
						rd, _ := ParseRD(s)
						c.RDs = append(c.RDs, rd)
					}
				})
				h.send(h.dial(), "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap", "bmp-reach.pcap")
				h.waitMessages(1 + 7 + 9 + 17)
				h.expectRIB(tc.want)
			})
		}
	})

	t.Run("l3vpn", func(t *testing.T) {
		for _, tc := range []struct {
			rds  []RD
			want []string
		}{
			{nil, routesL3VPN},
			{[]RD{65500<<32 | 108}, routesL3VPN},
			{[]RD{65500<<32 | 110}, nil},
		} {
			t.Run(fmt.Sprint(tc.rds), func(t *testing.T) {
				h := newHarness(t, func(c *Configuration) { c.RDs = tc.rds })
				h.send(h.dial(), "bmp-init.pcap", "bmp-l3vpn.pcap")
				h.waitMessages(1 + 5)
				h.expectRIB(tc.want)
				if v := h.metric("flowzero_bmp_peers"); v != 1 {
					t.Errorf("peers = %v, want 1", v)
				}
			})
		}
	})

	t.Run("unknown-family-vpls", func(t *testing.T) {
		h := newHarness(t, nil)
		h.send(h.dial(), "bmp-init.pcap", "bmp-l3vpn.pcap", "bmp-reach-unknown-family.pcap", "bmp-reach-vpls.pcap")
		h.waitMessages(1 + 5 + 1 + 1)
		h.expectRIB(routesL3VPN)
		if v := h.metric("flowzero_bmp_ignored_nlri_total", `family="l2vpn-vpls"`); v != 1 {
			t.Errorf("ignored VPLS NLRI = %v, want 1", v)
		}
		if v := h.metric("flowzero_bmp_ignored_nlri_total", `family="afi57-safi65"`); v != 1 {
			t.Errorf("ignored NLRI of AFI 57 = %v, want 1", v)
		}
		if v := h.metric("flowzero_bmp_errors_total"); v != 0 {
			t.Errorf("errors = %v, want 0", v)
		}
	})

	t.Run("collect-nothing", func(t *testing.T) {
		h := newHarness(t, func(c *Configuration) { c.CollectASPaths, c.CollectCommunities = false, false })
		h.send(h.dial(), "bmp-init.pcap", "bmp-l3vpn.pcap")
		h.waitMessages(1 + 5)
		h.expectRIB([]string{
			"192.0.2.9%65500:108 192.0.2.8/31 via 192.0.2.9 #0 path [65019] comm [] large []",
			"192.0.2.9%65500:108 198.51.100.0/29 via 192.0.2.9 #0 path [64476] comm [] large []",
		})
	})

	t.Run("connection-down-keep", func(t *testing.T) {
		// Keep runs on the bubble's clock: on the machine's, a test slower than Keep between
		// the session's end and its check of the routes found them gone.
		synctest.Test(t, func(t *testing.T) {
			const keep = 300 * time.Millisecond
			h, conn := newPipeHarness(t, func(c *Configuration) { c.Keep = keep })
			h.send(conn, "bmp-init.pcap", "bmp-l3vpn.pcap")
			conn.Close()
			synctest.Wait()
			if v := h.metric("flowzero_bmp_closed_connections_total"); v != 1 {
				t.Fatalf("closed sessions = %v, want 1", v)
			}
			// Kept during the grace period...
			time.Sleep(keep - time.Millisecond)
			synctest.Wait()
			h.expectRIB(routesL3VPN)
			// ...then removed.
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if v := h.metric("flowzero_bmp_removed_peers_total", `reason="stale"`); v != 1 {
				t.Errorf("peers removed as stale = %v, want 1", v)
			}
			h.expectRIB(nil)
			if v := h.metric("flowzero_bmp_peers"); v != 0 {
				t.Errorf("peers = %v, want 0", v)
			}
		})
	})

	t.Run("reconnect-takes-over", func(t *testing.T) {
		h := newHarness(t, func(c *Configuration) { c.Keep = time.Hour })
		conn := h.dial()
		h.send(conn, "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-reach.pcap")
		h.waitMessages(1 + 7 + 17)
		conn.Close()
		h.waitFor("the session to close", func() bool { return h.metric("flowzero_bmp_closed_connections_total") == 1 })
		h.expectRIB(concat(routesPeer3, routesPeer7Unicast, routesPeer7EVPN, routesPeer7VPN, routesPeer1))
		// The router comes back: its routes withdrawn meanwhile are not resent, and the
		// routes kept from the old session are replaced by the new session's.
		h.send(h.dial(), "bmp-init.pcap", "bmp-l3vpn.pcap", "bmp-unreach.pcap")
		h.waitMessages(1 + 7 + 17 + 1 + 5 + 8)
		// Only the EVPN route, never withdrawn nor re-announced, is still held by the old
		// session (until Keep).
		h.expectRIB(concat(routesPeer7EVPN, routesL3VPN))
	})

	t.Run("peer-down-after-reconnect", func(t *testing.T) {
		// The router reconnects and reports a peer that went down while it was away: the
		// new session never saw that peer, the closed one still keeps its routes, and they
		// go at once rather than after Keep.
		h := newHarness(t, func(c *Configuration) { c.Keep = time.Hour })
		conn := h.dial()
		h.send(conn, "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-eor.pcap", "bmp-reach.pcap")
		h.waitMessages(1 + 7 + 9 + 17)
		conn.Close()
		h.waitFor("the session to close", func() bool { return h.metric("flowzero_bmp_closed_connections_total") == 1 })
		h.send(h.dial(), "bmp-init.pcap", "bmp-peer-down.pcap")
		h.waitMessages(1 + 7 + 9 + 17 + 1 + 2)
		// The peer down is for 192.0.2.1; the other peers' routes are kept for Keep.
		h.expectRIB(concat(routesPeer3, routesPeer7Unicast, routesPeer7EVPN, routesPeer7VPN))
		if v := h.metric("flowzero_bmp_removed_peers_total", `reason="down"`); v != 1 {
			t.Errorf("removed peers = %v, want 1", v)
		}
	})

	t.Run("health", func(t *testing.T) {
		// A router's session that ends is an event in /healthz; the server's own Stop is not.
		h := newHarness(t, nil)
		conn := h.dial()
		h.send(conn, "bmp-init.pcap", "bmp-peers-up.pcap")
		h.waitMessages(1 + 7)
		if r := h.srv.Health(); r.Status != health.OK || r.Counters["sessions"] != 1 {
			t.Errorf("health with a session up: %+v", r)
		}
		conn.Close()
		h.waitFor("the session to close", func() bool { return h.metric("flowzero_bmp_closed_connections_total") == 1 })
		r := h.srv.Health()
		if r.Status != health.Degraded || !strings.Contains(r.Reason, "BMP session of router 127.0.0.1") ||
			!strings.Contains(r.Reason, "connection closed by the router") || r.Counters["sessions-lost"] != 1 {
			t.Errorf("health after the session closed: %+v", r)
		}
		h2 := newHarness(t, nil)
		h2.send(h2.dial(), "bmp-init.pcap")
		h2.waitMessages(1)
		h2.srv.Stop()
		if r := h2.srv.Health(); r.Status != health.OK || r.Counters["sessions-lost"] != 0 {
			t.Errorf("health after Stop: %+v", r)
		}
	})

	t.Run("restored-routes", func(t *testing.T) {
		// Routes in the table when the server starts (a RIB snapshot) are kept for Keep
		// unless their router comes back. Keep runs on the bubble's clock, as in
		// connection-down-keep; the server adopts the routes as Start does before it accepts
		// (a bubble cannot hold a listening socket).
		for _, reconnect := range []bool{false, true} {
			t.Run(fmt.Sprint("reconnect=", reconnect), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h, conn := newPipeHarness(t, nil)
					h.send(conn, "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-reach.pcap")
					synctest.Wait()
					h.srv.Stop()
					const keep = 300 * time.Millisecond
					cfg := DefaultConfiguration()
					cfg.Keep = keep
					reg := prometheus.NewRegistry()
					srv, err := New(reg, cfg, h.table, slog.New(slog.NewTextHandler(io.Discard, nil)))
					if err != nil {
						t.Fatal(err)
					}
					defer srv.Stop()
					srv.adoptRestored()
					all := concat(routesPeer3, routesPeer7Unicast, routesPeer7EVPN, routesPeer7VPN, routesPeer1)
					h.expectRIB(all)
					if !reconnect {
						time.Sleep(keep)
						synctest.Wait()
						h.expectRIB(nil)
						return
					}
					router, server := net.Pipe()
					defer router.Close()
					srv.serveConn(server, netip.MustParseAddrPort("192.0.2.100:40001"))
					h.send(router, "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-reach.pcap")
					synctest.Wait()
					if n := regMessages(reg); n != 1+7+17 {
						t.Fatalf("%v messages handled, want %d", n, 1+7+17)
					}
					// The new session took every restored peer over, so nothing is left to
					// expire when Keep ends: the routes stay.
					srv.mu.Lock()
					stale := len(srv.stale)
					srv.mu.Unlock()
					if stale != 0 {
						t.Errorf("%d restored sessions not taken over", stale)
					}
					time.Sleep(keep)
					synctest.Wait()
					h.expectRIB(all)
				})
			})
		}
	})

	t.Run("first-message-not-initiation", func(t *testing.T) {
		h := newHarness(t, nil)
		h.send(h.dial(), "bmp-reach.pcap")
		h.waitFor("the connection closed", func() bool {
			return h.metric("flowzero_bmp_uninitiated_connections_total", `reason="not-initiation"`) == 1
		})
		h.expectRIB(nil)
	})

	t.Run("allowed-routers", func(t *testing.T) {
		h := newHarness(t, func(c *Configuration) { c.AllowedRouters = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")} })
		h.dial().Write(captureStream(t, "bmp-init.pcap")) // may fail: the server hangs up
		h.waitFor("the connection refused", func() bool {
			return h.metric("flowzero_bmp_refused_connections_total", `reason="not-allowed"`) == 1
		})
		h.expectRIB(nil)
		// The refused address labels no series: any host reaching the port would add some.
		if n := h.series("127.0.0.1"); n != 0 {
			t.Errorf("%d series name the refused address", n)
		}
	})

	t.Run("max-sessions", func(t *testing.T) {
		h := newHarness(t, func(c *Configuration) { c.MaxSessions = 2 })
		first := h.dial()
		h.send(first, "bmp-init.pcap")
		h.send(h.dial(), "bmp-init.pcap")
		h.waitMessages(2)
		// The third connection is closed at once, before it becomes a session.
		third := h.dial()
		third.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := third.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read on the connection beyond max-sessions: %v, want EOF", err)
		}
		if v := h.metric("flowzero_bmp_refused_connections_total", `reason="max-sessions"`); v != 1 {
			t.Errorf("refused connections = %v, want 1", v)
		}
		if v := h.metric("flowzero_bmp_opened_connections_total"); v != 2 {
			t.Errorf("opened connections = %v, want 2", v)
		}
		// A slot freed by a closed session is taken again.
		first.Close()
		h.waitFor("the session to close", func() bool { return h.metric("flowzero_bmp_closed_connections_total") == 1 })
		h.send(h.dial(), "bmp-init.pcap", "bmp-l3vpn.pcap")
		h.waitMessages(2 + 1 + 5)
		h.expectRIB(routesL3VPN)
	})

	t.Run("max-sessions-evicts-uninitiated", func(t *testing.T) {
		// Hosts that connect and say nothing fill max-sessions: a router still gets in, in
		// place of the oldest of them, until every connection is an initiated session.
		h := newHarness(t, func(c *Configuration) { c.MaxSessions = 2 })
		connections := func() int {
			h.srv.mu.Lock()
			defer h.srv.mu.Unlock()
			return len(h.srv.conns)
		}
		silent1 := h.dial()
		h.waitFor("one connection", func() bool { return connections() == 1 })
		silent2 := h.dial()
		h.waitFor("two connections", func() bool { return connections() == 2 })
		closed := func(c net.Conn) bool {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := c.Read(make([]byte, 1))
			return err == io.EOF
		}
		h.send(h.dial(), "bmp-init.pcap")
		h.waitMessages(1)
		if !closed(silent1) {
			t.Error("the oldest silent connection was not closed for the router")
		}
		h.send(h.dial(), "bmp-init.pcap", "bmp-l3vpn.pcap")
		h.waitMessages(2 + 5)
		h.expectRIB(routesL3VPN)
		if !closed(silent2) {
			t.Error("the second silent connection was not closed for the second router")
		}
		if !closed(h.dial()) {
			t.Error("a connection beyond two initiated sessions was not refused")
		}
		if v := h.metric("flowzero_bmp_uninitiated_connections_total", `reason="evicted"`); v != 2 {
			t.Errorf("evicted connections = %v, want 2", v)
		}
		if v := h.metric("flowzero_bmp_refused_connections_total", `reason="max-sessions"`); v != 1 {
			t.Errorf("refused connections = %v, want 1", v)
		}
	})

	t.Run("initiation-timeout", func(t *testing.T) {
		h := newHarness(t, func(c *Configuration) { c.InitiationTimeout = 200 * time.Millisecond })
		// The auditor's probe: a header announcing a 1 MiB initiation message, then nothing.
		conn := h.dial()
		header := []byte{Version, 0, 0, 0, 0, byte(MsgInitiation)}
		binary.BigEndian.PutUint32(header[1:5], MaxMessageLen)
		if _, err := conn.Write(header); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read while the server waits for the initiation: %v, want EOF", err)
		}
		h.waitFor("the initiation timeout", func() bool {
			return h.metric("flowzero_bmp_session_timeouts_total", `phase="initiation"`) == 1
		})
		if v := h.metric("flowzero_bmp_session_timeouts_total", `phase="idle"`); v != 0 {
			t.Errorf("idle timeouts = %v, want 0", v)
		}
	})

	t.Run("initiated-session-outlives-initiation-timeout", func(t *testing.T) {
		// Once the initiation arrived, a silent router keeps its session (no idle timeout),
		// however long it stays silent: an hour of the bubble's clock.
		synctest.Test(t, func(t *testing.T) {
			h, conn := newPipeHarness(t, func(c *Configuration) { c.InitiationTimeout, c.IdleTimeout = 100*time.Millisecond, 0 })
			h.send(conn, "bmp-init.pcap")
			synctest.Wait()
			time.Sleep(time.Hour)
			synctest.Wait()
			h.send(conn, "bmp-l3vpn.pcap")
			synctest.Wait()
			h.expectRIB(routesL3VPN)
			if v := h.metric("flowzero_bmp_session_timeouts_total"); v != 0 {
				t.Errorf("timeouts = %v, want 0", v)
			}
			if v := h.metric("flowzero_bmp_closed_connections_total"); v != 0 {
				t.Errorf("closed sessions = %v, want 0", v)
			}
		})
	})

	t.Run("idle-timeout", func(t *testing.T) {
		// On the bubble's clock: on the machine's, a test slower than the idle timeout
		// between two captures' messages had the session end before the second.
		synctest.Test(t, func(t *testing.T) {
			const idle = 300 * time.Millisecond
			h, conn := newPipeHarness(t, func(c *Configuration) { c.IdleTimeout = idle })
			h.send(conn, "bmp-init.pcap", "bmp-l3vpn.pcap")
			time.Sleep(idle - time.Millisecond)
			synctest.Wait()
			if v := h.metric("flowzero_bmp_closed_connections_total"); v != 0 {
				t.Errorf("closed sessions before the idle timeout = %v, want 0", v)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if v := h.metric("flowzero_bmp_received_messages_total"); v != 1+5 {
				t.Errorf("messages = %v, want 6", v)
			}
			if v := h.metric("flowzero_bmp_closed_connections_total"); v != 1 {
				t.Errorf("closed sessions = %v, want 1", v)
			}
			if v := h.metric("flowzero_bmp_session_timeouts_total", `phase="idle"`); v != 1 {
				t.Errorf("idle timeouts = %v, want 1", v)
			}
			// Its routes are kept like those of any session that dropped.
			h.expectRIB(routesL3VPN)
		})
	})
}

// TestUninitiatedConnections checks that connections ending before their initiation message
// are counted without their address: any host reaching the port would otherwise leave series
// behind, while a router's session still gets its own. It runs on a testing/synctest bubble's
// clock: on the machine's, a test slower than the initiation timeout between opening a
// connection and closing it or writing to it had it end as timed out.
func TestUninitiatedConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 200 * time.Millisecond
		h, closed := newPipeHarness(t, func(c *Configuration) { c.InitiationTimeout = timeout })
		closed.Close()
		broken := h.pipe("127.0.0.1:40001")
		broken.Write(captureStream(t, "bmp-init.pcap")[:CommonHeaderLen+2])
		broken.Close()
		h.pipe("127.0.0.1:40002").Write(captureStream(t, "bmp-reach.pcap")) // fails once the server hangs up
		h.pipe("127.0.0.1:40003")                                           // sends nothing
		synctest.Wait()
		if v := h.metric("flowzero_bmp_uninitiated_connections_total"); v != 3 {
			t.Errorf("uninitiated connections before the timeout: %v, want 3", v)
		}
		time.Sleep(timeout)
		synctest.Wait()
		if v := h.metric("flowzero_bmp_session_timeouts_total", `phase="initiation"`); v != 1 {
			t.Errorf("initiation timeouts: %v, want 1", v)
		}
		for _, reason := range []string{"closed", "broken", "not-initiation"} {
			if v := h.metric("flowzero_bmp_uninitiated_connections_total", `reason="`+reason+`"`); v != 1 {
				t.Errorf("uninitiated connections, %s: %v, want 1", reason, v)
			}
		}
		perRouter := []string{
			"flowzero_bmp_opened_connections_total", "flowzero_bmp_closed_connections_total",
			"flowzero_bmp_received_messages_total", "flowzero_bmp_errors_total", "flowzero_bmp_peers",
		}
		if n, err := promtest.GatherAndCount(h.reg, perRouter...); err != nil || n != 0 {
			t.Errorf("per-router series after uninitiated connections: %d (%v), want 0", n, err)
		}
		if n := h.series("127.0.0.1") + h.series("192.0.2.100"); n != 0 {
			t.Errorf("%d series name the address of uninitiated connections", n)
		}
		if logs := h.logs.String(); strings.Contains(logs, `"BMP session up"`) || strings.Contains(logs, `"BMP session down"`) {
			t.Errorf("uninitiated connections logged as sessions:\n%s", logs)
		}

		h.send(h.pipe("127.0.0.1:40004"), "bmp-init.pcap", "bmp-l3vpn.pcap", "bmp-terminate.pcap")
		synctest.Wait()
		want := `
# HELP flowzero_bmp_opened_connections_total BMP sessions opened: connections whose initiation message was accepted.
# TYPE flowzero_bmp_opened_connections_total counter
flowzero_bmp_opened_connections_total{router="127.0.0.1"} 1
# HELP flowzero_bmp_closed_connections_total BMP sessions closed after their initiation message.
# TYPE flowzero_bmp_closed_connections_total counter
flowzero_bmp_closed_connections_total{router="127.0.0.1"} 1
`
		if err := promtest.GatherAndCompare(h.reg, strings.NewReader(want),
			"flowzero_bmp_opened_connections_total", "flowzero_bmp_closed_connections_total"); err != nil {
			t.Error(err)
		}
		if v := h.metric("flowzero_bmp_received_messages_total", `router="127.0.0.1"`); v != 1+5+1 {
			t.Errorf("messages = %v, want 7", v)
		}
		if v := h.metric("flowzero_bmp_received_messages_total", `router="127.0.0.1"`, `type="initiation"`); v != 1 {
			t.Errorf("initiation messages = %v, want 1", v)
		}
		if v := h.metric("flowzero_bmp_peers", `router="127.0.0.1"`); v != 1 {
			t.Errorf("peers = %v, want 1", v)
		}
		h.expectRIB(routesL3VPN)
		for _, line := range []string{`msg="BMP session up" component=bmp router=127.0.0.1:`, `msg="BMP session down" component=bmp router=127.0.0.1:`} {
			if !strings.Contains(h.logs.String(), line) {
				t.Errorf("log lacks %s", line)
			}
		}
	})
}

// series counts the gathered series having a label value containing s.
func (h *harness) series(s string) int {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), s) {
					n++
				}
			}
		}
	}
	return n
}

// lastAddr returns the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// regMessages sums the BMP messages handled according to a registry.
func regMessages(reg *prometheus.Registry) float64 {
	var sum float64
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "flowzero_bmp_received_messages_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// withPostPolicy returns the messages of the captures with the L flag (post-policy) set on the
// per-peer header of the messages of the given types.
func withPostPolicy(t *testing.T, types []MessageType, files ...string) []byte {
	t.Helper()
	var out []byte
	for _, f := range files {
		for _, m := range readAll(t, captureStream(t, f)) {
			h, _ := ParseCommonHeader(m)
			if slices.Contains(types, h.Type) {
				m[CommonHeaderLen+1] |= PeerFlagL
			}
			out = append(out, m...)
		}
	}
	return out
}

// TestAdjRIBInView replays the captures (pre-policy) with the L flag set on every per-peer
// header, as a router sending post-policy Adj-RIB-In would, and checks the view filter.
func TestAdjRIBInView(t *testing.T) {
	post := withPostPolicy(t, []MessageType{MsgPeerUp, MsgRouteMonitoring}, "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-reach.pcap")
	pre := append(captureStream(t, "bmp-init.pcap"), append(captureStream(t, "bmp-peers-up.pcap"), captureStream(t, "bmp-reach.pcap")...)...)
	for _, tc := range []struct {
		view      string
		pre, post int // routes learned from each stream
	}{
		{"any", 17, 17},
		{"pre-policy", 17, 0},
		{"post-policy", 0, 17},
	} {
		t.Run(tc.view, func(t *testing.T) {
			for _, s := range []struct {
				stream []byte
				want   int
				isPost bool
			}{{pre, tc.pre, false}, {post, tc.post, true}} {
				c, table := newOfflineSession(t, func(cfg *Configuration) { cfg.AdjRIBIn = tc.view })
				c.run(bytes.NewReader(s.stream))
				if got := table.Stats().Routes; got != s.want {
					t.Errorf("post-policy=%v: %d routes, want %d", s.isPost, got, s.want)
				}
				for _, p := range table.Peers() {
					if p.PostPolicy != s.isPost {
						t.Errorf("peer %s registered with PostPolicy=%v", p.Address, p.PostPolicy)
					}
				}
			}
		})
	}
}

// TestPostPolicyAddPath checks that post-policy route monitoring is parsed with the Add-Path
// families the BGP session negotiated: routers send one peer up per session (L=0), whichever
// views they monitor.
func TestPostPolicyAddPath(t *testing.T) {
	for _, post := range []bool{false, true} {
		t.Run(fmt.Sprint("post-policy=", post), func(t *testing.T) {
			c, table := newOfflineSession(t, nil)
			var types []MessageType
			if post {
				types = []MessageType{MsgRouteMonitoring}
			}
			s := withPostPolicy(t, types, "bmp-init.pcap", "bmp-peers-up.pcap", "bmp-reach-addpath.pcap")
			c.run(bytes.NewReader(s))
			(&harness{t: t, table: table}).expectRIB(routesAddPath)
			for _, p := range table.Peers() {
				if p.Routes > 0 && p.PostPolicy != post {
					t.Errorf("peer %s holds routes with PostPolicy=%v", p.Address, p.PostPolicy)
				}
			}
		})
	}
}

// TestPeerDownBothViews checks that a peer down (L=0, one per BGP session) removes the
// routes of both Adj-RIB-In views of the peer.
func TestPeerDownBothViews(t *testing.T) {
	c, table := newOfflineSession(t, nil) // adj-rib-in: any
	var s []byte
	s = append(s, captureStream(t, "bmp-init.pcap")...)
	s = append(s, captureStream(t, "bmp-peers-up.pcap")...)
	s = append(s, captureStream(t, "bmp-reach.pcap")...)
	s = append(s, withPostPolicy(t, []MessageType{MsgRouteMonitoring}, "bmp-reach.pcap")...)
	c.run(bytes.NewReader(s))
	if got := table.Stats().Routes; got != 2*17 {
		t.Fatalf("routes of both views: %d, want %d", got, 2*17)
	}
	views := len(c.peers)
	down := netip.MustParseAddr("192.0.2.1")
	negotiated := func() (n int) {
		for k := range c.negotiated {
			if k.addr == down {
				n++
			}
		}
		return n
	}
	if n := negotiated(); n != 1 {
		t.Fatalf("negotiated states of %s before its peer down: %d, want 1 for both views", down, n)
	}
	s = append(captureStream(t, "bmp-init.pcap"), captureStream(t, "bmp-peer-down.pcap")...) // 192.0.2.1, L=0
	c.run(bytes.NewReader(s))
	if got := table.Stats().Routes; got != 2*(17-len(routesPeer1)) {
		t.Errorf("routes after the peer down: %d, want %d", got, 2*(17-len(routesPeer1)))
	}
	for _, p := range table.Peers() {
		if p.Address == down && p.Routes != 0 {
			t.Errorf("after the peer down of %s: RIB peer (post-policy=%v) holds %d routes", down, p.PostPolicy, p.Routes)
		}
	}
	if n := len(c.peers); n != views-2 {
		t.Errorf("session peer views after the peer down: %d, want %d", n, views-2)
	}
	if n := negotiated(); n != 0 {
		t.Errorf("negotiated state of %s kept after its peer down", down)
	}
}
