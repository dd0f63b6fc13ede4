package bmp

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/rib/bgp"
)

// captureStream returns the concatenated TCP payloads of a BMP capture.
func captureStream(tb testing.TB, name string) []byte {
	tb.Helper()
	dgs, err := pcapfile.ReadTCP(testdata.Path(tb, "bmp", name))
	if err != nil {
		tb.Fatalf("ReadTCP(%s): %v", name, err)
	}
	var out []byte
	for _, d := range dgs {
		out = append(out, d.Payload...)
	}
	return out
}

// readAll splits a stream into copies of its messages.
func readAll(tb testing.TB, stream []byte) [][]byte {
	tb.Helper()
	r := NewReader(bytes.NewReader(stream))
	var msgs [][]byte
	for {
		_, m, err := r.Next()
		if err == io.EOF {
			return msgs
		}
		if err != nil {
			tb.Fatalf("Next(): %v", err)
		}
		msgs = append(msgs, bytes.Clone(m))
	}
}

func TestReaderCaptures(t *testing.T) {
	cases := []struct {
		file  string
		types map[MessageType]int
	}{
		{"bmp-init.pcap", map[MessageType]int{MsgInitiation: 1}},
		{"bmp-terminate.pcap", map[MessageType]int{MsgTermination: 1}},
		{"bmp-peers-up.pcap", map[MessageType]int{MsgPeerUp: 4, MsgStatisticsReport: 3}},
		{"bmp-eor.pcap", map[MessageType]int{MsgRouteMonitoring: 8, MsgStatisticsReport: 1}},
		{"bmp-reach.pcap", map[MessageType]int{MsgRouteMonitoring: 17}},
		{"bmp-reach-addpath.pcap", map[MessageType]int{MsgRouteMonitoring: 1}},
		{"bmp-unreach.pcap", map[MessageType]int{MsgRouteMonitoring: 8}},
		{"bmp-peer-down.pcap", map[MessageType]int{MsgPeerDown: 1, MsgStatisticsReport: 1}},
		{"bmp-l3vpn.pcap", map[MessageType]int{MsgPeerUp: 1, MsgStatisticsReport: 1, MsgRouteMonitoring: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got := map[MessageType]int{}
			for _, m := range readAll(t, captureStream(t, tc.file)) {
				h, err := ParseCommonHeader(m)
				if err != nil {
					t.Fatal(err)
				}
				got[h.Type]++
			}
			if len(got) != len(tc.types) {
				t.Fatalf("types = %v, want %v", got, tc.types)
			}
			for k, v := range tc.types {
				if got[k] != v {
					t.Errorf("%s: %d messages, want %d", k, got[k], v)
				}
			}
		})
	}
}

// TestReaderSplitAnywhere feeds a stream one byte at a time: messages spanning reads.
func TestReaderSplitAnywhere(t *testing.T) {
	stream := captureStream(t, "bmp-reach.pcap")
	r := NewReader(&oneByteReader{b: stream})
	n := 0
	for {
		_, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 17 {
		t.Fatalf("%d messages, want 17", n)
	}
	// Cut in the middle of a message.
	r = NewReader(bytes.NewReader(stream[:len(stream)-3]))
	var err error
	for err == nil {
		_, _, err = r.Next()
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated stream: %v, want unexpected EOF", err)
	}
}

type oneByteReader struct{ b []byte }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		return 0, io.EOF
	}
	p[0] = o.b[0]
	o.b = o.b[1:]
	return 1, nil
}

func TestPeerUpCapture(t *testing.T) {
	msgs := readAll(t, captureStream(t, "bmp-peers-up.pcap"))
	var peers []string
	var addPath []bgp.FamilySet
	for _, m := range msgs {
		h, _ := ParseCommonHeader(m)
		ph, err := ParsePeerHeader(m[CommonHeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		switch h.Type {
		case MsgPeerUp:
			pu, err := ParsePeerUp(m[CommonHeaderLen+PeerHeaderLen:], ph.Flags&PeerFlagV != 0)
			if err != nil {
				t.Fatal(err)
			}
			ap, err := NegotiatedAddPath(pu.SentOpen, pu.ReceivedOpen, ph.AdjRIBOut())
			if err != nil {
				t.Fatal(err)
			}
			peers = append(peers, ph.Address.String())
			addPath = append(addPath, ap)
			if ph.Type != PeerTypeGlobal || ph.Distinguisher != 0 {
				t.Errorf("peer %s: type %d RD %s", ph.Address, ph.Type, ph.Distinguisher)
			}
		case MsgStatisticsReport:
			seen := 0
			if err := WalkStatistics(m[CommonHeaderLen+PeerHeaderLen:], func(Statistic) { seen++ }); err != nil {
				t.Fatal(err)
			}
			if seen != 13 {
				t.Errorf("statistics for %s: %d TLVs, want 13", ph.Address, seen)
			}
		}
	}
	want := []string{"192.0.2.1", "192.0.2.5", "2001:db8::3", "2001:db8::7"}
	if len(peers) != len(want) {
		t.Fatalf("peers %v, want %v", peers, want)
	}
	for i := range want {
		if peers[i] != want[i] {
			t.Errorf("peer %d = %s, want %s", i, peers[i], want[i])
		}
	}
	// Only 192.0.2.5 negotiated Add-Path (the router receives, the peer sends) for IPv4.
	for i, ap := range addPath {
		wantAP := peers[i] == "192.0.2.5"
		if ap.Has(bgp.FamilyIPv4Unicast) != wantAP || ap&^bgp.FamilySet(0).With(bgp.FamilyIPv4Unicast) != 0 {
			t.Errorf("peer %s: add-path %v", peers[i], ap)
		}
	}
}

func TestPeerHeaderL3VPN(t *testing.T) {
	msgs := readAll(t, captureStream(t, "bmp-l3vpn.pcap"))
	ph, err := ParsePeerHeader(msgs[0][CommonHeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	if ph.Type != PeerTypeRD || ph.Distinguisher.String() != "65500:108" ||
		ph.Address != netip.MustParseAddr("192.0.2.9") || ph.AS != 65019 || ph.BGPID != 0xc0000209 {
		t.Errorf("peer header %+v", ph)
	}
}

func TestInitiationTermination(t *testing.T) {
	m := readAll(t, captureStream(t, "bmp-init.pcap"))[0]
	var name string
	if err := WalkTLVs(m[CommonHeaderLen:], func(tlv TLV) {
		if tlv.Type == InfoSysName {
			name = string(tlv.Value)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if name != "vMX" {
		t.Errorf("sysName %q, want vMX", name)
	}
	m = readAll(t, captureStream(t, "bmp-terminate.pcap"))[0]
	var reason string
	if err := WalkTLVs(m[CommonHeaderLen:], func(tlv TLV) {
		if tlv.Type == InfoString {
			reason = string(tlv.Value)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if reason != "station removed from config" {
		t.Errorf("termination %q", reason)
	}
}

func TestRD(t *testing.T) {
	for _, s := range []string{"0:0", "65017:101", "192.0.2.1:10", "4200000000:7", "2:100:3"} {
		rd, err := ParseRD(s)
		if err != nil {
			t.Fatalf("ParseRD(%q): %v", s, err)
		}
		if rd.String() != s {
			t.Errorf("ParseRD(%q).String() = %q", s, rd.String())
		}
	}
	if rd, _ := ParseRD("65500:108"); rd != RD(65500<<32|108) {
		t.Errorf("65500:108 = %#x", uint64(rd))
	}
	for _, s := range []string{"", "a:b", "0:70000:1", "1.2.3.4:70000", "4200000000:70000", "1:2:3:4"} {
		if _, err := ParseRD(s); err == nil {
			t.Errorf("ParseRD(%q) accepted", s)
		}
	}
}
