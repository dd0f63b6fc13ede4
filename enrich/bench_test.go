package enrich

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/rib"
	"flowzero/rib/mrt"
)

var (
	benchOnce  sync.Once
	benchTable *rib.RIB
	benchAddrs []netip.Addr
)

// benchRIB loads the synthetic full table (1,062,046 real prefixes, one peer, real AS paths
// and communities) and picks addresses inside random prefixes of it.
func benchRIB(b *testing.B) (*rib.RIB, []netip.Addr) {
	path := benchPath(b)
	benchOnce.Do(func() {
		t := rib.NewTable(rib.DefaultConfiguration())
		if _, err := mrt.LoadFile(t, path, mrt.Options{}); err != nil {
			b.Fatal(err)
		}
		var prefixes []netip.Prefix
		for p := range t.All() {
			prefixes = append(prefixes, p)
		}
		rnd := rand.New(rand.NewPCG(1, 2))
		for range 1 << 16 {
			p := prefixes[rnd.IntN(len(prefixes))]
			b := p.Addr().AsSlice()
			// A random host inside the prefix.
			for i := p.Bits(); i < len(b)*8; i++ {
				if rnd.IntN(2) == 1 {
					b[i/8] |= 0x80 >> (i % 8)
				}
			}
			a, _ := netip.AddrFromSlice(b)
			benchAddrs = append(benchAddrs, a)
		}
		benchTable = t
	})
	return benchTable, benchAddrs
}

func benchPath(b *testing.B) string {
	b.Helper()
	return testdata.Path(b, "rib", "synth-rib-fulltable-1peer.mrt.gz")
}

// BenchmarkEnrich measures Enrich on flows whose source and destination are random addresses
// of a full table, with every routing column enabled. "two-lookups" is the speed of light:
// the two RIB lookups alone, in the same run.
func BenchmarkEnrich(b *testing.B) {
	table, addrs := benchRIB(b)
	sch := routingSchema(b)
	fm := sch.NewFlowMessage()
	b.Run("flowzero", func(b *testing.B) {
		e, err := New(DefaultConfiguration(), table, sch)
		if err != nil {
			b.Fatal(err)
		}
		cpu := testutil.StartCPU(b)
		i := 0
		for b.Loop() {
			fm.Reset()
			fm.SrcAddr, fm.DstAddr = addrs[i&(len(addrs)-1)], addrs[(i+1)&(len(addrs)-1)]
			e.Enrich(fm)
			i++
		}
		cpu.Stop(b)
	})
	b.Run("two-lookups", func(b *testing.B) {
		cpu := testutil.StartCPU(b)
		i := 0
		var sink uint8
		for b.Loop() {
			fm.Reset()
			fm.SrcAddr, fm.DstAddr = addrs[i&(len(addrs)-1)], addrs[(i+1)&(len(addrs)-1)]
			r1, _ := table.Lookup(fm.SrcAddr)
			r2, _ := table.Lookup(fm.DstAddr)
			sink += r1.Bits + r2.Bits
			i++
		}
		cpu.Stop(b)
		_ = sink
	})
}
