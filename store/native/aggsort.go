package native

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
)

// The groups' block goes to the engine sorted by the aggregated table's sorting key, for the
// reason the flows do (sortkey.go): the engine checks whether a block is sorted before it
// sorts it, and its sort over the ~48 columns of that key costs more than this one. The views
// from flows_1m to the coarser tables pass the block on in the same order, so the engine
// finds their blocks sorted too when the groups share a minute: their rounded time is then
// the same in every row, and the rest of the key is flows_1m's. Groups spanning two minutes
// are sorted for flows_1m only.
//
// Each group's key becomes one integer with just the bits the groups need, as in
// batchSorter: a part per active dimension, in key order (the dimensions are in that order,
// see ddl.DDL.PreAggregatedKeyDims), holding its value relative to the smallest in the groups,
// without the low bits every group shares (integers; the time divided by the interval;
// LowCardinality values by their rank among the groups' values; addresses and fixed strings
// as big-endian 64-bit chunks). With the group's number, the integers fit in 128 bits unless
// the groups vary a lot (IPv4 and IPv6 exporters together, say), and then sort as the flows'
// keys do (radixKeys); wider ones take as many 64-bit words as they need, with the same LSD
// radix sort.

// aggSortPart is one part of the groups' sort integers.
type aggSortPart struct {
	dim   int  // index in Aggregator.dims
	bytes bool // big-endian bytes (address, fixed string) from chunk; else a little-endian integer
	chunk int  // bytes: offset of its 8 bytes (fewer at the end of the value, zero-padded)
	// For the groups being sorted: the smallest and largest values, their bits ORed and
	// ANDed (a bit that varies is set in the OR, not in the AND), then the low bits the same
	// in every group (a fixed string's padding, say) and the code's width.
	lo, hi, or, and uint64
	shift, width    uint
}

// aggSorter computes the permutation ordering the groups by the table's key. It reuses its
// memory from block to block.
type aggSorter struct {
	parts []aggSortPart
	perm  []uint32
	// The sort integers with the group's number: 128-bit keys when they fit (the common
	// case), else wide records of words+1 64-bit words (radixWide).
	radixKeys
	wide, wideTmp []uint64
	// LowCardinality: rank[id] is the rank of the interned value id among the groups'
	// values, ids the distinct ids of a dimension.
	rank []uint32
	ids  []uint32
	seen []bool
}

// code returns group key k's value of part p, before it is made relative to the smallest.
func (a *Aggregator) code(p *aggSortPart, k []byte) uint64 {
	d := &a.dims[p.dim]
	v := k[d.off : d.off+d.width]
	if p.bytes {
		v = v[p.chunk:]
		if len(v) >= 8 {
			return binary.BigEndian.Uint64(v)
		}
		var b [8]byte
		copy(b[:], v)
		return binary.BigEndian.Uint64(b[:])
	}
	switch d.kind {
	case aggLowCard:
		return uint64(a.sorter.rank[binary.LittleEndian.Uint32(v)])
	case aggTime:
		return uint64(binary.LittleEndian.Uint32(v) / a.interval)
	}
	switch len(v) {
	case 1:
		return uint64(v[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(v))
	case 4:
		return uint64(binary.LittleEndian.Uint32(v))
	default:
		return binary.LittleEndian.Uint64(v)
	}
}

// sortGroups returns the order of the groups by the table's sorting key: perm[i] is the
// group in row i. e is the encoder whose columns interned the LowCardinality values.
func (a *Aggregator) sortGroups(e *Encoder) []uint32 {
	st := &a.sorter
	n, kl := a.n, a.keyLen
	st.parts = st.parts[:0]
	for i := range a.dims {
		d := &a.dims[i]
		if !d.active {
			continue // the default in every group
		}
		switch {
		case d.kind == aggLowCard:
			st.rankLowCard(a, d, e.cols[d.src].names)
			st.parts = append(st.parts, aggSortPart{dim: i})
		case d.kind == aggFixed && d.bytes:
			for c := 0; c < d.width; c += 8 {
				st.parts = append(st.parts, aggSortPart{dim: i, bytes: true, chunk: c})
			}
		default:
			st.parts = append(st.parts, aggSortPart{dim: i})
		}
	}
	// Each part's range, then its width.
	for j := range st.parts {
		p := &st.parts[j]
		p.lo, p.hi, p.or, p.and = ^uint64(0), 0, 0, ^uint64(0)
	}
	for g := range n {
		k := a.gkeys[g*kl : (g+1)*kl]
		for j := range st.parts {
			p := &st.parts[j]
			v := a.code(p, k)
			p.lo, p.hi, p.or, p.and = min(p.lo, v), max(p.hi, v), p.or|v, p.and&v
		}
	}
	total := uint(0)
	for j := range st.parts {
		p := &st.parts[j]
		// The values agree on their low shift bits, so do the smallest and the largest:
		// shifting them out keeps the order.
		p.shift = uint(bits.TrailingZeros64(p.or ^ p.and))
		p.width = uint(bits.Len64((p.hi - p.lo) >> p.shift))
		total += p.width
	}
	st.perm = slices.Grow(st.perm[:0], n)[:n]
	if total == 0 || n < 2 {
		for g := range st.perm {
			st.perm[g] = uint32(g)
		}
		return st.perm
	}
	if idxBits := uint(bits.Len(uint(n - 1))); idxBits+total <= 128 {
		// The group's number in the low bits, the parts above it, the last part lowest.
		st.keys = slices.Grow(st.keys[:0], n)[:n]
		for g := range n {
			var w [2]uint64
			a.pack(a.gkeys[g*kl:(g+1)*kl], w[:], idxBits)
			st.keys[g] = sortKey{lo: w[0] | uint64(g), hi: w[1]}
		}
		st.radix(idxBits, idxBits+total)
		mask := uint64(1)<<idxBits - 1
		for i, k := range st.keys {
			st.perm[i] = uint32(k.lo & mask)
		}
		return st.perm
	}
	// Wider: word w of group g's record holds bits 64w..64w+63 of its integer, the last
	// part lowest; the record's last word is g.
	words := int(total+63) / 64
	stride := words + 1
	st.wide = slices.Grow(st.wide[:0], n*stride)[:n*stride]
	clear(st.wide)
	for g := range n {
		rec := st.wide[g*stride : (g+1)*stride]
		a.pack(a.gkeys[g*kl:(g+1)*kl], rec[:words], 0)
		rec[words] = uint64(g)
	}
	st.radixWide(stride, total)
	for i := range st.perm {
		st.perm[i] = uint32(st.wide[i*stride+words])
	}
	return st.perm
}

// pack ORs group key k's codes into rec's words (least significant first) from bit pos, the
// last part lowest; rec has room for them.
func (a *Aggregator) pack(k []byte, rec []uint64, pos uint) {
	parts := a.sorter.parts
	for j := len(parts) - 1; j >= 0; j-- {
		p := &parts[j]
		if p.width == 0 {
			continue
		}
		v := (a.code(p, k) - p.lo) >> p.shift
		w, s := pos/64, pos%64
		rec[w] |= v << s
		if s+p.width > 64 {
			rec[w+1] |= v >> (64 - s)
		}
		pos += p.width
	}
}

// rankLowCard sets st.rank for the values of dimension d in the groups: their rank by value.
func (st *aggSorter) rankLowCard(a *Aggregator, d *aggDim, names []string) {
	if len(st.rank) < len(names)+1 {
		st.rank = make([]uint32, len(names)+1)
		st.seen = make([]bool, len(names)+1)
	}
	st.ids = st.ids[:0]
	kl := a.keyLen
	for g := range a.n {
		id := binary.LittleEndian.Uint32(a.gkeys[g*kl+d.off:])
		if !st.seen[id] {
			st.seen[id] = true
			st.ids = append(st.ids, id)
		}
	}
	value := func(id uint32) string {
		if id == 0 {
			return ""
		}
		return names[id-1]
	}
	slices.SortFunc(st.ids, func(x, y uint32) int { return strings.Compare(value(x), value(y)) })
	for r, id := range st.ids {
		st.rank[id] = uint32(r)
		st.seen[id] = false
	}
}

// radixWide sorts the wide records (stride words, the integer in the first stride-1 words,
// least significant first) by their bits 0..total-1, least significant digit first.
func (st *aggSorter) radixWide(stride int, total uint) {
	n := len(st.wide) / stride
	st.wideTmp = slices.Grow(st.wideTmp[:0], len(st.wide))[:len(st.wide)]
	var count [1 << radixDigit]uint32
	digit := func(rec []uint64, shift uint) uint32 {
		w, s := shift/64, shift%64
		v := rec[w] >> s
		if s+radixDigit > 64 && int(w)+1 < stride-1 {
			v |= rec[w+1] << (64 - s)
		}
		return uint32(v & (1<<radixDigit - 1))
	}
	for shift := uint(0); shift < total; shift += radixDigit {
		clear(count[:])
		for i := range n {
			count[digit(st.wide[i*stride:], shift)]++
		}
		if count[digit(st.wide, shift)] == uint32(n) {
			continue
		}
		sum := uint32(0)
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for i := range n {
			rec := st.wide[i*stride : (i+1)*stride]
			d := digit(rec, shift)
			copy(st.wideTmp[int(count[d])*stride:], rec)
			count[d]++
		}
		st.wide, st.wideTmp = st.wideTmp, st.wide
	}
}
