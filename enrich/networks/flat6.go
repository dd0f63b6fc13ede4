package networks

import (
	"iter"
	"net/netip"
	"runtime"

	"github.com/gaissmai/bart"

	"flowzero/internal/hugemem"
)

// flat6MinPrefixes is the number of IPv6 prefixes from which the global table gets a flat6:
// below it the trie's nodes stay in the CPU caches.
var flat6MinPrefixes = 1 << 16

// What a flat6 entry holds, by its top two bits: a leaf index plus one (0: no prefix), the
// index of a 256-entry table of the next 8 bits, or (after /48) the index of a trie.
const (
	flat6Table = 1 << 31
	flat6Trie  = 1 << 30
	flat6Kind  = flat6Table | flat6Trie
)

// flat6 is the IPv6 part of the global table as a multibit trie of fixed strides 24, 8, 8
// and 8 bits down to /48, where most IPv6 routes end: the first 24 bits of an address index
// top, and each of the next three bytes a 256-entry table of sub, for the blocks holding
// longer prefixes. An entry is a leaf, a table of the next byte or, after the sixth byte, a
// trie holding the block's prefixes longer than /48 shifted left by 48 bits, with what the
// block held as ::/0. A /48 costs four entries and the leaf, one line each, where the trie
// walks up to six nodes of three lines. Built with the table and never changed; top is on
// huge pages outside the Go heap (internal/hugemem).
type flat6 struct {
	top    *[1 << 24]uint32
	sub    []uint32
	tries  []*bart.Fast[leaf]
	leaves []leaf
}

// lookup returns the leaf of the longest prefix holding the IPv6 address a.
func (f *flat6) lookup(a netip.Addr) (leaf, bool) {
	b := a.As16()
	v := f.top[uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2])]
	runtime.KeepAlive(f) // top is f's: read before f may be collected
	for i := 3; i < 6 && v&flat6Table != 0; i++ {
		v = f.sub[(v&^flat6Kind)<<8|uint32(b[i])]
	}
	if v&flat6Trie != 0 {
		return f.tries[v&^flat6Kind].Lookup(shift48(b))
	}
	if v == 0 || int(v) > len(f.leaves) {
		return leaf{}, false
	}
	return f.leaves[v-1], true
}

// shift48 is the address b shifted left by 48 bits.
func shift48(b [16]byte) netip.Addr {
	var s [16]byte
	copy(s[:], b[6:])
	return netip.AddrFrom16(s)
}

// newFlat6 builds the tables from the IPv6 prefixes given with every supernet before its
// subnets (bart's AllSorted6 order): each prefix fills its range at the level where it ends,
// and its subnets, coming later, overwrite theirs. A block gets its table (or trie) at the
// first prefix longer than the block, filled with what the block held.
func newFlat6(prefixes iter.Seq2[netip.Prefix, leaf]) *flat6 {
	f := &flat6{}
	f.top = (*[1 << 24]uint32)(hugemem.Uint32s(f, 1<<24))
	index := map[leaf]uint32{}
	for p, l := range prefixes {
		b, bits := p.Addr().As16(), p.Bits()
		// The prefix's first entry is i of table n (top when n is -1), whose level ends at
		// bit end.
		n, i, end := -1, uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2]), 24
		entries := func() []uint32 {
			if n < 0 {
				return f.top[:]
			}
			return f.sub[n<<8 : (n+1)<<8]
		}
		for bits > end {
			e := entries()[i]
			if end == 48 {
				if e&flat6Trie == 0 {
					t := new(bart.Fast[leaf])
					if e != 0 {
						t.Insert(netip.PrefixFrom(netip.IPv6Unspecified(), 0), f.leaves[e-1])
					}
					e = flat6Trie | uint32(len(f.tries))
					f.tries = append(f.tries, t)
					entries()[i] = e
				}
				f.tries[e&^flat6Kind].Insert(netip.PrefixFrom(shift48(b), bits-48), l)
				break
			}
			if e&flat6Table == 0 {
				// The block's first longer prefix: a table of the next byte holding what
				// the block had.
				next := uint32(len(f.sub) >> 8)
				f.sub = append(f.sub, make([]uint32, 256)...)
				fill(f.sub[next<<8:(next+1)<<8], e)
				e = flat6Table | next
				entries()[i] = e
			}
			n, i, end = int(e&^flat6Kind), uint32(b[end/8]), end+8
		}
		if bits > 48 {
			continue
		}
		v, ok := index[l]
		if !ok {
			f.leaves = append(f.leaves, l)
			v = uint32(len(f.leaves))
			index[l] = v
		}
		fill(entries()[i:i+1<<(end-bits)], v)
	}
	return f
}
