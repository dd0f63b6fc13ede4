package pbwire

import (
	"errors"
	"fmt"
)

// ErrTooDeep means Compact met more nested messages inside each other than it accepts.
var ErrTooDeep = errors.New("nested too deep")

// maxCompactDepth bounds the recursion of Compact on hostile input, as protobuf does.
const maxCompactDepth = 10000

// Compact rewrites, in place, a message written with BeginNested/EndNested so that every
// nested size is a minimal varint, and returns the shortened message (a prefix of msg). The
// result is the canonical encoding: for fields written in field-number order it is
// byte-identical to a deterministic proto.Marshal.
//
// Nested messages are recognized by their redundant (non-minimal) size, which only
// BeginNested writes; bytes, strings and sizes of 2 MiB or more (whose 4-byte size is
// already minimal) are copied as they are. It is one pass over the field keys; each nested
// payload is moved down by the bytes its size lost (see BenchmarkWrite/Compact).
func Compact(msg []byte) ([]byte, error) {
	return compactTo(msg[:0], msg, 0)
}

// AppendCompact appends the compacted form of msg (see Compact) to dst, leaving msg as is. dst
// and msg must not overlap.
func AppendCompact(dst, msg []byte) ([]byte, error) {
	return compactTo(dst, msg, 0)
}

// sizeLenPrefix is the length of the varint length ending the header hdr (key then length):
// the key ends at the first byte below 0x80.
func sizeLenPrefix(hdr []byte) int {
	for i, c := range hdr {
		if c < 0x80 {
			return len(hdr) - i - 1
		}
	}
	return 0
}

// compactTo appends the compacted msg to dst. When compacting in place, dst and msg share
// memory and dst never gets ahead of the part of msg not yet read: each rewritten part is no
// longer than the original it replaces.
func compactTo(dst, msg []byte, depth int) ([]byte, error) {
	if depth > maxCompactDepth {
		return dst, ErrTooDeep
	}
	run := 0 // start of the fields not copied yet: runs of plain fields are copied at once
	r := Reader{buf: msg}
	for off := 0; r.Next(); off = r.off {
		f := &r.field
		if f.Type != Bytes {
			continue
		}
		hdr := r.off - off - len(f.Bytes)
		ln := sizeLenPrefix(msg[off : off+hdr])
		if ln <= SizeVarint(uint64(len(f.Bytes))) {
			continue
		}
		// A nested message: keep the room of its old size, compact the payload after it,
		// then write the new size and move the payload down next to it.
		dst = append(dst, msg[run:off+hdr]...)
		start := len(dst)
		var err error
		if dst, err = compactTo(dst, f.Bytes, depth+1); err != nil {
			return dst, err
		}
		size := len(dst) - start
		sz := SizeVarint(uint64(size))
		sizeAt := start - ln
		AppendVarint(dst[sizeAt:sizeAt], uint64(size))
		copy(dst[sizeAt+sz:], dst[start:])
		dst = dst[:sizeAt+sz+size]
		run = r.off
	}
	if r.err != nil {
		return dst, fmt.Errorf("pbwire: compact: %w", r.err)
	}
	return append(dst, msg[run:]...), nil
}
