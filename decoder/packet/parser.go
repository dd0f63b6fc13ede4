package packet

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"flowzero/schema"
)

// EtherTypes and IP protocol numbers the parser knows.
const (
	etherTypeIPv4      = 0x0800
	etherTypeIPv6      = 0x86dd
	etherTypeVLAN      = 0x8100 // IEEE 802.1Q
	etherTypeQinQ      = 0x88a8 // IEEE 802.1ad
	etherTypeQinQOld   = 0x9100 // pre-802.1ad QinQ, still seen
	etherTypeMPLS      = 0x8847
	etherTypeMPLSMulti = 0x8848
	etherTypeTEB       = 0x6558 // transparent Ethernet bridging (Ethernet in GRE)

	protoICMPv4  = 1
	protoIPv4    = 4
	protoTCP     = 6
	protoDCCP    = 33
	protoUDP     = 17
	protoIPv6    = 41
	protoGRE     = 47
	protoICMPv6  = 58
	protoSCTP    = 132
	protoUDPLite = 136
)

// maxEthernetDepth bounds Ethernet-in-MPLS-in-Ethernet nesting so that a crafted header
// cannot make the parser recurse once per 18 bytes. IP tunnels need no bound: only one
// level is decapsulated, the inner packet is parsed without looking for another tunnel.
const maxEthernetDepth = 4

// maxMPLSLabels is how many labels of a stack are recorded; deeper labels are walked over.
const maxMPLSLabels = 16

// labelStack collects an MPLS label stack for FlowMessage.AppendArrayUint32, which may keep
// the slice it is given (for its hot columns), so that the labels cannot live on the stack;
// the pool keeps this from allocating. MPLSLabels is not a hot column: the labels are encoded
// at once and the stack goes back to the pool right after.
type labelStack struct {
	labels [maxMPLSLabels]uint32
	n      int
}

var labelStacks = sync.Pool{New: func() any { return new(labelStack) }}

// Parser parses sampled packet headers into a FlowMessage. It is immutable after New and safe
// for concurrent use.
type Parser struct {
	decap     Decapsulation
	vxlanPort uint16
}

// New returns a Parser for cfg.
func New(cfg Configuration) (*Parser, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Parser{decap: cfg.Decapsulation, vxlanPort: cfg.VXLANPort}, nil
}

// Decapsulation returns the tunnel the parser looks through.
func (p *Parser) Decapsulation() Decapsulation { return p.decap }

// ParseEthernet parses an Ethernet frame starting at its destination MAC address and records
// its fields into fm. It returns the L3 length of the reported packet (the IPv4 total length
// or the IPv6 payload length plus 40, of the inner packet when decapsulating), 0 for a frame
// that does not carry IP.
func (p *Parser) ParseEthernet(data []byte, fm *schema.FlowMessage) (int, error) {
	return p.ethernet(data, fm, p.decap, 0)
}

// ParseIPv4 parses an IPv4 packet (no link-layer header) into fm, see ParseEthernet.
func (p *Parser) ParseIPv4(data []byte, fm *schema.FlowMessage) (int, error) {
	return p.ipv4(data, fm, p.decap, 0)
}

// ParseIPv6 parses an IPv6 packet (no link-layer header) into fm, see ParseEthernet.
func (p *Parser) ParseIPv6(data []byte, fm *schema.FlowMessage) (int, error) {
	return p.ipv6(data, fm, p.decap, 0)
}

// ParseIP parses an IPv4 or IPv6 packet, chosen by its version nibble, into fm (raw IP link
// types), see ParseEthernet.
func (p *Parser) ParseIP(data []byte, fm *schema.FlowMessage) (int, error) {
	if len(data) == 0 {
		return 0, ErrTruncated
	}
	switch data[0] >> 4 {
	case 4:
		return p.ipv4(data, fm, p.decap, 0)
	case 6:
		return p.ipv6(data, fm, p.decap, 0)
	}
	return 0, ErrBadIPHeader
}

// ethernet parses an Ethernet II frame with its VLAN tags and MPLS label stack. With decap
// set, the frame is the outer one: walked, not recorded.
func (p *Parser) ethernet(data []byte, fm *schema.FlowMessage, decap Decapsulation, depth int) (int, error) {
	if len(data) < 14 {
		return 0, ErrTruncated
	}
	if depth >= maxEthernetDepth {
		return 0, ErrTooDeep
	}
	record := decap == DecapNone
	if record && fm.Schema().GroupEnabled(schema.GroupL2) {
		fm.AppendUint(schema.ColumnDstMAC, mac48(data[0:6]))
		fm.AppendUint(schema.ColumnSrcMAC, mac48(data[6:12]))
	}
	etherType := binary.BigEndian.Uint16(data[12:14])
	data = data[14:]

	// IEEE 802.1Q tags, stacked for QinQ: the innermost VLAN is the customer's.
	var vlan uint16
	for etherType == etherTypeVLAN || etherType == etherTypeQinQ || etherType == etherTypeQinQOld {
		if len(data) < 4 {
			return 0, ErrTruncated
		}
		if id := binary.BigEndian.Uint16(data[0:2]) & 0x0fff; id != 0 {
			vlan = id // VID 0 is a priority tag only
		}
		etherType = binary.BigEndian.Uint16(data[2:4])
		data = data[4:]
	}
	if record && vlan != 0 {
		if fm.SrcVlan == 0 {
			fm.SrcVlan = vlan
		}
		if fm.DstVlan == 0 {
			fm.DstVlan = vlan
		}
	}

	if etherType == etherTypeMPLS || etherType == etherTypeMPLSMulti {
		// RFC 3032 §2.1: label (20 bits), traffic class (3), bottom of stack (1), TTL (8).
		var stack *labelStack
		if record && fm.Schema().Enabled(schema.ColumnMPLSLabels) {
			stack = labelStacks.Get().(*labelStack)
			stack.n = 0
		}
		var label uint32
		for {
			if len(data) < 4 {
				if stack != nil {
					labelStacks.Put(stack)
				}
				return 0, ErrTruncated
			}
			entry := binary.BigEndian.Uint32(data[0:4])
			data = data[4:]
			label = entry >> 12
			if stack != nil && stack.n < maxMPLSLabels {
				stack.labels[stack.n] = label
				stack.n++
			}
			if entry&0x100 != 0 {
				break
			}
		}
		if stack != nil {
			fm.AppendArrayUint32(schema.ColumnMPLSLabels, stack.labels[:stack.n])
			labelStacks.Put(stack)
		}
		// The stack says nothing of its payload: see the package doc for the heuristic.
		switch label {
		case 0: // IPv4 explicit null
			etherType = etherTypeIPv4
		case 2: // IPv6 explicit null
			etherType = etherTypeIPv6
		default:
			if len(data) < 1 {
				return 0, ErrTruncated
			}
			switch data[0] >> 4 {
			case 4:
				etherType = etherTypeIPv4
			case 6:
				etherType = etherTypeIPv6
			case 0:
				// RFC 4385 pseudowire control word, then an Ethernet frame (RFC 4448).
				if len(data) < 4 {
					return 0, ErrTruncated
				}
				if binary.BigEndian.Uint32(data[0:4]) != 0 {
					return 0, ErrMPLSPayload
				}
				return p.ethernet(data[4:], fm, decap, depth+1)
			default:
				return 0, ErrMPLSPayload
			}
		}
	}

	switch etherType {
	case etherTypeIPv4:
		return p.ipv4(data, fm, decap, depth)
	case etherTypeIPv6:
		return p.ipv6(data, fm, decap, depth)
	}
	if !record {
		return 0, ErrNotEncapsulated
	}
	fm.AppendUint(schema.ColumnEType, uint64(etherType))
	return 0, nil
}

// setAddrs sets the flow's addresses unless a record before the sampled header gave them
// (an sFlow sampled_ipv4 record, an IPFIX field): every column keeps its first value, like
// the appended ones (protocol, ports).
func setAddrs(fm *schema.FlowMessage, src, dst netip.Addr) {
	if !fm.SrcAddr.IsValid() {
		fm.SrcAddr = src
	}
	if !fm.DstAddr.IsValid() {
		fm.DstAddr = dst
	}
}

// ipv4 parses an IPv4 header (RFC 791 §3.1) and what follows it.
func (p *Parser) ipv4(data []byte, fm *schema.FlowMessage, decap Decapsulation, depth int) (int, error) {
	if len(data) < 20 {
		return 0, ErrTruncated
	}
	ihl := int(data[0]&0x0f) * 4
	if data[0]>>4 != 4 || ihl < 20 {
		return 0, ErrBadIPHeader
	}
	l3Length := int(binary.BigEndian.Uint16(data[2:4]))
	fragOffset := binary.BigEndian.Uint16(data[6:8]) & 0x1fff
	proto := data[9]
	switch decap {
	case DecapNone:
		fm.AppendUint(schema.ColumnEType, etherTypeIPv4)
		setAddrs(fm, netip.AddrFrom4([4]byte(data[12:16])), netip.AddrFrom4([4]byte(data[16:20])))
		fm.AppendUint(schema.ColumnProto, uint64(proto))
		if fm.Schema().GroupEnabled(schema.GroupL3L4) {
			fm.AppendUint(schema.ColumnIPTos, uint64(data[1]))
			fm.AppendUint(schema.ColumnIPTTL, uint64(data[8]))
			fm.AppendUint(schema.ColumnIPFragmentID, uint64(binary.BigEndian.Uint16(data[4:6])))
			fm.AppendUint(schema.ColumnIPFragmentOffset, uint64(fragOffset))
		}
	case DecapSRv6:
		return 0, ErrNotEncapsulated
	}
	if fragOffset != 0 || len(data) < ihl {
		// A later fragment has no transport header; options cut by the sampler leave none.
		if decap != DecapNone {
			return 0, ErrNotEncapsulated
		}
		return l3Length, nil
	}
	n, err := p.transport(data[ihl:], proto, fm, decap, depth, l3Length)
	if decap != DecapNone && err == nil {
		// The outer header of the tunnel.
		fm.AppendIP(schema.ColumnTunnelSrcAddr, netip.AddrFrom4([4]byte(data[12:16])))
		fm.AppendIP(schema.ColumnTunnelDstAddr, netip.AddrFrom4([4]byte(data[16:20])))
		fm.AppendUint(schema.ColumnTunnelProto, uint64(proto))
	}
	return n, err
}

// ipv6 parses an IPv6 header (RFC 8200 §3), walks its extension headers (§4) and parses what
// follows them.
func (p *Parser) ipv6(data []byte, fm *schema.FlowMessage, decap Decapsulation, depth int) (int, error) {
	if len(data) < 40 {
		return 0, ErrTruncated
	}
	if data[0]>>4 != 6 {
		return 0, ErrBadIPHeader
	}
	l3Length := int(binary.BigEndian.Uint16(data[4:6])) + 40
	next := data[6]
	record := decap == DecapNone
	l3l4 := record && fm.Schema().GroupEnabled(schema.GroupL3L4)
	if record {
		fm.AppendUint(schema.ColumnEType, etherTypeIPv6)
		setAddrs(fm, netip.AddrFrom16([16]byte(data[8:24])), netip.AddrFrom16([16]byte(data[24:40])))
	}
	if l3l4 {
		vtf := binary.BigEndian.Uint32(data[0:4]) // version, traffic class, flow label
		fm.AppendUint(schema.ColumnIPTos, uint64(vtf>>20)&0xff)
		fm.AppendUint(schema.ColumnIPTTL, uint64(data[7]))
		fm.AppendUint(schema.ColumnIPv6FlowLabel, uint64(vtf&0xfffff))
	}
	outer := data[:40]
	var segments []byte // SRv6 segment list
	data = data[40:]

	// Extension headers, RFC 8200 §4 (and RFC 4302 for AH). Each one is at least 8 bytes, so
	// the walk ends after len(data)/8 steps at most.
	first := true
walk:
	for {
		var hdrLen int
		switch next {
		case 0, 43, 60, 135, 139, 140: // hop-by-hop, routing (SRH included), destination, mobility, HIP, shim6
			if len(data) < 8 {
				break walk
			}
			hdrLen = (int(data[1]) + 1) * 8
		case 51: // authentication header
			if len(data) < 8 {
				break walk
			}
			hdrLen = (int(data[1]) + 2) * 4
		case 44: // fragment (§4.5): next header, reserved, offset<<3|M, identification
			if len(data) < 8 {
				break walk
			}
			offset := binary.BigEndian.Uint16(data[2:4]) >> 3
			if l3l4 {
				fm.AppendUint(schema.ColumnIPFragmentID, uint64(binary.BigEndian.Uint32(data[4:8])))
				fm.AppendUint(schema.ColumnIPFragmentOffset, uint64(offset))
			}
			next = data[0]
			data = data[8:]
			if offset != 0 {
				first = false
				break walk
			}
			continue
		default:
			break walk
		}
		if len(data) < hdrLen {
			data = data[:0]
			break walk
		}
		if next == 43 && data[2] == 4 && decap == DecapSRv6 {
			// RFC 8754 §2 segment routing header: 8 bytes, then the segment list.
			segments = data[8:hdrLen]
		}
		next = data[0]
		data = data[hdrLen:]
	}
	if record {
		fm.AppendUint(schema.ColumnProto, uint64(next))
	}
	if !first || len(data) == 0 {
		if !record {
			return 0, ErrNotEncapsulated
		}
		return l3Length, nil
	}
	n, err := p.transport(data, next, fm, decap, depth, l3Length)
	if !record && err == nil {
		// The outer header of the tunnel.
		fm.AppendIP(schema.ColumnTunnelSrcAddr, netip.AddrFrom16([16]byte(outer[8:24])))
		fm.AppendIP(schema.ColumnTunnelDstAddr, netip.AddrFrom16([16]byte(outer[24:40])))
		fm.AppendUint(schema.ColumnTunnelProto, uint64(outer[6]))
		if decap == DecapSRv6 {
			if segments == nil {
				// Without a segment routing header, the destination is the (only) SID.
				segments = outer[24:40]
			}
			for ; len(segments) >= 16; segments = segments[16:] {
				fm.AppendIP(schema.ColumnSRv6SIDs, netip.AddrFrom16([16]byte(segments[:16])))
			}
		}
	}
	return n, err
}

// transport parses the header that follows IP: the tunnel's when decapsulating, otherwise
// the transport header, which the sampler may have cut anywhere.
func (p *Parser) transport(data []byte, proto uint8, fm *schema.FlowMessage, decap Decapsulation, depth, l3Length int) (int, error) {
	switch decap {
	case DecapNone:
	case DecapGRE:
		if proto != protoGRE {
			return 0, ErrNotEncapsulated
		}
		return p.gre(data, fm, depth)
	case DecapIPIP, DecapSRv6:
		switch proto {
		case protoIPv4:
			return p.ipv4(data, fm, DecapNone, depth)
		case protoIPv6:
			return p.ipv6(data, fm, DecapNone, depth)
		}
		return 0, ErrNotEncapsulated
	case DecapVXLAN:
		// RFC 7348 §5: UDP to the VXLAN port, 8-byte header with the I flag and the VNI.
		if proto != protoUDP || len(data) < 16 || binary.BigEndian.Uint16(data[2:4]) != p.vxlanPort || data[8]&0x08 == 0 {
			return 0, ErrNotEncapsulated
		}
		fm.AppendUint(schema.ColumnVXLANVNI, uint64(binary.BigEndian.Uint32(data[12:16])>>8))
		return p.ethernet(data[16:], fm, DecapNone, depth+1)
	}

	switch proto {
	case protoTCP:
		if len(data) >= 4 {
			fm.AppendUint(schema.ColumnSrcPort, uint64(binary.BigEndian.Uint16(data[0:2])))
			fm.AppendUint(schema.ColumnDstPort, uint64(binary.BigEndian.Uint16(data[2:4])))
		}
		if len(data) >= 14 && fm.Schema().GroupEnabled(schema.GroupL3L4) {
			// RFC 7125: the 12 flag bits, data offset masked.
			fm.AppendUint(schema.ColumnTCPFlags, uint64(binary.BigEndian.Uint16(data[12:14])&0x0fff))
		}
	case protoUDP, protoSCTP, protoDCCP, protoUDPLite:
		if len(data) >= 4 {
			fm.AppendUint(schema.ColumnSrcPort, uint64(binary.BigEndian.Uint16(data[0:2])))
			fm.AppendUint(schema.ColumnDstPort, uint64(binary.BigEndian.Uint16(data[2:4])))
		}
	case protoICMPv4:
		if len(data) >= 2 && fm.Schema().GroupEnabled(schema.GroupL3L4) {
			fm.AppendUint(schema.ColumnICMPv4Type, uint64(data[0]))
			fm.AppendUint(schema.ColumnICMPv4Code, uint64(data[1]))
		}
	case protoICMPv6:
		if len(data) >= 2 && fm.Schema().GroupEnabled(schema.GroupL3L4) {
			fm.AppendUint(schema.ColumnICMPv6Type, uint64(data[0]))
			fm.AppendUint(schema.ColumnICMPv6Code, uint64(data[1]))
		}
	}
	return l3Length, nil
}

// gre parses a GRE header (RFC 2784, key and sequence number from RFC 2890) and the packet it
// carries.
func (p *Parser) gre(data []byte, fm *schema.FlowMessage, depth int) (int, error) {
	if len(data) < 4 {
		return 0, ErrTruncated
	}
	flags := binary.BigEndian.Uint16(data[0:2])
	protocol := binary.BigEndian.Uint16(data[2:4])
	// Version 0 only (version 1 is PPTP's PPP carrier); no RFC 1701 routing.
	if flags&0x0007 != 0 || flags&0x4000 != 0 {
		return 0, ErrNotEncapsulated
	}
	hdrLen := 4
	if flags&0x8000 != 0 { // checksum and reserved
		hdrLen += 4
	}
	keyAt := -1
	if flags&0x2000 != 0 {
		keyAt = hdrLen
		hdrLen += 4
	}
	if flags&0x1000 != 0 { // sequence number
		hdrLen += 4
	}
	if len(data) < hdrLen {
		return 0, ErrTruncated
	}
	if keyAt >= 0 {
		fm.AppendUint(schema.ColumnGREKey, uint64(binary.BigEndian.Uint32(data[keyAt:keyAt+4])))
	}
	inner := data[hdrLen:]
	switch protocol {
	case etherTypeIPv4:
		return p.ipv4(inner, fm, DecapNone, depth)
	case etherTypeIPv6:
		return p.ipv6(inner, fm, DecapNone, depth)
	case etherTypeTEB:
		return p.ethernet(inner, fm, DecapNone, depth+1)
	}
	return 0, ErrNotEncapsulated
}

// mac48 returns a MAC address as the low 48 bits of an integer (the MAC columns' encoding).
func mac48(b []byte) uint64 {
	_ = b[5]
	return uint64(b[0])<<40 | uint64(b[1])<<32 | uint64(b[2])<<24 | uint64(b[3])<<16 | uint64(b[4])<<8 | uint64(b[5])
}
