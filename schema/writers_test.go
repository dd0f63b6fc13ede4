package schema

import (
	"bytes"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"flowzero/pbwire"
)

// FlowMessage writes through pbwire.Buffer (whose fast paths pbwire's tests compare with its
// plain field functions) and adds the columns' rules: limits, sanitizing, hot fields written
// by Finalize. These tests compare every column kind, at every length boundary, byte for byte
// with pbwire's plain field functions.

// singleField resets m, lets fill append one column and returns the message without its
// length prefix.
func singleField(t *testing.T, m *FlowMessage, fill func()) []byte {
	t.Helper()
	m.Reset()
	fill()
	return unframe(t, m.Finalize())
}

func wireTag(k ColumnKey) pbwire.Tag {
	c := Lookup(k)
	return pbwire.MakeTag(c.Field, c.Kind.wireType())
}

func TestFlowMessageStringWriters(t *testing.T) {
	m := mustNew(t, allColumns()).NewFlowMessage()
	var inputs []string
	for l := 0; l <= 300; l++ {
		var b strings.Builder
		for i := range l {
			b.WriteByte(byte('!' + (i*7+l)%90))
		}
		inputs = append(inputs, b.String())
	}
	for l := 1; l <= 20; l++ {
		inputs = append(inputs, strings.Repeat("é", l), strings.Repeat("a", l)+"日本", "x"+strings.Repeat("\U0001F600", l))
		for pos := 0; pos < l; pos++ {
			invalid := []byte(strings.Repeat("b", l))
			invalid[pos] = 0xff
			inputs = append(inputs, string(invalid))
		}
	}
	// One column with a 1-byte key, one with a 2-byte key.
	for _, k := range []ColumnKey{ColumnExporterName, ColumnInIfDescription} {
		for _, s := range inputs {
			before := m.Sanitized()
			got := singleField(t, m, func() { m.AppendString(k, s) })
			var want []byte
			if s != "" {
				want = pbwire.AppendStringField(nil, wireTag(k), validUTF8(s))
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s = %q (%d bytes): got % x, want % x", Lookup(k).Name, s, len(s), got, want)
			}
			if sanitized := m.Sanitized() - before; (sanitized == 1) == utf8.ValidString(s) {
				t.Fatalf("%q: %d values sanitized", s, sanitized)
			}
			// AppendBytes takes the same path for a string column.
			if got := singleField(t, m, func() { m.AppendBytes(k, []byte(s)) }); !bytes.Equal(got, want) {
				t.Fatalf("%s = []byte(%q): got % x, want % x", Lookup(k).Name, s, got, want)
			}
		}
	}
}

func TestFlowMessageVarintWriters(t *testing.T) {
	m := mustNew(t, allColumns()).NewFlowMessage()
	var values []uint64
	for shift := 0; shift < 64; shift += 7 {
		v := uint64(1) << shift
		values = append(values, v-1, v, v+1)
	}
	values = append(values, 1<<32-1, 1<<32, 1<<32+5, 1<<42-1, 1<<42, 1<<63, math.MaxUint64-1, math.MaxUint64)
	cases := []struct {
		k    ColumnKey
		want func(v uint64) uint64
	}{
		{ColumnBytes, func(v uint64) uint64 { return v }},                   // uint64, 1-byte key
		{ColumnSrcPort, func(v uint64) uint64 { return v & 0xffff_ffff }},   // uint32, 1-byte key
		{ColumnInIfSpeed, func(v uint64) uint64 { return v & 0xffff_ffff }}, // uint32, 2-byte key
		{ColumnTimeFlowStart, func(v uint64) uint64 { return v }},           // uint64, 2-byte key
		{ColumnSrcMAC, func(v uint64) uint64 { return v }},
		{ColumnFlowDirection, func(v uint64) uint64 { // enum: 0, 1, 2
			if v > 2 {
				return 0
			}
			return v
		}},
	}
	for _, tc := range cases {
		for _, v := range values {
			got := singleField(t, m, func() { m.AppendUint(tc.k, v) })
			var want []byte
			if w := tc.want(v); w != 0 {
				want = pbwire.AppendVarintField(nil, wireTag(tc.k), w)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s = %d: got % x, want % x", Lookup(tc.k).Name, v, got, want)
			}
			if !m.IsSet(tc.k) {
				t.Fatalf("%s = %d: not set", Lookup(tc.k).Name, v)
			}
		}
	}
	// Hot scalars, written by Finalize (in an order of its own).
	for _, v := range values {
		got := singleField(t, m, func() {
			m.TimeReceived = v
			m.SrcAS = uint32(v)
			m.DstVlan = uint16(v)
		})
		var want []byte
		for _, f := range []struct {
			k ColumnKey
			v uint64
		}{{ColumnTimeReceived, v}, {ColumnSrcAS, uint64(uint32(v))}, {ColumnDstVlan, uint64(uint16(v))}} {
			if f.v != 0 {
				want = pbwire.AppendVarintField(want, wireTag(f.k), f.v)
			}
		}
		if !bytes.Equal(sortFields(t, got), sortFields(t, want)) {
			t.Fatalf("hot fields = %d: got % x, want % x", v, got, want)
		}
	}
}

// sortFields returns the fields of msg sorted by their bytes, to compare messages whose
// fields may come in any order.
func sortFields(t *testing.T, msg []byte) []byte {
	t.Helper()
	var fields [][]byte
	r := pbwire.NewReader(msg)
	for start := 0; r.Next(); start = r.Offset() {
		fields = append(fields, msg[start:r.Offset()])
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	slices.SortFunc(fields, bytes.Compare)
	return bytes.Join(fields, nil)
}

func TestFlowMessageArrayWriters(t *testing.T) {
	m := mustNew(t, allColumns()).NewFlowMessage()
	for l := 0; l <= 40; l++ {
		vs := make([]uint32, l)
		for i := range vs {
			// Every varint length, 1 to 5 bytes.
			vs[i] = uint32(1)<<(7*(i%5)+i%7) - uint32(i%3)
		}
		want := pbwire.AppendPackedUint32Field(nil, wireTag(ColumnMPLSLabels), vs)
		if got := singleField(t, m, func() { m.AppendArrayUint32(ColumnMPLSLabels, vs) }); !bytes.Equal(got, want) {
			t.Fatalf("MPLSLabels %v: got % x, want % x", vs, got, want)
		}
		want = pbwire.AppendPackedUint32Field(nil, wireTag(ColumnDstASPath), vs)
		if got := singleField(t, m, func() { m.DstASPath = vs }); !bytes.Equal(got, want) {
			t.Fatalf("DstASPath %v: got % x, want % x", vs, got, want)
		}
	}
}

func TestFlowMessageAddressWriters(t *testing.T) {
	m := mustNew(t, allColumns()).NewFlowMessage()
	for _, s := range []string{"192.0.2.1", "0.0.0.0", "255.255.255.255", "::", "2001:db8::1", "::ffff:198.51.100.7", "fe80::1%eth0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		a := netip.MustParseAddr(s)
		a16 := a.As16()
		want := pbwire.AppendBytesField(nil, wireTag(ColumnSrcAddrNAT), a16[:])
		if got := singleField(t, m, func() { m.AppendIP(ColumnSrcAddrNAT, a) }); !bytes.Equal(got, want) {
			t.Errorf("SrcAddrNAT %s: got % x, want % x", s, got, want)
		}
		want = pbwire.AppendBytesField(nil, wireTag(ColumnNextHop), a16[:])
		if got := singleField(t, m, func() { m.NextHop = a }); !bytes.Equal(got, want) {
			t.Errorf("NextHop %s: got % x, want % x", s, got, want)
		}
		if got := singleField(t, m, func() { m.AppendIP(ColumnNextHop, a) }); !bytes.Equal(got, want) {
			t.Errorf("AppendIP(NextHop, %s): got % x, want % x", s, got, want)
		}
	}
}

// TestFlowMessageGrowth fills a message far past its initial buffer: long strings and arrays
// take the slow paths, the buffer grows, and every value must survive, framed with a
// multi-byte length.
func TestFlowMessageGrowth(t *testing.T) {
	s := mustNew(t, allColumns())
	m := s.NewFlowMessage()
	for round := range 2 {
		m.Reset()
		want := map[ColumnKey]any{}
		for _, c := range s.Columns() {
			switch c.Kind {
			case KindString:
				if strings.HasPrefix(c.ClickHouseType, "FixedString") {
					continue
				}
				v := strings.Repeat(fmt.Sprintf("%s-%d;", c.Name, round), 200)
				m.AppendString(c.Key, v)
				want[c.Key] = v
			case KindUint64:
				if !c.Hot {
					m.AppendUint(c.Key, math.MaxUint64-uint64(c.Field))
					want[c.Key] = math.MaxUint64 - uint64(c.Field)
				}
			}
		}
		path := make([]uint32, 300)
		for i := range path {
			path[i] = 4_200_000_000 + uint32(i)
		}
		m.DstASPath = path
		m.AppendArrayUint32(ColumnMPLSLabels, path[:100])
		m.AppendArrayUint32(ColumnMPLSLabels, path[100:])
		framed := m.Finalize()
		if len(framed) < 4*initialBufferSize {
			t.Fatalf("message of %d bytes: not past the initial buffer", len(framed))
		}
		got := map[ColumnKey]any{}
		var labels, asPath []uint32
		err := s.DecodeMessage(unframe(t, framed), func(c *Column, v any) {
			switch c.Key {
			case ColumnMPLSLabels:
				labels = append(labels, uint32(v.(uint64)))
			case ColumnDstASPath:
				asPath = append(asPath, uint32(v.(uint64)))
			default:
				got[c.Key] = v
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: got %v, want %v", Lookup(k).Name, got[k], v)
			}
		}
		if fmt.Sprint(labels) != fmt.Sprint(path) || fmt.Sprint(asPath) != fmt.Sprint(path) {
			t.Errorf("arrays: got %d labels and %d AS, want %d", len(labels), len(asPath), len(path))
		}
	}
}

// TestFlowMessageFinalizeTwice checks that Finalize returns the same bytes until Reset, even
// when a value is appended in between (it lands after the framed message, unseen).
func TestFlowMessageFinalizeTwice(t *testing.T) {
	m := mustNew(t, DefaultConfiguration()).NewFlowMessage()
	m.AppendUint(ColumnBytes, 1500)
	m.SrcAS = 64500
	framed := m.Finalize()
	want := append([]byte(nil), framed...)
	m.AppendUint(ColumnPackets, 3)
	m.AppendString(ColumnInIfName, "et-0/0/1")
	if again := m.Finalize(); !bytes.Equal(again, want) || &again[0] != &framed[0] {
		t.Errorf("second Finalize: % x, want % x", again, want)
	}
	if !bytes.Equal(framed, want) {
		t.Errorf("appending after Finalize changed its bytes: % x, want % x", framed, want)
	}
}

// FuzzFlowMessageWriters appends arbitrary strings, bytes, numbers and arrays through the fast
// and slow paths and compares the message with the same fields written by pbwire alone. It
// is seeded with the records of a real NetFlow v5 capture and typical interface names.
func FuzzFlowMessageWriters(f *testing.F) {
	pkt, _ := readNFv5(f)
	for n := 0; 24+48*(n+1) <= len(pkt) && n < 8; n++ {
		r := pkt[24+48*n : 24+48*(n+1)]
		f.Add(string(r[:16]), r[16:], uint64(be32(r[16:]))<<32|uint64(be32(r[20:])))
	}
	f.Add("et-0/0/1", []byte("transit: Cogent"), uint64(100000))
	f.Add("caf\xc3\xa9 \xff", []byte{}, uint64(math.MaxUint64))
	s := mustNew(f, allColumns())
	m := s.NewFlowMessage()
	f.Fuzz(func(t *testing.T, str string, raw []byte, v uint64) {
		vs := make([]uint32, 0, len(raw)/4)
		for i := 0; i+4 <= len(raw); i += 4 {
			vs = append(vs, be32(raw[i:]))
		}
		m.Reset()
		m.AppendString(ColumnExporterName, str)
		m.AppendBytes(ColumnInIfDescription, raw)
		m.AppendUint(ColumnBytes, v)
		m.AppendUint(ColumnSrcPort, v)
		m.AppendUint(ColumnInIfSpeed, v>>7)
		m.AppendArrayUint32(ColumnMPLSLabels, vs)
		m.DstASPath = vs
		m.TimeReceived = v
		got := unframe(t, m.Finalize())

		var want []byte
		if str != "" {
			want = pbwire.AppendStringField(want, wireTag(ColumnExporterName), validUTF8(str))
		}
		if len(raw) != 0 {
			want = pbwire.AppendStringField(want, wireTag(ColumnInIfDescription), validUTF8(string(raw)))
		}
		for _, f := range []struct {
			k ColumnKey
			v uint64
		}{{ColumnBytes, v}, {ColumnSrcPort, v & 0xffff_ffff}, {ColumnInIfSpeed, v >> 7 & 0xffff_ffff}} {
			if f.v != 0 {
				want = pbwire.AppendVarintField(want, wireTag(f.k), f.v)
			}
		}
		want = pbwire.AppendPackedUint32Field(want, wireTag(ColumnMPLSLabels), vs)
		if v != 0 {
			want = pbwire.AppendVarintField(want, wireTag(ColumnTimeReceived), v)
		}
		want = pbwire.AppendPackedUint32Field(want, wireTag(ColumnDstASPath), vs)
		if !bytes.Equal(got, want) {
			t.Fatalf("got % x\nwant % x", got, want)
		}
	})
}

// TestFlowMessageVarintReserve checks AppendUint's unchecked writes (pbwire's
// AppendVarintFieldReserved): with the buffer full up to its length, every varint column at
// its widest value still fits the reserve and decodes back, and whichever writer comes next
// grows the buffer.
func TestFlowMessageVarintReserve(t *testing.T) {
	s := mustNew(t, allColumns())
	frag := mustFragment(t, s, func(m *FlowMessage) { m.AppendString(ColumnInIfName, "et-0/0/1") })
	next := map[string]struct {
		fields int // fields the writer adds
		write  func(m *FlowMessage)
	}{
		"string": {1, func(m *FlowMessage) { m.AppendString(ColumnExporterName, "edge1") }},
		"bytes":  {1, func(m *FlowMessage) { m.AppendBytes(ColumnInIfDescription, []byte("transit")) }},
		"long":   {1, func(m *FlowMessage) { m.AppendString(ColumnDstGeoCity, strings.Repeat("x", 40000)) }},
		"ip":     {1, func(m *FlowMessage) { m.AppendIP(ColumnSrcAddrNAT, netip.MustParseAddr("192.0.2.1")) }},
		// A MAC column is a varint written by a checked writer: the loop below leaves it out.
		"mac":      {1, func(m *FlowMessage) { m.AppendBytes(ColumnSrcMAC, []byte{2, 0, 0, 0, 0, 1}) }},
		"array":    {1, func(m *FlowMessage) { m.AppendArrayUint32(ColumnMPLSLabels, []uint32{16, 17}) }},
		"fragment": {1, func(m *FlowMessage) { m.AppendFragment(frag) }},
		"finalize": {2, func(m *FlowMessage) { m.SrcAS, m.DstASPath = 64500, []uint32{64500}; m.Finalize() }},
	}
	for name, w := range next {
		for room := range 20 {
			m := s.NewFlowMessage()
			fillTo(t, m, room)
			start := m.w.Len()
			want := map[int]uint64{}
			for k := ColumnKey(1); k < ColumnLast; k++ {
				if m.state[k] == opVarint && (name != "mac" || k != ColumnSrcMAC) {
					m.AppendUint(k, m.enc[k].max)
					want[Lookup(k).Field] = m.enc[k].max
				}
			}
			w.write(m)
			if m.w.Available() < 0 {
				t.Fatalf("%s, room %d: the buffer did not grow", name, room)
			}
			r := pbwire.NewReader(m.w.Payload()[start:])
			got, fields := map[int]uint64{}, 0
			for r.Next() {
				if _, ok := want[int(r.Field().Num)]; ok {
					got[int(r.Field().Num)] = r.Field().Varint
				}
				fields++
			}
			if r.Err() != nil || fmt.Sprint(got) != fmt.Sprint(want) || fields != len(want)+w.fields {
				t.Fatalf("%s, room %d: read %d fields, %v (%v), want %d, %v", name, room, fields, got, r.Err(), len(want)+w.fields, want)
			}
		}
	}
}
