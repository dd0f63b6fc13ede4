// Package rib_test compares flowzero's RIB with peers on the same data: longest-prefix
// lookups with attributes over the 1,062,046 prefixes of a real full table (bart-fast,
// bart-table: github.com/gaissmai/bart used directly; gobgp: gobgp v4's in-process ListPath),
// and the load of a 4-peer MRT full table.
package rib_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/gaissmai/bart"

	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/rib/mrt"
)

// probes is the number of distinct random addresses looked up in turn.
const probes = 1 << 16

type fixture struct {
	prefixes []netip.Prefix
	addrs    []netip.Addr
	table    *rib.RIB // flowzero, loaded from the synthetic MRT over the same prefixes
	attrs    []*bgp.Attributes
}

var (
	fixtureOnce sync.Once
	fix         fixture
)

// loadFixture reads bart-prefixes.txt.gz, loads synth-rib-fulltable-1peer.mrt.gz (the same
// prefixes with real-sampled attributes) into flowzero's RIB, and draws random addresses
// inside random prefixes. The peers get the very same attribute values (pointers into
// flowzero's interned sets, so attribute memory is identical for all).
func loadFixture(b *testing.B) *fixture {
	prefixFile := testdata.Path(b, "rib", "bart-prefixes.txt.gz")
	mrtFile := testdata.Path(b, "rib", "synth-rib-fulltable-1peer.mrt.gz")
	fixtureOnce.Do(func() {
		f, err := os.Open(prefixFile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(zr)
		for sc.Scan() {
			p, err := netip.ParsePrefix(sc.Text())
			if err != nil {
				b.Fatal(err)
			}
			fix.prefixes = append(fix.prefixes, p.Masked())
		}
		fix.table = rib.NewTable(rib.DefaultConfiguration())
		if _, err := mrt.LoadFile(fix.table, mrtFile, mrt.Options{}); err != nil {
			b.Fatal(err)
		}
		fix.attrs = make([]*bgp.Attributes, len(fix.prefixes))
		for i, p := range fix.prefixes {
			rt, ok := fix.table.LookupPrefix(p)
			if !ok || int(rt.Bits) != p.Bits() {
				b.Fatalf("%s missing from the MRT table", p)
			}
			fix.attrs[i] = rt.Attrs
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range probes {
			p := fix.prefixes[rng.IntN(len(fix.prefixes))]
			a := p.Addr().As16()
			// Random host bits inside the prefix.
			off := 0
			if p.Addr().Is4() {
				off = 12
			}
			for i := off + p.Bits()/8; i < 16; i++ {
				r := byte(rng.Uint32())
				if i == off+p.Bits()/8 {
					mask := byte(0xff >> (p.Bits() % 8))
					a[i] = a[i]&^mask | r&mask
				} else {
					a[i] = r
				}
			}
			addr := netip.AddrFrom16(a)
			if p.Addr().Is4() {
				addr = addr.Unmap()
			}
			if !p.Contains(addr) {
				b.Fatalf("%s not in %s", addr, p)
			}
			fix.addrs = append(fix.addrs, addr)
		}
	})
	if fix.table == nil {
		b.Fatal("fixture failed")
	}
	return &fix
}

var sink uint32

// Each lookup reads the origin AS of the matched route (what enrichment needs for SrcAS and
// DstAS): flowzero returns it inline in its Route; bart's tables and gobgp hold the attribute
// pointer or path they were given, and the origin AS is read from there.

func BenchmarkLookup(b *testing.B) {
	f := loadFixture(b)
	b.Logf("%d prefixes, %d random addresses", len(f.prefixes), len(f.addrs))

	b.Run("flowzero", func(b *testing.B) {
		cpu := testutil.StartCPU(b)
		var s uint32
		i := 0
		for b.Loop() {
			rt, ok := f.table.Lookup(f.addrs[i%probes])
			if ok {
				s += rt.OriginAS
			}
			i++
		}
		cpu.Stop(b)
		sink = s
	})

	b.Run("bart-fast", func(b *testing.B) {
		t := new(bart.Fast[*bgp.Attributes])
		for i, p := range f.prefixes {
			t.Insert(p, f.attrs[i])
		}
		cpu := testutil.StartCPU(b)
		var s uint32
		i := 0
		for b.Loop() {
			a, ok := t.Lookup(f.addrs[i%probes])
			if ok {
				s += a.OriginAS()
			}
			i++
		}
		cpu.Stop(b)
		sink = s
	})

	b.Run("bart-table", func(b *testing.B) {
		t := new(bart.Table[*bgp.Attributes])
		for i, p := range f.prefixes {
			t.Insert(p, f.attrs[i])
		}
		cpu := testutil.StartCPU(b)
		var s uint32
		i := 0
		for b.Loop() {
			a, ok := t.Lookup(f.addrs[i%probes])
			if ok {
				s += a.OriginAS()
			}
			i++
		}
		cpu.Stop(b)
		sink = s
	})

	b.Run("gobgp", func(b *testing.B) {
		s := gobgpServer(b, f)
		b.ReportAllocs()
		b.ResetTimer()
		var sum uint32
		i, found := 0, 0
		req := apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL}
		lp := &apiutil.LookupPrefix{}
		req.Prefixes = []*apiutil.LookupPrefix{lp}
		for b.Loop() {
			a := f.addrs[i%probes]
			req.Family = gobgp.RF_IPv4_UC
			if a.Is6() {
				req.Family = gobgp.RF_IPv6_UC
			}
			lp.Prefix = a.String()
			err := s.ListPath(req, func(_ gobgp.NLRI, paths []*apiutil.Path) {
				found++
				for _, attr := range paths[0].Attrs {
					if p, ok := attr.(*gobgp.PathAttributeAsPath); ok && len(p.Value) > 0 {
						as := p.Value[len(p.Value)-1].GetAS()
						sum += as[len(as)-1]
					}
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
		if found != i {
			b.Fatalf("gobgp found %d routes for %d lookups", found, i)
		}
		sink = sum
	})
}

var (
	gobgpOnce sync.Once
	gobgpSrv  *server.BgpServer
)

// gobgpServer starts an in-process gobgp server (no listener) with every prefix as a local
// path carrying the same ORIGIN, AS_PATH, NEXT_HOP and COMMUNITIES as flowzero's.
func gobgpServer(b *testing.B, f *fixture) *server.BgpServer {
	gobgpOnce.Do(func() {
		s := server.NewBgpServer()
		go s.Serve()
		err := s.StartBgp(context.Background(), &api.StartBgpRequest{
			Global: &api.Global{Asn: 65000, RouterId: "10.255.255.254", ListenPort: -1},
		})
		if err != nil {
			b.Fatal(err)
		}
		batch := make([]*apiutil.Path, 0, 1024)
		flush := func() {
			if len(batch) == 0 {
				return
			}
			if _, err := s.AddPath(apiutil.AddPathRequest{Paths: batch}); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
		for i, p := range f.prefixes {
			a := f.attrs[i]
			nlri, err := gobgp.NewIPAddrPrefix(p)
			if err != nil {
				b.Fatal(err)
			}
			nh, err := gobgp.NewPathAttributeNextHop(a.NextHop)
			if err != nil {
				b.Fatal(err)
			}
			attrs := []gobgp.PathAttributeInterface{
				gobgp.NewPathAttributeOrigin(a.Origin),
				gobgp.NewPathAttributeAsPath([]gobgp.AsPathParamInterface{
					gobgp.NewAs4PathParam(gobgp.BGP_ASPATH_ATTR_TYPE_SEQ, a.ASPath)}),
				nh,
			}
			if len(a.Communities) > 0 {
				attrs = append(attrs, gobgp.NewPathAttributeCommunities(a.Communities))
			}
			fam := gobgp.RF_IPv4_UC
			if p.Addr().Is6() {
				fam = gobgp.RF_IPv6_UC
			}
			batch = append(batch, &apiutil.Path{Family: fam, Nlri: nlri, Attrs: attrs})
			if len(batch) == cap(batch) {
				flush()
			}
		}
		flush()
		gobgpSrv = s
	})
	if gobgpSrv == nil {
		b.Fatal("gobgp setup failed")
	}
	return gobgpSrv
}

// BenchmarkLookupInterleaved measures flowzero, bart-fast and bart-table in alternating
// chunks of 4096 lookups over the same addresses, so that the noise of a shared machine
// (other processes, frequency changes) hits the three alike; it reports each one's ns per
// lookup as a metric. BenchmarkLookup is the by-the-book version, one sub-benchmark each.
func BenchmarkLookupInterleaved(b *testing.B) {
	f := loadFixture(b)
	fast := new(bart.Fast[*bgp.Attributes])
	table := new(bart.Table[*bgp.Attributes])
	for i, p := range f.prefixes {
		fast.Insert(p, f.attrs[i])
		table.Insert(p, f.attrs[i])
	}
	const chunk = 4096
	var elapsed [3]time.Duration
	var s uint32
	lookups := 0
	for b.Loop() {
		base := lookups % probes
		addrs := f.addrs[base : base+chunk]
		t0 := time.Now()
		for _, a := range addrs {
			if rt, ok := f.table.Lookup(a); ok {
				s += rt.OriginAS
			}
		}
		t1 := time.Now()
		for _, a := range addrs {
			if v, ok := fast.Lookup(a); ok {
				s += v.OriginAS()
			}
		}
		t2 := time.Now()
		for _, a := range addrs {
			if v, ok := table.Lookup(a); ok {
				s += v.OriginAS()
			}
		}
		t3 := time.Now()
		elapsed[0] += t1.Sub(t0)
		elapsed[1] += t2.Sub(t1)
		elapsed[2] += t3.Sub(t2)
		lookups += chunk
	}
	sink = s
	b.ReportMetric(float64(elapsed[0].Nanoseconds())/float64(lookups), "flowzero-ns/lookup")
	b.ReportMetric(float64(elapsed[1].Nanoseconds())/float64(lookups), "bart-fast-ns/lookup")
	b.ReportMetric(float64(elapsed[2].Nanoseconds())/float64(lookups), "bart-table-ns/lookup")
}
