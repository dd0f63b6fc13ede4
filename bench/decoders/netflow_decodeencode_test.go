package decoders

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/netsampler/goflow2/v2/decoders/netflow"
	"github.com/netsampler/goflow2/v2/decoders/netflowlegacy"
	"github.com/netsampler/goflow2/v2/producer"
	protoproducer "github.com/netsampler/goflow2/v2/producer/proto"
	"github.com/netsampler/goflow2/v2/utils/templates"

	nf "flowzero/decoder/netflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

// decodeEncodeCase is one case of BenchmarkDecodeEncode: setup reads the captures and
// returns the datagrams decoded before the timer starts (templates, options) and the
// measured ones.
type decodeEncodeCase struct {
	name  string
	impls []decodeEncodeImpl
}

type decodeEncodeImpl struct {
	name string
	run  func(b *testing.B)
}

// decodeEncodeCases lists the cases; each protocol's file adds its own in init().
var decodeEncodeCases []decodeEncodeCase

// BenchmarkDecodeEncode measures decoding a datagram and encoding every flow it carries to
// protobuf, per implementation, and reports ns/flow and cpu-ns/flow (reportPerFlow).
func BenchmarkDecodeEncode(b *testing.B) {
	for _, c := range decodeEncodeCases {
		b.Run(c.name, func(b *testing.B) {
			for _, impl := range c.impls {
				b.Run(impl.name, impl.run)
			}
		})
	}
}

// reportPerFlow reports ns/flow (wall clock) and cpu-ns/flow, the CPU time of the benchmark's
// own thread (testutil.ThreadCPUTime), which leaves out the time other processes hold the
// core on this shared machine (and GoFlow2's garbage collection on other threads: it favours
// GoFlow2).
func reportPerFlow(b *testing.B, flows int, cpu int64) {
	if flows == 0 {
		b.Fatal("no flow decoded")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(flows), "ns/flow")
	b.ReportMetric(float64(cpu)/float64(flows), "cpu-ns/flow")
}

// netflowCapture is a NetFlow/IPFIX benchmark input.
type netflowCapture struct {
	setup    []string // decoded once before measuring (templates, options)
	measured string
}

func init() {
	for _, c := range []struct {
		name string
		cap  netflowCapture
	}{
		{"netflow-v9", netflowCapture{[]string{"options-template.pcap", "options-data.pcap", "template.pcap"}, "data.pcap"}},
		// ipfixprobe-data holds 4 RFC 5103 biflow records: flowzero emits 6 flows (2 reverse
		// flows have packets), GoFlow2 4; each ns/flow divides by its own count.
		{"ipfix", netflowCapture{[]string{"ipfixprobe-templates.pcap"}, "ipfixprobe-data.pcap"}},
		{"netflow-v5", netflowCapture{nil, "nfv5.pcap"}},
	} {
		decodeEncodeCases = append(decodeEncodeCases, decodeEncodeCase{
			name: c.name,
			impls: []decodeEncodeImpl{
				{"flowzero", netflowFlowzero(c.cap)},
				{"goflow2", netflowGoFlow2(c.cap)},
			},
		})
	}
}

func netflowPayloads(b *testing.B, name string) [][]byte {
	b.Helper()
	dgs, err := pcapfile.ReadUDP(testdata.Path(b, "netflow", name))
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	for _, dg := range dgs {
		out = append(out, dg.Payload)
	}
	return out
}

var netflowExporter = netip.MustParseAddrPort("192.0.2.100:47873")

// netflowFlowzero decodes with flowzero's decoder, every default column enabled, and
// finalizes every flow.
func netflowFlowzero(c netflowCapture) func(b *testing.B) {
	return func(b *testing.B) {
		s, err := schema.New(schema.DefaultConfiguration())
		if err != nil {
			b.Fatal(err)
		}
		d, err := nf.New(nil, nf.DefaultConfiguration(), s)
		if err != nil {
			b.Fatal(err)
		}
		fm := s.NewFlowMessage()
		var flows, size int
		emit := func(fm *schema.FlowMessage) {
			size += len(fm.Finalize())
			flows++
		}
		now := time.Now()
		for _, f := range c.setup {
			for _, p := range netflowPayloads(b, f) {
				if err := d.Decode(nf.Packet{Payload: p, Exporter: netflowExporter, TimeReceived: now}, fm, emit); err != nil {
					b.Fatal(err)
				}
			}
		}
		measured := netflowPayloads(b, c.measured)
		flows = 0
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.ResetTimer()
		cpu := testutil.ThreadCPUTime()
		for b.Loop() {
			for _, p := range measured {
				if err := d.Decode(nf.Packet{Payload: p, Exporter: netflowExporter, TimeReceived: now}, fm, emit); err != nil {
					b.Fatal(err)
				}
			}
		}
		cpu = testutil.ThreadCPUTime() - cpu
		b.StopTimer()
		if size == 0 {
			b.Fatal("nothing encoded")
		}
		reportPerFlow(b, flows, cpu)
	}
}

// netflowGoFlow2 decodes with GoFlow2 v2 the way its NetFlow pipe does (decoders/netflow,
// ProtoProducer with the default mapping) and marshals every flow to length-delimited
// protobuf (its binary format).
func netflowGoFlow2(c netflowCapture) func(b *testing.B) {
	return func(b *testing.B) {
		cfg, err := (&protoproducer.ProducerConfig{}).Compile()
		if err != nil {
			b.Fatal(err)
		}
		prod, err := protoproducer.CreateProtoProducer(cfg, protoproducer.CreateSamplingSystem)
		if err != nil {
			b.Fatal(err)
		}
		tpl := templates.DefaultTemplateGenerator(netflowExporter.String())
		var flows, size int
		now := time.Now()
		decode := func(payload []byte) {
			buf := bytes.NewBuffer(payload)
			args := producer.ProduceArgs{Src: netflowExporter, TimeReceived: now, SamplerAddress: netflowExporter.Addr()}
			var set []producer.ProducerMessage
			var err error
			switch binary.BigEndian.Uint16(payload) {
			case 5:
				var pkt netflowlegacy.PacketNetFlowV5
				if err = netflowlegacy.DecodeMessageVersion(buf, &pkt); err == nil {
					set, err = prod.Produce(&pkt, &args)
				}
			case 9:
				var pkt netflow.NFv9Packet
				if err = netflow.DecodeMessageVersion(buf, tpl, &pkt, nil); err == nil {
					set, err = prod.Produce(&pkt, &args)
				}
			case 10:
				var pkt netflow.IPFIXPacket
				if err = netflow.DecodeMessageVersion(buf, tpl, nil, &pkt); err == nil {
					set, err = prod.Produce(&pkt, &args)
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range set {
				out, err := m.(*protoproducer.ProtoProducerMessage).MarshalBinary()
				if err != nil {
					b.Fatal(err)
				}
				size += len(out)
				flows++
			}
			prod.Commit(set)
		}
		for _, f := range c.setup {
			for _, p := range netflowPayloads(b, f) {
				decode(p)
			}
		}
		measured := netflowPayloads(b, c.measured)
		flows = 0
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.ResetTimer()
		cpu := testutil.ThreadCPUTime()
		for b.Loop() {
			for _, p := range measured {
				decode(p)
			}
		}
		cpu = testutil.ThreadCPUTime() - cpu
		b.StopTimer()
		if size == 0 {
			b.Fatal("nothing encoded")
		}
		reportPerFlow(b, flows, cpu)
	}
}
