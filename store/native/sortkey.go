package native

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"

	"flowzero/schema"
)

// The engine sorts every block it writes by the table's sorting key, unless the block is
// already sorted (it checks first). For the flows table, that sort and the writing of every
// column through its permutation were the largest part of an insert's cost in the engine;
// batchSorter does it in Go for less (docs/design/store.md), on the encoder's columns once
// the whole batch is converted: each
// key column's value becomes a small integer code that keeps its order (integers relative to
// the batch's smallest, or by their rank among the batch's values when that takes fewer
// bits, addresses by the bits that vary in the batch, LowCardinality values
// by their rank among the batch's keys), the codes are packed into one 128-bit integer per
// row with just the bits the batch needs, an LSD radix sort orders those, and flush writes
// the columns through the resulting permutation. Only the columns the block holds are
// written (the engine also permuted the ~30 it fills with defaults).
//
// The order only has to be the engine's for the engine to skip its sort; a batch whose key
// needs more than 128 bits (addresses varying over more than 64 bits, say IPv4 and IPv6
// exporters together), or a schema whose key has a type without a code, goes in arrival
// order, and the engine sorts it as before.

// sortPart is one column of the sorting key.
type sortPart struct {
	col   int    // index in the encoder's columns
	round uint64 // integers: the key rounds them down to a multiple of round (1: as they are)

	// For the block being sorted: the smallest code and the bits of code-lo.
	lo    uint64
	width uint
	// IPv6: the code is the 64 bits of the address from bit shift (counted from the least
	// significant): all that vary in the block; the bits around them are the same in every
	// row.
	shift uint
	// LowCardinality: rank[i] is the rank of the value of the block's key i.
	rank  []uint32
	order []uint32
	// dense: a UInt32 coded by its rank among the block's values, rank[v-base], when that
	// takes fewer bits than v-lo (see densify).
	dense bool
	base  uint32
}

// denseMaxRange bounds the range of the values densify ranks: its table stays in the L2
// cache.
const denseMaxRange = 1 << 16

// batchSorter computes the permutation that orders a block's rows by the flows table's
// sorting key (see above). It is not safe for concurrent use; one sorter is reused block
// after block without allocating per row.
type batchSorter struct {
	parts []sortPart
	radixKeys
	perm []uint32
}

// radixKeys is the keys a radix sort orders and its scratch space, reused from sort to sort.
type radixKeys struct{ keys, tmp []sortKey }

// sortKey is a row's packed key (the high bits) and its index in the block (the low bits):
// a 128-bit integer.
type sortKey struct{ lo, hi uint64 }

// newBatchSorter returns the sorter of e's blocks, or nil when the key has a column it cannot
// code (the engine then sorts).
func newBatchSorter(s *schema.Schema, e *Encoder) *batchSorter {
	st := &batchSorter{}
	for _, k := range s.SortingKey() {
		f := k.Column.Field
		if f <= 0 || f >= len(e.byField) || e.byField[f] < 0 {
			return nil
		}
		i := int(e.byField[f])
		switch e.cols[i].op {
		case opUint8, opUint16, opUint32, opUint64:
		case opEnum8: // values 0..127 (setKind): the same order signed or not
		case opIPv6, opLowCard:
			if k.Round > 1 {
				return nil // only integers round
			}
		default:
			return nil
		}
		st.parts = append(st.parts, sortPart{col: i, round: max(k.Round, 1)})
	}
	if len(st.parts) == 0 {
		return nil
	}
	return st
}

// permutation returns the order of e's rows 0..rows-1 (the block being flushed, arrays
// closed) by the sorting key, equal keys in arrival order, or nil when they are in that
// order already or the key does not fit in 128 bits. The result is valid until the next call.
func (st *batchSorter) permutation(e *Encoder, rows int) []uint32 {
	if rows < 2 {
		return nil
	}
	idxBits := uint(bits.Len(uint(rows - 1)))
	width := idxBits
	for i := range st.parts {
		if !st.parts[i].measure(&e.cols[st.parts[i].col], rows) {
			return nil
		}
		width += st.parts[i].width
	}
	if width > 128 || width == idxBits {
		return nil
	}
	st.keys = slices.Grow(st.keys[:0], rows)[:rows]
	// A chunk of keys at a time, every part into it: the keys stay in the L1 cache while
	// each part adds its bits, instead of every part reading and writing all of them.
	for first := 0; first < rows; first += packChunkRows {
		keys := st.keys[first:min(rows, first+packChunkRows)]
		for i := range keys {
			keys[i] = sortKey{lo: uint64(first + i)}
		}
		pos := idxBits
		for i := len(st.parts) - 1; i >= 0; i-- {
			p := &st.parts[i]
			if p.width > 0 {
				p.pack(&e.cols[p.col], keys, first, pos)
				pos += p.width
			}
		}
	}
	if !st.radix(idxBits, width) {
		return nil
	}
	st.perm = slices.Grow(st.perm[:0], rows)[:rows]
	mask := uint64(1)<<idxBits - 1
	for i, k := range st.keys {
		st.perm[i] = uint32(k.lo & mask)
	}
	return st.perm
}

// measure finds the part's codes' range in the block, and reports whether they fit in 64
// bits.
func (p *sortPart) measure(c *column, rows int) bool {
	p.lo, p.width, p.dense = 0, 0, false
	if c.omit {
		return true // one value: nothing to sort by
	}
	switch c.op {
	case opLowCard:
		// The block's keys are few: rank them by value.
		p.order = slices.Grow(p.order[:0], int(c.nkeys))[:c.nkeys]
		for i := range p.order {
			p.order[i] = uint32(i)
		}
		slices.SortFunc(p.order, func(a, b uint32) int { return strings.Compare(c.keyValue(a), c.keyValue(b)) })
		p.rank = slices.Grow(p.rank[:0], int(c.nkeys))[:c.nkeys]
		for r, k := range p.order {
			p.rank[k] = uint32(r)
		}
		p.width = uint(bits.Len(uint(c.nkeys - 1)))
		return true
	case opIPv6:
		// The bits that differ from the first row's, as two big-endian halves.
		hi0, lo0 := binary.BigEndian.Uint64(c.data), binary.BigEndian.Uint64(c.data[8:])
		var dhi, dlo uint64
		for r := 1; r < rows; r++ {
			a := c.data[16*r : 16*r+16]
			dhi |= binary.BigEndian.Uint64(a) ^ hi0
			dlo |= binary.BigEndian.Uint64(a[8:]) ^ lo0
		}
		// The code is the 64 bits ending at the last one that differs, when the first that
		// differs is among them.
		switch {
		case dhi == 0 && dlo == 0:
			return true
		case dhi == 0:
			p.shift = 0
		case dlo == 0:
			p.shift = 64
		default:
			p.shift = uint(bits.TrailingZeros64(dlo))
			if 128-uint(bits.LeadingZeros64(dhi))-p.shift > 64 {
				return false
			}
		}
		if p.shift >= 64 {
			p.shift = 64 + uint(bits.TrailingZeros64(dhi))
		}
	}
	lo, hi := p.code(c, 0), p.code(c, 0)
	switch c.op {
	case opUint32:
		// The common case, without a call per row.
		lo, hi = uint64(binary.LittleEndian.Uint32(c.data)), uint64(binary.LittleEndian.Uint32(c.data))
		for r := 1; r < rows; r++ {
			v := uint64(binary.LittleEndian.Uint32(c.data[4*r:]))
			lo, hi = min(lo, v), max(hi, v)
		}
		lo, hi = lo/p.round, hi/p.round // rounding down keeps the order
		if p.round == 1 && hi-lo > 1 && hi-lo < denseMaxRange && p.densify(c, rows, lo, hi) {
			return true
		}
	default:
		for r := 1; r < rows; r++ {
			v := p.code(c, r)
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	p.lo, p.width = lo, uint(bits.Len64(hi-lo))
	return true
}

// densify codes a UInt32 part by the rank of its values among the block's distinct ones,
// and reports whether it did: only when that takes fewer bits than the values' range (two
// EType values 0x86dd-0x800 apart take 1 bit instead of 15; a few hundred AS numbers under
// 65536, 9 instead of 16). Every bit saved shortens the key the radix sort goes through.
func (p *sortPart) densify(c *column, rows int, lo, hi uint64) bool {
	n := int(hi-lo) + 1
	p.rank = slices.Grow(p.rank[:0], n)[:n]
	clear(p.rank)
	data, base := c.data[:4*rows], uint32(lo)
	for r := range rows {
		p.rank[binary.LittleEndian.Uint32(data[4*r:])-base] = 1
	}
	distinct := uint32(0)
	for v, seen := range p.rank {
		if seen != 0 {
			p.rank[v] = distinct
			distinct++
		}
	}
	width := uint(bits.Len32(distinct - 1))
	if width >= uint(bits.Len64(hi-lo)) {
		return false
	}
	p.dense, p.lo, p.width, p.base = true, 0, width, base
	return true
}

// code returns row's code before it is taken relative to the block's smallest. LowCardinality
// and IPv6 need measure first.
func (p *sortPart) code(c *column, row int) uint64 {
	var v uint64
	switch c.op {
	case opUint8, opEnum8:
		v = uint64(c.data[row])
	case opUint16:
		v = uint64(binary.LittleEndian.Uint16(c.data[2*row:]))
	case opUint32:
		v = uint64(binary.LittleEndian.Uint32(c.data[4*row:]))
	case opUint64:
		v = binary.LittleEndian.Uint64(c.data[8*row:])
	case opIPv6:
		return ipv6Code(c.data[16*row:], p.shift)
	default: // opLowCard
		return uint64(p.rank[binary.LittleEndian.Uint32(c.data[4*row:])])
	}
	if p.round > 1 { // the time only: a division per row costs more than the rest
		v /= p.round
	}
	return v
}

// ipv6Code returns the 64 bits of the address a (big-endian) from bit shift, counted from
// its least significant.
func ipv6Code(a []byte, shift uint) uint64 {
	hi, lo := binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(a[8:16])
	if shift >= 64 {
		return hi >> (shift - 64)
	}
	return lo>>shift | hi<<(64-shift)
}

// packChunkRows is how many rows' keys permutation builds at a time: 16 KiB of keys.
const packChunkRows = 1024

// pack adds the part's codes of rows first.. to their keys, from bit pos.
func (p *sortPart) pack(c *column, keys []sortKey, first int, pos uint) {
	put := func(r int, v uint64) {
		v -= p.lo
		if pos >= 64 {
			keys[r].hi |= v << (pos - 64)
		} else {
			keys[r].lo |= v << pos
			keys[r].hi |= v >> (64 - pos) // 0 when v fits below bit 64
		}
	}
	data := c.data[first*c.width:]
	switch {
	case p.dense:
		for r := range keys {
			put(r, uint64(p.rank[binary.LittleEndian.Uint32(data[4*r:])-p.base]))
		}
	case c.op == opUint32 && p.round == 1:
		for r := range keys {
			put(r, uint64(binary.LittleEndian.Uint32(data[4*r:])))
		}
	case c.op == opUint32:
		for r := range keys {
			put(r, uint64(binary.LittleEndian.Uint32(data[4*r:]))/p.round)
		}
	case c.op == opIPv6:
		for r := range keys {
			put(r, ipv6Code(data[16*r:], p.shift))
		}
	case c.op == opLowCard:
		for r := range keys {
			put(r, uint64(p.rank[binary.LittleEndian.Uint32(data[4*r:])]))
		}
	default:
		for r := range keys {
			put(r, p.code(c, first+r))
		}
	}
}

// keyValue returns the value of the block's LowCardinality key i.
func (c *column) keyValue(i uint32) string {
	if g := c.globals[i]; g > 0 {
		return c.names[g-1]
	}
	return ""
}

// radixDigit is the width of the radix sort's digits: 2048 counters stay in the L1 cache.
const radixDigit = 11

// radix sorts st.keys by bits lo..hi-1, least significant digit first: stable, so the
// indexes below lo keep equal keys in arrival order. A digit where every key agrees costs
// only its count. It reports whether the keys were out of order.
func (st *radixKeys) radix(lo, hi uint) bool {
	keys := st.keys
	sorted := true
	for i := 1; i < len(keys); i++ {
		if keys[i].hi < keys[i-1].hi || keys[i].hi == keys[i-1].hi && keys[i].lo < keys[i-1].lo {
			sorted = false
			break
		}
	}
	if sorted {
		return false
	}
	st.tmp = slices.Grow(st.tmp[:0], len(keys))[:len(keys)]
	var count [1 << radixDigit]uint32
	for shift := lo; shift < hi; shift += radixDigit {
		clear(count[:])
		for _, k := range st.keys {
			count[k.digit(shift)]++
		}
		if count[st.keys[0].digit(shift)] == uint32(len(keys)) {
			continue
		}
		sum := uint32(0)
		for d, n := range count {
			count[d] = sum
			sum += n
		}
		for _, k := range st.keys {
			d := k.digit(shift)
			st.tmp[count[d]] = k
			count[d]++
		}
		st.keys, st.tmp = st.tmp, st.keys
	}
	return true
}

// digit returns the radixDigit bits of k from bit shift.
func (k sortKey) digit(shift uint) uint32 {
	var v uint64
	if shift >= 64 {
		v = k.hi >> (shift - 64)
	} else {
		v = k.lo>>shift | k.hi<<(64-shift)
	}
	return uint32(v & (1<<radixDigit - 1))
}
