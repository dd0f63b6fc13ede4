package pbwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// WireType is the low three bits of a protobuf field key.
type WireType uint8

// The wire types pbwire writes and reads. Groups (3, 4) are obsolete and rejected by the reader.
const (
	Varint  WireType = 0
	Fixed64 WireType = 1
	Bytes   WireType = 2
	Fixed32 WireType = 5
)

// String returns the wire type's name as in the protobuf encoding guide.
func (wt WireType) String() string {
	switch wt {
	case Varint:
		return "varint"
	case Fixed64:
		return "i64"
	case Bytes:
		return "len"
	case 3:
		return "sgroup"
	case 4:
		return "egroup"
	case Fixed32:
		return "i32"
	}
	return fmt.Sprintf("wiretype(%d)", uint8(wt))
}

// Limits of the encoding.
const (
	// MaxFieldNumber is the largest field number protobuf allows (2^29-1).
	MaxFieldNumber = 1<<29 - 1
	// MaxVarintLen is the longest varint (a 64-bit value): 10 bytes.
	MaxVarintLen = 10
	// NestedSizeLen is the size of the redundant varint BeginNested reserves for a nested
	// message's length; a nested message must stay under MaxNestedSize bytes.
	NestedSizeLen = 4
	// MaxNestedSize is the largest payload a 4-byte size can describe (256 MiB - 1).
	MaxNestedSize = 1<<(7*NestedSizeLen) - 1
	// ReserveDelimited is the room to reserve in front of a payload for FinishDelimited: a
	// varint of up to 35 bits, enough for any message (protobuf caps them at 2 GiB).
	ReserveDelimited = 5
)

// Tag is a field key (field number << 3 | wire type) already encoded as a varint: its bytes
// are stored little-endian in the low 40 bits, first byte lowest, and their count in the top
// byte. Encoding the key once at setup lets the Append functions store it with one 8-byte
// write instead of re-encoding it on every call. Keys of fields 1 to 15 are one byte.
type Tag uint64

// tagLenShift is where the key length sits in a Tag.
const tagLenShift = 56

// MakeTag encodes the key of field num with wire type wt. It is meant for setup time (package
// variables, schema construction) and panics when num is outside 1..MaxFieldNumber or wt is
// not one of Varint, Fixed64, Bytes, Fixed32.
func MakeTag(num int, wt WireType) Tag {
	if num < 1 || num > MaxFieldNumber {
		panic(fmt.Sprintf("pbwire: field number %d out of range 1..%d", num, MaxFieldNumber))
	}
	switch wt {
	case Varint, Fixed64, Bytes, Fixed32:
	default:
		panic(fmt.Sprintf("pbwire: cannot make a tag with wire type %d", wt))
	}
	key := uint64(num)<<3 | uint64(wt)
	var t Tag
	for i := 0; ; i++ {
		if key < 0x80 {
			return t | Tag(key)<<(8*i) | Tag(i+1)<<tagLenShift
		}
		t |= Tag(key&0x7f|0x80) << (8 * i)
		key >>= 7
	}
}

// Len is the number of bytes of the encoded key (1 to 5).
func (t Tag) Len() int {
	return int(t >> tagLenShift)
}

// Num is the field number of the key.
func (t Tag) Num() int {
	var key uint64
	for i := range t.Len() {
		key |= uint64(t>>(8*i)&0x7f) << (7 * i)
	}
	return int(key >> 3)
}

// WireType is the wire type of the key.
func (t Tag) WireType() WireType {
	return WireType(t & 7)
}

// AppendTag appends the encoded key t.
func AppendTag(dst []byte, t Tag) []byte {
	if t.Len() == 1 {
		return append(dst, byte(t))
	}
	return appendTagSlow(dst, t)
}

func appendTagSlow(dst []byte, t Tag) []byte {
	for i := range t.Len() {
		dst = append(dst, byte(t>>(8*i)))
	}
	return dst
}

// SizeVarint is the number of bytes of the minimal varint encoding of v (1 to 10).
func SizeVarint(v uint64) int {
	// 9/64 is 1/7 rounded up enough for every bit length up to 64.
	return int(9*uint32(bits.Len64(v))+64) / 64
}

// AppendVarint appends the minimal varint encoding of v.
func AppendVarint(dst []byte, v uint64) []byte {
	if v < 0x80 {
		return append(dst, byte(v))
	}
	return appendVarintSlow(dst, v)
}

func appendVarintSlow(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// wideRoom is the spare capacity the field writers work in: the longest scalar field (a 5-byte
// key and a 10-byte varint) rounded up for 8-byte stores. When dst has less, it grows first.
//
// The field writers are small enough for the compiler to inline them into the caller: with
// the room guaranteed, a field is one 8-byte store of the key and the varint's bytes, and the
// function has no call left but the rare growth. As a consequence they may write garbage in
// the spare capacity of dst, up to wideRoom bytes past the field they append (append itself
// only writes the bytes it adds): do not keep data in dst[len(dst):cap(dst)].
const wideRoom = 16

// EncodeZigZag32 maps a signed value to an unsigned one so that small magnitudes encode short
// (sint32).
func EncodeZigZag32(v int32) uint64 { return uint64(uint32(v<<1) ^ uint32(v>>31)) }

// EncodeZigZag64 maps a signed value to an unsigned one so that small magnitudes encode short
// (sint64).
func EncodeZigZag64(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// AppendVarintField appends a varint field: uint32, uint64, int64, bool, enum, and int32 as
// uint64(int64(v)) (negative int32 take 10 bytes, as protobuf requires). It is inlined by the
// compiler (see wideRoom).
func AppendVarintField(dst []byte, t Tag, v uint64) []byte {
	n := len(dst)
	if cap(dst)-n < wideRoom {
		dst = append(dst, make([]byte, wideRoom)...)[:n]
	}
	b := dst[n : n+wideRoom]
	binary.LittleEndian.PutUint64(b, uint64(t))
	i := t.Len()
	for v >= 0x80 {
		b[i] = byte(v) | 0x80
		v >>= 7
		i++
	}
	b[i] = byte(v)
	return dst[:n+i+1]
}

// AppendSint32Field appends a zigzag-encoded sint32 field.
func AppendSint32Field(dst []byte, t Tag, v int32) []byte {
	return AppendVarintField(dst, t, EncodeZigZag32(v))
}

// AppendSint64Field appends a zigzag-encoded sint64 field.
func AppendSint64Field(dst []byte, t Tag, v int64) []byte {
	return AppendVarintField(dst, t, EncodeZigZag64(v))
}

// AppendFixed32Field appends a fixed32 (also sfixed32, float) field, little-endian.
func AppendFixed32Field(dst []byte, t Tag, v uint32) []byte {
	n := len(dst)
	if cap(dst)-n < wideRoom {
		dst = append(dst, make([]byte, wideRoom)...)[:n]
	}
	b := dst[n : n+wideRoom]
	binary.LittleEndian.PutUint64(b, uint64(t))
	i := t.Len()
	binary.LittleEndian.PutUint32(b[i:], v)
	return dst[:n+i+4]
}

// AppendFixed64Field appends a fixed64 (also sfixed64, double) field, little-endian.
func AppendFixed64Field(dst []byte, t Tag, v uint64) []byte {
	n := len(dst)
	if cap(dst)-n < wideRoom {
		dst = append(dst, make([]byte, wideRoom)...)[:n]
	}
	b := dst[n : n+wideRoom]
	binary.LittleEndian.PutUint64(b, uint64(t))
	i := t.Len()
	binary.LittleEndian.PutUint64(b[i:], v)
	return dst[:n+i+8]
}

// AppendFloatField appends a float field.
func AppendFloatField(dst []byte, t Tag, v float32) []byte {
	return AppendFixed32Field(dst, t, math.Float32bits(v))
}

// AppendDoubleField appends a double field.
func AppendDoubleField(dst []byte, t Tag, v float64) []byte {
	return AppendFixed64Field(dst, t, math.Float64bits(v))
}

// AppendBytesField appends a length-delimited field holding b (bytes, or an already encoded
// message).
func AppendBytesField(dst []byte, t Tag, b []byte) []byte {
	return append(AppendVarintField(dst, t, uint64(len(b))), b...)
}

// AppendStringField appends a string field.
func AppendStringField(dst []byte, t Tag, s string) []byte {
	return append(AppendVarintField(dst, t, uint64(len(s))), s...)
}

func appendLenSlow(dst []byte, t Tag, n int) []byte {
	dst = AppendTag(dst, t)
	return AppendVarint(dst, uint64(n))
}

// AppendPackedUint32Field appends a packed repeated varint field (uint32, or enum). Nothing is
// appended for an empty slice, as protobuf does.
func AppendPackedUint32Field(dst []byte, t Tag, vs []uint32) []byte {
	if len(vs) == 0 {
		return dst
	}
	n := 0
	for _, v := range vs {
		n += SizeVarint(uint64(v))
	}
	dst = AppendTag(dst, t)
	dst = AppendVarint(dst, uint64(n))
	for _, v := range vs {
		dst = AppendVarint(dst, uint64(v))
	}
	return dst
}

// AppendPackedUint64Field appends a packed repeated varint field (uint64, int64). Nothing is
// appended for an empty slice.
func AppendPackedUint64Field(dst []byte, t Tag, vs []uint64) []byte {
	if len(vs) == 0 {
		return dst
	}
	n := 0
	for _, v := range vs {
		n += SizeVarint(v)
	}
	dst = AppendTag(dst, t)
	dst = AppendVarint(dst, uint64(n))
	for _, v := range vs {
		dst = AppendVarint(dst, v)
	}
	return dst
}

// AppendPackedFixed32Field appends a packed repeated fixed32 field (fixed32, sfixed32, float).
func AppendPackedFixed32Field(dst []byte, t Tag, vs []uint32) []byte {
	if len(vs) == 0 {
		return dst
	}
	dst = AppendTag(dst, t)
	dst = AppendVarint(dst, uint64(4*len(vs)))
	for _, v := range vs {
		dst = append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return dst
}

// AppendPackedFixed64Field appends a packed repeated fixed64 field (fixed64, sfixed64, double).
func AppendPackedFixed64Field(dst []byte, t Tag, vs []uint64) []byte {
	if len(vs) == 0 {
		return dst
	}
	dst = AppendTag(dst, t)
	dst = AppendVarint(dst, uint64(8*len(vs)))
	for _, v := range vs {
		dst = append(dst, byte(v), byte(v>>8), byte(v>>16), byte(v>>24),
			byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
	}
	return dst
}

// BeginNested starts a nested message field: it appends the key t and reserves NestedSizeLen
// bytes for the size, which EndNested fills in once the payload is written. mark is where the
// payload starts; keep it (on the stack, in a local) and pass it to EndNested. Nested
// messages nest like function calls: end the inner one before the outer one.
func BeginNested(dst []byte, t Tag) (out []byte, mark int) {
	n := len(dst)
	if cap(dst)-n < wideRoom {
		dst = append(dst, make([]byte, wideRoom)...)[:n]
	}
	b := dst[n : n+wideRoom]
	binary.LittleEndian.PutUint64(b, uint64(t))
	i := t.Len()
	binary.LittleEndian.PutUint32(b[i:], 0x00808080)
	mark = n + i + NestedSizeLen
	return dst[:mark], mark
}

// EndNested back-patches the size of the nested message whose payload starts at mark (as
// returned by BeginNested) and ends at len(dst). The size is written as a redundant 4-byte
// varint (7 is 87 80 80 00), which every protobuf parser accepts; Compact rewrites it
// minimally when canonical bytes are needed. A payload of more than MaxNestedSize bytes,
// which 4 bytes cannot describe, is moved one byte further to make room for a 5-byte size.
// EndNested is inlined by the compiler.
func EndNested(dst []byte, mark int) []byte {
	n := uint64(len(dst) - mark)
	x := uint32(n&0x7f|n<<1&0x7f00|n<<2&0x7f0000|n<<3&0x7f000000) | 0x808080
	if n > nestedSizeLimit {
		// Rare enough to pay a move: the payload goes one byte up for a fifth size byte.
		// Sizes of 32 GiB or more would need more: protobuf caps messages at 2 GiB anyway.
		dst = append(dst, 0)
		copy(dst[mark+1:], dst[mark:])
		dst[mark] = byte(n >> 28)
		x |= 0x80000000
	}
	binary.LittleEndian.PutUint32(dst[mark-NestedSizeLen:mark], x)
	return dst
}

// nestedSizeLimit is MaxNestedSize; tests lower it to exercise the 5-byte size.
var nestedSizeLimit uint64 = MaxNestedSize

// FinishDelimited frames a message as protobuf's length-delimited streams do (a minimal varint
// length, then the message) without moving the payload. The caller reserved ReserveDelimited
// bytes at buf[start:] before appending the payload, so the payload is buf[start+
// ReserveDelimited:]. The length is written right in front of the payload, and the framed
// message, a sub-slice of buf, is returned:
//
//	start := len(buf)
//	buf = append(buf, make([]byte, pbwire.ReserveDelimited)...) // or buf[:start+5]
//	buf = pbwire.AppendVarintField(buf, tag, 42)                   // the payload
//	framed := pbwire.FinishDelimited(buf, start)
func FinishDelimited(buf []byte, start int) []byte {
	p := start + ReserveDelimited
	n := uint64(len(buf) - p)
	if n < 0x80 && p > 0 {
		buf[p-1] = byte(n)
		return buf[p-1:]
	}
	if n > 1<<35-1 {
		panic("pbwire: delimited message larger than 32 GiB")
	}
	s := SizeVarint(n)
	b := buf[p-s : p]
	for i := 0; i < s-1; i++ {
		b[i] = byte(n) | 0x80
		n >>= 7
	}
	b[s-1] = byte(n)
	return buf[p-s:]
}

// Writer appends one message to Buf and keeps the stack of open nested messages itself, for
// callers that do not want to carry the marks of BeginNested. Reuse it: Reset keeps both
// buffers, so a warm Writer allocates nothing.
type Writer struct {
	Buf   []byte
	marks []int
}

// Reset empties the buffer and the stack, keeping their memory.
func (w *Writer) Reset() {
	w.Buf = w.Buf[:0]
	w.marks = w.marks[:0]
}

// Depth is the number of nested messages begun and not yet ended.
func (w *Writer) Depth() int { return len(w.marks) }

// BeginNested starts a nested message field t.
func (w *Writer) BeginNested(t Tag) {
	var mark int
	w.Buf, mark = BeginNested(w.Buf, t)
	w.marks = append(w.marks, mark)
}

// EndNested ends the innermost open nested message. It panics when none is open: that is a
// bug in the caller's writing code, not bad input.
func (w *Writer) EndNested() {
	top := len(w.marks) - 1
	w.Buf = EndNested(w.Buf, w.marks[top])
	w.marks = w.marks[:top]
}
