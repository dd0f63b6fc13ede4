package filter

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"flowzero/query/catalog"
)

// Ethernet types named in filters.
const (
	etypeIPv4 = 0x0800
	etypeIPv6 = 0x86dd
)

// kindName says what a column holds, for error messages.
func kindName(c *catalog.Column) string {
	switch c.Kind {
	case catalog.KindAddress:
		return "an IP address"
	case catalog.KindPrefix:
		return "a network prefix"
	case catalog.KindAS:
		return "an AS number"
	case catalog.KindASPath:
		return "an AS path"
	case catalog.KindCommunities:
		return "BGP communities"
	case catalog.KindLargeCommunities:
		return "BGP large communities"
	case catalog.KindMAC:
		return "a MAC address"
	case catalog.KindPort:
		return "a port"
	case catalog.KindProtocol:
		return "an IP protocol"
	case catalog.KindEType:
		return "an Ethernet type"
	case catalog.KindEnum:
		return "one of " + joinOr(c.Enum)
	case catalog.KindString:
		return "a string"
	case catalog.KindTime:
		return "a time"
	case catalog.KindArray:
		if c.Elem == catalog.KindAddress {
			return "a list of IP addresses"
		}
		return "a list of numbers"
	}
	return "a number"
}

// valueExpected says what value a column takes, for errors and completion.
func valueExpected(c *catalog.Column) string {
	switch valueKind(c) {
	case catalog.KindAddress:
		if c.Kind == catalog.KindArray {
			return "an IPv4 or IPv6 address"
		}
		return "an IPv4 or IPv6 address or prefix"
	case catalog.KindPrefix:
		return "an IPv4 or IPv6 prefix (192.0.2.0/24)"
	case catalog.KindAS, catalog.KindASPath:
		return "an AS number (AS13335 or 13335)"
	case catalog.KindCommunities:
		return "a community (65000:100) or a large community (65000:1:2)"
	case catalog.KindLargeCommunities:
		return "a large community (65000:1:2)"
	case catalog.KindMAC:
		return "a MAC address (00:11:22:33:44:55)"
	case catalog.KindPort:
		return "a port (0 to 65535)"
	case catalog.KindProtocol:
		return "a protocol number (0 to 255) or name (TCP)"
	case catalog.KindEType:
		return "IPv4, IPv6 or an Ethernet type number"
	case catalog.KindEnum:
		return joinOr(c.Enum)
	case catalog.KindString:
		return "a quoted string"
	case catalog.KindTime:
		return "an RFC 3339 time (\"2026-11-26T10:00:00Z\")"
	}
	return fmt.Sprintf("a number (0 to %d)", c.Max)
}

// parseValue reads the value in t for column c; it returns the message of the error
// otherwise. The value is the token's text for a bare word, its content for a string.
func parseValue(cat *catalog.Catalog, c *catalog.Column, t token) (Value, string) {
	v := Value{Pos: t.pos, End: t.end}
	s := t.text
	if t.kind == tString {
		s = t.value
	}
	kind := valueKind(c)
	switch kind {
	case catalog.KindString:
		if t.kind != tString {
			return v, "expected a quoted string or a column name, found " + describe(t)
		}
		if c.FixedSize > 0 && len(s) > c.FixedSize {
			return v, fmt.Sprintf("%s holds at most %d bytes: %s never matches", c.Name, c.FixedSize, describe(t))
		}
		v.Str = s
		return v, ""
	case catalog.KindEnum:
		for i, e := range c.Enum {
			if strings.EqualFold(e, s) {
				v.Str, v.Num = e, uint64(i)
				return v, ""
			}
		}
		return v, fmt.Sprintf("%s is not a value of %s (%s)", describe(t), c.Name, joinOr(c.Enum))
	case catalog.KindTime:
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || tm.Unix() < 0 || tm.Year() > 2105 {
			return v, "expected an RFC 3339 time (\"2026-11-26T10:00:00Z\") between 1970 and 2105, found " + describe(t)
		}
		v.Time = tm
		return v, ""
	case catalog.KindAddress:
		if strings.Contains(s, "/") {
			if c.Kind == catalog.KindArray {
				return v, "expected an IPv4 or IPv6 address, not a prefix: " + describe(t)
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return v, "expected an IPv4 or IPv6 prefix, found " + describe(t)
			}
			v.Prefix, v.IsPrefix = unmapPrefix(p), true
			return v, ""
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return v, "expected " + valueExpected(c) + ", found " + describe(t)
		}
		v.Addr = a.Unmap()
		return v, ""
	case catalog.KindPrefix:
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return v, "expected " + valueExpected(c) + ", found " + describe(t)
		}
		v.Prefix, v.IsPrefix = unmapPrefix(p), true
		return v, ""
	case catalog.KindAS, catalog.KindASPath:
		digits := s
		if len(s) > 2 && strings.EqualFold(s[:2], "AS") {
			digits = s[2:]
		}
		n, ok := parseUint(digits, 1<<32-1)
		if !ok {
			return v, "expected an AS number (AS13335 or 13335, at most 4294967295), found " + describe(t)
		}
		v.Num = n
		return v, ""
	case catalog.KindCommunities, catalog.KindLargeCommunities:
		parts := strings.Split(s, ":")
		switch {
		case len(parts) == 2 && kind == catalog.KindCommunities:
			a, ok1 := parseUint(parts[0], 0xffff)
			b, ok2 := parseUint(parts[1], 0xffff)
			if ok1 && ok2 {
				v.Num = a<<16 | b
				return v, ""
			}
		case len(parts) == 3:
			var l [3]uint32
			ok := true
			for i, p := range parts {
				n, good := parseUint(p, 1<<32-1)
				ok = ok && good
				l[i] = uint32(n)
			}
			if ok {
				v.Large, v.IsLarge = l, kind == catalog.KindCommunities
				return v, ""
			}
		}
		return v, "expected " + valueExpected(c) + " with each part in range, found " + describe(t)
	case catalog.KindMAC:
		hw, err := net.ParseMAC(s)
		if err != nil || len(hw) != 6 {
			return v, "expected a MAC address (00:11:22:33:44:55), found " + describe(t)
		}
		for _, b := range hw {
			v.Num = v.Num<<8 | uint64(b)
		}
		return v, ""
	case catalog.KindProtocol:
		if n, ok := parseUint(s, 255); ok {
			v.Num = n
			return v, ""
		}
		if n, ok := cat.Protocol(s); ok {
			v.Num, v.Str = uint64(n), s
			return v, ""
		}
		if _, isNum := parseUint(s, 1<<64-1); isNum {
			return v, "protocol numbers go from 0 to 255, not " + s
		}
		return v, "expected " + valueExpected(c) + ", found " + describe(t)
	case catalog.KindEType:
		switch {
		case strings.EqualFold(s, "IPv4"):
			v.Num = etypeIPv4
		case strings.EqualFold(s, "IPv6"):
			v.Num = etypeIPv6
		default:
			n, ok := parseUint(s, c.Max)
			if !ok {
				return v, "expected " + valueExpected(c) + ", found " + describe(t)
			}
			v.Num = n
		}
		return v, ""
	}
	// Ports and numbers (arrays of numbers included).
	max := c.Max
	if kind == catalog.KindPort {
		max = 65535
	}
	n, ok := parseUint(s, max)
	if !ok {
		if _, isNum := parseUint(s, 1<<64-1); isNum {
			return v, fmt.Sprintf("%s is out of range for %s (0 to %d)", s, c.Name, max)
		}
		return v, "expected " + valueExpected(c) + ", found " + describe(t)
	}
	v.Num = n
	return v, ""
}

// parseUint reads a decimal number of at most max; a 0x prefix reads hexadecimal.
func parseUint(s string, max uint64) (uint64, bool) {
	base := 10
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s, base = s[2:], 16
	}
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil || n > max {
		return 0, false
	}
	return n, true
}

// unmapPrefix turns an IPv4-mapped prefix into its IPv4 form and masks the prefix.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}
