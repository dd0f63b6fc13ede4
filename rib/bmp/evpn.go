package bmp

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"flowzero/rib/bgp"
)

// evpnIPPrefixRoute is the EVPN route type carrying an IP prefix (RFC 9136 §3.1).
const evpnIPPrefixRoute = 5

// evpnReader iterates over L2VPN EVPN NLRI (RFC 7432 §7: route type, length, route) and
// yields the IP prefix routes (type 5) as prefixes with their RD; the other route types are
// MAC/Ethernet segment state that says nothing about IP reachability and are skipped.
type evpnReader struct {
	b       []byte
	addPath bool
	err     error
	skipped int
}

// Next returns the next IP prefix route.
func (r *evpnReader) Next() (bgp.Prefix, bool) {
	for len(r.b) > 0 && r.err == nil {
		var p bgp.Prefix
		b := r.b
		if r.addPath {
			if len(b) < 4 {
				r.err = fmt.Errorf("EVPN path identifier: %w", ErrTruncated)
				return p, false
			}
			p.PathID = binary.BigEndian.Uint32(b)
			b = b[4:]
		}
		if len(b) < 2 || len(b) < 2+int(b[1]) {
			r.err = fmt.Errorf("EVPN NLRI: %w", ErrTruncated)
			return p, false
		}
		typ, route := b[0], b[2:2+int(b[1])]
		r.b = b[2+int(b[1]):]
		if typ != evpnIPPrefixRoute {
			r.skipped++
			continue
		}
		// RD (8), ESI (10), Ethernet tag (4), prefix length (1), prefix, gateway, label (3):
		// 34 octets for IPv4, 58 for IPv6.
		var addr netip.Addr
		switch len(route) {
		case 34:
			addr = netip.AddrFrom4([4]byte(route[23:27]))
		case 58:
			addr = netip.AddrFrom16([16]byte(route[23:39]))
		default:
			r.err = fmt.Errorf("EVPN IP prefix route of %d octets: %w", len(route), ErrBadLength)
			return p, false
		}
		var err error
		p.RD = binary.BigEndian.Uint64(route[0:8])
		if p.Prefix, err = addr.Prefix(int(route[22])); err != nil {
			r.err = fmt.Errorf("EVPN prefix length %d: %w", route[22], ErrBadLength)
			return p, false
		}
		return p, true
	}
	return bgp.Prefix{}, false
}
