package schema

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"flowzero/pbwire"
)

// validUTF8 replaces each byte of s that is not part of a valid UTF-8 sequence by U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hotMask is the width of the FlowMessage field of narrow hot columns (wider on the wire).
func hotMask(k ColumnKey) uint64 {
	switch k {
	case ColumnSrcNetMask, ColumnDstNetMask:
		return 0xff
	case ColumnSrcVlan, ColumnDstVlan:
		return 0xffff
	}
	return ^uint64(0)
}

func TestDecodeMessageErrors(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	tag := func(k ColumnKey, wt pbwire.WireType) pbwire.Tag { return pbwire.MakeTag(Lookup(k).Field, wt) }
	cases := []struct {
		name string
		msg  []byte
		bad  error
	}{
		{"varint-as-bytes", pbwire.AppendBytesField(nil, tag(ColumnSrcPort, pbwire.Bytes), []byte{1}), ErrBadField},
		{"string-as-varint", pbwire.AppendVarintField(nil, tag(ColumnInIfName, pbwire.Varint), 1), ErrBadField},
		{"short-address", pbwire.AppendBytesField(nil, tag(ColumnSrcAddr, pbwire.Bytes), []byte{192, 0, 2, 1}), ErrBadField},
		{"large-community-11", pbwire.AppendBytesField(nil, tag(ColumnDstLargeCommunities, pbwire.Bytes), make([]byte, 11)), ErrBadField},
		{"array-fixed32", pbwire.AppendFixed32Field(nil, tag(ColumnDstASPath, pbwire.Fixed32), 1), ErrBadField},
		{"packed-truncated", pbwire.AppendBytesField(nil, tag(ColumnDstASPath, pbwire.Bytes), []byte{0x80}), pbwire.ErrTruncated},
		{"truncated", []byte{0x08}, pbwire.ErrTruncated},
		{"length-past-end", []byte{0x22, 0x10, 0}, pbwire.ErrLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.DecodeMessage(tc.msg, func(*Column, any) {})
			if !errors.Is(err, tc.bad) {
				t.Fatalf("DecodeMessage(%x): %v, want %v", tc.msg, err, tc.bad)
			}
		})
	}
	// Unknown field numbers are skipped; unpacked repeated values are accepted.
	msg := pbwire.AppendVarintField(nil, pbwire.MakeTag(999, pbwire.Varint), 5)
	msg = pbwire.AppendVarintField(msg, tag(ColumnDstASPath, pbwire.Varint), 64500)
	var got []any
	if err := s.DecodeMessage(msg, func(c *Column, v any) { got = append(got, v) }); err != nil || len(got) != 1 || got[0] != uint64(64500) {
		t.Fatalf("DecodeMessage: %v, %v", got, err)
	}
}

// FuzzSchemaDecodeMessage feeds arbitrary bytes to DecodeMessage, seeded with flows encoded
// from a real NetFlow v5 capture (both configurations) and the raw capture payload. Whatever
// DecodeMessage accepts must re-encode (through FlowMessage) to a message that decodes to the
// same values.
func FuzzSchemaDecodeMessage(f *testing.F) {
	def := mustNew(f, DefaultConfiguration())
	all := mustNew(f, allColumns())
	pkt, exporter := readNFv5(f)
	for _, s := range []*Schema{def, all} {
		m := s.NewFlowMessage()
		md := newTypicalMetadata(f, s)
		for n := 0; n < 29; n += 7 {
			m.Reset()
			if n%2 == 0 {
				typicalFlow(m, pkt, exporter, n, []uint32{174, 3356}, md)
			} else {
				typicalFlow(m, pkt, exporter, n, []uint32{174, 3356}, nil)
			}
			m.SrcLargeCommunities = []LargeCommunity{{64496, 1, 2}}
			msg, _, _ := pbwire.SplitDelimited(m.Finalize())
			f.Add(append([]byte(nil), msg...))
		}
		m.Reset()
		fill(s, m, false)
		msg, _, _ := pbwire.SplitDelimited(m.Finalize())
		f.Add(append([]byte(nil), msg...))
	}
	f.Add(pkt)
	f.Fuzz(func(t *testing.T, b []byte) {
		type kv struct {
			k ColumnKey
			v any
		}
		var first []kv
		if err := all.DecodeMessage(b, func(c *Column, v any) { first = append(first, kv{c.Key, v}) }); err != nil {
			return
		}
		// Re-encode what was read: non-repeated columns keep their first value.
		m := all.NewFlowMessage()
		want := map[ColumnKey]any{}
		arrays := map[ColumnKey][]uint32{}
		for _, e := range first {
			c := Lookup(e.k)
			switch v := e.v.(type) {
			case uint64:
				if c.Kind == KindArrayUint32 {
					arrays[e.k] = append(arrays[e.k], uint32(v))
					continue
				}
				if c.Kind == KindArrayUint64 {
					m.AppendArrayUint64(e.k, []uint64{v})
					continue
				}
				if _, dup := want[e.k]; !dup {
					want[e.k] = v & hotMask(e.k)
					if c.Kind == KindEnum && v >= uint64(len(c.Enum)) {
						want[e.k] = uint64(0)
					}
				}
				m.AppendUint(e.k, v)
			case string:
				if _, dup := want[e.k]; !dup {
					want[e.k] = validUTF8(v)
					if len(v) > fixedStringSize(c.ClickHouseType) {
						want[e.k] = ""
					}
				}
				m.AppendString(e.k, v)
			case netip.Addr:
				if c.Kind == KindIP {
					if _, dup := want[e.k]; !dup {
						want[e.k] = v
					}
				}
				m.AppendIP(e.k, v)
			case LargeCommunity:
				if e.k == ColumnSrcLargeCommunities {
					m.SrcLargeCommunities = append(m.SrcLargeCommunities, v)
				} else {
					m.DstLargeCommunities = append(m.DstLargeCommunities, v)
				}
			}
		}
		m.DstASPath = arrays[ColumnDstASPath]
		m.SrcCommunities = arrays[ColumnSrcCommunities]
		m.DstCommunities = arrays[ColumnDstCommunities]
		if vs := arrays[ColumnMPLSLabels]; len(vs) > 0 {
			m.AppendArrayUint32(ColumnMPLSLabels, vs)
		}
		msg, rest, err := pbwire.SplitDelimited(m.Finalize())
		if err != nil || len(rest) != 0 {
			t.Fatalf("re-encoded message: %v", err)
		}
		got := map[ColumnKey]any{}
		if err := all.DecodeMessage(msg, func(c *Column, v any) {
			if !c.Kind.Repeated() {
				if _, dup := got[c.Key]; dup {
					t.Errorf("%s twice in the re-encoded message", c.Name)
				}
				got[c.Key] = v
			}
		}); err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		for k, v := range want {
			zero := v == uint64(0) || v == ""
			if g, ok := got[k]; (ok || !zero) && g != v {
				t.Errorf("%s: re-encoded %#v, read %#v", k, g, v)
			}
		}
	})
}
