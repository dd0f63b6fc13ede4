package enrich

import (
	"cmp"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	"flowzero/internal/dir248"
	"flowzero/internal/hugemem"
	"flowzero/schema"
)

// benchFloor is the least a table-based enrichment of IPv4 addresses can do per flow, to tell
// whether any layout of the routing and network tables could meet the cost goal: one table
// for both, a DIR-24-8 array (internal/dir248, as the two real tables) whose entry numbers
// a record of every column the routing and networks steps give an address, already encoded,
// in a fixed slot of slot bytes (a length byte, then the bytes), one slab per direction. A
// lookup reads one entry (two in /24s holding longer prefixes) and the record's one or two
// lines, then appends them with one copy, as one string column: a record is as long as the
// bytes those steps append, made of ASCII letters so that the string column takes them (its
// ASCII check is the floor's only cost the real steps would not have). It is not a design:
// nothing updates it, and it holds IPv4 only.
type benchFloor struct {
	arr      dir248.Array
	slot     int
	src, dst []byte
}

// Enrich appends the records of the flow's IPv4 addresses.
func (f *benchFloor) Enrich(fm *schema.FlowMessage) {
	if i := f.lookup(fm.SrcAddr); i > 0 {
		r := f.src[i*f.slot:]
		fm.AppendString(schema.ColumnSrcNetName, unsafe.String(&r[1], int(r[0])))
	}
	if i := f.lookup(fm.DstAddr); i > 0 {
		r := f.dst[i*f.slot:]
		fm.AppendString(schema.ColumnDstNetName, unsafe.String(&r[1], int(r[0])))
	}
}

func (f *benchFloor) lookup(a netip.Addr) int {
	if !a.Is4() {
		return 0
	}
	return int(f.arr.Lookup(a.As4()))
}

// newBenchFloor builds the floor over the RIB's IPv4 prefixes and the static networks'
// (benchLocalNetworks), each prefix's record being what chain's routing and networks steps
// (chain[1:]) append to a flow whose source (destination) is the prefix's first address.
func newBenchFloor(b *testing.B, chain Chain, sch *schema.Schema) *benchFloor {
	table, _ := benchRIB(b)
	var prefixes []netip.Prefix
	for p := range table.All() {
		if p.Addr().Is4() {
			prefixes = append(prefixes, p)
		}
	}
	prefixes = append(prefixes, benchLocalNetworks()...)
	slices.SortFunc(prefixes, func(a, b netip.Prefix) int { return cmp.Compare(a.Bits(), b.Bits()) })
	fm := sch.NewFlowMessage()
	record := func(src bool, a netip.Addr) []byte {
		fm.Reset()
		if src {
			fm.SrcAddr = a
		} else {
			fm.DstAddr = a
		}
		for _, e := range chain[1:] {
			e.Enrich(fm)
		}
		return slices.Clone(fm.Finalize())
	}
	fm.Reset()
	empty := len(fm.Finalize())
	// Records are interned by pair (a prefix's source and destination records), as the real
	// tables intern attribute sets and fragments: prefixes with the same columns share a slot.
	var srcs, dsts [][]byte
	numbers := make([]uint32, len(prefixes))
	index := map[string]uint32{}
	longest, total := 0, 0
	for i, p := range prefixes {
		src, dst := record(true, p.Addr())[empty:], record(false, p.Addr())[empty:]
		key := string(src) + "\x00" + string(dst)
		v, ok := index[key]
		if !ok {
			srcs, dsts = append(srcs, letters(src)), append(dsts, letters(dst))
			v = uint32(len(srcs))
			index[key] = v
			longest = max(longest, len(src), len(dst))
			total += len(src) + len(dst)
		}
		numbers[i] = v
	}
	if longest > 255 {
		b.Fatalf("floor: a record of %d bytes", longest)
	}
	f := &benchFloor{slot: (longest + 1 + 63) &^ 63}
	b.Logf("floor: %d IPv4 prefixes, %d distinct records of %d bytes on average, at most %d, slots of %d",
		len(prefixes), len(srcs), total/2/len(srcs), longest, f.slot)
	f.src = make([]byte, (len(srcs)+1)*f.slot)
	f.dst = make([]byte, (len(srcs)+1)*f.slot)
	for i := range srcs {
		o := (i + 1) * f.slot
		f.src[o], f.dst[o] = byte(len(srcs[i])), byte(len(dsts[i]))
		copy(f.src[o+1:], srcs[i])
		copy(f.dst[o+1:], dsts[i])
	}
	f.arr.Top = (*[1 << 24]uint32)(hugemem.Uint32s(f, 1<<24))
	for i, p := range prefixes {
		f.arr.Insert(p, numbers[i])
	}
	return f
}

// letters turns b into ASCII letters, in place.
func letters(b []byte) []byte {
	for i, c := range b {
		b[i] = 'a' + c%26
	}
	return b
}
