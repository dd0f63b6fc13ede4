package collector

import (
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
	"flowzero/schema"
)

// v9Datagram is a NetFlow v9 export packet (RFC 3954 §5.1) from source ID 1: template 256 of
// two 4-byte fields when withTemplate, then a data flowset of flows records of that template.
func v9Datagram(withTemplate bool, flows int) []byte {
	p := binary.BigEndian.AppendUint16(nil, 9)
	p = append(p, make([]byte, 14)...) // count, uptime, seconds, sequence
	p = binary.BigEndian.AppendUint32(p, 1)
	if withTemplate {
		p = append(p, 0, 0, 0, 16, 1, 0, 0, 2, 0, 8, 0, 4, 0, 12, 0, 4)
	}
	if flows > 0 {
		p = binary.BigEndian.AppendUint16(p, 256)
		p = binary.BigEndian.AppendUint16(p, uint16(4+8*flows))
		p = append(p, make([]byte, 8*flows)...)
	}
	return p
}

// TestFlowCounterCaptures: on every capture of the test data, read exporter by exporter in
// capture order, the counter finds exactly the flows the decoders emit (`flowzero decode`).
func TestFlowCounterCaptures(t *testing.T) {
	captures := testdata.AllCaptures(t)
	s := schema.DefaultConfiguration()
	total := 0
	for _, path := range captures {
		dgs, err := pcapfile.ReadUDP(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := replay.Decode(replay.Decoders{Schema: s, NetFlow: netflow.DefaultConfiguration(), SFlow: sflow.DefaultConfiguration()}, []string{path}, replay.DecodeOptions{}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		counters := map[string]*flowCounter{}
		got := 0
		for _, dg := range dgs {
			c := counters[dg.Src.String()]
			if c == nil {
				c = &flowCounter{}
				counters[dg.Src.String()] = c
			}
			n, _ := c.count(dg.Payload)
			got += n
		}
		name := filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
		total += got
		if got != want.Flows {
			t.Errorf("%s: counted %d flows, the decoders emit %d", name, got, want.Flows)
		}
	}
	if total == 0 {
		t.Fatal("no flow in the captures")
	}
}

// TestCollectorForwardRateLimit: in an inlet (a Forwarder, no decoder) the exporter's rate
// limit takes the flows each datagram holds from its bucket: with 100 flows per second,
// datagrams of 30 flows at one instant pass three times, the next ones are dropped whole and
// their flows counted; a datagram defining templates always passes; a second later the
// bucket is full again, and a datagram of more than a second's flows passes on a full bucket.
func TestCollectorForwardRateLimit(t *testing.T) {
	clk := newManualClock()
	fw := &recordingForwarder{}
	c, _, _ := startTestCollector(t, func(cfg *Configuration) {
		cfg.Exporters.RateLimit = 100
	}, func(d *Dependencies) {
		d.Forward, d.Decoders, d.Clock = fw, nil, clk
	}, nil)
	defer c.Stop()
	limited := c.metrics.dropped.WithLabelValues("exporter", "rate-limited")
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(c.ListenAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// write sends a datagram and waits until it is forwarded or its flows are counted as
	// rate-limited: the exporter's datagram count is taken before either.
	write := func(p []byte) {
		t.Helper()
		forwarded, dropped := fw.count(), promtest.ToFloat64(limited)
		if _, err := conn.Write(p); err != nil {
			t.Fatal(err)
		}
		testutil.WaitUntil(t, "the datagram forwarded or rate-limited", func() bool {
			return fw.count() > forwarded || promtest.ToFloat64(limited) > dropped
		})
	}
	write(v9Datagram(true, 0)) // the template: no flow
	for range 5 {
		write(v9Datagram(false, 30))
	}
	write(v9Datagram(true, 30)) // templates and data, on an empty bucket
	if got, n := fw.count(), promtest.ToFloat64(limited); got != 5 || n != 60 {
		t.Fatalf("%d datagrams forwarded and %v flows rate-limited, want 5 and 60", got, n)
	}
	clk.Advance(time.Second)
	write(v9Datagram(false, 30))
	write(v9Datagram(false, 80)) // 70 tokens left
	clk.Advance(time.Second)
	write(v9Datagram(false, 250)) // more than a second's worth, on a full bucket
	write(v9Datagram(false, 1))   // the bucket is empty
	if got, n := fw.count(), promtest.ToFloat64(limited); got != 7 || n != 60+80+1 {
		t.Errorf("%d datagrams forwarded and %v flows rate-limited, want 7 and %d", got, n, 60+80+1)
	}
}

// FuzzFlowCounter: any datagram is counted without a panic or a read past it, and a
// datagram never counts more flows than it has room for (a flow takes at least a byte).
func FuzzFlowCounter(f *testing.F) {
	f.Add(v9Datagram(true, 3))
	f.Add(v9Datagram(false, 2))
	for _, path := range testdata.AllCaptures(f) {
		if dgs, err := pcapfile.ReadUDP(path); err == nil {
			for _, dg := range dgs {
				f.Add(dg.Payload)
			}
		}
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		c := &flowCounter{}
		for range 2 { // the second time with the templates of the first
			if n, _ := c.count(p); n < 0 || n > len(p) {
				t.Fatalf("%d flows in %d bytes", n, len(p))
			}
		}
	})
}

// BenchmarkFlowCounter: counting a NetFlow v9 data datagram of 30 flows allocates nothing.
func BenchmarkFlowCounter(b *testing.B) {
	c := &flowCounter{}
	c.count(v9Datagram(true, 0))
	p := v9Datagram(false, 30)
	b.ReportAllocs()
	for b.Loop() {
		if n, _ := c.count(p); n != 30 {
			b.Fatal(n)
		}
	}
}
