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
// byte test; a non-repeated column is written once (later appends are ignored, so a decoder can
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
	// Set by the decoder; network attributes given per VRF are looked up in the flow's VRFs.
	IngressVRFID, EgressVRFID uint32

	// Set by the RIB (or by a decoder that carries them, such as sFlow's extended gateway).
	DstASPath           []uint32
	SrcCommunities      []uint32 // standard communities, ASN<<16 | value
	DstCommunities      []uint32
	SrcLargeCommunities []LargeCommunity
	DstLargeCommunities []LargeCommunity

	schema *Schema
	// state is, per column, what an Append does with it (Schema.enc's op), or opNone when
	// the column is disabled, derived, or non-repeated and already written. Reset copies it
	// from the schema. One byte per column, rather than a bitset, so that the check is one
	// byte load and each column's update its own store: a shared bitset word made every
	// Append wait for the previous one's read-modify-write.
	state [encSize]op
	// set holds the repeated columns written since Reset (their state stays).
	set columnBitset
	// buf is the buffer and n the end of the message: the writers store into buf[n:] and
	// move n, so that a field costs one integer store instead of a new slice header (three
	// words and a write barrier check). Bytes past n are scratch: the fast writers store 8
	// bytes at a time and may leave garbage there. buf[:ReserveDelimited] is room for the
	// length prefix written by Finalize. Past len(buf), cap(buf) keeps varintReserve bytes
	// for the varint columns: see varintReserve.
	buf []byte
	n   int
	// framed is 1 + the start of the framed message once Finalize ran (0 before), and
	// framedEnd its end: Finalize returns buf[framed-1:framedEnd] again until Reset.
	framed, framedEnd int
	// sanitized counts values fixed or dropped since NewFlowMessage (kept by Reset).
	sanitized uint64
	// enc is the schema's column table (Schema.enc), copied here so that an Append reads
	// its column's entry with one load less.
	enc [encSize]encInfo
	// exporter holds the encoded TimeReceived, SamplingRate and ExporterAddress of the last
	// flow: all the flows of a datagram share them, and Finalize copies them from here when
	// they did not change (kept by Reset).
	exporter exporterFields
}

// exporterFields is the encoding of the hot fields a datagram's flows share. Its zero value
// is right: zero values encode to nothing.
type exporterFields struct {
	time, rate uint64
	addr       netip.Addr
	n          int
	data       [exporterFieldsRoom]byte
}

// exporterFieldsRoom holds the three fields (two varints of at most 2+10 bytes, an address
// of 2+1+16), rounded up to the 16-byte copy steps.
const exporterFieldsRoom = 48

// initialBufferSize fits a flow with every column set without growing.
const initialBufferSize = 1024

// varintReserve is the room kept past len(m.buf), inside its capacity, for the varint
// columns: every writer but appendUint checks its room against len(m.buf), so that after it
// at least varintReserve bytes are left, and appendUint writes without checking. It can: a
// varint column is written once per flow (its state then turns opNone), in at most 12 bytes
// (a 2-byte key and a 10-byte varint, the 8-byte key store included), so all of them fit.
// appendUint thereby calls nothing and needs no stack frame: about 90 instructions less per
// flow. m.n may go past len(m.buf) into the reserve; the next checked writer then finds no
// room and grows the buffer.
const varintReserve = 12 * maxVarintColumns

// maxVarintColumns bounds the columns appendUint writes (checked at init).
const maxVarintColumns = 64

// wideRoom is the room the scalar writers need past n: a 2-byte key and a 10-byte varint,
// rounded up for the 8-byte stores.
const wideRoom = 16

// NewFlowMessage returns a FlowMessage for this schema, ready to fill.
func (s *Schema) NewFlowMessage() *FlowMessage {
	m := &FlowMessage{
		schema: s,
		buf:    make([]byte, initialBufferSize, initialBufferSize+varintReserve),
		enc:    s.enc,
	}
	m.Reset()
	return m
}

// Schema returns the schema the message was created for.
func (m *FlowMessage) Schema() *Schema { return m.schema }

// Reset clears the message for the next flow, keeping its buffer.
func (m *FlowMessage) Reset() {
	// Field by field: assigning a whole FlowMessage{...} builds it on the stack and copies it
	// back, a few hundred bytes with pointers in them, for every flow.
	m.TimeReceived, m.SamplingRate = 0, 0
	m.ExporterAddress, m.SrcAddr, m.DstAddr, m.NextHop = netip.Addr{}, netip.Addr{}, netip.Addr{}, netip.Addr{}
	m.InIf, m.OutIf, m.SrcAS, m.DstAS = 0, 0, 0, 0
	m.SrcNetMask, m.DstNetMask, m.SrcVlan, m.DstVlan = 0, 0, 0, 0
	m.IngressVRFID, m.EgressVRFID = 0, 0
	m.DstASPath, m.SrcCommunities, m.DstCommunities = nil, nil, nil
	m.SrcLargeCommunities, m.DstLargeCommunities = nil, nil
	m.state = m.schema.state
	m.set = columnBitset{}
	m.n, m.framed = pbwire.ReserveDelimited, 0
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
	if m.set.has(k) || (m.state[k] == opNone && m.schema.state[k] != opNone) {
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
	case ColumnIngressVRFID:
		return m.IngressVRFID != 0
	case ColumnEgressVRFID:
		return m.EgressVRFID != 0
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

// The Append methods share one shape: an inlined front (a bounds check and one byte test that
// rejects disabled columns and columns already written: all a disabled column costs), then a
// call that loads the column's entry from the dense table FlowMessage.enc (key pre-encoded,
// kind, limits) and writes the common case straight-line; everything else goes to an
// out-of-line slow path (appendUint, the most used, keeps its rare cases inline so that it
// calls nothing: see varintReserve). A method that does not match the column's kind returns
// before marking the column, so that the right method still works.
//
// The writers are schema's own rather than pbwire's field functions, which take and return
// a slice: here that would cost a slice header store (three words and a write barrier check)
// per field. They store into the buffer at m.n, which always has len == cap, through a
// pointer once the room is checked (no bounds checks, no slice header): the key (at most 2
// bytes) with one 8-byte store and the varint behind it in a 16-byte window; short strings
// with two overlapping 8-byte loads and stores that also check for ASCII. Varints keep a
// byte loop, inlined so that each call site has its own branches: a branch-free encoding
// (bit length, then shifts and masks) measured 40% slower for the whole flow, whether
// called or inlined in Finalize's loop, and a call to a shared encoder (one set of branches
// for all columns) lost what the pointer stores gained. Long values and a full buffer go to pbwire, whose
// result the message adopts (adopt). TestFlowMessage*Writers compare every path with pbwire
// byte for byte.

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
	// (2^32-1 for 32-bit columns, the last value for enums). It writes the field in place
	// with no room check (varintReserve) and no call (putVarintField written out: a second
	// call per field costs more than the encoding).
	if op == opVarint && v-1 < e.max {
		// n is read once, before the stores: read after them, it would have to wait until
		// the CPU knows that they do not alias it.
		n := m.n
		m.n = n + putVarintAt(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.buf)), n), e.tag, v)
		m.state[k] = opNone
		return
	}
	// Everything else, still without calls: hot columns, zero values, values out of range.
	switch op {
	case opHot:
		m.state[k] = opNone
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
		case ColumnIngressVRFID:
			m.IngressVRFID = uint32(v)
		case ColumnEgressVRFID:
			m.EgressVRFID = uint32(v)
		}
	case opVarint:
		m.state[k] = opNone
		v &= e.mask
		if v > e.max {
			v = 0 // undefined
			m.sanitized++
		}
		if v != 0 {
			n := m.n
			m.n = n + putVarintAt(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.buf)), n), e.tag, v)
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
		// putStringField written out, as in appendUint, with the UTF-8 check done by the
		// copy: most strings are short ASCII names.
		n := m.n
		if len(s) >= 0x80 || len(m.buf)-n < wideRoom+len(s) {
			m.appendStringSlow(e.tag, s)
			return
		}
		// The checks above leave room for 8 bytes past the string: the stores below need
		// no bounds checks.
		kl := e.tag.Len()
		p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.buf)), n)
		store64(p, uint64(e.tag)&0xffff|uint64(len(s))<<(8*kl&63))
		h := kl + 1
		// Strings of 8 to 16 bytes (most names) are copied with two overlapping 8-byte
		// loads and stores, straight-line; copyASCII does the others.
		var ascii bool
		if l := len(s); l >= 8 && l <= 16 {
			src := unsafe.Pointer(unsafe.StringData(s))
			w0, w1 := load64(src), load64(unsafe.Add(src, l-8))
			store64(unsafe.Add(p, h), w0)
			store64(unsafe.Add(p, h+l-8), w1)
			ascii = (w0|w1)&0x8080_8080_8080_8080 == 0
		} else {
			ascii = copyASCII(m.buf[n+h:], s)
		}
		if !ascii && !utf8.ValidString(s) {
			m.appendStringSlow(e.tag, s)
			return
		}
		m.n = n + h + len(s)
	case opBytes:
		m.state[k&(encSize-1)] = opNone
		if len(s) != 0 {
			m.putStringField(e.tag, s)
		}
	}
}

// appendStringSlow appends string field s when it is long, does not fit the buffer or is
// not valid UTF-8 (each invalid byte is then replaced by U+FFFD and counted).
//
//go:noinline
func (m *FlowMessage) appendStringSlow(t pbwire.Tag, s string) {
	if !isASCII(s) && !utf8.ValidString(s) {
		m.sanitized++
		m.adopt(appendValidUTF8Field(m.buf[:m.n], t, s))
		return
	}
	m.adopt(pbwire.AppendStringField(m.buf[:m.n], t, s))
}

// copyASCII copies s (0 < len(s)) to the start of dst and tells if s is plain ASCII. It
// works 8 bytes at a time and may write up to 8 bytes past len(s): dst must have room for
// len(s)+8 bytes. Strings under 8 bytes are assembled from overlapping loads into one word:
// no call to memmove, no byte loop.
func copyASCII(dst []byte, s string) bool {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	n := len(b)
	var acc uint64
	switch {
	case n >= 8:
		i := 0
		for ; i+8 <= n; i += 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			acc |= w
			binary.LittleEndian.PutUint64(dst[i:], w)
		}
		if i < n {
			w := binary.LittleEndian.Uint64(b[n-8:])
			acc |= w
			binary.LittleEndian.PutUint64(dst[n-8:], w)
		}
	case n >= 4:
		acc = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<(8*(n-4))
		binary.LittleEndian.PutUint64(dst, acc)
	default:
		acc = uint64(b[0]) | uint64(b[n/2])<<(8*(n/2)) | uint64(b[n-1])<<(8*(n-1))
		binary.LittleEndian.PutUint64(dst, acc)
	}
	return acc&0x8080_8080_8080_8080 == 0
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
			m.putStringField(e.tag, unsafe.String(unsafe.SliceData(b), len(b)))
		}
	case e.op == opString:
		// Same checks as AppendString; the conversion does not allocate.
		m.appendString(k, unsafe.String(unsafe.SliceData(b), len(b)))
	case e.kind == KindMAC && len(b) == 6:
		m.state[k&(encSize-1)] = opNone
		v := uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
		if v != 0 {
			m.putVarintField(e.tag, v)
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
	w, bit := skipWord(k), uint64(1)<<(k&63)
	e := &m.enc[k&(encSize-1)]
	switch e.op {
	case opIP:
		m.state[k&(encSize-1)] = opNone
		m.putIPField(e.tag, a)
	case opHotIP:
		m.state[k&(encSize-1)] = opNone
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
		m.putIPField(e.tag, a)
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
	w, bit := skipWord(k), uint64(1)<<(k&63)
	e := &m.enc[k&(encSize-1)]
	switch e.op {
	case opArrayUint32:
		m.set[w] |= bit
		m.putPackedUint32Field(e.tag, vs)
	case opHotArray:
		m.state[k&(encSize-1)] = opNone
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
		m.adopt(pbwire.AppendPackedUint64Field(m.buf[:m.n], e.tag, vs))
	}
}

// hotRoom is the room Finalize reserves for the hot scalar and address fields: 12 varints
// of at most 2+10 bytes, 4 addresses of at most 2+1+16 bytes, and 8 bytes of store overrun.
const hotRoom = 12*12 + 4*19 + 8

// Finalize appends the hot fields and returns the message framed as one length-delimited
// protobuf message (varint length, then the message), ready to be appended to a batch. The
// bytes live in the FlowMessage's buffer: they stay valid until Reset. Calling Finalize again
// before Reset returns the same bytes.
func (m *FlowMessage) Finalize() []byte {
	if m.framed != 0 {
		return m.buf[m.framed-1 : m.framedEnd : m.framedEnd]
	}
	if len(m.buf)-m.n < hotRoom {
		m.grow(hotRoom)
	}
	// Hot scalars and addresses: one room check above, then straight-line code, each field
	// with its own branches (a loop over the fields would share one set of branches between
	// fields of different lengths, and mispredict). A disabled column's value is masked to
	// zero (hotKey.on) and, like a zero value, not written.
	hk := &m.schema.hotKeys
	b, i := unsafe.Pointer(unsafe.SliceData(m.buf)), m.n
	if x := &m.exporter; m.TimeReceived == x.time && m.SamplingRate == x.rate && m.ExporterAddress == x.addr {
		// The same datagram as the last flow: copy its encoding, straight-line (hotRoom
		// covers the whole array). 32 bytes hold it unless the time or rate is very large.
		d := (*[exporterFieldsRoom]byte)(unsafe.Add(b, i))
		copy(d[:32], x.data[:32])
		if x.n > 32 {
			copy(d[32:], x.data[32:])
		}
		i += x.n
	} else {
		i = m.putExporterFields(i)
	}
	i = putHotUint(b, i, &hk[hotSrcAS], uint64(m.SrcAS))
	i = putHotUint(b, i, &hk[hotDstAS], uint64(m.DstAS))
	i = putHotUint(b, i, &hk[hotInIf], uint64(m.InIf))
	i = putHotUint(b, i, &hk[hotOutIf], uint64(m.OutIf))
	i = putHotUint(b, i, &hk[hotSrcNetMask], uint64(m.SrcNetMask))
	i = putHotUint(b, i, &hk[hotDstNetMask], uint64(m.DstNetMask))
	i = putHotUint(b, i, &hk[hotSrcVlan], uint64(m.SrcVlan))
	i = putHotUint(b, i, &hk[hotDstVlan], uint64(m.DstVlan))
	i = putHotUint(b, i, &hk[hotIngressVRFID], uint64(m.IngressVRFID))
	i = putHotUint(b, i, &hk[hotEgressVRFID], uint64(m.EgressVRFID))
	if addrLayoutOK {
		i = putHotAddr(b, i, &hk[hotSrcAddr], &m.SrcAddr)
		i = putHotAddr(b, i, &hk[hotDstAddr], &m.DstAddr)
		i = putHotAddr(b, i, &hk[hotNextHop], &m.NextHop)
	} else {
		i = m.putHotAddrsAs16(i)
	}
	m.n = i
	// The AS path, set for most flows, without putPackedUint32Field's frame.
	if len(m.DstASPath) != 0 && hk[hotDstASPath].on != 0 && !m.putPacked(hk[hotDstASPath].tag, m.DstASPath) {
		m.adopt(pbwire.AppendPackedUint32Field(m.buf[:m.n], hk[hotDstASPath].tag, m.DstASPath))
	}
	if len(m.SrcCommunities) != 0 && hk[hotSrcCommunities].on != 0 {
		m.putPackedUint32Field(hk[hotSrcCommunities].tag, m.SrcCommunities)
	}
	if len(m.DstCommunities) != 0 && hk[hotDstCommunities].on != 0 {
		m.putPackedUint32Field(hk[hotDstCommunities].tag, m.DstCommunities)
	}
	if len(m.SrcLargeCommunities) != 0 && hk[hotSrcLargeCommunities].on != 0 {
		m.adopt(appendLargeCommunities(m.buf[:m.n], hk[hotSrcLargeCommunities].tag, m.SrcLargeCommunities))
	}
	if len(m.DstLargeCommunities) != 0 && hk[hotDstLargeCommunities].on != 0 {
		m.adopt(appendLargeCommunities(m.buf[:m.n], hk[hotDstLargeCommunities].tag, m.DstLargeCommunities))
	}
	// The length prefix goes into the room reserved at the front, right before the message:
	// one or two bytes for every flow but those with very long strings or arrays.
	var start int
	f := m.buf[:pbwire.ReserveDelimited]
	switch l := m.n - pbwire.ReserveDelimited; {
	case l < 1<<7:
		start = pbwire.ReserveDelimited - 1
		f[start] = byte(l)
	case l < 1<<14:
		start = pbwire.ReserveDelimited - 2
		f[start], f[start+1] = byte(l)|0x80, byte(l>>7)
	default:
		start = m.n - len(pbwire.FinishDelimited(m.buf[:m.n], 0))
	}
	m.framed, m.framedEnd = start+1, m.n
	return m.buf[start:m.n:m.n]
}

// putExporterFields writes TimeReceived, SamplingRate and ExporterAddress at m.buf[i:] (room
// checked by Finalize), keeps their encoding for the next flows, and returns the new end.
//
//go:noinline
func (m *FlowMessage) putExporterFields(i int) int {
	hk := &m.schema.hotKeys
	b, start := unsafe.Pointer(unsafe.SliceData(m.buf)), i
	i = putHotUint(b, i, &hk[hotTimeReceived], m.TimeReceived)
	i = putHotUint(b, i, &hk[hotSamplingRate], m.SamplingRate)
	if h := &hk[hotExporterAddress]; h.on != 0 && m.ExporterAddress.IsValid() {
		binary.LittleEndian.PutUint64(m.buf[i:], h.key)
		a16 := m.ExporterAddress.As16()
		i += int(h.len) + 1 + copy(m.buf[i+int(h.len)+1:], a16[:])
	}
	x := &m.exporter
	x.time, x.rate, x.addr, x.n = m.TimeReceived, m.SamplingRate, m.ExporterAddress, i-start
	copy(x.data[:], m.buf[start:i])
	return i
}

// putHotUint stores hot varint field h = v at b+i if v is not zero and the column
// enabled, and returns the new end. It is small enough to be inlined: each call site gets its
// own branches. Finalize checked the room (hotRoom).
func putHotUint(b unsafe.Pointer, i int, h *hotKey, v uint64) int {
	if v &= h.on; v != 0 {
		i += putVarintAt(unsafe.Add(b, i), h.tag, v)
	}
	return i
}

// putHotAddr stores hot address field h = a at b+i if a is valid and the column enabled,
// and returns the new end. Inlined, as putHotUint (a loop over the four addresses went
// through an array of pointers built on the stack, whose loads waited on its stores). It
// reads the address's halves as putAddr does: Finalize takes another path when addrLayoutOK
// is false.
func putHotAddr(b unsafe.Pointer, i int, h *hotKey, a *netip.Addr) int {
	if h.on != 0 && a.IsValid() {
		p := unsafe.Add(b, i)
		store64(p, h.key)
		w := (*[2]uint64)(unsafe.Pointer(a))
		q := (*[16]byte)(unsafe.Add(p, h.len+1))
		binary.BigEndian.PutUint64(q[:8], w[0])
		binary.BigEndian.PutUint64(q[8:], w[1])
		i += int(h.len) + 17
	}
	return i
}

// putHotAddrsAs16 is putHotAddr for the three flow addresses through As16, for a netip.Addr
// layout putHotAddr does not know (addrLayoutOK false).
func (m *FlowMessage) putHotAddrsAs16(i int) int {
	hk := &m.schema.hotKeys
	for j, a := range [...]netip.Addr{m.SrcAddr, m.DstAddr, m.NextHop} {
		if h := &hk[hotSrcAddr+j]; h.on != 0 && a.IsValid() {
			binary.LittleEndian.PutUint64(m.buf[i:], h.key)
			a16 := a.As16()
			i += int(h.len) + 1 + copy(m.buf[i+int(h.len)+1:], a16[:])
		}
	}
	return i
}

// putVarintAt stores key t and varint v at p, which must have wideRoom bytes of room, and
// returns their size: the key with one 8-byte store, the varint behind it with a byte loop
// whose indexes are masked into the 16-byte window (no bounds checks). It is small enough to
// be inlined, so that each call site gets its own branches.
func putVarintAt(p unsafe.Pointer, t pbwire.Tag, v uint64) int {
	store64(p, uint64(t))
	b := (*[wideRoom]byte)(p)
	i := t.Len()
	for v >= 0x80 {
		b[i&(wideRoom-1)] = byte(v) | 0x80
		v >>= 7
		i++
	}
	b[i&(wideRoom-1)] = byte(v)
	return i + 1
}

// store64 stores v little-endian at p (unaligned): the writers check the room first, and
// then write through a pointer rather than a slice to skip the bounds checks.
func store64(p unsafe.Pointer, v uint64) {
	binary.LittleEndian.PutUint64((*[8]byte)(p)[:], v)
}

// load64 loads 8 bytes little-endian at p (unaligned).
func load64(p unsafe.Pointer) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(p)[:])
}

// putAddr stores a as 16 bytes (IPv4 mapped into IPv6) at the start of b.
//
// As16 returns the address through the stack as two 8-byte stores, which the compiler then
// copies with one 16-byte load: that load waits for store forwarding to fail, the most
// expensive part of writing an address. putAddr reads the two 64-bit halves netip.Addr holds
// instead, when addrLayoutOK says (checked once at init against As16) that the layout is the
// one expected, and falls back to As16 otherwise.
func putAddr(b []byte, a *netip.Addr) {
	b = b[:16]
	if addrLayoutOK {
		w := (*[2]uint64)(unsafe.Pointer(a))
		binary.BigEndian.PutUint64(b, w[0])
		binary.BigEndian.PutUint64(b[8:], w[1])
		return
	}
	a16 := a.As16()
	copy(b, a16[:])
}

// addrLayoutOK tells if a netip.Addr starts with its address as two uint64 (high half first),
// IPv4 held as IPv4-mapped IPv6, as in Go's net/netip since Go 1.18.
var addrLayoutOK = func() bool {
	if unsafe.Sizeof(netip.Addr{}) < 16 {
		return false
	}
	for _, s := range []string{"192.0.2.1", "2001:db8::1:2:3:4", "::ffff:198.51.100.7", "fe80::1%eth0", "0.0.0.0", "::"} {
		a := netip.MustParseAddr(s)
		w := (*[2]uint64)(unsafe.Pointer(&a))
		var got [16]byte
		binary.BigEndian.PutUint64(got[:], w[0])
		binary.BigEndian.PutUint64(got[8:], w[1])
		if got != a.As16() {
			return false
		}
	}
	return true
}()

// putVarintField appends a varint field (v not zero).
func (m *FlowMessage) putVarintField(t pbwire.Tag, v uint64) {
	n := m.n
	if len(m.buf)-n < wideRoom {
		m.putFieldSlow(t, v, "")
		return
	}
	m.n = n + putVarintAt(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.buf)), n), t, v)
}

// putFieldSlow appends, with pbwire, a varint field v (s empty) or a string field s (long,
// or past the buffer's room), growing the buffer. It is kept out of line so that the fast
// paths need no stack frame for it.
//
//go:noinline
func (m *FlowMessage) putFieldSlow(t pbwire.Tag, v uint64, s string) {
	if len(s) == 0 {
		m.adopt(pbwire.AppendVarintField(m.buf[:m.n], t, v))
		return
	}
	m.adopt(pbwire.AppendStringField(m.buf[:m.n], t, s))
}

// putStringField appends a string or bytes field.
func (m *FlowMessage) putStringField(t pbwire.Tag, s string) {
	n := m.n
	if len(s) >= 0x80 || len(m.buf)-n < wideRoom+len(s) {
		m.putFieldSlow(t, 0, s)
		return
	}
	kl := t.Len()
	binary.LittleEndian.PutUint64(m.buf[n:], uint64(t)&0xffff|uint64(len(s))<<(8*kl&63))
	h := n + kl + 1
	m.n = h + copy(m.buf[h:], s)
}

// putIPField appends a 16-byte address field, IPv4 mapped into IPv6.
func (m *FlowMessage) putIPField(t pbwire.Tag, a netip.Addr) {
	if len(m.buf)-m.n < wideRoom+16 {
		m.grow(wideRoom + 16)
	}
	n, kl := m.n, int(t.Len())
	binary.LittleEndian.PutUint64(m.buf[n:], uint64(t)&0xffff|16<<(8*kl&63))
	putAddr(m.buf[n+kl+1:], &a)
	m.n = n + kl + 17
}

// maxFastPacked is the longest array putPackedUint32Field writes with a one-byte length
// reserved up front: 25 values of at most 5 bytes stay under 128 bytes.
const maxFastPacked = 25

// packedWindow is the room putPackedUint32Field needs for its fast path: a power of two
// above the longest field it writes there.
const packedWindow = 256

// putPackedUint32Field appends a packed repeated uint32 field (vs not empty).
func (m *FlowMessage) putPackedUint32Field(t pbwire.Tag, vs []uint32) {
	if !m.putPacked(t, vs) {
		m.adopt(pbwire.AppendPackedUint32Field(m.buf[:m.n], t, vs))
	}
}

// putPacked writes a short packed repeated uint32 field (vs not empty: AS paths,
// communities, MPLS stacks) in one pass, without sizing the values first: a one-byte length
// is reserved and filled in afterwards. It returns false, having written nothing, when the
// array is long or the buffer short. It calls nothing, so it needs no stack frame.
func (m *FlowMessage) putPacked(t pbwire.Tag, vs []uint32) bool {
	n := m.n
	if len(vs) > maxFastPacked || len(m.buf)-n < packedWindow {
		return false
	}
	// The indexes into the window are masked: no bounds checks (the field takes at most
	// 2+1+5*maxFastPacked bytes, and 8 for the key store).
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(m.buf)), n)
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
	m.n = n + i
	return true
}

// adopt makes out, the message appended to by a pbwire function from m.buf[:m.n], the
// message: pbwire may have moved it to a larger array, and varintReserve must stay past
// len(m.buf).
//
// adopt and grow are kept out of line: inlined into Finalize's call sites, they spread its
// straight-line path over more code and made the whole flow 5 to 15% slower.
//
//go:noinline
func (m *FlowMessage) adopt(out []byte) {
	if cap(out)-len(out) < varintReserve {
		m.buf, m.n = out, len(out)
		m.grow(0)
		return
	}
	m.buf, m.n = out[:cap(out)-varintReserve], len(out)
}

// grow makes room for need bytes past m.n, and varintReserve past that. Only flows with very
// long strings or arrays get here: initialBufferSize holds a flow with every column set.
//
//go:noinline
func (m *FlowMessage) grow(need int) {
	l := max(2*len(m.buf), m.n+need)
	nb := make([]byte, l, l+varintReserve)
	copy(nb, m.buf[:m.n])
	m.buf = nb
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
