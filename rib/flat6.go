package rib

import (
	"net/netip"
	"runtime"
	"sync/atomic"

	"github.com/gaissmai/bart"

	"flowzero/internal/hugemem"
)

// flat6MinPrefixes is the number of IPv6 prefixes from which the RIB keeps a flat6: below it
// the trie's nodes stay in the CPU caches.
var flat6MinPrefixes = 1 << 16

// What a flat6 entry holds, by its top two bits: a route number plus one (0: no route), the
// number of a 256-entry table of the next byte, or, for a /48, flat6Trie: the block holds
// longer prefixes, which the trie answers.
const (
	flat6Table = 1 << 31
	flat6Trie  = 1 << 30
	flat6Kind  = flat6Table | flat6Trie
)

// flat6RebuildBits is the IPv6 prefix length below which a changed prefix rebuilds the whole
// flat6 rather than its range (2^(24-16) = 256 entries of top at most).
const flat6RebuildBits = 16

// flat6 answers IPv6 lookups with a multibit trie of fixed strides 24, 8, 8 and 8 bits down
// to /48, where most IPv6 routes end, kept equal to the lookup trie: the first 24 bits of an
// address index top, and each of the next three bytes a 256-entry table for the blocks of
// /24, /32 or /40 that hold longer prefixes. A /48 costs four entries and the route, where
// the trie walks up to six nodes; a /48 block holding longer prefixes sends its lookups to
// the trie.
//
// It is updated at each commit as flat4 is, from the committed trie, with atomic stores: the
// entries inside a changed prefix get their final value in one store each, made aside with
// new tables below it when the block holds longer prefixes, so that each lookup sees the
// route before or after the commit. Tables replaced so are no longer written, and neither
// are their numbers reused: when they outnumber the live ones, the flat6 is rebuilt.
type flat6 struct {
	// Entries are read and, once published, written with sync/atomic's functions; tables
	// no reader can reach yet are filled with plain stores. top is on huge pages outside the
	// Go heap (internal/hugemem), unmapped when the flat6 is collected.
	top  *[1 << 24]uint32
	subs atomic.Pointer[[]*[256]uint32]
	routeNumbers

	// writer's state (RIB.mu held)
	limitN  uint32 // rebuild past these
	limitSu int
}

// lookup returns the route of the longest prefix holding the IPv6 address a, or inTrie when
// a's /48 holds longer prefixes: the trie answers those.
func (f *flat6) lookup(a netip.Addr) (rt Route, ok, inTrie bool) {
	b := a.As16()
	v := atomic.LoadUint32(&f.top[uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2])])
	runtime.KeepAlive(f) // top is f's: read before f may be collected
	for i := 3; i < 6 && v&flat6Table != 0; i++ {
		// subs is loaded after the entry naming the table: it holds the table.
		v = atomic.LoadUint32(&(*f.subs.Load())[v&^flat6Kind][b[i]])
	}
	if v&flat6Trie != 0 {
		return Route{}, false, true
	}
	if v == 0 {
		return Route{}, false, false
	}
	return f.route(v), true, false
}

// newFlat6 builds the tables of the IPv6 routes of t.
func newFlat6(t *bart.Fast[Route]) *flat6 {
	f := &flat6{}
	f.top = (*[1 << 24]uint32)(hugemem.Uint32s(f, 1<<24))
	f.subs.Store(&[]*[256]uint32{})
	f.routeNumbers.init()
	// Supernets come before their subnets: each prefix fills its range, and its subnets,
	// coming later, overwrite theirs.
	for p, rt := range t.AllSorted6() {
		b, bits := p.Addr().As16(), p.Bits()
		i := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
		if bits <= 24 {
			fill(f.top[i:i+1<<(24-bits)], f.number(rt))
			continue
		}
		f.put(&f.top[i], 24, p, rt)
	}
	f.limitN = 2*f.n + routeChunk
	f.limitSu = 2*len(*f.subs.Load()) + 256
	return f
}

// put sets p's route in the tables below entry e, that of a block of end bits holding p (p
// longer than end bits), making the tables it needs from what their block held. No reader
// may see e yet: plain stores.
func (f *flat6) put(e *uint32, end int, p netip.Prefix, rt Route) {
	b, bits := p.Addr().As16(), p.Bits()
	for {
		if end == 48 {
			*e = flat6Trie
			return
		}
		if *e&flat6Table == 0 {
			t := new([256]uint32)
			fill(t[:], *e)
			subs := append(*f.subs.Load(), t)
			f.subs.Store(&subs)
			*e = flat6Table | uint32(len(subs)-1)
		}
		t := (*f.subs.Load())[*e&^flat6Kind]
		i := uint32(b[end/8])
		end += 8
		if bits <= end {
			fill(t[i:i+1<<(end-bits)], f.number(rt))
			return
		}
		e = &t[i]
	}
}

// update computes again, from t, every entry inside the IPv6 prefix p (of at least
// flat6RebuildBits bits). Each entry gets its final value in one store.
func (f *flat6) update(t *bart.Fast[Route], p netip.Prefix) {
	b, bits := p.Addr().As16(), p.Bits()
	// The entries of p's range are from i in entries, a table of the level ending at bit end.
	i, end := uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2]), 24
	entries := f.top[:]
	for bits > end && end < 48 {
		entries = f.table(&entries[i])[:]
		i, end = uint32(b[end/8]), end+8
	}
	if bits > 48 {
		atomic.StoreUint32(&entries[i], flat6Trie)
		return
	}
	for k := i; k < i+1<<(end-bits); k++ {
		q := b
		if end == 24 {
			q[0], q[1], q[2] = byte(k>>16), byte(k>>8), byte(k)
		} else {
			q[end/8-1] = byte(k)
		}
		atomic.StoreUint32(&entries[k], f.entry(t, netip.PrefixFrom(netip.AddrFrom16(q), end).Masked()))
	}
}

// table returns the live table below entry e (of a block shorter than /48), made from its
// route when it has none (e then names it).
func (f *flat6) table(e *uint32) *[256]uint32 {
	v := atomic.LoadUint32(e)
	if v&flat6Table != 0 {
		return (*f.subs.Load())[v&^flat6Kind]
	}
	t := new([256]uint32)
	fill(t[:], v) // not seen by readers before the store below
	subs := append(*f.subs.Load(), t)
	f.subs.Store(&subs)
	atomic.StoreUint32(e, flat6Table|uint32(len(subs)-1))
	return t
}

// entry returns the entry of block q (of 24, 32, 40 or 48 bits) from t: its route when it
// holds no longer prefix, else new tables filled from t's prefixes inside it.
func (f *flat6) entry(t *bart.Fast[Route], q netip.Prefix) uint32 {
	var e uint32
	if rt, ok := t.LookupPrefix(q); ok {
		e = f.number(rt)
	}
	for p, rt := range t.Subnets(q) {
		if p.Bits() > q.Bits() {
			f.put(&e, q.Bits(), p, rt)
		}
	}
	return e
}

// worn tells whether the numbers no longer used call for a rebuild.
func (f *flat6) worn() bool {
	return f.n > f.limitN || len(*f.subs.Load()) > f.limitSu
}
