package rib

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"flowzero/internal/hugemem"
	"flowzero/internal/testutil"
	"flowzero/rib/bgp"
)

// withFlat builds the flat array whatever the table's size, for the test.
func withFlat(t *testing.T) {
	t.Helper()
	n := flatMinPrefixes
	flatMinPrefixes = 0
	t.Cleanup(func() { flatMinPrefixes = n })
}

func flatAttrs(nh netip.Addr, path ...uint32) *bgp.Attributes {
	return &bgp.Attributes{ASPath: path, ASPathLength: uint16(len(path)), NextHop: nh, Origin: bgp.OriginIGP}
}

// checkFlat compares the flat array's answers with the trie's at the edges of every prefix
// given and at random addresses.
func checkFlat(t *testing.T, r *RIB, prefixes []netip.Prefix, rnd *rand.Rand) {
	t.Helper()
	f := r.flat.Load()
	if f == nil {
		t.Fatal("no flat array")
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
		check(p.Addr())
		check(p.Addr().Prev())
		last := p.Addr().As4()
		for k := p.Bits(); k < 32; k++ {
			last[k/8] |= 1 << (7 - k%8)
		}
		check(netip.AddrFrom4(last))
		check(netip.AddrFrom4(last).Next())
	}
	for range 2000 {
		check(netip.AddrFrom4([4]byte{byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32())}))
	}
}

// TestFlat4 changes a table at random (announcements and withdrawals of nested prefixes of
// every length from /6 to /32, from two peers, with changing attributes, peer removals) and
// checks after each commit that IPv4 lookups through the array answer what the trie does,
// through updates in place, rebuilds of worn arrays and rebuilds after large changes.
func TestFlat4(t *testing.T) {
	withFlat(t)
	r := NewTable(DefaultConfiguration())
	peers := []PeerID{
		r.Peer(PeerKey{Address: netip.MustParseAddr("192.0.2.1")}, netip.Addr{}),
		r.Peer(PeerKey{Address: netip.MustParseAddr("192.0.2.2")}, netip.Addr{}),
	}
	rnd := rand.New(rand.NewPCG(7, 8))
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
		bits := 8 + rnd.IntN(25)
		if rnd.IntN(shortEvery) == 0 {
			bits = 6 // shorter than flatRebuildBits: a rebuild
		}
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32()),
			byte(rnd.Uint32())}), bits).Masked()
	}
	rebuilt := commitAtRandom(r, peers, netip.MustParseAddr("192.0.2.1"), rnd, rounds, &prefixes, randomPrefix,
		func() { checkFlat(t, r, prefixes, rnd) }, func() any { return r.flat.Load() })
	if rebuilt < 2 {
		t.Errorf("%d rebuilds: the test does not reach them", rebuilt)
	}
	// A table that becomes small goes back to the trie alone.
	flatMinPrefixes = 1 << 30
	r.Add(peers[0], netip.MustParsePrefix("198.51.100.0/24"), 0, flatAttrs(netip.MustParseAddr("192.0.2.1"), 1))
	if r.flat.Load() != nil {
		t.Error("flat array kept for a small table")
	}
}

// nestedIn returns a random prefix inside q (q itself included): random bits past q's, a
// random length from q's to the address's.
func nestedIn(rnd *rand.Rand, q netip.Prefix) netip.Prefix {
	a, n := q.Addr().AsSlice(), q.Addr().BitLen()
	for k := q.Bits(); k < n; k++ {
		if rnd.IntN(2) == 1 {
			a[k/8] |= 1 << (7 - k%8)
		}
	}
	addr, _ := netip.AddrFromSlice(a)
	return netip.PrefixFrom(addr, q.Bits()+rnd.IntN(n+1-q.Bits())).Masked()
}

// commitAtRandom commits rounds transactions of 1 to 40 announcements (of randomPrefix's
// prefixes, added to prefixes) and withdrawals from either peer, removing a peer every 30th,
// and calls check after each commit. It returns how many times array changed: the rebuilds
// of the array under test.
func commitAtRandom(r *RIB, peers []PeerID, nh netip.Addr, rnd *rand.Rand, rounds int, prefixes *[]netip.Prefix,
	randomPrefix func() netip.Prefix, check func(), array func() any) int {
	first := array()
	rebuilt := 0
	for round := range rounds {
		tx := r.Begin()
		for range 1 + rnd.IntN(40) {
			switch op := rnd.IntN(10); {
			case op < 6 || len(*prefixes) == 0:
				p := randomPrefix()
				*prefixes = append(*prefixes, p)
				tx.Add(peers[rnd.IntN(2)], p, 0, flatAttrs(nh, 65000, uint32(rnd.IntN(5000))))
			default:
				tx.Withdraw(peers[rnd.IntN(2)], (*prefixes)[rnd.IntN(len(*prefixes))], 0)
			}
		}
		if round%30 == 29 {
			tx.RemovePeer(peers[rnd.IntN(2)])
		}
		tx.Commit()
		check()
		if f := array(); f != first {
			rebuilt++
			first = f
		}
	}
	return rebuilt
}

// TestFlat4NextLookup checks that each kind of change shows in the next lookup through the
// array: a new route, a changed one, a more specific one (also past /24), a withdrawal.
func TestFlat4NextLookup(t *testing.T) {
	withFlat(t)
	r := NewTable(DefaultConfiguration())
	peer := r.Peer(PeerKey{Address: netip.MustParseAddr("192.0.2.1")}, netip.Addr{})
	nh := netip.MustParseAddr("192.0.2.1")
	addr := netip.MustParseAddr("10.1.2.200")
	origin := func() uint32 {
		rt, ok := r.Lookup(addr)
		if !ok {
			return 0
		}
		return rt.OriginAS
	}
	for _, step := range []struct {
		change func()
		want   uint32
	}{
		{func() { r.Add(peer, netip.MustParsePrefix("10.0.0.0/8"), 0, flatAttrs(nh, 1, 8)) }, 8},
		{func() { r.Add(peer, netip.MustParsePrefix("10.0.0.0/8"), 0, flatAttrs(nh, 1, 80)) }, 80},
		{func() { r.Add(peer, netip.MustParsePrefix("10.1.0.0/16"), 0, flatAttrs(nh, 1, 16)) }, 16},
		{func() { r.Add(peer, netip.MustParsePrefix("10.1.2.128/25"), 0, flatAttrs(nh, 1, 25)) }, 25},
		{func() { r.Add(peer, netip.MustParsePrefix("10.1.2.0/24"), 0, flatAttrs(nh, 1, 24)) }, 25},
		{func() { r.Withdraw(peer, netip.MustParsePrefix("10.1.2.128/25"), 0) }, 24},
		{func() { r.Add(peer, netip.MustParsePrefix("10.1.2.200/32"), 0, flatAttrs(nh, 1, 32)) }, 32},
		{func() { r.Add(peer, netip.MustParsePrefix("10.1.2.0/24"), 0, flatAttrs(nh, 1, 240)) }, 32},
		{func() { r.Withdraw(peer, netip.MustParsePrefix("10.1.2.200/32"), 0) }, 240},
		{func() { r.Withdraw(peer, netip.MustParsePrefix("10.1.2.0/24"), 0) }, 16},
		{func() { r.Withdraw(peer, netip.MustParsePrefix("10.1.0.0/16"), 0) }, 80},
		{func() { r.Add(peer, netip.MustParsePrefix("0.0.0.0/0"), 0, flatAttrs(nh, 1, 1)) }, 80},
		{func() { r.Withdraw(peer, netip.MustParsePrefix("10.0.0.0/8"), 0) }, 1},
		{func() { r.RemovePeer(peer) }, 0},
	} {
		step.change()
		if r.flat.Load() == nil && step.want != 0 {
			t.Fatal("no flat array")
		}
		if got := origin(); got != step.want {
			t.Fatalf("origin AS %d, want %d", got, step.want)
		}
	}
}

// TestFlat4Concurrent looks addresses up while routes change (run with -race): every answer
// is a route the address had at some commit.
func TestFlat4Concurrent(t *testing.T) {
	withFlat(t)
	lookupsDuringChanges(t, "192.0.2.1", "10.0.0.0/8", []string{"10.1.0.0/16", "10.1.2.0/30"},
		[]string{"10.1.2.3", "10.1.2.3"})
}

// lookupsDuringChanges announces base from peer with origin AS 1, then, 2,000 times, changes
// (announced together with origin AS 1000+i, withdrawn every other time), while two
// goroutines look addrs up: each answer must be base's route or one of the changes'.
func lookupsDuringChanges(t *testing.T, peerAddr, base string, changes, addrs []string) {
	r := NewTable(DefaultConfiguration())
	nh := netip.MustParseAddr(peerAddr)
	peer := r.Peer(PeerKey{Address: nh}, netip.Addr{})
	r.Add(peer, netip.MustParsePrefix(base), 0, flatAttrs(nh, 1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, s := range addrs {
		wg.Go(func() {
			a := netip.MustParseAddr(s)
			for !stop.Load() {
				rt, ok := r.Lookup(a)
				if !ok || (rt.OriginAS != 1 && rt.OriginAS < 1000) {
					t.Errorf("lookup of %s during changes: %+v %v", a, rt, ok)
					return
				}
			}
		})
	}
	for i := range 2000 {
		tx := r.Begin()
		for _, c := range changes {
			tx.Add(peer, netip.MustParsePrefix(c), 0, flatAttrs(nh, 1, uint32(1000+i)))
		}
		tx.Commit()
		if i%2 == 1 {
			tx := r.Begin()
			for _, c := range changes {
				tx.Withdraw(peer, netip.MustParsePrefix(c), 0)
			}
			tx.Commit()
		}
	}
	stop.Store(true)
	wg.Wait()
}

// TestFlat4Released checks that the arrays of replaced flat4s (a rebuild, the table becoming
// small) and of a dropped RIB are unmapped: rebuilds and reloads leak no memory outside the
// Go heap.
func TestFlat4Released(t *testing.T) {
	withFlat(t)
	arraysReleased(t, released{
		peer: "192.0.2.1", prefix: "198.51.100.0/24", in: "198.51.100.1",
		// shorter than flatRebuildBits
		rebuild: func(i int) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(i * 16)}), 6) },
		more:    [2]string{"203.0.113.0/24", "203.0.114.0/24"},
		min:     &flatMinPrefixes,
		array:   func(r *RIB) any { return orNil(r.flat.Load()) },
	})
}

// released describes, for one family, the routes arraysReleased adds and where the family's
// array and its threshold are.
type released struct {
	peer, prefix, in string                   // the peer, a first prefix, an address in it
	rebuild          func(i int) netip.Prefix // the i-th prefix that rebuilds the array
	more             [2]string                // two prefixes added once the table is small
	min              *int                     // the threshold below which there is no array
	array            func(r *RIB) any         // the array, as a comparable value (nil: none)
}

// orNil is f as an interface, nil (not a typed nil) when f is nil.
func orNil[F any](f *F) any {
	if f == nil {
		return nil
	}
	return f
}

// arraysReleased checks that a family's arrays are unmapped once replaced by rebuilds, once
// the table becomes small, and once the RIB is dropped.
func arraysReleased(t *testing.T, c released) {
	t.Helper()
	mapped := func(what string, atMost int64) {
		t.Helper()
		testutil.WaitUntil(t, what, func() bool {
			runtime.GC()
			return hugemem.Mapped() <= atMost
		})
	}
	mapped("the arrays of earlier tests released", 0)
	r := NewTable(DefaultConfiguration())
	nh := netip.MustParseAddr(c.peer)
	peer := r.Peer(PeerKey{Address: nh}, netip.Addr{})
	p := netip.MustParsePrefix(c.prefix)
	r.Add(peer, p, 0, flatAttrs(nh, 1))
	one := hugemem.Mapped()
	if runtime.GOOS == "linux" && one < 64<<20 {
		t.Fatalf("%d bytes mapped for the array, want at least 64 MiB", one)
	}
	first := c.array(r)
	for i := range 10 {
		r.Add(peer, c.rebuild(i), 0, flatAttrs(nh, 2, uint32(i)))
	}
	if c.array(r) == first {
		t.Fatal("no rebuild")
	}
	first = nil
	mapped("the rebuilt arrays released", one)
	if got, ok := r.Lookup(netip.MustParseAddr(c.in)); !ok || got.Bits != uint8(p.Bits()) {
		t.Fatalf("lookup after the rebuilds: %+v %v", got, ok)
	}
	*c.min = 1 << 30
	r.Add(peer, netip.MustParsePrefix(c.more[0]), 0, flatAttrs(nh, 3))
	if c.array(r) != nil {
		t.Fatal("array kept for a small table")
	}
	mapped("the array of a table become small released", 0)
	*c.min = 0
	r.Add(peer, netip.MustParsePrefix(c.more[1]), 0, flatAttrs(nh, 3))
	if c.array(r) == nil {
		t.Fatal("no array for a large table")
	}
	runtime.KeepAlive(r)
	r = nil
	mapped("the array of a dropped RIB released", 0)
}
