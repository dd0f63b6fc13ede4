package outlet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// firstPayload is the first datagram of a NetFlow capture of the shared test data.
func firstPayload(t *testing.T, name string) []byte {
	t.Helper()
	dgs, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", name))
	if err != nil {
		t.Fatal(err)
	}
	return dgs[0].Payload
}

// recordAt is a version 1 record of partition 0 at offset off.
func recordAt(off int64, d datagram.Datagram) *kgo.Record {
	return &kgo.Record{Partition: 0, Offset: off, Value: datagram.Append(nil, d)}
}

// A datagram whose receive time is an hour ahead (an inlet with a wrong clock, or garbage
// written to the topic) neither expires the data sets held for their template (the outlet
// expires them by the newest receive time) nor dates its own flows in the future: it is
// taken with the outlet's time, and counted.
func TestClockAheadDatagram(t *testing.T) {
	tmpl, data := firstPayload(t, "template.pcap"), firstPayload(t, "data.pcap")
	clk := &manualClock{now: testutil.Now()}
	sink := &discardSink{}
	o, _ := newOffline(t, netflow.DefaultConfiguration(), DefaultConfiguration(), sink, clk)
	good := netip.MustParseAddrPort("192.0.2.100:2055")
	other := netip.MustParseAddrPort("198.51.100.7:2055")
	o.handle(recordAt(0, datagram.Datagram{Received: clk.now, Exporter: good, Protocol: datagram.NetFlow, Payload: data}))
	if len(o.held) != 1 {
		t.Fatalf("%d datagrams held, want the data datagram", len(o.held))
	}
	o.handle(recordAt(1, datagram.Datagram{Received: clk.now.Add(time.Hour), Exporter: other, Protocol: datagram.NetFlow, Payload: []byte{0, 9, 0, 0}}))
	if !o.latest.Equal(clk.now) {
		t.Errorf("newest receive time %s, want the outlet's time %s", o.latest, clk.now)
	}
	o.deps.NetFlow.ExpirePending(o.latest) // as each commit does
	clk.now = clk.now.Add(time.Second)
	o.handle(recordAt(2, datagram.Datagram{Received: clk.now, Exporter: good, Protocol: datagram.NetFlow, Payload: tmpl}))
	o.sendBatch()
	if sink.flows != 4 {
		t.Errorf("%d flows of the held datagram, want 4: its template came a second later", sink.flows)
	}
	if n := promtest.ToFloat64(o.m.clockAhead.WithLabelValues("datagram")); n != 1 {
		t.Errorf("%v datagrams counted ahead of the clock, want 1", n)
	}
}

// A state record dated a day ahead (written by another client of the state topic) defines a
// template: applied with the outlet's time, it does not make the exporter's real definition,
// received later, look stale, so the exporter's data decode with the real one.
func TestClockAheadState(t *testing.T) {
	tmpl, data := firstPayload(t, "template.pcap"), firstPayload(t, "data.pcap")
	clk := &manualClock{now: testutil.Now()}
	sink := &discardSink{}
	o, _ := newOffline(t, netflow.DefaultConfiguration(), DefaultConfiguration(), sink, clk)
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	// The real template's state record, to forge one of the same key.
	ref, err := netflow.New(nil, netflow.DefaultConfiguration(), o.deps.Schema)
	if err != nil {
		t.Fatal(err)
	}
	learned := &learnedStates{}
	ref.SetObserver(learned)
	_ = ref.Decode(netflow.Packet{Payload: tmpl, Exporter: from, TimeReceived: clk.now}, o.deps.Schema.NewFlowMessage(), func(*schema.FlowMessage) {})
	var forged netflow.StateRecord
	for _, r := range learned.records {
		if r.Kind == netflow.StateTemplate {
			forged = r
		}
	}
	if forged.Kind != netflow.StateTemplate {
		t.Fatal("no template learned from template.pcap")
	}
	forged.Received = clk.now.Add(24 * time.Hour)
	forged.Record = []byte{byte(forged.ID >> 8), byte(forged.ID), 0, 1, 0, 8, 0, 4} // one field: IPv4 source
	if err := o.applyState(forged); err != nil {
		t.Fatal(err)
	}
	clk.now = clk.now.Add(time.Second)
	o.handle(recordAt(0, datagram.Datagram{Received: clk.now, Exporter: from, Protocol: datagram.NetFlow, Payload: tmpl}))
	o.handle(recordAt(1, datagram.Datagram{Received: clk.now, Exporter: from, Protocol: datagram.NetFlow, Payload: data}))
	o.sendBatch()
	if sink.flows != 4 {
		t.Errorf("%d flows, want the 4 the real template gives", sink.flows)
	}
	if n := promtest.ToFloat64(o.m.clockAhead.WithLabelValues("state")); n != 1 {
		t.Errorf("%v state records counted ahead of the clock, want 1", n)
	}
}

// learnedStates keeps the state a decoder learns.
type learnedStates struct{ records []netflow.StateRecord }

func (l *learnedStates) StateLearned(r netflow.StateRecord) { l.records = append(l.records, r) }
func (*learnedStates) PendingHeld(uint64)                   {}
func (*learnedStates) PendingReleased(uint64, bool)         {}

// unitCounter is a unit sink that stores every unit.
type unitCounter struct{ discardSink }

func (*unitCounter) InsertUnit(context.Context, string, []byte, int) error { return nil }

// failOnce is a batch sink whose first acknowledgement fails.
type failOnce struct {
	discardSink
	failed bool
}

func (s *failOnce) Acknowledge(context.Context) error {
	if !s.failed {
		s.failed = true
		return errors.New("broker down")
	}
	return nil
}

// newTwoSinks returns an outlet with the flow identity columns, a unit sink and a batch sink.
func newTwoSinks(t *testing.T, sinks ...output.Sink) *Outlet {
	t.Helper()
	s, err := schema.New(schema.Configuration{Enabled: []string{"DatagramPartition", "DatagramOffset", "DatagramIndex"}})
	if err != nil {
		t.Fatal(err)
	}
	nf, _ := netflow.New(nil, netflow.DefaultConfiguration(), s)
	sf, _ := sflow.New(nil, sflow.DefaultConfiguration(), s)
	topic := datagram.DefaultTopicConfiguration()
	topic.Brokers = []string{"127.0.0.1:1"} // never contacted: no Start
	o, err := New(topic, DefaultConfiguration(), Dependencies{Schema: s, NetFlow: nf, SFlow: sf, Sinks: sinks,
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.client.Close)
	return o
}

// unitFlows is the number of flows in partition 0's units.
func unitFlows(o *Outlet) int {
	n := o.parts[0].open.flows
	for _, u := range o.parts[0].closed {
		n += u.flows
	}
	return n
}

// A data set held for its template, then a failed acknowledgement: the partition is read
// again from its committed offset, which holds the set again. The first copy must be gone,
// or both are decoded when the template comes and the store keeps the flows twice (with
// distinct indices, which no deduplication can tell apart).
func TestRewindForgetsHeldSets(t *testing.T) {
	tmpl, data := firstPayload(t, "template.pcap"), firstPayload(t, "data.pcap")
	o := newTwoSinks(t, &unitCounter{}, &failOnce{})
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	now := testutil.Now()
	dg := func(payload []byte) datagram.Datagram {
		return datagram.Datagram{Received: now, Exporter: from, Protocol: datagram.NetFlow, Payload: payload}
	}
	o.handle(recordAt(0, dg(data)))
	o.commitLocked(context.Background()) // the batch sink fails: read again from offset 0
	if o.parts[0].next != 0 || len(o.held) != 0 || promtest.ToFloat64(o.m.held) != 0 {
		t.Fatalf("after the rewind: next offset %d, %d datagrams and %v sets held, want 0, 0 and 0",
			o.parts[0].next, len(o.held), promtest.ToFloat64(o.m.held))
	}
	o.handle(recordAt(0, dg(data)))
	o.handle(recordAt(1, dg(tmpl)))
	if n := unitFlows(o); n != 4 {
		t.Errorf("the units hold %d flows of the one data datagram of 4 flows", n)
	}
	if n := promtest.ToFloat64(o.m.pendingDropped); n != 0 {
		t.Errorf("%v held sets counted as dropped", n)
	}
}

// A partition revoked while one of its data sets is held: the set goes with it (the next
// owner reads its datagram again), and another partition's held set stays.
func TestForgetDropsHeldSets(t *testing.T) {
	tmpl, data := firstPayload(t, "template.pcap"), firstPayload(t, "data.pcap")
	sink := &discardSink{}
	o, _ := newOffline(t, netflow.DefaultConfiguration(), DefaultConfiguration(), sink, nil)
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	now := testutil.Now()
	for p := range int32(2) {
		o.handle(&kgo.Record{Partition: p, Offset: 0, Value: datagram.Append(nil,
			datagram.Datagram{Received: now, Exporter: from, Protocol: datagram.NetFlow, Payload: data})})
	}
	o.forgetLocked(map[string][]int32{o.topic.Topic: {0}})
	if len(o.held) != 1 || promtest.ToFloat64(o.m.held) != 1 {
		t.Fatalf("%d datagrams and %v sets held after partition 0 went, want 1 and 1", len(o.held), promtest.ToFloat64(o.m.held))
	}
	o.handle(&kgo.Record{Partition: 1, Offset: 1, Value: datagram.Append(nil,
		datagram.Datagram{Received: now, Exporter: from, Protocol: datagram.NetFlow, Payload: tmpl})})
	o.sendBatch()
	if sink.flows != 4 {
		t.Errorf("%d flows, want the 4 of partition 1's held datagram", sink.flows)
	}
}

// An exporter given up after template-wait no longer holds records back, but it must not
// hide another exporter of the same batch record whose buffer is full and which never
// waited: the record waits for that one.
func TestGivenUpExporterDoesNotHideAnother(t *testing.T) {
	data := firstPayload(t, "data.pcap")
	clk := &manualClock{now: testutil.Now()}
	ncfg := netflow.DefaultConfiguration()
	ncfg.PendingSets = 2
	cfg := DefaultConfiguration()
	cfg.TemplateWait = 10 * time.Second
	o, _ := newOffline(t, ncfg, cfg, &discardSink{}, clk)
	a := netip.MustParseAddrPort("192.0.2.100:2055")
	b := netip.MustParseAddrPort("192.0.2.200:2055")
	off := int64(0)
	one := func(from netip.AddrPort) *kgo.Record {
		off++
		return recordAt(off-1, datagram.Datagram{Received: clk.now, Exporter: from, Protocol: datagram.NetFlow, Payload: data})
	}
	o.handle(one(a))
	o.handle(one(a))
	third := one(a)
	o.handle(third) // A's buffer is full: paused
	clk.now = clk.now.Add(cfg.TemplateWait)
	o.resumeLocked(clk.now)
	o.handle(third) // A waited template-wait: given up, decoded
	if _, ok := o.gaveUp[a]; !ok {
		t.Fatal("A was not given up")
	}
	o.handle(one(b))
	o.handle(one(b)) // B's buffer is full
	batch := datagram.AppendBatch(nil)
	for _, from := range []netip.AddrPort{a, b} {
		batch = datagram.AppendEntry(batch, datagram.Datagram{Received: clk.now, Exporter: from, Protocol: datagram.NetFlow, Payload: data})
	}
	o.handle(&kgo.Record{Partition: 0, Offset: off, Value: batch})
	if !o.parts[0].paused {
		t.Error("a record with a set of B, whose buffer is full and which never waited, was decoded at once because A was given up")
	}
}
