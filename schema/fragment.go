package schema

import (
	"errors"
	"fmt"
	"unsafe"

	"flowzero/pbwire"
)

// Fragment is a set of columns encoded once and appended to many flows: an exporter's name
// and classification, an interface's name, description, speed and boundary. Enrichment builds
// one per exporter or interface when it learns about it; FlowMessage.AppendFragment then adds
// all its columns with one copy, rather than encoding the same strings for every flow.
//
// A Fragment belongs to the Schema that built it and is immutable: it is safe for concurrent
// use by many FlowMessages.
type Fragment struct {
	schema *Schema
	n      int
	keys   [MaxFragmentColumns]ColumnKey
	ends   [MaxFragmentColumns]uint16 // end of each column's field in raw
	raw    pbwire.Raw
	// word locates the fragment's columns in FlowMessage.state when they all lie in one
	// 8-byte word (oneWord): off is the word's offset, mask selects the columns' bytes and
	// want is their state while free (the schema's op). The column order puts each metadata
	// group in one word; other fragments take the slow path.
	oneWord bool
	word    struct {
		off        uintptr
		mask, want uint64
	}
}

// MaxFragmentColumns is the most columns a Fragment holds.
const MaxFragmentColumns = 16

// maxFragmentLen bounds a fragment's bytes: the field ends are stored in 16 bits.
const maxFragmentLen = 4096

// Errors of NewFragment.
var (
	ErrFragmentHot  = errors.New("schema: hot and repeated columns cannot be in a fragment")
	ErrFragmentSize = errors.New("schema: fragment too large")
)

// NewFragment encodes the columns fill appends to the message it is given (with the Append
// methods; hot and repeated columns cannot be part of a fragment) and returns them as a
// Fragment. Disabled columns are left out, as in any flow, and so are zero values and empty
// strings: appending the fragment leaves such columns free for a later Append.
func (s *Schema) NewFragment(fill func(m *FlowMessage)) (*Fragment, error) {
	m := s.NewFlowMessage()
	fill(m)
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if op := s.state[k]; op != opNone && op != opVarint && op != opString && op != opBytes && op != opIP && m.IsSet(k) {
			return nil, fmt.Errorf("%w: %s", ErrFragmentHot, columns[k].Name)
		}
	}
	data := m.w.Payload()
	if len(data) > maxFragmentLen {
		return nil, ErrFragmentSize
	}
	f := &Fragment{schema: s, raw: pbwire.MakeRaw(data)}
	r := pbwire.NewReader(f.raw.Bytes())
	for r.Next() {
		k, ok := ColumnByField(int(r.Field().Num))
		if !ok {
			return nil, fmt.Errorf("schema: fragment field %d is not a column", r.Field().Num)
		}
		if f.n == MaxFragmentColumns {
			return nil, ErrFragmentSize
		}
		f.keys[f.n], f.ends[f.n] = k, uint16(r.Offset())
		f.n++
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	f.setWord()
	return f, nil
}

// setWord finds the state word of the fragment's columns, if they share one.
func (f *Fragment) setWord() {
	f.oneWord = true
	for i, k := range f.keys[:f.n] {
		off, shift := uintptr(k&(encSize-1))&^7, 8*(uint(k)&7)
		if i == 0 {
			f.word.off = off
		} else if off != f.word.off {
			f.oneWord = false
			return
		}
		f.word.mask |= 0xff << shift
		f.word.want |= uint64(f.schema.state[k&(encSize-1)]) << shift
	}
}

// Columns returns the columns the fragment sets.
func (f *Fragment) Columns() []ColumnKey { return f.keys[:f.n] }

// AppendFragment appends the columns of f that are not set yet, as if each had been
// appended on its own. The common case (none of them set, room in the buffer) is one pass
// over the column states and a copy by words. A nil fragment, or one built by another Schema
// (a reload replaced it), appends nothing.
func (m *FlowMessage) AppendFragment(f *Fragment) {
	if f == nil || f.schema != m.schema {
		return
	}
	// One room check: Room.AppendRaw's own, on the same values, is then dropped.
	raw, r := f.raw, m.w.Room()
	if !f.oneWord || r.Available() < raw.Len()+pbwire.RawPad {
		m.appendFragmentSlow(f)
		return
	}
	// The columns are free when their state bytes are still the schema's: one 8-byte load,
	// mask and compare rather than one per column.
	p := unsafe.Add(unsafe.Pointer(&m.state), f.word.off)
	st := load64(p)
	if st&f.word.mask != f.word.want {
		m.appendFragmentSlow(f)
		return
	}
	store64(p, st&^f.word.mask)
	m.w.Commit(r.AppendRaw(raw))
}

// appendFragmentSlow appends, one by one, the columns of f not set yet.
func (m *FlowMessage) appendFragmentSlow(f *Fragment) {
	start := 0
	for i, k := range f.keys[:f.n] {
		end := int(f.ends[i])
		if m.state[k&(encSize-1)] != opNone {
			m.state[k&(encSize-1)] = opNone
			m.w.AppendRaw(f.raw.Bytes()[start:end])
		}
		start = end
	}
}
