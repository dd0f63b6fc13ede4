package networks

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"github.com/gaissmai/bart"

	"flowzero/internal/hugemem"
	"flowzero/internal/testutil"
	"flowzero/schema"
)

// TestFlat4 checks the array against the trie it is built from, on random nested prefixes of
// every length (with a default route, prefixes longer than /24 inside shorter ones, and /24s
// holding only longer prefixes), at each prefix's first and last address, just outside them,
// and at random addresses.
func TestFlat4(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	trie := new(bart.Fast[leaf])
	trie.Insert(netip.MustParsePrefix("0.0.0.0/0"), leaf{asn: 1})
	var prefixes []netip.Prefix
	for i := range 20000 {
		bits := 8 + rnd.IntN(25)
		if i%4 == 0 && len(prefixes) > 0 {
			// nested in an earlier prefix
			q := prefixes[rnd.IntN(len(prefixes))]
			a := q.Addr().As4()
			for k := q.Bits(); k < 32; k++ {
				if rnd.IntN(2) == 1 {
					a[k/8] |= 1 << (7 - k%8)
				}
			}
			bits = q.Bits() + rnd.IntN(33-q.Bits())
			prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4(a), bits).Masked())
		} else {
			prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(rnd.Uint32()), byte(rnd.Uint32()),
				byte(rnd.Uint32()), byte(rnd.Uint32())}), bits).Masked())
		}
	}
	for i, p := range prefixes {
		// several prefixes share a leaf, as interned leaves do
		trie.Insert(p, leaf{asn: uint32(2 + i%500), from: uint8(i % 3)})
	}
	f := newFlat4(trie.AllSorted4())
	if len(f.arr.Subs) == 0 || len(f.leaves) > 1501 {
		t.Fatalf("%d sub-table entries, %d leaves", len(f.arr.Subs), len(f.leaves))
	}
	check := func(a netip.Addr) {
		t.Helper()
		if !a.IsValid() { // before 0.0.0.0, after 255.255.255.255
			return
		}
		want, wantOK := trie.Lookup(a)
		got, ok := f.lookup(a)
		if got != want || ok != wantOK {
			t.Fatalf("%s: %+v %v, want %+v %v", a, got, ok, want, wantOK)
		}
	}
	for _, p := range prefixes {
		check(p.Addr())
		check(p.Addr().Prev().Unmap())
		last := p.Addr().As4()
		for k := p.Bits(); k < 32; k++ {
			last[k/8] |= 1 << (7 - k%8)
		}
		check(netip.AddrFrom4(last))
		check(netip.AddrFrom4(last).Next())
	}
	for range 200000 {
		check(netip.AddrFrom4([4]byte{byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32())}))
	}
	// Without a default route, addresses outside every prefix are not found.
	trie.Delete(netip.MustParsePrefix("0.0.0.0/0"))
	f = newFlat4(trie.AllSorted4())
	for range 20000 {
		check(netip.AddrFrom4([4]byte{byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32())}))
	}
}

// TestFlat6 checks the IPv6 tables against the trie they are built from, on random nested
// prefixes from /3 to /128 (most of them /16 to /64, many around the tables' boundaries at
// /24, /32, /40 and /48, and a default route), at each prefix's first and last address, just
// outside them, at the first and last address of each block of each level holding a prefix
// and of the blocks beside them, and at random addresses.
func TestFlat6(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	randomBits := func() int {
		switch rnd.IntN(4) {
		case 0:
			return 3 + rnd.IntN(126)
		case 1:
			return 22 + 8*rnd.IntN(4) + rnd.IntN(5)
		default:
			return 16 + rnd.IntN(49)
		}
	}
	randomAddr := func() [16]byte {
		var a [16]byte
		for i := range a {
			a[i] = byte(rnd.Uint32())
		}
		if rnd.IntN(4) != 0 {
			a[0] = 0x20 | a[0]&0x1f // 2000::/3, where the full table is
		}
		return a
	}
	setBits := func(a [16]byte, from, to int, random bool) [16]byte {
		for k := from; k < to; k++ {
			if !random || rnd.IntN(2) == 1 {
				a[k/8] |= 1 << (7 - k%8)
			}
		}
		return a
	}
	trie := new(bart.Fast[leaf])
	trie.Insert(netip.MustParsePrefix("::/0"), leaf{asn: 1})
	var prefixes []netip.Prefix
	for i := range 20000 {
		if i%3 == 0 && len(prefixes) > 0 {
			// nested in an earlier prefix
			q := prefixes[rnd.IntN(len(prefixes))]
			bits := q.Bits() + rnd.IntN(129-q.Bits())
			prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom16(setBits(q.Addr().As16(), q.Bits(), 128, true)), bits).Masked())
			continue
		}
		prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom16(randomAddr()), randomBits()).Masked())
	}
	for i, p := range prefixes {
		// several prefixes share a leaf, as interned leaves do
		trie.Insert(p, leaf{asn: uint32(2 + i%500), from: uint8(i % 3)})
	}
	check := func(f *flat6, a [16]byte) {
		t.Helper()
		addr := netip.AddrFrom16(a)
		want, wantOK := trie.Lookup(addr)
		got, ok := f.lookup(addr)
		if got != want || ok != wantOK {
			t.Fatalf("%s: %+v %v, want %+v %v", addr, got, ok, want, wantOK)
		}
	}
	checkAll := func(f *flat6) {
		t.Helper()
		for _, p := range prefixes {
			first := p.Addr().As16()
			last := setBits(first, p.Bits(), 128, false)
			check(f, first)
			check(f, last)
			if prev := p.Addr().Prev(); prev.IsValid() {
				check(f, prev.As16())
			}
			if next := netip.AddrFrom16(last).Next(); next.IsValid() {
				check(f, next.As16())
			}
			for _, bits := range []int{24, 32, 40, 48} {
				block := netip.PrefixFrom(p.Addr(), bits).Masked()
				blockLast := netip.AddrFrom16(setBits(block.Addr().As16(), bits, 128, false))
				for _, a := range []netip.Addr{block.Addr(), block.Addr().Prev(), blockLast, blockLast.Next()} {
					if a.IsValid() {
						check(f, a.As16())
					}
				}
			}
		}
		for range 200000 {
			check(f, randomAddr())
		}
		check(f, [16]byte{})
		check(f, setBits([16]byte{}, 0, 128, false))
	}
	f := newFlat6(trie.AllSorted6())
	if len(f.sub) < 1000<<8 || len(f.tries) < 1000 || len(f.leaves) > 1501 {
		t.Fatalf("%d tables, %d tries, %d leaves", len(f.sub)>>8, len(f.tries), len(f.leaves))
	}
	checkAll(f)
	// Without a default route, addresses outside every prefix are not found.
	trie.Delete(netip.MustParsePrefix("::/0"))
	checkAll(newFlat6(trie.AllSorted6()))
}

// TestFlat4Enricher runs the table tests with both arrays built whatever the table's size:
// the answers, VRFs and reloads included, must not change.
func TestFlat4Enricher(t *testing.T) {
	defer func(n, n6 int) { flatMinPrefixes, flat6MinPrefixes = n, n6 }(flatMinPrefixes, flat6MinPrefixes)
	flatMinPrefixes, flat6MinPrefixes = 0, 0
	t.Run("static", TestStatic)
	t.Run("enrich", TestEnrich)
	t.Run("precedence", TestPrecedence)
	t.Run("geoip-reload", TestGeoIPReload)
	t.Run("source-fetch", TestSourceFetch)
	t.Run("reload-while-enriching", TestReloadWhileEnriching)
	e := newEnricher(t, decodeConfig(t, "networks: {10.0.0.0/8: corp, 2001:db8::/32: lab}"), mustSchema(t, schema.DefaultConfiguration()), Options{})
	if e.table.Load().flat == nil || e.table.Load().flat6 == nil {
		t.Fatal("no array built")
	}
	e = newEnricher(t, decodeConfig(t, "networks: {10.0.0.0/8: corp, 2001:db8::/32: lab}\nnetwork-ipv4-array: false"), mustSchema(t, schema.DefaultConfiguration()), Options{})
	if e.table.Load().flat != nil || e.table.Load().flat6 == nil {
		t.Fatal("IPv4 array built with network-ipv4-array: false, or IPv6 one not built")
	}
	e = newEnricher(t, decodeConfig(t, "networks: {10.0.0.0/8: corp, 2001:db8::/32: lab}\nnetwork-ipv6-array: false"), mustSchema(t, schema.DefaultConfiguration()), Options{})
	if e.table.Load().flat == nil || e.table.Load().flat6 != nil {
		t.Fatal("IPv6 array built with network-ipv6-array: false, or IPv4 one not built")
	}
}

// TestFlat4Released checks that the arrays of each table replaced by a rebuild (a reload, a
// source's new answer) is unmapped once no flow reads it: reloads leak no memory outside the
// Go heap.
func TestFlat4Released(t *testing.T) {
	defer func(n, n6 int) { flatMinPrefixes, flat6MinPrefixes = n, n6 }(flatMinPrefixes, flat6MinPrefixes)
	flatMinPrefixes, flat6MinPrefixes = 0, 0
	released := func(what string, atMost int64) {
		t.Helper()
		testutil.WaitUntil(t, what, func() bool {
			runtime.GC()
			return hugemem.Mapped() <= atMost
		})
	}
	released("the arrays of earlier tests released", 0)
	e := newEnricher(t, decodeConfig(t, "networks: {10.0.0.0/8: corp, 2001:db8::/32: lab}"), mustSchema(t, schema.DefaultConfiguration()), Options{})
	one := hugemem.Mapped()
	if runtime.GOOS == "linux" && one < 128<<20 {
		t.Fatalf("%d bytes mapped for the arrays, want at least 128 MiB", one)
	}
	for range 5 {
		e.rebuild("")
	}
	released("the arrays of replaced tables released", one)
	if a, ok := e.Lookup(netip.MustParseAddr("10.1.2.3"), 0); !ok || a.Name != "corp" {
		t.Fatalf("lookup after the rebuilds: %+v %v", a, ok)
	}
	if a, ok := e.Lookup(netip.MustParseAddr("2001:db8:1::1"), 0); !ok || a.Name != "lab" {
		t.Fatalf("lookup after the rebuilds: %+v %v", a, ok)
	}
}

// FuzzFlat6 compares the IPv6 tables with the trie for prefixes read from the input, 17 bytes
// each (the address, then the length: /16 to /128, so that an input fills at most 256 entries
// of the 2^24 array; TestFlat6 has the shorter ones), at each prefix's first and last
// address, just outside them, and at the edges of its /24, /32, /40 and /48 blocks.
func FuzzFlat6(f *testing.F) {
	seed := func(prefixes ...string) []byte {
		var b []byte
		for _, s := range prefixes {
			p := netip.MustParsePrefix(s)
			a := p.Addr().As16()
			b = append(append(b, a[:]...), byte(p.Bits()-16))
		}
		return b
	}
	f.Add(seed("2001::/16", "2001:db8::/32", "2001:db8:1::/48", "2001:db8:1:2::/64", "2001:db8:1:2::1/128"))
	f.Add(seed("2001:db8::/23", "2001:db8::/25", "2001:db8:ff00::/40", "2001:db8:ff00::/49"))
	f.Fuzz(func(t *testing.T, data []byte) {
		trie := new(bart.Fast[leaf])
		var prefixes []netip.Prefix
		for i := 0; i+17 <= len(data) && i < 17*256; i += 17 {
			p := netip.PrefixFrom(netip.AddrFrom16([16]byte(data[i:i+16])), 16+int(data[i+16])%113).Masked()
			prefixes = append(prefixes, p)
			trie.Insert(p, leaf{asn: uint32(1 + i/17%7)})
		}
		fl := newFlat6(trie.AllSorted6())
		check := func(a netip.Addr) {
			if !a.IsValid() || !a.Is6() {
				return
			}
			want, wantOK := trie.Lookup(a)
			got, ok := fl.lookup(a)
			if got != want || ok != wantOK {
				t.Fatalf("%s: %+v %v, want %+v %v", a, got, ok, want, wantOK)
			}
		}
		last := func(p netip.Prefix) netip.Addr {
			a := p.Addr().As16()
			for k := p.Bits(); k < 128; k++ {
				a[k/8] |= 1 << (7 - k%8)
			}
			return netip.AddrFrom16(a)
		}
		for _, p := range prefixes {
			for _, bits := range []int{p.Bits(), 24, 32, 40, 48} {
				q := netip.PrefixFrom(p.Addr(), bits).Masked()
				check(q.Addr())
				check(q.Addr().Prev())
				check(last(q))
				check(last(q).Next())
			}
		}
	})
}
