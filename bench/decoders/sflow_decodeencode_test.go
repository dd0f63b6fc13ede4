package decoders

import (
	"bytes"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	gfsflow "github.com/netsampler/goflow2/v2/decoders/sflow"
	"github.com/netsampler/goflow2/v2/producer"
	protoproducer "github.com/netsampler/goflow2/v2/producer/proto"

	"flowzero/decoder/sflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
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

// The machine is shared and noisy: wall-clock ns/flow include the time other processes hold
// the core. Both implementations also report cpu-ns/flow, the CPU time of the benchmark's own
// thread (CLOCK_THREAD_CPUTIME_ID) per flow, which only counts the time the loop ran (and so
// leaves out GoFlow2's garbage collection on other threads: it favours GoFlow2).
const sflowClockThreadCPUTime = 3

func sflowThreadCPUTime() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, sflowClockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// sflowReport reports ns/flow (wall clock) and cpu-ns/flow.
func sflowReport(b *testing.B, flows int, cpu int64) {
	if flows == 0 {
		b.Fatal("no flow decoded")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(flows), "ns/flow")
	b.ReportMetric(float64(cpu)/float64(flows), "cpu-ns/flow")
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
	cpu := sflowThreadCPUTime()
	for b.Loop() {
		if err := d.Decode(pkt, fm, emit); err != nil {
			b.Fatal(err)
		}
	}
	cpu = sflowThreadCPUTime() - cpu
	b.StopTimer()
	if size == 0 {
		b.Fatal("nothing encoded")
	}
	sflowReport(b, flows, cpu)
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
	cpu := sflowThreadCPUTime()
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
	cpu = sflowThreadCPUTime() - cpu
	b.StopTimer()
	if size == 0 {
		b.Fatal("nothing encoded")
	}
	sflowReport(b, flows, cpu)
}
