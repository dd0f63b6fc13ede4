// Package schema is flowzero's single list of flow columns. It drives what decoders extract,
// how flows are encoded to protobuf, the .proto file consumers use and the ClickHouse tables.
//
// # Design
//
// Each column (table.go) has a name, a protobuf field number that never changes, a protobuf
// kind, a ClickHouse type and codec, a default state, a group and a "hot" flag. Users switch
// columns on and off (Configuration); New resolves that into a Schema, which knows per column
// whether it is enabled and its pre-encoded protobuf key.
//
// Because field numbers are fixed per column rather than assigned positionally, a consumer
// built for one configuration still reads messages of another: fields it does not know are
// skipped, fields that are off are absent (zero). The schema hash (Hash) still changes with
// the set of enabled columns and names the Kafka topic, so that ClickHouse tables and topics
// follow configuration changes.
//
// Encoding (FlowMessage) happens while decoding: a decoder appends each value as it reads it,
// straight into one reusable pbwire.Buffer in protobuf wire format, so nothing is built twice
// and nothing is allocated; schema decides what to write (enabled columns, limits, fixes) and
// pbwire how. A per-message byte per column both skips disabled columns and keeps a
// non-repeated column from being written twice, in one byte test. Values later stages still
// need (addresses, AS numbers, interfaces, ...) are kept as plain fields (HotFields) and
// encoded by Finalize, which also writes the length prefix into room reserved at the front of
// the buffer; the code that reads them is generated from their declaration (hot_gen.go).
// Columns many flows share (an exporter's or an interface's names and classification) are
// encoded once into a Fragment, which a flow then takes with one copy (AppendFragment).
// docs/design/schema.md has the measurements behind these choices.
//
// Values ClickHouse would refuse (failing a whole Kafka batch) are fixed on the way in and
// counted (FlowMessage.Sanitized). Tests check the generated .proto with protocompile and
// dynamicpb, and, with the chdb build tag, the DDL and Protobuf input with the real ClickHouse.
//
// Files: columns.go (keys, kinds, groups), table.go (the column table: field numbers, types,
// defaults), config.go, flow.go (FlowMessage), hot.go (HotFields, the hot columns) and
// hot_gen.go (generated from it by hot_gen_test.go), fragment.go (Fragment), proto.go
// (.proto), clickhouse.go (DDL), decode.go (DecodeMessage, for tests and printing sinks).
package schema

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"math"
	"strings"

	"flowzero/pbwire"
)

// Schema is the resolved set of enabled columns. It is immutable and safe for concurrent use.
type Schema struct {
	enabled  columnBitset
	disabled columnBitset // complement of enabled (including key 0 and derived columns on the wire path)
	groups   [groupLast]bool
	// enc is indexed by k&(encSize-1): a power-of-two size lets the compiler drop the
	// bounds check on the Append paths.
	enc   [encSize]encInfo
	state [encSize]op // enc's ops, the initial FlowMessage.state
	// hotOn is all ones for the enabled hot columns and 0 for the others, so that Finalize
	// masks a disabled column's value to zero (zero values are not written) rather than
	// testing the column.
	hotOn   [hotLast]uint64
	columns []*Column // enabled columns, in table order
	proto   string
	hash    string
}

// op says what an Append method does with a column.
type op uint8

const (
	opNone        op = iota // derived or disabled: nothing to write
	opVarint                // varint (masked with encInfo.mask, 0 above encInfo.max)
	opString                // UTF-8 string, at most encInfo.max bytes
	opBytes                 // bytes
	opIP                    // 16-byte address
	opArrayUint32           // packed uint32
	opArrayUint64           // packed uint64
	opArrayIP               // repeated 16-byte address
	opHot                   // hot scalar: stored in a FlowMessage field
	opHotIP                 // hot address
	opHotArray              // hot array (AS path, communities)
)

// encSize is the size of Schema.enc: the power of two above the last column key.
const encSize = 128

func init() {
	if ColumnLast > encSize {
		panic("schema: encSize is smaller than ColumnLast")
	}
}

type encInfo struct {
	tag  pbwire.Tag
	mask uint64 // applied to varints: 32-bit columns drop the high bits
	// max is, for varints, the largest value accepted after the mask: for enums the last
	// value (ClickHouse refuses a whole insert on an unknown Enum8 value); larger ones
	// become 0. For strings it is the longest string accepted (FixedString(N) refuses
	// longer ones).
	max  uint64
	op   op
	kind Kind
}

// varintColumns counts the columns AppendUint encodes as varints at once (not hot), each at
// most once per message: FlowMessage's buffer keeps room for all of them.
var varintColumns = func() int {
	n := 0
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if c := &columns[k]; c.OnWire() && !c.Hot && !c.Kind.Repeated() && c.Kind.wireType() == pbwire.Varint {
			n++
		}
	}
	return n
}()

// wireType is the protobuf wire type of a kind's elements as written by FlowMessage.
func (k Kind) wireType() pbwire.WireType {
	switch k {
	case KindUint64, KindUint32, KindEnum, KindMAC:
		return pbwire.Varint
	default:
		return pbwire.Bytes
	}
}

// New resolves a configuration into a Schema; configuration errors name the column.
func New(cfg Configuration) (*Schema, error) {
	enabled, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	s := &Schema{enabled: enabled}
	for i := range s.disabled {
		s.disabled[i] = ^enabled[i]
	}
	for _, k := range tableKeys {
		c := &columns[k]
		if !enabled.has(k) {
			continue
		}
		s.columns = append(s.columns, c)
		s.groups[c.Group] = true
		if !c.OnWire() {
			s.disabled.set(k) // nothing to append
			continue
		}
		e := encInfo{tag: pbwire.MakeTag(c.Field, c.Kind.wireType()), mask: ^uint64(0), max: ^uint64(0), kind: c.Kind}
		switch {
		case c.Hot && c.Kind.Repeated():
			e.op = opHotArray
		case c.Hot && c.Kind == KindIP:
			e.op = opHotIP
		case c.Hot:
			e.op = opHot
		default:
			switch c.Kind {
			case KindUint64, KindMAC:
				e.op = opVarint
			case KindUint32:
				e.op, e.mask, e.max = opVarint, 0xffff_ffff, 0xffff_ffff
			case KindEnum:
				e.op, e.max = opVarint, uint64(len(c.Enum)-1)
			case KindString:
				e.op, e.max = opString, uint64(fixedStringSize(c.ClickHouseType))
			case KindBytes:
				e.op = opBytes
			case KindIP:
				e.op = opIP
			case KindArrayUint32:
				e.op = opArrayUint32
			case KindArrayUint64:
				e.op = opArrayUint64
			case KindArrayIP:
				e.op = opArrayIP
			}
		}
		s.enc[k] = e
		s.state[k] = e.op
	}
	for i, k := range hotColumns {
		if s.state[k] != opNone {
			s.hotOn[i] = ^uint64(0)
		}
	}
	s.proto = s.protoDefinition()
	s.hash = s.computeHash()
	return s, nil
}

// fixedStringSize is N for a FixedString(N) type, and no limit for other types.
func fixedStringSize(chType string) int {
	var n int
	if _, err := fmt.Sscanf(chType, "FixedString(%d)", &n); err == nil && n > 0 {
		return n
	}
	return math.MaxInt
}

// Enabled tells if column k is enabled: one bit test, for decoders to skip work.
func (s *Schema) Enabled(k ColumnKey) bool {
	return k < ColumnLast && s.enabled.has(k)
}

// GroupEnabled tells if at least one column of group g is enabled, so that a decoder can skip
// parsing a whole part of a record (for example the Ethernet header when no L2 column is on).
func (s *Schema) GroupEnabled(g ColumnGroup) bool {
	return g < groupLast && s.groups[g]
}

// Columns returns the enabled columns in table order (hot and frequent columns first, then
// derived columns). The slice and columns must not be modified.
func (s *Schema) Columns() []*Column {
	return s.columns
}

// Column returns the description of an enabled column, or nil when k is disabled.
func (s *Schema) Column(k ColumnKey) *Column {
	if !s.Enabled(k) {
		return nil
	}
	return &columns[k]
}

// Hash identifies the set of enabled columns and their encoding; it names the Kafka topic
// (flows-<hash>). It is 16 lowercase base32 characters.
func (s *Schema) Hash() string {
	return s.hash
}

func (s *Schema) computeHash() string {
	h := sha256.New()
	h.Write([]byte(s.proto))
	// Derived columns are not in the .proto but change the tables.
	for _, c := range s.columns {
		if !c.OnWire() {
			h.Write([]byte("derived " + c.Name + "\n"))
		}
	}
	sum := h.Sum(nil)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10]))
}
