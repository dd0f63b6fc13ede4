package flows

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
)

// fuzzLinkTypes are the link types extractFlowKey reads, chosen by the fuzzer's byte.
var fuzzLinkTypes = []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6}

// FuzzExtractFlowKey compares extractFlowKey with gopacket on arbitrary packets. When gopacket
// finds IPv4 or IPv6 behind only what extractFlowKey walks (Ethernet, VLAN tags, MPLS), the
// key must be found with the same addresses and L3 length (a zero IPv4 total length is the
// rest of the frame for both); when the IP header is
// followed, through IPv6 extension headers, by TCP or UDP, with the same protocol, ports and
// TCP flags. Seeds are the headers of every frame of the real captures.
func FuzzExtractFlowKey(f *testing.F) {
	for _, path := range testdata.AllCaptures(f) {
		frames, err := pcapfile.ReadFrames(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, fr := range frames {
			for i, lt := range fuzzLinkTypes {
				if fr.LinkType == lt {
					// The key lies in the headers: long payloads only slow the fuzzer down.
					f.Add(uint8(i), fr.Data[:min(len(fr.Data), 192)])
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, lt uint8, data []byte) {
		linkType := fuzzLinkTypes[int(lt)%len(fuzzLinkTypes)]
		k, l3, flags, ok := extractFlowKey(data, uint16(linkType), len(data))
		if !ok {
			if k != (flowKey{}) || l3 != 0 || flags != 0 {
				t.Fatalf("no key, but %+v l3=%d flags=%#x", k, l3, flags)
			}
		}
		pkt := gopacket.NewPacket(data, linkType, gopacket.DecodeOptions{NoCopy: true, Lazy: false})
		all := pkt.Layers()
		net := -1
	outer:
		for i, l := range all {
			switch l := l.(type) {
			case *layers.Ethernet:
				if !walkedEtherType(uint16(l.EthernetType)) {
					break outer // gopacket guesses what follows some EtherTypes
				}
			case *layers.Dot1Q:
				if !walkedEtherType(uint16(l.Type)) {
					break outer
				}
			case *layers.MPLS:
			case *layers.IPv4, *layers.IPv6:
				net = i
				break outer
			default:
				break outer
			}
		}
		if net < 0 {
			return
		}
		var src, dst netip.Addr
		switch ip := all[net].(type) {
		case *layers.IPv4:
			if ip.Version != 4 {
				return // extractFlowKey reads the version nibble, gopacket the EtherType
			}
			src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
			dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
			// A total length of 0 (TSO, BIG TCP): both take the rest of the frame, which
			// gopacket's 16-bit field holds up to 64 KiB.
			if ok && l3 <= 0xffff && l3 != int(ip.Length) {
				t.Fatalf("l3 %d, IPv4 total length %d", l3, ip.Length)
			}
		case *layers.IPv6:
			if ip.Version != 6 {
				return
			}
			src, _ = netip.AddrFromSlice(ip.SrcIP)
			dst, _ = netip.AddrFromSlice(ip.DstIP)
			if ok && ip.Length != 0 && l3 != int(ip.Length)+40 {
				t.Fatalf("l3 %d, IPv6 payload length %d", l3, ip.Length)
			}
		}
		if !ok {
			t.Fatalf("no key where gopacket decodes %v", layerTypes(all[:net+1]))
		}
		if k.src != src || k.dst != dst {
			t.Fatalf("key %v → %v, gopacket %v → %v", k.src, k.dst, src, dst)
		}
		for _, l := range all[net+1:] {
			switch l := l.(type) {
			case *layers.IPv6HopByHop, *layers.IPv6Routing, *layers.IPv6Destination:
				continue
			case *layers.TCP:
				if len(l.Contents) < 20 {
					break // gopacket keeps the layer of a header it failed to decode
				}
				want := uint16(0)
				for i, set := range []bool{l.FIN, l.SYN, l.RST, l.PSH, l.ACK, l.URG, l.ECE, l.CWR, l.NS} {
					if set {
						want |= 1 << i
					}
				}
				if k.proto != 6 || k.srcPort != uint16(l.SrcPort) || k.dstPort != uint16(l.DstPort) || flags&0x1ff != want {
					t.Fatalf("key %+v flags %#x, gopacket TCP %d → %d flags %#x", k, flags, l.SrcPort, l.DstPort, want)
				}
			case *layers.UDP:
				if len(l.Contents) < 8 {
					break
				}
				if k.proto != 17 || k.srcPort != uint16(l.SrcPort) || k.dstPort != uint16(l.DstPort) {
					t.Fatalf("key %+v, gopacket UDP %d → %d", k, l.SrcPort, l.DstPort)
				}
			}
			break
		}
	})
}

// walkedEtherType says whether extractFlowKey follows an EtherType.
func walkedEtherType(t uint16) bool {
	switch t {
	case 0x0800, 0x86dd, 0x8100, 0x88a8, 0x9100, 0x8847, 0x8848:
		return true
	}
	return false
}

func layerTypes(ls []gopacket.Layer) []gopacket.LayerType {
	out := make([]gopacket.LayerType, len(ls))
	for i, l := range ls {
		out[i] = l.LayerType()
	}
	return out
}
