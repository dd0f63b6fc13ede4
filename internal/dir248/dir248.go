// Package dir248 is an IPv4 longest-prefix table read with one or two loads: a DIR-24-8
// array (Gupta, Lin and McKeown, "Routing lookups in hardware at memory access speeds",
// 1998), built once from prefixes given supernets first and never changed.
package dir248

import "net/netip"

// sub marks a Top entry that holds a sub-table number rather than a value.
const sub = 1 << 31

// Array maps IPv4 addresses to the value of their longest prefix. The first 24 bits of an
// address index Top, whose entry is 0 (no prefix), a value, or sub and the number of a
// 256-entry table of Subs, indexed by the last byte, for the /24s holding longer prefixes.
// The caller allocates Top (on huge pages, or from the heap).
type Array struct {
	Top  *[1 << 24]uint32
	Subs []uint32
}

// Lookup returns the value of the longest prefix holding b, or 0.
func (a *Array) Lookup(b [4]byte) uint32 {
	v := a.Top[uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2])]
	if v&sub != 0 {
		v = a.Subs[(v&^sub)<<8|uint32(b[3])]
	}
	return v
}

// Insert gives the addresses of the IPv4 prefix p the value v, a number below 2^31 (0 means
// no prefix). Prefixes must come with every supernet before its subnets (bart's AllSorted4
// order, or by length): each fills its range and its subnets, coming later, overwrite theirs,
// so that each entry ends up with the longest prefix holding it.
func (a *Array) Insert(p netip.Prefix, v uint32) {
	b, bits := p.Addr().As4(), p.Bits()
	i := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
	if bits <= 24 {
		fill(a.Top[i:i+1<<(24-bits)], v)
		return
	}
	e := a.Top[i]
	if e&sub == 0 {
		// The first prefix longer than /24 in this /24: a sub-table holding what the /24 had.
		n := uint32(len(a.Subs) >> 8)
		a.Subs = append(a.Subs, make([]uint32, 256)...)
		fill(a.Subs[n<<8:(n+1)<<8], e)
		e = sub | n
		a.Top[i] = e
	}
	j := (e&^sub)<<8 | uint32(b[3])
	fill(a.Subs[j:j+1<<(32-bits)], v)
}

func fill(s []uint32, v uint32) {
	for i := range s {
		s[i] = v
	}
}
