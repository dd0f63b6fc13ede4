package pbwire

import (
	"fmt"
	"io"
	"sync"
)

// DefaultChunkSize is the chunk size of the delegates when none is given: a page.
const DefaultChunkSize = 4096

// minChunkSize keeps room for a key and a nested size in every chunk.
const minChunkSize = 16

// Delegate hands fixed-size chunks to a ScatteredWriter. NewChunk returns an empty chunk whose
// capacity is the chunk size (its length is ignored). A delegate that also implements
// ChunkReleaser gets the chunks back when the writer is reset.
type Delegate interface {
	NewChunk() []byte
}

// ChunkReleaser is implemented by delegates that recycle the chunks they hand out.
type ChunkReleaser interface {
	ReleaseChunk(chunk []byte)
}

// HeapDelegate allocates every chunk on the heap; the garbage collector frees them. It suits
// tests and one-off messages.
type HeapDelegate struct {
	// ChunkSize is the capacity of each chunk; DefaultChunkSize when 0.
	ChunkSize int
}

// NewChunk allocates a chunk.
func (d HeapDelegate) NewChunk() []byte {
	size := d.ChunkSize
	if size == 0 {
		size = DefaultChunkSize
	}
	return make([]byte, 0, size)
}

// PooledDelegate recycles chunks: a writer reset gives its chunks back, and NewChunk reuses
// them, so a steady stream of messages allocates nothing. It is safe for concurrent use by
// several writers.
type PooledDelegate struct {
	size    int
	maxFree int
	mu      sync.Mutex
	free    [][]byte
}

// NewPooledDelegate returns a delegate handing out chunks of chunkSize bytes (DefaultChunkSize
// when 0) and keeping at most maxFree released chunks for reuse (the rest go to the garbage
// collector).
func NewPooledDelegate(chunkSize, maxFree int) *PooledDelegate {
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	return &PooledDelegate{size: chunkSize, maxFree: maxFree}
}

// NewChunk returns a recycled chunk, or a new one when none is free.
func (d *PooledDelegate) NewChunk() []byte {
	d.mu.Lock()
	if n := len(d.free); n > 0 {
		c := d.free[n-1]
		d.free[n-1] = nil
		d.free = d.free[:n-1]
		d.mu.Unlock()
		return c[:0]
	}
	d.mu.Unlock()
	return make([]byte, 0, d.size)
}

// ReleaseChunk takes a chunk back for reuse. Chunks of another size are dropped.
func (d *PooledDelegate) ReleaseChunk(c []byte) {
	if cap(c) != d.size {
		return
	}
	d.mu.Lock()
	if len(d.free) < d.maxFree {
		d.free = append(d.free, c[:0])
	}
	d.mu.Unlock()
}

// ScatteredWriter writes one message (or a stream of them) into fixed-size chunks obtained
// from a Delegate, as ProtoZero's ScatteredStreamWriter does: a field that does not fit the
// current chunk continues in the next one, so no chunk is ever copied to grow. Nested
// messages reserve their 4-byte size contiguously in one chunk and back-patch it at
// EndNested, even when the payload has moved on to later chunks.
//
// The output is the concatenation of Chunks(); a chunk's unused tail is not part of it.
type ScatteredWriter struct {
	delegate Delegate
	done     [][]byte // finished chunks, each cut to its used length
	cur      []byte   // current chunk: len is used, cap is the chunk size
	written  int      // bytes in done
	stack    []nestedSize
	err      error
}

// nestedSize is an open nested message: where its size goes and where its payload starts.
type nestedSize struct {
	size  []byte // NestedSizeLen bytes inside a chunk
	start int    // absolute offset of the payload
}

// NewScatteredWriter returns a writer taking its chunks from d.
func NewScatteredWriter(d Delegate) *ScatteredWriter {
	return &ScatteredWriter{delegate: d}
}

// Len is the number of bytes written so far.
func (w *ScatteredWriter) Len() int { return w.written + len(w.cur) }

// Err is the first error met (a nested message too large for its 4-byte size, an EndNested
// without BeginNested); the output is unusable when it is not nil.
func (w *ScatteredWriter) Err() error { return w.err }

// Depth is the number of nested messages begun and not yet ended.
func (w *ScatteredWriter) Depth() int { return len(w.stack) }

// Chunks returns the written bytes as a list of chunks, valid until Reset. It appends to dst,
// which may be nil.
func (w *ScatteredWriter) Chunks(dst [][]byte) [][]byte {
	dst = append(dst, w.done...)
	if len(w.cur) > 0 {
		dst = append(dst, w.cur)
	}
	return dst
}

// AppendTo appends the written bytes, contiguously, to dst.
func (w *ScatteredWriter) AppendTo(dst []byte) []byte {
	for _, c := range w.done {
		dst = append(dst, c...)
	}
	return append(dst, w.cur...)
}

// WriteTo writes the chunks to out, in order.
func (w *ScatteredWriter) WriteTo(out io.Writer) (int64, error) {
	var total int64
	for i := 0; i <= len(w.done); i++ {
		c := w.cur
		if i < len(w.done) {
			c = w.done[i]
		}
		n, err := out.Write(c)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Reset forgets everything written and gives the chunks back to a releasing delegate.
func (w *ScatteredWriter) Reset() {
	if r, ok := w.delegate.(ChunkReleaser); ok {
		for i, c := range w.done {
			r.ReleaseChunk(c)
			w.done[i] = nil
		}
		if w.cur != nil {
			r.ReleaseChunk(w.cur)
		}
	} else {
		clear(w.done)
	}
	w.done = w.done[:0]
	w.cur = nil
	w.written = 0
	clear(w.stack)
	w.stack = w.stack[:0]
	w.err = nil
}

// nextChunk closes the current chunk and opens a new one.
func (w *ScatteredWriter) nextChunk() {
	if w.cur != nil {
		w.done = append(w.done, w.cur)
		w.written += len(w.cur)
	}
	c := w.delegate.NewChunk()
	if cap(c) < minChunkSize {
		panic(fmt.Sprintf("pbwire: delegate returned a %d-byte chunk, need at least %d", cap(c), minChunkSize))
	}
	w.cur = c[:0]
}

// write copies b, spanning as many chunks as needed: the out-of-line slow path.
func (w *ScatteredWriter) write(b []byte) {
	for len(b) > 0 {
		room := cap(w.cur) - len(w.cur)
		if room == 0 {
			w.nextChunk()
			continue
		}
		n := min(room, len(b))
		w.cur = append(w.cur, b[:n]...)
		b = b[n:]
	}
}

// writeString is write for a string, without converting it.
func (w *ScatteredWriter) writeString(s string) {
	for len(s) > 0 {
		room := cap(w.cur) - len(w.cur)
		if room == 0 {
			w.nextChunk()
			continue
		}
		n := min(room, len(s))
		w.cur = append(w.cur, s[:n]...)
		s = s[n:]
	}
}

// maxScalarField is the room the Append functions need for one scalar field: the longest one
// (a 5-byte key and a 10-byte varint) rounded up for their 8-byte stores. With less room,
// they would grow the chunk, so the scattered writer goes through a scratch buffer instead.
const maxScalarField = wideRoom

// VarintField writes a varint field (see AppendVarintField).
func (w *ScatteredWriter) VarintField(t Tag, v uint64) {
	if cap(w.cur)-len(w.cur) >= maxScalarField {
		w.cur = AppendVarintField(w.cur, t, v)
		return
	}
	var scratch [maxScalarField]byte
	w.write(AppendVarintField(scratch[:0], t, v))
}

// Sint32Field writes a zigzag-encoded sint32 field.
func (w *ScatteredWriter) Sint32Field(t Tag, v int32) { w.VarintField(t, EncodeZigZag32(v)) }

// Sint64Field writes a zigzag-encoded sint64 field.
func (w *ScatteredWriter) Sint64Field(t Tag, v int64) { w.VarintField(t, EncodeZigZag64(v)) }

// Fixed32Field writes a fixed32 field.
func (w *ScatteredWriter) Fixed32Field(t Tag, v uint32) {
	if cap(w.cur)-len(w.cur) >= maxScalarField {
		w.cur = AppendFixed32Field(w.cur, t, v)
		return
	}
	var scratch [maxScalarField]byte
	w.write(AppendFixed32Field(scratch[:0], t, v))
}

// Fixed64Field writes a fixed64 field.
func (w *ScatteredWriter) Fixed64Field(t Tag, v uint64) {
	if cap(w.cur)-len(w.cur) >= maxScalarField {
		w.cur = AppendFixed64Field(w.cur, t, v)
		return
	}
	var scratch [maxScalarField]byte
	w.write(AppendFixed64Field(scratch[:0], t, v))
}

// BytesField writes a bytes field; b may span several chunks.
func (w *ScatteredWriter) BytesField(t Tag, b []byte) {
	if cap(w.cur)-len(w.cur) >= maxScalarField+len(b) {
		w.cur = AppendBytesField(w.cur, t, b)
		return
	}
	var scratch [maxScalarField]byte
	w.write(appendLenSlow(scratch[:0], t, len(b)))
	w.write(b)
}

// StringField writes a string field; s may span several chunks.
func (w *ScatteredWriter) StringField(t Tag, s string) {
	if cap(w.cur)-len(w.cur) >= maxScalarField+len(s) {
		w.cur = AppendStringField(w.cur, t, s)
		return
	}
	var scratch [maxScalarField]byte
	w.write(appendLenSlow(scratch[:0], t, len(s)))
	w.writeString(s)
}

// PackedUint32Field writes a packed repeated varint field.
func (w *ScatteredWriter) PackedUint32Field(t Tag, vs []uint32) {
	if len(vs) == 0 {
		return
	}
	n := 0
	for _, v := range vs {
		n += SizeVarint(uint64(v))
	}
	var scratch [maxScalarField]byte
	w.write(appendLenSlow(scratch[:0], t, n))
	for _, v := range vs {
		if cap(w.cur)-len(w.cur) >= MaxVarintLen {
			w.cur = AppendVarint(w.cur, uint64(v))
		} else {
			w.write(AppendVarint(scratch[:0], uint64(v)))
		}
	}
}

// PackedUint64Field writes a packed repeated varint field.
func (w *ScatteredWriter) PackedUint64Field(t Tag, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	n := 0
	for _, v := range vs {
		n += SizeVarint(v)
	}
	var scratch [maxScalarField]byte
	w.write(appendLenSlow(scratch[:0], t, n))
	for _, v := range vs {
		if cap(w.cur)-len(w.cur) >= MaxVarintLen {
			w.cur = AppendVarint(w.cur, v)
		} else {
			w.write(AppendVarint(scratch[:0], v))
		}
	}
}

// BeginNested starts a nested message field t; end it with EndNested. The 4 size bytes are
// kept in one chunk (a new chunk is opened when fewer remain), the payload may span chunks.
func (w *ScatteredWriter) BeginNested(t Tag) {
	var scratch [5]byte
	if cap(w.cur)-len(w.cur) >= 5+NestedSizeLen { // AppendTag only appends
		w.cur = AppendTag(w.cur, t)
	} else {
		w.write(AppendTag(scratch[:0], t))
		if cap(w.cur)-len(w.cur) < NestedSizeLen {
			w.nextChunk()
		}
	}
	n := len(w.cur)
	w.cur = append(w.cur, 0x80, 0x80, 0x80, 0x00)
	w.stack = append(w.stack, nestedSize{size: w.cur[n : n+NestedSizeLen : n+NestedSizeLen], start: w.Len()})
}

// EndNested back-patches the size of the innermost open nested message.
func (w *ScatteredWriter) EndNested() {
	top := len(w.stack) - 1
	if top < 0 {
		if w.err == nil {
			w.err = fmt.Errorf("pbwire: EndNested without BeginNested")
		}
		return
	}
	m := w.stack[top]
	w.stack[top] = nestedSize{}
	w.stack = w.stack[:top]
	n := w.Len() - m.start
	if n > MaxNestedSize {
		if w.err == nil {
			w.err = fmt.Errorf("pbwire: nested message of %d bytes exceeds %d", n, MaxNestedSize)
		}
		return
	}
	b := m.size[:NestedSizeLen]
	b[0] = byte(n) | 0x80
	b[1] = byte(n>>7) | 0x80
	b[2] = byte(n>>14) | 0x80
	b[3] = byte(n >> 21)
}

// PackedFixed32Field writes a packed repeated fixed32 field (fixed32, sfixed32, float).
func (w *ScatteredWriter) PackedFixed32Field(t Tag, vs []uint32) {
	if len(vs) == 0 {
		return
	}
	var scratch [maxScalarField]byte
	w.write(appendLenSlow(scratch[:0], t, 4*len(vs)))
	for _, v := range vs {
		if cap(w.cur)-len(w.cur) >= 4 {
			w.cur = append(w.cur, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		} else {
			w.write(append(scratch[:0], byte(v), byte(v>>8), byte(v>>16), byte(v>>24)))
		}
	}
}

// PackedFixed64Field writes a packed repeated fixed64 field (fixed64, sfixed64, double).
func (w *ScatteredWriter) PackedFixed64Field(t Tag, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	var scratch [maxScalarField]byte
	w.write(appendLenSlow(scratch[:0], t, 8*len(vs)))
	for _, v := range vs {
		b := append(scratch[:0], byte(v), byte(v>>8), byte(v>>16), byte(v>>24),
			byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
		if cap(w.cur)-len(w.cur) >= 8 {
			w.cur = append(w.cur, b...)
		} else {
			w.write(b)
		}
	}
}
