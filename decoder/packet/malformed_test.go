package packet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"flowzero/decoder/packet/flowtest"
)

// ipv4Header returns a 20-byte IPv4 header from src to dst (last bytes of 10.0.0.0/8)
// carrying proto and payload bytes.
func ipv4Header(src, dst byte, proto uint8, payload int) []byte {
	h := []byte{0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, src, 10, 0, 0, dst}
	binary.BigEndian.PutUint16(h[2:], uint16(20+payload))
	return h
}

// nestedGRE returns levels IPv4/GRE headers around an IPv4/UDP packet; level i goes from
// 10.0.0.i to 10.0.0.i+1 (mod 256), the outermost being the last.
func nestedGRE(levels int) []byte {
	pkt := append(ipv4Header(200, 201, protoUDP, 8), 0x04, 0xd2, 0x00, 0x35, 0, 8, 0, 0)
	for i := range levels {
		gre := []byte{0, 0, 0x08, 0x00} // no flags, IPv4
		pkt = append(append(ipv4Header(byte(i), byte(i+1), protoGRE, len(gre)+len(pkt)), gre...), pkt...)
	}
	return pkt
}

// nestedEoMPLS returns levels Ethernet/MPLS/control-word headers, each carrying the next.
func nestedEoMPLS(levels int) []byte {
	level := []byte{
		0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x88, 0x47, // MACs, MPLS
		0x00, 0x06, 0x41, 0x40, // label 100, bottom of stack
		0, 0, 0, 0, // control word
	}
	return append(bytes.Repeat(level, levels), 0)
}

// TestNestedGRE: GRE in GRE in GRE... (500 levels). With GRE decapsulation exactly one level
// is removed: the flow is the second IPv4 header (itself GRE), whatever the depth below, and
// parsing it allocates nothing.
func TestNestedGRE(t *testing.T) {
	pkt := nestedGRE(500)
	s := allColumns(t)
	cfg := DefaultConfiguration()
	cfg.Decapsulation = DecapGRE
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	l3, err := p.ParseIPv4(pkt, fm)
	if err != nil || l3 != len(pkt)-24 {
		t.Fatalf("ParseIPv4() = %d, %v; want %d, nil", l3, err, len(pkt)-24)
	}
	got, err := flowtest.Decode(s, fm.Finalize())
	if err != nil {
		t.Fatal(err)
	}
	// The outermost header is level 499 (10.0.0.499%256 → 10.0.0.243), the reported one 498.
	want := flowtest.Flow{
		"EType": 0x0800, "SrcAddr": "10.0.0.242", "DstAddr": "10.0.0.243", "Proto": protoGRE,
		"IPTTL": 64, "IPFragmentID": 1,
		"TunnelSrcAddr": "10.0.0.243", "TunnelDstAddr": "10.0.0.244", "TunnelProto": protoGRE,
	}
	if diff := flowtest.Diff(got, want); diff != "" {
		t.Errorf("nested GRE:\n%s", diff)
	}
	if n := testing.AllocsPerRun(20, func() { fm.Reset(); _, _ = p.ParseIPv4(pkt, fm) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestNestedEthernet: Ethernet over MPLS with a control word, repeated (the only nesting the
// parser follows, also reached through VXLAN and GRE bridging), stops at maxEthernetDepth
// with ErrTooDeep, in every decapsulation mode.
func TestNestedEthernet(t *testing.T) {
	pkt := nestedEoMPLS(1000)
	s := allColumns(t)
	fm := s.NewFlowMessage()
	for d := DecapNone; d <= DecapSRv6; d++ {
		cfg := DefaultConfiguration()
		cfg.Decapsulation = d
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		fm.Reset()
		l3, err := p.ParseEthernet(pkt, fm)
		if l3 != 0 || !errors.Is(err, ErrTooDeep) {
			t.Errorf("%s: ParseEthernet() = %d, %v; want 0, ErrTooDeep", d, l3, err)
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Reason != ReasonTooDeep {
			t.Errorf("%s: reason %v", d, err)
		}
	}
}

// TestSelfInconsistentIP: IP headers that contradict themselves or the bytes present.
func TestSelfInconsistentIP(t *testing.T) {
	s := allColumns(t)
	p, _ := New(DefaultConfiguration())
	fm := s.NewFlowMessage()
	v6 := make([]byte, 40)
	v6[0] = 0x60
	for _, tc := range []struct {
		name  string
		parse func() (int, error)
		err   error
	}{
		{"IPv4 IHL below 5", func() (int, error) { h := ipv4Header(1, 2, protoTCP, 0); h[0] = 0x44; return p.ParseIPv4(h, fm) }, ErrBadIPHeader},
		{"IPv4 version 6", func() (int, error) { h := ipv4Header(1, 2, protoTCP, 0); h[0] = 0x65; return p.ParseIPv4(h, fm) }, ErrBadIPHeader},
		{"IPv4 cut", func() (int, error) { return p.ParseIPv4(ipv4Header(1, 2, protoTCP, 0)[:19], fm) }, ErrTruncated},
		{"IPv6 version 4", func() (int, error) { b := bytes.Clone(v6); b[0] = 0x40; return p.ParseIPv6(b, fm) }, ErrBadIPHeader},
		{"IPv6 cut", func() (int, error) { return p.ParseIPv6(v6[:39], fm) }, ErrTruncated},
		{"Ethernet cut", func() (int, error) { return p.ParseEthernet(make([]byte, 13), fm) }, ErrTruncated},
		{"VLAN tag cut", func() (int, error) {
			return p.ParseEthernet([]byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x81, 0x00, 0, 10}, fm)
		}, ErrTruncated},
		{"MPLS stack without bottom", func() (int, error) {
			return p.ParseEthernet(append([]byte{0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x88, 0x47}, bytes.Repeat([]byte{0, 0x06, 0x40, 0x40}, 100)...), fm)
		}, ErrTruncated},
	} {
		fm.Reset()
		l3, err := tc.parse()
		if l3 != 0 || !errors.Is(err, tc.err) {
			t.Errorf("%s: %d, %v; want 0, %v", tc.name, l3, err, tc.err)
		}
		if _, derr := flowtest.Decode(s, fm.Finalize()); derr != nil {
			t.Errorf("%s: malformed flow: %v", tc.name, derr)
		}
	}
}
