package chhttp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// nativeFor rewrites the engine's Native output, which it writes as for protocol revision
// 0, for a client of protocol revision version, as a ClickHouse server writes it for the
// client_protocol_version parameter (clickhouse-go sends it and reads blocks accordingly):
// from revision 54454 on each block starts with its block info and each column's type is
// followed by a custom serialization flag (0). The column data does not change; it is
// skipped by type, with every length checked against the bytes left.
func nativeFor(out []byte, version int) ([]byte, error) {
	if version <= 0 {
		return out, nil
	}
	const (
		withBlockInfo = 1                                  // any revision above 0
		withCustom    = 54454                              // DBMS_MIN_REVISION_WITH_CUSTOM_SERIALIZATION
		blockInfo     = "\x01\x00\x02\xff\xff\xff\xff\x00" // is_overflows = 0, bucket_num = -1, end
	)
	dst := make([]byte, 0, len(out)+len(out)/8+64)
	r := nativeReader{b: out}
	for r.off < len(out) {
		if version >= withBlockInfo {
			dst = append(dst, blockInfo...)
		}
		start := r.off
		cols, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		rows, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		if cols > uint64(len(out)) || rows > uint64(len(out)) {
			return nil, r.errorf("block of %d columns and %d rows: more than the answer holds", cols, rows)
		}
		dst = append(dst, out[start:r.off]...)
		for range cols {
			start = r.off
			if _, err := r.str(); err != nil {
				return nil, err
			}
			typ, err := r.str()
			if err != nil {
				return nil, err
			}
			dst = append(dst, out[start:r.off]...)
			if version >= withCustom {
				dst = append(dst, 0)
			}
			start = r.off
			if rows > 0 {
				t, err := parseType(string(typ))
				if err != nil {
					return nil, r.errorf("column of type %s: %v", typ, err)
				}
				if err := r.skipPrefix(t); err != nil {
					return nil, err
				}
				if err := r.skipColumn(t, int(rows)); err != nil {
					return nil, err
				}
			}
			dst = append(dst, out[start:r.off]...)
		}
	}
	return dst, nil
}

// nativeReader reads Native data, every read checked against the bytes left.
type nativeReader struct {
	b   []byte
	off int
}

var errShort = errors.New("the engine's Native answer ends early")

func (r *nativeReader) errorf(format string, args ...any) error {
	return fmt.Errorf("the engine's Native answer at byte %d: %s", r.off, fmt.Sprintf(format, args...))
}

func (r *nativeReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		return 0, r.errorf("bad length")
	}
	r.off += n
	return v, nil
}

func (r *nativeReader) skip(n uint64) error {
	if n > uint64(len(r.b)-r.off) {
		return errShort
	}
	r.off += int(n)
	return nil
}

func (r *nativeReader) str() ([]byte, error) {
	n, err := r.uvarint()
	if err != nil {
		return nil, err
	}
	start := r.off
	if err := r.skip(n); err != nil {
		return nil, err
	}
	return r.b[start:r.off], nil
}

func (r *nativeReader) uint64() (uint64, error) {
	if len(r.b)-r.off < 8 {
		return 0, errShort
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v, nil
}

// skipPrefix skips the state prefix a column of type t starts with: the key serialization
// version of each LowCardinality in it, in the order of the type.
func (r *nativeReader) skipPrefix(t chType) error {
	if t.name == "LowCardinality" {
		_, err := r.uint64()
		return err
	}
	for _, a := range t.args {
		if err := r.skipPrefix(a); err != nil {
			return err
		}
	}
	return nil
}

// skipColumn skips rows values of type t, after its state prefix.
func (r *nativeReader) skipColumn(t chType, rows int) error {
	if rows == 0 {
		return nil
	}
	if w := t.width(); w > 0 {
		return r.skip(uint64(w) * uint64(rows))
	}
	switch t.name {
	case "String":
		for range rows {
			if _, err := r.str(); err != nil {
				return err
			}
		}
		return nil
	case "Nullable":
		if err := r.skip(uint64(rows)); err != nil { // the null map
			return err
		}
		return r.skipColumn(t.args[0], rows)
	case "Array", "Map":
		// Offsets (UInt64, cumulative), then the elements: a Map is an Array of Tuple(K, V).
		if err := r.skip(8 * uint64(rows-1)); err != nil {
			return err
		}
		n, err := r.uint64()
		if err != nil {
			return err
		}
		if n > uint64(len(r.b)-r.off) && !t.elementsMayBeEmpty() {
			return r.errorf("%d array elements: more than the answer holds", n)
		}
		if n > 1<<31 {
			return r.errorf("%d array elements", n)
		}
		if t.name == "Map" {
			return r.skipColumn(chType{name: "Tuple", args: t.args}, int(n))
		}
		return r.skipColumn(t.args[0], int(n))
	case "Tuple":
		for _, a := range t.args {
			if err := r.skipColumn(a, rows); err != nil {
				return err
			}
		}
		return nil
	case "LowCardinality":
		flags, err := r.uint64()
		if err != nil {
			return err
		}
		if flags&0xff > 3 || flags&(1<<8) != 0 {
			return r.errorf("LowCardinality with flags %#x (a global dictionary is not supported)", flags)
		}
		if flags&(1<<9) != 0 { // HasAdditionalKeysBit: the dictionary follows
			keys, err := r.uint64()
			if err != nil {
				return err
			}
			if keys > uint64(len(r.b)-r.off) {
				return r.errorf("%d dictionary keys: more than the answer holds", keys)
			}
			inner := t.args[0]
			if inner.name == "Nullable" { // the dictionary holds the values without their null map
				inner = inner.args[0]
			}
			if err := r.skipColumn(inner, int(keys)); err != nil {
				return err
			}
		}
		n, err := r.uint64()
		if err != nil {
			return err
		}
		if n != uint64(rows) {
			return r.errorf("LowCardinality of %d rows in a block of %d", n, rows)
		}
		return r.skip(uint64(1<<(flags&0xff)) * n)
	}
	return fmt.Errorf("type %s cannot be sent in Native here", t.name)
}

// chType is a parsed ClickHouse type: a name and its arguments that are types (Array,
// Nullable, LowCardinality, Map, Tuple) or the widths of the others.
type chType struct {
	name string
	args []chType
	size int // FixedString(N), Decimal(P, S) width
}

// widths are the fixed-width types' sizes in bytes.
var widths = map[string]int{"UInt8": 1, "Int8": 1, "Bool": 1, "Enum8": 1, "UInt16": 2, "Int16": 2, "Enum16": 2,
	"Date": 2, "UInt32": 4, "Int32": 4, "Float32": 4, "Date32": 4, "DateTime": 4, "IPv4": 4, "Decimal32": 4,
	"UInt64": 8, "Int64": 8, "Float64": 8, "DateTime64": 8, "Decimal64": 8, "Time": 4, "Time64": 8,
	"UInt128": 16, "Int128": 16, "UUID": 16, "IPv6": 16, "Decimal128": 16, "UInt256": 32, "Int256": 32,
	"Decimal256": 32, "Nothing": 1, "BFloat16": 2}

// width is the size of a fixed-width type, 0 for the others.
func (t chType) width() int {
	if t.name == "FixedString" || t.name == "Decimal" {
		return t.size
	}
	return widths[t.name]
}

// elementsMayBeEmpty tells whether elements of the array may take no bytes (then their
// count is not bounded by the bytes left): Tuple() only.
func (t chType) elementsMayBeEmpty() bool {
	return len(t.args) > 0 && t.args[0].name == "Tuple" && len(t.args[0].args) == 0
}

// parseType parses a type name as the engine writes it in a Native header.
func parseType(s string) (chType, error) {
	s = strings.TrimSpace(s)
	name, rest, ok := strings.Cut(s, "(")
	t := chType{name: name}
	if !ok {
		if t.width() == 0 && name != "String" {
			return t, fmt.Errorf("type %s is not supported in Native here", name)
		}
		return t, nil
	}
	if !strings.HasSuffix(rest, ")") {
		return t, fmt.Errorf("type %s: unbalanced parentheses", s)
	}
	args := splitArgs(rest[:len(rest)-1])
	switch name {
	case "FixedString":
		n, err := strconv.Atoi(strings.TrimSpace(args[0]))
		if err != nil || n <= 0 || n > 1<<20 {
			return t, fmt.Errorf("type %s: bad size", s)
		}
		t.size = n
	case "Decimal":
		p, err := strconv.Atoi(strings.TrimSpace(args[0]))
		switch {
		case err != nil || p < 1 || p > 76:
			return t, fmt.Errorf("type %s: bad precision", s)
		case p <= 9:
			t.size = 4
		case p <= 18:
			t.size = 8
		case p <= 38:
			t.size = 16
		default:
			t.size = 32
		}
	case "Array", "Nullable", "LowCardinality", "Map", "Tuple":
		for _, a := range args {
			if name == "Tuple" {
				a = tupleElement(a)
			}
			at, err := parseType(a)
			if err != nil {
				return t, err
			}
			t.args = append(t.args, at)
		}
		if (name == "Map" && len(t.args) != 2) || (name != "Map" && name != "Tuple" && len(t.args) != 1) {
			return t, fmt.Errorf("type %s: wrong number of arguments", s)
		}
	default: // DateTime('UTC'), DateTime64(3, 'UTC'), Enum8('a' = 1), Decimal32(2)...
		if t.width() == 0 {
			return t, fmt.Errorf("type %s is not supported in Native here", name)
		}
	}
	return t, nil
}

// tupleElement drops the name of a named tuple element ("a UInt8" → "UInt8").
func tupleElement(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, ' '); i > 0 && !strings.ContainsAny(s[:i], "(,'") {
		return s[i+1:]
	}
	return s
}

// splitArgs splits a type's arguments at the commas outside parentheses and quotes.
func splitArgs(s string) []string {
	var args []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '\'':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			args = append(args, s[start:i])
			start = i + 1
		}
	}
	return append(args, s[start:])
}
