package rib

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// withFlat6 builds the IPv6 tables whatever the table's size, for the test.
func withFlat6(t *testing.T) {
	t.Helper()
	n := flat6MinPrefixes
	flat6MinPrefixes = 0
	t.Cleanup(func() { flat6MinPrefixes = n })
}

// lastAddr6 is the last address of p.
func lastAddr6(p netip.Prefix) netip.Addr {
	a := p.Addr().As16()
	for k := p.Bits(); k < 128; k++ {
		a[k/8] |= 1 << (7 - k%8)
	}
	return netip.AddrFrom16(a)
}

// checkFlat6 compares the RIB's IPv6 answers (through its tables) with the trie's at the
// edges of every prefix given and of its /24, /32, /40 and /48 blocks, and at random
// addresses.
func checkFlat6(t *testing.T, r *RIB, prefixes []netip.Prefix, rnd *rand.Rand) {
	t.Helper()
	if r.flat6.Load() == nil {
		t.Fatal("no IPv6 tables")
	}
	trie := r.cur.Load()
	check := func(a netip.Addr) {
		t.Helper()
		if !a.IsValid() {
			return
		}
		want, wantOK := trie.Lookup(a)
		got, ok := r.Lookup(a)
		if got != want || ok != wantOK {
			t.Fatalf("%s: %+v %v, the trie says %+v %v", a, got, ok, want, wantOK)
		}
	}
	for _, p := range prefixes {
		for _, bits := range []int{p.Bits(), 24, 32, 40, 48} {
			q := netip.PrefixFrom(p.Addr(), min(bits, p.Bits())).Masked()
			check(q.Addr())
			check(q.Addr().Prev())
			check(lastAddr6(q))
			check(lastAddr6(q).Next())
		}
	}
	for range 2000 {
		var a [16]byte
		for i := range a {
			a[i] = byte(rnd.Uint32())
		}
		a[0] = 0x20 | a[0]&0x1f
		check(netip.AddrFrom16(a))
	}
}

// TestFlat6 changes a table at random (announcements and withdrawals of nested IPv6 prefixes
// from /16 to /128, many of them around /24, /32, /40 and /48, from two peers, with changing
// attributes, peer removals) and checks after each commit that IPv6 lookups through the
// tables answer what the trie does, through updates in place, rebuilds of worn tables and
// rebuilds after changes of prefixes shorter than /16.
func TestFlat6(t *testing.T) {
	withFlat6(t)
	r := NewTable(DefaultConfiguration())
	peers := []PeerID{
		r.Peer(PeerKey{Address: netip.MustParseAddr("2001:db8::1")}, netip.Addr{}),
		r.Peer(PeerKey{Address: netip.MustParseAddr("2001:db8::2")}, netip.Addr{}),
	}
	rnd := rand.New(rand.NewPCG(9, 10))
	rounds, shortEvery := 200, 200
	if raceEnabled {
		rounds, shortEvery = 40, 60
	}
	var prefixes []netip.Prefix
	randomPrefix := func() netip.Prefix {
		if len(prefixes) > 0 && rnd.IntN(3) == 0 {
			// nested in an earlier one
			return nestedIn(rnd, prefixes[rnd.IntN(len(prefixes))])
		}
		var a [16]byte
		for i := range a {
			a[i] = byte(rnd.Uint32())
		}
		a[0] = 0x20 | a[0]&0x1f
		a[1] &= 0x3 // a few /16s: the prefixes share blocks
		bits := 16 + rnd.IntN(113)
		switch rnd.IntN(3) {
		case 0:
			bits = 22 + 8*rnd.IntN(4) + rnd.IntN(5) // around a table's edge
		case 1:
			bits = 16 + rnd.IntN(49)
		}
		if rnd.IntN(shortEvery) == 0 {
			bits = 12 // shorter than flat6RebuildBits: a rebuild
		}
		return netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked()
	}
	nh := netip.MustParseAddr("2001:db8::1")
	rebuilt := commitAtRandom(r, peers, nh, rnd, rounds, &prefixes, randomPrefix,
		func() { checkFlat6(t, r, prefixes, rnd) }, func() any { return r.flat6.Load() })
	if rebuilt < 2 {
		t.Errorf("%d rebuilds: the test does not reach them", rebuilt)
	}
	// A table that becomes small goes back to the trie alone.
	flat6MinPrefixes = 1 << 30
	r.Add(peers[0], netip.MustParsePrefix("2001:db8:100::/48"), 0, flatAttrs(nh, 1))
	if r.flat6.Load() != nil {
		t.Error("IPv6 tables kept for a small table")
	}
}

// TestFlat6NextLookup checks that each kind of change shows in the next lookup through the
// tables: a new route, a changed one, a more specific one at each level and past /48, a
// withdrawal, a default route, a peer removed.
func TestFlat6NextLookup(t *testing.T) {
	withFlat6(t)
	r := NewTable(DefaultConfiguration())
	peer := r.Peer(PeerKey{Address: netip.MustParseAddr("2001:db8::1")}, netip.Addr{})
	nh := netip.MustParseAddr("2001:db8::1")
	addr := netip.MustParseAddr("2001:db8:1234:5678:9abc::1")
	origin := func() uint32 {
		rt, ok := r.Lookup(addr)
		if !ok {
			return 0
		}
		return rt.OriginAS
	}
	add := func(p string, as uint32) func() {
		return func() { r.Add(peer, netip.MustParsePrefix(p).Masked(), 0, flatAttrs(nh, 1, as)) }
	}
	withdraw := func(p string) func() { return func() { r.Withdraw(peer, netip.MustParsePrefix(p).Masked(), 0) } }
	for _, step := range []struct {
		change func()
		want   uint32
	}{
		{add("2001:db8::/32", 32), 32},
		{add("2001:db8::/32", 320), 320},
		{add("2001:db8:1200::/40", 40), 40},
		{add("2001:db8:1234::/48", 48), 48},
		{add("2001:db8:1234:5678::/64", 64), 64},
		{add("2001:db8:1234::/48", 480), 64},
		{withdraw("2001:db8:1234:5678::/64"), 480},
		{add("2001:db8:1234:5678:9abc::1/128", 128), 128},
		{withdraw("2001:db8:1234:5678:9abc::1/128"), 480},
		{add("2001:d00::/22", 22), 480},
		{add("2001:db8:1234::/47", 47), 480},
		{withdraw("2001:db8:1234::/48"), 47},
		{withdraw("2001:db8:1234::/47"), 40},
		{withdraw("2001:db8:1200::/40"), 320},
		{add("2001:db8::/25", 25), 320},
		{withdraw("2001:db8::/32"), 25},
		{withdraw("2001:db8::/25"), 22},
		{add("::/0", 1), 22},
		{withdraw("2001:d00::/22"), 1},
		{func() { r.RemovePeer(peer) }, 0},
	} {
		step.change()
		if r.flat6.Load() == nil && step.want != 0 {
			t.Fatal("no IPv6 tables")
		}
		if got := origin(); got != step.want {
			t.Fatalf("origin AS %d, want %d", got, step.want)
		}
	}
}

// TestFlat6Concurrent looks addresses up while routes change at three levels (run with
// -race): every answer is a route the address had at some commit.
func TestFlat6Concurrent(t *testing.T) {
	withFlat6(t)
	lookupsDuringChanges(t, "2001:db8::1", "2001:db8::/32", []string{"2001:db8::/36", "2001:db8:1::/48", "2001:db8:1:2:3::/80"},
		[]string{"2001:db8:1:2::3", "2001:db8:1:2:3::4"})
}

// TestFlat6Released checks that the arrays of replaced flat6s (a rebuild, the table becoming
// small) and of a dropped RIB are unmapped.
func TestFlat6Released(t *testing.T) {
	withFlat6(t)
	arraysReleased(t, released{
		peer: "2001:db8::1", prefix: "2001:db8::/32", in: "2001:db8::1",
		// shorter than flat6RebuildBits
		rebuild: func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x30, byte(i * 16)}), 12) },
		more:    [2]string{"2001:db8:1::/48", "2001:db8:2::/48"},
		min:     &flat6MinPrefixes,
		array:   func(r *RIB) any { return orNil(r.flat6.Load()) },
	})
}
