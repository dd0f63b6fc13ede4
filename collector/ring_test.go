package collector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"flowzero/internal/testutil"
	"flowzero/schema"
)

// udpPacket builds an IP packet holding a UDP datagram from src to dst with its checksums
// right (IPv4 when both addresses are, else IPv6).
func udpPacket(src, dst netip.AddrPort, payload []byte) []byte {
	udp := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	var pkt []byte
	var pseudo []byte
	if src.Addr().Is4() {
		pkt = make([]byte, 20, 20+len(udp))
		pkt[0] = 0x45
		binary.BigEndian.PutUint16(pkt[2:], uint16(20+len(udp)))
		pkt[8], pkt[9] = 64, unix.IPPROTO_UDP
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(pkt[12:], s[:])
		copy(pkt[16:], d[:])
		binary.BigEndian.PutUint16(pkt[10:], ^checksum(pkt, 0))
		pseudo = pkt[12:20]
	} else {
		pkt = make([]byte, 40, 40+len(udp))
		pkt[0] = 0x60
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(udp)))
		pkt[6], pkt[7] = unix.IPPROTO_UDP, 64
		s, d := src.Addr().As16(), dst.Addr().As16()
		copy(pkt[8:], s[:])
		copy(pkt[24:], d[:])
		pseudo = pkt[8:40]
	}
	c := ^checksum(udp, sumBytes(pseudo, 0)+unix.IPPROTO_UDP+uint32(len(udp)))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return append(pkt, udp...)
}

var (
	exp4 = netip.MustParseAddrPort("192.0.2.1:40000")
	col4 = netip.MustParseAddrPort("198.51.100.7:2055")
	exp6 = netip.MustParseAddrPort("[2001:db8::1]:40000")
	col6 = netip.MustParseAddrPort("[2001:db8::7]:2055")
)

// TestParseRingFrame: what the ring's reader passes on, and why it refuses the rest, as the
// kernel's UDP receive path would.
func TestParseRingFrame(t *testing.T) {
	payload := []byte("a NetFlow datagram, or so")
	edit := func(pkt []byte, f func(p []byte)) []byte {
		p := bytes.Clone(pkt)
		f(p)
		return p
	}
	good4 := udpPacket(exp4, col4, payload)
	good6 := udpPacket(exp6, col6, payload)
	noSum4 := edit(good4, func(p []byte) { p[26], p[27] = 0, 0 })
	for _, tc := range []struct {
		name     string
		pkt      []byte
		csumDone bool
		reason   int
	}{
		{"IPv4", good4, false, -1},
		{"IPv6", good6, false, -1},
		{"IPv4 with Ethernet padding", append(bytes.Clone(good4), 0, 0, 0, 0), false, -1},
		{"IPv4 without UDP checksum", noSum4, false, -1},
		{"IPv4 with options", func() []byte {
			p := make([]byte, 0, len(good4)+4)
			p = append(p, good4[:20]...)
			p = append(p, 1, 1, 1, 0) // NOP NOP NOP EOL
			p = append(p, good4[20:]...)
			p[0] = 0x46
			binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
			p[10], p[11] = 0, 0
			binary.BigEndian.PutUint16(p[10:], ^checksum(p[:24], 0))
			return p
		}(), false, -1},
		{"IPv4 UDP checksum wrong", edit(good4, func(p []byte) { p[27] ^= 1 }), false, ringChecksum},
		{"IPv4 UDP checksum wrong, checked by the device", edit(good4, func(p []byte) { p[27] ^= 1 }), true, -1},
		{"IPv4 header checksum wrong", edit(good4, func(p []byte) { p[8]-- }), false, ringChecksum},
		{"IPv6 UDP checksum wrong", edit(good6, func(p []byte) { p[len(p)-1] ^= 1 }), false, ringChecksum},
		{"IPv6 UDP checksum 0", edit(good6, func(p []byte) { p[46], p[47] = 0, 0 }), false, ringChecksum},
		{"IPv4 more fragments", edit(good4, func(p []byte) {
			p[6] |= 0x20
			p[10], p[11] = 0, 0
			binary.BigEndian.PutUint16(p[10:], ^checksum(p[:20], 0))
		}), false, ringFragment},
		{"IPv6 fragment header", edit(good6, func(p []byte) { p[6] = unix.IPPROTO_FRAGMENT }), false, ringFragment},
		{"IPv4 cut short", good4[:len(good4)-1], false, ringTruncated},
		{"IPv6 cut short", good6[:len(good6)-1], false, ringTruncated},
		{"IPv4 header only", good4[:19], false, ringTruncated},
		{"empty", nil, false, ringMalformed},
		{"IP version 5", edit(good4, func(p []byte) { p[0] = 0x55 }), false, ringMalformed},
		{"IPv4 header length 16", edit(good4, func(p []byte) { p[0] = 0x44 }), false, ringMalformed},
		{"IPv4 not UDP", edit(good4, func(p []byte) {
			p[9] = unix.IPPROTO_TCP
			p[10], p[11] = 0, 0
			binary.BigEndian.PutUint16(p[10:], ^checksum(p[:20], 0))
		}), false, ringMalformed},
		{"UDP length past the packet", edit(good4, func(p []byte) { p[25]++ }), true, ringMalformed},
		{"UDP length below its header", edit(good6, func(p []byte) { p[44], p[45] = 0, 7 }), true, ringMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, n, from, reason := parseRingFrame(tc.pkt, tc.csumDone)
			if reason != tc.reason {
				t.Fatalf("reason %d, want %d", reason, tc.reason)
			}
			if reason >= 0 {
				return
			}
			if got := tc.pkt[off : off+n]; !bytes.Equal(got, payload) {
				t.Errorf("payload %q", got)
			}
			want := exp4
			if tc.pkt[0]>>4 == 6 {
				want = exp6
			}
			if from != want {
				t.Errorf("from %s, want %s", from, want)
			}
		})
	}
}

// ringBlock lays out a TPACKET_V3 block as the kernel does: the block header, then each
// frame's header, its sockaddr_ll space and its packet at tp_net, aligned on 16 bytes.
func ringBlock(pkts ...[]byte) []byte {
	b := make([]byte, 1<<20)
	off := blockHeaderSize
	binary.NativeEndian.PutUint32(b[blockNumPkts:], uint32(len(pkts)))
	binary.NativeEndian.PutUint32(b[blockFirstPkt:], uint32(off))
	for i, p := range pkts {
		const netOff = pktHdrSize + 32
		h := b[off:]
		binary.NativeEndian.PutUint32(h[pktSec:], 1000+uint32(i))
		binary.NativeEndian.PutUint32(h[pktNsec:], 5)
		binary.NativeEndian.PutUint32(h[pktSnaplen:], uint32(len(p)))
		binary.NativeEndian.PutUint32(h[pktLen:], uint32(len(p)))
		binary.NativeEndian.PutUint16(h[pktMac:], netOff)
		binary.NativeEndian.PutUint16(h[pktNet:], netOff)
		copy(h[netOff:], p)
		next := (netOff + len(p) + 15) &^ 15
		if i < len(pkts)-1 {
			binary.NativeEndian.PutUint32(h[pktNext:], uint32(next))
		}
		off += next
	}
	binary.NativeEndian.PutUint32(b[blockLen:], uint32(off))
	return b[:off]
}

// tagFrame marks frame i of a block built by ringBlock as the kernel marks a frame that came
// with an 802.1Q tag (TP_STATUS_VLAN_VALID, its TCI).
func tagFrame(b []byte, i int, tci uint32) {
	off := binary.NativeEndian.Uint32(b[blockFirstPkt:])
	for range i {
		off += binary.NativeEndian.Uint32(b[off+pktNext:])
	}
	h := b[off:]
	binary.NativeEndian.PutUint32(h[pktStatus:], binary.NativeEndian.Uint32(h[pktStatus:])|unix.TP_STATUS_VLAN_VALID)
	binary.NativeEndian.PutUint32(h[pktVLANTCI:], tci)
}

// TestReadBlockVLAN: a frame tagged with a VLAN on the ring's interface is counted (vlan) and
// not passed on: the host receives it, if at all, on the VLAN's device. A priority tag
// (VLAN 0) is the interface's own traffic.
func TestReadBlockVLAN(t *testing.T) {
	b := ringBlock(udpPacket(exp4, col4, []byte("vlan 42")), udpPacket(exp4, col4, []byte("priority")),
		udpPacket(exp4, col4, []byte("untagged")))
	tagFrame(b, 0, 3<<13|42)
	tagFrame(b, 1, 5<<13)
	var bad [ringReasons]int
	got := readBlock(b, 0, nil, &bad)
	if len(got) != 2 || bad != [ringReasons]int{ringVLAN: 1} {
		t.Fatalf("%d datagrams, bad %v", len(got), bad)
	}
	if p := string(b[got[0].off : got[0].off+got[0].len]); p != "priority" {
		t.Errorf("first datagram passed on %q", p)
	}
}

// TestReadBlock: a block's datagrams come out in order with their sources and times; bad
// frames are counted by reason and skipped; a frame header past the block ends it.
func TestReadBlock(t *testing.T) {
	var pkts [][]byte
	for i := range 5 {
		pkts = append(pkts, udpPacket(exp4, col4, []byte("datagram "+strconv.Itoa(i))))
	}
	pkts[2] = pkts[2][:len(pkts[2])-3] // cut: its IP length says more
	b := ringBlock(pkts...)
	var bad [ringReasons]int
	got := readBlock(b, 1<<20, nil, &bad)
	if len(got) != 4 || bad != [ringReasons]int{ringTruncated: 1} {
		t.Fatalf("%d datagrams, bad %v", len(got), bad)
	}
	ring := make([]byte, 1<<20+len(b))
	copy(ring[1<<20:], b)
	for i, d := range got {
		want := i
		if i >= 2 {
			want++
		}
		if p := string(ring[d.off : d.off+d.len]); p != "datagram "+strconv.Itoa(want) || d.from != exp4 || d.sec != 1000+uint32(want) {
			t.Errorf("datagram %d: %q from %s at %d", i, p, d.from, d.sec)
		}
	}
	// A count of frames larger than the block's: the walk stops at its end.
	binary.NativeEndian.PutUint32(b[blockNumPkts:], 50)
	bad = [ringReasons]int{}
	if got := readBlock(b, 0, nil, &bad); len(got) != 4 || bad[ringMalformed] != 0 {
		t.Fatalf("%d datagrams, bad %v", len(got), bad)
	}
	// A next offset pointing past the block.
	first := binary.NativeEndian.Uint32(b[blockFirstPkt:])
	binary.NativeEndian.PutUint32(b[first+pktNext:], 1<<30)
	bad = [ringReasons]int{}
	if got := readBlock(b, 0, nil, &bad); len(got) != 1 || bad[ringMalformed] != 1 {
		t.Fatalf("%d datagrams, bad %v", len(got), bad)
	}
}

// FuzzParseRingFrame: any bytes give a payload inside the packet or a reason, never a panic;
// a payload passed on has the length its UDP header says.
func FuzzParseRingFrame(f *testing.F) {
	f.Add(udpPacket(exp4, col4, []byte("seed")), false)
	f.Add(udpPacket(exp6, col6, []byte("seed six")), true)
	f.Fuzz(func(t *testing.T, pkt []byte, csumDone bool) {
		off, n, _, reason := parseRingFrame(pkt, csumDone)
		if reason >= 0 {
			if reason >= ringReasons {
				t.Fatalf("reason %d", reason)
			}
			return
		}
		if off < 28 || n < 0 || off+n > len(pkt) {
			t.Fatalf("payload [%d:+%d] of %d bytes", off, n, len(pkt))
		}
		if ulen := int(binary.BigEndian.Uint16(pkt[off-4:])); ulen != n+8 {
			t.Fatalf("payload of %d bytes, UDP length %d", n, ulen)
		}
	})
}

// FuzzReadBlock: any block (the kernel's, or memory gone wrong) gives datagrams inside it,
// never a read past it.
func FuzzReadBlock(f *testing.F) {
	f.Add(ringBlock(udpPacket(exp4, col4, []byte("one")), udpPacket(exp6, col6, []byte("two"))))
	f.Add(ringBlock())
	tagged := ringBlock(udpPacket(exp4, col4, []byte("tagged")))
	tagFrame(tagged, 0, 42)
	f.Add(tagged)
	f.Fuzz(func(t *testing.T, b []byte) {
		var bad [ringReasons]int
		for _, d := range readBlock(b, 0, nil, &bad) {
			if uint64(d.off)+uint64(d.len) > uint64(len(b)) {
				t.Fatalf("datagram [%d:+%d] past the block's %d bytes", d.off, d.len, len(b))
			}
		}
	})
}

// dstPorts counts the sink's flows by destination port.
func dstPorts(t *testing.T, s *schema.Schema, sink *memSink) map[uint64]int {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	ports := map[uint64]int{}
	for _, m := range sink.msgs {
		if err := s.DecodeMessage(m, func(col *schema.Column, v any) {
			if col.Key == schema.ColumnDstPort {
				ports[v.(uint64)]++
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	return ports
}

// skipWithoutRaw skips a test that needs AF_PACKET sockets when the process may not open one.
func skipWithoutRaw(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		t.Skip("AF_PACKET sockets need CAP_NET_RAW, which this process lacks")
	}
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

// TestCollectorAFPacket: a listener with receive: af-packet on loopback, two rings, fed by
// many exporters (source ports): every datagram is decoded exactly once, with its source;
// datagrams to another port, or over IPv6 to an IPv4 listener, are not read; the socket
// holding the port drops what it gets without counting kernel drops; Stop ends the rings.
func TestCollectorAFPacket(t *testing.T) {
	skipWithoutRaw(t)
	c, sink, s := newTestCollector(t, func(cfg *Configuration) {
		cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 2,
			ReceiveBuffer: 8 << 20, Receive: "af-packet", Interface: "lo", BlockTimeout: 2 * time.Millisecond}}
	})
	addr := c.ListenAddrs()[0]
	// Elsewhere: another port of loopback, and the same port over IPv6.
	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	send(t, other.LocalAddr().(*net.UDPAddr).AddrPort(), "7:1")
	if six, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback, Port: int(addr.Port())}); err == nil {
		send(t, six.LocalAddr().(*net.UDPAddr).AddrPort(), "7:2")
		six.Close()
	}
	const exporters, each = 20, 50
	for e := range exporters {
		var payloads []string
		for i := range each {
			payloads = append(payloads, "2:"+strconv.Itoa(1000+e*each+i))
		}
		send(t, addr, payloads...)
	}
	testutil.WaitUntil(t, "every datagram", func() bool {
		n := 0
		for _, e := range c.Exporters() {
			n += int(e.Datagrams)
		}
		return n == exporters*each
	})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	ports := dstPorts(t, s, sink)
	if len(ports) != exporters*each {
		t.Fatalf("%d ports in %d flows, want %d", len(ports), len(sink.msgs), exporters*each)
	}
	for p, n := range ports {
		if n != 2 || p < 1000 {
			t.Fatalf("port %d in %d flows", p, n)
		}
	}
	if exps := c.Exporters(); len(exps) != 1 || exps[0].Datagrams != exporters*each {
		t.Errorf("exporters %+v, want one with %d datagrams", exps, exporters*each)
	}
	workers := 0
	for _, w := range c.workers {
		if promtest.ToFloat64(w.datagrams) > 0 {
			workers++
		}
		if d := promtest.ToFloat64(w.kernelDrops); d != 0 {
			t.Errorf("worker %s counted %v kernel drops", w.name, d)
		}
	}
	if workers != 2 {
		t.Errorf("%d of 2 rings read datagrams: the fanout group does not spread exporters", workers)
	}
	for _, reason := range ringReasonNames {
		if n := promtest.ToFloat64(c.metrics.ringErrors.WithLabelValues(c.workers[0].name, reason)); n != 0 {
			t.Errorf("%v ring errors %s", n, reason)
		}
	}
	if h := c.Health().Counters; h["ring-errors"] != 0 || h["kernel-drops"] != 0 || h["datagrams"] != exporters*each {
		t.Errorf("/healthz counters %v", h)
	}
}

// TestRingRefusedCounted: a datagram whose UDP checksum is wrong, written to loopback by a
// raw socket, is refused by the ring's reader and counted, in the metric and in /healthz; the
// good one after it is read.
func TestRingRefusedCounted(t *testing.T) {
	skipWithoutRaw(t)
	c, sink, s := newTestCollector(t, func(cfg *Configuration) {
		cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 1,
			ReceiveBuffer: 2 << 20, Receive: "af-packet", Interface: "lo", BlockTimeout: time.Millisecond}}
	})
	to := c.ListenAddrs()[0]
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	from := netip.AddrPortFrom(to.Addr(), 40001)
	bad := udpPacket(from, to, []byte("1:7"))
	bad[27] ^= 0x55 // the UDP checksum's low byte
	good := udpPacket(from, to, []byte("1:8"))
	dst := &unix.SockaddrInet4{Addr: to.Addr().As4()}
	for _, p := range [][]byte{bad, good} {
		if err := unix.Sendto(fd, p, 0, dst); err != nil {
			t.Fatal(err)
		}
	}
	checksum := c.metrics.ringErrors.WithLabelValues(c.workers[0].name, "checksum")
	testutil.WaitUntil(t, "the good datagram and the bad one counted", func() bool {
		return len(c.Exporters()) == 1 && c.Exporters()[0].Datagrams == 1 && promtest.ToFloat64(checksum) == 1
	})
	if h := c.Health().Counters; h["ring-errors"] != 1 {
		t.Errorf("/healthz counters %v", h)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if ports := dstPorts(t, s, sink); len(ports) != 1 || ports[8] != 1 {
		t.Errorf("flows to ports %v, want one to 8", ports)
	}
}

// injectLo writes frame on loopback through a packet socket (SOCK_DGRAM: an IP packet of
// EtherType proto; SOCK_RAW: an Ethernet frame); the kernel receives it back on lo as it
// would from a wire.
func injectLo(t *testing.T, typ int, proto uint16, frame []byte) {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	sll := &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: lo.Index, Halen: 6}
	if err := unix.Sendto(fd, frame, 0, sll); err != nil {
		t.Fatal(err)
	}
}

// TestRingFilterAddresses: a listener on one address reads the datagrams to it only (not
// those to another address of the host, nor those routed through it, which a UDP socket
// never gets), and an IPv6 listener reads IPv6. The filter refuses an unspecified address,
// which would take routed datagrams.
func TestRingFilterAddresses(t *testing.T) {
	for _, ap := range []string{"0.0.0.0:2055", "[::]:2055"} {
		if _, err := ringFilter(netip.MustParseAddrPort(ap)); err == nil {
			t.Errorf("filter made for %s", ap)
		}
	}
	skipWithoutRaw(t)
	for _, tc := range []struct{ listen, to, elsewhere string }{
		{"127.0.0.1:0", "127.0.0.1", "127.0.0.2"},
		{"[::1]:0", "::1", "127.0.0.1"},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			c, sink, s := newTestCollector(t, func(cfg *Configuration) {
				cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: tc.listen, Workers: 1,
					ReceiveBuffer: 2 << 20, Receive: "af-packet", Interface: "lo", BlockTimeout: time.Millisecond}}
			})
			port := c.ListenAddrs()[0].Port()
			elsewhere, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(tc.elsewhere), port)))
			if err != nil {
				t.Skipf("cannot bind the other address: %v", err)
			}
			defer elsewhere.Close()
			send(t, elsewhere.LocalAddr().(*net.UDPAddr).AddrPort(), "1:9")
			// Not addressed to this host: a router's or a hypervisor's forwarded traffic.
			routed := netip.AddrPortFrom(netip.MustParseAddr("203.0.113.9"), port)
			if netip.MustParseAddr(tc.to).Is6() {
				routed = netip.AddrPortFrom(netip.MustParseAddr("2001:db8::9"), port)
			}
			from := netip.MustParseAddrPort("192.0.2.66:40000")
			if routed.Addr().Is6() {
				from = netip.MustParseAddrPort("[2001:db8::66]:40000")
			}
			proto := uint16(unix.ETH_P_IP)
			if routed.Addr().Is6() {
				proto = unix.ETH_P_IPV6
			}
			injectLo(t, unix.SOCK_DGRAM, proto, udpPacket(from, routed, []byte("1:11")))
			send(t, netip.AddrPortFrom(netip.MustParseAddr(tc.to), port), "1:10")
			// The other datagram, sent first, would come in the same block or an earlier one.
			testutil.WaitUntil(t, "the datagram", func() bool { return len(c.Exporters()) > 0 })
			if err := c.Stop(); err != nil {
				t.Fatal(err)
			}
			if ports := dstPorts(t, s, sink); len(ports) != 1 || ports[10] != 1 {
				t.Fatalf("flows to ports %v, want only 10", ports)
			}
		})
	}
}

// TestRingRefusesVLAN: an 802.1Q-tagged frame (VLAN 42) arriving on lo, which has no VLAN
// device: the kernel drops it after the tap, and a UDP socket never sees it; the ring's
// reader refuses it and counts it (vlan), then reads the untagged datagram after it.
func TestRingRefusesVLAN(t *testing.T) {
	skipWithoutRaw(t)
	c, sink, s := newTestCollector(t, func(cfg *Configuration) {
		cfg.Listeners = []ListenerConfiguration{{Protocol: "netflow", Address: "127.0.0.1:0", Workers: 1,
			ReceiveBuffer: 2 << 20, Receive: "af-packet", Interface: "lo", BlockTimeout: time.Millisecond}}
	})
	to := c.ListenAddrs()[0]
	ip := udpPacket(netip.MustParseAddrPort("127.0.0.5:40001"), to, []byte("1:7"))
	frame := make([]byte, 18, 18+len(ip)) // destination and source MAC zero (lo's), the tag, EtherType
	binary.BigEndian.PutUint16(frame[12:], unix.ETH_P_8021Q)
	binary.BigEndian.PutUint16(frame[14:], 42)
	binary.BigEndian.PutUint16(frame[16:], unix.ETH_P_IP)
	injectLo(t, unix.SOCK_RAW, unix.ETH_P_8021Q, append(frame, ip...))
	send(t, to, "1:8")
	vlan := c.metrics.ringErrors.WithLabelValues(c.workers[0].name, "vlan")
	testutil.WaitUntil(t, "the untagged datagram, and the tagged one counted", func() bool {
		return len(c.Exporters()) > 0 && promtest.ToFloat64(vlan) == 1
	})
	if h := c.Health().Counters; h["ring-errors"] != 1 {
		t.Errorf("/healthz counters %v", h)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if ports := dstPorts(t, s, sink); len(ports) != 1 || ports[8] != 1 {
		t.Errorf("flows to ports %v, want one to 8 (the tagged datagram's is 7)", ports)
	}
}

// BenchmarkReadBlock: the reader's work per datagram of a block (the worker's path between
// the kernel's copy and the pipeline): header checks, the IP and UDP checksums, 0 allocations.
func BenchmarkReadBlock(b *testing.B) {
	payload := bytes.Repeat([]byte{0x5a}, 1240) // a NetFlow v9 datagram of 16 flows
	var pkts [][]byte
	for i := range 40 {
		pkts = append(pkts, udpPacket(netip.AddrPortFrom(exp4.Addr(), uint16(40000+i)), col4, payload))
	}
	blk := ringBlock(pkts...)
	out := make([]ringDatagram, 0, 64)
	var bad [ringReasons]int
	b.SetBytes(int64(len(pkts) * len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		out = readBlock(blk, 0, out[:0], &bad)
	}
	if len(out) != len(pkts) {
		b.Fatalf("%d datagrams", len(out))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pkts)), "ns/datagram")
}
