package dir248

import (
	"cmp"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestArray compares Lookup with a scan of the prefixes for the longest one holding the
// address, on random nested prefixes of every length (a default route, prefixes longer than
// /24 inside shorter ones, /24s holding only longer prefixes), at each prefix's edges, just
// outside them and at random addresses.
func TestArray(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	prefixes := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	for i := range 3000 {
		bits := 8 + rnd.IntN(25)
		var a [4]byte
		if i%3 == 0 {
			// nested in an earlier prefix, often past /24
			a = prefixes[rnd.IntN(len(prefixes))].Addr().As4()
			a[3] = byte(rnd.IntN(256))
			bits = 20 + rnd.IntN(13)
		} else {
			a = [4]byte{byte(rnd.IntN(256)), byte(rnd.IntN(256)), byte(rnd.IntN(256)), byte(rnd.IntN(256))}
		}
		prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4(a), bits).Masked())
	}
	slices.SortStableFunc(prefixes, func(a, b netip.Prefix) int { return cmp.Compare(a.Bits(), b.Bits()) })
	prefixes = slices.Compact(prefixes)
	values := map[netip.Prefix]uint32{}
	var arr Array
	arr.Top = new([1 << 24]uint32)
	for i, p := range prefixes {
		values[p] = uint32(i + 1)
		arr.Insert(p, uint32(i+1))
	}
	want := func(a netip.Addr) uint32 {
		best := -1
		var v uint32
		for _, p := range prefixes {
			if p.Bits() > best && p.Contains(a) {
				best, v = p.Bits(), values[p]
			}
		}
		return v
	}
	check := func(a netip.Addr) {
		if got, w := arr.Lookup(a.As4()), want(a); got != w {
			t.Fatalf("%s: got %d, want %d", a, got, w)
		}
	}
	for _, p := range prefixes[:500] {
		first := p.Addr()
		b := first.As4()
		for i := p.Bits(); i < 32; i++ {
			b[i/8] |= 0x80 >> (i % 8)
		}
		last := netip.AddrFrom4(b)
		check(first)
		check(last)
		if prev := first.Prev(); prev.IsValid() {
			check(prev)
		}
		if next := last.Next(); next.IsValid() {
			check(next)
		}
	}
	for range 2000 {
		check(netip.AddrFrom4([4]byte{byte(rnd.IntN(256)), byte(rnd.IntN(256)), byte(rnd.IntN(256)), byte(rnd.IntN(256))}))
	}
	if len(arr.Subs) == 0 {
		t.Fatal("no sub-table: the prefixes past /24 were not exercised")
	}
}
