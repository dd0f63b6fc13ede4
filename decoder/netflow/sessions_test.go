package netflow

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/schema"
)

// TestSpoofedSessions (issue #24, 9): once max-exporters is filled by spoofed sources (one
// datagram each, or datagrams without anything valid), a real exporter that comes next
// still gets a session: the least recently active of the sessions that are not established
// (two datagrams and a template or a flow) is evicted and counted. Established exporters
// are never evicted for a newcomer before session-idle-timeout.
func TestSpoofedSessions(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.MaxExporters = 8
	d, _ := newTestDecoder(t, cfg, s)
	fm := s.NewFlowMessage()
	now := testTime
	decode := func(ap netip.AddrPort, dg []byte) (int, error) {
		now = now.Add(time.Millisecond)
		flows := 0
		err := d.Decode(Packet{Payload: dg, Exporter: ap, TimeReceived: now}, fm, func(*schema.FlowMessage) { flows++ })
		return flows, err
	}
	v5 := payloads(t, "nfv5.pcap")[0]
	garbage := v9Datagram(be16(256, 1000)) // a set length past the end
	// Two real exporters: established.
	real := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:2055"), netip.MustParseAddrPort("192.0.2.2:2055")}
	for _, ap := range real {
		for range 2 {
			if _, err := decode(ap, v5); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Spoofed sources fill the table: one valid datagram each, or garbage three times.
	for i := range 20 {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}), 1024)
		if i%3 != 0 {
			if _, err := decode(ap, v5); err != nil {
				t.Fatalf("spoofed source %d: %v", i, err)
			}
			continue
		}
		for range 3 {
			if _, err := decode(ap, garbage); !errors.Is(err, ErrBadSet) {
				t.Fatalf("garbage from spoofed source %d: %v", i, err)
			}
		}
	}
	// A new real exporter gets in at once, and stays once established.
	newcomer := netip.MustParseAddrPort("198.51.100.1:9995")
	for range 2 {
		if flows, err := decode(newcomer, v5); err != nil || flows != 29 {
			t.Fatalf("new exporter: %d flows, %v", flows, err)
		}
	}
	for i := range 20 {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, 100 + byte(i)}), 1024)
		if _, err := decode(ap, v5); err != nil {
			t.Fatalf("spoofed source %d: %v", i, err)
		}
	}
	for _, ap := range append(real, newcomer) {
		if d.exporters[ap] == nil {
			t.Errorf("established exporter %s evicted", ap)
		}
	}
	if len(d.exporters) != cfg.MaxExporters {
		t.Errorf("%d sessions, want %d", len(d.exporters), cfg.MaxExporters)
	}
	// 41 sessions created after the 2 real ones: the newcomer and 5 others remain.
	if got := promtest.ToFloat64(d.metrics.sessionsEvicted.WithLabelValues("not-established")); got != 35 {
		t.Errorf("evictions of sessions not established: %v, want 35", got)
	}
	if got := promtest.ToFloat64(d.metrics.sessionsDropped); got != 0 {
		t.Errorf("datagrams dropped: %v, want 0", got)
	}

	// With the table full of established sessions, a newcomer is refused until one of them
	// has been idle for session-idle-timeout.
	d2, _ := newTestDecoder(t, cfg, s)
	d = d2
	for i := range cfg.MaxExporters {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 2055)
		for range 2 {
			if _, err := decode(ap, v5); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := decode(newcomer, v5); !errors.Is(err, ErrTooManyExporters) {
		t.Errorf("newcomer with established sessions only: %v, want ErrTooManyExporters", err)
	}
	now = now.Add(cfg.SessionIdleTimeout)
	for i := 1; i < cfg.MaxExporters; i++ { // all but the first stay active
		if _, err := decode(netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 2055), v5); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := decode(newcomer, v5); err != nil {
		t.Errorf("newcomer after an idle session: %v", err)
	}
	if d.exporters[netip.MustParseAddrPort("192.0.2.0:2055")] != nil {
		t.Error("the idle session is still there")
	}
	if got := promtest.ToFloat64(d.metrics.sessionsEvicted.WithLabelValues("idle")); got != 1 {
		t.Errorf("idle evictions: %v, want 1", got)
	}
}
