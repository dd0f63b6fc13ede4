//go:build integration

package app

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"flowzero/demo"
	"flowzero/internal/kafkatest"
	"flowzero/internal/testutil"
	"flowzero/output/file"
	"flowzero/output/jsonl"
	"flowzero/replay"
	"flowzero/schema"
)

// teeExporter stands between one demo exporter and the inlet: it records every datagram the
// exporter sends, in order, and forwards it from a socket of its own (the exporter address
// the inlet sees).
type teeExporter struct {
	in, out *net.UDPConn
	to      netip.AddrPort
	mu      sync.Mutex
	sent    [][]byte
}

func newTee(t *testing.T, to netip.AddrPort) *teeExporter {
	in, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	out, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatal(err)
	}
	in.SetReadBuffer(8 << 20)
	tee := &teeExporter{in: in, out: out, to: to}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := in.Read(buf)
			if err != nil {
				return
			}
			p := append([]byte(nil), buf[:n]...)
			if _, err := out.Write(p); err != nil {
				t.Errorf("tee to %s: %v", to, err)
				continue
			}
			tee.mu.Lock()
			tee.sent = append(tee.sent, p)
			tee.mu.Unlock()
		}
	}()
	t.Cleanup(func() { in.Close(); out.Close() })
	return tee
}

func (tee *teeExporter) addr() netip.AddrPort { return tee.in.LocalAddr().(*net.UDPAddr).AddrPort() }
func (tee *teeExporter) from() netip.AddrPort { return tee.out.LocalAddr().(*net.UDPAddr).AddrPort() }

func (tee *teeExporter) count() int {
	tee.mu.Lock()
	defer tee.mu.Unlock()
	return len(tee.sent)
}

// writePcap writes what the tees forwarded as a capture taken in front of the inlet
// (Ethernet, IPv4, UDP from each tee's socket), the input of `flowzero decode`.
func writePcap(t *testing.T, path string, tees []*teeExporter) int {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	at := testutil.Now()
	n := 0
	for _, tee := range tees {
		from := tee.from()
		for _, p := range tee.sent {
			eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
			ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: from.Addr().AsSlice(), DstIP: tee.to.Addr().AsSlice()}
			udp := &layers.UDP{SrcPort: layers.UDPPort(from.Port()), DstPort: layers.UDPPort(tee.to.Port())}
			udp.SetNetworkLayerForChecksum(ip)
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(p)); err != nil {
				t.Fatal(err)
			}
			at = at.Add(time.Microsecond)
			if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: at, CaptureLength: len(buf.Bytes()), Length: len(buf.Bytes())}, buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// TestSplitDemoExporters: the demo exporters of `make run` (NetFlow v9, IPFIX, sFlow, a fixed
// seed) send to one inlet's listeners (NetFlow through AF_PACKET rings, sFlow through sockets), which spreads the datagrams at random over 6
// partitions; three outlets decode them into their file output and the Kafka flows topic.
// On `make test`'s cluster every topic has replication factor 3 (min.insync.replicas 2). What
// the exporters sent is recorded on the way and decoded offline as `flowzero decode` does: the
// multiset of flows (every column but the receive time, which the inlet stamps, and the flow
// identity, which only the split has) stored in the files, and the one in the flows topic,
// both equal it exactly.
func TestSplitDemoExporters(t *testing.T) {
	st := newSplitTopics(t, 6)
	prefix := st.datagrams + "-flows"
	withOutputs := func(mode string) Configuration {
		cfg := st.config(t, mode)
		cfg.Outputs.Kafka.Enabled = true
		cfg.Outputs.Kafka.Brokers = st.brokers
		cfg.Outputs.Kafka.TopicPrefix = prefix
		cfg.Outputs.Kafka.ReplicationFactor = max(st.rf, 1)
		cfg.Outputs.Kafka.Partitions = 3
		cfg.Outputs.Kafka.Linger = 5 * time.Millisecond
		// An outlet holds an exporter's data until the state topic brings its template:
		// sized for that latency on a loaded machine (the default 32 sets overflowed,
		// counted as pending-full; docs/scaling.md).
		cfg.NetFlow.PendingSets, cfg.NetFlow.PendingBytes = 4096, 8<<20
		return cfg
	}
	var outlets []*App
	var dirs []string
	for range 3 {
		cfg := withOutputs(ModeOutlet)
		dirs = append(dirs, cfg.Outputs.File.Directory)
		outlets = append(outlets, startApp(t, cfg))
	}
	st.waitOutlets(t, outlets)
	icfg := st.config(t, ModeInlet)
	for i := range icfg.Collector.Listeners {
		// Bursts of the exporters' 100 ms ticks must wait in the socket, not be dropped by
		// the kernel, when the race detector slows the workers.
		icfg.Collector.Listeners[i].ReceiveBuffer = 16 << 20
	}
	// The NetFlow listener reads AF_PACKET rings (receive: af-packet), the sFlow one its UDP
	// sockets: both ways into an inlet, checked against the same offline decoding.
	if fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0); err != nil {
		t.Logf("the NetFlow listener reads UDP sockets: AF_PACKET needs CAP_NET_RAW (%v)", err)
	} else {
		unix.Close(fd)
		l := &icfg.Collector.Listeners[0]
		l.Receive, l.Interface, l.BlockTimeout = "af-packet", "lo", 2*time.Millisecond
	}
	in := startApp(t, icfg)
	addrs := in.Collector().ListenAddrs() // netflow (NetFlow v9 and IPFIX), sflow
	tees := []*teeExporter{newTee(t, addrs[0]), newTee(t, addrs[0]), newTee(t, addrs[1])}

	dcfg := demo.DefaultConfiguration()
	dcfg.NetFlow, dcfg.IPFIX, dcfg.SFlow = tees[0].addr(), tees[1].addr(), tees[2].addr()
	dcfg.FlowsPerSecond = 2000
	dcfg.Seed = 27
	dcfg.Clock = testutil.Clock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // how long the exporters run
	stats, err := demo.Run(ctx, dcfg)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the tees to forward every datagram", func() bool {
		return tees[0].count()+tees[1].count()+tees[2].count() == stats.Datagrams
	})
	if !testutil.Poll(testutil.WaitTimeout, func() bool {
		s, delivered, dropped := in.Inlet().Counts()
		return s == int64(stats.Datagrams) && delivered+dropped == s
	}) {
		s, delivered, dropped := in.Inlet().Counts()
		t.Fatalf("the exporters sent %d datagrams; the inlet took %d, delivered %d, dropped %d", stats.Datagrams, s, delivered, dropped)
	}
	if _, _, dropped := in.Inlet().Counts(); dropped != 0 {
		t.Fatalf("the inlet dropped %d datagrams", dropped)
	}

	// Offline: the recorded datagrams through `flowzero decode`'s code.
	cfg := withOutputs(ModeOutlet)
	s, err := schema.New(cfg.Schema)
	if err != nil {
		t.Fatal(err)
	}
	var columns []string
	for _, c := range s.Columns() {
		switch c.Key {
		case schema.ColumnTimeReceived, schema.ColumnDatagramPartition, schema.ColumnDatagramOffset, schema.ColumnDatagramIndex:
		default:
			columns = append(columns, c.Name)
		}
	}
	pcap := filepath.Join(t.TempDir(), "demo.pcap")
	if n := writePcap(t, pcap, tees); n != stats.Datagrams {
		t.Fatalf("%d datagrams recorded, the exporters sent %d", n, stats.Datagrams)
	}
	var offline strings.Builder
	sum, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, []string{pcap},
		replay.DecodeOptions{Columns: columns}, &offline)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Errors) != 0 || sum.Flows != stats.Flows {
		t.Fatalf("offline: %d flows of the %d sent, errors %v", sum.Flows, stats.Flows, sum.Errors)
	}
	want := map[string]int{}
	for _, line := range strings.SplitAfter(offline.String(), "\n") {
		if line != "" {
			want[line]++
		}
	}

	decoded := func() (d, f int64) {
		for _, o := range outlets {
			dd, ff := o.Outlet().Counts()
			d, f = d+dd, f+ff
		}
		return d, f
	}
	if !testutil.Poll(testutil.WaitTimeout, func() bool { _, f := decoded(); return f >= int64(sum.Flows) }) {
		d, f := decoded()
		t.Errorf("the outlets decoded %d datagrams and %d flows, want %d and %d", d, f, stats.Datagrams, sum.Flows)
		for i, o := range outlets {
			mfs, _ := o.registry.Gather()
			for _, mf := range mfs {
				if n := mf.GetName(); strings.Contains(n, "held") || strings.Contains(n, "pending") || strings.Contains(n, "error") || strings.Contains(n, "stale") {
					for _, m := range mf.GetMetric() {
						v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
						if v != 0 {
							t.Logf("outlet %d: %s %v = %v", i, n, m.GetLabel(), v)
						}
					}
				}
			}
		}
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, o := range outlets {
		if err := o.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := jsonl.New(s, columns)
	if err != nil {
		t.Fatal(err)
	}
	format := func(into map[string]int, msg []byte) {
		line, err := f.Append(nil, msg)
		if err != nil {
			t.Fatalf("stored flow: %v", err)
		}
		into[string(line)]++
	}
	archived := map[string]int{}
	for _, dir := range dirs {
		paths, err := file.ListArchives(dir, "flows")
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			r, err := file.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for {
				msg, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				format(archived, msg)
			}
			r.Close()
		}
	}
	topic, rf := flowsTopic(t, prefix)
	inTopic := map[string]int{}
	cons := kafkatest.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	adm := kadm.NewClient(kafkatest.Client(t))
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var records int64
	ends.Each(func(o kadm.ListedOffset) { records += o.Offset })
	pctx, pcancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer pcancel()
	for read := int64(0); read < records; {
		fs := cons.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			t.Fatalf("flows topic: read %d of %d records: %v", read, records, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			for b := r.Value; len(b) > 0; {
				l, n := binary.Uvarint(b)
				if n <= 0 || uint64(len(b)-n) < l {
					t.Fatalf("flows topic: malformed record at offset %d", r.Offset)
				}
				format(inTopic, b[n:n+int(l)])
				b = b[n+int(l):]
			}
		})
	}

	t.Logf("demo exporters for 3 s: %d datagrams, %d flows sent; offline %d flows (%d distinct); file outputs %d flows, flows topic %d flows (replication factor %d); topics' replication factor %d",
		stats.Datagrams, stats.Flows, sum.Flows, len(want), total(archived), total(inTopic), rf, st.rf)
	for name, got := range map[string]map[string]int{"file outputs": archived, "flows topic": inTopic} {
		if diff := multisetDiff(want, got); diff != "" {
			t.Errorf("%s differ from the offline decode (- offline, + stored):\n%s", name, diff)
		}
	}
	if rf != int(max(st.rf, 1)) {
		t.Errorf("flows topic: replication factor %d, want %d", rf, st.rf)
	}
}

// flowsTopic finds the flows topic named with prefix and returns its replication factor.
func flowsTopic(t *testing.T, prefix string) (string, int) {
	adm := kadm.NewClient(kafkatest.Client(t))
	md, err := adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, td := range md {
		if strings.HasPrefix(name, prefix+"-") {
			t.Cleanup(func() { adm.DeleteTopics(context.Background(), name) })
			return name, len(td.Partitions[0].Replicas)
		}
	}
	t.Fatalf("no flows topic %s-*", prefix)
	return "", 0
}

func total(m map[string]int) (n int) {
	for _, c := range m {
		n += c
	}
	return n
}

// multisetDiff lists up to 5 flows missing and 5 flows in excess, and the totals.
func multisetDiff(want, got map[string]int) string {
	var missing, extra []string
	for k, w := range want {
		if g := got[k]; g < w {
			missing = append(missing, fmt.Sprintf("-%d +%d %s", w, g, strings.TrimSpace(k)))
		}
	}
	for k, g := range got {
		if w := want[k]; g > w {
			extra = append(extra, fmt.Sprintf("-%d +%d %s", w, g, strings.TrimSpace(k)))
		}
	}
	if len(missing)+len(extra) == 0 {
		return ""
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return fmt.Sprintf("%d flows missing, %d in excess (totals %d offline, %d stored):\n%s\n%s", len(missing), len(extra), total(want), total(got),
		strings.Join(missing[:min(5, len(missing))], "\n"), strings.Join(extra[:min(5, len(extra))], "\n"))
}
