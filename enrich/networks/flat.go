package networks

import (
	"iter"
	"net/netip"
	"runtime"

	"flowzero/internal/hugemem"
)

// flatMinPrefixes is the number of IPv4 prefixes from which the global table gets a flat4:
// below it the trie's nodes stay in the CPU caches and the array would only cost memory.
var flatMinPrefixes = 1 << 16

// flatSub marks a flat4.top entry that holds a sub-table index rather than a leaf index.
const flatSub = 1 << 31

// flat4 is the IPv4 part of the global table as a DIR-24-8 array (Gupta, Lin, McKeown,
// "Routing lookups in hardware at memory access speeds", 1998): the first 24 bits of an
// address index top, whose entry is 0 (no prefix), a leaf index plus one, or flatSub and the
// index of a 256-entry sub-table of sub, indexed by the last byte, for the /24s holding
// longer prefixes. A lookup reads one entry of top (two for such /24s) and the leaf, where
// the trie reads three or four nodes. It is built with the table and never changes. top is
// on huge pages outside the Go heap (internal/hugemem), unmapped when the flat4 is collected.
type flat4 struct {
	top    *[1 << 24]uint32
	sub    []uint32
	leaves []leaf
}

// lookup returns the leaf of the longest prefix holding the IPv4 address a.
func (f *flat4) lookup(a netip.Addr) (leaf, bool) {
	b := a.As4()
	v := f.top[uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2])]
	if v&flatSub != 0 {
		v = f.sub[(v&^flatSub)<<8|uint32(b[3])]
	}
	runtime.KeepAlive(f) // top is f's: read before f may be collected
	if v == 0 || int(v) > len(f.leaves) {
		return leaf{}, false
	}
	return f.leaves[v-1], true
}

// newFlat4 builds the array of IPv4 prefixes given with every supernet before its subnets
// (bart's AllSorted4 order): each prefix fills its range, and its subnets, coming later,
// overwrite theirs, so each entry ends up with the longest prefix holding it.
func newFlat4(prefixes iter.Seq2[netip.Prefix, leaf]) *flat4 {
	f := &flat4{}
	f.top = (*[1 << 24]uint32)(hugemem.Uint32s(f, 1<<24))
	index := map[leaf]uint32{}
	for p, l := range prefixes {
		v, ok := index[l]
		if !ok {
			f.leaves = append(f.leaves, l)
			v = uint32(len(f.leaves))
			index[l] = v
		}
		b, bits := p.Addr().As4(), p.Bits()
		i := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
		if bits <= 24 {
			fill(f.top[i:i+1<<(24-bits)], v)
			continue
		}
		e := f.top[i]
		if e&flatSub == 0 {
			// The first prefix longer than /24 in this /24: a sub-table holding what the
			// /24 had.
			n := uint32(len(f.sub) >> 8)
			f.sub = append(f.sub, make([]uint32, 256)...)
			fill(f.sub[n<<8:(n+1)<<8], e)
			e = flatSub | n
			f.top[i] = e
		}
		j := (e&^flatSub)<<8 | uint32(b[3])
		fill(f.sub[j:j+1<<(32-bits)], v)
	}
	return f
}

func fill(s []uint32, v uint32) {
	for i := range s {
		s[i] = v
	}
}
