package bmp

import (
	"bytes"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/testutil"
	"flowzero/rib"
)

var captures = []string{
	"bmp-init.pcap", "bmp-terminate.pcap", "bmp-peers-up.pcap", "bmp-peer-down.pcap", "bmp-eor.pcap",
	"bmp-reach.pcap", "bmp-reach-addpath.pcap", "bmp-reach-unknown-family.pcap", "bmp-reach-vpls.pcap",
	"bmp-l3vpn.pcap", "bmp-unreach.pcap",
}

// newOfflineSession returns a session applying streams to a fresh RIB, without a socket.
func newOfflineSession(tb testing.TB, tweak func(*Configuration)) (*session, *rib.RIB) {
	tb.Helper()
	cfg := DefaultConfiguration()
	if tweak != nil {
		tweak(&cfg)
	}
	table := rib.NewTable(rib.DefaultConfiguration())
	srv, err := New(prometheus.NewRegistry(), cfg, table, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	c := newSession(srv, nil, netip.MustParseAddrPort("192.0.2.254:40000"))
	// As initiated already, so that messages handled without run (or after a stream that
	// run refused) find the router's metrics.
	c.metrics = srv.metrics.forRouter(c.routerStr)
	return c, table
}

// FuzzBMPMessage feeds arbitrary streams to a BMP session: framing, per-peer headers, peer
// up OPEN capabilities, statistics, route monitoring UPDATEs down to the RIB. Malformed
// input must be counted, never panic.
func FuzzBMPMessage(f *testing.F) {
	initMsg := captureStream(f, "bmp-init.pcap")
	for _, c := range captures {
		f.Add(captureStream(f, c))
		if c != "bmp-init.pcap" {
			f.Add(append(bytes.Clone(initMsg), captureStream(f, c)...))
		}
	}
	f.Add(append(append(bytes.Clone(initMsg), captureStream(f, "bmp-peers-up.pcap")...), captureStream(f, "bmp-reach-addpath.pcap")...))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, table := newOfflineSession(t, nil)
		c.run(bytes.NewReader(data))
		// Every message alone too, so that the initiation check does not hide the rest.
		r := NewReader(bytes.NewReader(data))
		for {
			h, msg, err := r.Next()
			if err != nil {
				break
			}
			c.handle(h, msg[CommonHeaderLen:])
		}
		c.removeAllPeers("fuzz")
		if st := table.Stats(); st.Routes != 0 {
			t.Fatalf("%d routes left after removing every peer", st.Routes)
		}
	})
}

// BenchmarkRouteMonitoring applies the 17 route monitoring messages of bmp-reach.pcap (30
// routes of every family) to the RIB; after the first round they replace identical paths.
func BenchmarkRouteMonitoring(b *testing.B) {
	c, _ := newOfflineSession(b, nil)
	c.run(bytes.NewReader(append(captureStream(b, "bmp-init.pcap"), captureStream(b, "bmp-peers-up.pcap")...)))
	msgs := readAll(b, captureStream(b, "bmp-reach.pcap"))
	hs := make([]CommonHeader, len(msgs))
	for i, m := range msgs {
		hs[i], _ = ParseCommonHeader(m)
	}
	cpu := testutil.StartCPU(b)
	for b.Loop() {
		for i, m := range msgs {
			if _, err := c.handle(hs[i], m[CommonHeaderLen:]); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu.Stop(b)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}
