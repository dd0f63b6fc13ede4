package schema

import (
	"encoding/binary"
	"net/netip"
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
// The exported fields (HotFields) are the "hot" columns: values a later stage still reads or
// overwrites. They stay unencoded until Finalize, which writes those of enabled columns that
// are not zero. Decoders set them directly (fm.SrcAddr = ...) or through the Append methods,
// which store hot columns there instead of encoding them; enrichment overwrites them by plain
// assignment.
//
// # Other columns
//
// Every other column is encoded into the message buffer at once by AppendUint, AppendString,
// AppendBytes, AppendIP, AppendArrayUint32 and AppendArrayUint64. A disabled column costs one
// byte test; a non-repeated column is written once (later appends are ignored, so a decoder can
// append the most precise source first); zero numbers and empty strings are not written
// (protobuf and ClickHouse default them to zero) but count as set. An Append with a method
// that does not match the column's Kind is ignored. Values that would make ClickHouse refuse a
// whole batch, or a proto3 parser a whole message, are fixed on the way in: an enum value
// outside the enum becomes 0, a string longer than a FixedString(N) column is dropped, and
// invalid UTF-8 is replaced by U+FFFD.
type FlowMessage struct {
	HotFields

	schema *Schema
	// state is, per column, what an Append does with it (Schema.enc's op), or opNone when
	// the column is disabled, derived, or non-repeated and already written. Reset copies it
	// from the schema. One byte per column, rather than a bitset, so that the check is one
	// byte load and each column's update its own store.
	state [encSize]op
	// set holds the repeated columns written since Reset (their state stays).
	set columnBitset
	// w is the message: pbwire's writer for one reused buffer.
	w pbwire.Buffer
	// framed is the message Finalize returned, until Reset.
	framed []byte
	// rejected is set by Reject.
	rejected bool
	// sanitized counts values fixed or dropped since NewFlowMessage (kept by Reset).
	sanitized uint64
	// enc is the schema's column table (Schema.enc), copied here so that an Append reads
	// its column's entry with one load less.
	enc [encSize]encInfo
	// datagram holds the DatagramFields of the last flow and their encoding: all the flows
	// of a datagram share them, and Finalize copies the encoding when they did not change
	// (kept by Reset). NewFlowMessage encodes the zero values (to nothing).
	datagram struct {
		fields DatagramFields
		w      pbwire.Buffer
		raw    pbwire.Raw // w's message
	}
}

// initialBufferSize fits a flow with every column set without growing.
const initialBufferSize = 1024

// NewFlowMessage returns a FlowMessage for this schema, ready to fill.
func (s *Schema) NewFlowMessage() *FlowMessage {
	m := &FlowMessage{schema: s, enc: s.enc}
	// Every varint column is written at most once per message: AppendUint writes them
	// without checking the room (AppendVarintFieldReserved).
	m.w.Init(initialBufferSize, varintColumns)
	m.datagram.w.Init(pbwire.ReserveDelimited+datagramRoom+pbwire.RawPad, 0)
	m.encodeDatagram()
	m.Reset()
	return m
}

// Schema returns the schema the message was created for.
func (m *FlowMessage) Schema() *Schema { return m.schema }

// Reset clears the message for the next flow, keeping its buffer.
func (m *FlowMessage) Reset() {
	m.HotFields = HotFields{}
	m.state = m.schema.state
	m.set = columnBitset{}
	m.w.Reset()
	m.framed = nil
	m.rejected = false
}

// Reject marks the flow as refused by enrichment (a classifier rule, or an interface that
// no source knows when such flows are to be dropped): whoever runs the enrichment drops it
// instead of finalizing it. Reset clears the mark.
func (m *FlowMessage) Reject() { m.rejected = true }

// Rejected reports whether Reject was called since Reset.
func (m *FlowMessage) Rejected() bool { return m.rejected }

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
	if m.set.has(k) || (m.state[k] == opNone && m.schema.state[k] != opNone) {
		return true
	}
	return m.HotFields.isSet(k)
}

// The Append methods share one shape: an inlined front (a bounds check and one byte test that
// rejects disabled columns and columns already written: all a disabled column costs), then a
// call that loads the column's entry from the dense table FlowMessage.enc (key pre-encoded,
// kind, limits) and writes the common case with pbwire.Buffer's inlined writers; everything
// else goes to out-of-line slow paths. A method that does not match the column's kind returns
// before marking the column, so that the right method still works.

// skipWord is the word of column k in FlowMessage.set; k is masked so that the index needs no
// bounds check (bitsetWords is at most 2, ColumnLast at most encSize).
func skipWord(k ColumnKey) ColumnKey { return k & (encSize - 1) >> 6 }

// AppendUint sets a KindUint64, KindUint32 (truncated to 32 bits), KindEnum (a value outside
// the enum becomes 0, undefined: ClickHouse would refuse the whole batch) or KindMAC column, or
// a hot scalar column. It is a no-op when the column is disabled or already set.
func (m *FlowMessage) AppendUint(k ColumnKey, v uint64) {
	if k < ColumnLast && m.state[k] != opNone {
		m.appendUint(k, v)
	}
}

func (m *FlowMessage) appendUint(k ColumnKey, v uint64) {
	k &= encSize - 1
	e := &m.enc[k]
	op := m.state[k]
	// The common case in one test: a varint column and a value from 1 to its maximum
	// (2^32-1 for 32-bit columns, the last value for enums), written without a room check
	// or a call.
	if op == opVarint && v-1 < e.max {
		m.w.AppendVarintFieldReserved(e.tag, v)
		m.state[k] = opNone
		return
	}
	switch op {
	case opHot:
		m.state[k] = opNone
		m.HotFields.setUint(k, v)
	case opVarint:
		m.state[k] = opNone
		v &= e.mask
		if v > e.max {
			v = 0 // undefined
			m.sanitized++
		}
		if v != 0 {
			m.w.AppendVarintFieldReserved(e.tag, v)
		}
	}
}

// AppendString sets a KindString or KindBytes column. Strings longer than a FixedString(N)
// column are dropped (ClickHouse would refuse the whole batch); invalid UTF-8 in a KindString
// column is replaced by U+FFFD.
func (m *FlowMessage) AppendString(k ColumnKey, s string) {
	if k < ColumnLast && m.state[k] != opNone {
		m.appendString(k, s)
	}
}

func (m *FlowMessage) appendString(k ColumnKey, s string) {
	e := &m.enc[k&(encSize-1)]
	switch e.op {
	case opString:
		m.state[k&(encSize-1)] = opNone
		if len(s) == 0 {
			return
		}
		if uint64(len(s)) > e.max {
			m.sanitized++
			return
		}
		// Names of 8 to 16 ASCII characters, the most common, with no call; other strings
		// through a leaf first (ASCII under 128 bytes), then the full UTF-8 check.
		if isShortASCII(s) {
			m.w.Grow(pbwire.MaxRoomFieldLen)
			m.w.Commit(m.w.Room().AppendShortStringField(e.tag, s))
			return
		}
		if !m.w.AppendASCIIField(e.tag, s) && !m.w.AppendUTF8Field(e.tag, s) {
			m.sanitized++
		}
	case opBytes:
		m.state[k&(encSize-1)] = opNone
		if len(s) != 0 {
			m.w.AppendStringField(e.tag, s)
		}
	}
}

// AppendBytes sets a KindBytes or KindString column, or a KindMAC column from the 6 bytes
// of the address (other lengths are ignored).
func (m *FlowMessage) AppendBytes(k ColumnKey, b []byte) {
	if k < ColumnLast && m.state[k] != opNone {
		m.appendBytes(k, b)
	}
}

func (m *FlowMessage) appendBytes(k ColumnKey, b []byte) {
	e := &m.enc[k&(encSize-1)]
	switch {
	case e.op == opBytes:
		m.state[k&(encSize-1)] = opNone
		if len(b) != 0 {
			m.w.AppendBytesField(e.tag, b)
		}
	case e.op == opString:
		// Same checks as AppendString; the conversion does not allocate.
		m.appendString(k, unsafe.String(unsafe.SliceData(b), len(b)))
	case e.kind == KindMAC && len(b) == 6:
		m.state[k&(encSize-1)] = opNone
		v := uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
		if v != 0 {
			m.w.AppendVarintField(e.tag, v)
		}
	}
}

// AppendIP sets a KindIP column (16 bytes, IPv4 mapped into IPv6) or a hot address column, or
// adds one address to a KindArrayIP column. Invalid (zero) addresses are ignored.
func (m *FlowMessage) AppendIP(k ColumnKey, a netip.Addr) {
	if k < ColumnLast && m.state[k] != opNone {
		m.appendIP(k, a)
	}
}

func (m *FlowMessage) appendIP(k ColumnKey, a netip.Addr) {
	if !a.IsValid() {
		return
	}
	e := &m.enc[k&(encSize-1)]
	switch e.op {
	case opIP:
		m.state[k&(encSize-1)] = opNone
		lo, hi := addrWords(a)
		m.w.AppendBytes16Field(e.tag, lo, hi)
	case opHotIP:
		m.state[k&(encSize-1)] = opNone
		m.HotFields.setAddr(k, a)
	case opArrayIP:
		m.set[skipWord(k)] |= 1 << (k & 63)
		lo, hi := addrWords(a)
		m.w.AppendBytes16Field(e.tag, lo, hi)
	}
}

// AppendArrayUint32 adds values to a KindArrayUint32 column; each call appends to the array.
// For the hot array columns (DstASPath, SrcCommunities, DstCommunities), the field is set to vs
// (not copied) if it was not set by an Append yet.
func (m *FlowMessage) AppendArrayUint32(k ColumnKey, vs []uint32) {
	if k < ColumnLast && m.state[k] != opNone {
		m.appendArrayUint32(k, vs)
	}
}

func (m *FlowMessage) appendArrayUint32(k ColumnKey, vs []uint32) {
	if len(vs) == 0 {
		return
	}
	e := &m.enc[k&(encSize-1)]
	switch e.op {
	case opArrayUint32:
		m.set[skipWord(k)] |= 1 << (k & 63)
		m.w.AppendPackedUint32Field(e.tag, vs)
	case opHotArray:
		m.state[k&(encSize-1)] = opNone
		m.HotFields.setUint32s(k, vs)
	}
}

// AppendArrayUint64 adds values to a KindArrayUint64 column; each call appends to the array.
func (m *FlowMessage) AppendArrayUint64(k ColumnKey, vs []uint64) {
	if k < ColumnLast && m.state[k] != opNone {
		m.appendArrayUint64(k, vs)
	}
}

func (m *FlowMessage) appendArrayUint64(k ColumnKey, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	if e := &m.enc[k&(encSize-1)]; e.op == opArrayUint64 {
		m.set[skipWord(k)] |= 1 << (k & 63)
		m.w.AppendPackedUint64Field(e.tag, vs)
	}
}

// Finalize appends the hot fields and returns the message framed as one length-delimited
// protobuf message (varint length, then the message), ready to be appended to a batch. The
// bytes live in the FlowMessage's buffer: they stay valid until Reset. Calling Finalize again
// before Reset returns the same bytes.
func (m *FlowMessage) Finalize() []byte {
	if m.framed == nil {
		m.framed = m.finalize() // hot_gen.go
	}
	return m.framed
}

// encodeDatagram encodes the DatagramFields for this flow and the next ones that share them.
//
//go:noinline
func (m *FlowMessage) encodeDatagram() {
	d := &m.datagram
	d.fields = m.DatagramFields
	d.w.Reset()
	d.w.Grow(datagramRoom)
	d.w.Commit(m.DatagramFields.appendTo(d.w.Room(), &m.schema.hotOn))
	d.raw = d.w.Raw()
}

// appendLargeCommunities writes each community as a 12-byte element, as ClickHouse stores it
// (FixedString(12)): the three numbers big-endian, in RFC 8092 order.
func appendLargeCommunities(w *pbwire.Buffer, t pbwire.Tag, lcs []LargeCommunity) {
	for _, lc := range lcs {
		var b [12]byte
		binary.BigEndian.PutUint32(b[0:], lc.ASN)
		binary.BigEndian.PutUint32(b[4:], lc.LocalData1)
		binary.BigEndian.PutUint32(b[8:], lc.LocalData2)
		w.AppendBytesField(t, b[:])
	}
}

// addrWords returns a as 16 bytes, IPv4 mapped into IPv6, in two little-endian words (lo
// the first 8 bytes). IPv4 addresses go through As4: As16's array, built by two 8-byte stores
// and copied with one 16-byte load, makes that load wait for store forwarding to fail.
func addrWords(a netip.Addr) (lo, hi uint64) {
	if a.Is4() {
		a4 := a.As4()
		return 0, ipv4Mapped | uint64(binary.LittleEndian.Uint32(a4[:]))<<32
	}
	a16 := a.As16()
	return binary.LittleEndian.Uint64(a16[:8]), binary.LittleEndian.Uint64(a16[8:])
}

// isShortASCII tells if s has 8 to 16 bytes, all ASCII (so valid UTF-8): two overlapping
// 8-byte loads.
func isShortASCII(s string) bool {
	l := len(s)
	if l < 8 || l > 16 {
		return false
	}
	p := unsafe.Pointer(unsafe.StringData(s))
	return (load64(p)|load64(unsafe.Add(p, l-8)))&0x8080_8080_8080_8080 == 0
}

// store64 stores v little-endian at p (unaligned).
func store64(p unsafe.Pointer, v uint64) {
	binary.LittleEndian.PutUint64((*[8]byte)(p)[:], v)
}

// load64 loads 8 bytes little-endian at p (unaligned).
func load64(p unsafe.Pointer) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(p)[:])
}
