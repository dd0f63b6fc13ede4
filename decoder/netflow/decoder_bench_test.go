package netflow

import (
	"testing"

	"flowzero/schema"
)

// BenchmarkDecode decodes and finalizes datagrams after their templates, with the default
// schema (see bench/decoders for the comparison with GoFlow2).
func BenchmarkDecode(b *testing.B) {
	for _, bc := range []struct {
		name     string
		setup    []string
		measured string
	}{
		{"netflow-v9", []string{"options-template.pcap", "options-data.pcap", "template.pcap"}, "data.pcap"},
		{"ipfix", []string{"ipfixprobe-templates.pcap"}, "ipfixprobe-data.pcap"},
		{"netflow-v5", nil, "nfv5.pcap"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := schema.New(schema.DefaultConfiguration())
			if err != nil {
				b.Fatal(err)
			}
			d, _ := newTestDecoder(b, DefaultConfiguration(), s)
			decodeFiles(b, d, s, bc.setup...)
			fm := s.NewFlowMessage()
			pkt := Packet{Payload: payloads(b, bc.measured)[0], Exporter: testExporter, TimeReceived: testTime}
			flows := 0
			emit := func(fm *schema.FlowMessage) {
				fm.Finalize()
				flows++
			}
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
