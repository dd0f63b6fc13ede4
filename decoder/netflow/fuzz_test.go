package netflow

import (
	"net/netip"
	"sync"
	"testing"

	"flowzero/internal/testdata"
	"flowzero/pbwire"
	"flowzero/schema"
)

var (
	fuzzOnce   sync.Once
	fuzzSchema *schema.Schema
	fuzzWarm   *Decoder
)

// FuzzNetflowDecode feeds arbitrary datagrams to a fresh decoder (twice, so that templates
// in the input apply to its data sets) and to a decoder that knows every template of the
// captures. Nothing may panic, and a flow must always finalize into a message the schema
// decodes.
func FuzzNetflowDecode(f *testing.F) {
	for _, p := range testdata.Glob(f, "netflow/*.pcap") {
		for _, payload := range payloadsOf(f, p) {
			f.Add(payload)
		}
	}
	f.Fuzz(runFuzzOne)
}

// runFuzzOne decodes one fuzz input.
func runFuzzOne(t *testing.T, data []byte) {
	fuzzOnce.Do(func() {
		fuzzSchema = allColumns(t)
		fuzzWarm, _ = New(nil, DefaultConfiguration(), fuzzSchema)
		fm := fuzzSchema.NewFlowMessage()
		for _, p := range testdata.Glob(t, "netflow/*.pcap") {
			for _, payload := range payloadsOf(t, p) {
				_ = fuzzWarm.Decode(Packet{Payload: payload, Exporter: testExporter, TimeReceived: testTime}, fm, func(*schema.FlowMessage) {})
			}
		}
	})
	fm := fuzzSchema.NewFlowMessage()
	check := func(fm *schema.FlowMessage) {
		msg, rest, err := pbwire.SplitDelimited(fm.Finalize())
		if err != nil || len(rest) != 0 {
			t.Fatalf("finalized flow: %v, %d bytes left", err, len(rest))
		}
		if err := fuzzSchema.DecodeMessage(msg, func(*schema.Column, any) {}); err != nil {
			t.Fatalf("finalized flow does not decode: %v", err)
		}
	}
	fresh, err := New(nil, DefaultConfiguration(), fuzzSchema)
	if err != nil {
		t.Fatal(err)
	}
	pkt := Packet{Payload: data, Exporter: netip.MustParseAddrPort("198.51.100.1:9995"), TimeReceived: testTime}
	_ = fresh.Decode(pkt, fm, check)
	_ = fresh.Decode(pkt, fm, check)
	pkt.Exporter = testExporter
	_ = fuzzWarm.Decode(pkt, fm, check)
}
