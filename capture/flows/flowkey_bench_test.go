package flows

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testutil"
)

// ethernetFrames returns the Ethernet frames of every shared capture.
func ethernetFrames(b *testing.B) [][]byte {
	var frames [][]byte
	for _, path := range allCaptures(b) {
		fr, err := pcapfile.ReadFrames(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range fr {
			if f.LinkType == layers.LinkTypeEthernet {
				frames = append(frames, f.Data)
			}
		}
	}
	return frames
}

// BenchmarkExtractFlowKey compares extractFlowKey with gopacket's DecodingLayerParser (the
// library's allocation-free decoder) building the same key on the real frames: the key
// extraction runs for every captured packet, so it is hand-written only while it is faster.
func BenchmarkExtractFlowKey(b *testing.B) {
	frames := ethernetFrames(b)
	b.Run("flowzero", func(b *testing.B) {
		var sink uint64
		i := 0
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			data := frames[i%len(frames)]
			k, l3, flags, _ := extractFlowKey(data, uint16(layers.LinkTypeEthernet), len(data))
			sink += uint64(l3) + uint64(flags) + uint64(k.srcPort)
			i++
		}
		cpu.Stop(b)
		_ = sink
	})
	b.Run("gopacket", func(b *testing.B) {
		var (
			eth   layers.Ethernet
			dot1q layers.Dot1Q
			ip4   layers.IPv4
			ip6   layers.IPv6
			ext   layers.IPv6ExtensionSkipper
			tcp   layers.TCP
			udp   layers.UDP
		)
		parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &dot1q, &ip4, &ip6, &ext, &tcp, &udp)
		parser.IgnoreUnsupported = true
		decoded := make([]gopacket.LayerType, 0, 8)
		var sink uint64
		i := 0
		cpu := testutil.StartCPU(b)
		for b.Loop() {
			data := frames[i%len(frames)]
			_ = parser.DecodeLayers(data, &decoded)
			var k flowKey
			var l3 int
			var flags uint16
			for _, t := range decoded {
				switch t {
				case layers.LayerTypeIPv4:
					k.src, _ = netip.AddrFromSlice(ip4.SrcIP)
					k.dst, _ = netip.AddrFromSlice(ip4.DstIP)
					k.proto, l3 = uint8(ip4.Protocol), int(ip4.Length)
				case layers.LayerTypeIPv6:
					k.src, _ = netip.AddrFromSlice(ip6.SrcIP)
					k.dst, _ = netip.AddrFromSlice(ip6.DstIP)
					k.proto, l3 = uint8(ip6.NextHeader), int(ip6.Length)+40
				case layers.LayerTypeTCP:
					k.proto, k.srcPort, k.dstPort = 6, uint16(tcp.SrcPort), uint16(tcp.DstPort)
					if len(tcp.Contents) >= 14 {
						flags = uint16(tcp.Contents[12]&0x0f)<<8 | uint16(tcp.Contents[13])
					}
				case layers.LayerTypeUDP:
					k.proto, k.srcPort, k.dstPort = 17, uint16(udp.SrcPort), uint16(udp.DstPort)
				}
			}
			sink += uint64(l3) + uint64(flags) + uint64(k.srcPort)
			i++
		}
		cpu.Stop(b)
		_ = sink
	})
}
