package capture

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"

	"flowzero/internal/pcapfile"
)

// frameFacts is what gopacket decodes from a frame, to check the compiled filters against.
type frameFacts struct {
	etherType        layers.EthernetType
	proto            uint8 // outer IP protocol / next header
	src, dst         netip.Addr
	hasPorts         bool
	srcPort, dstPort uint16
}

func decodeFacts(data []byte) frameFacts {
	var f frameFacts
	pkt := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.Default)
	eth, ok := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !ok {
		return f
	}
	f.etherType = eth.EthernetType
	switch f.etherType {
	case layers.EthernetTypeIPv4:
		ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		f.proto = uint8(ip.Protocol)
		f.src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		f.dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		f.hasPorts = ip.FragOffset == 0
	case layers.EthernetTypeIPv6:
		ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		f.proto = uint8(ip.NextHeader)
		f.src, _ = netip.AddrFromSlice(ip.SrcIP)
		f.dst, _ = netip.AddrFromSlice(ip.DstIP)
		f.hasPorts = true
	}
	if f.proto != 6 && f.proto != 17 && f.proto != 132 {
		f.hasPorts = false
	}
	if f.hasPorts {
		switch l := pkt.TransportLayer().(type) {
		case *layers.TCP:
			f.srcPort, f.dstPort = uint16(l.SrcPort), uint16(l.DstPort)
		case *layers.UDP:
			f.srcPort, f.dstPort = uint16(l.SrcPort), uint16(l.DstPort)
		case *layers.SCTP:
			f.srcPort, f.dstPort = uint16(l.SrcPort), uint16(l.DstPort)
		default:
			f.hasPorts = false
		}
	}
	return f
}

// TestCompileFilter runs the built-in compiler's programs in x/net/bpf's VM over every real
// frame and compares with what gopacket decodes.
func TestCompileFilter(t *testing.T) {
	var frames [][]byte
	var facts []frameFacts
	for _, path := range allCaptures(t) {
		fr, err := pcapfile.ReadFrames(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fr {
			if f.LinkType == layers.LinkTypeEthernet {
				frames = append(frames, f.Data)
				facts = append(facts, decodeFacts(f.Data))
			}
		}
	}
	// Addresses and ports taken from the captures.
	var v4, v6 netip.Addr
	var v4dst netip.Addr
	var udpPort, udpSrc, tcpPort uint16
	for _, f := range facts {
		if !v4dst.IsValid() && f.dst.Is4() {
			v4dst = f.dst
		}
		if udpSrc == 0 && f.hasPorts && f.proto == 17 {
			udpSrc = f.srcPort
		}
		if !v4.IsValid() && f.src.Is4() {
			v4 = f.src
		}
		if !v6.IsValid() && f.src.Is6() {
			v6 = f.dst
		}
		if udpPort == 0 && f.hasPorts && f.proto == 17 {
			udpPort = f.dstPort
		}
		if tcpPort == 0 && f.hasPorts && f.proto == 6 {
			tcpPort = f.dstPort
		}
	}
	v4net := netip.PrefixFrom(v4, 16).Masked()
	v6net := netip.PrefixFrom(v6, 48).Masked()
	inNet := func(p netip.Prefix, a netip.Addr) bool { return a.IsValid() && p.Contains(a) }
	isIP := func(f frameFacts) bool {
		return f.etherType == layers.EthernetTypeIPv4 || f.etherType == layers.EthernetTypeIPv6
	}
	cases := []struct {
		expr string
		want func(f frameFacts) bool
	}{
		{"ip", func(f frameFacts) bool { return f.etherType == layers.EthernetTypeIPv4 }},
		{"ip6", func(f frameFacts) bool { return f.etherType == layers.EthernetTypeIPv6 }},
		{"tcp", func(f frameFacts) bool { return isIP(f) && f.proto == 6 }},
		{"udp", func(f frameFacts) bool { return isIP(f) && f.proto == 17 }},
		{"not udp", func(f frameFacts) bool { return !(isIP(f) && f.proto == 17) }},
		{"proto 4", func(f frameFacts) bool { return isIP(f) && f.proto == 4 }},
		{"proto 47", func(f frameFacts) bool { return isIP(f) && f.proto == 47 }},
		{fmt.Sprintf("udp port %d", udpPort), func(f frameFacts) bool {
			return f.proto == 17 && f.hasPorts && (f.srcPort == udpPort || f.dstPort == udpPort)
		}},
		{fmt.Sprintf("udp and dst port %d", udpPort), func(f frameFacts) bool { return f.proto == 17 && f.hasPorts && f.dstPort == udpPort }},
		{fmt.Sprintf("src port %d", udpSrc), func(f frameFacts) bool { return f.hasPorts && f.srcPort == udpSrc }},
		{fmt.Sprintf("tcp port %d", tcpPort), func(f frameFacts) bool {
			return f.proto == 6 && f.hasPorts && (f.srcPort == tcpPort || f.dstPort == tcpPort)
		}},
		{"host " + v4.String(), func(f frameFacts) bool { return f.src == v4 || f.dst == v4 }},
		{"src host " + v4.String(), func(f frameFacts) bool { return f.src == v4 }},
		{"! dst host " + v4dst.String(), func(f frameFacts) bool { return f.dst != v4dst }},
		{"net " + v4net.String(), func(f frameFacts) bool { return inNet(v4net, f.src) || inNet(v4net, f.dst) }},
		{"host " + v6.String(), func(f frameFacts) bool { return f.src == v6 || f.dst == v6 }},
		{"dst net " + v6net.String(), func(f frameFacts) bool { return inNet(v6net, f.dst) }},
		{"ip && not tcp", func(f frameFacts) bool { return f.etherType == layers.EthernetTypeIPv4 && f.proto != 6 }},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			raw, err := CompileFilter(tc.expr, 1500)
			if err != nil {
				t.Fatal(err)
			}
			ins, ok := bpf.Disassemble(raw)
			if !ok {
				t.Fatal("disassemble")
			}
			vm, err := bpf.NewVM(ins)
			if err != nil {
				t.Fatal(err)
			}
			matched := 0
			for i, data := range frames {
				n, err := vm.Run(data)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.want(facts[i])
				if (n > 0) != want {
					t.Fatalf("frame %d (%+v): filter says %v, gopacket %v", i, facts[i], n > 0, want)
				}
				if n > 0 {
					matched++
					if n != 1500 {
						t.Fatalf("accepted %d bytes of %d", n, len(data))
					}
				}
			}
			if matched == 0 || matched == len(frames) && tc.expr != "not udp" {
				t.Fatalf("%d of %d frames matched: the case does not discriminate", matched, len(frames))
			}
		})
	}
}

func TestRawFilter(t *testing.T) {
	prog, err := CompileFilter("udp port 53", 262144)
	if err != nil {
		t.Fatal(err)
	}
	var ddd strings.Builder
	fmt.Fprintf(&ddd, "%d\n", len(prog))
	for _, in := range prog {
		fmt.Fprintf(&ddd, "%d %d %d %d\n", in.Op, in.Jt, in.Jf, in.K)
	}
	for _, text := range []string{ddd.String(), strings.ReplaceAll(strings.TrimSpace(ddd.String()), "\n", ",")} {
		got, err := CompileFilter(text, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, prog) {
			t.Fatalf("raw program differs")
		}
	}
	for _, bad := range []string{"2\n6 0 0 0\n", "1\n21 5 0 2048\n", "1\n6 0 0\n", "1\n99999 0 0 0\n",
		"tcp or udp", "port", "port 70000", "host 1.2.3", "src tcp", "(tcp)", "frobnicate"} {
		if _, err := CompileFilter(bad, 1500); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
