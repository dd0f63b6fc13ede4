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
	ends   [MaxFragmentColumns]uint16 // end of each column's field in data
	data   []byte
}

// MaxFragmentColumns is the most columns a Fragment holds.
const MaxFragmentColumns = 16

// maxFragmentLen bounds a fragment's bytes so that AppendFragment's room check stays simple.
const maxFragmentLen = 4096

// Errors of NewFragment.
var (
	ErrFragmentHot  = errors.New("schema: hot and repeated columns cannot be in a fragment")
	ErrFragmentSize = errors.New("schema: fragment too large")
)

// NewFragment encodes the columns fill appends to the message it is given (with the Append
// methods; hot and repeated columns cannot be part of a fragment) and returns them as a
// Fragment. Disabled
// columns are left out, as in any flow, and so are zero values and empty strings: appending
// the fragment leaves such columns free for a later Append.
func (s *Schema) NewFragment(fill func(m *FlowMessage)) (*Fragment, error) {
	m := s.NewFlowMessage()
	fill(m)
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if op := s.state[k]; op != opNone && op != opVarint && op != opString && op != opBytes && op != opIP && m.IsSet(k) {
			return nil, fmt.Errorf("%w: %s", ErrFragmentHot, columns[k].Name)
		}
	}
	data := m.buf[pbwire.ReserveDelimited:m.n]
	if len(data) > maxFragmentLen {
		return nil, ErrFragmentSize
	}
	// The copy in AppendFragment reads whole words: keep 8 bytes of room past the end.
	f := &Fragment{schema: s, data: append(make([]byte, 0, len(data)+8), data...)}
	r := pbwire.NewReader(f.data)
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
	return f, nil
}

// Columns returns the columns the fragment sets.
func (f *Fragment) Columns() []ColumnKey { return f.keys[:f.n] }

// Len returns the size of the fragment's encoded columns.
func (f *Fragment) Len() int { return len(f.data) }

// AppendFragment appends the columns of f that are not set yet, as if each had been
// appended on its own. The common case (none of them set, room in the buffer) is one pass
// over the column states and a copy by words. A nil fragment, or one built
// by another Schema (a reload replaced it), appends nothing.
func (m *FlowMessage) AppendFragment(f *Fragment) {
	if f == nil || f.schema != m.schema {
		return
	}
	// One pass marks every column written and notes, without a branch per column, those
	// that already were (state opNone: minus one, it wraps and sets the top bit).
	var taken uint
	for i, k := range f.keys[:f.n] {
		taken |= (uint(m.state[k&(encSize-1)]) - 1) >> 63 << i
		m.state[k&(encSize-1)] = opNone
	}
	n, l := m.n, len(f.data)
	if taken != 0 || len(m.buf)-n < l+8 {
		m.appendFragmentSlow(f, taken)
		return
	}
	// Whole words: f.data has 8 bytes of room past its end and m.buf was checked for l+8.
	dst, src := unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.buf)), n), unsafe.Pointer(unsafe.SliceData(f.data))
	for i := 0; i < l; i += 8 {
		store64(unsafe.Add(dst, i), load64(unsafe.Add(src, i)))
	}
	m.n = n + l
}

// appendFragmentSlow appends the columns of f whose bit is not set in taken (those that were
// free: AppendFragment marked them all written), growing the buffer if needed.
func (m *FlowMessage) appendFragmentSlow(f *Fragment, taken uint) {
	start := 0
	for i := range f.keys[:f.n] {
		end := int(f.ends[i])
		if taken&(1<<i) == 0 {
			if len(m.buf)-m.n < end-start {
				m.grow(end - start)
			}
			m.n += copy(m.buf[m.n:], f.data[start:end])
		}
		start = end
	}
}
