package collector

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/netflow"
	"flowzero/demo"
	"flowzero/enrich"
	"flowzero/enrich/networks"
	"flowzero/internal/hugemem"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/rib/mrt"
	"flowzero/schema"
)

var (
	benchEnrichOnce    sync.Once
	benchEnrichFixture *enrichFixture
)

// enrichFixture is what a worker enriching flows runs on: the routing and network
// attributes steps over a table, and NetFlow v9 datagrams (the first holds the templates).
type enrichFixture struct {
	sch   *schema.Schema
	chain enrich.Chain
	dgs   [][]byte
}

// newEnrichFixture builds, for a schema with the default and routing columns, the routing
// step over table and the network attributes of every netEvery-th of its IPv4 prefixes and
// of 1,000 local /24s, and NetFlow v9 datagrams of 1,400 bytes from the demo's encoder
// (about 19 flows each) of nflows flows, whose remote addresses are drawn with a Zipf law
// (s = 1.1) over 65,536 addresses of random IPv4 prefixes of the table, as enrich's
// BenchmarkEnrich does; the local side is one of the local /24s. IPv4 only: with IPv6 flows
// mixed in, far fewer flows came out of the decoder than the demo's encoder took (not looked
// into); the checks count the flows the decoder gives.
func newEnrichFixture(tb testing.TB, table *rib.RIB, netEvery, nflows int, now time.Time) *enrichFixture {
	tb.Helper()
	sch, err := schema.New(schema.Configuration{Enabled: []string{"SrcCommunities", "DstCommunities",
		"SrcLargeCommunities", "DstLargeCommunities", "NextHop", "SrcNetMask", "DstNetMask", "DstASPath"}})
	if err != nil {
		tb.Fatal(err)
	}
	var prefixes []netip.Prefix
	for p := range table.All() {
		if p.Addr().Is4() {
			prefixes = append(prefixes, p)
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	addrs := make([]netip.Addr, 1<<16)
	for i := range addrs {
		p := prefixes[rnd.IntN(len(prefixes))]
		a := p.Addr().As4()
		for k := p.Bits(); k < 32; k++ {
			if rnd.IntN(2) == 1 {
				a[k/8] |= 0x80 >> (k % 8)
			}
		}
		addrs[i] = netip.AddrFrom4(a)
	}
	re, err := enrich.New(enrich.DefaultConfiguration(), table, sch)
	if err != nil {
		tb.Fatal(err)
	}
	na := enrich.DefaultNetworkAttributes()
	na.Networks = map[string]networks.Attributes{}
	for i := 0; i < len(prefixes); i += netEvery {
		na.Networks[prefixes[i].String()] = networks.Attributes{Name: fmt.Sprintf("net-%d", i%20000),
			Site: fmt.Sprintf("site-%d", i%300), Country: string(rune('A'+i%26)) + string(rune('A'+i/26%26))}
	}
	for i := range 1000 {
		na.Networks[fmt.Sprintf("10.%d.%d.0/24", i/250, i%250)] = networks.Attributes{Name: fmt.Sprintf("cust-%d", i), Role: "customers"}
	}
	ne, err := networks.New(nil, na, sch, networks.Options{Logger: slog.New(slog.DiscardHandler), CacheDir: os.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	if err := ne.Start(); err != nil {
		tb.Fatal(err)
	}
	fx := &enrichFixture{sch: sch, chain: enrich.Chain{re, ne}}

	z := rand.NewZipf(rnd, 1.1, 1, uint64(len(addrs)-1))
	flows := make([]demo.Flow, nflows)
	for i := range flows {
		remote := addrs[z.Uint64()]
		local := netip.AddrFrom4([4]byte{10, byte(rnd.IntN(4)), byte(rnd.IntN(250)), byte(1 + rnd.IntN(250))})
		f := demo.Flow{Src: remote, Dst: local, SrcPort: 443, DstPort: uint16(32768 + rnd.IntN(28000)), Proto: 6,
			Bytes: uint64(40 + rnd.IntN(60000)), Packets: uint64(1 + rnd.IntN(40)), InIf: uint32(1 + rnd.IntN(8)),
			OutIf: uint32(100 + rnd.IntN(48)), Start: now, End: now}
		if rnd.IntN(3) == 0 {
			f.Src, f.Dst, f.InIf, f.OutIf, f.SrcPort, f.DstPort = f.Dst, f.Src, f.OutIf, f.InIf, f.DstPort, f.SrcPort
		}
		flows[i] = f
	}
	enc := &demo.NetFlowEncoder{SamplingRate: 1000, TemplateRefresh: 1 << 30, Boot: now.Add(-time.Hour)}
	for len(flows) > 0 {
		dg, n := enc.Encode(nil, flows, now, 1400)
		flows = flows[n:]
		fx.dgs = append(fx.dgs, dg)
	}
	return fx
}

// benchEnrichSetup returns, built once per process, the fixture over the synthetic full
// table (1,062,046 prefixes; both steps with their IPv4 arrays), every fourth prefix named,
// 65,536 flows.
func benchEnrichSetup(b *testing.B) *enrichFixture {
	benchEnrichOnce.Do(func() {
		table := rib.NewTable(rib.DefaultConfiguration())
		if _, err := mrt.LoadFile(table, testdata.Path(b, "rib", "synth-rib-fulltable-1peer.mrt.gz"), mrt.Options{}); err != nil {
			b.Fatal(err)
		}
		benchEnrichFixture = newEnrichFixture(b, table, 4, 1<<16, testutil.Now())
	})
	return benchEnrichFixture
}

// perFlow hides a Chain's EnrichBatch: the worker enriches flow by flow.
type perFlow struct{ c enrich.Chain }

func (p perFlow) Enrich(fm *schema.FlowMessage) { p.c.Enrich(fm) }

// keepSink keeps the batches' bytes.
type keepSink struct {
	data  []byte
	flows int
}

func (k *keepSink) Name() string { return "keep" }
func (k *keepSink) Start() error { return nil }
func (k *keepSink) Stop() error  { return nil }
func (k *keepSink) Send(b *output.Batch) bool {
	k.data = append(k.data, b.Data...)
	k.flows += b.Flows
	b.Release()
	return true
}

// TestWorkerEnrichBatch checks that a worker enriching each datagram's flows together
// (EnrichBatch) sends the same bytes as one enriching them one by one, with a table large
// enough for both steps to use their IPv4 arrays (140,000 prefixes from /16 to /28, routes
// with AS paths and communities), and allocates nothing per datagram.
func TestWorkerEnrichBatch(t *testing.T) {
	table := rib.NewTable(rib.DefaultConfiguration())
	peer := table.Peer(rib.PeerKey{Address: netip.MustParseAddr("192.0.2.1")}, netip.Addr{})
	rnd := rand.New(rand.NewPCG(3, 4))
	tx := table.Begin()
	for i := range 140000 {
		bits := []int{16, 20, 22, 24, 24, 24, 24, 26, 28}[i%9]
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(11 + rnd.IntN(200)), byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32())}), bits).Masked()
		path := []uint32{64500, uint32(1000 + rnd.IntN(3000)), uint32(1 + rnd.IntN(60000))}
		tx.Add(peer, p, 0, &bgp.Attributes{ASPath: path, ASPathLength: 3, NextHop: netip.MustParseAddr("192.0.2.1"),
			Origin: bgp.OriginIGP, Communities: []uint32{64500<<16 | uint32(i%50)}})
	}
	tx.Commit()
	now := testutil.Now()
	fx := newEnrichFixture(t, table, 2, 4096, now)
	if runtime.GOOS == "linux" && hugemem.Mapped() < 2*64<<20 {
		t.Fatalf("%d bytes in IPv4 arrays: the two steps do not both use theirs", hugemem.Mapped())
	}
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	var out [2]*keepSink
	var workers [2]*worker
	for i, enricher := range []Enricher{perFlow{fx.chain}, fx.chain} {
		nf, err := netflow.New(nil, netflow.DefaultConfiguration(), fx.sch)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &keepSink{}
		cfg := DefaultConfiguration()
		cfg.Listeners = nil
		cfg.HTTP.Listen = ""
		c, err := New(cfg, Dependencies{Schema: fx.sch, Decoders: map[string]Decoder{}, Enricher: enricher,
			Sinks: []output.Sink{out[i]}, Registry: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		w := newWorker(c, 0, "test", "0", nil, netflowDecoder{nf}, "netflow")
		w.now = now
		for _, dg := range fx.dgs {
			w.handle(dg, from)
		}
		w.flushAll()
		workers[i] = w
	}
	if workers[1].batchEnricher == nil || workers[0].batchEnricher != nil {
		t.Fatal("the workers do not take the paths compared")
	}
	if out[0].flows < 16*len(fx.dgs) || out[1].flows != out[0].flows {
		t.Fatalf("%d flows enriched one by one, %d by datagram, from %d datagrams", out[0].flows, out[1].flows, len(fx.dgs))
	}
	if !bytes.Equal(out[0].data, out[1].data) {
		t.Fatal("flows enriched by datagram differ from flows enriched one by one")
	}
	if !bytes.Contains(out[0].data, []byte("net-")) || !bytes.Contains(out[0].data, []byte("cust-")) {
		t.Fatal("no network attributes in the flows")
	}
	w := workers[1]
	dgs := fx.dgs[1:]
	i := 0
	if n := testing.AllocsPerRun(200, func() { w.handle(dgs[i%len(dgs)], from); i++ }); n != 0 {
		t.Fatalf("%v allocations per datagram enriched by datagram", n)
	}
}

// BenchmarkWorkerEnrich runs NetFlow v9 datagrams through a worker's whole path (decode,
// enrichment, finalize, batching) with the routing and network attributes steps over a
// full table: "off" without enrichment, "per-flow" enriching each flow as it is decoded,
// "batch" enriching each datagram's flows together (EnrichBatch, after copying them).
// cpu-ns/op is per datagram; ns/flow is wall time per flow.
func BenchmarkWorkerEnrich(b *testing.B) {
	fx := benchEnrichSetup(b)
	sch := fx.sch
	for _, tc := range []struct {
		name     string
		enricher Enricher
	}{{"off", nil}, {"per-flow", perFlow{fx.chain}}, {"batch", fx.chain}} {
		b.Run(tc.name, func(b *testing.B) {
			nf, err := netflow.New(nil, netflow.DefaultConfiguration(), sch)
			if err != nil {
				b.Fatal(err)
			}
			sink := &discardSink{}
			cfg := DefaultConfiguration()
			cfg.Listeners = nil
			cfg.HTTP.Listen = ""
			c, err := New(cfg, Dependencies{Schema: sch, Decoders: map[string]Decoder{}, Enricher: tc.enricher,
				Sinks: []output.Sink{sink}, Registry: prometheus.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			w := newWorker(c, 0, "bench", "0", nil, netflowDecoder{nf}, "netflow")
			if _, batched := tc.enricher.(BatchEnricher); batched != (tc.name == "batch") {
				b.Fatal("the worker does not take the path the run is named after")
			}
			from := netip.MustParseAddrPort("192.0.2.100:2055")
			w.now = testutil.Now()
			w.handle(fx.dgs[0], from)
			dgs := fx.dgs[1:]
			w.flushAll()
			sink.flows = 0
			for _, dg := range dgs {
				w.handle(dg, from)
			}
			w.flushAll()
			perPass := sink.flows
			sink.flows = 0
			i := 0
			cpu := testutil.StartCPU(b)
			for b.Loop() {
				w.handle(dgs[i%len(dgs)], from)
				i++
			}
			cpu.Stop(b)
			w.flushAll()
			if want := i / len(dgs) * perPass; sink.flows < want || perPass < 16*len(dgs) {
				b.Fatalf("sink got %d flows, want at least %d (%d per pass over %d datagrams)", sink.flows, want, perPass, len(dgs))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())*float64(len(dgs))/float64(i*perPass), "ns/flow")
		})
	}
}
