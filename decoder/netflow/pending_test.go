package netflow

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/schema"
)

// TestPendingRoom: PendingRoom says false exactly when decoding the datagram would drop
// data sets for want of room in the pending buffer, counting the sets its receive time
// expires; datagrams bringing templates, and malformed ones, get true.
func TestPendingRoom(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.PendingSets = 2
	d, _ := newTestDecoder(t, cfg, s)
	data := payloads(t, "data.pcap")[0]
	tmpl := payloads(t, "template.pcap")[0]
	fm := s.NewFlowMessage()
	pkt := Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime}
	for i := range 2 {
		if !d.PendingRoom(pkt) {
			t.Fatalf("datagram %d: no room", i)
		}
		if err := d.Decode(pkt, fm, func(*schema.FlowMessage) {}); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
	}
	if d.PendingRoom(pkt) {
		t.Error("room for a third data set with pending-sets 2")
	}
	if allocs := testing.AllocsPerRun(100, func() { d.PendingRoom(pkt) }); allocs != 0 {
		t.Errorf("PendingRoom allocates %v times", allocs)
	}
	for _, tc := range []struct {
		name string
		pkt  Packet
	}{
		{"templates", Packet{Payload: tmpl, Exporter: testExporter, TimeReceived: testTime}},
		{"held sets expired", Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime.Add(cfg.PendingMaxAge + time.Second)}},
		{"other session", Packet{Payload: data, Exporter: netip.MustParseAddrPort("192.0.2.10:1"), TimeReceived: testTime}},
		{"truncated", Packet{Payload: data[:10], Exporter: testExporter, TimeReceived: testTime}},
		{"bad version", Packet{Payload: be16(7, 0, 0, 0), Exporter: testExporter, TimeReceived: testTime}},
	} {
		if !d.PendingRoom(tc.pkt) {
			t.Errorf("%s: no room", tc.name)
		}
	}
	if err := d.Decode(pkt, fm, func(*schema.FlowMessage) {}); !errors.Is(err, ErrTemplateNotFound) {
		t.Errorf("third data set: %v, want it dropped as PendingRoom said", err)
	}
	if err := d.Decode(Packet{Payload: tmpl, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {}); err != nil {
		t.Fatal(err)
	}
	if !d.PendingRoom(pkt) {
		t.Error("no room once the template is known")
	}

	// pending-bytes bounds it too (IPFIX, domain 7, template 300 unknown).
	cfg = DefaultConfiguration()
	cfg.PendingBytes = 16
	d, _ = newTestDecoder(t, cfg, s)
	for _, tc := range []struct {
		body []byte
		room bool
	}{{make([]byte, 12), true}, {make([]byte, 20), false}} {
		pkt := Packet{Payload: ipfixDatagram(ipfixSet(300, tc.body)), Exporter: testExporter, TimeReceived: testTime}
		if got := d.PendingRoom(pkt); got != tc.room {
			t.Errorf("IPFIX data set of %d bytes, pending-bytes 16: room %v, want %v", len(tc.body), got, tc.room)
		}
	}
}

// TestPendingBatch: the datagrams of one record add up per session: two that each fit alone
// do not fit together, the session that does not fit is named, other sessions count apart,
// and a record with templates fits (they may be the ones its data sets wait for).
func TestPendingBatch(t *testing.T) {
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.PendingSets = 2
	d, _ := newTestDecoder(t, cfg, s)
	data := payloads(t, "data.pcap")[0]
	tmpl := payloads(t, "template.pcap")[0]
	other := netip.MustParseAddrPort("192.0.2.10:1")
	pkt := Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime}
	var b PendingBatch
	fits := func(pkts ...Packet) (netip.AddrPort, bool) {
		b.Reset()
		for _, p := range pkts {
			d.PendingAdd(&b, p)
		}
		return d.PendingFits(&b, nil)
	}
	if !d.PendingRoom(pkt) {
		t.Fatal("no room for one data set")
	}
	if _, ok := fits(pkt, pkt); !ok {
		t.Error("two data sets do not fit with pending-sets 2")
	}
	if exp, ok := fits(pkt, pkt, pkt); ok || exp != testExporter {
		t.Errorf("three data sets with pending-sets 2: fit %v (exporter %v), want no fit for %v", ok, exp, testExporter)
	}
	if _, ok := fits(pkt, pkt, Packet{Payload: data, Exporter: other, TimeReceived: testTime}); !ok {
		t.Error("another session's data set counted with the first")
	}
	if _, ok := fits(pkt, pkt, pkt, Packet{Payload: tmpl, Exporter: testExporter, TimeReceived: testTime}); !ok {
		t.Error("a record with templates does not fit")
	}
	// Held sets count: one held leaves room for one more in the record.
	fm := s.NewFlowMessage()
	if err := d.Decode(pkt, fm, func(*schema.FlowMessage) {}); err != nil {
		t.Fatal(err)
	}
	if _, ok := fits(pkt); !ok {
		t.Error("one held and one more do not fit with pending-sets 2")
	}
	if _, ok := fits(pkt, pkt); ok {
		t.Error("one held and two more fit with pending-sets 2")
	}
	if allocs := testing.AllocsPerRun(100, func() { fits(pkt, pkt, Packet{Payload: data, Exporter: other, TimeReceived: testTime}) }); allocs != 0 {
		t.Errorf("a record's check allocates %v times", allocs)
	}
	// An exporter in skip is not asked, the others are.
	b.Reset()
	for _, p := range []Packet{pkt, pkt, {Payload: data, Exporter: other, TimeReceived: testTime}} {
		d.PendingAdd(&b, p)
	}
	skip := map[netip.AddrPort]struct{}{testExporter: {}}
	if _, ok := d.PendingFits(&b, skip); !ok {
		t.Error("the skipped exporter was asked")
	}
	d.PendingAdd(&b, Packet{Payload: data, Exporter: other, TimeReceived: testTime})
	d.PendingAdd(&b, Packet{Payload: data, Exporter: other, TimeReceived: testTime})
	if exp, ok := d.PendingFits(&b, skip); ok || exp != other {
		t.Errorf("three data sets of another exporter beside a skipped one: fit %v (exporter %v), want no fit for %v", ok, exp, other)
	}
}

// TestDropPending: the sets of the tags dropped are gone without being decoded or counted as
// lost; the others are decoded when their template comes.
func TestDropPending(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	fm := s.NewFlowMessage()
	flows := 0
	emit := func(*schema.FlowMessage) { flows++ }
	data := payloads(t, "data.pcap")[0]
	for tag := range uint64(3) {
		if err := d.Decode(Packet{Payload: data, Exporter: testExporter, TimeReceived: testTime, Tag: tag}, fm, emit); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.DropPending(func(tag uint64) bool { return tag != 1 }); n != 2 {
		t.Fatalf("dropped %d sets, want 2", n)
	}
	if err := d.Decode(Packet{Payload: payloads(t, "template.pcap")[0], Exporter: testExporter, TimeReceived: testTime}, fm, emit); err != nil {
		t.Fatal(err)
	}
	if flows != 4 {
		t.Errorf("%d flows decoded, want the 4 of the one set kept", flows)
	}
	e := d.exporters[testExporter]
	if n := testutil.ToFloat64(e.m.errors[reasonPendingExpired]); n != 0 || len(e.pending) != 0 || e.pendingBytes != 0 {
		t.Errorf("%v sets counted as expired, %d still pending (%d bytes)", n, len(e.pending), e.pendingBytes)
	}
}
