package pbwire

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"
	"unsafe"
)

// Buffer is one length-delimited message written into a reusable array, for hot paths that
// write many small fields per message and many messages (flowzero's flows). It writes the
// same bytes as the Append*Field functions, but keeps the end of the message as an integer:
// a field costs one integer store, where an append-style dst costs a slice header (three words
// and a write barrier check). Reuse it: Reset keeps the array, so a warm Buffer allocates
// nothing.
//
// The room is checked against len(buf), which the writers keep equal to the room they may
// use; the stores then go through a pointer without bounds checks. Bytes past the end of the
// message are scratch: keys and short values are stored 8 bytes at a time. The first
// ReserveDelimited bytes of the array hold the length prefix Delimited writes.
//
// Init may keep, past len(buf), a reserve for AppendVarintFieldReserved, which writes there
// without checking the room; every other writer leaves the reserve whole.
type Buffer struct {
	buf     []byte
	n       int // end of the message
	reserve int // bytes kept past len(buf) for AppendVarintFieldReserved
}

// Init gives b an array of size bytes (it grows when a message needs more) and room for
// reserved calls in a row to AppendVarintFieldReserved, and resets it. A Buffer must be
// initialized before use.
func (b *Buffer) Init(size, reserved int) {
	size = max(size, ReserveDelimited)
	b.reserve = reserved * wideRoom
	b.buf = make([]byte, size, size+b.reserve)
	b.Reset()
}

// Reset empties the message, keeping the array.
func (b *Buffer) Reset() { b.n = ReserveDelimited }

// Len is the length of the message written so far.
func (b *Buffer) Len() int { return b.n - ReserveDelimited }

// Available is the room left before the array grows (without the reserve).
func (b *Buffer) Available() int { return len(b.buf) - b.n }

// Payload returns the message written so far, without a length prefix. It stays valid until
// the next write or Reset.
func (b *Buffer) Payload() []byte { return b.buf[ReserveDelimited:b.n:b.n] }

// Raw returns the message written so far as a Raw, to be appended to other messages: a view
// of the array (no copy), valid until the next write or Reset. It grows the array first if
// RawPad bytes are not free past the message.
func (b *Buffer) Raw() Raw {
	if cap(b.buf)-b.n < RawPad {
		b.grow(RawPad)
	}
	return Raw{b.buf[ReserveDelimited:b.n:cap(b.buf)]}
}

// Delimited writes the message's length in front of it, in the room kept there, and returns
// the framed message (varint length, then the message) as protobuf's delimited streams and
// ClickHouse's Protobuf format read it. It stays valid until Reset; fields appended after it
// land past its end.
func (b *Buffer) Delimited() []byte {
	// A minimal varint whose last byte (the highest bits) is the last before the payload:
	// one or two bytes for all but very long messages. Init made the array at least
	// ReserveDelimited long, and b.n stays within its capacity. No call, so that it is
	// inlined.
	l := uint(b.n - ReserveDelimited)
	start := ReserveDelimited - 1
	for x := l >> 7; x != 0; x >>= 7 {
		start--
	}
	p := b.at(start)
	framed := unsafe.Slice((*byte)(p), b.n-start)
	for ; l >= 0x80; l >>= 7 {
		*(*byte)(p) = byte(l) | 0x80
		p = unsafe.Add(p, 1)
	}
	*(*byte)(p) = byte(l)
	return framed
}

// AppendVarintField appends a varint field (see the function AppendVarintField).
func (b *Buffer) AppendVarintField(t Tag, v uint64) {
	n := b.n
	if len(b.buf)-n < wideRoom {
		b.appendVarintSlow(t, v)
		return
	}
	b.n = n + putVarintField(b.at(n), t, v)
}

// AppendVarintFieldReserved appends a varint field without checking the room: it may write
// into the reserve Init kept past len(buf), and the next other writer grows the array. At
// most the reserved count of Init of these fields may follow each other (any other writer,
// or Reset, ends a run; a caller that writes each of a fixed set of fields at most once per
// message knows its bound): more would write past the array. With no check, it calls nothing
// and the caller needs no stack frame for it.
func (b *Buffer) AppendVarintFieldReserved(t Tag, v uint64) {
	// n is read once, before the stores: read after them, it would have to wait until the
	// CPU knows that they do not alias it.
	n := b.n
	b.n = n + putVarintField(b.at(n), t, v)
}

//go:noinline
func (b *Buffer) appendVarintSlow(t Tag, v uint64) {
	b.adopt(AppendVarintField(b.buf[:b.n], t, v))
}

// AppendStringField appends a string or bytes field holding s, as it is.
func (b *Buffer) AppendStringField(t Tag, s string) {
	n := b.n
	if len(s) >= 0x80 || len(b.buf)-n < wideRoom+len(s) {
		b.appendStringSlow(t, s)
		return
	}
	kl := t.Len()
	store64(b.at(n), uint64(t)|uint64(len(s))<<(8*kl&63))
	h := n + kl + 1
	b.n = h + copy(b.buf[h:], s)
}

// AppendBytesField appends a bytes field holding p.
func (b *Buffer) AppendBytesField(t Tag, p []byte) {
	b.AppendStringField(t, unsafe.String(unsafe.SliceData(p), len(p)))
}

//go:noinline
func (b *Buffer) appendStringSlow(t Tag, s string) {
	b.adopt(AppendStringField(b.buf[:b.n], t, s))
}

// AppendUTF8Field appends a string field holding s with every byte that is not part of valid
// UTF-8 replaced by U+FFFD, and reports whether s was valid: proto3 parsers, Go's among them,
// refuse a whole message whose string field is not UTF-8.
func (b *Buffer) AppendUTF8Field(t Tag, s string) (valid bool) {
	if b.AppendASCIIField(t, s) {
		return true
	}
	return b.appendUTF8Slow(t, s)
}

// AppendASCIIField appends a string field holding s when s is ASCII (so valid UTF-8) and
// shorter than 128 bytes and the array has room, the common case for names, and returns
// false, having written nothing, otherwise: call AppendUTF8Field then. The copy itself tells
// if s is ASCII, and the function calls nothing, so that its call costs no stack frame.
func (b *Buffer) AppendASCIIField(t Tag, s string) bool {
	n, l := b.n, len(s)
	if l >= 0x80 || len(b.buf)-n < wideRoom+l {
		return false
	}
	// The checks above leave room for 8 bytes past the string: the stores need no bounds
	// checks. Strings under 8 bytes are assembled from overlapping loads into one word, the
	// others copied 8 bytes at a time, the last word overlapping the one before.
	kl := int(t >> tagLenShift)
	p := b.at(n)
	store64(p, uint64(t)|uint64(l)<<(8*kl&63))
	dst, src := unsafe.Add(p, kl+1), unsafe.Pointer(unsafe.StringData(s))
	var acc uint64
	switch {
	case l >= 8:
		for i := 0; i < l-8; i += 8 {
			w := load64(unsafe.Add(src, i))
			acc |= w
			store64(unsafe.Add(dst, i), w)
		}
		w := load64(unsafe.Add(src, l-8))
		acc |= w
		store64(unsafe.Add(dst, l-8), w)
	case l >= 4:
		acc = uint64(load32(src)) | uint64(load32(unsafe.Add(src, l-4)))<<(8*(l-4))
		store64(dst, acc)
	case l > 0:
		acc = uint64(*(*byte)(src)) | uint64(*(*byte)(unsafe.Add(src, l/2)))<<(8*(l/2)) | uint64(*(*byte)(unsafe.Add(src, l-1)))<<(8*(l-1))
		store64(dst, acc)
	}
	if acc&0x8080_8080_8080_8080 != 0 {
		return false
	}
	b.n = n + kl + 1 + l
	return true
}

// appendUTF8Slow is AppendUTF8Field for strings that are long, do not fit the array or are
// not valid UTF-8.
//
//go:noinline
func (b *Buffer) appendUTF8Slow(t Tag, s string) bool {
	if !isASCII(s) && !utf8.ValidString(s) {
		b.adopt(appendValidUTF8Field(b.buf[:b.n], t, s))
		return false
	}
	b.adopt(AppendStringField(b.buf[:b.n], t, s))
	return true
}

// AppendBytes16Field appends a bytes field holding 16 bytes given as two little-endian words,
// the first 8 bytes in lo, the last 8 in hi (for example an IPv6 address, or an IPv4 address
// mapped into IPv6): the words are stored as they are, with no byte swap.
func (b *Buffer) AppendBytes16Field(t Tag, lo, hi uint64) {
	if len(b.buf)-b.n < wideRoom+16 {
		b.grow(wideRoom + 16)
	}
	n := b.n
	b.n = n + putBytes16Field(b.at(n), t, lo, hi)
}

// AppendPackedUint32Field appends a packed repeated varint field (see the function
// AppendPackedUint32Field). Short arrays (AS paths, communities, MPLS stacks) are written in
// one pass, without sizing the values first.
func (b *Buffer) AppendPackedUint32Field(t Tag, vs []uint32) {
	// A one-byte length is reserved and filled in afterwards.
	n := b.n
	if len(vs) == 0 || len(vs) > maxShortPacked || len(b.buf)-n < packedWindow {
		b.appendPackedUint32Slow(t, vs)
		return
	}
	// The indexes into the window are masked: no bounds checks.
	p := b.at(n)
	store64(p, uint64(t))
	w := (*[packedWindow]byte)(p)
	kl := t.Len()
	i := kl + 1
	for _, v := range vs {
		for v >= 0x80 {
			w[i&(packedWindow-1)] = byte(v) | 0x80
			v >>= 7
			i++
		}
		w[i&(packedWindow-1)] = byte(v)
		i++
	}
	w[kl&(packedWindow-1)] = byte(i - kl - 1)
	b.n = n + i
}

//go:noinline
func (b *Buffer) appendPackedUint32Slow(t Tag, vs []uint32) {
	b.adopt(AppendPackedUint32Field(b.buf[:b.n], t, vs))
}

// maxShortPacked is the longest array AppendPackedUint32Field writes in one pass, with a
// one-byte length: 25 values of at most 5 bytes stay under 128 bytes.
const maxShortPacked = 25

// packedWindow is the room the one-pass write needs: a power of two above the longest field
// it writes (a 5-byte key, a one-byte length and 25 5-byte values).
const packedWindow = 256

// AppendPackedUint64Field appends a packed repeated varint field (see the function
// AppendPackedUint64Field).
func (b *Buffer) AppendPackedUint64Field(t Tag, vs []uint64) {
	b.adopt(AppendPackedUint64Field(b.buf[:b.n], t, vs))
}

// rawStep is the size of AppendRaw's copy steps: one 16-byte load and store.
const rawStep = 16

// AppendRaw appends p, fields already encoded (for example a set of fields many messages
// share, encoded once). When p has rawStep bytes of capacity past its end, it is copied in
// 16-byte steps rather than with a call to memmove.
func (b *Buffer) AppendRaw(p []byte) {
	n, l := b.n, len(p)
	if cap(p)-l < rawStep || len(b.buf)-n < l+rawStep {
		b.appendRawSlow(p)
		return
	}
	copySteps(b.at(n), unsafe.Pointer(unsafe.SliceData(p)), l)
	b.n = n + l
}

//go:noinline
func (b *Buffer) appendRawSlow(p []byte) {
	if len(b.buf)-b.n < len(p) {
		b.grow(len(p))
	}
	b.n += copy(b.buf[b.n:], p)
}

// copySteps copies l bytes from src to dst in 16-byte steps, reading and writing up to 15
// bytes past l.
func copySteps(dst, src unsafe.Pointer, l int) {
	for i := 0; i < l; i += rawStep {
		*(*[rawStep]byte)(unsafe.Add(dst, i)) = *(*[rawStep]byte)(unsafe.Add(src, i))
	}
}

// Grow makes room for n more bytes without growing the array again.
func (b *Buffer) Grow(n int) {
	if len(b.buf)-b.n < n {
		b.grow(n)
	}
}

// Room returns the room left in the array, for a run of small fields that Room's methods
// then write without checking the room again (one check for the run, rather than one per
// field); Commit ends the run. Call Grow first with MaxRoomFieldLen bytes for each field the
// run may write: like AppendVarintFieldReserved, the field methods do not check, and more
// fields would write past the array. Room is a value: keep it in a local, so that the end of
// the message stays in a register from one field to the next.
//
//	b.Grow(2 * pbwire.MaxRoomFieldLen)
//	r := b.Room()
//	r = r.AppendVarintField(t1, v1)
//	r = r.AppendBytes16Field(t2, lo, hi)
//	b.Commit(r)
func (b *Buffer) Room() Room {
	return Room{p: unsafe.Pointer(unsafe.SliceData(b.buf)), i: b.n, end: len(b.buf)}
}

// Commit makes the fields written through r, which b.Room returned, part of the message.
// The buffer must not have been written to since.
func (b *Buffer) Commit(r Room) { b.n = r.i }

// Room is the room at the end of a Buffer's message: see Buffer.Room.
type Room struct {
	p      unsafe.Pointer // the Buffer's array
	i, end int            // end of the message, end of the room
}

// MaxRoomFieldLen is the room each field written through a Room takes: the longest, a
// 16-byte bytes field, has a key of up to 5 bytes, the length and 16 bytes.
const MaxRoomFieldLen = 24

// AppendVarintField appends a varint field and returns the room left.
func (r Room) AppendVarintField(t Tag, v uint64) Room {
	r.i += putVarintField(unsafe.Add(r.p, r.i), t, v)
	return r
}

// AppendBytes16Field appends a bytes field holding 16 bytes given as two little-endian words
// (see Buffer.AppendBytes16Field) and returns the room left.
func (r Room) AppendBytes16Field(t Tag, lo, hi uint64) Room {
	r.i += putBytes16Field(unsafe.Add(r.p, r.i), t, lo, hi)
	return r
}

// AppendShortStringField appends a string field holding s, which must have 8 to 16 bytes
// (most interface and exporter names), and returns the room left: two overlapping 8-byte
// copies, small enough to be inlined. Reading s is bounds-checked; with a longer s, the field
// would take more than MaxRoomFieldLen bytes.
func (r Room) AppendShortStringField(t Tag, s string) Room {
	l := len(s)
	p := unsafe.Add(r.p, r.i)
	kl := int(t>>tagLenShift) + 1 // the key and the length byte
	store64(p, uint64(t)|uint64(l)<<(8*kl-8))
	*(*[8]byte)(unsafe.Add(p, kl)) = *(*[8]byte)(unsafe.Pointer(unsafe.StringData(s[:8])))
	*(*[8]byte)(unsafe.Add(p, kl+l-8)) = *(*[8]byte)(unsafe.Pointer(unsafe.StringData(s[l-8:])))
	r.i += kl + l
	return r
}

// Available is the room left, in bytes.
func (r Room) Available() int { return r.end - r.i }

// AppendRaw appends p, fields already encoded, and returns the room left. Unlike the fields,
// whose size is bounded, it checks that the room holds p and RawPad bytes, and panics when it
// does not (a bug in the caller's Grow, not bad input): a caller that checked Available
// against the same sum first pays for one check, the compiler dropping the second.
func (r Room) AppendRaw(p Raw) Room {
	l := len(p.b)
	if r.end-r.i < l+RawPad {
		panic(errPastRoom)
	}
	// Both arrays have RawPad bytes past the fields: RawPad bytes moved in 16-byte steps
	// (a RawPad-byte array would be copied by a call to memmove), then a loop for the
	// rest.
	dst, src := unsafe.Add(r.p, r.i), unsafe.Pointer(unsafe.SliceData(p.b))
	*(*[rawStep]byte)(dst) = *(*[rawStep]byte)(src)
	*(*[rawStep]byte)(unsafe.Add(dst, rawStep)) = *(*[rawStep]byte)(unsafe.Add(src, rawStep))
	for i := RawPad; i < l; i += rawStep {
		*(*[rawStep]byte)(unsafe.Add(dst, i)) = *(*[rawStep]byte)(unsafe.Add(src, i))
	}
	r.i += l
	return r
}

// Raw is a run of fields encoded once, to be appended to many messages with one copy (for
// flowzero, an exporter's or an interface's names, or the fields all the flows of a datagram
// share). Its array keeps RawPad bytes past the fields, so that Room.AppendRaw copies them
// with one RawPad-byte move and no loop when they are short, the usual case. A Raw comes from
// MakeRaw or Buffer.Raw (the zero Raw cannot be appended) and is read-only: it is safe for
// concurrent use.
type Raw struct{ b []byte }

// RawPad is the padding a Raw keeps past its fields, and the room Room.AppendRaw needs past
// them.
const RawPad = 32

// MakeRaw returns a Raw holding a copy of p.
func MakeRaw(p []byte) Raw {
	return Raw{append(make([]byte, 0, len(p)+RawPad), p...)}
}

// Len is the length of the fields.
func (r Raw) Len() int { return len(r.b) }

// Bytes returns the fields; they must not be modified.
func (r Raw) Bytes() []byte { return r.b }

// errPastRoom is the panic of a Room.AppendRaw past the room.
var errPastRoom = errors.New("pbwire: raw fields written past the end of their Room")

// at is the address of b.buf[n], for the writers that checked their room.
func (b *Buffer) at(n int) unsafe.Pointer {
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b.buf)), n)
}

// putVarintField stores key t and varint v at p, which must have wideRoom bytes of room, and
// returns their size: the key with one 8-byte store, the varint behind it with a byte loop
// whose indexes are masked into the 16-byte window (no bounds checks). It is small enough to
// be inlined, so that each call site gets its own branches.
func putVarintField(p unsafe.Pointer, t Tag, v uint64) int {
	store64(p, uint64(t))
	w := (*[wideRoom]byte)(p)
	i := int(t >> tagLenShift)
	for v >= 0x80 {
		w[i&(wideRoom-1)] = byte(v) | 0x80
		v >>= 7
		i++
	}
	w[i&(wideRoom-1)] = byte(v)
	return i + 1
}

// putBytes16Field stores key t, the length 16, lo and hi at p, which must have
// MaxRoomFieldLen bytes of room, and returns their size.
func putBytes16Field(p unsafe.Pointer, t Tag, lo, hi uint64) int {
	kl := int(t >> tagLenShift)
	store64(p, uint64(t)|16<<(8*kl&63))
	store64(unsafe.Add(p, kl+1), lo)
	store64(unsafe.Add(p, kl+9), hi)
	return kl + 17
}

// store64 stores v little-endian at p (unaligned): the writers check the room first, and
// then write through a pointer rather than a slice to skip the bounds checks.
func store64(p unsafe.Pointer, v uint64) {
	binary.LittleEndian.PutUint64((*[8]byte)(p)[:], v)
}

// load32 loads 4 bytes little-endian at p (unaligned).
func load32(p unsafe.Pointer) uint32 {
	return binary.LittleEndian.Uint32((*[4]byte)(p)[:])
}

// load64 loads 8 bytes little-endian at p (unaligned).
func load64(p unsafe.Pointer) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(p)[:])
}

// adopt makes out, the message appended to by an Append*Field function from b.buf[:b.n], the
// message: the function may have moved it to a larger array, and the reserve must stay past
// len(b.buf). adopt and grow are kept out of line, so that the fast paths stay short.
//
//go:noinline
func (b *Buffer) adopt(out []byte) {
	if cap(out)-len(out) < b.reserve {
		b.buf, b.n = out, len(out)
		b.grow(0)
		return
	}
	b.buf, b.n = out[:cap(out)-b.reserve], len(out)
}

// grow makes room for need bytes past b.n, and the reserve past that.
//
//go:noinline
func (b *Buffer) grow(need int) {
	l := max(2*len(b.buf), b.n+need, ReserveDelimited+wideRoom)
	nb := make([]byte, l, l+b.reserve)
	copy(nb, b.buf[:b.n])
	b.buf = nb
}

// isASCII tells if s is plain ASCII (so valid UTF-8), 8 bytes at a time: cheaper than
// utf8.ValidString on the short strings this package mostly sees.
func isASCII(s string) bool {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	var acc uint64
	for len(b) >= 8 {
		acc |= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, c := range b {
		acc |= uint64(c)
	}
	return acc&0x8080_8080_8080_8080 == 0
}

// appendValidUTF8Field appends string field s with each invalid byte replaced by U+FFFD. It
// does not allocate: the size is computed first.
func appendValidUTF8Field(dst []byte, t Tag, s string) []byte {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += utf8.RuneLen(utf8.RuneError)
		} else {
			n += size
		}
		i += size
	}
	dst = AppendTag(dst, t)
	dst = AppendVarint(dst, uint64(n))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}
