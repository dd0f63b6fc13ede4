package schema

import (
	"encoding/binary"
	"net/netip"
	"unicode/utf8"
	"unsafe"

	"flowzero/pbwire"
)

// LargeCommunity is a BGP large community (RFC 8092).
type LargeCommunity struct {
	ASN        uint32 // global administrator
	LocalData1 uint32
	LocalData2 uint32
}

// FlowMessage is one flow being built. A worker owns one, created by Schema.NewFlowMessage,
// and reuses it for every flow: Reset, fill, Finalize, hand the bytes on, repeat.
//
// # Hot fields
//
// The exported fields are the "hot" columns: values a later stage still reads or overwrites
// (the exporter classifier reads ExporterAddress and the interfaces, the RIB reads the
// addresses and sets the AS numbers, masks, next hop, AS path and communities). They stay
// unencoded until Finalize, which writes those of enabled columns that are not zero. Decoders
// set them directly (fm.SrcAddr = ...) or through the Append methods, which store hot columns
// here instead of encoding them; enrichment overwrites them by plain assignment.
//
// The slice fields (DstASPath, communities) are read-only views: they are assigned, for
// example to the RIB's interned attributes, never appended to, and must stay valid until
// Finalize. Reset sets them to nil.
//
// # Other columns
//
// Every other column is encoded into the message buffer at once by AppendUint, AppendString,
// AppendBytes, AppendIP, AppendArrayUint32 and AppendArrayUint64. A disabled column costs one
// bit test; a non-repeated column is written once (later appends are ignored, so a decoder can
// append the most precise source first); zero numbers and empty strings are not written
// (protobuf and ClickHouse default them to zero) but count as set. An Append with a method
// that does not match the column's Kind is ignored. Values that would make ClickHouse refuse a
// whole batch, or a proto3 parser a whole message, are fixed on the way in: an enum value
// outside the enum becomes 0, a string longer than a FixedString(N) column is dropped, and
// invalid UTF-8 is replaced by U+FFFD.
type FlowMessage struct {
	// Set by the decoder; read by the exporter classifier and the sinks (Kafka key).
	TimeReceived    uint64 // unix seconds
	SamplingRate    uint64
	ExporterAddress netip.Addr
	InIf, OutIf     uint32 // SNMP indexes; the interface classifier looks them up

	// Set by the decoder; the RIB looks the addresses up and overwrites the routing fields
	// when it knows better (AS numbers, masks, next hop).
	SrcAddr, DstAddr, NextHop netip.Addr // encoded as 16 bytes, IPv4 as ::ffff:a.b.c.d
	SrcAS, DstAS              uint32
	SrcNetMask, DstNetMask    uint8
	SrcVlan, DstVlan          uint16

	// Set by the RIB (or by a decoder that carries them, such as sFlow's extended gateway).
	DstASPath           []uint32
	SrcCommunities      []uint32 // standard communities, ASN<<16 | value
	DstCommunities      []uint32
	SrcLargeCommunities []LargeCommunity
	DstLargeCommunities []LargeCommunity

	schema *Schema
	// skip holds the columns Append must ignore: disabled (and derived) columns, and
	// non-repeated columns already written. Reset copies it from the schema.
	skip columnBitset
	// set holds the repeated columns written since Reset (they never enter skip).
	set columnBitset
	// buf is the message being built; its first pbwire.ReserveDelimited bytes are room for
	// the length prefix written by Finalize.
	buf       []byte
	finalized []byte
	// sanitized counts values fixed or dropped since NewFlowMessage (kept by Reset).
	sanitized uint64
}

// initialBufferSize fits a flow with every column set without growing.
const initialBufferSize = 1024

// NewFlowMessage returns a FlowMessage for this schema, ready to fill.
func (s *Schema) NewFlowMessage() *FlowMessage {
	m := &FlowMessage{
		schema: s,
		buf:    make([]byte, pbwire.ReserveDelimited, initialBufferSize),
	}
	m.Reset()
	return m
}

// Schema returns the schema the message was created for.
func (m *FlowMessage) Schema() *Schema { return m.schema }

// Reset clears the message for the next flow, keeping its buffer.
func (m *FlowMessage) Reset() {
	s, buf, sanitized := m.schema, m.buf, m.sanitized
	*m = FlowMessage{schema: s, skip: s.disabled, buf: buf[:pbwire.ReserveDelimited], sanitized: sanitized}
}

// Sanitized is the number of values fixed or dropped by the Append methods since the message
// was created (enum values outside the enum, strings too long for their FixedString column,
// invalid UTF-8). FlowMessage does not log or hold metrics: its owner exports this total as a
// counter.
func (m *FlowMessage) Sanitized() uint64 { return m.sanitized }

// IsSet tells if an Append wrote column k since Reset, or, for a hot column, if its field is
// not zero.
func (m *FlowMessage) IsSet(k ColumnKey) bool {
	if k == 0 || k >= ColumnLast {
		return false
	}
	if m.set.has(k) || (m.skip.has(k) && !m.schema.disabled.has(k)) {
		return true
	}
	switch k {
	case ColumnTimeReceived:
		return m.TimeReceived != 0
	case ColumnSamplingRate:
		return m.SamplingRate != 0
	case ColumnExporterAddress:
		return m.ExporterAddress.IsValid()
	case ColumnInIf:
		return m.InIf != 0
	case ColumnOutIf:
		return m.OutIf != 0
	case ColumnSrcAddr:
		return m.SrcAddr.IsValid()
	case ColumnDstAddr:
		return m.DstAddr.IsValid()
	case ColumnNextHop:
		return m.NextHop.IsValid()
	case ColumnSrcAS:
		return m.SrcAS != 0
	case ColumnDstAS:
		return m.DstAS != 0
	case ColumnSrcNetMask:
		return m.SrcNetMask != 0
	case ColumnDstNetMask:
		return m.DstNetMask != 0
	case ColumnSrcVlan:
		return m.SrcVlan != 0
	case ColumnDstVlan:
		return m.DstVlan != 0
	case ColumnDstASPath:
		return len(m.DstASPath) != 0
	case ColumnSrcCommunities:
		return len(m.SrcCommunities) != 0
	case ColumnDstCommunities:
		return len(m.DstCommunities) != 0
	case ColumnSrcLargeCommunities:
		return len(m.SrcLargeCommunities) != 0
	case ColumnDstLargeCommunities:
		return len(m.DstLargeCommunities) != 0
	}
	return false
}

// The Append methods share one shape: an inlined front (a bounds check and one bit test that
// rejects disabled columns and columns already written: all a disabled column costs), then a
// call that loads the column's encoding and appends. A method that does not match the column's
// kind returns before marking the column, so that the right method still works.

// AppendUint sets a KindUint64, KindUint32 (truncated to 32 bits), KindEnum (a value outside
// the enum becomes 0, undefined: ClickHouse would refuse the whole batch) or KindMAC column, or
// a hot scalar column. It is a no-op when the column is disabled or already set.
func (m *FlowMessage) AppendUint(k ColumnKey, v uint64) {
	if k < ColumnLast && m.skip[k>>6]&(1<<(k&63)) == 0 {
		m.appendUint(k, v)
	}
}

func (m *FlowMessage) appendUint(k ColumnKey, v uint64) {
	w, bit := k>>6, uint64(1)<<(k&63)
	e := &m.schema.enc[k]
	switch e.op {
	case opVarint:
		v &= e.mask
	case opEnum:
		if v >= uint64(e.limit) {
			v = 0 // undefined
			m.sanitized++
		}
	case opHot:
		m.skip[w] |= bit
		m.setHotUint(k, v)
		return
	default:
		return
	}
	m.skip[w] |= bit
	if v != 0 {
		m.buf = pbwire.AppendVarintField(m.buf, e.tag, v)
	}
}

func (m *FlowMessage) setHotUint(k ColumnKey, v uint64) {
	switch k {
	case ColumnTimeReceived:
		m.TimeReceived = v
	case ColumnSamplingRate:
		m.SamplingRate = v
	case ColumnInIf:
		m.InIf = uint32(v)
	case ColumnOutIf:
		m.OutIf = uint32(v)
	case ColumnSrcAS:
		m.SrcAS = uint32(v)
	case ColumnDstAS:
		m.DstAS = uint32(v)
	case ColumnSrcNetMask:
		m.SrcNetMask = uint8(v)
	case ColumnDstNetMask:
		m.DstNetMask = uint8(v)
	case ColumnSrcVlan:
		m.SrcVlan = uint16(v)
	case ColumnDstVlan:
		m.DstVlan = uint16(v)
	}
}

// AppendString sets a KindString or KindBytes column. Strings longer than a FixedString(N)
// column are dropped (ClickHouse would refuse the whole batch); invalid UTF-8 in a KindString
// column is replaced by U+FFFD.
func (m *FlowMessage) AppendString(k ColumnKey, s string) {
	if k < ColumnLast && m.skip[k>>6]&(1<<(k&63)) == 0 {
		m.appendString(k, s)
	}
}

func (m *FlowMessage) appendString(k ColumnKey, s string) {
	w, bit := k>>6, uint64(1)<<(k&63)
	e := &m.schema.enc[k]
	switch e.op {
	case opString:
		m.skip[w] |= bit
		if len(s) == 0 {
			return
		}
		if len(s) > e.limit {
			m.sanitized++
			return
		}
		if !isASCII(s) && !utf8.ValidString(s) {
			m.sanitized++
			m.buf = appendValidUTF8Field(m.buf, e.tag, s)
			return
		}
		m.buf = pbwire.AppendStringField(m.buf, e.tag, s)
	case opBytes:
		m.skip[w] |= bit
		if len(s) != 0 {
			m.buf = pbwire.AppendStringField(m.buf, e.tag, s)
		}
	}
}

// isASCII tells if s is plain ASCII (so valid UTF-8), 8 bytes at a time: interface names and
// descriptions nearly always are, and this is several times cheaper than utf8.ValidString on
// such short strings.
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

// appendValidUTF8Field writes s with each invalid byte replaced by U+FFFD: proto3 parsers
// such as Go's refuse a message whose string field is not UTF-8, and exporters send interface
// descriptions in any encoding. It does not allocate: the size is computed first.
func appendValidUTF8Field(dst []byte, t pbwire.Tag, s string) []byte {
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
	dst = pbwire.AppendTag(dst, t)
	dst = pbwire.AppendVarint(dst, uint64(n))
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

// AppendBytes sets a KindBytes or KindString column, or a KindMAC column from the 6 bytes
// of the address (other lengths are ignored).
func (m *FlowMessage) AppendBytes(k ColumnKey, b []byte) {
	if k < ColumnLast && m.skip[k>>6]&(1<<(k&63)) == 0 {
		m.appendBytes(k, b)
	}
}

func (m *FlowMessage) appendBytes(k ColumnKey, b []byte) {
	w, bit := k>>6, uint64(1)<<(k&63)
	e := &m.schema.enc[k]
	switch {
	case e.op == opBytes:
		m.skip[w] |= bit
		if len(b) != 0 {
			m.buf = pbwire.AppendBytesField(m.buf, e.tag, b)
		}
	case e.op == opString:
		// Same checks as AppendString; the conversion does not allocate.
		m.appendString(k, unsafe.String(unsafe.SliceData(b), len(b)))
	case e.kind == KindMAC && len(b) == 6:
		m.skip[w] |= bit
		v := uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
		if v != 0 {
			m.buf = pbwire.AppendVarintField(m.buf, e.tag, v)
		}
	}
}

// AppendIP sets a KindIP column (16 bytes, IPv4 mapped into IPv6) or a hot address column, or
// adds one address to a KindArrayIP column. Invalid (zero) addresses are ignored.
func (m *FlowMessage) AppendIP(k ColumnKey, a netip.Addr) {
	if k < ColumnLast && m.skip[k>>6]&(1<<(k&63)) == 0 {
		m.appendIP(k, a)
	}
}

func (m *FlowMessage) appendIP(k ColumnKey, a netip.Addr) {
	w, bit := k>>6, uint64(1)<<(k&63)
	if !a.IsValid() {
		return
	}
	e := &m.schema.enc[k]
	switch e.op {
	case opIP:
		m.skip[w] |= bit
		m.buf = appendIPField(m.buf, e.tag, a)
	case opHotIP:
		m.skip[w] |= bit
		switch k {
		case ColumnExporterAddress:
			m.ExporterAddress = a
		case ColumnSrcAddr:
			m.SrcAddr = a
		case ColumnDstAddr:
			m.DstAddr = a
		case ColumnNextHop:
			m.NextHop = a
		}
	case opArrayIP:
		m.set[w] |= bit
		m.buf = appendIPField(m.buf, e.tag, a)
	}
}

func appendIPField(dst []byte, t pbwire.Tag, a netip.Addr) []byte {
	b := a.As16()
	return pbwire.AppendBytesField(dst, t, b[:])
}

// AppendArrayUint32 adds values to a KindArrayUint32 column; each call appends to the array.
// For the hot array columns (DstASPath, SrcCommunities, DstCommunities), the field is set to vs
// (not copied) if it was not set by an Append yet.
func (m *FlowMessage) AppendArrayUint32(k ColumnKey, vs []uint32) {
	if k < ColumnLast && m.skip[k>>6]&(1<<(k&63)) == 0 {
		m.appendArrayUint32(k, vs)
	}
}

func (m *FlowMessage) appendArrayUint32(k ColumnKey, vs []uint32) {
	w, bit := k>>6, uint64(1)<<(k&63)
	if len(vs) == 0 {
		return
	}
	e := &m.schema.enc[k]
	switch e.op {
	case opArrayUint32:
		m.set[w] |= bit
		m.buf = pbwire.AppendPackedUint32Field(m.buf, e.tag, vs)
	case opHotArray:
		m.skip[w] |= bit
		switch k {
		case ColumnDstASPath:
			m.DstASPath = vs
		case ColumnSrcCommunities:
			m.SrcCommunities = vs
		case ColumnDstCommunities:
			m.DstCommunities = vs
		}
	}
}

// AppendArrayUint64 adds values to a KindArrayUint64 column; each call appends to the array.
func (m *FlowMessage) AppendArrayUint64(k ColumnKey, vs []uint64) {
	if k < ColumnLast && m.skip[k>>6]&(1<<(k&63)) == 0 {
		m.appendArrayUint64(k, vs)
	}
}

func (m *FlowMessage) appendArrayUint64(k ColumnKey, vs []uint64) {
	w, bit := k>>6, uint64(1)<<(k&63)
	if len(vs) == 0 {
		return
	}
	if e := &m.schema.enc[k]; e.op == opArrayUint64 {
		m.set[w] |= bit
		m.buf = pbwire.AppendPackedUint64Field(m.buf, e.tag, vs)
	}
}

// Finalize appends the hot fields and returns the message framed as one length-delimited
// protobuf message (varint length, then the message), ready to be appended to a batch. The
// bytes live in the FlowMessage's buffer: they stay valid until Reset. Calling Finalize again
// before Reset returns the same bytes.
func (m *FlowMessage) Finalize() []byte {
	if m.finalized != nil {
		return m.finalized
	}
	s := m.schema
	buf := m.buf
	// Hot fields; a zero tag means the column is disabled.
	ht := &s.hotTags
	if ht[hotTimeReceived] != 0 && m.TimeReceived != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotTimeReceived], m.TimeReceived)
	}
	if ht[hotSamplingRate] != 0 && m.SamplingRate != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotSamplingRate], m.SamplingRate)
	}
	if ht[hotSrcAS] != 0 && m.SrcAS != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotSrcAS], uint64(m.SrcAS))
	}
	if ht[hotDstAS] != 0 && m.DstAS != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotDstAS], uint64(m.DstAS))
	}
	if ht[hotInIf] != 0 && m.InIf != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotInIf], uint64(m.InIf))
	}
	if ht[hotOutIf] != 0 && m.OutIf != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotOutIf], uint64(m.OutIf))
	}
	if ht[hotSrcNetMask] != 0 && m.SrcNetMask != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotSrcNetMask], uint64(m.SrcNetMask))
	}
	if ht[hotDstNetMask] != 0 && m.DstNetMask != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotDstNetMask], uint64(m.DstNetMask))
	}
	if ht[hotSrcVlan] != 0 && m.SrcVlan != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotSrcVlan], uint64(m.SrcVlan))
	}
	if ht[hotDstVlan] != 0 && m.DstVlan != 0 {
		buf = pbwire.AppendVarintField(buf, ht[hotDstVlan], uint64(m.DstVlan))
	}
	if t := ht[hotExporterAddress]; t != 0 && m.ExporterAddress.IsValid() {
		buf = appendIPField(buf, t, m.ExporterAddress)
	}
	if t := ht[hotSrcAddr]; t != 0 && m.SrcAddr.IsValid() {
		buf = appendIPField(buf, t, m.SrcAddr)
	}
	if t := ht[hotDstAddr]; t != 0 && m.DstAddr.IsValid() {
		buf = appendIPField(buf, t, m.DstAddr)
	}
	if t := ht[hotNextHop]; t != 0 && m.NextHop.IsValid() {
		buf = appendIPField(buf, t, m.NextHop)
	}
	if t := ht[hotDstASPath]; t != 0 {
		buf = pbwire.AppendPackedUint32Field(buf, t, m.DstASPath)
	}
	if t := ht[hotSrcCommunities]; t != 0 {
		buf = pbwire.AppendPackedUint32Field(buf, t, m.SrcCommunities)
	}
	if t := ht[hotDstCommunities]; t != 0 {
		buf = pbwire.AppendPackedUint32Field(buf, t, m.DstCommunities)
	}
	if t := ht[hotSrcLargeCommunities]; t != 0 {
		buf = appendLargeCommunities(buf, t, m.SrcLargeCommunities)
	}
	if t := ht[hotDstLargeCommunities]; t != 0 {
		buf = appendLargeCommunities(buf, t, m.DstLargeCommunities)
	}
	m.buf = buf
	m.finalized = pbwire.FinishDelimited(buf, 0)
	return m.finalized
}

// appendLargeCommunities writes each community as a 12-byte big-endian bytes element (RFC 8092
// order), stored by ClickHouse as FixedString(12).
func appendLargeCommunities(dst []byte, t pbwire.Tag, lcs []LargeCommunity) []byte {
	for _, lc := range lcs {
		dst = pbwire.AppendTag(dst, t)
		dst = append(dst, 12,
			byte(lc.ASN>>24), byte(lc.ASN>>16), byte(lc.ASN>>8), byte(lc.ASN),
			byte(lc.LocalData1>>24), byte(lc.LocalData1>>16), byte(lc.LocalData1>>8), byte(lc.LocalData1),
			byte(lc.LocalData2>>24), byte(lc.LocalData2>>16), byte(lc.LocalData2>>8), byte(lc.LocalData2))
	}
	return dst
}
