package inlet

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/demo"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
)

// BenchmarkInletForward hands the datagrams of a NetFlow v9 capture to the inlet as a socket's
// worker does: the worker thread's CPU per datagram (cpu-ns/op: header, copy into a recycled
// record, hand-off to the producer) and its allocations. The producer's own goroutines
// (batching, compression, the broker connection) run on other threads: the whole inlet's CPU
// per datagram is measured by `make bench-collector-split`. The broker is
// franz-go's in-process fake, or the real one of FLOWZERO_KAFKA_BROKERS when set.
func BenchmarkInletForward(b *testing.B) {
	dgs, err := pcapfile.ReadUDP(testdata.Path(b, "netflow", "data.pcap"))
	if err != nil {
		b.Fatal(err)
	}
	payload := dgs[0].Payload
	topic := kfakeTopic(b, 8)
	if v := os.Getenv("FLOWZERO_KAFKA_BROKERS"); v != "" {
		topic.Brokers = strings.Split(v, ",")
		topic.Topic = "bench-inlet"
	}
	cfg := DefaultConfiguration()
	in, err := New(prometheus.NewRegistry(), nil, topic, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := in.Start(); err != nil {
		b.Fatal(err)
	}
	defer in.Stop()
	testutil.WaitUntil(b, "the topic to exist", in.ready.Load)
	ap := netip.MustParseAddrPort("192.0.2.1:2055")
	now := testutil.Now()
	for range 10000 { // warm the record pool
		in.Forward(payload, ap, now, "netflow")
	}
	testutil.WaitUntil(b, "the warm-up to be delivered", func() bool { s, dl, _ := in.Counts(); return dl == s })
	b.SetBytes(int64(len(payload)))
	cpu := testutil.StartCPU(b)
	for range b.N {
		in.Forward(payload, ap, now, "netflow")
	}
	cpu.Stop(b)
}

// BenchmarkInletBatch is BenchmarkInletForward for the collector's workers, which pack the
// datagrams of each read (16 here) into one batch record: CPU per datagram of the worker
// thread and its allocations.
func BenchmarkInletBatch(b *testing.B) {
	dgs, err := pcapfile.ReadUDP(testdata.Path(b, "netflow", "data.pcap"))
	if err != nil {
		b.Fatal(err)
	}
	payload := dgs[0].Payload
	topic := kfakeTopic(b, 8)
	if v := os.Getenv("FLOWZERO_KAFKA_BROKERS"); v != "" {
		topic.Brokers = strings.Split(v, ",")
		topic.Topic = "bench-inlet"
	}
	in, err := New(prometheus.NewRegistry(), nil, topic, DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	if err := in.Start(); err != nil {
		b.Fatal(err)
	}
	defer in.Stop()
	testutil.WaitUntil(b, "the topic to exist", in.ready.Load)
	ap := netip.MustParseAddrPort("192.0.2.1:2055")
	now := testutil.Now()
	batch := in.NewBatch()
	forward := func(n int) {
		for k := range n {
			batch.Add(payload, ap, now, "netflow")
			if k%16 == 15 {
				batch.Send(now, false)
			}
		}
		batch.Send(now, true)
	}
	forward(10000) // warm the record pool
	testutil.WaitUntil(b, "the warm-up to be delivered", func() bool { s, dl, _ := in.Counts(); return dl == s })
	b.SetBytes(int64(len(payload)))
	cpu := testutil.StartCPU(b)
	forward(b.N)
	cpu.Stop(b)
}

// BenchmarkRecordCompression compresses batch records as the inlet produces them (the demo's
// NetFlow v9 datagrams packed up to batch-bytes, 64 KiB) with franz-go's compressor for each
// inlet.compression: the producer's CPU per datagram for it (ns/dgram) and the bytes left
// (ratio, compressed / uncompressed). Single goroutine: wall time is CPU time.
func BenchmarkRecordCompression(b *testing.B) {
	path := filepath.Join(b.TempDir(), "demo.pcap")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := demo.WritePcap(f, "netflow-v9", 100000, 1, testutil.Now()); err != nil {
		b.Fatal(err)
	}
	f.Close()
	dgs, err := pcapfile.ReadUDP(path)
	if err != nil {
		b.Fatal(err)
	}
	type record struct {
		value     []byte
		datagrams int
	}
	var records []record
	cur := record{value: datagram.AppendBatch(nil)}
	at := testutil.Now()
	for _, dg := range dgs {
		at = at.Add(time.Millisecond)
		d := datagram.Datagram{Received: at, Exporter: dg.Src, Protocol: datagram.NetFlow, Payload: dg.Payload}
		if len(cur.value)+datagram.EntryLen(d) > DefaultConfiguration().BatchBytes {
			records = append(records, cur)
			cur = record{value: datagram.AppendBatch(nil)}
		}
		cur.value = datagram.AppendEntry(cur.value, d)
		cur.datagrams++
	}
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		c, err := kgo.DefaultCompressor(codec.codec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(codec.name, func(b *testing.B) {
			var buf bytes.Buffer
			in, out, datagrams := 0, 0, 0
			for i := range b.N {
				r := records[i%len(records)]
				buf.Reset()
				z, _ := c.Compress(&buf, r.value)
				in, out, datagrams = in+len(r.value), out+len(z), datagrams+r.datagrams
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(datagrams), "ns/dgram")
			b.ReportMetric(float64(out)/float64(in), "ratio")
		})
	}
}
