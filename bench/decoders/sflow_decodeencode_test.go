package decoders

import (
	"bytes"
	"net/netip"
	"runtime"
	"testing"
	"time"

	gfsflow "github.com/netsampler/goflow2/v2/decoders/sflow"
	"github.com/netsampler/goflow2/v2/producer"
	protoproducer "github.com/netsampler/goflow2/v2/producer/proto"

	"flowzero/decoder/sflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

// sflowCapture is the sFlow input of BenchmarkDecodeEncode: one datagram, 5 flow samples
// with raw Ethernet headers (IPv4 and IPv6), switch, router and gateway records.
const sflowCapture = "data-1140.pcap"

var sflowExporter = netip.MustParseAddrPort("192.0.2.100:47873")

func init() {
	decodeEncodeCases = append(decodeEncodeCases, decodeEncodeCase{
		name: "sflow",
		impls: []decodeEncodeImpl{
			{"flowzero", sflowFlowzero},
			{"goflow2", sflowGoFlow2},
		},
	})
}

func sflowPayload(b *testing.B) []byte {
	b.Helper()
	dgs, err := pcapfile.ReadUDP(testdata.Path(b, "sflow", sflowCapture))
	if err != nil {
		b.Fatal(err)
	}
	if len(dgs) != 1 {
		b.Fatalf("%s: %d datagrams, want 1", sflowCapture, len(dgs))
	}
	return dgs[0].Payload
}

// sflowFlowzero decodes with flowzero's decoder, every default column enabled, and
// finalizes every flow (the length-delimited protobuf message a sink would copy).
func sflowFlowzero(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	d, err := sflow.New(nil, sflow.DefaultConfiguration(), s)
	if err != nil {
		b.Fatal(err)
	}
	fm := s.NewFlowMessage()
	var flows, size int
	emit := func(fm *schema.FlowMessage) {
		size += len(fm.Finalize())
		flows++
	}
	pkt := sflow.Packet{Payload: sflowPayload(b), Exporter: sflowExporter, TimeReceived: time.Now()}
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	cpu := testutil.ThreadCPUTime()
	for b.Loop() {
		if err := d.Decode(pkt, fm, emit); err != nil {
			b.Fatal(err)
		}
	}
	cpu = testutil.ThreadCPUTime() - cpu
	b.StopTimer()
	if size == 0 {
		b.Fatal("nothing encoded")
	}
	reportPerFlow(b, flows, cpu)
}

// sflowGoFlow2 decodes with GoFlow2 v2 the way its sFlow pipe does (decoders/sflow, then the
// ProtoProducer with the default mapping) and marshals every flow to length-delimited
// protobuf (its binary format).
func sflowGoFlow2(b *testing.B) {
	cfg, err := (&protoproducer.ProducerConfig{}).Compile()
	if err != nil {
		b.Fatal(err)
	}
	prod, err := protoproducer.CreateProtoProducer(cfg, protoproducer.CreateSamplingSystem)
	if err != nil {
		b.Fatal(err)
	}
	payload := sflowPayload(b)
	now := time.Now()
	var flows, size int
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	cpu := testutil.ThreadCPUTime()
	for b.Loop() {
		var pkt gfsflow.Packet
		if err := gfsflow.DecodeMessageVersion(bytes.NewBuffer(payload), &pkt); err != nil {
			b.Fatal(err)
		}
		args := producer.ProduceArgs{Src: sflowExporter, TimeReceived: now, SamplerAddress: sflowExporter.Addr()}
		set, err := prod.Produce(&pkt, &args)
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
	cpu = testutil.ThreadCPUTime() - cpu
	b.StopTimer()
	if size == 0 {
		b.Fatal("nothing encoded")
	}
	reportPerFlow(b, flows, cpu)
}
