package netflow

import (
	"bytes"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/schema"
)

// recordingObserver keeps what an Observer is told.
type recordingObserver struct {
	state    []StateRecord
	held     []uint64
	released []uint64
	decoded  []bool
}

func (o *recordingObserver) StateLearned(r StateRecord) {
	r.Record = bytes.Clone(r.Record)
	o.state = append(o.state, r)
}
func (o *recordingObserver) PendingHeld(tag uint64) { o.held = append(o.held, tag) }
func (o *recordingObserver) PendingReleased(tag uint64, decoded bool) {
	o.released = append(o.released, tag)
	o.decoded = append(o.decoded, decoded)
}

// tagged decodes datagrams in order with tags 1, 2, ... and returns each flow with its tag.
func tagged(t *testing.T, d *Decoder, s *schema.Schema, dgs [][]byte, received time.Time) (flows []string, tags []uint64) {
	t.Helper()
	fm := s.NewFlowMessage()
	emit := func(fm *schema.FlowMessage, tag uint64) {
		flows = append(flows, flowString(t, s, fm.Finalize()))
		tags = append(tags, tag)
	}
	for i, dg := range dgs {
		_ = d.DecodeTagged(Packet{Payload: dg, Exporter: testExporter, TimeReceived: received, Tag: uint64(i + 1)}, fm, emit)
	}
	return flows, tags
}

func datagramsOf(t *testing.T, names ...string) [][]byte {
	var out [][]byte
	for _, n := range names {
		out = append(out, payloads(t, n+".pcap")...)
	}
	return out
}

// TestObserverState: the observer hears of the options template, the sampling rate and the
// data template of the classic NetFlow v9 capture once each, not of their refreshes; a second
// decoder given that state decodes the data datagram alone into the same flows.
func TestObserverState(t *testing.T) {
	s := allColumns(t)
	a, _ := newTestDecoder(t, DefaultConfiguration(), s)
	obs := &recordingObserver{}
	a.SetObserver(obs)
	dgs := datagramsOf(t, "options-template", "options-data", "template", "data")
	want, _ := tagged(t, a, s, dgs, testTime)
	kinds := map[StateKind]int{}
	for _, r := range obs.state {
		kinds[r.Kind]++
		if r.Exporter != testExporter || r.Version != 9 || !r.Received.Equal(testTime) {
			t.Errorf("state %+v: wrong session or time", r)
		}
	}
	if kinds[StateOptionsTemplate] != 1 || kinds[StateTemplate] != 1 || kinds[StateSamplingRate] != 1 || len(want) != 4 {
		t.Fatalf("state %v, %d flows: want one of each and 4 flows", kinds, len(want))
	}
	before := len(obs.state)
	tagged(t, a, s, datagramsOf(t, "options-template", "options-data", "template"), testTime.Add(time.Second))
	if len(obs.state) != before {
		t.Errorf("refreshes reported: %+v", obs.state[before:])
	}

	b, _ := newTestDecoder(t, DefaultConfiguration(), s)
	bobs := &recordingObserver{}
	b.SetObserver(bobs)
	for _, r := range obs.state {
		if err := b.ApplyState(r, nil, nil); err != nil {
			t.Fatalf("apply %+v: %v", r, err)
		}
	}
	if len(bobs.state) != 0 {
		t.Errorf("applied state reported again: %+v", bobs.state)
	}
	got, _ := tagged(t, b, s, datagramsOf(t, "data"), testTime)
	sort.Strings(got)
	sort.Strings(want)
	if len(got) != len(want) {
		t.Fatalf("got %d flows, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("flow %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestApplyStateReplaysPending: data decoded before its template waits in the pending
// buffer; the template applied from another decoder's state decodes it, each flow with the
// tag of the datagram it came from, then releases the datagram.
func TestApplyStateReplaysPending(t *testing.T) {
	s := allColumns(t)
	a, _ := newTestDecoder(t, DefaultConfiguration(), s)
	aobs := &recordingObserver{}
	a.SetObserver(aobs)
	tagged(t, a, s, datagramsOf(t, "ipfixprobe-templates"), testTime)

	b, _ := newTestDecoder(t, DefaultConfiguration(), s)
	obs := &recordingObserver{}
	b.SetObserver(obs)
	flows, _ := tagged(t, b, s, datagramsOf(t, "ipfixprobe-data"), testTime.Add(time.Second))
	if len(flows) != 0 || len(obs.held) == 0 || obs.held[0] != 1 {
		t.Fatalf("before the template: %d flows, held %v", len(flows), obs.held)
	}
	fm := s.NewFlowMessage()
	var tags []uint64
	for _, r := range aobs.state {
		if err := b.ApplyState(r, fm, func(_ *schema.FlowMessage, tag uint64) { tags = append(tags, tag) }); err != nil {
			t.Fatal(err)
		}
	}
	if len(tags) != 6 {
		t.Fatalf("%d flows replayed, want 6", len(tags))
	}
	for _, tag := range tags {
		if tag != 1 {
			t.Fatalf("replayed flow tagged %d, want 1", tag)
		}
	}
	if len(obs.released) != len(obs.held) || obs.released[0] != 1 || !obs.decoded[0] {
		t.Fatalf("held %v, released %v (decoded %v)", obs.held, obs.released, obs.decoded)
	}
}

// TestExpirePending: a held set whose template never comes is released as dropped by the
// periodic sweep, even when its session sends nothing more.
func TestExpirePending(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	obs := &recordingObserver{}
	d.SetObserver(obs)
	tagged(t, d, s, datagramsOf(t, "ipfixprobe-data"), testTime)
	d.ExpirePending(testTime.Add(time.Minute))
	if len(obs.released) != 0 {
		t.Fatalf("released before pending-max-age: %v", obs.released)
	}
	d.ExpirePending(testTime.Add(DefaultConfiguration().PendingMaxAge + time.Second))
	if len(obs.released) != len(obs.held) || len(obs.held) == 0 || obs.decoded[0] {
		t.Fatalf("held %v, released %v (decoded %v)", obs.held, obs.released, obs.decoded)
	}
}

// TestNewestTemplateWins: with an observer, a definition from an older datagram does not
// replace the one installed (decoders reading an exporter's datagrams in other orders agree),
// and is counted; from a later datagram it does. A withdrawal is reported per template.
func TestNewestTemplateWins(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	obs := &recordingObserver{}
	d.SetObserver(obs)
	tpl := func(fieldLen uint16) []byte {
		x := &ipfixBuilder{}
		x.u16(300, 2, 8, 4, 12, fieldLen)
		return ipfixSet(ipfixTemplateSetID, x.b)
	}
	fm := s.NewFlowMessage()
	decode := func(dg []byte, at time.Time) {
		t.Helper()
		if err := d.DecodeTagged(Packet{Payload: dg, Exporter: testExporter, TimeReceived: at}, fm, func(*schema.FlowMessage, uint64) {}); err != nil {
			t.Fatal(err)
		}
	}
	decode(ipfixDatagram(tpl(4)), testTime)
	decode(ipfixDatagram(tpl(16)), testTime.Add(-time.Second))
	e := session(t, d)
	key := templateKey{version: 10, id: 300, domain: 7}
	if got := e.templates[key].fields[1].length; got != 4 {
		t.Fatalf("an older datagram's definition replaced the template (field length %d)", got)
	}
	if n := testutil.ToFloat64(e.m.errors[reasonStaleTemplate]); n != 1 {
		t.Errorf("stale-template counted %v times, want 1", n)
	}
	decode(ipfixDatagram(tpl(16)), testTime.Add(time.Second))
	if got := e.templates[key].fields[1].length; got != 16 {
		t.Fatalf("a later datagram's definition did not replace the template (field length %d)", got)
	}
	// The applied path follows the same rule.
	old := StateRecord{Kind: StateTemplate, Exporter: testExporter, Version: 10, Domain: 7, ID: 300, Received: testTime, Record: tpl(4)[4:]}
	if err := d.ApplyState(old, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.templates[key].fields[1].length; got != 16 {
		t.Fatalf("older applied state replaced the template (field length %d)", got)
	}
	if len(obs.state) != 2 {
		t.Fatalf("%d state records reported, want 2 (the stale one and the applied one are not)", len(obs.state))
	}
	x := &ipfixBuilder{}
	x.u16(300, 0)
	decode(ipfixDatagram(ipfixSet(ipfixTemplateSetID, x.b)), testTime.Add(2*time.Second))
	last := obs.state[len(obs.state)-1]
	if !last.Withdrawn || last.ID != 300 || last.Kind != StateTemplate || len(e.templates) != 0 {
		t.Fatalf("withdrawal: last state %+v, %d templates left", last, len(e.templates))
	}
}

func TestApplyStateErrors(t *testing.T) {
	s := allColumns(t)
	d, _ := newTestDecoder(t, DefaultConfiguration(), s)
	ap := netip.MustParseAddrPort("192.0.2.1:1")
	for _, r := range []StateRecord{
		{Kind: StateTemplate, Exporter: ap, Version: 5, ID: 300, Record: []byte{1, 44, 0, 1, 0, 8, 0, 4}},
		{Kind: StateTemplate, Exporter: ap, Version: 10, ID: 12, Record: []byte{0, 12, 0, 1, 0, 8, 0, 4}},
		{Kind: StateTemplate, Exporter: ap, Version: 10, ID: 301, Record: []byte{1, 44, 0, 1, 0, 8, 0, 4}},
		{Kind: StateTemplate, Exporter: ap, Version: 10, ID: 300, Record: []byte{1, 44, 0, 9, 0, 8}},
		{Kind: StateSamplingRate, Exporter: ap, Version: 9},
		{Kind: 99, Exporter: ap, Version: 9},
	} {
		if err := d.ApplyState(r, nil, nil); err == nil {
			t.Errorf("%+v: no error", r)
		}
	}
}
