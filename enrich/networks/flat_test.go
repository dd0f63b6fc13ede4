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
	if len(f.sub) == 0 || len(f.leaves) > 1501 {
		t.Fatalf("%d sub-table entries, %d leaves", len(f.sub), len(f.leaves))
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

// TestFlat4Enricher runs the table tests with the array built whatever the table's size:
// the answers, VRFs and reloads included, must not change.
func TestFlat4Enricher(t *testing.T) {
	defer func(n int) { flatMinPrefixes = n }(flatMinPrefixes)
	flatMinPrefixes = 0
	t.Run("static", TestStatic)
	t.Run("enrich", TestEnrich)
	t.Run("precedence", TestPrecedence)
	t.Run("geoip-reload", TestGeoIPReload)
	t.Run("source-fetch", TestSourceFetch)
	t.Run("reload-while-enriching", TestReloadWhileEnriching)
	e := newEnricher(t, decodeConfig(t, "networks: {10.0.0.0/8: corp}"), mustSchema(t, schema.DefaultConfiguration()), Options{})
	if e.table.Load().flat == nil {
		t.Fatal("no array built")
	}
	e = newEnricher(t, decodeConfig(t, "networks: {10.0.0.0/8: corp}\nnetwork-ipv4-array: false"), mustSchema(t, schema.DefaultConfiguration()), Options{})
	if e.table.Load().flat != nil {
		t.Fatal("array built with network-ipv4-array: false")
	}
}

// TestFlat4Released checks that the array of each table replaced by a rebuild (a reload, a
// source's new answer) is unmapped once no flow reads it: reloads leak no memory outside the
// Go heap.
func TestFlat4Released(t *testing.T) {
	defer func(n int) { flatMinPrefixes = n }(flatMinPrefixes)
	flatMinPrefixes = 0
	released := func(what string, atMost int64) {
		t.Helper()
		testutil.WaitUntil(t, what, func() bool {
			runtime.GC()
			return hugemem.Mapped() <= atMost
		})
	}
	released("the arrays of earlier tests released", 0)
	e := newEnricher(t, decodeConfig(t, "networks: {10.0.0.0/8: corp}"), mustSchema(t, schema.DefaultConfiguration()), Options{})
	one := hugemem.Mapped()
	if runtime.GOOS == "linux" && one < 64<<20 {
		t.Fatalf("%d bytes mapped for the array, want at least 64 MiB", one)
	}
	for range 5 {
		e.rebuild("")
	}
	released("the arrays of replaced tables released", one)
	if a, ok := e.Lookup(netip.MustParseAddr("10.1.2.3"), 0); !ok || a.Name != "corp" {
		t.Fatalf("lookup after the rebuilds: %+v %v", a, ok)
	}
}
