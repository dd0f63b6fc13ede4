package enrich

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"flowzero/internal/testdata"
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
