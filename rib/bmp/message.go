package bmp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Version is the only BMP version this package speaks (RFC 7854 §4.1).
const Version = 3

// CommonHeaderLen is the size of the BMP common header (RFC 7854 §4.1).
const CommonHeaderLen = 6

// PeerHeaderLen is the size of the per-peer header (RFC 7854 §4.2).
const PeerHeaderLen = 42

// bgpHeaderLen is the size of a BGP message header: marker, length, type (RFC 4271 §4.1).
const bgpHeaderLen = 19

// MaxMessageLen bounds the length announced in a common header. BGP messages are at most
// 65,535 bytes (RFC 8654), so a BMP message carrying one is a little larger; anything far
// bigger is a desynchronised stream, not a message to buffer.
const MaxMessageLen = 1 << 20

// MessageType is the type of a BMP message (RFC 7854 §4.1).
type MessageType uint8

// BMP message types (RFC 7854 §4.1).
const (
	MsgRouteMonitoring  MessageType = 0
	MsgStatisticsReport MessageType = 1
	MsgPeerDown         MessageType = 2
	MsgPeerUp           MessageType = 3
	MsgInitiation       MessageType = 4
	MsgTermination      MessageType = 5
	MsgRouteMirroring   MessageType = 6
)

// String returns the name used in metric labels.
func (t MessageType) String() string {
	switch t {
	case MsgRouteMonitoring:
		return "route-monitoring"
	case MsgStatisticsReport:
		return "statistics-report"
	case MsgPeerDown:
		return "peer-down-notification"
	case MsgPeerUp:
		return "peer-up-notification"
	case MsgInitiation:
		return "initiation"
	case MsgTermination:
		return "termination"
	case MsgRouteMirroring:
		return "route-mirroring"
	}
	return "unknown"
}

// PeerType is the type of peer in a per-peer header (RFC 7854 §4.2, RFC 9069 §4.1).
type PeerType uint8

// Peer types.
const (
	PeerTypeGlobal   PeerType = 0
	PeerTypeRD       PeerType = 1 // RD instance peer: an L3VPN VRF's peer
	PeerTypeLocal    PeerType = 2
	PeerTypeLocalRIB PeerType = 3 // RFC 9069
)

// Per-peer header flags (RFC 7854 §4.2, RFC 8671 §4).
const (
	PeerFlagV = 0x80 // peer address is IPv6
	PeerFlagL = 0x40 // post-policy Adj-RIB-In
	PeerFlagA = 0x20 // legacy 2-byte AS_PATH encoding
	PeerFlagO = 0x10 // Adj-RIB-Out
)

// Errors returned by the parsers. They are wrapped with details; compare with errors.Is.
var (
	ErrTruncated   = errors.New("truncated")
	ErrBadVersion  = errors.New("unsupported BMP version")
	ErrBadLength   = errors.New("bad length")
	ErrBadBGP      = errors.New("malformed BGP message")
	ErrNotUpdate   = errors.New("BGP message is not an UPDATE")
	ErrNoOpen      = errors.New("BGP message is not an OPEN")
	ErrBadPeerType = errors.New("unknown peer type")
)

// CommonHeader is the BMP common header (RFC 7854 §4.1).
type CommonHeader struct {
	Version uint8
	Length  uint32 // whole message, header included
	Type    MessageType
}

// ParseCommonHeader decodes the 6-byte common header and checks the version and length,
// so that a caller can read exactly Length-CommonHeaderLen more bytes.
func ParseCommonHeader(b []byte) (CommonHeader, error) {
	if len(b) < CommonHeaderLen {
		return CommonHeader{}, fmt.Errorf("common header: %w", ErrTruncated)
	}
	h := CommonHeader{
		Version: b[0],
		Length:  binary.BigEndian.Uint32(b[1:5]),
		Type:    MessageType(b[5]),
	}
	if h.Version != Version {
		return h, fmt.Errorf("%w %d", ErrBadVersion, h.Version)
	}
	if h.Length < CommonHeaderLen || h.Length > MaxMessageLen {
		return h, fmt.Errorf("common header length %d: %w", h.Length, ErrBadLength)
	}
	return h, nil
}

// PeerHeader is the per-peer header (RFC 7854 §4.2).
type PeerHeader struct {
	Type          PeerType
	Flags         uint8
	Distinguisher RD
	Address       netip.Addr // IPv4 or IPv6 per the V flag
	AS            uint32
	BGPID         uint32
	TimestampSec  uint32
	TimestampUsec uint32
}

// PostPolicy reports whether the routes are from the post-policy Adj-RIB-In (L flag).
func (h *PeerHeader) PostPolicy() bool { return h.Flags&PeerFlagL != 0 }

// AS2 reports whether AS_PATH uses the legacy 2-byte encoding (A flag). The flag is only
// meaningful for Adj-RIB-In peers; Loc-RIB (RFC 9069) reuses the bit for "filtered".
func (h *PeerHeader) AS2() bool {
	return h.Type != PeerTypeLocalRIB && h.Flags&PeerFlagA != 0
}

// AdjRIBOut reports whether the routes are from an Adj-RIB-Out (O flag, RFC 8671).
func (h *PeerHeader) AdjRIBOut() bool {
	return h.Type != PeerTypeLocalRIB && h.Flags&PeerFlagO != 0
}

// ParsePeerHeader decodes a per-peer header at the start of b.
func ParsePeerHeader(b []byte) (PeerHeader, error) {
	var h PeerHeader
	if len(b) < PeerHeaderLen {
		return h, fmt.Errorf("per-peer header: %w", ErrTruncated)
	}
	h.Type = PeerType(b[0])
	if h.Type > PeerTypeLocalRIB {
		return h, fmt.Errorf("%w %d", ErrBadPeerType, h.Type)
	}
	h.Flags = b[1]
	h.Distinguisher = RD(binary.BigEndian.Uint64(b[2:10]))
	if h.Flags&PeerFlagV != 0 && h.Type != PeerTypeLocalRIB {
		h.Address = netip.AddrFrom16([16]byte(b[10:26]))
	} else {
		// IPv4 in the last four bytes; Loc-RIB peers carry zeros (RFC 9069 §4.1).
		h.Address = netip.AddrFrom4([4]byte(b[22:26]))
	}
	h.AS = binary.BigEndian.Uint32(b[26:30])
	h.BGPID = binary.BigEndian.Uint32(b[30:34])
	h.TimestampSec = binary.BigEndian.Uint32(b[34:38])
	h.TimestampUsec = binary.BigEndian.Uint32(b[38:42])
	return h, nil
}

// TLV is one information TLV of an initiation, termination or peer-up message
// (RFC 7854 §4.4). Value aliases the message buffer.
type TLV struct {
	Type  uint16
	Value []byte
}

// Information TLV types (RFC 7854 §4.3, §4.5).
const (
	InfoString    = 0
	InfoSysDescr  = 1
	InfoSysName   = 2
	TermReasonTLV = 1
)

// WalkTLVs calls fn for each type-length-value element of b (2-byte type, 2-byte length).
func WalkTLVs(b []byte, fn func(TLV)) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("TLV header: %w", ErrTruncated)
		}
		t := binary.BigEndian.Uint16(b[0:2])
		l := int(binary.BigEndian.Uint16(b[2:4]))
		if len(b) < 4+l {
			return fmt.Errorf("TLV type %d length %d: %w", t, l, ErrTruncated)
		}
		fn(TLV{Type: t, Value: b[4 : 4+l]})
		b = b[4+l:]
	}
	return nil
}

// PeerUp is the body of a peer-up notification after the per-peer header (RFC 7854 §4.10).
// Slices alias the message buffer.
type PeerUp struct {
	LocalAddress netip.Addr
	LocalPort    uint16
	RemotePort   uint16
	SentOpen     []byte // whole BGP OPEN message, header included
	ReceivedOpen []byte
	Info         []byte // optional information TLVs
}

// ParsePeerUp decodes a peer-up body. v6 is the V flag of the per-peer header, which also
// tells how the local address is encoded.
func ParsePeerUp(b []byte, v6 bool) (PeerUp, error) {
	var p PeerUp
	if len(b) < 20 {
		return p, fmt.Errorf("peer up: %w", ErrTruncated)
	}
	if v6 {
		p.LocalAddress = netip.AddrFrom16([16]byte(b[0:16]))
	} else {
		p.LocalAddress = netip.AddrFrom4([4]byte(b[12:16]))
	}
	p.LocalPort = binary.BigEndian.Uint16(b[16:18])
	p.RemotePort = binary.BigEndian.Uint16(b[18:20])
	b = b[20:]
	var err error
	if p.SentOpen, b, err = splitBGPMessage(b); err != nil {
		return p, fmt.Errorf("peer up sent OPEN: %w", err)
	}
	if p.ReceivedOpen, b, err = splitBGPMessage(b); err != nil {
		return p, fmt.Errorf("peer up received OPEN: %w", err)
	}
	p.Info = b
	return p, nil
}

// splitBGPMessage returns the BGP message at the start of b (by its header length) and the
// rest of b.
func splitBGPMessage(b []byte) (msg, rest []byte, err error) {
	if len(b) < bgpHeaderLen {
		return nil, nil, fmt.Errorf("BGP header: %w", ErrTruncated)
	}
	l := int(binary.BigEndian.Uint16(b[16:18]))
	if l < bgpHeaderLen || l > len(b) {
		return nil, nil, fmt.Errorf("BGP length %d of %d: %w", l, len(b), ErrBadBGP)
	}
	return b[:l], b[l:], nil
}

// BGPUpdateBody checks that msg is a single BGP UPDATE message (RFC 4271 §4.3) filling msg
// and returns its body after the 19-byte header: withdrawn routes, path attributes, NLRI.
func BGPUpdateBody(msg []byte) ([]byte, error) {
	m, rest, err := splitBGPMessage(msg)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the BGP message: %w", len(rest), ErrBadBGP)
	}
	if m[18] != 2 {
		return nil, fmt.Errorf("%w (type %d)", ErrNotUpdate, m[18])
	}
	return m[bgpHeaderLen:], nil
}

// Peer down reasons (RFC 7854 §4.9, RFC 9069 §4.4).
const (
	PeerDownLocalNotification  = 1
	PeerDownLocalNoNotif       = 2
	PeerDownRemoteNotification = 3
	PeerDownRemoteNoData       = 4
	PeerDownDeconfigured       = 5
	PeerDownLocalRIBTLV        = 6
)

// ParsePeerDown returns the reason of a peer-down body (RFC 7854 §4.9).
func ParsePeerDown(b []byte) (reason uint8, err error) {
	if len(b) < 1 {
		return 0, fmt.Errorf("peer down: %w", ErrTruncated)
	}
	return b[0], nil
}

// Statistic is one statistics TLV (RFC 7854 §4.8). Value is the counter or gauge; for the
// per-AFI/SAFI gauges, AFI and SAFI are set.
type Statistic struct {
	Type  uint16
	AFI   uint16
	SAFI  uint8
	Value uint64
}

// WalkStatistics decodes a statistics report body after the per-peer header and calls fn
// for each statistic with a known encoding; others are skipped by their length.
func WalkStatistics(b []byte, fn func(Statistic)) error {
	if len(b) < 4 {
		return fmt.Errorf("statistics count: %w", ErrTruncated)
	}
	count := binary.BigEndian.Uint32(b[0:4])
	b = b[4:]
	for i := uint32(0); i < count; i++ {
		if len(b) < 4 {
			return fmt.Errorf("statistic %d header: %w", i, ErrTruncated)
		}
		s := Statistic{Type: binary.BigEndian.Uint16(b[0:2])}
		l := int(binary.BigEndian.Uint16(b[2:4]))
		if len(b) < 4+l {
			return fmt.Errorf("statistic %d (type %d, length %d): %w", i, s.Type, l, ErrTruncated)
		}
		v := b[4 : 4+l]
		b = b[4+l:]
		switch l {
		case 4: // 32-bit counter
			s.Value = uint64(binary.BigEndian.Uint32(v))
		case 8: // 64-bit gauge
			s.Value = binary.BigEndian.Uint64(v)
		case 11: // AFI, SAFI, 64-bit gauge (types 9, 10, 16, 17...)
			s.AFI = binary.BigEndian.Uint16(v[0:2])
			s.SAFI = v[2]
			s.Value = binary.BigEndian.Uint64(v[3:11])
		default:
			continue
		}
		fn(s)
	}
	return nil
}

// Statistics types worth exporting (RFC 7854 §4.8).
const (
	StatRejectedPrefixes = 0
	StatAdjRIBIn         = 7
	StatLocRIB           = 8
)
