package rib

import (
	"encoding/binary"
	"hash/maphash"

	"flowzero/rib/bgp"
)

// AttrSet is an interned attribute set, stored once for every path that uses it. A caller
// holding one from Tx.Intern owns a reference until Tx.Release; it may keep it across
// transactions of the same RIB (a decoder's cache). Its attributes are read-only.
type AttrSet struct {
	bgp.Attributes
	hash uint64
	next *AttrSet // next set with the same hash (collisions are chained)
	id   uint32   // index in interner.sets and interner.refs, what paths store
}

// interner maps the hash of an attribute set's canonical encoding to the interned copy.
// Paths refer to sets by index (sets[id]) so that the per-prefix path slices hold no pointers
// and the garbage collector does not scan them.
type interner struct {
	m    map[uint64]*AttrSet
	sets []*AttrSet
	// refs counts the references of each set, in a dense array so that adding a path does
	// not touch the set itself (a cache miss per route when loading a full table).
	refs []int32
	// origin is each set's origin AS, copied into the lookup trie's routes.
	origin []uint32
	free   []uint32
	seed   maphash.Seed
	buf    []byte
}

func (in *interner) init() {
	in.m = make(map[uint64]*AttrSet)
	in.seed = maphash.MakeSeed()
}

func (in *interner) len() int { return len(in.sets) - len(in.free) }

// hash hashes every field of a, in a fixed order with lengths so that fields cannot run into
// each other.
func (in *interner) hash(a *bgp.Attributes) uint64 {
	b := in.buf[:0]
	b = append(b, a.Origin, boolByte(a.HasLocalPref), boolByte(a.HasMED))
	b = binary.LittleEndian.AppendUint32(b, a.LocalPref)
	b = binary.LittleEndian.AppendUint32(b, a.MED)
	b = binary.LittleEndian.AppendUint16(b, a.ASPathLength)
	b = a.NextHop.AppendTo(b)
	b = append(b, byte(a.NextHop.BitLen()))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(a.ASPath)))
	for _, as := range a.ASPath {
		b = binary.LittleEndian.AppendUint32(b, as)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(a.Communities)))
	for _, c := range a.Communities {
		b = binary.LittleEndian.AppendUint32(b, c)
	}
	for _, c := range a.LargeCommunities {
		b = binary.LittleEndian.AppendUint32(b, c.GlobalAdmin)
		b = binary.LittleEndian.AppendUint32(b, c.LocalData1)
		b = binary.LittleEndian.AppendUint32(b, c.LocalData2)
	}
	in.buf = b
	return maphash.Bytes(in.seed, b)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// intern returns the interned copy of a with one more reference. When owned, a's slices are
// taken over instead of copied.
func (in *interner) intern(a *bgp.Attributes, owned bool) *AttrSet {
	h := in.hash(a)
	head := in.m[h]
	for x := head; x != nil; x = x.next {
		if x.Attributes.Equal(a) {
			in.refs[x.id]++
			return x
		}
	}
	ia := &AttrSet{Attributes: *a, hash: h, next: head}
	if !owned {
		ia.Attributes = *a.Clone()
	}
	if n := len(in.free); n > 0 {
		ia.id = in.free[n-1]
		in.free = in.free[:n-1]
		in.sets[ia.id] = ia
		in.refs[ia.id] = 1
		in.origin[ia.id] = ia.OriginAS()
	} else {
		ia.id = uint32(len(in.sets))
		in.sets = append(in.sets, ia)
		in.refs = append(in.refs, 1)
		in.origin = append(in.origin, ia.OriginAS())
	}
	in.m[h] = ia
	return ia
}

// release drops one reference and forgets the set when it was the last one. Lookups that
// returned it keep a valid pointer (the garbage collector frees it when they are done).
func (in *interner) release(ia *AttrSet) {
	in.releaseID(ia.id)
}

// releaseID drops one reference on the set with that id.
func (in *interner) releaseID(id uint32) {
	in.refs[id]--
	if in.refs[id] > 0 {
		return
	}
	ia := in.sets[id]
	in.sets[ia.id] = nil
	in.free = append(in.free, ia.id)
	head := in.m[ia.hash]
	if head == ia {
		if ia.next == nil {
			delete(in.m, ia.hash)
		} else {
			in.m[ia.hash] = ia.next
		}
		return
	}
	for x := head; x != nil; x = x.next {
		if x.next == ia {
			x.next = ia.next
			return
		}
	}
}
