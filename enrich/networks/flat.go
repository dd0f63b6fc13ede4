package networks

import (
	"iter"
	"net/netip"
	"runtime"

	"flowzero/internal/dir248"
	"flowzero/internal/hugemem"
)

// flatMinPrefixes is the number of IPv4 prefixes from which the global table gets a flat4:
// below it the trie's nodes stay in the CPU caches and the array would only cost memory.
var flatMinPrefixes = 1 << 16

// flat4 is the IPv4 part of the global table as a DIR-24-8 array (internal/dir248): an
// address's entry numbers its leaf, read with one or two loads where the trie reads three or
// four nodes. It is built with the table and never changes. Its top level is on huge pages
// outside the Go heap (internal/hugemem), unmapped when the flat4 is collected.
type flat4 struct {
	arr    dir248.Array
	leaves []leaf
}

// lookup returns the leaf of the longest prefix holding the IPv4 address a.
func (f *flat4) lookup(a netip.Addr) (leaf, bool) {
	v := f.arr.Lookup(a.As4())
	runtime.KeepAlive(f) // arr.Top is f's: read before f may be collected
	if v == 0 || int(v) > len(f.leaves) {
		return leaf{}, false
	}
	return f.leaves[v-1], true
}

// newFlat4 builds the array of IPv4 prefixes given with every supernet before its subnets
// (bart's AllSorted4 order), numbering each distinct leaf once.
func newFlat4(prefixes iter.Seq2[netip.Prefix, leaf]) *flat4 {
	f := &flat4{}
	f.arr.Top = (*[1 << 24]uint32)(hugemem.Uint32s(f, 1<<24))
	index := map[leaf]uint32{}
	for p, l := range prefixes {
		v, ok := index[l]
		if !ok {
			f.leaves = append(f.leaves, l)
			v = uint32(len(f.leaves))
			index[l] = v
		}
		f.arr.Insert(p, v)
	}
	return f
}

func fill(s []uint32, v uint32) {
	for i := range s {
		s[i] = v
	}
}
