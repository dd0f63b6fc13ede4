package demo

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"flowzero/internal/clock"
)

// Configuration of the demo exporters.
type Configuration struct {
	// NetFlow, IPFIX and SFlow are the collector addresses to send each protocol to; an
	// invalid (zero) address disables that exporter.
	NetFlow, IPFIX, SFlow netip.AddrPort
	// FlowsPerSecond is the rate of each exporter.
	FlowsPerSecond int
	// SamplingRate announced by the exporters.
	SamplingRate uint32
	// Diurnal shapes the rate by time of day.
	Diurnal bool
	// Seed makes the traffic reproducible.
	Seed uint64
	// Clock gives the time flows end at and the exporters' boot time (clock.System{} when
	// nil); the sending pace follows the machine's clock.
	Clock clock.Clock
}

// DefaultConfiguration sends to the collector's default ports on loopback.
func DefaultConfiguration() Configuration {
	lo := netip.MustParseAddr("127.0.0.1")
	return Configuration{
		NetFlow:        netip.AddrPortFrom(lo, 2055),
		IPFIX:          netip.AddrPortFrom(lo, 4739),
		SFlow:          netip.AddrPortFrom(lo, 6343),
		FlowsPerSecond: 500,
		SamplingRate:   1000,
		Seed:           1,
	}
}

// Stats counts what the exporters sent.
type Stats struct {
	Datagrams, Flows int
}

type encoder interface {
	Encode(dst []byte, flows []Flow, now time.Time, maxSize int) ([]byte, int)
}

// Run sends traffic until ctx is done.
func Run(ctx context.Context, cfg Configuration) (Stats, error) {
	var st Stats
	clk := clock.Or(cfg.Clock)
	boot := clk.Now().Add(-72 * time.Hour)
	type exporter struct {
		conn *net.UDPConn
		enc  encoder
		gen  *Generator
	}
	var exps []*exporter
	defer func() {
		for _, e := range exps {
			e.conn.Close()
		}
	}()
	add := func(to netip.AddrPort, enc encoder, seed uint64) error {
		if !to.IsValid() {
			return nil
		}
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
		if err != nil {
			return fmt.Errorf("demo exporter to %s: %w", to, err)
		}
		g := NewGenerator(seed)
		g.Diurnal = cfg.Diurnal
		exps = append(exps, &exporter{conn: c, enc: enc, gen: g})
		return nil
	}
	if err := add(cfg.NetFlow, &NetFlowEncoder{SourceID: 1, SamplingRate: cfg.SamplingRate, TemplateRefresh: 100, Boot: boot}, cfg.Seed); err != nil {
		return st, err
	}
	if err := add(cfg.IPFIX, &NetFlowEncoder{IPFIX: true, SourceID: 2, SamplingRate: cfg.SamplingRate, TemplateRefresh: 100, Boot: boot}, cfg.Seed+1); err != nil {
		return st, err
	}
	if err := add(cfg.SFlow, &SFlowEncoder{Agent: netip.MustParseAddr("192.0.2.3"), SamplingRate: cfg.SamplingRate, Boot: boot}, cfg.Seed+2); err != nil {
		return st, err
	}
	const tick = 100 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	var buf []byte
	flows := make([]Flow, 0, 1024)
	carry := make([]float64, len(exps))
	for {
		select {
		case <-ctx.Done():
			return st, nil
		case <-t.C:
			now := clk.Now()
			for i, e := range exps {
				want := float64(cfg.FlowsPerSecond)*tick.Seconds()*e.gen.Scale(now) + carry[i]
				n := int(want)
				carry[i] = want - float64(n)
				flows = flows[:0]
				for range n {
					flows = append(flows, e.gen.Next(now))
				}
				for len(flows) > 0 {
					var used int
					buf, used = e.enc.Encode(buf[:0], flows, now, 1400)
					if used == 0 {
						return st, fmt.Errorf("demo: a flow does not fit in a datagram")
					}
					flows = flows[used:]
					if _, err := e.conn.Write(buf); err == nil {
						st.Datagrams++
						st.Flows += used
					}
				}
			}
		}
	}
}
