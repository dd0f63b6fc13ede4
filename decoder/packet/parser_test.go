package packet

import (
	"errors"
	"testing"

	"flowzero/decoder/packet/flowtest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// The expected values below were read from the frames with tshark 4.x
// (tshark -r <file> -V and -T fields -e ...) and checked against the bytes (tshark -x).

func readFrames(t testing.TB, name string) [][]byte {
	t.Helper()
	frames, err := pcapfile.ReadFrames(testdata.Path(t, "decap", name))
	if err != nil {
		t.Fatalf("ReadFrames(%s): %v", name, err)
	}
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = f.Data
	}
	return out
}

func allColumns(t testing.TB) *schema.Schema {
	t.Helper()
	s, err := flowtest.AllColumns()
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	return s
}

func TestDecapFrames(t *testing.T) {
	s := allColumns(t)
	const (
		mplsSrcMAC = 0x003096052838
		mplsDstMAC = 0x003096e6fc39
	)
	cases := []struct {
		file   string
		frame  int
		decap  Decapsulation
		l3     int
		err    error
		fields flowtest.Flow
	}{
		{file: "mpls-ipv4.pcap", l3: 40, fields: flowtest.Flow{
			"SrcMAC": mplsSrcMAC, "DstMAC": mplsDstMAC, "MPLSLabels": []int{18, 16},
			"EType": 0x0800, "SrcAddr": "10.31.0.1", "DstAddr": "10.34.0.1", "Proto": 6,
			"IPTos": 0xb0, "IPTTL": 255, "IPFragmentID": 8,
			"SrcPort": 11001, "DstPort": 23, "TCPFlags": 0x10,
		}},
		{file: "mpls-explicit-null-ipv4.pcap", l3: 40, fields: flowtest.Flow{
			"SrcMAC": mplsSrcMAC, "DstMAC": mplsDstMAC, "MPLSLabels": []int{0},
			"EType": 0x0800, "SrcAddr": "10.31.0.1", "DstAddr": "10.34.0.1", "Proto": 6,
			"IPTTL": 255, "IPFragmentID": 8, "SrcPort": 11001, "DstPort": 23, "TCPFlags": 0x10,
		}},
		{file: "mpls-explicit-null-ipv6.pcap", l3: 60, fields: flowtest.Flow{
			"SrcMAC": mplsSrcMAC, "DstMAC": mplsDstMAC, "MPLSLabels": []int{2},
			"EType": 0x86dd, "SrcAddr": "2001:db8::1", "DstAddr": "2001:db8::2", "Proto": 6,
			"IPTTL": 64, "SrcPort": 11001, "DstPort": 80, "TCPFlags": 0x10,
		}},
		{file: "mpls-ipv6.pcap", l3: 60, fields: flowtest.Flow{
			"SrcMAC": mplsSrcMAC, "DstMAC": mplsDstMAC, "MPLSLabels": []int{100},
			"EType": 0x86dd, "SrcAddr": "2001:db8::1", "DstAddr": "2001:db8::2", "Proto": 6,
			"IPTTL": 64, "SrcPort": 11001, "DstPort": 80, "TCPFlags": 0x10,
		}},
		// Labels 300012 and 17, a zero control word, then an Ethernet frame whose MACs
		// (02:00:00:00:00:03/04) lose to the outer ones: the first value of a column wins.
		{file: "mpls-eompls-cw.pcap", l3: 40, fields: flowtest.Flow{
			"SrcMAC": mplsSrcMAC, "DstMAC": mplsDstMAC, "MPLSLabels": []int{300012, 17},
			"EType": 0x0800, "SrcAddr": "10.31.0.1", "DstAddr": "10.34.0.1", "Proto": 6,
			"IPTTL": 255, "IPFragmentID": 8, "SrcPort": 11001, "DstPort": 23, "TCPFlags": 0x10,
		}},
		// Control word 0x00000001 (a sequence number): not accepted, see the package doc.
		{file: "mpls-eompls-invalid-cw.pcap", err: ErrMPLSPayload, fields: flowtest.Flow{
			"SrcMAC": mplsSrcMAC, "DstMAC": mplsDstMAC, "MPLSLabels": []int{100},
		}},
		// Payload starting with nibble 1 (a pseudowire associated channel).
		{file: "mpls-invalid-nibble.pcap", err: ErrMPLSPayload, fields: flowtest.Flow{
			"SrcMAC": mplsSrcMAC, "DstMAC": mplsDstMAC, "MPLSLabels": []int{100},
		}},
		// 802.1Q VLAN 100, IPv6 carrying IPv4 (next header 4), not decapsulated.
		{file: "vlan-ipv6.pcap", l3: 179, fields: flowtest.Flow{
			"SrcMAC": 0x00121ef2613d, "DstMAC": 0xc500000082c4, "SrcVlan": 100, "DstVlan": 100,
			"EType": 0x86dd, "SrcAddr": "2402:f000:1:8e01::5555", "DstAddr": "2607:fcd0:100:2300::b108:2a6b",
			"Proto": 4, "IPTTL": 246,
		}},
		// The same frame through IP-in-IP decapsulation: IPv4 in IPv6, then GRE (PPTP).
		{file: "vlan-ipv6.pcap", decap: DecapIPIP, l3: 139, fields: flowtest.Flow{
			"TunnelSrcAddr": "2402:f000:1:8e01::5555", "TunnelDstAddr": "2607:fcd0:100:2300::b108:2a6b",
			"TunnelProto": 4,
			"EType":       0x0800, "SrcAddr": "16.0.0.200", "DstAddr": "192.52.166.154", "Proto": 47,
			"IPTTL": 64, "IPFragmentID": 0x8caf,
		}},
		{file: "gre-v4-key.pcap", frame: 0, decap: DecapGRE, l3: 100, fields: flowtest.Flow{
			"TunnelSrcAddr": "192.168.12.1", "TunnelDstAddr": "192.168.12.2", "TunnelProto": 47, "GREKey": 1,
			"EType": 0x0800, "SrcAddr": "192.168.1.101", "DstAddr": "192.168.2.102", "Proto": 1,
			"IPTTL": 254, "IPFragmentID": 1119, "ICMPv4Type": 8,
		}},
		{file: "gre-v4-key.pcap", frame: 1, decap: DecapGRE, l3: 100, fields: flowtest.Flow{
			"TunnelSrcAddr": "192.168.12.2", "TunnelDstAddr": "192.168.12.1", "TunnelProto": 47, "GREKey": 1,
			"EType": 0x0800, "SrcAddr": "192.168.2.102", "DstAddr": "192.168.1.101", "Proto": 1,
			"IPTTL": 254, "IPFragmentID": 1119, // echo reply: ICMP type and code 0
		}},
		{file: "gre-v4-key.pcap", decap: DecapNone, l3: 128, fields: flowtest.Flow{
			"SrcMAC": 0xfa163e3d61ff, "DstMAC": 0xfa163e7fb6c9,
			"EType": 0x0800, "SrcAddr": "192.168.12.1", "DstAddr": "192.168.12.2", "Proto": 47,
			"IPTTL": 255, "IPFragmentID": 5,
		}},
		{file: "gre-v4-plain.pcap", decap: DecapGRE, l3: 76, fields: flowtest.Flow{
			"TunnelSrcAddr": "172.27.1.66", "TunnelDstAddr": "66.59.109.137", "TunnelProto": 47,
			"EType": 0x0800, "SrcAddr": "66.59.111.190", "DstAddr": "66.59.111.182", "Proto": 17,
			"IPTos": 0x10, "IPTTL": 64, "SrcPort": 123, "DstPort": 123,
		}},
		{file: "gre-v6-plain.pcap", decap: DecapGRE, l3: 62, fields: flowtest.Flow{
			"TunnelSrcAddr": "172.16.23.2", "TunnelDstAddr": "192.168.47.1", "TunnelProto": 47,
			"EType": 0x86dd, "SrcAddr": "2001:db8::2", "DstAddr": "2001:db8::1", "Proto": 6,
			"IPTos": 0xc0, "IPTTL": 255, "SrcPort": 18716, "DstPort": 23, "TCPFlags": 0x18,
		}},
		// Tunnel columns are only written once the tunnel is found.
		{file: "gre-v6-plain.pcap", decap: DecapIPIP, err: ErrNotEncapsulated, fields: flowtest.Flow{}},
		{file: "ipv4-ipv4.pcap", decap: DecapIPIP, l3: 100, fields: flowtest.Flow{
			"TunnelSrcAddr": "10.1.2.1", "TunnelDstAddr": "10.1.2.2", "TunnelProto": 4,
			"EType": 0x0800, "SrcAddr": "192.168.0.1", "DstAddr": "192.168.0.2", "Proto": 1,
			"IPTTL": 255, "IPFragmentID": 18, "ICMPv4Type": 8,
		}},
		{file: "ipv4-ipv6.pcap", decap: DecapIPIP, l3: 60, fields: flowtest.Flow{
			"TunnelSrcAddr": "216.66.80.30", "TunnelDstAddr": "192.168.2.2", "TunnelProto": 41,
			"EType": 0x86dd, "SrcAddr": "2001:610:1908:a000::149:20", "DstAddr": "2002:2470:9ffa:fa9:0:dd:ed00:2",
			"Proto": 6, "IPTTL": 58, "SrcPort": 80, "DstPort": 35673, "TCPFlags": 0x10,
		}},
		{file: "ipv4-ipv6.pcap", decap: DecapSRv6, err: ErrNotEncapsulated, fields: flowtest.Flow{}},
		// Segment routing header with segments f2:: and f1::, then IPv6 (End.DT6).
		{file: "srv6-end-dt6.pcap", decap: DecapSRv6, l3: 64, fields: flowtest.Flow{
			"TunnelSrcAddr": "1:2:1::1", "TunnelDstAddr": "f2::", "TunnelProto": 43,
			"SRv6SIDs": []string{"f2::", "f1::"},
			"EType":    0x86dd, "SrcAddr": "1:2:1::1", "DstAddr": "b::2", "Proto": 17,
			"IPTTL": 64, "IPv6FlowLabel": 0x0ae0a9, "SrcPort": 50701, "DstPort": 5001,
		}},
		// Without decapsulation, the upper-layer protocol after the routing header is IPv6.
		{file: "srv6-end-dt6.pcap", l3: 144, fields: flowtest.Flow{
			"SrcMAC": 0x90e2ba84d779, "DstMAC": 0x90e2ba84d5ed,
			"EType": 0x86dd, "SrcAddr": "1:2:1::1", "DstAddr": "f2::", "Proto": 41,
			"IPTTL": 63, "IPv6FlowLabel": 0x0ae0a9,
		}},
		{file: "mpls-ipv4.pcap", decap: DecapVXLAN, err: ErrNotEncapsulated, fields: flowtest.Flow{}},
	}
	for _, tc := range cases {
		t.Run(tc.file+"/"+tc.decap.String(), func(t *testing.T) {
			cfg := DefaultConfiguration()
			cfg.Decapsulation = tc.decap
			p, err := New(cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			frames := readFrames(t, tc.file)
			fm := s.NewFlowMessage()
			l3, err := p.ParseEthernet(frames[tc.frame], fm)
			if !errors.Is(err, tc.err) {
				t.Fatalf("ParseEthernet() error %v, want %v", err, tc.err)
			}
			if err == nil && l3 != tc.l3 {
				t.Errorf("ParseEthernet() L3 length %d, want %d", l3, tc.l3)
			}
			got, err := flowtest.Decode(s, fm.Finalize())
			if err != nil {
				t.Fatalf("decoding the flow: %v", err)
			}
			if diff := flowtest.Diff(got, tc.fields); diff != "" {
				t.Errorf("ParseEthernet() fields:\n%s", diff)
			}
		})
	}
}

// TestDefaultSchema checks that the default schema (no L2, L3/L4 extra, MPLS or tunnel
// columns) keeps only the default columns.
func TestDefaultSchema(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := New(DefaultConfiguration())
	fm := s.NewFlowMessage()
	if _, err := p.ParseEthernet(readFrames(t, "mpls-ipv4.pcap")[0], fm); err != nil {
		t.Fatal(err)
	}
	got, err := flowtest.Decode(s, fm.Finalize())
	if err != nil {
		t.Fatal(err)
	}
	want := flowtest.Flow{
		"EType": 0x0800, "SrcAddr": "10.31.0.1", "DstAddr": "10.34.0.1", "Proto": 6,
		"SrcPort": 11001, "DstPort": 23,
	}
	if diff := flowtest.Diff(got, want); diff != "" {
		t.Errorf("fields:\n%s", diff)
	}
}

func TestParseIP(t *testing.T) {
	s := allColumns(t)
	p, _ := New(DefaultConfiguration())
	frame := readFrames(t, "ipv4-ipv6.pcap")[0]
	fm := s.NewFlowMessage()
	// Outer IPv4 header at offset 14: parsed without its Ethernet header.
	l3, err := p.ParseIP(frame[14:], fm)
	if err != nil || l3 != 80 {
		t.Fatalf("ParseIP() = %d, %v; want 80, nil", l3, err)
	}
	got, _ := flowtest.Decode(s, fm.Finalize())
	want := flowtest.Flow{
		"EType": 0x0800, "SrcAddr": "216.66.80.30", "DstAddr": "192.168.2.2", "Proto": 41, "IPTTL": 239,
	}
	if diff := flowtest.Diff(got, want); diff != "" {
		t.Errorf("fields:\n%s", diff)
	}
	for _, tc := range []struct {
		data []byte
		err  error
	}{
		{nil, ErrTruncated},
		{[]byte{0x45, 0}, ErrTruncated},
		{append([]byte{0x44}, make([]byte, 19)...), ErrBadIPHeader}, // IHL 4
		{append([]byte{0x15}, make([]byte, 19)...), ErrBadIPHeader}, // version 1
		{append([]byte{0x60}, make([]byte, 20)...), ErrTruncated},   // IPv6 shorter than 40
	} {
		fm.Reset()
		if _, err := p.ParseIP(tc.data, fm); err != tc.err {
			t.Errorf("ParseIP(%x) error %v, want %v", tc.data, err, tc.err)
		}
	}
}

// TestIPv6Fragment builds an IPv6 first fragment carrying UDP and a later fragment.
func TestIPv6Fragment(t *testing.T) {
	s := allColumns(t)
	p, _ := New(DefaultConfiguration())
	pkt := []byte{
		0x60, 0x01, 0x23, 0x45, 0x00, 0x10, 44, 64, // flow label 0x12345, payload 16, fragment header
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		17, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, // UDP, offset 0, M=1, id 0xdeadbeef
		0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // UDP 1234 -> 53
	}
	fm := s.NewFlowMessage()
	if l3, err := p.ParseIPv6(pkt, fm); err != nil || l3 != 56 {
		t.Fatalf("ParseIPv6() = %d, %v", l3, err)
	}
	got, _ := flowtest.Decode(s, fm.Finalize())
	want := flowtest.Flow{
		"EType": 0x86dd, "SrcAddr": "2001:db8::1", "DstAddr": "2001:db8::2", "Proto": 17, "IPTTL": 64,
		"IPv6FlowLabel": 0x12345, "IPFragmentID": 0xdeadbeef, "SrcPort": 1234, "DstPort": 53,
	}
	if diff := flowtest.Diff(got, want); diff != "" {
		t.Errorf("first fragment:\n%s", diff)
	}
	// Offset 185 (1480 bytes): no transport header to read.
	pkt[42], pkt[43] = 0x05, 0xc8
	fm.Reset()
	if _, err := p.ParseIPv6(pkt, fm); err != nil {
		t.Fatal(err)
	}
	got, _ = flowtest.Decode(s, fm.Finalize())
	delete(want, "SrcPort")
	delete(want, "DstPort")
	want["IPFragmentOffset"] = 185
	if diff := flowtest.Diff(got, want); diff != "" {
		t.Errorf("later fragment:\n%s", diff)
	}
}

func TestConfiguration(t *testing.T) {
	var d Decapsulation
	for _, name := range []string{"none", "gre", "ipip", "vxlan", "srv6"} {
		if err := d.UnmarshalText([]byte(name)); err != nil || d.String() != name {
			t.Errorf("UnmarshalText(%q) = %v, %v", name, d, err)
		}
	}
	if err := d.UnmarshalText([]byte("mpls")); err == nil {
		t.Error("UnmarshalText(mpls) accepted")
	}
	cfg := DefaultConfiguration()
	cfg.VXLANPort = 0
	if _, err := New(cfg); err == nil || err.Error() != "vxlan-port: must not be 0" {
		t.Errorf("New() error %v", err)
	}
}

func BenchmarkParseEthernet(b *testing.B) {
	defaults, _ := schema.New(schema.DefaultConfiguration())
	all := allColumns(b)
	for _, tc := range []struct {
		name   string
		file   string
		decap  Decapsulation
		schema *schema.Schema
	}{
		{"mpls-ipv4/default", "mpls-ipv4.pcap", DecapNone, defaults},
		{"mpls-ipv4/all-columns", "mpls-ipv4.pcap", DecapNone, all},
		{"srv6/all-columns", "srv6-end-dt6.pcap", DecapSRv6, all},
		{"gre-v4-key/all-columns", "gre-v4-key.pcap", DecapGRE, all},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := DefaultConfiguration()
			cfg.Decapsulation = tc.decap
			p, _ := New(cfg)
			frame := readFrames(b, tc.file)[0]
			fm := tc.schema.NewFlowMessage()
			b.ReportAllocs()
			for b.Loop() {
				fm.Reset()
				if _, err := p.ParseEthernet(frame, fm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestIPv4OptionsAndFragments builds IPv4 packets with a 4-byte option (IHL 6), first as a
// first fragment (more fragments set) carrying TCP, then as a later fragment.
func TestIPv4OptionsAndFragments(t *testing.T) {
	s := allColumns(t)
	p, _ := New(DefaultConfiguration())
	pkt := []byte{
		0x46, 0x10, 0x00, 0x3c, 0x12, 0x34, 0x20, 0x00, 0x40, 6, 0, 0, // IHL 6, ToS 0x10, length 60, id 0x1234, MF
		192, 0, 2, 1, 198, 51, 100, 2,
		0x94, 0x04, 0x00, 0x00, // router alert option
		0x30, 0x39, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x12, 0xff, 0xff, // TCP 12345 -> 443, SYN ACK
	}
	fm := s.NewFlowMessage()
	if l3, err := p.ParseIPv4(pkt, fm); err != nil || l3 != 60 {
		t.Fatalf("ParseIPv4() = %d, %v", l3, err)
	}
	got, _ := flowtest.Decode(s, fm.Finalize())
	want := flowtest.Flow{
		"EType": 0x0800, "SrcAddr": "192.0.2.1", "DstAddr": "198.51.100.2", "Proto": 6,
		"IPTos": 0x10, "IPTTL": 64, "IPFragmentID": 0x1234,
		"SrcPort": 12345, "DstPort": 443, "TCPFlags": 0x12,
	}
	if diff := flowtest.Diff(got, want); diff != "" {
		t.Errorf("first fragment:\n%s", diff)
	}
	// Offset 0x0b9 (1480 bytes): what follows the header is data, not TCP.
	pkt[6], pkt[7] = 0x00, 0xb9
	fm.Reset()
	if _, err := p.ParseIPv4(pkt, fm); err != nil {
		t.Fatal(err)
	}
	got, _ = flowtest.Decode(s, fm.Finalize())
	for _, k := range []string{"SrcPort", "DstPort", "TCPFlags"} {
		delete(want, k)
	}
	want["IPFragmentOffset"] = 0xb9
	if diff := flowtest.Diff(got, want); diff != "" {
		t.Errorf("later fragment:\n%s", diff)
	}
	// The header announces options the sampler cut: no transport header, no error.
	fm.Reset()
	if l3, err := p.ParseIPv4(pkt[:22], fm); err != nil || l3 != 60 {
		t.Errorf("ParseIPv4(cut options) = %d, %v", l3, err)
	}
}
