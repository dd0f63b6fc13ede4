package collector

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/netflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// netflowDecoder is the adapter app gives the collector, for the benchmark.
type netflowDecoder struct{ d *netflow.Decoder }

func (n netflowDecoder) Decode(payload []byte, exporter netip.AddrPort, received time.Time, fm *schema.FlowMessage, emit func(*schema.FlowMessage)) error {
	return n.d.Decode(netflow.Packet{Payload: payload, Exporter: exporter, TimeReceived: received}, fm, emit)
}

type discardSink struct{ flows int }

func (d *discardSink) Name() string { return "discard" }
func (d *discardSink) Start() error { return nil }
func (d *discardSink) Stop() error  { return nil }
func (d *discardSink) Send(b *output.Batch) bool {
	d.flows += b.Flows
	b.Release()
	return true
}

// BenchmarkWorkerHandle runs NetFlow v9 datagrams (data.pcap, 4 flows, after its templates)
// through a worker's whole path — exporter lookup, decode, finalize, batching, hand-off to a
// sink — without the socket: 0 allocations per datagram.
func BenchmarkWorkerHandle(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	nf, err := netflow.New(nil, netflow.DefaultConfiguration(), s)
	if err != nil {
		b.Fatal(err)
	}
	sink := &discardSink{}
	cfg := DefaultConfiguration()
	cfg.Listeners = nil
	cfg.HTTP.Listen = ""
	c, err := New(cfg, Dependencies{Schema: s, Decoders: map[string]Decoder{}, Sinks: []output.Sink{sink}, Registry: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	w := newWorker(c, 0, "bench", "0", nil, netflowDecoder{nf}, "netflow")
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	var data []byte
	for _, name := range []string{"options-template", "options-data", "template", "data"} {
		dgs, err := pcapfile.ReadUDP(testdata.Path(b, "netflow", name+".pcap"))
		if err != nil {
			b.Fatal(err)
		}
		w.now = time.Now()
		w.handle(dgs[0].Payload, from)
		data = dgs[0].Payload
	}
	cpu := testutil.StartCPU(b)
	for i := 0; i < b.N; i++ {
		w.now = time.Now()
		w.handle(data, from)
	}
	b.StopTimer()
	cpu.Stop(b)
	w.flushAll()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(4*b.N), "ns/flow")
	if sink.flows < 4*b.N {
		b.Fatalf("sink got %d flows, want at least %d", sink.flows, 4*b.N)
	}
}

func TestWorkerHandleNoAllocs(t *testing.T) {
	res := testing.Benchmark(BenchmarkWorkerHandle)
	if res.N == 0 {
		t.Skip("benchmark did not run (no test data?)")
	}
	if a := res.AllocsPerOp(); a != 0 {
		t.Fatalf("%d allocations per datagram on the collector's path, want 0", a)
	}
}

// BenchmarkWorkerRefused runs datagrams from sources outside the allow-list (each from its
// own address, as in a spoofed flood) through workers in parallel, one worker per
// goroutine as with SO_REUSEPORT: 0 allocations, and after the first window's log lines no
// lock shared by the workers (run with -mutexprofile to check).
func BenchmarkWorkerRefused(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.Listeners = nil
	cfg.HTTP.Listen = ""
	cfg.Exporters.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	c, err := New(cfg, Dependencies{Schema: s, Decoders: map[string]Decoder{}, Sinks: []output.Sink{&discardSink{}},
		Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte("1:80")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := newWorker(c, 0, "bench", "0", nil, fakeDecoder{}, "netflow")
		var a [4]byte
		for i := uint32(0); pb.Next(); i++ {
			binary.BigEndian.PutUint32(a[:], 0x0a000000+i&0xffffff) // 10.0.0.0/8
			w.now = time.Now()
			w.handle(payload, netip.AddrPortFrom(netip.AddrFrom4(a), 2055))
		}
		if len(w.exporters) != 0 {
			b.Errorf("worker holds %d exporters for refused sources", len(w.exporters))
		}
	})
}
