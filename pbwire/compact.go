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
// already minimal) are copied as they are. Compacting costs a pass over the field keys of each
// level plus one memmove of the payload; see BenchmarkCompact.
func Compact(msg []byte) ([]byte, error) {
	return compactTo(msg[:0], msg, 0)
}

// AppendCompact appends the compacted form of msg (see Compact) to dst, leaving msg as is. dst
// and msg must not overlap.
func AppendCompact(dst, msg []byte) ([]byte, error) {
	return compactTo(dst, msg, 0)
}

// compactSize is the length msg will have once compacted.
func compactSize(msg []byte, depth int) (int, error) {
	if depth > maxCompactDepth {
		return 0, ErrTooDeep
	}
	size := 0
	for off := 0; off < len(msg); {
		var f Field
		n, err := readField(msg[off:], &f)
		if err != nil {
			return 0, fmt.Errorf("pbwire: compact: offset %d: %w", off, err)
		}
		if f.Type == Bytes {
			hdr := n - len(f.Bytes)
			// A non-minimal size is the mark of a nested message written by BeginNested.
			if ln := sizeLenPrefix(msg[off : off+hdr]); ln > SizeVarint(uint64(len(f.Bytes))) {
				inner, err := compactSize(f.Bytes, depth+1)
				if err != nil {
					return 0, err
				}
				size += hdr - ln + SizeVarint(uint64(inner)) + inner
				off += n
				continue
			}
		}
		size += n
		off += n
	}
	return size, nil
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

func compactTo(dst, msg []byte, depth int) ([]byte, error) {
	if depth > maxCompactDepth {
		return dst, ErrTooDeep
	}
	for off := 0; off < len(msg); {
		var f Field
		n, err := readField(msg[off:], &f)
		if err != nil {
			return dst, fmt.Errorf("pbwire: compact: offset %d: %w", off, err)
		}
		if f.Type == Bytes {
			hdr := n - len(f.Bytes)
			if ln := sizeLenPrefix(msg[off : off+hdr]); ln > SizeVarint(uint64(len(f.Bytes))) {
				inner, err := compactSize(f.Bytes, depth+1)
				if err != nil {
					return dst, err
				}
				// In place, dst never gets ahead of msg: each rewritten part is no longer
				// than the original it replaces.
				dst = append(dst, msg[off:off+hdr-ln]...)
				dst = AppendVarint(dst, uint64(inner))
				if dst, err = compactTo(dst, f.Bytes, depth+1); err != nil {
					return dst, err
				}
				off += n
				continue
			}
		}
		dst = append(dst, msg[off:off+n]...)
		off += n
	}
	return dst, nil
}
