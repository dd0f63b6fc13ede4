package schema

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/pbwire"
)

// allColumns is a configuration with every column enabled.
func allColumns() Configuration {
	var cfg Configuration
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if !Lookup(k).Default {
			cfg.Enabled = append(cfg.Enabled, Lookup(k).Name)
		}
	}
	return cfg
}

func mustNew(t testing.TB, cfg Configuration) *Schema {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// compile parses the schema's .proto with protocompile and returns the FlowMessage descriptor.
func compile(t testing.TB, s *Schema) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{
		Resolver: &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{
			"flows.proto": s.ProtoDefinition(),
		})},
	}
	files, err := c.Compile(context.Background(), "flows.proto")
	if err != nil {
		t.Fatalf("compile generated .proto: %v\n%s", err, s.ProtoDefinition())
	}
	md := files[0].Messages().ByName("FlowMessage")
	if md == nil {
		t.Fatal("no FlowMessage in the generated .proto")
	}
	return md
}

// unframe cuts the length prefix of a Finalize result and checks that it covers the rest.
func unframe(t testing.TB, b []byte) []byte {
	t.Helper()
	msg, rest, err := pbwire.SplitDelimited(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("SplitDelimited: %v, %d bytes left", err, len(rest))
	}
	return msg
}

// testValue is a distinct, kind-appropriate value for column c; repeated columns get a slice.
func testValue(c *Column) any {
	f := uint64(c.Field)
	switch c.Key {
	case ColumnSrcNetMask, ColumnDstNetMask:
		return uint64(8 + f)
	case ColumnSrcVlan, ColumnDstVlan:
		return uint64(4000 + f)
	case ColumnSrcCountry, ColumnDstCountry:
		return "FR"
	}
	switch c.Kind {
	case KindUint64:
		return 1_700_000_000_000 + f
	case KindUint32:
		return uint64(100_000 + f)
	case KindEnum:
		return uint64(len(c.Enum) - 1)
	case KindMAC:
		return uint64(0x02_42_ac_11_00_00) + f
	case KindString:
		return fmt.Sprintf("%s value é", c.Name)
	case KindBytes:
		return []byte{byte(f), 0, 0xff}
	case KindIP:
		if f%2 == 0 {
			return netip.AddrFrom4([4]byte{192, 0, 2, byte(f)})
		}
		return netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", f))
	case KindArrayUint32:
		return []uint64{f, 65536 + f, 1 << 31}
	case KindArrayUint64:
		return []uint64{f, 1 << 40}
	case KindArrayIP:
		return []netip.Addr{netip.MustParseAddr("2001:db8:1::1"), netip.MustParseAddr("2001:db8:2::2")}
	case KindArrayLargeCommunity:
		return []LargeCommunity{{ASN: 64496, LocalData1: uint32(f), LocalData2: 7}, {ASN: 4200000000, LocalData1: 1, LocalData2: 2}}
	}
	return nil
}

func toUint32s(vs []uint64) []uint32 {
	out := make([]uint32, len(vs))
	for i, v := range vs {
		out[i] = uint32(v)
	}
	return out
}

// fill sets every on-wire column of s in m to testValue, hot columns through their struct
// fields when direct is true and through the Append methods otherwise, and returns the
// expected values by column.
func fill(s *Schema, m *FlowMessage, direct bool) map[ColumnKey]any {
	want := map[ColumnKey]any{}
	for _, c := range s.WireColumns() {
		v := testValue(c)
		want[c.Key] = v
		if c.Hot && direct {
			setHot(m, c.Key, v)
			continue
		}
		switch v := v.(type) {
		case uint64:
			m.AppendUint(c.Key, v)
		case string:
			m.AppendString(c.Key, v)
		case []byte:
			m.AppendBytes(c.Key, v)
		case netip.Addr:
			m.AppendIP(c.Key, v)
		case []uint64:
			if c.Kind == KindArrayUint32 {
				// Two calls: arrays accumulate (hot arrays keep the first).
				if c.Hot {
					m.AppendArrayUint32(c.Key, toUint32s(v))
				} else {
					m.AppendArrayUint32(c.Key, toUint32s(v[:1]))
					m.AppendArrayUint32(c.Key, toUint32s(v[1:]))
				}
			} else {
				m.AppendArrayUint64(c.Key, v)
			}
		case []netip.Addr:
			for _, a := range v {
				m.AppendIP(c.Key, a)
			}
		case []LargeCommunity:
			setHot(m, c.Key, v)
		}
	}
	return want
}

func setHot(m *FlowMessage, k ColumnKey, v any) {
	switch k {
	case ColumnTimeReceived:
		m.TimeReceived = v.(uint64)
	case ColumnSamplingRate:
		m.SamplingRate = v.(uint64)
	case ColumnExporterAddress:
		m.ExporterAddress = v.(netip.Addr)
	case ColumnSrcAddr:
		m.SrcAddr = v.(netip.Addr)
	case ColumnDstAddr:
		m.DstAddr = v.(netip.Addr)
	case ColumnNextHop:
		m.NextHop = v.(netip.Addr)
	case ColumnSrcAS:
		m.SrcAS = uint32(v.(uint64))
	case ColumnDstAS:
		m.DstAS = uint32(v.(uint64))
	case ColumnInIf:
		m.InIf = uint32(v.(uint64))
	case ColumnOutIf:
		m.OutIf = uint32(v.(uint64))
	case ColumnSrcNetMask:
		m.SrcNetMask = uint8(v.(uint64))
	case ColumnDstNetMask:
		m.DstNetMask = uint8(v.(uint64))
	case ColumnSrcVlan:
		m.SrcVlan = uint16(v.(uint64))
	case ColumnDstVlan:
		m.DstVlan = uint16(v.(uint64))
	case ColumnIngressVRFID:
		m.IngressVRFID = uint32(v.(uint64))
	case ColumnEgressVRFID:
		m.EgressVRFID = uint32(v.(uint64))
	case ColumnDstASPath:
		m.DstASPath = toUint32s(v.([]uint64))
	case ColumnSrcCommunities:
		m.SrcCommunities = toUint32s(v.([]uint64))
	case ColumnDstCommunities:
		m.DstCommunities = toUint32s(v.([]uint64))
	case ColumnSrcLargeCommunities:
		m.SrcLargeCommunities = v.([]LargeCommunity)
	case ColumnDstLargeCommunities:
		m.DstLargeCommunities = v.([]LargeCommunity)
	default:
		panic("not hot: " + k.String())
	}
}

// fromDynamic converts a field of a dynamicpb message to the representation of testValue.
func fromDynamic(t *testing.T, c *Column, v protoreflect.Value) any {
	t.Helper()
	ip := func(b []byte) netip.Addr {
		if len(b) != 16 {
			t.Fatalf("%s: address of %d bytes", c.Name, len(b))
		}
		return netip.AddrFrom16([16]byte(b)).Unmap()
	}
	switch c.Kind {
	case KindUint64, KindMAC:
		return v.Uint()
	case KindUint32:
		return v.Uint()
	case KindEnum:
		return uint64(v.Enum())
	case KindString:
		return v.String()
	case KindBytes:
		return v.Bytes()
	case KindIP:
		return ip(v.Bytes())
	case KindArrayUint32, KindArrayUint64:
		l := v.List()
		out := make([]uint64, l.Len())
		for i := range out {
			out[i] = l.Get(i).Uint()
		}
		return out
	case KindArrayIP:
		l := v.List()
		out := make([]netip.Addr, l.Len())
		for i := range out {
			out[i] = ip(l.Get(i).Bytes())
		}
		return out
	case KindArrayLargeCommunity:
		l := v.List()
		out := make([]LargeCommunity, l.Len())
		for i := range out {
			b := l.Get(i).Bytes()
			if len(b) != 12 {
				t.Fatalf("%s: large community of %d bytes", c.Name, len(b))
			}
			out[i] = LargeCommunity{binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint32(b[8:])}
		}
		return out
	}
	t.Fatalf("%s: unexpected kind", c.Name)
	return nil
}

// checkDynamic decodes msg with dynamicpb against md and compares every field with want.
func checkDynamic(t *testing.T, md protoreflect.MessageDescriptor, msg []byte, want map[ColumnKey]any) *dynamicpb.Message {
	t.Helper()
	dm := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(msg, dm); err != nil {
		t.Fatalf("dynamicpb: %v", err)
	}
	got := map[ColumnKey]any{}
	dm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		k, ok := ColumnByField(int(fd.Number()))
		if !ok || string(fd.Name()) != Lookup(k).Name {
			t.Errorf("field %d %s does not match a column", fd.Number(), fd.Name())
			return true
		}
		got[k] = fromDynamic(t, Lookup(k), v)
		return true
	})
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s: got %#v, want %#v", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected value %#v", k, g)
		}
	}
	return dm
}

// checkDecodeMessage decodes msg with DecodeMessage and compares every value with want.
func checkDecodeMessage(t *testing.T, s *Schema, msg []byte, want map[ColumnKey]any) {
	t.Helper()
	got := map[ColumnKey]any{}
	err := s.DecodeMessage(msg, func(c *Column, v any) {
		switch c.Kind {
		case KindArrayUint32, KindArrayUint64:
			prev, _ := got[c.Key].([]uint64)
			got[c.Key] = append(prev, v.(uint64))
		case KindArrayIP:
			prev, _ := got[c.Key].([]netip.Addr)
			got[c.Key] = append(prev, v.(netip.Addr))
		case KindArrayLargeCommunity:
			prev, _ := got[c.Key].([]LargeCommunity)
			got[c.Key] = append(prev, v.(LargeCommunity))
		default:
			if _, dup := got[c.Key]; dup {
				t.Errorf("%s written twice", c.Name)
			}
			got[c.Key] = v
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("DecodeMessage %s: got %#v, want %#v", k, got[k], want[k])
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("DecodeMessage %s: unexpected %#v", k, got[k])
			}
		}
	}
}

func TestFlowMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Configuration
	}{
		{"default", DefaultConfiguration()},
		{"all-columns", allColumns()},
	} {
		for _, direct := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/direct=%v", tc.name, direct), func(t *testing.T) {
				s := mustNew(t, tc.cfg)
				md := compile(t, s)
				if got, want := md.Fields().Len(), len(s.WireColumns()); got != want {
					t.Fatalf(".proto has %d fields, schema %d wire columns", got, want)
				}
				m := s.NewFlowMessage()
				// Twice: the second flow checks that Reset leaves nothing behind.
				for i := 0; i < 2; i++ {
					m.Reset()
					want := fill(s, m, direct)
					for k := range want {
						if !m.IsSet(k) {
							t.Errorf("IsSet(%s) = false", k)
						}
					}
					msg := unframe(t, m.Finalize())
					dm := checkDynamic(t, md, msg, want)
					checkDecodeMessage(t, s, msg, want)
					// And the other way: Go protobuf's encoding of the same message reads
					// back through DecodeMessage.
					canonical, err := proto.Marshal(dm)
					if err != nil {
						t.Fatal(err)
					}
					checkDecodeMessage(t, s, canonical, want)
				}
			})
		}
	}
}

// TestFlowMessageCrossConfiguration reads messages of the all-columns configuration with the
// default configuration's .proto: stable field numbers make the common fields readable.
func TestFlowMessageCrossConfiguration(t *testing.T) {
	def := mustNew(t, DefaultConfiguration())
	all := mustNew(t, allColumns())
	m := all.NewFlowMessage()
	want := fill(all, m, true)
	for k := range want {
		if !def.Enabled(k) {
			delete(want, k)
		}
	}
	md := compile(t, def)
	dm := dynamicpb.NewMessage(md)
	msg := unframe(t, m.Finalize())
	if err := proto.Unmarshal(msg, dm); err != nil {
		t.Fatal(err)
	}
	if len(dm.GetUnknown()) == 0 {
		t.Error("no unknown fields: the all-columns message should carry more")
	}
	dm.SetUnknown(nil)
	b, err := proto.Marshal(dm)
	if err != nil {
		t.Fatal(err)
	}
	checkDynamic(t, md, b, want)
}

func TestFlowMessageSemantics(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	m := s.NewFlowMessage()

	// Disabled columns are ignored, whatever the method.
	m.AppendUint(ColumnSrcMAC, 1)
	m.AppendBytes(ColumnDstMAC, []byte{1, 2, 3, 4, 5, 6})
	m.AppendUint(ColumnSrcVlan, 100)
	m.AppendIP(ColumnSrcAddrNAT, netip.MustParseAddr("192.0.2.1"))
	m.AppendArrayUint32(ColumnMPLSLabels, []uint32{1})
	m.AppendIP(ColumnSRv6SIDs, netip.MustParseAddr("2001:db8::1"))
	m.AppendUint(ColumnPacketSize, 1) // derived
	m.AppendUint(0, 1)
	m.AppendUint(ColumnLast, 1)
	m.AppendUint(65535, 1)
	if m.IsSet(ColumnSrcMAC) || m.IsSet(ColumnSrcVlan) || m.SrcVlan != 0 {
		t.Error("disabled column set")
	}
	// Write once: the first value wins.
	m.AppendUint(ColumnSrcPort, 443)
	m.AppendUint(ColumnSrcPort, 80)
	m.AppendUint(ColumnSrcAS, 64500)
	m.AppendUint(ColumnSrcAS, 64501)
	// A zero counts as set but is not written.
	m.AppendUint(ColumnDstPort, 0)
	m.AppendUint(ColumnDstPort, 53)
	m.AppendString(ColumnExporterName, "")
	// Wrong method for the kind: ignored, and the right one still works.
	m.AppendString(ColumnProto, "tcp")
	m.AppendUint(ColumnProto, 6)
	m.AppendUint(ColumnInIfName, 3)
	m.AppendString(ColumnInIfName, "et-0/0/0")
	m.AppendIP(ColumnEType, netip.MustParseAddr("192.0.2.1"))
	m.AppendUint(ColumnEType, 0x800)
	// Hot columns through Append land in the struct.
	m.AppendIP(ColumnDstAddr, netip.MustParseAddr("198.51.100.7"))
	m.AppendUint(ColumnInIf, 12)
	m.AppendArrayUint32(ColumnDstASPath, []uint32{64500, 64501})
	m.AppendArrayUint32(ColumnDstASPath, []uint32{1})
	if m.SrcAS != 64500 || m.InIf != 12 || m.DstAddr != netip.MustParseAddr("198.51.100.7") || len(m.DstASPath) != 2 {
		t.Errorf("hot fields: %+v", m)
	}
	// Enrichment overwrites hot fields by assignment.
	m.SrcAS = 64510
	if !m.IsSet(ColumnDstPort) || !m.IsSet(ColumnExporterName) || m.IsSet(ColumnBytes) {
		t.Error("IsSet wrong")
	}

	want := map[ColumnKey]any{
		ColumnSrcPort:   uint64(443),
		ColumnSrcAS:     uint64(64510),
		ColumnProto:     uint64(6),
		ColumnInIfName:  "et-0/0/0",
		ColumnEType:     uint64(0x800),
		ColumnDstAddr:   netip.MustParseAddr("198.51.100.7"),
		ColumnInIf:      uint64(12),
		ColumnDstASPath: []uint64{64500, 64501},
	}
	framed := m.Finalize()
	if again := m.Finalize(); &again[0] != &framed[0] || len(again) != len(framed) {
		t.Error("second Finalize returned other bytes")
	}
	checkDecodeMessage(t, s, unframe(t, framed), want)

	// Reset clears everything.
	m.Reset()
	if m.IsSet(ColumnSrcPort) || m.IsSet(ColumnSrcAS) || m.DstASPath != nil || m.DstAddr.IsValid() {
		t.Error("Reset left values")
	}
	if got := m.Finalize(); len(got) != 1 || got[0] != 0 {
		t.Errorf("empty message: %x", got)
	}
}

func TestFlowMessageMACFromBytes(t *testing.T) {
	s := mustNew(t, Configuration{Enabled: []string{"SrcMAC", "DstMAC"}})
	m := s.NewFlowMessage()
	m.AppendBytes(ColumnSrcMAC, []byte{0x00, 0x1b, 0x21, 0x3c, 0x9d, 0xf8})
	m.AppendBytes(ColumnDstMAC, []byte{1, 2, 3}) // wrong length: ignored
	m.AppendUint(ColumnDstMAC, 0x0242ac110002)
	checkDecodeMessage(t, s, unframe(t, m.Finalize()), map[ColumnKey]any{
		ColumnSrcMAC: uint64(0x001b213c9df8),
		ColumnDstMAC: uint64(0x0242ac110002),
	})
}

// nfv5Flow fills m with the n-th record of a NetFlow v5 packet (RFC-less but stable format:
// 24-byte header, 48-byte records), the way a decoder does.
func nfv5Flow(m *FlowMessage, pkt []byte, exporter netip.Addr, n int) {
	r := pkt[24+48*n:]
	m.TimeReceived = uint64(binary.BigEndian.Uint32(pkt[8:]))
	m.SamplingRate = 1
	m.ExporterAddress = exporter
	m.SrcAddr = netip.AddrFrom4([4]byte(r[0:4]))
	m.DstAddr = netip.AddrFrom4([4]byte(r[4:8]))
	m.NextHop = netip.AddrFrom4([4]byte(r[8:12]))
	m.InIf = uint32(binary.BigEndian.Uint16(r[12:]))
	m.OutIf = uint32(binary.BigEndian.Uint16(r[14:]))
	m.AppendUint(ColumnPackets, uint64(binary.BigEndian.Uint32(r[16:])))
	m.AppendUint(ColumnBytes, uint64(binary.BigEndian.Uint32(r[20:])))
	m.AppendUint(ColumnSrcPort, uint64(binary.BigEndian.Uint16(r[32:])))
	m.AppendUint(ColumnDstPort, uint64(binary.BigEndian.Uint16(r[34:])))
	m.AppendUint(ColumnTCPFlags, uint64(r[37]))
	m.AppendUint(ColumnProto, uint64(r[38]))
	m.AppendUint(ColumnIPTos, uint64(r[39]))
	m.SrcAS = uint32(binary.BigEndian.Uint16(r[40:]))
	m.DstAS = uint32(binary.BigEndian.Uint16(r[42:]))
	m.SrcNetMask = r[44]
	m.DstNetMask = r[45]
	m.AppendUint(ColumnEType, 0x800)
}

func readNFv5(t testing.TB) (pkt []byte, exporter netip.Addr) {
	d, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", "nfv5.pcap"))
	if err != nil || len(d) != 1 {
		t.Fatalf("nfv5.pcap: %v, %d datagrams", err, len(d))
	}
	return d[0].Payload, d[0].Src.Addr()
}

func TestFlowMessageNetflowV5(t *testing.T) {
	pkt, exporter := readNFv5(t)
	s := mustNew(t, Configuration{Enabled: []string{"NextHop", "TCPFlags"}})
	md := compile(t, s)
	m := s.NewFlowMessage()
	nfv5Flow(m, pkt, exporter, 0)
	msg := unframe(t, m.Finalize())
	// Values of the capture's first record.
	checkDynamic(t, md, msg, map[ColumnKey]any{
		ColumnTimeReceived:    uint64(1680626679),
		ColumnSamplingRate:    uint64(1),
		ColumnExporterAddress: netip.MustParseAddr("10.19.144.41"),
		ColumnSrcAddr:         netip.MustParseAddr("161.202.212.212"),
		ColumnDstAddr:         netip.MustParseAddr("202.152.70.24"),
		ColumnNextHop:         netip.MustParseAddr("61.6.255.150"),
		ColumnInIf:            uint64(117),
		ColumnOutIf:           uint64(86),
		ColumnPackets:         uint64(1),
		ColumnBytes:           uint64(133),
		ColumnSrcPort:         uint64(30104),
		ColumnDstPort:         uint64(11963),
		ColumnTCPFlags:        uint64(24),
		ColumnProto:           uint64(6),
		ColumnSrcAS:           uint64(36351),
		ColumnDstAS:           uint64(10101),
		ColumnSrcNetMask:      uint64(19),
		ColumnDstNetMask:      uint64(24),
		ColumnEType:           uint64(0x800),
	})
}

func TestFlowMessageAllocations(t *testing.T) {
	pkt, exporter := readNFv5(t)
	for _, cfg := range []Configuration{DefaultConfiguration(), allColumns()} {
		s := mustNew(t, cfg)
		m := s.NewFlowMessage()
		path := []uint32{64500, 64501, 64502}
		allocs := testing.AllocsPerRun(100, func() {
			for n := 0; n < 29; n++ {
				m.Reset()
				nfv5Flow(m, pkt, exporter, n)
				m.DstASPath = path
				m.AppendString(ColumnInIfName, "et-0/0/1")
				m.AppendIP(ColumnSrcAddrNAT, m.SrcAddr)
				m.Finalize()
			}
		})
		if allocs != 0 {
			t.Errorf("%d allocations per packet", int(allocs))
		}
	}
}

// TestFlowMessageBadValues checks the values that ClickHouse would refuse (failing the whole
// batch) or that proto3 parsers would refuse (failing the whole message).
func TestFlowMessageBadValues(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	md := compile(t, s)
	m := s.NewFlowMessage()
	m.AppendUint(ColumnFlowDirection, 7)                            // not in the enum: undefined (0)
	m.AppendUint(ColumnInIfBoundary, BoundaryInternal)              // in the enum
	m.AppendString(ColumnSrcCountry, "FRA")                         // longer than FixedString(2): dropped
	m.AppendString(ColumnDstCountry, "D")                           // shorter: kept (ClickHouse pads)
	m.AppendString(ColumnInIfName, "ge-0/0/0 \xff\xfe caf\xc3\xa9") // invalid UTF-8 replaced
	m.AppendBytes(ColumnOutIfName, []byte("Gi0/1 \x80"))
	if !m.IsSet(ColumnFlowDirection) || !m.IsSet(ColumnSrcCountry) {
		t.Error("dropped values must still count as set")
	}
	if got := m.Sanitized(); got != 4 {
		t.Errorf("Sanitized() = %d, want 4", got)
	}
	msg := append([]byte(nil), unframe(t, m.Finalize())...)
	m.Reset()
	if m.Sanitized() != 4 {
		t.Error("Reset cleared the Sanitized counter")
	}
	checkDynamic(t, md, msg, map[ColumnKey]any{
		ColumnInIfBoundary: uint64(BoundaryInternal),
		ColumnDstCountry:   "D",
		ColumnInIfName:     "ge-0/0/0 \uFFFD\uFFFD café",
		ColumnOutIfName:    "Gi0/1 \uFFFD",
	})
}

// TestFlowMessageExporterFields checks that the encoding Finalize keeps of TimeReceived,
// SamplingRate and ExporterAddress for the next flows follows their changes: every flow of a
// reused message gives the bytes a fresh message gives, whether the fields changed or not,
// including encodings longer than the 32 bytes copied first, zones, zero values and a disabled
// ExporterAddress.
func TestFlowMessageExporterFields(t *testing.T) {
	e4, e6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	type fields struct {
		time, rate uint64
		exporter   netip.Addr
	}
	seq := []fields{
		{1700000000, 1, e4}, {1700000000, 1, e4}, {1700000001, 1, e4}, {1700000001, 1000, e4},
		{1700000001, 1000, e6}, {1700000001, 1000, e6.WithZone("eth0")}, {1700000001, 1000, e6},
		{0, 0, netip.Addr{}}, {0, 0, netip.Addr{}}, {1 << 63, 1 << 62, e6}, {1 << 63, 1 << 62, e6},
		{1 << 63, 1 << 62, e4}, {1700000000, 1, e4},
	}
	for _, cfg := range []Configuration{DefaultConfiguration(), {Disabled: []string{"ExporterAddress"}}} {
		s := mustNew(t, cfg)
		reused := s.NewFlowMessage()
		for i, f := range seq {
			var out [2][]byte
			for j, m := range []*FlowMessage{reused, s.NewFlowMessage()} {
				m.Reset()
				m.TimeReceived, m.SamplingRate, m.ExporterAddress = f.time, f.rate, f.exporter
				// A length that changes from flow to flow moves the cached fields: stale
				// bytes of the previous flow are not where they belong.
				m.AppendUint(ColumnBytes, 1<<(7*(i%4)))
				m.SrcAS = 64500
				out[j] = bytes.Clone(m.Finalize())
			}
			if !bytes.Equal(out[0], out[1]) {
				t.Errorf("%v, flow %d (%+v):\nreused %x\nfresh  %x", cfg.Disabled, i, f, out[0], out[1])
			}
		}
	}
}
