package collector

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/netflow"
	"flowzero/demo"
	"flowzero/enrich"
	"flowzero/enrich/networks"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/rib"
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

// BenchmarkWorkerEnrich runs NetFlow v9 datagrams through a worker's whole path (decode,
// enrichment, finalize, batching) with the routing and network attributes steps over a
// full table: "off" without enrichment, "enrich" with both steps. cpu-ns/op is per datagram
// (about 19 flows); ns/flow is wall time per flow.
func BenchmarkWorkerEnrich(b *testing.B) {
	fx := benchEnrichSetup(b)
	sch := fx.sch
	for _, tc := range []struct {
		name     string
		enricher Enricher
	}{{"off", nil}, {"enrich", fx.chain}} {
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
