// Package demo is flowzero's built-in exporter: it generates realistic NetFlow v9, IPFIX and
// sFlow v5 traffic (templates first, options records carrying sampling rates, a few hundred
// hosts talking to the networks of well-known autonomous systems with a realistic mix of
// protocols and ports, an optional day/night shape) and sends it to a collector, so that a
// fresh install has something to show. The encoders write the datagrams by hand from the
// RFCs (NetFlow v9: RFC 3954, IPFIX: RFC 7011, sFlow v5: sflow.org's specification).
package demo

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"time"
)

// Flow is one generated flow, the input of the encoders.
type Flow struct {
	Src, Dst           netip.Addr
	SrcPort, DstPort   uint16
	Proto              uint8
	TCPFlags           uint8
	TOS                uint8
	Bytes, Packets     uint64
	InIf, OutIf        uint32
	SrcAS, DstAS       uint32
	SrcMask, DstMask   uint8
	NextHop            netip.Addr
	Start, End         time.Time
	Direction          uint8 // 0 ingress, 1 egress
	VLAN               uint16
	ASPath             []uint32
	ICMPType, ICMPCode uint8
}

// remote is a destination network of a well-known AS, weighted by its share of traffic.
type remote struct {
	as     uint32
	prefix netip.Prefix
	weight int
}

var remotes = []remote{
	{15169, netip.MustParsePrefix("142.250.0.0/15"), 22}, // Google
	{2906, netip.MustParsePrefix("198.38.96.0/19"), 16},  // Netflix
	{13335, netip.MustParsePrefix("104.16.0.0/13"), 12},  // Cloudflare
	{32934, netip.MustParsePrefix("157.240.0.0/16"), 10}, // Meta
	{16509, netip.MustParsePrefix("52.84.0.0/15"), 9},    // Amazon
	{20940, netip.MustParsePrefix("23.32.0.0/11"), 8},    // Akamai
	{8075, netip.MustParsePrefix("13.104.0.0/14"), 7},    // Microsoft
	{714, netip.MustParsePrefix("17.0.0.0/8"), 5},        // Apple
	{3356, netip.MustParsePrefix("4.0.0.0/9"), 4},        // Lumen
	{15169, netip.MustParsePrefix("2a00:1450::/29"), 4},  // Google v6
	{2906, netip.MustParsePrefix("2a00:86c0::/32"), 3},   // Netflix v6
}

// service is a kind of conversation.
type service struct {
	proto   uint8
	port    uint16
	weight  int
	avgSize int // average packet size from the server
	avgPkts int
}

var services = []service{
	{6, 443, 55, 1200, 40},  // HTTPS
	{17, 443, 15, 1150, 60}, // QUIC
	{6, 80, 8, 900, 20},     // HTTP
	{17, 53, 10, 120, 1},    // DNS
	{17, 123, 2, 76, 1},     // NTP
	{6, 22, 3, 300, 30},     // SSH
	{6, 25, 2, 600, 10},     // SMTP
	{1, 0, 5, 84, 3},        // ICMP echo
}

// LocalAS is the AS of the demo network.
const LocalAS = 64500

// Generator draws flows. It is deterministic for a given seed.
type Generator struct {
	rng     *rand.Rand
	clients []netip.Addr
	v6      []netip.Addr
	remW    int
	svcW    int
	// Diurnal scales the volume with the time of day (a trough at 04:00, a peak at 21:00).
	Diurnal bool
}

// NewGenerator returns a generator of traffic for a network of about 300 hosts.
func NewGenerator(seed uint64) *Generator {
	g := &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range 250 {
		g.clients = append(g.clients, netip.AddrFrom4([4]byte{10, byte(1 + i/100), byte(i % 100), byte(10 + i%200)}))
	}
	for i := range 60 {
		g.v6 = append(g.v6, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i / 16), 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i + 1)}))
	}
	for _, r := range remotes {
		g.remW += r.weight
	}
	for _, s := range services {
		g.svcW += s.weight
	}
	return g
}

// Scale returns the volume multiplier at t (1 without Diurnal).
func (g *Generator) Scale(t time.Time) float64 {
	if !g.Diurnal {
		return 1
	}
	h := float64(t.Hour()) + float64(t.Minute())/60
	return 0.65 + 0.35*math.Sin((h-15)*math.Pi/12) // minimum near 03:00–04:00, maximum near 21:00
}

func (g *Generator) pickRemote(v6 bool) remote {
	for {
		n := g.rng.IntN(g.remW)
		for _, r := range remotes {
			if n < r.weight {
				if r.prefix.Addr().Is6() == v6 {
					return r
				}
				break
			}
			n -= r.weight
		}
	}
}

func (g *Generator) addrIn(p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	bits := p.Bits()
	for i := bits / 8; i < len(a); i++ {
		r := byte(g.rng.IntN(256))
		if i == bits/8 && bits%8 != 0 {
			mask := byte(0xff >> (bits % 8))
			a[i] = a[i]&^mask | r&mask
		} else {
			a[i] = r
		}
	}
	if a[len(a)-1] == 0 {
		a[len(a)-1] = 1
	}
	addr, _ := netip.AddrFromSlice(a)
	return addr
}

// Next draws one flow ending at now.
func (g *Generator) Next(now time.Time) Flow {
	n := g.rng.IntN(g.svcW)
	var svc service
	for _, s := range services {
		if n < s.weight {
			svc = s
			break
		}
		n -= s.weight
	}
	v6 := g.rng.IntN(5) == 0
	var client netip.Addr
	if v6 {
		client = g.v6[g.rng.IntN(len(g.v6))]
	} else {
		client = g.clients[g.rng.IntN(len(g.clients))]
	}
	rem := g.pickRemote(v6)
	server := g.addrIn(rem.prefix)
	pkts := uint64(1 + g.rng.IntN(2*svc.avgPkts))
	size := uint64(max(40, svc.avgSize/2+g.rng.IntN(svc.avgSize)))
	if size > 1500 {
		size = 1500
	}
	dur := time.Duration(g.rng.IntN(30000)) * time.Millisecond
	f := Flow{
		Proto:   svc.proto,
		Packets: pkts,
		Bytes:   pkts * size,
		Start:   now.Add(-dur),
		End:     now,
		TOS:     0,
		VLAN:    uint16(100 + g.rng.IntN(4)),
	}
	if g.rng.IntN(10) == 0 {
		f.TOS = 0xb8 // EF
	}
	uplink := uint32(1 + g.rng.IntN(4))    // transit/IX ports 1-4
	access := uint32(100 + g.rng.IntN(24)) // customer ports 100-123
	ephemeral := uint16(32768 + g.rng.IntN(28000))
	// Two thirds of flows are downloads (server → client), as on an eyeball network.
	if g.rng.IntN(3) != 0 {
		f.Src, f.Dst = server, client
		f.SrcPort, f.DstPort = svc.port, ephemeral
		f.SrcAS, f.DstAS = rem.as, LocalAS
		f.InIf, f.OutIf = uplink, access
		f.SrcMask, f.DstMask = uint8(rem.prefix.Bits()), 24
		f.Direction = 0
		f.ASPath = []uint32{LocalAS}
	} else {
		f.Src, f.Dst = client, server
		f.SrcPort, f.DstPort = ephemeral, svc.port
		f.SrcAS, f.DstAS = LocalAS, rem.as
		f.InIf, f.OutIf = access, uplink
		f.SrcMask, f.DstMask = 24, uint8(rem.prefix.Bits())
		f.Direction = 1
		f.Bytes = pkts * uint64(max(40, 60+g.rng.IntN(100)))
		f.ASPath = []uint32{[]uint32{174, 3356, 1299, 6939}[g.rng.IntN(4)], rem.as}
	}
	if v6 {
		if f.Direction == 0 {
			f.DstMask = 64
		} else {
			f.SrcMask = 64
		}
		f.NextHop = netip.MustParseAddr("2001:db8:ffff::1")
	} else {
		f.NextHop = netip.AddrFrom4([4]byte{192, 0, 2, byte(uplink)})
	}
	switch svc.proto {
	case 6:
		f.TCPFlags = 0x18 | 0x02 // SYN PSH ACK seen over the flow
		if f.Packets > 3 {
			f.TCPFlags |= 0x01
		}
	case 1:
		f.SrcPort, f.DstPort = 0, 0
		if f.Src.Is6() {
			f.Proto = 58
			f.ICMPType = 128
		} else {
			f.ICMPType = 8
		}
	}
	return f
}
