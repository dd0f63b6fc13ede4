// Package bgp decodes BGP-4 path attributes and UPDATE messages (RFC 4271, RFC 4760
// multiprotocol, RFC 6793 four-octet AS, RFC 7911 Add-Path, RFC 1997/8092 communities) for the
// RIB's sources: MRT dumps (rib/mrt) and BMP route monitoring (rib/bmp).
//
// Design: parsing never allocates in steady state. Attributes and Update hold slices that are
// reused from one call to the next (reset to length 0, then appended to), so a decoder keeps
// one of each per goroutine; their contents are only valid until the next call. The RIB copies
// what it keeps when it interns an attribute set. Every length is checked against the
// enclosing buffer; malformed input returns an error wrapping ErrMalformed, never a panic.
// gobgp's pkg/packet/bgp does the same decoding into objects allocated per attribute, which a
// full-table load (millions of entries) cannot afford: docs/design/rib.md compares the two.
package bgp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ErrMalformed is wrapped by every error returned for input that does not follow the RFCs.
var ErrMalformed = errors.New("malformed BGP data")

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// Path attribute type codes (RFC 4271 §5, RFC 4760, RFC 6793, RFC 1997, RFC 8092).
const (
	AttrOrigin           = 1
	AttrASPath           = 2
	AttrNextHop          = 3
	AttrMED              = 4
	AttrLocalPref        = 5
	AttrAtomicAggregate  = 6
	AttrAggregator       = 7
	AttrCommunities      = 8
	AttrMPReachNLRI      = 14
	AttrMPUnreachNLRI    = 15
	AttrAS4Path          = 17
	AttrAS4Aggregator    = 18
	AttrLargeCommunities = 32
)

// ORIGIN values (RFC 4271 §5.1.1). OriginUnknown marks an absent ORIGIN attribute.
const (
	OriginIGP        uint8 = 0
	OriginEGP        uint8 = 1
	OriginIncomplete uint8 = 2
	OriginUnknown    uint8 = 255
)

// ASTrans is the 2-octet placeholder for a 4-octet AS number (RFC 6793 §9).
const ASTrans = 23456

// ASNSize says how AS numbers are encoded in AS_PATH and AGGREGATOR.
type ASNSize uint8

const (
	// ASNAuto tries 4-octet AS numbers and falls back to 2-octet ones when the AS_PATH does not
	// parse exactly with 4 (what MRT readers do when the session capability is not recorded).
	ASNAuto ASNSize = iota
	// ASN4 is for sessions that negotiated the four-octet AS capability (RFC 6793).
	ASN4
	// ASN2 is for legacy sessions (and MRT TABLE_DUMP v1).
	ASN2
)

// LargeCommunity is one RFC 8092 large community.
type LargeCommunity struct {
	GlobalAdmin, LocalData1, LocalData2 uint32
}

// Attributes is a decoded set of path attributes. After ParseAttributes its slices alias
// reusable scratch storage; the RIB's interned copies own theirs and are read-only.
type Attributes struct {
	// ASPath is the AS_PATH flattened in order: AS_SEQUENCE members, then AS_SET members as
	// they appear. When the path was 2-octet with an AS4_PATH, the two are merged (RFC 6793 §4.2.3).
	ASPath []uint32
	// Communities are RFC 1997 communities (ASN<<16 | value).
	Communities      []uint32
	LargeCommunities []LargeCommunity
	// NextHop is the NEXT_HOP attribute, or for MP_REACH_NLRI routes the global next hop.
	NextHop   netip.Addr
	LocalPref uint32
	MED       uint32
	// ASPathLength is the length counted by the decision process (RFC 4271 §9.1.2.2: an
	// AS_SET counts as one).
	ASPathLength uint16
	Origin       uint8
	HasLocalPref bool
	HasMED       bool
}

// OriginAS is the AS that originated the route: the last AS of the path, 0 for a path
// originated by the peer's own AS without AS_PATH content (iBGP local routes).
func (a *Attributes) OriginAS() uint32 {
	if len(a.ASPath) == 0 {
		return 0
	}
	return a.ASPath[len(a.ASPath)-1]
}

// Reset empties a keeping the capacity of its slices.
func (a *Attributes) Reset() {
	*a = Attributes{
		ASPath:           a.ASPath[:0],
		Communities:      a.Communities[:0],
		LargeCommunities: a.LargeCommunities[:0],
		Origin:           OriginUnknown,
	}
}

// Clone returns a deep copy of a whose slices are owned by the copy (nil when empty).
func (a *Attributes) Clone() *Attributes {
	c := *a
	c.ASPath = cloneSlice(a.ASPath)
	c.Communities = cloneSlice(a.Communities)
	c.LargeCommunities = cloneSlice(a.LargeCommunities)
	return &c
}

func cloneSlice[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// Equal reports whether a and b hold the same attributes.
func (a *Attributes) Equal(b *Attributes) bool {
	if a.NextHop != b.NextHop || a.LocalPref != b.LocalPref || a.MED != b.MED ||
		a.ASPathLength != b.ASPathLength || a.Origin != b.Origin ||
		a.HasLocalPref != b.HasLocalPref || a.HasMED != b.HasMED ||
		len(a.ASPath) != len(b.ASPath) || len(a.Communities) != len(b.Communities) ||
		len(a.LargeCommunities) != len(b.LargeCommunities) {
		return false
	}
	for i := range a.ASPath {
		if a.ASPath[i] != b.ASPath[i] {
			return false
		}
	}
	for i := range a.Communities {
		if a.Communities[i] != b.Communities[i] {
			return false
		}
	}
	for i := range a.LargeCommunities {
		if a.LargeCommunities[i] != b.LargeCommunities[i] {
			return false
		}
	}
	return true
}

// MPReach is a decoded MP_REACH_NLRI attribute (RFC 4760 §3). NLRI is the raw NLRI field,
// decoded with NLRIReader.
type MPReach struct {
	AFI     uint16
	SAFI    uint8
	NextHop netip.Addr
	// LinkLocal is the IPv6 link-local next hop when the next hop field is 32 octets long.
	LinkLocal netip.Addr
	NLRI      []byte
	Present   bool
}

// MPUnreach is a decoded MP_UNREACH_NLRI attribute (RFC 4760 §4).
type MPUnreach struct {
	AFI       uint16
	SAFI      uint8
	Withdrawn []byte
	Present   bool
}

// Options tell the parser what the session negotiated.
type Options struct {
	// ASN is the AS number encoding of AS_PATH (ASNAuto when unknown).
	ASN ASNSize
	// AddPath lists the families for which NLRI carry a 4-octet path identifier (RFC 7911).
	AddPath FamilySet
	// RIBEntry marks attributes from an MRT TABLE_DUMP_V2 RIB entry, whose MP_REACH_NLRI may
	// be the RFC 6396 §4.3.4 abbreviated form (next hop length and next hop only).
	RIBEntry bool
	// RIBEntryAFI is the address family of such a RIB entry (AFIIPv4 or AFIIPv6).
	RIBEntryAFI uint16
}

// AttributeParser decodes path attributes into reusable storage. The zero value is ready.
type AttributeParser struct {
	as4Path []uint32
}

// Parse decodes the path attributes in b (RFC 4271 §4.3) into a (after resetting it), and the
// MP_REACH_NLRI / MP_UNREACH_NLRI attributes into mp and mpu when they are not nil. Unknown
// attributes are skipped. On error a holds what was decoded before the bad attribute.
func (p *AttributeParser) Parse(b []byte, opts Options, a *Attributes, mp *MPReach, mpu *MPUnreach) error {
	a.Reset()
	if mp != nil {
		*mp = MPReach{}
	}
	if mpu != nil {
		*mpu = MPUnreach{}
	}
	var as4Seen bool
	p.as4Path = p.as4Path[:0]
	var as4Len uint16
	for len(b) > 0 {
		// §4.3: flags, type code, then a 1- or 2-octet length (Extended Length bit 0x10).
		if len(b) < 3 {
			return errorf("truncated attribute header")
		}
		flags, code := b[0], b[1]
		var n, hdr int
		if flags&0x10 != 0 {
			if len(b) < 4 {
				return errorf("truncated extended attribute header")
			}
			n, hdr = int(binary.BigEndian.Uint16(b[2:])), 4
		} else {
			n, hdr = int(b[2]), 3
		}
		if len(b) < hdr+n {
			return errorf("attribute %d: length %d beyond %d bytes", code, n, len(b)-hdr)
		}
		v := b[hdr : hdr+n]
		b = b[hdr+n:]
		switch code {
		case AttrOrigin:
			if n != 1 {
				return errorf("ORIGIN length %d", n)
			}
			a.Origin = v[0]
		case AttrASPath:
			size := opts.ASN
			if size == ASNAuto {
				size = ASN4
				if !validASPath(v, 4) && validASPath(v, 2) {
					size = ASN2
				}
			}
			l, err := appendASPath(a.ASPath, v, int(size2bytes(size)))
			if err != nil {
				return err
			}
			a.ASPath = l
			a.ASPathLength = pathLength(v, int(size2bytes(size)))
		case AttrAS4Path:
			l, err := appendASPath(p.as4Path, v, 4)
			if err != nil {
				return err
			}
			p.as4Path = l
			as4Len = pathLength(v, 4)
			as4Seen = true
		case AttrNextHop:
			if n != 4 {
				return errorf("NEXT_HOP length %d", n)
			}
			a.NextHop = netip.AddrFrom4([4]byte(v))
		case AttrMED:
			if n != 4 {
				return errorf("MULTI_EXIT_DISC length %d", n)
			}
			a.MED, a.HasMED = binary.BigEndian.Uint32(v), true
		case AttrLocalPref:
			if n != 4 {
				return errorf("LOCAL_PREF length %d", n)
			}
			a.LocalPref, a.HasLocalPref = binary.BigEndian.Uint32(v), true
		case AttrCommunities:
			if n%4 != 0 {
				return errorf("COMMUNITIES length %d", n)
			}
			for i := 0; i+4 <= n; i += 4 {
				a.Communities = append(a.Communities, binary.BigEndian.Uint32(v[i:]))
			}
		case AttrLargeCommunities:
			if n%12 != 0 {
				return errorf("LARGE_COMMUNITY length %d", n)
			}
			for i := 0; i+12 <= n; i += 12 {
				a.LargeCommunities = append(a.LargeCommunities, LargeCommunity{
					binary.BigEndian.Uint32(v[i:]), binary.BigEndian.Uint32(v[i+4:]), binary.BigEndian.Uint32(v[i+8:]),
				})
			}
		case AttrMPReachNLRI:
			var m MPReach
			if err := parseMPReach(v, opts, &m); err != nil {
				return err
			}
			if mp != nil {
				*mp = m
			}
		case AttrMPUnreachNLRI:
			// RFC 4760 §4: AFI (2), SAFI (1), withdrawn routes.
			if n < 3 {
				return errorf("MP_UNREACH_NLRI length %d", n)
			}
			if mpu != nil {
				*mpu = MPUnreach{AFI: binary.BigEndian.Uint16(v), SAFI: v[2], Withdrawn: v[3:], Present: true}
			}
		}
	}
	// RFC 6793 §4.2.3: a 2-octet AS_PATH shorter than AS4_PATH is kept as is; otherwise its
	// leading part is completed by AS4_PATH.
	if as4Seen && len(a.ASPath) >= len(p.as4Path) && hasASTrans(a.ASPath) {
		keep := len(a.ASPath) - len(p.as4Path)
		a.ASPath = append(a.ASPath[:keep], p.as4Path...)
		a.ASPathLength = uint16(min(keep+int(as4Len), 0xffff))
	}
	return nil
}

func hasASTrans(p []uint32) bool {
	for _, as := range p {
		if as == ASTrans {
			return true
		}
	}
	return false
}

func size2bytes(s ASNSize) uint8 {
	if s == ASN2 {
		return 2
	}
	return 4
}

// validASPath reports whether v is a sequence of well-formed segments with w-octet ASNs.
func validASPath(v []byte, w int) bool {
	for len(v) > 0 {
		if len(v) < 2 {
			return false
		}
		t, n := v[0], int(v[1])
		if t < 1 || t > 4 || n == 0 {
			return false
		}
		if len(v) < 2+n*w {
			return false
		}
		v = v[2+n*w:]
	}
	return true
}

// appendASPath flattens the segments of an AS_PATH (RFC 4271 §4.3 type code 2: segment type,
// segment length in ASNs, ASNs) into dst.
func appendASPath(dst []uint32, v []byte, w int) ([]uint32, error) {
	for len(v) > 0 {
		if len(v) < 2 {
			return dst, errorf("truncated AS_PATH segment header")
		}
		t, n := v[0], int(v[1])
		if t < 1 || t > 4 {
			return dst, errorf("AS_PATH segment type %d", t)
		}
		if len(v) < 2+n*w {
			return dst, errorf("AS_PATH segment of %d ASNs beyond %d bytes", n, len(v)-2)
		}
		seg := v[2 : 2+n*w]
		v = v[2+n*w:]
		if t == 3 || t == 4 {
			// AS_CONFED_SEQUENCE / AS_CONFED_SET (RFC 5065) are local to the confederation.
			continue
		}
		if w == 4 {
			for i := 0; i < len(seg); i += 4 {
				dst = append(dst, binary.BigEndian.Uint32(seg[i:]))
			}
		} else {
			for i := 0; i < len(seg); i += 2 {
				dst = append(dst, uint32(binary.BigEndian.Uint16(seg[i:])))
			}
		}
	}
	return dst, nil
}

// pathLength counts an AS_SET as one AS and confederation segments as zero (RFC 4271
// §9.1.2.2 a, RFC 5065 §5.3). v has been validated by appendASPath.
func pathLength(v []byte, w int) uint16 {
	var l int
	for len(v) >= 2 {
		t, n := v[0], int(v[1])
		switch t {
		case 1: // AS_SET
			l++
		case 2: // AS_SEQUENCE
			l += n
		}
		if len(v) < 2+n*w {
			break
		}
		v = v[2+n*w:]
	}
	if l > 0xffff {
		l = 0xffff
	}
	return uint16(l)
}

// parseMPReach decodes MP_REACH_NLRI (RFC 4760 §3): AFI, SAFI, next hop length and next hop,
// one reserved octet, NLRI. In an MRT RIB entry the attribute may be abbreviated to the next
// hop length and next hop (RFC 6396 §4.3.4).
func parseMPReach(v []byte, opts Options, m *MPReach) error {
	if opts.RIBEntry && len(v) >= 1 && int(v[0]) == len(v)-1 {
		m.AFI, m.SAFI = opts.RIBEntryAFI, SAFIUnicast
		return setNextHop(v[1:], m)
	}
	if len(v) < 5 {
		return errorf("MP_REACH_NLRI length %d", len(v))
	}
	m.AFI, m.SAFI = binary.BigEndian.Uint16(v), v[2]
	nhLen := int(v[3])
	if len(v) < 4+nhLen+1 {
		return errorf("MP_REACH_NLRI next hop length %d beyond %d bytes", nhLen, len(v)-4)
	}
	nh := v[4 : 4+nhLen]
	if m.SAFI == SAFIMPLSVPN && (nhLen == 12 || nhLen == 24 || nhLen == 48) {
		// RFC 4364 §4.3.2 / RFC 4659 §3.2.1: the next hop is prefixed by a zero RD.
		// With 48 octets, the global address comes first and the link-local one is dropped.
		nh = nh[8:min(nhLen, 24)]
	}
	if err := setNextHop(nh, m); err != nil {
		return err
	}
	m.NLRI = v[4+nhLen+1:]
	m.Present = true
	return nil
}

func setNextHop(nh []byte, m *MPReach) error {
	m.Present = true
	switch len(nh) {
	case 0:
	case 4:
		m.NextHop = netip.AddrFrom4([4]byte(nh))
	case 16:
		m.NextHop = netip.AddrFrom16([16]byte(nh))
	case 32:
		m.NextHop = netip.AddrFrom16([16]byte(nh[:16]))
		m.LinkLocal = netip.AddrFrom16([16]byte(nh[16:]))
	default:
		return errorf("MP_REACH_NLRI next hop length %d", len(nh))
	}
	return nil
}
