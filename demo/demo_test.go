package demo

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/netflow"
	"flowzero/internal/clock"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

type decoded struct {
	src, dst         netip.Addr
	srcPort, dstPort uint64
	bytes, packets   uint64
	srcAS, dstAS     uint32
	rate             uint64
	proto            uint64
}

func decodeAll(t *testing.T, s *schema.Schema, fn func(emit func(*schema.FlowMessage))) []decoded {
	var out []decoded
	fn(func(fm *schema.FlowMessage) {
		d := decoded{src: fm.SrcAddr, dst: fm.DstAddr, srcAS: fm.SrcAS, dstAS: fm.DstAS, rate: fm.SamplingRate}
		msg := fm.Finalize()
		_, n := binary.Uvarint(msg)
		err := s.DecodeMessage(msg[n:], func(c *schema.Column, v any) {
			switch c.Key {
			case schema.ColumnSrcPort:
				d.srcPort = v.(uint64)
			case schema.ColumnDstPort:
				d.dstPort = v.(uint64)
			case schema.ColumnBytes:
				d.bytes = v.(uint64)
			case schema.ColumnPackets:
				d.packets = v.(uint64)
			case schema.ColumnProto:
				d.proto = v.(uint64)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	})
	return out
}

// TestNetFlowRoundTrip encodes generated traffic as NetFlow v9 and IPFIX and decodes it with
// flowzero's decoder: every flow comes back with its addresses, ports, counters, AS numbers
// and the sampling rate announced in the options records.
func TestNetFlowRoundTrip(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	for _, ipfix := range []bool{false, true} {
		name := map[bool]string{false: "netflow-v9", true: "ipfix"}[ipfix]
		t.Run(name, func(t *testing.T) {
			dec, err := netflow.New(prometheus.NewRegistry(), netflow.DefaultConfiguration(), s)
			if err != nil {
				t.Fatal(err)
			}
			now := testutil.Now().Truncate(time.Second)
			enc := &NetFlowEncoder{IPFIX: ipfix, SourceID: 7, SamplingRate: 512, TemplateRefresh: 3, Boot: now.Add(-time.Hour)}
			g := NewGenerator(42)
			var flows []Flow
			for range 400 {
				flows = append(flows, g.Next(now))
			}
			fm := s.NewFlowMessage()
			exporter := netip.MustParseAddrPort("192.0.2.1:50000")
			got := decodeAll(t, s, func(emit func(*schema.FlowMessage)) {
				rest := flows
				for len(rest) > 0 {
					pkt, n := enc.Encode(nil, rest, now, 1400)
					if len(pkt) > 1400 || n == 0 {
						t.Fatalf("datagram of %d bytes with %d flows", len(pkt), n)
					}
					rest = rest[n:]
					if err := dec.Decode(netflow.Packet{Payload: pkt, Exporter: exporter, TimeReceived: now}, fm, emit); err != nil {
						t.Fatal(err)
					}
				}
			})
			if len(got) != len(flows) {
				t.Fatalf("decoded %d flows, want %d", len(got), len(flows))
			}
			for i, f := range flows {
				want := decoded{f.Src, f.Dst, uint64(f.SrcPort), uint64(f.DstPort), f.Bytes, f.Packets, f.SrcAS, f.DstAS, 512, uint64(f.Proto)}
				if got[i] != want {
					t.Fatalf("flow %d: got %+v, want %+v", i, got[i], want)
				}
			}
		})
	}
}

// TestRunClock: the exporters date their datagrams and flows by the configured clock, here
// ten years ahead of the machine's.
func TestRunClock(t *testing.T) {
	s, err := schema.New(schema.Configuration{Enabled: []string{"TimeFlowStart", "TimeFlowEnd"}})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := netflow.New(prometheus.NewRegistry(), netflow.DefaultConfiguration(), s)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const ahead = 10 * 365 * 24 * time.Hour
	clk := clock.Offset(time.Until(testutil.Now().Add(ahead)))
	cfg := DefaultConfiguration()
	cfg.NetFlow, cfg.IPFIX, cfg.SFlow = conn.LocalAddr().(*net.UDPAddr).AddrPort(), netip.AddrPort{}, netip.AddrPort{}
	cfg.FlowsPerSecond, cfg.Clock = 100, clk
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := Run(ctx, cfg); done <- err }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	before := clk.Now()
	buf := make([]byte, 65536)
	fm := s.NewFlowMessage()
	var ends []uint64
	for i := 0; len(ends) == 0; i++ {
		if i == 100 {
			t.Fatal("100 datagrams and no flow with an end time")
		}
		conn.SetReadDeadline(time.Now().Add(testutil.WaitTimeout))
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		err = dec.Decode(netflow.Packet{Payload: buf[:n], Exporter: from, TimeReceived: clk.Now()}, fm, func(fm *schema.FlowMessage) {
			msg := fm.Finalize()
			_, k := binary.Uvarint(msg)
			s.DecodeMessage(msg[k:], func(c *schema.Column, v any) {
				if c.Key == schema.ColumnTimeFlowEnd {
					ends = append(ends, v.(uint64))
				}
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	after := clk.Now()
	for _, end := range ends {
		if end < uint64(before.Unix()) || end > uint64(after.Unix())+1 {
			t.Fatalf("flow ending at %s, want between %s and %s (the demo's clock)",
				time.Unix(int64(end), 0).UTC(), before.UTC(), after.UTC())
		}
	}
}

func TestGeneratorMix(t *testing.T) {
	g := NewGenerator(1)
	now := testutil.Now()
	hosts := map[netip.Addr]bool{}
	ases := map[uint32]int{}
	v6 := 0
	for range 5000 {
		f := g.Next(now)
		hosts[f.Src] = true
		hosts[f.Dst] = true
		ases[f.SrcAS]++
		if f.Src.Is6() {
			v6++
		}
		if f.Bytes == 0 || f.Packets == 0 || f.Bytes < f.Packets*40 {
			t.Fatalf("implausible counters %+v", f)
		}
	}
	if len(ases) < 8 || v6 < 500 || v6 > 1500 {
		t.Fatalf("poor mix: %d ASes, %d IPv6 flows of 5000", len(ases), v6)
	}
	if _, ok := ases[LocalAS]; !ok {
		t.Fatal("no upload flows")
	}
	g.Diurnal = true
	day := testutil.Now().UTC().Truncate(24 * time.Hour)
	night := g.Scale(day.Add(3 * time.Hour))
	evening := g.Scale(day.Add(21 * time.Hour))
	if night >= evening || night < 0.2 {
		t.Fatalf("diurnal shape: 03:00 %.2f, 21:00 %.2f", night, evening)
	}
}
