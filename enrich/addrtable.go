package enrich

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// addrTable maps exporter addresses to values: an open-addressing table with linear
// probing, at most half full, keyed by the address's 16-byte form (IPv4 mapped: flows may
// carry exporter addresses either way) and hashed by one multiplication. It is immutable:
// with returns a new table, which happens once per new exporter, so that flows read it
// without locking. A Go map keyed by As16 takes four times as long
// (BenchmarkExporterTable).
type addrTable[V any] struct {
	slots []addrSlot[V]
	shift uint
	n     int
}

type addrSlot[V any] struct {
	hi, lo uint64
	used   bool
	v      V
}

// newAddrTable returns an empty table.
func newAddrTable[V any]() *addrTable[V] {
	return &addrTable[V]{slots: make([]addrSlot[V], 8), shift: 64 - 3}
}

// addrWords is the 16-byte form of a. IPv4 takes the short way: As16 costs a dozen
// nanoseconds.
func addrWords(a netip.Addr) (hi, lo uint64) {
	if a.Is4() {
		b := a.As4()
		return 0, 0xffff<<32 | uint64(binary.BigEndian.Uint32(b[:]))
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

func (t *addrTable[V]) index(hi, lo uint64) int {
	return int(((hi ^ lo) * 0x9e3779b97f4a7c15) >> t.shift)
}

// get returns the value of a.
func (t *addrTable[V]) get(a netip.Addr) (V, bool) {
	hi, lo := addrWords(a)
	for i := t.index(hi, lo); ; i = (i + 1) & (len(t.slots) - 1) {
		s := &t.slots[i]
		if !s.used || (s.hi == hi && s.lo == lo) {
			return s.v, s.used
		}
	}
}

// len is the number of addresses in the table.
func (t *addrTable[V]) len() int { return t.n }

// with returns a copy of the table with a set to v.
func (t *addrTable[V]) with(a netip.Addr, v V) *addrTable[V] {
	size := len(t.slots)
	for size < 2*(t.n+1) {
		size *= 2
	}
	next := &addrTable[V]{slots: make([]addrSlot[V], size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
	for _, s := range t.slots {
		if s.used {
			next.put(s.hi, s.lo, s.v)
		}
	}
	hi, lo := addrWords(a)
	next.put(hi, lo, v)
	return next
}

func (t *addrTable[V]) put(hi, lo uint64, v V) {
	i := t.index(hi, lo)
	for t.slots[i].used && (t.slots[i].hi != hi || t.slots[i].lo != lo) {
		i = (i + 1) & (len(t.slots) - 1)
	}
	if !t.slots[i].used {
		t.n++
	}
	t.slots[i] = addrSlot[V]{hi: hi, lo: lo, used: true, v: v}
}

// values calls fn for each value.
func (t *addrTable[V]) values(fn func(V)) {
	for _, s := range t.slots {
		if s.used {
			fn(s.v)
		}
	}
}
