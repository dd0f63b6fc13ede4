package netflow

import (
	"testing"

	"flowzero/internal/testutil"
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

// BenchmarkDecodeHostile decodes datagrams built to cost the most per byte: 8000 data sets
// for unknown templates, and 5000 template definitions each followed by a withdrawal of all
// templates. It reports ns/datagram (compare with a valid datagram of BenchmarkDecode).
func BenchmarkDecodeHostile(b *testing.B) {
	churn := func() []byte {
		var recs [][]byte
		for i := range 2500 {
			recs = append(recs, be16(uint16(256+i%1000), 1, 8, 4), be16(2, 0))
		}
		var sets [][]byte
		for i := 0; i < len(recs); i += 400 {
			sets = append(sets, nfSet(2, recs[i:min(i+400, len(recs))]...))
		}
		return ipfixDatagram(sets...)
	}
	for _, bc := range []struct {
		name string
		dg   []byte
	}{
		{"unknown-templates", manyUnknownSets()},
		{"template-churn", churn()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := schema.New(schema.DefaultConfiguration())
			if err != nil {
				b.Fatal(err)
			}
			d, _ := newTestDecoder(b, DefaultConfiguration(), s)
			fm := s.NewFlowMessage()
			pkt := Packet{Payload: bc.dg, Exporter: testExporter, TimeReceived: testTime}
			b.ReportAllocs()
			for b.Loop() {
				_ = d.Decode(pkt, fm, func(*schema.FlowMessage) {})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/datagram")
		})
	}
}

// BenchmarkPendingRoom is the check an outlet makes before decoding each NetFlow datagram
// (PendingRoom), on the datagrams of BenchmarkDecode after their templates: compare its
// cpu-ns/op with theirs, run beside it.
func BenchmarkPendingRoom(b *testing.B) {
	for _, bc := range []struct {
		name     string
		setup    []string
		measured string
	}{
		{"netflow-v9", []string{"options-template.pcap", "options-data.pcap", "template.pcap"}, "data.pcap"},
		{"ipfix", []string{"ipfixprobe-templates.pcap"}, "ipfixprobe-data.pcap"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := schema.New(schema.DefaultConfiguration())
			if err != nil {
				b.Fatal(err)
			}
			d, _ := newTestDecoder(b, DefaultConfiguration(), s)
			decodeFiles(b, d, s, bc.setup...)
			pkt := Packet{Payload: payloads(b, bc.measured)[0], Exporter: testExporter, TimeReceived: testTime}
			b.ReportAllocs()
			cpu := testutil.StartCPU(b)
			for b.Loop() {
				if !d.PendingRoom(pkt) {
					b.Fatal("no room after the templates")
				}
			}
			cpu.Stop(b)
		})
	}
}
