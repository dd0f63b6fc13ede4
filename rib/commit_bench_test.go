package rib_test

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"flowzero/internal/hugemem"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/rib/mrt"
)

// BenchmarkCommit measures a BMP-like commit on the full table: one prefix of the table,
// drawn at random, announced again by its peer with new attributes, so that its selected
// route changes and the flat arrays follow. "-trie" runs have the family's array switched
// off; "-rebuild" runs announce a prefix shorter than the array updates in place (a /6, a
// /12), so that each commit rebuilds the family's array whole (run them with a few commits:
// -test.benchtime=5x). The MB metric is what the
// loaded table holds: the Go heap after a collection, and the arrays mapped outside it.
func BenchmarkCommit(b *testing.B) {
	path := testdata.Path(b, "rib", "synth-rib-fulltable-1peer.mrt.gz")
	for _, run := range []struct {
		name        string
		ipv4, array bool
		rebuild     string
	}{
		{"ipv4", true, true, ""}, {"ipv4-trie", true, false, ""}, {"ipv4-rebuild", true, true, "4.0.0.0/6"},
		{"ipv6", false, true, ""}, {"ipv6-trie", false, false, ""}, {"ipv6-rebuild", false, true, "3000::/12"},
	} {
		b.Run(run.name, func(b *testing.B) {
			cfg := rib.DefaultConfiguration()
			if run.ipv4 {
				cfg.IPv4Array = run.array
			} else {
				cfg.IPv6Array = run.array
			}
			runtime.GC()
			testutil.WaitUntil(b, "the arrays of the previous run released", func() bool {
				runtime.GC()
				return hugemem.Mapped() == 0
			})
			r := rib.NewTable(cfg)
			if _, err := mrt.LoadFile(r, path, mrt.Options{}); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mb := float64(ms.HeapAlloc+uint64(hugemem.Mapped())) / 1e6
			var prefixes []netip.Prefix
			var peers []rib.PeerID
			for p, rt := range r.All() {
				if p.Addr().Is4() == run.ipv4 {
					prefixes, peers = append(prefixes, p), append(peers, rt.Peer)
				}
			}
			if run.rebuild != "" {
				prefixes, peers = []netip.Prefix{netip.MustParsePrefix(run.rebuild)}, peers[:1]
			}
			rnd := rand.New(rand.NewPCG(1, 2))
			nh := netip.MustParseAddr("192.0.2.1")
			if !run.ipv4 {
				nh = netip.MustParseAddr("2001:db8::1")
			}
			i := 0
			for b.Loop() {
				k := rnd.IntN(len(prefixes))
				path := []uint32{64496, uint32(65536 + i)}
				r.Add(peers[k], prefixes[k], 0, &bgp.Attributes{ASPath: path, ASPathLength: 2, NextHop: nh, Origin: bgp.OriginIGP})
				i++
			}
			b.ReportMetric(mb, "MB")
			b.ReportMetric(float64(len(prefixes)), "prefixes")
			runtime.KeepAlive(r)
		})
	}
}
