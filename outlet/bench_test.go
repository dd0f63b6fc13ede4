package outlet

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/clock"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// discardSink takes batches and counts their flows.
type discardSink struct{ flows int }

func (d *discardSink) Name() string { return "discard" }
func (d *discardSink) Send(b *output.Batch) bool {
	d.flows += b.Flows
	b.Release()
	return true
}
func (d *discardSink) Start() error { return nil }
func (d *discardSink) Stop() error  { return nil }

// BenchmarkOutletHandle runs datagram records of NetFlow v9 (data.pcap, 4 flows, after its
// templates) through the outlet's path — record header, decode, flow identity, finalize,
// batching, hand-off to a sink — without Kafka: the counterpart of the collector's
// BenchmarkWorkerHandle (mode all), for the CPU a split adds per flow on the decoding side.
// The consumer's own cost (fetching, decompressing) is not in it.
func BenchmarkOutletHandle(b *testing.B) {
	sink := &discardSink{}
	o, nf := newOffline(b, netflow.DefaultConfiguration(), DefaultConfiguration(), sink, nil)
	nf.SetObserver(nil) // no state topic to publish to
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	now := testutil.Now()
	rec := &kgo.Record{Partition: 3}
	for _, name := range []string{"options-template", "options-data", "template", "data"} {
		dgs, err := pcapfile.ReadUDP(testdata.Path(b, "netflow", name+".pcap"))
		if err != nil {
			b.Fatal(err)
		}
		rec.Value = datagram.Append(rec.Value[:0], datagram.Datagram{Received: now, Exporter: from, Protocol: datagram.NetFlow, Payload: dgs[0].Payload})
		o.handle(rec)
		rec.Offset++
	}
	cpu := testutil.StartCPU(b)
	for i := 0; i < b.N; i++ {
		o.handle(rec)
		rec.Offset++
	}
	b.StopTimer()
	cpu.Stop(b)
	o.sendBatch()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(4*b.N), "ns/flow")
	if sink.flows < 4*b.N {
		b.Fatalf("sink got %d flows, want at least %d", sink.flows, 4*b.N)
	}
}

// newOffline returns an outlet and its NetFlow decoder for tests and benchmarks that hand it
// records directly: it is never started, so its client never contacts the broker. The schema
// has the flow identity columns; clk nil is the system clock.
func newOffline(tb testing.TB, ncfg netflow.Configuration, cfg Configuration, sink output.Sink, clk clock.Clock) (*Outlet, *netflow.Decoder) {
	tb.Helper()
	s, err := schema.New(schema.Configuration{Enabled: []string{"DatagramPartition", "DatagramOffset", "DatagramIndex"}})
	if err != nil {
		tb.Fatal(err)
	}
	nf, err := netflow.New(nil, ncfg, s)
	if err != nil {
		tb.Fatal(err)
	}
	sf, err := sflow.New(nil, sflow.DefaultConfiguration(), s)
	if err != nil {
		tb.Fatal(err)
	}
	topic := datagram.DefaultTopicConfiguration()
	topic.Brokers = []string{"127.0.0.1:1"} // never contacted: no Start
	o, err := New(topic, cfg, Dependencies{Schema: s, NetFlow: nf, SFlow: sf, Sinks: []output.Sink{sink},
		Registry: prometheus.NewRegistry(), Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(o.client.Close)
	return o, nf
}
