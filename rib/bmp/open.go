package bmp

import (
	"encoding/binary"
	"fmt"

	"flowzero/rib/bgp"
)

// Family is an address family and subsequent address family pair, AFI<<8 | SAFI.
type Family uint32

// NewFamily packs an AFI and a SAFI.
func NewFamily(afi uint16, safi uint8) Family { return Family(afi)<<8 | Family(safi) }

// AFI returns the address family identifier.
func (f Family) AFI() uint16 { return uint16(f >> 8) }

// SAFI returns the subsequent address family identifier.
func (f Family) SAFI() uint8 { return uint8(f) }

// Families this package knows by name (IANA AFI and SAFI registries).
const (
	FamilyIPv4Unicast  Family = 1<<8 | 1
	FamilyIPv6Unicast  Family = 2<<8 | 1
	FamilyIPv4Labeled  Family = 1<<8 | 4
	FamilyIPv6Labeled  Family = 2<<8 | 4
	FamilyIPv4VPN      Family = 1<<8 | 128
	FamilyIPv6VPN      Family = 2<<8 | 128
	FamilyL2VPNVPLS    Family = 25<<8 | 65
	FamilyL2VPNEVPN    Family = 25<<8 | 70
	FamilyIPv4Multicst Family = 1<<8 | 2
	FamilyIPv6Multicst Family = 2<<8 | 2
)

// String names the family like the metric labels do ("ipv4-unicast", "l2vpn-vpls"...).
func (f Family) String() string {
	switch f {
	case FamilyIPv4Unicast:
		return "ipv4-unicast"
	case FamilyIPv6Unicast:
		return "ipv6-unicast"
	case FamilyIPv4Labeled:
		return "ipv4-labelled-unicast"
	case FamilyIPv6Labeled:
		return "ipv6-labelled-unicast"
	case FamilyIPv4VPN:
		return "l3vpn-ipv4-unicast"
	case FamilyIPv6VPN:
		return "l3vpn-ipv6-unicast"
	case FamilyL2VPNVPLS:
		return "l2vpn-vpls"
	case FamilyL2VPNEVPN:
		return "l2vpn-evpn"
	case FamilyIPv4Multicst:
		return "ipv4-multicast"
	case FamilyIPv6Multicst:
		return "ipv6-multicast"
	}
	return fmt.Sprintf("afi%d-safi%d", f.AFI(), f.SAFI())
}

// Add-Path send/receive modes (RFC 7911 §4).
const (
	addPathReceive = 1
	addPathSend    = 2
)

// openCapabilities calls fn for each capability (code, value) of a BGP OPEN message
// (RFC 4271 §4.2, RFC 5492, RFC 9072 extended optional parameters length).
func openCapabilities(msg []byte, fn func(code uint8, value []byte)) error {
	if len(msg) < bgpHeaderLen+10 {
		return fmt.Errorf("OPEN: %w", ErrTruncated)
	}
	if msg[18] != 1 {
		return fmt.Errorf("%w (type %d)", ErrNoOpen, msg[18])
	}
	b := msg[bgpHeaderLen+9:] // after version, my AS, hold time, BGP identifier
	optLen := int(b[0])
	b = b[1:]
	extended := false
	if optLen == 255 && len(b) >= 3 && b[0] == 255 { // RFC 9072 §2
		optLen = int(binary.BigEndian.Uint16(b[1:3]))
		b = b[3:]
		extended = true
	}
	if optLen > len(b) {
		return fmt.Errorf("OPEN optional parameters length %d: %w", optLen, ErrTruncated)
	}
	b = b[:optLen]
	for len(b) > 0 {
		var ptype uint8
		var plen int
		if extended {
			if len(b) < 3 {
				return fmt.Errorf("OPEN parameter: %w", ErrTruncated)
			}
			ptype, plen = b[0], int(binary.BigEndian.Uint16(b[1:3]))
			b = b[3:]
		} else {
			if len(b) < 2 {
				return fmt.Errorf("OPEN parameter: %w", ErrTruncated)
			}
			ptype, plen = b[0], int(b[1])
			b = b[2:]
		}
		if plen > len(b) {
			return fmt.Errorf("OPEN parameter type %d length %d: %w", ptype, plen, ErrTruncated)
		}
		param := b[:plen]
		b = b[plen:]
		if ptype != 2 { // capabilities
			continue
		}
		for len(param) > 0 {
			if len(param) < 2 || int(param[1]) > len(param)-2 {
				return fmt.Errorf("OPEN capability: %w", ErrTruncated)
			}
			fn(param[0], param[2:2+int(param[1])])
			param = param[2+int(param[1]):]
		}
	}
	return nil
}

// addPathModes returns the Add-Path (capability 69, RFC 7911 §4) mode per family of an OPEN.
func addPathModes(open []byte) (map[Family]uint8, error) {
	var modes map[Family]uint8
	err := openCapabilities(open, func(code uint8, v []byte) {
		if code != 69 {
			return
		}
		for ; len(v) >= 4; v = v[4:] {
			if modes == nil {
				modes = make(map[Family]uint8)
			}
			modes[NewFamily(binary.BigEndian.Uint16(v[0:2]), v[2])] = v[3]
		}
	})
	return modes, err
}

// NegotiatedAddPath returns the families in which the routes reported for this peer carry
// path identifiers: the sender of the routes announced Send and their receiver announced
// Receive (RFC 7911 §5). For an Adj-RIB-In the sender is the peer (received OPEN); for an
// Adj-RIB-Out (RFC 8671) it is the monitored router (sent OPEN).
// Families the RIB does not decode are left out.
func NegotiatedAddPath(sentOpen, receivedOpen []byte, adjRIBOut bool) (bgp.FamilySet, error) {
	sent, err := addPathModes(sentOpen)
	if err != nil {
		return 0, err
	}
	received, err := addPathModes(receivedOpen)
	if err != nil {
		return 0, err
	}
	sender, receiver := received, sent
	if adjRIBOut {
		sender, receiver = sent, received
	}
	var set bgp.FamilySet
	for f, mode := range sender {
		if mode&addPathSend != 0 && receiver[f]&addPathReceive != 0 {
			if rf, ok := bgp.FamilyOf(f.AFI(), f.SAFI()); ok {
				set = set.With(rf)
			}
		}
	}
	return set, nil
}
