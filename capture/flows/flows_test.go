package flows

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"flowzero/decoder/packet"
	"flowzero/decoder/packet/flowtest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/pbwire"
	"flowzero/schema"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// allCaptures returns every .pcap file under the shared test data.
func allCaptures(t testing.TB) []string { return testdata.AllCaptures(t) }

type flowCollector struct {
	mu   sync.Mutex
	s    *schema.Schema
	msgs [][]byte
}

func (c *flowCollector) emit(fm *schema.FlowMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, bytes.Clone(fm.Finalize()))
}

func (c *flowCollector) flows(t testing.TB) []flowtest.Flow {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []flowtest.Flow
	for _, m := range c.msgs {
		f, err := flowtest.Decode(c.s, m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func flowID(iface uint64, src, dst netip.Addr, proto, sport, dport uint64) string {
	return fmt.Sprintf("%d %s %s %d %d %d", iface, src, dst, proto, sport, dport)
}

// TestFlowsFromCaptures replays every capture with flows enabled and long timeouts: one flow
// per interface and 5-tuple, whose counters match what gopacket counts in the files.
func TestFlowsFromCaptures(t *testing.T) {
	files := allCaptures(t)
	agg, fc := newLongAggregator(t)
	sch := fc.s
	s := startFlowServer(t, agg, nil)
	replayAgent(t, s, "flowagent", files)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	// What the files hold, counted with gopacket: packets and IP bytes per interface (file
	// index + 1) and outer 5-tuple.
	type counters struct{ packets, bytes uint64 }
	want := map[string]*counters{}
	for i, path := range files {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range frames {
			if fr.LinkType != layers.LinkTypeEthernet {
				continue
			}
			f := flowFacts(fr.Data)
			if !f.src.IsValid() {
				continue
			}
			l3 := f.l3
			id := flowID(uint64(i+1), f.src, f.dst, uint64(f.proto), uint64(f.srcPort), uint64(f.dstPort))
			if want[id] == nil {
				want[id] = &counters{}
			}
			want[id].packets++
			want[id].bytes += l3
		}
	}
	flows := fc.flows(t)
	if len(flows) != len(want) {
		t.Errorf("%d flows, want %d", len(flows), len(want))
		seen := map[string]bool{}
		for _, f := range flows {
			u := func(name string) uint64 { v, _ := f[name].(uint64); return v }
			src, _ := f["SrcAddr"].(netip.Addr)
			dst, _ := f["DstAddr"].(netip.Addr)
			seen[flowID(u("InIf"), src, dst, u("Proto"), u("SrcPort"), u("DstPort"))] = true
		}
		for id := range want {
			if !seen[id] {
				t.Logf("missing %s %+v", id, *want[id])
			}
		}
	}
	multi := 0
	for _, f := range flows {
		u := func(name string) uint64 { v, _ := f[name].(uint64); return v }
		src, _ := f["SrcAddr"].(netip.Addr)
		dst, _ := f["DstAddr"].(netip.Addr)
		id := flowID(u("InIf"), src, dst, u("Proto"), u("SrcPort"), u("DstPort"))
		w := want[id]
		if w == nil {
			t.Fatalf("unexpected flow %s: %v", id, f)
		}
		if u("Packets") != w.packets || u("Bytes") != w.bytes || u("SamplingRate") != 1 {
			t.Fatalf("flow %s: %d packets %d bytes (rate %d), want %d and %d", id, u("Packets"), u("Bytes"), u("SamplingRate"), w.packets, w.bytes)
		}
		if name, _ := f["ExporterName"].(string); sch.Enabled(schema.ColumnExporterName) && name != "flowagent" {
			t.Fatalf("flow %s: exporter name %q", id, name)
		}
		if ea, _ := f["ExporterAddress"].(netip.Addr); ea != netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("flow %s: exporter address %v", id, ea)
		}
		if w.packets > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Fatal("no flow aggregated several packets: the test does not exercise aggregation")
	}
	if st := agg.Stats("flowagent"); st.Flows != uint64(len(flows)) || st.Packets == 0 {
		t.Fatalf("flow stats %+v", st)
	}
}

// TestFlowTimeouts drives a flow table with packet times: idle flows leave after the idle
// timeout, long ones are cut every active timeout.
func TestFlowTimeouts(t *testing.T) {
	sch, parser := testSchemaParser(t)
	fc := &flowCollector{s: sch}
	table := newFlowTable(DefaultConfiguration(), parser, sch, fc.emit, "t")
	// Real frames: two different flows from the captures.
	var a, b []byte
	for _, path := range allCaptures(t) {
		frames, _ := pcapfile.ReadFrames(path)
		for _, fr := range frames {
			if _, _, _, ok := extractFlowKey(fr.Data, 1, len(fr.Data)); ok && fr.LinkType == layers.LinkTypeEthernet {
				if a == nil {
					a = fr.Data
				} else if k, _, _, _ := extractFlowKey(fr.Data, 1, len(fr.Data)); b == nil && k != mustKey(t, a) {
					b = fr.Data
				}
			}
		}
	}
	sec := int64(time.Second)
	base := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC).UnixNano()
	for i := range 3 {
		table.add(0, 1, base+int64(i)*sec, len(a), a) // a at 0, 1, 2 s
	}
	for i := range 90 {
		table.add(0, 1, base+int64(20+i)*sec, len(b), b) // b every second from 20 s to 109 s
	}
	table.expire(true)
	flows := fc.flows(t)
	var got []string
	for _, f := range flows {
		got = append(got, fmt.Sprintf("%v packets, last at +%ds", f["Packets"], int64(f["TimeReceived"].(uint64))-base/sec))
	}
	sort.Strings(got)
	// a leaves idle (exported once b's clock passes 17 s); b is cut at the active timeout
	// (60 s after its first packet, at 80 s), then the rest at Stop.
	want := []string{"29 packets, last at +109s", "3 packets, last at +2s", "61 packets, last at +80s"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("flows %v, want %v", got, want)
	}
	if table.stats.Flows != 3 || len(table.index) != 0 {
		t.Fatalf("stats %+v, %d flows left", table.stats, len(table.index))
	}

	// A live capture gone quiet: packet time stops, the wall clock exports the flows.
	table.Packet(0, 1, base, 0, a)
	wall := testutil.Now()
	table.Tick(wall, false)
	table.Tick(wall.Add(10*time.Second), false)
	if len(table.index) != 1 {
		t.Fatal("flow exported before the idle timeout")
	}
	table.Tick(wall.Add(16*time.Second), false)
	if len(table.index) != 0 || table.stats.Flows != 4 {
		t.Fatalf("quiet flow not exported: %+v", table.stats)
	}
}

func mustKey(t testing.TB, data []byte) flowKey {
	k, _, _, ok := extractFlowKey(data, 1, len(data))
	if !ok {
		t.Fatal("not IP")
	}
	return k
}

func TestFlowTableZeroAlloc(t *testing.T) {
	sch, _ := schema.New(schema.DefaultConfiguration())
	parser, _ := packet.New(packet.DefaultConfiguration())
	table := newFlowTable(DefaultConfiguration(), parser, sch, func(*schema.FlowMessage) {}, "t")
	frames, err := pcapfile.ReadFrames(filepath.Join(allCapturesRoot(t), "bmp", "bmp-reach.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	ts := testutil.Now().UnixNano()
	for _, fr := range frames {
		table.add(0, 1, ts, fr.Length, fr.Data)
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, fr := range frames {
			table.add(0, 1, ts, fr.Length, fr.Data)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

func allCapturesRoot(t testing.TB) string {
	files := allCaptures(t)
	return filepath.Dir(filepath.Dir(files[0]))
}

type flowFact struct {
	proto            uint8
	src, dst         netip.Addr
	hasPorts         bool
	srcPort, dstPort uint16
	l3               uint64
}

// flowFacts decodes the outer IP packet of an Ethernet frame with gopacket, through VLAN tags
// and IPv6 extension headers, as a flow exporter keys it.
func flowFacts(data []byte) flowFact {
	var f flowFact
	pkt := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.Default)
	var proto layers.IPProtocol
	seenIP := false
	for _, l := range pkt.Layers() {
		switch l := l.(type) {
		case *layers.IPv4:
			if seenIP {
				break
			}
			seenIP = true
			f.src, _ = netip.AddrFromSlice(l.SrcIP.To4())
			f.dst, _ = netip.AddrFromSlice(l.DstIP.To4())
			proto, f.l3 = l.Protocol, uint64(l.Length)
			f.hasPorts = l.FragOffset == 0
		case *layers.IPv6:
			if seenIP {
				break
			}
			seenIP = true
			f.src, _ = netip.AddrFromSlice(l.SrcIP)
			f.dst, _ = netip.AddrFromSlice(l.DstIP)
			proto, f.l3 = l.NextHeader, uint64(l.Length)+40
			f.hasPorts = true
		case *layers.IPv6HopByHop:
			proto = l.NextHeader
		case *layers.IPv6Routing:
			proto = l.NextHeader
		case *layers.IPv6Destination:
			proto = l.NextHeader
		case *layers.IPv6Fragment:
			proto = l.NextHeader
			f.hasPorts = l.FragmentOffset == 0
		case *layers.TCP:
			if f.proto == 0 && proto == layers.IPProtocolTCP {
				f.srcPort, f.dstPort = uint16(l.SrcPort), uint16(l.DstPort)
			}
		case *layers.UDP:
			if f.proto == 0 && proto == layers.IPProtocolUDP {
				f.srcPort, f.dstPort = uint16(l.SrcPort), uint16(l.DstPort)
			}
		}
		if seenIP && f.proto == 0 {
			switch l.(type) {
			case *layers.IPv4, *layers.IPv6, *layers.IPv6HopByHop, *layers.IPv6Routing, *layers.IPv6Destination, *layers.IPv6Fragment:
			default:
				f.proto = uint8(proto) // the first layer after IP and its extensions
			}
		}
	}
	if f.proto == 0 {
		f.proto = uint8(proto)
	}
	if !f.hasPorts {
		f.srcPort, f.dstPort = 0, 0
	}
	return f
}

// BenchmarkFlowTableAdd measures the per-packet cost of flow aggregation on real frames.
func BenchmarkFlowTableAdd(b *testing.B) {
	sch, _ := schema.New(schema.DefaultConfiguration())
	parser, _ := packet.New(packet.DefaultConfiguration())
	table := newFlowTable(DefaultConfiguration(), parser, sch, func(*schema.FlowMessage) {}, "b")
	var frames [][]byte
	for _, path := range allCaptures(b) {
		fr, _ := pcapfile.ReadFrames(path)
		for _, f := range fr {
			if f.LinkType == layers.LinkTypeEthernet {
				frames = append(frames, f.Data)
			}
		}
	}
	ts := testutil.Now().UnixNano()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		table.add(0, 1, ts, len(frames[i%len(frames)]), frames[i%len(frames)])
		i++
	}
}

type countingSink struct {
	mu             sync.Mutex
	batches, flows int
	data           []byte
}

func (c *countingSink) Name() string { return "counting" }
func (c *countingSink) Start() error { return nil }
func (c *countingSink) Stop() error  { return nil }
func (c *countingSink) Send(b *output.Batch) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches++
	c.flows += b.Flows
	c.data = append(c.data, b.Data...)
	b.Release()
	return true
}

// TestSinkEmitter checks that flows reach every sink in batches, length-delimited as the
// collector's workers send them.
func TestSinkEmitter(t *testing.T) {
	sch, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := &countingSink{}, &countingSink{}
	e := NewSinkEmitter(nil, []output.Sink{s1, s2}, 4096)
	fm := sch.NewFlowMessage()
	const n = 200
	for i := range n {
		fm.Reset()
		fm.TimeReceived = 1700000000
		fm.SamplingRate = 1
		fm.SrcAddr = netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		fm.AppendUint(schema.ColumnBytes, uint64(100+i))
		fm.AppendUint(schema.ColumnPackets, 1)
		e.Emit(fm)
	}
	e.Flush()
	for _, s := range []*countingSink{s1, s2} {
		if s.flows != n || s.batches < 2 {
			t.Fatalf("sink got %d flows in %d batches", s.flows, s.batches)
		}
	}
	// The batches hold the messages back to back: decode them all.
	rest, i := s1.data, 0
	for len(rest) > 0 {
		msg, r, err := pbwire.SplitDelimited(rest)
		if err != nil {
			t.Fatal(err)
		}
		f, err := flowtest.Decode(sch, rest[:len(rest)-len(r)])
		if err != nil {
			t.Fatal(err)
		}
		if f["Bytes"] != uint64(100+i) || len(msg) == 0 {
			t.Fatalf("flow %d: %v", i, f)
		}
		rest, i = r, i+1
	}
	if i != n {
		t.Fatalf("decoded %d flows", i)
	}
}
