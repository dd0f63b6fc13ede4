package enrich

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestAddrTable(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	want := map[netip.Addr]int{}
	table := newAddrTable[int]()
	for i := range 600 {
		var a netip.Addr
		if i%3 == 0 {
			var b [16]byte
			for j := range b {
				b[j] = byte(rnd.UintN(256))
			}
			b[0] = 0x20 // not IPv4-mapped
			a = netip.AddrFrom16(b)
		} else {
			a = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		}
		want[a] = i
		table = table.with(a, i)
	}
	// Setting an address again replaces its value.
	first := netip.AddrFrom4([4]byte{10, 0, 0, 1})
	table = table.with(first, -1)
	want[first] = -1
	if table.len() != len(want) {
		t.Fatalf("len %d, want %d", table.len(), len(want))
	}
	for a, v := range want {
		if got, ok := table.get(a); !ok || got != v {
			t.Fatalf("%s: %d, %v; want %d", a, got, ok, v)
		}
		// IPv4 and IPv4-mapped IPv6 are the same exporter.
		if a.Is4() {
			if got, ok := table.get(netip.AddrFrom16(a.As16())); !ok || got != v {
				t.Fatalf("%s mapped: %d, %v", a, got, ok)
			}
		}
	}
	for _, a := range []string{"10.255.0.0", "2001:db8::1", "::", "0.0.0.0"} {
		if _, ok := table.get(netip.MustParseAddr(a)); ok {
			t.Errorf("%s found", a)
		}
	}
	n := 0
	table.values(func(int) { n++ })
	if n != len(want) {
		t.Errorf("values: %d", n)
	}
	if len(table.slots) < 2*table.len() {
		t.Errorf("%d slots for %d addresses: more than half full", len(table.slots), table.len())
	}
}
