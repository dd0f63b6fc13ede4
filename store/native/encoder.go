package native

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"flowzero/pbwire"
	"flowzero/schema"
)

// Encoder turns the sink's length-delimited FlowMessages into blocks of ClickHouse's Native
// format, the engine's own columnar layout, because the engine reads it several times more
// cheaply than its Protobuf input, which fills every absent field of every message one by one
// (docs/design/store.md). The conversion is a single pass over the messages: each field
// lands in its column at the row's offset, absent fields stay at the zero value the column
// was cleared to. A field costs one table lookup on its tag (appendFast; pbwire's reader
// takes over for anything unusual), and a block leaves out the columns that are empty in all
// its rows, as most metadata columns are in an installation without that metadata, for the
// engine to fill (flush). The Kafka path keeps Protobuf.
//
// Native block (format Native, no protocol revision): number of columns and of rows
// (varints), then for each column its name and type (varint length + bytes) and its values:
//   - UInt8/16/32/64, DateTime, Enum8: little-endian fixed-width values;
//   - IPv6, FixedString(N): N raw bytes per row;
//   - LowCardinality(String): key serialization version (UInt64 1), index type (UInt64:
//     HasAdditionalKeys 1<<9 | NeedUpdateDictionary 1<<10 | width code 0-3), number of keys
//     (UInt64) and the keys as a String column ("" first: the default), number of rows
//     (UInt64), then one index per row of the width code's size;
//   - Array(T): one UInt64 cumulative offset per row, then all elements.

// errType is returned by NewEncoder for a column type it cannot write.
var errType = errors.New("no Native encoding for the column type")

// colOp is how a column is built from its fields and written: the column type, with
// the width of integers.
type colOp uint8

const (
	opUint8 colOp = iota
	opUint16
	opUint32
	opUint64
	opIPv6
	opLowCard
	opEnum8
	opFixedString
	opArrayUint
	opArrayFixed
)

// column is one column of the block being built.
type column struct {
	// The fields appendFast reads for every field come first, within 48 bytes: away from
	// the rest (enum alone is 256 bytes), they share at most two cache lines.
	op    colOp
	width int    // bytes per value (per index for LowCardinality: 4 while building)
	max   uint64 // largest value of an integer column
	// data holds width bytes per row for the fixed-width kinds (cleared rows read as the
	// default), the elements of an array column.
	data []byte

	name, typ string

	// Arrays: offsets[i] is the number of elements in rows 0..i. Rows are closed lazily: the
	// row being filled is len(offsets), untouched rows are closed when the column is next
	// touched or when the block is written.
	offsets []uint64

	// LowCardinality: the block's keys in Native String serialization ("" first) and their
	// count; last caches the previous lookup (flows often share a value). Values are
	// interned across blocks (intern: value → number), so that a value seen before costs no
	// allocation: local[number] is its index in the block's keys when stamp[number] holds
	// the block's generation gen.
	keys    []byte
	nkeys   uint32
	last    []byte
	lastIdx uint32
	intern  map[string]uint32
	stamp   []uint32
	local   []uint32
	gen     uint32
	// names[number] is the interned value (the map's key, not a copy); globals[i] is the
	// number+1 of the block's key i (0 for ""). The interned numbers stay the same for a
	// whole batch (Reset is the only place that forgets them), which is what the
	// pre-aggregation groups LowCardinality values by (Aggregator).
	names   []string
	globals []uint32

	// Undo log of the message being converted. Arrays: the row that last touched the column
	// and the elements before it. LowCardinality: the row that last added keys, the block's
	// keys before it and the interned values it gave a block index.
	touched  int // row that last touched the column (-1: none)
	undoLen  int // len(data) before that row (LowCardinality: len(keys))
	undoKeys uint32
	added    []uint32

	// omit: every row of the block being written holds the type's default, so the column
	// is left out of it (see flush) and its data, all zero, needs no clearing.
	omit bool

	enum [256]bool // Enum8: the values the type has
}

// Encoder converts a schema's length-delimited FlowMessages into blocks of the Native
// format for `INSERT INTO flows (columns) FORMAT Native`. It is not safe for concurrent use;
// one encoder is reused batch after batch without allocating per flow (a LowCardinality
// value is allocated when first seen; up to internMax per column stay interned, see
// forgetInterned).
type Encoder struct {
	cols    []column
	byField []int16 // protobuf field number → index in cols, -1 for none
	// byTag: a field's tag (number << 3 | wire type) → its column+1, for the tags of the
	// wire type the column takes (see appendFast); 0 for the others.
	byTag   []int16
	fixed   []int // indexes of fixed-width columns (cleared on reset)
	arrays  []int // indexes of array columns
	rows    int   // rows of the block being built
	capRows int
	// blockRows is the most rows of one block: without a sorter, a batch becomes several
	// blocks, written one after the other into out (the engine squashes them into one
	// part), so that the columns being filled stay small enough for the CPU caches
	// whatever the batch size. With one, the batch is one block: its rows are sorted
	// across the whole batch.
	blockRows int
	done      int    // rows in the blocks already in out
	columns   string // "(a, b, ...)"
	out       []byte
	// agg, when set, groups each block's rows before the block is written (pre-aggregation
	// of the finest resolution, see Aggregator).
	agg *Aggregator
	// sorter, when the sorting key has codes, orders each block's rows by the flows table's
	// sorting key as flush writes it (the engine then need not sort): blocks are not cut
	// at blockRows then, the batch makes one block.
	sorter *batchSorter
}

// internMax bounds the values a LowCardinality column keeps interned from one block to
// the next (see forgetInterned).
const internMax = 1 << 16

// defaultBlockRows is Encoder.blockRows without a sorter: 16 Ki rows of the ~55
// default columns fill about 4 MiB.
const defaultBlockRows = 1 << 14

// NewEncoder returns an encoder for the wire columns of s. It fails with a column type
// it cannot write (the caller then inserts Protobuf).
func NewEncoder(s *schema.Schema) (*Encoder, error) {
	e := &Encoder{blockRows: defaultBlockRows}
	var names []string
	for _, c := range s.WireColumns() {
		nc := column{name: c.Name, typ: c.ClickHouseType, touched: -1}
		if err := nc.setKind(c); err != nil {
			return nil, fmt.Errorf("store: column %s: %w", c.Name, err)
		}
		for c.Field >= len(e.byField) {
			e.byField = append(e.byField, -1)
		}
		e.byField[c.Field] = int16(len(e.cols))
		for _, w := range nc.wireTypes() {
			if tag := c.Field<<3 | int(w); tag < maxTag {
				for tag >= len(e.byTag) {
					e.byTag = append(e.byTag, 0)
				}
				e.byTag[tag] = int16(len(e.cols) + 1)
			}
		}
		switch nc.op {
		case opArrayUint, opArrayFixed:
			e.arrays = append(e.arrays, len(e.cols))
		default:
			e.fixed = append(e.fixed, len(e.cols))
		}
		e.cols = append(e.cols, nc)
		names = append(names, c.Name)
	}
	e.columns = "(" + strings.Join(names, ", ") + ")"
	if e.sorter = newBatchSorter(s, e); e.sorter != nil {
		e.blockRows = math.MaxInt
	}
	e.Reset()
	return e, nil
}

func (nc *column) setKind(c *schema.Column) error {
	t := c.ClickHouseType
	varint := c.Kind == schema.KindUint64 || c.Kind == schema.KindUint32 || c.Kind == schema.KindMAC
	switch {
	case varint && (t == "UInt8" || t == "UInt16" || t == "UInt32" || t == "UInt64" || t == "DateTime"):
		switch t {
		case "UInt8":
			nc.op, nc.width = opUint8, 1
		case "UInt16":
			nc.op, nc.width = opUint16, 2
		case "UInt32", "DateTime":
			nc.op, nc.width = opUint32, 4
		default:
			nc.op, nc.width = opUint64, 8
		}
		nc.max = 1<<(8*nc.width) - 1
		if nc.width == 8 {
			nc.max = 1<<64 - 1
		}
	case c.Kind == schema.KindEnum && strings.HasPrefix(t, "Enum8("):
		nc.op, nc.width = opEnum8, 1
		for _, v := range c.Enum {
			if v.Value < 0 || v.Value > 127 {
				return errType
			}
			nc.enum[v.Value] = true
		}
	case c.Kind == schema.KindIP && t == "IPv6":
		nc.op, nc.width = opIPv6, 16
	case (c.Kind == schema.KindString || c.Kind == schema.KindBytes) && strings.HasPrefix(t, "FixedString("):
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(t, "FixedString("), ")"))
		if err != nil || n <= 0 {
			return errType
		}
		nc.op, nc.width = opFixedString, n
	case (c.Kind == schema.KindString || c.Kind == schema.KindBytes) && t == "LowCardinality(String)":
		nc.op, nc.width = opLowCard, 4
		nc.intern = make(map[string]uint32)
	case (c.Kind == schema.KindArrayUint32 && t == "Array(UInt32)") || (c.Kind == schema.KindArrayUint64 && t == "Array(UInt64)"):
		nc.op, nc.width = opArrayUint, 4
		if c.Kind == schema.KindArrayUint64 {
			nc.width = 8
		}
	case c.Kind == schema.KindArrayIP && t == "Array(IPv6)":
		nc.op, nc.width = opArrayFixed, 16
	case c.Kind == schema.KindArrayLargeCommunity && t == "Array(FixedString(12))":
		nc.op, nc.width = opArrayFixed, 12
	default:
		return fmt.Errorf("%s as %s: %w", t, kindName(c.Kind), errType)
	}
	return nil
}

// maxTag bounds the tags appendFast reads: those of one or two bytes.
const maxTag = 1 << 14

// wireTypes returns the wire types a column's field takes.
func (nc *column) wireTypes() []pbwire.WireType {
	switch nc.op {
	case opUint8, opUint16, opUint32, opUint64, opEnum8:
		return []pbwire.WireType{pbwire.Varint}
	case opArrayUint:
		return []pbwire.WireType{pbwire.Varint, pbwire.Bytes} // unpacked or packed
	default:
		return []pbwire.WireType{pbwire.Bytes}
	}
}

func kindName(k schema.Kind) string { return "kind " + strconv.Itoa(int(k)) }

// Columns returns the INSERT column list matching the blocks: "(a, b, ...)".
func (e *Encoder) Columns() string { return e.columns }

// Rows returns the number of flows appended since the last Reset.
func (e *Encoder) Rows() int { return e.done + e.rows }

// Reset empties the encoder, keeping its memory.
func (e *Encoder) Reset() {
	e.forgetInterned()
	e.resetBlocks()
	if e.agg != nil {
		e.agg.reset()
	}
}

// ResetBlocks empties the encoder for the next batch like Reset, but keeps the aggregator's
// groups, to sum several batches into them, and so the interned LowCardinality values the
// groups are keyed by. It returns false, having done nothing, when those values have grown
// past internMax and must be forgotten: the groups must then be used (Block) and
// Reset called.
func (e *Encoder) ResetBlocks() bool {
	for _, i := range e.fixed {
		if e.cols[i].internFull() {
			return false
		}
	}
	e.resetBlocks()
	return true
}

// resetBlocks empties the blocks built so far.
func (e *Encoder) resetBlocks() {
	e.resetColumns()
	e.out = e.out[:0]
	e.done = 0
}

// internFull tells if c is a LowCardinality column holding more than internMax
// interned values.
func (c *column) internFull() bool {
	return c.op == opLowCard && len(c.stamp) > internMax
}

// forgetInterned starts the interned values of the LowCardinality columns holding more than
// internMax again, at a block boundary (a block's keys must stay distinct). With an
// aggregator only when its groups are reset: the groups are keyed by the numbers, so the
// values stay interned as long as the groups are kept (Reset, not ResetBlocks).
func (e *Encoder) forgetInterned() {
	for _, i := range e.fixed {
		if c := &e.cols[i]; c.internFull() {
			clear(c.intern)
			clear(c.stamp)
			c.stamp, c.local, c.names = c.stamp[:0], c.local[:0], c.names[:0]
			c.gen = 0 // resetColumns makes it 1
		}
	}
}

// resetColumns empties the block being built.
func (e *Encoder) resetColumns() {
	for _, i := range e.fixed {
		c := &e.cols[i]
		if !c.omit {
			clear(c.data[:e.rows*c.width])
		}
		c.omit = false
		if c.op == opLowCard {
			c.gen++
			if c.gen == 0 {
				// The generations wrapped: no interned value may look as if in this block.
				clear(c.stamp)
				c.gen = 1
			}
			c.keys = append(c.keys[:0], 0)
			c.nkeys = 1
			c.globals = append(c.globals[:0], 0)
			c.last = c.last[:0]
			c.lastIdx = 0
			c.touched = -1
		}
	}
	for _, i := range e.arrays {
		c := &e.cols[i]
		c.data = c.data[:0]
		c.offsets = c.offsets[:0]
		c.touched = -1
		c.omit = false
	}
	e.rows = 0
}

// grow doubles the rows the fixed-width columns hold; new rows are zero.
func (e *Encoder) grow() {
	n := max(2*e.capRows, 1024)
	for _, i := range e.fixed {
		c := &e.cols[i]
		d := make([]byte, n*c.width)
		copy(d, c.data[:e.rows*c.width])
		c.data = d
	}
	e.capRows = n
}

var (
	errWireType = errors.New("wire type does not match the column")
	errRange    = errors.New("value out of the column's range")
	errSize     = errors.New("value of the wrong size")
)

// AppendDelimited converts a batch of length-delimited messages (the sink's batch) and
// returns how many were appended and the first error of those that were not: a malformed
// message is left out, the others are kept. A length prefix that frames no
// message ends the batch: the rest cannot be cut into messages.
func (e *Encoder) AppendDelimited(b []byte) (ok int, firstErr error) {
	for len(b) > 0 {
		msg, rest, err := pbwire.SplitDelimited(b)
		if err != nil {
			// The rest of the batch cannot be cut into messages.
			if firstErr == nil {
				firstErr = err
			}
			break
		}
		b = rest
		if err := e.Append(msg); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		ok++
	}
	return ok, firstErr
}

// Append converts one FlowMessage (without its length prefix) into a row. Unknown fields are
// skipped, as the Protobuf input does with input_format_skip_unknown_fields. A malformed
// message, or a value that does not fit its column, leaves the block as it was and returns
// an error.
func (e *Encoder) Append(msg []byte) error {
	if e.rows == e.blockRows {
		e.flush()
	}
	if e.rows == e.capRows {
		e.grow()
	}
	row := e.rows
	if e.appendFast(msg, row) {
		e.rows++
		return nil
	}
	// Something appendFast does not handle: what it wrote goes, the message is converted
	// again field by field, unknown fields skipped and errors reported.
	e.undo(row)
	r := pbwire.NewReader(msg)
	for r.Next() {
		f := r.Current()
		if int(f.Num) >= len(e.byField) {
			continue
		}
		i := e.byField[f.Num]
		if i < 0 {
			continue
		}
		if err := e.cols[i].set(row, f); err != nil {
			e.undo(row)
			return fmt.Errorf("store: field %d (%s): %w", f.Num, e.cols[i].name, err)
		}
	}
	if err := r.Err(); err != nil {
		e.undo(row)
		return fmt.Errorf("store: %w", err)
	}
	e.rows++
	return nil
}

// appendFast converts a message whose fields all belong to columns, with the wire type
// each column takes, into row, and reports whether it did. The per-field cost is most of
// the conversion's: here one table lookup on the tag gives the column and proves the wire
// type, and the common values (integers, addresses) are stored inline. It returns false,
// leaving row partly written, at the first field it does not take as is (an unknown field
// or wire type, a malformed or out-of-range value): Append then undoes the row and converts
// the message with pbwire's reader and set, which skip or refuse exactly as before.
func (e *Encoder) appendFast(b []byte, row int) bool {
	byTag := e.byTag
	for len(b) > 0 {
		tag, n := int(b[0]), 1
		if tag >= 0x80 {
			if len(b) < 2 || b[1] >= 0x80 {
				return false
			}
			tag, n = tag&0x7f|int(b[1])<<7, 2
		}
		if tag >= len(byTag) || byTag[tag] == 0 {
			return false
		}
		c := &e.cols[byTag[tag]-1]
		b = b[n:]
		if len(b) == 0 {
			return false
		}
		// A varint: the value; a length-delimited field: its length.
		v, m := uint64(b[0]), 1
		if v >= 0x80 {
			var err error
			if v, m, err = pbwire.ConsumeVarint(b); err != nil {
				return false
			}
		}
		b = b[m:]
		if tag&7 == int(pbwire.Varint) {
			switch c.op {
			case opUint32:
				if v > c.max {
					return false
				}
				binary.LittleEndian.PutUint32(c.data[4*row:], uint32(v))
			case opUint64:
				binary.LittleEndian.PutUint64(c.data[8*row:], v)
			case opUint16:
				if v > c.max {
					return false
				}
				binary.LittleEndian.PutUint16(c.data[2*row:], uint16(v))
			case opUint8:
				if v > c.max {
					return false
				}
				c.data[row] = byte(v)
			default:
				f := pbwire.Field{Num: int32(tag >> 3), Type: pbwire.Varint, Varint: v}
				if c.set(row, &f) != nil {
					return false
				}
			}
			continue
		}
		if v > uint64(len(b)) {
			return false
		}
		val := b[:v:v]
		b = b[v:]
		if c.op == opIPv6 && v == 16 {
			*(*[16]byte)(c.data[16*row:]) = [16]byte(val)
			continue
		}
		f := pbwire.Field{Num: int32(tag >> 3), Type: pbwire.Bytes, Bytes: val}
		if c.set(row, &f) != nil {
			return false
		}
	}
	return true
}

// undo clears what a refused message wrote into row.
func (e *Encoder) undo(row int) {
	for _, i := range e.fixed {
		c := &e.cols[i]
		clear(c.data[row*c.width : (row+1)*c.width])
		if c.op == opLowCard && c.touched == row {
			// Keys the refused message added go too: the block keeps only used keys.
			for _, g := range c.added {
				c.stamp[g] = 0 // gen is never 0
			}
			c.keys, c.nkeys = c.keys[:c.undoLen], c.undoKeys
			c.globals = c.globals[:c.undoKeys]
			c.last = c.last[:0]
			c.touched = -1
		}
	}
	for _, i := range e.arrays {
		c := &e.cols[i]
		if c.touched == row {
			c.data = c.data[:c.undoLen]
			c.offsets = c.offsets[:min(len(c.offsets), row)]
			c.touched = -1
		}
	}
}

func (c *column) set(row int, f *pbwire.Field) error {
	switch c.op {
	case opUint8, opUint16, opUint32, opUint64:
		if f.Type != pbwire.Varint {
			return errWireType
		}
		v := f.Varint
		if v > c.max {
			return errRange
		}
		switch c.op {
		case opUint8:
			c.data[row] = byte(v)
		case opUint16:
			binary.LittleEndian.PutUint16(c.data[2*row:], uint16(v))
		case opUint32:
			binary.LittleEndian.PutUint32(c.data[4*row:], uint32(v))
		default:
			binary.LittleEndian.PutUint64(c.data[8*row:], v)
		}
	case opIPv6:
		if f.Type != pbwire.Bytes {
			return errWireType
		}
		if len(f.Bytes) != 16 {
			return errSize
		}
		*(*[16]byte)(c.data[16*row:]) = [16]byte(f.Bytes)
	case opLowCard:
		if f.Type != pbwire.Bytes {
			return errWireType
		}
		binary.LittleEndian.PutUint32(c.data[4*row:], c.index(row, f.Bytes))
	case opEnum8:
		if f.Type != pbwire.Varint {
			return errWireType
		}
		if f.Varint > 255 || !c.enum[f.Varint] {
			return errRange
		}
		c.data[row] = byte(f.Varint)
	case opFixedString:
		if f.Type != pbwire.Bytes {
			return errWireType
		}
		if len(f.Bytes) > c.width {
			return errSize
		}
		p := c.data[row*c.width : (row+1)*c.width]
		clear(p[copy(p, f.Bytes):])
	case opArrayUint:
		c.open(row)
		switch f.Type {
		case pbwire.Varint:
			return c.appendUint(f.Varint)
		case pbwire.Bytes:
			p := f.Packed(pbwire.Varint)
			for p.Next() {
				if err := c.appendUint(p.Value()); err != nil {
					return err
				}
			}
			return p.Err()
		default:
			return errWireType
		}
	case opArrayFixed:
		if f.Type != pbwire.Bytes {
			return errWireType
		}
		if len(f.Bytes) != c.width {
			return errSize
		}
		c.open(row)
		c.data = append(c.data, f.Bytes...)
	}
	return nil
}

// index returns the dictionary index of a LowCardinality value, adding it if new.
func (c *column) index(row int, v []byte) uint32 {
	if len(v) == 0 {
		return 0
	}
	if string(v) == string(c.last) {
		return c.lastIdx
	}
	// A few values (exporter names, a site's interfaces) are the common case: a scan of
	// the first keys beats hashing.
	if c.nkeys <= 8 {
		k := c.keys
		for i := uint32(0); i < c.nkeys; i++ {
			l := int(k[0]) // keys this short have a 1-byte length when under 128 bytes
			if l >= 0x80 {
				break
			}
			if string(k[1:1+l]) == string(v) {
				c.last = append(c.last[:0], v...)
				c.lastIdx = i
				return i
			}
			k = k[1+l:]
		}
	}
	g, ok := c.intern[string(v)]
	if !ok {
		g = uint32(len(c.stamp))
		name := string(v)
		c.intern[name] = g
		c.names = append(c.names, name)
		c.stamp = append(c.stamp, 0)
		c.local = append(c.local, 0)
	}
	if c.stamp[g] != c.gen {
		if c.touched != row {
			c.touched, c.undoLen, c.undoKeys = row, len(c.keys), c.nkeys
			c.added = c.added[:0]
		}
		c.added = append(c.added, g)
		c.stamp[g] = c.gen
		c.local[g] = c.nkeys
		c.globals = append(c.globals, g+1)
		c.nkeys++
		c.keys = binary.AppendUvarint(c.keys, uint64(len(v)))
		c.keys = append(c.keys, v...)
	}
	i := c.local[g]
	c.last = append(c.last[:0], v...)
	c.lastIdx = i
	return i
}

// open makes row the array column's current row: earlier rows are closed, and the state
// before the row is kept for undo.
func (c *column) open(row int) {
	if c.touched == row {
		return
	}
	n := uint64(len(c.data) / c.width)
	for len(c.offsets) < row {
		c.offsets = append(c.offsets, n)
	}
	c.touched, c.undoLen = row, len(c.data)
}

func (c *column) appendUint(v uint64) error {
	if c.width == 4 {
		if v > 1<<32-1 {
			return errRange
		}
		c.data = binary.LittleEndian.AppendUint32(c.data, uint32(v))
		return nil
	}
	c.data = binary.LittleEndian.AppendUint64(c.data, v)
	return nil
}

// Block returns the Native blocks of the rows appended since the last Reset: the INSERT's
// input. The slice is valid until the next call on the encoder; Append after Block starts a
// new block after these.
func (e *Encoder) Block() []byte {
	if e.rows > 0 {
		e.flush()
	}
	return e.out
}

// flush writes the block being built at the end of out and starts the next one.
//
// A column whose every row holds its type's default is left out of the block: the INSERT
// still names it, and the Native input gives the columns a block lacks their default (and
// computes the MATERIALIZED ones from the columns it has). Most of the ~33 string columns
// and several numeric ones are empty in every flow of an installation without the metadata
// they carry; written, each cost Go a pass over the rows and the engine another to read
// them. The blocks of one INSERT may leave out different columns.
func (e *Encoder) flush() {
	rows := e.rows
	ncols := e.closeBlock()
	if e.agg != nil {
		e.agg.addBlock(e, rows)
	}
	var perm []uint32
	if e.sorter != nil {
		perm = e.sorter.permutation(e, rows)
	}
	out := e.out
	out = binary.AppendUvarint(out, uint64(ncols))
	out = binary.AppendUvarint(out, uint64(rows))
	for i := range e.cols {
		c := &e.cols[i]
		if c.omit {
			continue
		}
		out = appendString(out, c.name)
		out = appendString(out, c.typ)
		order := perm
		if perm != nil && c.op != opArrayUint && c.op != opArrayFixed && allSame(c.data[:rows*c.width], c.width) {
			order = nil // one value in every row: any order is the same
		}
		switch c.op {
		case opLowCard:
			out = binary.LittleEndian.AppendUint64(out, 1) // SharedDictionariesWithAdditionalKeys
			var code uint64
			switch {
			case c.nkeys <= 1<<8:
				code = 0
			case c.nkeys <= 1<<16:
				code = 1
			default:
				code = 2
			}
			out = binary.LittleEndian.AppendUint64(out, 1<<9|1<<10|code)
			out = binary.LittleEndian.AppendUint64(out, uint64(c.nkeys))
			out = append(out, c.keys...)
			out = binary.LittleEndian.AppendUint64(out, uint64(rows))
			out = appendIndexes(out, c.data[:rows*4], code, order)
		case opArrayUint, opArrayFixed:
			out = c.appendArray(out, rows, order)
		default:
			out = appendFixed(out, c.data[:rows*c.width], c.width, order)
		}
	}
	e.out = out
	e.done += rows
	if e.agg == nil {
		e.forgetInterned()
	}
	e.resetColumns()
}

// closeBlock marks the columns left out of the block being built (omit) and closes its
// array columns' rows, and returns the number of columns written.
func (e *Encoder) closeBlock() (ncols int) {
	rows := e.rows
	for i := range e.cols {
		c := &e.cols[i]
		c.omit = c.allDefault(rows)
		if !c.omit {
			ncols++
		}
	}
	if ncols == 0 {
		// A block without columns would lose its row count.
		e.cols[0].omit = false
		ncols = 1
	}
	for _, i := range e.arrays {
		c := &e.cols[i]
		n := uint64(len(c.data) / c.width)
		for len(c.offsets) < rows {
			c.offsets = append(c.offsets, n)
		}
	}
	return ncols
}

// appendIndexes appends a LowCardinality column's indexes (4 bytes each while building)
// narrowed to 1 << code bytes, in the order of perm (nil: as they are).
func appendIndexes(out, idx []byte, code uint64, perm []uint32) []byte {
	switch {
	case code == 0 && perm == nil:
		for j := 0; j < len(idx); j += 4 {
			out = append(out, idx[j])
		}
	case code == 0:
		for _, r := range perm {
			out = append(out, idx[4*r])
		}
	case code == 1 && perm == nil:
		for j := 0; j < len(idx); j += 4 {
			out = append(out, idx[j], idx[j+1])
		}
	case code == 1:
		for _, r := range perm {
			out = append(out, idx[4*r], idx[4*r+1])
		}
	case perm == nil:
		out = append(out, idx...)
	default:
		out = appendFixed(out, idx, 4, perm)
	}
	return out
}

// appendFixed appends a fixed-width column (width bytes per row) in the order of perm (nil:
// as it is).
func appendFixed(out, data []byte, width int, perm []uint32) []byte {
	if perm == nil {
		return append(out, data...)
	}
	n := len(out)
	out = slices.Grow(out, len(data))[:n+len(data)]
	dst := out[n:]
	switch width {
	case 1:
		for i, r := range perm {
			dst[i] = data[r]
		}
	case 2:
		for i, r := range perm {
			binary.LittleEndian.PutUint16(dst[2*i:], binary.LittleEndian.Uint16(data[2*r:]))
		}
	case 4:
		for i, r := range perm {
			binary.LittleEndian.PutUint32(dst[4*i:], binary.LittleEndian.Uint32(data[4*r:]))
		}
	case 8:
		for i, r := range perm {
			binary.LittleEndian.PutUint64(dst[8*i:], binary.LittleEndian.Uint64(data[8*r:]))
		}
	case 16:
		for i, r := range perm {
			*(*[16]byte)(dst[16*i:]) = [16]byte(data[16*r:])
		}
	default:
		for i, r := range perm {
			copy(dst[width*i:width*(i+1)], data[width*int(r):])
		}
	}
	return out
}

// appendArray appends an array column's offsets and elements, rows in the order of perm
// (nil: as they are).
func (c *column) appendArray(out []byte, rows int, perm []uint32) []byte {
	if perm == nil {
		for _, o := range c.offsets[:rows] {
			out = binary.LittleEndian.AppendUint64(out, o)
		}
		return append(out, c.data...)
	}
	start := func(r uint32) uint64 {
		if r == 0 {
			return 0
		}
		return c.offsets[r-1]
	}
	total := uint64(0)
	for _, r := range perm {
		total += c.offsets[r] - start(r)
		out = binary.LittleEndian.AppendUint64(out, total)
	}
	w := uint64(c.width)
	for _, r := range perm {
		out = append(out, c.data[start(r)*w:c.offsets[r]*w]...)
	}
	return out
}

// allDefault reports whether every one of the block's rows holds the column type's default:
// "" (only the default key), an empty array, zero (an Enum8's default is its smallest
// value, zero only when it has one).
func (c *column) allDefault(rows int) bool {
	switch c.op {
	case opLowCard:
		return c.nkeys == 1
	case opArrayUint, opArrayFixed:
		return len(c.data) == 0
	case opEnum8:
		if !c.enum[0] {
			return false
		}
	}
	return allZero(c.data[:rows*c.width])
}

// allSame reports whether the values of a fixed-width column (width bytes each) are all the
// first one's. It stops at the first that differs, which comes early in a column that varies.
func allSame(data []byte, width int) bool {
	if len(data) <= width {
		return true
	}
	first := data[:width]
	for v := data[width:]; len(v) >= width; v = v[width:] {
		if string(v[:width]) != string(first) {
			return false
		}
	}
	return true
}

// allZero reports whether b holds only zero bytes, 32 at a time.
func allZero(b []byte) bool {
	for len(b) >= 32 {
		if binary.LittleEndian.Uint64(b)|binary.LittleEndian.Uint64(b[8:])|
			binary.LittleEndian.Uint64(b[16:])|binary.LittleEndian.Uint64(b[24:]) != 0 {
			return false
		}
		b = b[32:]
	}
	for _, v := range b {
		if v != 0 {
			return false
		}
	}
	return true
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
