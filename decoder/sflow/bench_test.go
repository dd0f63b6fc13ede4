package sflow

import (
	"testing"

	"flowzero/schema"
)

// BenchmarkDecode decodes data-1140 (5 flows) and finalizes every flow; compare with
// GoFlow2 in bench/decoders (BenchmarkDecodeEncode/sflow).
func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name   string
		schema func(testing.TB) *schema.Schema
	}{
		{"default", defaultSchema},
		{"all-columns", allColumns},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := tc.schema(b)
			d, err := New(nil, DefaultConfiguration(), s)
			if err != nil {
				b.Fatal(err)
			}
			fm := s.NewFlowMessage()
			flows := 0
			emit := func(fm *schema.FlowMessage) {
				fm.Finalize()
				flows++
			}
			pkt := Packet{Payload: payload(b, "data-1140.pcap"), Exporter: testExporter, TimeReceived: testTime}
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Decode(pkt, fm, emit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(flows), "ns/flow")
		})
	}
}
