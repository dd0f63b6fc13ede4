package bgp

import (
	"encoding/binary"
	"net/netip"
)

// Address family identifiers (IANA) and subsequent address family identifiers.
const (
	AFIIPv4          uint16 = 1
	AFIIPv6          uint16 = 2
	SAFIUnicast      uint8  = 1
	SAFIMulticast    uint8  = 2
	SAFILabeled      uint8  = 4   // RFC 8277
	SAFIMPLSVPN      uint8  = 128 // RFC 4364, RFC 4659
	MessageOpen      uint8  = 1
	MessageUpdate    uint8  = 2
	MessageKeepalive uint8  = 4
	HeaderLength            = 19 // RFC 4271 §4.1
	MaxMessageLength        = 65535
)

// Family is an AFI/SAFI pair the RIB understands.
type Family uint8

// Families decoded by NLRIReader.
const (
	FamilyIPv4Unicast Family = iota
	FamilyIPv6Unicast
	FamilyIPv4Labeled
	FamilyIPv6Labeled
	FamilyIPv4VPN
	FamilyIPv6VPN
	FamilyIPv4Multicast
	FamilyIPv6Multicast
)

// FamilyOf maps an AFI/SAFI pair to a Family; ok is false for other families (VPLS, EVPN,
// flowspec...), which callers skip.
func FamilyOf(afi uint16, safi uint8) (f Family, ok bool) {
	var base Family
	switch safi {
	case SAFIUnicast:
		base = FamilyIPv4Unicast
	case SAFILabeled:
		base = FamilyIPv4Labeled
	case SAFIMPLSVPN:
		base = FamilyIPv4VPN
	case SAFIMulticast:
		base = FamilyIPv4Multicast
	default:
		return 0, false
	}
	switch afi {
	case AFIIPv4:
		return base, true
	case AFIIPv6:
		return base + 1, true
	}
	return 0, false
}

// AFI returns the family's address family identifier.
func (f Family) AFI() uint16 {
	if f%2 == 1 {
		return AFIIPv6
	}
	return AFIIPv4
}

// FamilySet is a set of families (a bit per Family), used for Add-Path negotiation.
type FamilySet uint16

// Has reports whether f is in s.
func (s FamilySet) Has(f Family) bool { return s&(1<<f) != 0 }

// With returns s with f added.
func (s FamilySet) With(f Family) FamilySet { return s | 1<<f }

// Prefix is one decoded NLRI.
type Prefix struct {
	Prefix netip.Prefix
	// PathID is the RFC 7911 path identifier (0 without Add-Path).
	PathID uint32
	// RD is the route distinguisher of a VPN route (RFC 4364 §4.2), 8 octets big-endian.
	RD uint64
	// Label is the first MPLS label of a labeled or VPN route (RFC 8277), 20 bits.
	Label uint32
}

// NLRIReader iterates over an encoded NLRI field without allocating. Use Next until it
// returns false, then check Err.
type NLRIReader struct {
	b       []byte
	fam     Family
	addPath bool
	err     error
}

// NewNLRIReader reads b as NLRI of family f, with 4-octet path identifiers when addPath.
func NewNLRIReader(b []byte, f Family, addPath bool) NLRIReader {
	return NLRIReader{b: b, fam: f, addPath: addPath}
}

// Err returns the error that stopped Next, if any.
func (r *NLRIReader) Err() error { return r.err }

// Next decodes the next prefix.
func (r *NLRIReader) Next() (p Prefix, ok bool) {
	if len(r.b) == 0 || r.err != nil {
		return Prefix{}, false
	}
	b := r.b
	if r.addPath {
		// RFC 7911 §3: a 4-octet path identifier precedes each NLRI.
		if len(b) < 4 {
			r.err = errorf("truncated path identifier")
			return Prefix{}, false
		}
		p.PathID = binary.BigEndian.Uint32(b)
		b = b[4:]
	}
	if len(b) < 1 {
		r.err = errorf("truncated NLRI")
		return Prefix{}, false
	}
	bits := int(b[0])
	b = b[1:]
	switch r.fam {
	case FamilyIPv4Labeled, FamilyIPv6Labeled, FamilyIPv4VPN, FamilyIPv6VPN:
		// RFC 8277 §2: labels (3 octets each, bottom-of-stack bit 0x01) precede the prefix, and
		// for VPN routes an 8-octet RD (RFC 4364 §4.3.4). One label is expected; a withdrawal
		// may carry 0x800000 or 0x000000 as the label.
		if bits < 24 || len(b) < 3 {
			r.err = errorf("labeled NLRI too short")
			return Prefix{}, false
		}
		p.Label = uint32(b[0])<<12 | uint32(b[1])<<4 | uint32(b[2])>>4
		b, bits = b[3:], bits-24
		if r.fam == FamilyIPv4VPN || r.fam == FamilyIPv6VPN {
			if bits < 64 || len(b) < 8 {
				r.err = errorf("VPN NLRI too short")
				return Prefix{}, false
			}
			p.RD = binary.BigEndian.Uint64(b)
			b, bits = b[8:], bits-64
		}
	}
	maxBits := 32
	if r.fam.AFI() == AFIIPv6 {
		maxBits = 128
	}
	n := (bits + 7) / 8
	if bits > maxBits || len(b) < n {
		r.err = errorf("prefix length %d beyond %d bytes or address size", bits, len(b))
		return Prefix{}, false
	}
	var a netip.Addr
	if maxBits == 32 {
		var ip [4]byte
		copy(ip[:], b[:n])
		a = netip.AddrFrom4(ip)
	} else {
		var ip [16]byte
		copy(ip[:], b[:n])
		a = netip.AddrFrom16(ip)
	}
	// Trailing bits beyond the length are ignored (RFC 4271 §4.3), hence Masked.
	p.Prefix, _ = a.Prefix(bits)
	r.b = b[n:]
	return p, true
}

// Update is a decoded UPDATE message (RFC 4271 §4.3). Its slices alias the message and its
// reusable storage: valid until the next Parse.
type Update struct {
	// Withdrawn and NLRI are the raw IPv4 unicast fields (read with the readers below).
	Withdrawn []byte
	NLRI      []byte
	Attrs     Attributes
	MPReach   MPReach
	MPUnreach MPUnreach
	// HasAttributes is false for an UPDATE without path attributes (withdrawals, End-of-RIB).
	HasAttributes bool
	opts          Options
	parser        AttributeParser
}

// ParseHeader checks the 19-octet message header of b (RFC 4271 §4.1) and returns the
// message type and the body.
func ParseHeader(b []byte) (typ uint8, body []byte, err error) {
	if len(b) < HeaderLength {
		return 0, nil, errorf("message shorter than its header")
	}
	for _, m := range b[:16] {
		if m != 0xff {
			return 0, nil, errorf("bad marker")
		}
	}
	n := int(binary.BigEndian.Uint16(b[16:]))
	if n < HeaderLength || n > len(b) {
		return 0, nil, errorf("message length %d with %d bytes", n, len(b))
	}
	return b[18], b[HeaderLength:n], nil
}

// ParseMessage parses a whole UPDATE message including its 19-octet header.
func (u *Update) ParseMessage(msg []byte, opts Options) error {
	typ, body, err := ParseHeader(msg)
	if err != nil {
		return err
	}
	if typ != MessageUpdate {
		return errorf("message type %d is not UPDATE", typ)
	}
	return u.Parse(body, opts)
}

// Parse decodes an UPDATE body (after the header): withdrawn routes, path attributes, NLRI.
func (u *Update) Parse(body []byte, opts Options) error {
	u.opts = opts
	u.Withdrawn, u.NLRI = nil, nil
	u.Attrs.Reset()
	u.MPReach, u.MPUnreach = MPReach{}, MPUnreach{}
	if len(body) < 2 {
		return errorf("UPDATE shorter than 4 bytes")
	}
	wl := int(binary.BigEndian.Uint16(body))
	if len(body) < 2+wl+2 {
		return errorf("withdrawn routes length %d beyond message", wl)
	}
	u.Withdrawn = body[2 : 2+wl]
	rest := body[2+wl:]
	al := int(binary.BigEndian.Uint16(rest))
	if len(rest) < 2+al {
		return errorf("path attributes length %d beyond message", al)
	}
	u.HasAttributes = al > 0
	u.NLRI = rest[2+al:]
	return u.parser.Parse(rest[2:2+al], opts, &u.Attrs, &u.MPReach, &u.MPUnreach)
}

// IsEndOfRIB reports whether the update is an End-of-RIB marker (RFC 4724 §2): empty for IPv4
// unicast, or only an empty MP_UNREACH_NLRI for other families.
func (u *Update) IsEndOfRIB() bool {
	if len(u.Withdrawn) != 0 || len(u.NLRI) != 0 || u.MPReach.Present {
		return false
	}
	if !u.HasAttributes {
		return true
	}
	return u.MPUnreach.Present && len(u.MPUnreach.Withdrawn) == 0
}

// WithdrawnReader reads the IPv4 unicast withdrawn routes.
func (u *Update) WithdrawnReader() NLRIReader {
	return NewNLRIReader(u.Withdrawn, FamilyIPv4Unicast, u.opts.AddPath.Has(FamilyIPv4Unicast))
}

// NLRIReader reads the IPv4 unicast announcements (next hop: Attrs.NextHop).
func (u *Update) NLRIReader() NLRIReader {
	return NewNLRIReader(u.NLRI, FamilyIPv4Unicast, u.opts.AddPath.Has(FamilyIPv4Unicast))
}

// MPReachReader reads the MP_REACH_NLRI announcements (next hop: MPReach.NextHop); ok is false
// when absent or of a family FamilyOf does not know.
func (u *Update) MPReachReader() (r NLRIReader, f Family, ok bool) {
	if !u.MPReach.Present {
		return NLRIReader{}, 0, false
	}
	f, ok = FamilyOf(u.MPReach.AFI, u.MPReach.SAFI)
	if !ok {
		return NLRIReader{}, 0, false
	}
	return NewNLRIReader(u.MPReach.NLRI, f, u.opts.AddPath.Has(f)), f, true
}

// MPUnreachReader reads the MP_UNREACH_NLRI withdrawals; ok is false when absent or of an
// unknown family.
func (u *Update) MPUnreachReader() (r NLRIReader, f Family, ok bool) {
	if !u.MPUnreach.Present {
		return NLRIReader{}, 0, false
	}
	f, ok = FamilyOf(u.MPUnreach.AFI, u.MPUnreach.SAFI)
	if !ok {
		return NLRIReader{}, 0, false
	}
	return NewNLRIReader(u.MPUnreach.Withdrawn, f, u.opts.AddPath.Has(f)), f, true
}

// MPAttributes returns the attributes for the MP_REACH_NLRI routes: Attrs with the
// multiprotocol next hop (a shallow copy sharing Attrs' slices).
func (u *Update) MPAttributes() Attributes {
	a := u.Attrs
	a.NextHop = u.MPReach.NextHop
	return a
}
