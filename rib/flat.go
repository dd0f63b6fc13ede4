package rib

import (
	"net/netip"
	"runtime"
	"sync/atomic"

	"github.com/gaissmai/bart"

	"flowzero/internal/hugemem"
)

// flatMinPrefixes is the number of IPv4 prefixes from which the RIB keeps a flat4: below it
// the trie's nodes stay in the CPU caches and the array would only cost memory.
var flatMinPrefixes = 1 << 16

const (
	// flatSub marks a top entry holding a sub-table number rather than a route number.
	flatSub = 1 << 31
	// routeChunk is the number of routes per chunk of flat4.routes.
	routeChunkBits = 14
	routeChunk     = 1 << routeChunkBits
)

// flat4 answers IPv4 lookups with a DIR-24-8 array (Gupta, Lin, McKeown, "Routing lookups
// in hardware at memory access speeds", 1998) kept equal to the lookup trie: the first 24
// bits of an address index top, whose entry is 0 (no route), a route number plus one, or
// flatSub and the number of a 256-entry sub-table indexed by the last byte, for the /24s
// holding longer prefixes. A lookup reads one entry (two in such /24s) and the route, where
// the trie reads three or four nodes.
//
// The array is updated in place at each commit, entry by entry with atomic stores, from the
// committed trie: every entry inside a changed prefix is computed again, so each lookup sees
// the route before or after the commit. Routes are interned in chunks that never move, and a
// route is never changed once an entry may point to it: a reader that loaded a number reads
// the route it meant. Numbers of routes (and sub-tables) no longer used are not reused: when
// they outnumber the live ones, the whole flat4 is rebuilt from the trie and swapped in.
type flat4 struct {
	// Entries are read and, once published, written with sync/atomic's functions; newFlat4
	// fills them with plain stores before the array is published. top is on huge pages
	// outside the Go heap (internal/hugemem), unmapped when the flat4 is collected.
	top  *[1 << 24]uint32
	subs atomic.Pointer[[]*[256]uint32]
	routeNumbers

	// writer's state (RIB.mu held)
	limitN  uint32 // rebuild past these
	limitSu int
	// update's buffers: a changed range's entries, and its sub-tables by /24 in the range
	scratch     []uint32
	scratchSubs map[uint32]*[256]uint32
}

// lookup returns the route of the longest prefix holding the IPv4 address a.
func (f *flat4) lookup(a netip.Addr) (Route, bool) {
	b := a.As4()
	v := atomic.LoadUint32(&f.top[uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2])])
	if v&flatSub != 0 {
		v = atomic.LoadUint32(&(*f.subs.Load())[v&^flatSub][b[3]])
	}
	runtime.KeepAlive(f) // top is f's: read before f may be collected
	if v == 0 {
		return Route{}, false
	}
	return f.route(v), true
}

// newFlat4 builds the array of the IPv4 routes of t.
func newFlat4(t *bart.Fast[Route]) *flat4 {
	f := &flat4{scratchSubs: map[uint32]*[256]uint32{}}
	f.top = (*[1 << 24]uint32)(hugemem.Uint32s(f, 1<<24))
	f.subs.Store(&[]*[256]uint32{})
	f.routeNumbers.init()
	// Supernets come before their subnets: each prefix fills its range, and its subnets,
	// coming later, overwrite theirs.
	for p, rt := range t.AllSorted4() {
		v := f.number(rt)
		b, bits := p.Addr().As4(), p.Bits()
		i := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
		if bits <= 24 {
			fill(f.top[i:i+1<<(24-bits)], v)
			continue
		}
		fill(f.sub(i)[b[3]:uint32(b[3])+1<<(32-bits)], v)
	}
	f.limitN = 2*f.n + routeChunk
	f.limitSu = 2*len(*f.subs.Load()) + 256
	return f
}

// routeNumbers interns the routes a flat array's entries name, by number plus one, in chunks
// that never move: a route is never changed once an entry may name it.
type routeNumbers struct {
	routes atomic.Pointer[[]*[routeChunk]Route]
	// writer's state (RIB.mu held)
	n     uint32 // routes interned
	index map[Route]uint32
}

func (f *routeNumbers) init() {
	f.index = map[Route]uint32{}
	f.routes.Store(&[]*[routeChunk]Route{})
}

// route returns the route of number v (plus one, not 0).
func (f *routeNumbers) route(v uint32) Route {
	v--
	return (*f.routes.Load())[v>>routeChunkBits][v&(routeChunk-1)]
}

// number returns the number (plus one) of rt, interned.
func (f *routeNumbers) number(rt Route) uint32 {
	if v, ok := f.index[rt]; ok {
		return v
	}
	chunks := *f.routes.Load()
	if f.n&(routeChunk-1) == 0 {
		// The new chunk is in place before any entry can name a route in it.
		chunks = append(chunks, new([routeChunk]Route))
		f.routes.Store(&chunks)
	}
	chunks[f.n>>routeChunkBits][f.n&(routeChunk-1)] = rt
	f.n++
	f.index[rt] = f.n
	return f.n
}

// sub returns the sub-table of /24 number i, made from its top entry when it has none (the
// entry then points to it).
func (f *flat4) sub(i uint32) *[256]uint32 {
	e := atomic.LoadUint32(&f.top[i])
	if e&flatSub != 0 {
		return (*f.subs.Load())[e&^flatSub]
	}
	s := new([256]uint32)
	fill(s[:], e) // not seen by readers before the store below
	subs := append(*f.subs.Load(), s)
	f.subs.Store(&subs)
	atomic.StoreUint32(&f.top[i], flatSub|uint32(len(subs)-1))
	return s
}

// flatRebuildBits is the prefix length below which a changed prefix rebuilds the whole
// array rather than its range (a default route, a /4).
const flatRebuildBits = 8

// update computes again, from t, every entry inside the IPv4 prefix p (of at least
// flatRebuildBits bits). Each entry gets its final value in one store: the values of the
// range are worked out aside first.
func (f *flat4) update(t *bart.Fast[Route], p netip.Prefix) {
	b, bits := p.Addr().As4(), p.Bits()
	i := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
	if bits > 24 {
		s := f.sub(i)
		for k := uint32(b[3]); k < uint32(b[3])+1<<(32-bits); k++ {
			var v uint32
			if rt, ok := t.Lookup(netip.AddrFrom4([4]byte{b[0], b[1], b[2], byte(k)})); ok {
				v = f.number(rt)
			}
			atomic.StoreUint32(&s[k], v)
		}
		return
	}
	// The range's values: the route of p (or of its longest supernet, p withdrawn), then its
	// subnets', supernets before subnets, as newFlat4 does.
	n := uint32(1) << (24 - bits)
	f.scratch = f.scratch[:0]
	var base uint32
	if rt, ok := t.LookupPrefix(p); ok {
		base = f.number(rt)
	}
	for range n {
		f.scratch = append(f.scratch, base)
	}
	clear(f.scratchSubs)
	for q, rt := range t.Subnets(p) {
		v := f.number(rt)
		qb, qbits := q.Addr().As4(), q.Bits()
		k := uint32(qb[0])<<16 | uint32(qb[1])<<8 | uint32(qb[2]) - i
		if qbits <= 24 {
			fill(f.scratch[k:k+1<<(24-qbits)], v)
			continue
		}
		s := f.scratchSubs[k]
		if s == nil {
			s = new([256]uint32)
			fill(s[:], f.scratch[k])
			f.scratchSubs[k] = s
		}
		fill(s[qb[3]:uint32(qb[3])+1<<(32-qbits)], v)
	}
	for k := range n {
		e := atomic.LoadUint32(&f.top[i+k])
		s := f.scratchSubs[k]
		switch {
		case s != nil && e&flatSub != 0:
			live := (*f.subs.Load())[e&^flatSub]
			for j := range live {
				atomic.StoreUint32(&live[j], s[j])
			}
		case s != nil:
			live := s // not seen by readers before the store below
			delete(f.scratchSubs, k)
			subs := append(*f.subs.Load(), live)
			f.subs.Store(&subs)
			atomic.StoreUint32(&f.top[i+k], flatSub|uint32(len(subs)-1))
		default:
			// A sub-table no longer needed stays unused until the next rebuild.
			atomic.StoreUint32(&f.top[i+k], f.scratch[k])
		}
	}
}

func fill(s []uint32, v uint32) {
	for i := range s {
		s[i] = v
	}
}

// worn tells whether the numbers no longer used call for a rebuild.
func (f *flat4) worn() bool {
	return f.n > f.limitN || len(*f.subs.Load()) > f.limitSu
}
