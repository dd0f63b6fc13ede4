package pbwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Errors the reader returns, wrapped with the offset where they were found; test them with
// errors.Is.
var (
	// ErrTruncated means the input ends inside a key, a varint or a fixed value.
	ErrTruncated = errors.New("truncated input")
	// ErrVarintOverflow means a varint has more than 10 bytes or does not fit 64 bits.
	ErrVarintOverflow = errors.New("varint overflows 64 bits")
	// ErrFieldNumber means a key carries field number 0 or one above MaxFieldNumber.
	ErrFieldNumber = errors.New("invalid field number")
	// ErrWireType means a key carries wire type 3 or 4 (groups, unsupported) or 6 or 7.
	ErrWireType = errors.New("invalid wire type")
	// ErrLength means a length-delimited value runs past the end of its message.
	ErrLength = errors.New("length past the end")
	// ErrTooLarge means a delimited message is larger than the reader's limit.
	ErrTooLarge = errors.New("message too large")
)

// Field is one field read from a message. Only the value of its wire type is set: Varint for
// Varint, Fixed for Fixed32 and Fixed64 (a fixed32 in the low 32 bits), Bytes for Bytes. Bytes
// is a sub-slice of the message, not a copy.
type Field struct {
	Num    int32
	Type   WireType
	Varint uint64
	Fixed  uint64
	Bytes  []byte
}

// Int32 is the value of an int32 (or enum) field: the low 32 bits of the varint.
func (f *Field) Int32() int32 { return int32(f.Varint) }

// Sint32 is the value of a zigzag-encoded sint32 field.
func (f *Field) Sint32() int32 { return int32(uint32(f.Varint>>1) ^ -uint32(f.Varint&1)) }

// Sint64 is the value of a zigzag-encoded sint64 field.
func (f *Field) Sint64() int64 { return int64(f.Varint>>1) ^ -int64(f.Varint&1) }

// Bool is the value of a bool field.
func (f *Field) Bool() bool { return f.Varint != 0 }

// Float is the value of a float field.
func (f *Field) Float() float32 { return math.Float32frombits(uint32(f.Fixed)) }

// Double is the value of a double field.
func (f *Field) Double() float64 { return math.Float64frombits(f.Fixed) }

// Packed iterates over the elements of a packed repeated field whose elements have wire type
// elem (Varint, Fixed32 or Fixed64).
func (f *Field) Packed(elem WireType) Packed {
	return Packed{buf: f.Bytes, elem: elem}
}

// Reader iterates over the fields of one message without copying it:
//
//	r := pbwire.NewReader(msg)
//	for r.Next() {
//		f := r.Field()
//		switch f.Num { ... }
//	}
//	if err := r.Err(); err != nil { ... }
//
// A Reader is a small value; declare it on the stack and reuse it with Reset.
type Reader struct {
	buf   []byte
	off   int
	err   error // cause, wrapped with its offset
	cause error
	field Field
}

// NewReader returns a reader over the fields of msg.
func NewReader(msg []byte) Reader {
	return Reader{buf: msg}
}

// Reset makes r read msg from its start.
func (r *Reader) Reset(msg []byte) {
	*r = Reader{buf: msg}
}

// Next reads the next field. It returns false at the end of the message or on the first
// malformed field; Err tells which.
func (r *Reader) Next() bool {
	if r.off >= len(r.buf) || r.err != nil {
		return false
	}
	// The decoding is written out here rather than in a helper so that a field costs one
	// call.
	b := r.buf[r.off:]
	f := &r.field
	var key uint64
	var n int
	if b[0] < 0x80 {
		key, n = uint64(b[0]), 1
	} else {
		var err error
		if key, n, err = consumeVarint(b); err != nil {
			return r.fail(err)
		}
	}
	num := key >> 3
	if num == 0 || num > MaxFieldNumber {
		return r.fail(ErrFieldNumber)
	}
	f.Num = int32(num)
	f.Type = WireType(key & 7)
	b = b[n:]
	switch f.Type {
	case Varint:
		if len(b) > 0 && b[0] < 0x80 {
			f.Varint = uint64(b[0])
			n++
			break
		}
		v, m, err := consumeVarint(b)
		if err != nil {
			return r.fail(err)
		}
		f.Varint = v
		n += m
	case Fixed64:
		if len(b) < 8 {
			return r.fail(ErrTruncated)
		}
		f.Fixed = binary.LittleEndian.Uint64(b)
		n += 8
	case Fixed32:
		if len(b) < 4 {
			return r.fail(ErrTruncated)
		}
		f.Fixed = uint64(binary.LittleEndian.Uint32(b))
		n += 4
	case Bytes:
		var l uint64
		var m int
		if len(b) > 0 && b[0] < 0x80 {
			l, m = uint64(b[0]), 1
		} else {
			var err error
			if l, m, err = consumeVarint(b); err != nil {
				return r.fail(err)
			}
		}
		if l > uint64(len(b)-m) {
			return r.fail(ErrLength)
		}
		f.Bytes = b[m : m+int(l) : m+int(l)]
		n += m + int(l)
	default:
		return r.fail(ErrWireType)
	}
	r.off += n
	return true
}

// fail records err (one of the Err* values) at the current offset and stops the reader.
func (r *Reader) fail(err error) bool {
	r.cause = err
	r.err = fmt.Errorf("pbwire: offset %d: %w", r.off, err)
	r.off = len(r.buf)
	return false
}

// Field is the field Next just read. Its Bytes stay valid as long as the message does.
func (r *Reader) Field() Field { return r.field }

// Current points to the field Next just read, inside the reader: it is overwritten by the
// next call to Next. Reading through it avoids copying the Field, which matters in hot loops:
// the copy's wide loads stall on the narrower stores Next has just made.
func (r *Reader) Current() *Field { return &r.field }

// Err is the error that stopped Next, or nil at the end of a well-formed message. It wraps
// one of the Err* values and tells the offset of the bad field.
func (r *Reader) Err() error { return r.err }

// Offset is the position, in the message, of the byte after the last field read.
func (r *Reader) Offset() int { return r.off }

// ReadField reads the field at the start of b into f and returns its encoded length. The
// error is one of the Err* values, unwrapped.
func ReadField(b []byte, f *Field) (int, error) {
	return readField(b, f)
}

func readField(b []byte, f *Field) (int, error) {
	r := Reader{buf: b}
	if !r.Next() {
		if r.cause == nil {
			return 0, ErrTruncated // empty input
		}
		return 0, r.cause
	}
	*f = r.field
	return r.off, nil
}

// ConsumeVarint decodes the varint at the start of b and returns it with its length. It
// accepts non-minimal encodings (the redundant sizes of nested messages) of up to 10 bytes.
func ConsumeVarint(b []byte) (v uint64, n int, err error) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1, nil
	}
	return consumeVarint(b)
}

func consumeVarint(b []byte) (uint64, int, error) {
	if len(b) >= MaxVarintLen {
		// Room for the longest varint: no length check per byte.
		b := b[:MaxVarintLen]
		v := uint64(b[0] & 0x7f)
		for i := 1; i < MaxVarintLen-1; i++ {
			if b[i-1] < 0x80 {
				return v, i, nil
			}
			v |= uint64(b[i]&0x7f) << (7 * i)
		}
		if b[MaxVarintLen-2] < 0x80 {
			return v, MaxVarintLen - 1, nil
		}
		if c := b[MaxVarintLen-1]; c <= 1 {
			return v | uint64(c)<<63, MaxVarintLen, nil
		}
		return 0, 0, ErrVarintOverflow
	}
	var v uint64
	for i := 0; i < len(b); i++ {
		c := b[i]
		if i == MaxVarintLen-1 && c > 1 {
			return 0, 0, ErrVarintOverflow
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, ErrTruncated
}

// Packed iterates over the elements of a packed repeated field; get one with Field.Packed or
// NewPacked.
//
//	p := f.Packed(pbwire.Varint)
//	for p.Next() { use(p.Value()) }
//	if err := p.Err(); err != nil { ... }
type Packed struct {
	buf  []byte
	elem WireType
	v    uint64
	err  error
}

// NewPacked iterates over the elements of wire type elem (Varint, Fixed32 or Fixed64) packed
// in b, the value of a packed repeated field.
func NewPacked(b []byte, elem WireType) Packed {
	return Packed{buf: b, elem: elem}
}

// Next decodes the next element; it returns false at the end or on a malformed element.
func (p *Packed) Next() bool {
	if len(p.buf) == 0 || p.err != nil {
		return false
	}
	switch p.elem {
	case Varint:
		if p.buf[0] < 0x80 {
			p.v = uint64(p.buf[0])
			p.buf = p.buf[1:]
			return true
		}
		v, n, err := consumeVarint(p.buf)
		if err != nil {
			p.err = fmt.Errorf("pbwire: packed varint: %w", err)
			p.buf = nil
			return false
		}
		p.v = v
		p.buf = p.buf[n:]
		return true
	case Fixed32:
		b := p.buf
		if len(b) < 4 {
			p.err = fmt.Errorf("pbwire: packed fixed32: %w", ErrTruncated)
			p.buf = nil
			return false
		}
		p.v = uint64(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
		p.buf = b[4:]
		return true
	case Fixed64:
		b := p.buf
		if len(b) < 8 {
			p.err = fmt.Errorf("pbwire: packed fixed64: %w", ErrTruncated)
			p.buf = nil
			return false
		}
		p.v = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		p.buf = b[8:]
		return true
	}
	p.err = fmt.Errorf("pbwire: packed elements of wire type %s: %w", p.elem, ErrWireType)
	p.buf = nil
	return false
}

// Value is the element Next just decoded (a fixed32 in the low 32 bits).
func (p *Packed) Value() uint64 { return p.v }

// Err is the error that stopped Next, or nil.
func (p *Packed) Err() error { return p.err }

// SplitDelimited cuts the first length-delimited message (a varint length, then the message)
// from b, as written by FinishDelimited.
func SplitDelimited(b []byte) (msg, rest []byte, err error) {
	l, n, err := ConsumeVarint(b)
	if err != nil {
		return nil, b, fmt.Errorf("pbwire: delimited length: %w", err)
	}
	if l > uint64(len(b)-n) {
		return nil, b, fmt.Errorf("pbwire: delimited message of %d bytes: %w", l, ErrLength)
	}
	end := n + int(l)
	return b[n:end:end], b[end:], nil
}

// DelimitedReader reads a stream of length-delimited messages (each a varint length then the
// message, as protobuf's writeDelimitedTo and ClickHouse's Protobuf format use) from an
// io.Reader, reusing one buffer.
type DelimitedReader struct {
	r       *bufio.Reader
	buf     []byte
	maxSize int
}

// NewDelimitedReader reads messages from r; messages longer than maxSize bytes are refused
// with ErrTooLarge (and the stream cannot be read further).
func NewDelimitedReader(r io.Reader, maxSize int) *DelimitedReader {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReader(r)
	}
	return &DelimitedReader{r: br, maxSize: maxSize}
}

// Next returns the next message, valid until the following call. At the clean end of the
// stream it returns io.EOF; a stream that ends inside a message gives io.ErrUnexpectedEOF.
func (d *DelimitedReader) Next() ([]byte, error) {
	var l uint64
	for i := 0; ; i++ {
		c, err := d.r.ReadByte()
		if err != nil {
			if err == io.EOF && i > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if i == MaxVarintLen-1 && c > 1 {
			return nil, fmt.Errorf("pbwire: delimited length: %w", ErrVarintOverflow)
		}
		l |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			break
		}
	}
	if l > uint64(d.maxSize) {
		return nil, fmt.Errorf("pbwire: delimited message of %d bytes, limit %d: %w", l, d.maxSize, ErrTooLarge)
	}
	if uint64(cap(d.buf)) < l {
		d.buf = make([]byte, l)
	}
	d.buf = d.buf[:l]
	if _, err := io.ReadFull(d.r, d.buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return d.buf, nil
}
