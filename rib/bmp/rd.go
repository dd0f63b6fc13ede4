package bmp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// RD is a route distinguisher (RFC 4364 §4.2) as its 8 wire bytes read big-endian: a 2-byte
// type then 6 bytes of value. 0 is "0:0", which is also how routes without an RD are keyed,
// so an RD filter listing 0:0 accepts plain (non-VPN) routes.
type RD uint64

// RD types (RFC 4364 §4.2).
const (
	rdType0 = 0 // 2-byte ASN : 4-byte number
	rdType1 = 1 // IPv4 address : 2-byte number
	rdType2 = 2 // 4-byte ASN : 2-byte number
)

// ParseRD parses "ASN:N", "IPv4:N", "4-byte-ASN:N", "TYPE:ADMIN:N" or a plain 64-bit number.
// An ASN that fits in 16 bits selects type 0 unless the type is given explicitly.
func ParseRD(s string) (RD, error) {
	elems := strings.Split(s, ":")
	typ := -1
	switch len(elems) {
	case 1:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("route distinguisher %q: not ADMIN:NUMBER nor a 64-bit number", s)
		}
		return RD(v), nil
	case 3:
		t, err := strconv.Atoi(elems[0])
		if err != nil || t < 0 || t > 2 {
			return 0, fmt.Errorf("route distinguisher %q: type must be 0, 1 or 2", s)
		}
		typ = t
		elems = elems[1:]
	case 2:
	default:
		return 0, fmt.Errorf("route distinguisher %q: too many colons", s)
	}
	admin, number := elems[0], elems[1]
	if typ == rdType1 || (typ == -1 && strings.Contains(admin, ".")) {
		ip, err := netip.ParseAddr(admin)
		if err != nil || !ip.Is4() {
			return 0, fmt.Errorf("route distinguisher %q: bad IPv4 administrator", s)
		}
		n, err := strconv.ParseUint(number, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("route distinguisher %q: assigned number must fit 16 bits", s)
		}
		a := ip.As4()
		return RD(uint64(rdType1)<<48 | uint64(binary.BigEndian.Uint32(a[:]))<<16 | n), nil
	}
	asn, err := strconv.ParseUint(admin, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("route distinguisher %q: bad AS number", s)
	}
	n, err := strconv.ParseUint(number, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("route distinguisher %q: bad assigned number", s)
	}
	if typ == rdType0 || (typ == -1 && asn <= 0xffff) {
		if asn > 0xffff {
			return 0, fmt.Errorf("route distinguisher %q: type 0 needs a 2-byte AS number", s)
		}
		return RD(uint64(rdType0)<<48 | asn<<32 | n), nil
	}
	if n > 0xffff {
		return 0, fmt.Errorf("route distinguisher %q: type 2 assigned number must fit 16 bits", s)
	}
	return RD(uint64(rdType2)<<48 | asn<<16 | n), nil
}

// String formats the RD as ParseRD reads it back.
func (rd RD) String() string {
	v := uint64(rd) & (1<<48 - 1)
	switch uint64(rd) >> 48 {
	case rdType0:
		return fmt.Sprintf("%d:%d", v>>32, v&0xffffffff)
	case rdType1:
		return fmt.Sprintf("%d.%d.%d.%d:%d", v>>40, v>>32&0xff, v>>24&0xff, v>>16&0xff, v&0xffff)
	case rdType2:
		asn := v >> 16
		if asn <= 0xffff {
			return fmt.Sprintf("2:%d:%d", asn, v&0xffff)
		}
		return fmt.Sprintf("%d:%d", asn, v&0xffff)
	}
	return strconv.FormatUint(uint64(rd), 10)
}

// MarshalText implements encoding.TextMarshaler.
func (rd RD) MarshalText() ([]byte, error) { return []byte(rd.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (used by the YAML configuration).
func (rd *RD) UnmarshalText(b []byte) error {
	v, err := ParseRD(string(b))
	if err != nil {
		return err
	}
	*rd = v
	return nil
}
