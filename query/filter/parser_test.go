package filter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCompile is the golden test from filter text to its canonical form and its SQL, for
// every operator and every kind of column.
func TestCompile(t *testing.T) {
	cat := testCatalog(t)
	for _, c := range []struct {
		in, normalized, sql string
	}{
		// Addresses.
		{"SrcAddr = 192.0.2.1", "", "SrcAddr = toIPv6('::ffff:192.0.2.1')"},
		{"srcaddr != 2001:DB8::1", "SrcAddr != 2001:db8::1", "SrcAddr != toIPv6('2001:db8::1')"},
		{"SrcAddr = ::ffff:192.0.2.1", "SrcAddr = 192.0.2.1", "SrcAddr = toIPv6('::ffff:192.0.2.1')"},
		{"SrcAddr << 192.0.2.0/24", "", "SrcAddr BETWEEN toIPv6('::ffff:192.0.2.0') AND toIPv6('::ffff:192.0.2.255')"},
		{"DstAddr = 2001:db8::/32", "DstAddr << 2001:db8::/32", "DstAddr BETWEEN toIPv6('2001:db8::') AND toIPv6('2001:db8:ffff:ffff:ffff:ffff:ffff:ffff')"},
		{"DstAddr = 192.0.2.77/24", "DstAddr << 192.0.2.0/24", "DstAddr BETWEEN toIPv6('::ffff:192.0.2.0') AND toIPv6('::ffff:192.0.2.255')"},
		{"SrcAddr !<< 10.0.0.0/8", "", "SrcAddr NOT BETWEEN toIPv6('::ffff:10.0.0.0') AND toIPv6('::ffff:10.255.255.255')"},
		{"SrcAddr != 10.0.0.0/8", "SrcAddr !<< 10.0.0.0/8", "SrcAddr NOT BETWEEN toIPv6('::ffff:10.0.0.0') AND toIPv6('::ffff:10.255.255.255')"},
		{"SrcAddr = 0.0.0.0/0", "SrcAddr << 0.0.0.0/0", "SrcAddr BETWEEN toIPv6('::ffff:0.0.0.0') AND toIPv6('::ffff:255.255.255.255')"},
		{"ExporterAddress IN (192.0.2.1, 10.0.0.0/8, 2001:db8::1)", "",
			"(ExporterAddress IN (toIPv6('::ffff:192.0.2.1'), toIPv6('2001:db8::1')) OR ExporterAddress BETWEEN toIPv6('::ffff:10.0.0.0') AND toIPv6('::ffff:10.255.255.255'))"},
		{"NextHop NOTIN (192.0.2.1)", "", "NOT (NextHop IN (toIPv6('::ffff:192.0.2.1')))"},
		{"SrcAddr = DstAddr", "", "SrcAddr = DstAddr"},
		{"SrcNetPrefix = 192.0.2.0/24", "", "SrcNetPrefix = '192.0.2.0/24'"},
		{`DstNetPrefix IN ("2001:db8::/32", 192.0.2.0/24)`, "DstNetPrefix IN (2001:db8::/32, 192.0.2.0/24)", "DstNetPrefix IN ('2001:db8::/32', '192.0.2.0/24')"},
		// AS numbers and paths.
		{"SrcAS = AS13335", "", "SrcAS = 13335"},
		{"DstAS != 15169", "DstAS != AS15169", "DstAS != 15169"},
		{"SrcAS >= as64512 and SrcAS <= 65534", "SrcAS >= AS64512 AND SrcAS <= AS65534", "(SrcAS >= 64512) AND (SrcAS <= 65534)"},
		{"SrcAS < 10 OR SrcAS > 4294967294", "SrcAS < AS10 OR SrcAS > AS4294967294", "(SrcAS < 10) OR (SrcAS > 4294967294)"},
		{"SrcAS IN (AS1, 2)", "SrcAS IN (AS1, AS2)", "SrcAS IN (1, 2)"},
		{"Dst1stAS NOT IN (AS3356)", "Dst1stAS NOTIN (AS3356)", "Dst1stAS NOT IN (3356)"},
		{"SrcAS = DstAS", "", "SrcAS = DstAS"},
		{"DstASPath = AS1299", "", "has(DstASPath, 1299)"},
		{"DstASPath != 174", "DstASPath != AS174", "NOT has(DstASPath, 174)"},
		{"DstASPath IN (AS1299, AS174)", "", "hasAny(DstASPath, [1299, 174])"},
		{"DstASPath NOTIN (AS1299)", "", "NOT hasAny(DstASPath, [1299])"},
		// Communities.
		{"SrcCommunities = 65000:100", "", "has(SrcCommunities, 4259840100)"},
		{"DstCommunities != 0:0", "", "NOT has(DstCommunities, 0)"},
		{"SrcCommunities = 65000:1:2", "", "has(SrcLargeCommunities, toFixedString(unhex('0000FDE80000000100000002'), 12))"},
		{"SrcCommunities IN (65000:100, 4200000000:1:2)", "",
			"(hasAny(SrcCommunities, [4259840100]) OR hasAny(SrcLargeCommunities, [toFixedString(unhex('FA56EA000000000100000002'), 12)]))"},
		{"DstCommunities NOTIN (1:2:3, 4:5:6)", "", "NOT hasAny(DstLargeCommunities, [toFixedString(unhex('000000010000000200000003'), 12), toFixedString(unhex('000000040000000500000006'), 12)])"},
		{"DstLargeCommunities = 65000:1:2", "", "has(DstLargeCommunities, toFixedString(unhex('0000FDE80000000100000002'), 12))"},
		// MAC addresses.
		{"SrcMAC = 00:11:22:33:44:AA", "SrcMAC = 00:11:22:33:44:aa", "SrcMAC = 73588229290"},
		{"DstMAC IN (0011.2233.44aa, 02-00-00-00-00-01)", "DstMAC IN (00:11:22:33:44:aa, 02:00:00:00:00:01)", "DstMAC IN (73588229290, 2199023255553)"},
		{"SrcMAC != DstMAC", "", "SrcMAC != DstMAC"},
		// Ports and numbers.
		{"SrcPort = 443", "", "SrcPort = 443"},
		{"DstPort > 1023 AND DstPort <= 65535", "", "(DstPort > 1023) AND (DstPort <= 65535)"},
		{"SrcPort < DstPort", "", "SrcPort < DstPort"},
		{"SrcPortNAT IN (80, 443)", "", "SrcPortNAT IN (80, 443)"},
		{"IPTTL > 64", "", "IPTTL > 64"},
		{"TCPFlags = 0x12", "TCPFlags = 18", "TCPFlags = 18"},
		{"InIfSpeed >= OutIfSpeed", "", "InIfSpeed >= OutIfSpeed"},
		{"Bytes > 1000000", "", "Bytes > 1000000"},
		{"MPLSLabels = 100", "", "has(MPLSLabels, 100)"},
		{"MPLS1stLabel != 3", "", "MPLS1stLabel != 3"},
		{"SRv6SIDs = 2001:db8::1", "", "has(SRv6SIDs, toIPv6('2001:db8::1'))"},
		// Protocols and Ethernet types.
		{"Proto = TCP", "", "Proto = 6"},
		{`proto = "udp"`, "Proto = UDP", "Proto = 17"},
		{"Proto != 1", "", "Proto != 1"},
		{"Proto IN (TCP, 17, ipv6-icmp)", "Proto IN (TCP, 17, IPv6-ICMP)", "Proto IN (6, 17, 58)"},
		{`Proto = "Mobility Header"`, "", "Proto = 135"},
		{"EType = IPv6", "", "EType = 34525"},
		{"EType NOTIN (ipv4)", "EType NOTIN (IPv4)", "EType NOT IN (2048)"},
		// Enums.
		{"InIfBoundary = external", "", "InIfBoundary = 'external'"},
		{"OutIfBoundary != Internal", "OutIfBoundary != internal", "OutIfBoundary != 'internal'"},
		{`FlowDirection IN (ingress, "egress")`, "FlowDirection IN (ingress, egress)", "FlowDirection IN ('ingress', 'egress')"},
		{"InIfBoundary = OutIfBoundary", "", "InIfBoundary = OutIfBoundary"},
		// Strings.
		{`InIfName = "et-0/0/1"`, "", "InIfName = 'et-0/0/1'"},
		{`InIfDescription LIKE 'transit%'`, `InIfDescription LIKE "transit%"`, "InIfDescription LIKE 'transit%'"},
		{`InIfDescription UNLIKE "%test%"`, "", "InIfDescription NOT LIKE '%test%'"},
		{`InIfDescription ILIKE "%Cogent%"`, "", "InIfDescription ILIKE '%Cogent%'"},
		{`InIfDescription IUNLIKE "%cogent%"`, "", "InIfDescription NOT ILIKE '%cogent%'"},
		{`InIfDescription NOT LIKE "a%"`, `InIfDescription UNLIKE "a%"`, "InIfDescription NOT LIKE 'a%'"},
		{`InIfDescription not ilike "a%"`, `InIfDescription IUNLIKE "a%"`, "InIfDescription NOT ILIKE 'a%'"},
		{`InIfDescription LIKE "100\%"`, `InIfDescription LIKE "100\\%"`, `InIfDescription LIKE '100\\%'`},
		{`ExporterName IN ("edge1", 'edge2')`, `ExporterName IN ("edge1", "edge2")`, "ExporterName IN ('edge1', 'edge2')"},
		{`ExporterName NOTIN ("edge1")`, "", "ExporterName NOT IN ('edge1')"},
		{`InIfDescription = "it's \"quoted\" \\ back"`, "", `InIfDescription = 'it\'s "quoted" \\ back'`},
		{`InIfDescription = 'it\'s'`, `InIfDescription = "it's"`, `InIfDescription = 'it\'s'`},
		{`InIfDescription = "'; DROP TABLE flows; --"`, "", `InIfDescription = '\'; DROP TABLE flows; --'`},
		{"InIfDescription = \"Zürich\ttab\"", "", `InIfDescription = 'Zürich\x09tab'`},
		{`SrcCountry = "FR"`, "", "SrcCountry = 'FR'"},
		{"SrcCountry = DstCountry", "", "SrcCountry = DstCountry"},
		{"SrcNetName != DstNetName", "", "SrcNetName != DstNetName"},
		{`PacketSizeBucket = "64-127"`, "", "PacketSizeBucket = '64-127'"},
		// Time.
		{`TimeFlowStart >= "2026-11-26T10:00:00Z"`, "", "TimeFlowStart >= toDateTime(1795687200)"},
		{"TimeFlowEnd < 2026-11-26T11:00:00+01:00", `TimeFlowEnd < "2026-11-26T10:00:00Z"`, "TimeFlowEnd < toDateTime(1795687200)"},
		{"TimeFlowStart < TimeFlowEnd", "", "TimeFlowStart < TimeFlowEnd"},
		// Logic, comments, case.
		{"NOT SrcAS = 1", "NOT SrcAS = AS1", "NOT (SrcAS = 1)"},
		{"not not SrcAS = 1", "SrcAS = AS1", "SrcAS = 1"},
		{"NOT (SrcAS = 1 OR DstAS = 2) AND Proto = TCP", "NOT (SrcAS = AS1 OR DstAS = AS2) AND Proto = TCP",
			"(NOT ((SrcAS = 1) OR (DstAS = 2))) AND (Proto = 6)"},
		{"SrcAS = 1 OR DstAS = 2 AND Proto = 6", "SrcAS = AS1 OR DstAS = AS2 AND Proto = 6", "(SrcAS = 1) OR ((DstAS = 2) AND (Proto = 6))"},
		{"(SrcAS = 1 OR DstAS = 2) AND (Proto = 6 OR Proto = 17)", "(SrcAS = AS1 OR DstAS = AS2) AND (Proto = 6 OR Proto = 17)",
			"((SrcAS = 1) OR (DstAS = 2)) AND ((Proto = 6) OR (Proto = 17))"},
		{"((SrcAS = 1 AND DstAS = 2) AND Proto = 6)", "SrcAS = AS1 AND DstAS = AS2 AND Proto = 6", "(SrcAS = 1) AND (DstAS = 2) AND (Proto = 6)"},
		{"SrcAS = 1 -- a comment\nAND /* another\none */ DstAS == 2 -- at the end", "SrcAS = AS1 AND DstAS = AS2", "(SrcAS = 1) AND (DstAS = 2)"},
		{"SrcPort=443 and DstPort<1024", "SrcPort = 443 AND DstPort < 1024", "(SrcPort = 443) AND (DstPort < 1024)"},
		{"  -- only a comment\n", "", ""},
		{"", "", ""},
	} {
		t.Run(c.in, func(t *testing.T) {
			f, err := Parse(cat, c.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := c.normalized
			if want == "" && f.Root() != nil {
				want = c.in
			}
			if got := f.String(); got != want {
				t.Errorf("String() = %s\n               want %s", got, want)
			}
			if got := f.SQL(false); got != c.sql {
				t.Errorf("SQL() = %s\n          want %s", got, c.sql)
			}
			// The canonical form parses back to the same filter.
			again, err := Parse(cat, f.String())
			if err != nil {
				t.Fatalf("Parse(String()): %v", err)
			}
			if again.SQL(false) != f.SQL(false) || again.String() != f.String() {
				t.Errorf("round trip: %s / %s", again.String(), again.SQL(false))
			}
		})
	}
}

func TestReverse(t *testing.T) {
	cat := testCatalog(t)
	for _, c := range []struct{ in, sql string }{
		{`SrcAS = 1 AND InIfName = "et-0"`, "(DstAS = 1) AND (OutIfName = 'et-0')"},
		{"InIfBoundary = external OR SrcAddr << 10.0.0.0/8", "(OutIfBoundary = 'external') OR (DstAddr BETWEEN toIPv6('::ffff:10.0.0.0') AND toIPv6('::ffff:10.255.255.255'))"},
		{"SrcPort < DstPort", "DstPort < SrcPort"},
		{"IngressVRFID = 3", "EgressVRFID = 3"},
		{"DstASPath = AS1299 AND Dst1stAS = 174 AND Proto = TCP", "(has(DstASPath, 1299)) AND (Dst1stAS = 174) AND (Proto = 6)"},
		{"SrcCommunities = 1:2:3", "has(DstLargeCommunities, toFixedString(unhex('000000010000000200000003'), 12))"},
	} {
		f, err := Parse(cat, c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := f.SQL(true); got != c.sql {
			t.Errorf("%s reversed:\n got %s\nwant %s", c.in, got, c.sql)
		}
	}
	f, _ := Parse(cat, "SrcAS = 1 AND SrcAddr = 192.0.2.1 AND SrcAS = 2")
	var names []string
	for _, c := range f.Columns(true) {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "DstAS,DstAddr" {
		t.Errorf("Columns(true) = %v", names)
	}
}

// TestErrors is the golden test of errors: the message and where it points.
func TestErrors(t *testing.T) {
	cat := testCatalog(t)
	for _, c := range []struct {
		in, msg  string
		line     int
		col      int
		offset   int
		expected string
	}{
		{"SrcAS = ", "expected an AS number (AS13335 or 13335) or a column name, found the end of the filter", 1, 9, 8, "an AS number (AS13335 or 13335)|a column name"},
		{"Foo = 1", `unknown column "Foo"`, 1, 1, 0, `a column name|NOT|"("`},
		{"SrcAddr = 10.0.0.256", `expected an IPv4 or IPv6 address or prefix, found "10.0.0.256"`, 1, 11, 10, ""},
		{"SrcAddr = 10.0.0.0/33", `expected an IPv4 or IPv6 prefix, found "10.0.0.0/33"`, 1, 11, 10, ""},
		{"SrcAddr << 10.0.0.1", `<< takes a prefix (192.0.2.0/24), found "10.0.0.1": use = or != for one address`, 1, 12, 11, ""},
		{"SrcPort = 70000", "70000 is out of range for SrcPort (0 to 65535)", 1, 11, 10, ""},
		{"IPTTL > 256", "256 is out of range for IPTTL (0 to 255)", 1, 9, 8, ""},
		{"SrcPort = http", `expected a port (0 to 65535), found "http"`, 1, 11, 10, ""},
		{"Proto = 300", "protocol numbers go from 0 to 255, not 300", 1, 9, 8, ""},
		{"Proto = FOO", `expected a protocol number (0 to 255) or name (TCP), found "FOO"`, 1, 9, 8, ""},
		{"InIfBoundary = externa", `"externa" is not a value of InIfBoundary (undefined, external or internal)`, 1, 16, 15, ""},
		{"SrcAS LIKE \"x\"", "SrcAS takes =, !=, <, <=, >, >=, IN or NOTIN, not LIKE (it holds an AS number)", 1, 7, 6, ""},
		{"SrcAS = AS", `expected an AS number (AS13335 or 13335, at most 4294967295), found "AS"`, 1, 9, 8, ""},
		{"SrcAS = 4294967296", `expected an AS number (AS13335 or 13335, at most 4294967295), found "4294967296"`, 1, 9, 8, ""},
		{"SrcAS = 1 AND", `expected a column name, NOT or "(", found the end of the filter`, 1, 14, 13, ""},
		{"SrcAS = 1 OR OR DstAS = 2", `expected a column name, NOT or "(", found "OR"`, 1, 14, 13, ""},
		{"(SrcAS = 1", `expected AND, OR or ")", found the end of the filter`, 1, 11, 10, `AND|OR|")"`},
		{"SrcAS = 1)", `")" without "(" before it`, 1, 10, 9, ""},
		{"SrcAS = 1 DstAS = 2", `expected AND, OR or the end of the filter, found "DstAS"`, 1, 11, 10, "AND|OR|the end of the filter"},
		{`InIfName = "abc`, `string not closed: its closing " is missing`, 1, 12, 11, ""},
		{"SrcAS = 1 /* x", "comment not closed: */ is missing", 1, 11, 10, ""},
		{"SrcAS = 1\n  AND DstAS = x", `expected an AS number (AS13335 or 13335, at most 4294967295), found "x"`, 2, 15, 24, ""},
		{"InIfDescription = \"é\" AND é", `unexpected character "é"`, 1, 27, 27, ""},
		{"SrcAS = InIfName", "SrcAS (an AS number) cannot be compared with InIfName (a string)", 1, 9, 8, ""},
		{"InIfBoundary = FlowDirection", "InIfBoundary (one of undefined, external or internal) cannot be compared with FlowDirection (one of undefined, ingress or egress)", 1, 16, 15, ""},
		{"SrcAddr < DstAddr", "SrcAddr takes =, !=, <<, !<<, IN or NOTIN, not < (it holds an IP address)", 1, 9, 8, ""},
		{"SrcAS IN ()", `expected an AS number (AS13335 or 13335), found ")"`, 1, 11, 10, ""},
		{"SrcAS IN (1 2)", `expected "," or ")", found "2"`, 1, 13, 12, ""},
		{"SrcAS IN 1", `expected "(", found "1"`, 1, 10, 9, ""},
		{"SrcAS ~ 1", `unexpected character "~"`, 1, 7, 6, ""},
		{"SrcAS ! 1", `unexpected "!": write != or !<<`, 1, 7, 6, ""},
		{"SrcAS", "expected an operator for SrcAS (=, !=, <, <=, >, >=, IN or NOTIN), found the end of the filter", 1, 6, 5, "=|!=|<|<=|>|>=|IN|NOTIN"},
		{"SrcAS NOT = 1", `expected IN, LIKE or ILIKE after NOT, found "="`, 1, 11, 10, ""},
		{"SrcCommunities = 65536:1", "expected a community (65000:100) or a large community (65000:1:2) with each part in range, found \"65536:1\"", 1, 18, 17, ""},
		{"InIfName = foo", `expected a quoted string or a column name, found "foo"`, 1, 12, 11, ""},
		{`SrcCountry = "FRA"`, `SrcCountry holds at most 2 bytes: the string "FRA" never matches`, 1, 14, 13, ""},
		{`TimeFlowStart > "yesterday"`, `expected an RFC 3339 time ("2026-11-26T10:00:00Z") between 1970 and 2105, found the string "yesterday"`, 1, 17, 16, ""},
		{"SrcMAC = 00:11:22", `expected a MAC address (00:11:22:33:44:55), found "00:11:22"`, 1, 10, 9, ""},
		{"SrcPort < 1 AND InIfDescription LIKE SrcPort", "LIKE takes a value, not a column", 1, 38, 37, ""},
		{"DstASPath < 3", "DstASPath takes =, !=, IN or NOTIN, not < (it holds an AS path)", 1, 11, 10, ""},
		{"SRv6SIDs = 2001:db8::/32", `expected an IPv4 or IPv6 address, not a prefix: "2001:db8::/32"`, 1, 12, 11, ""},
		{strings.Repeat("(", 70) + "SrcAS = 1", "more than 64 nested NOT and parentheses", 1, 65, 64, ""},
		{strings.Repeat("a", MaxLength+1), "the filter is longer than 65536 bytes", 1, 65537, 65536, ""},
	} {
		t.Run(c.in[:min(len(c.in), 60)], func(t *testing.T) {
			_, err := Parse(cat, c.in)
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse accepted it (error %v)", err)
			}
			got := fmt.Sprintf("%s @%d:%d+%d", fe.Message, fe.Position.Line, fe.Position.Column, fe.Position.Offset)
			want := fmt.Sprintf("%s @%d:%d+%d", c.msg, c.line, c.col, c.offset)
			if got != want {
				t.Errorf("error\n got %s\nwant %s", got, want)
			}
			if c.expected != "" && strings.Join(fe.Expected, "|") != c.expected {
				t.Errorf("expected %q, want %q", fe.Expected, c.expected)
			}
		})
	}
}

func TestDisabledColumn(t *testing.T) {
	cat := catalogOf(t, schemaDefault())
	_, err := Parse(cat, "SrcMAC = 00:11:22:33:44:55")
	if err == nil || !strings.Contains(err.Error(), "column SrcMAC is not enabled (schema.enabled in the configuration)") {
		t.Errorf("error %v", err)
	}
	_, err = Parse(cat, "SrcCommunities = 1:2")
	if err == nil || !strings.Contains(err.Error(), "column SrcCommunities is not enabled") {
		t.Errorf("error %v", err)
	}
	// A communities column without its large twin.
	cat = catalogOf(t, schemaWith("SrcCommunities"))
	_, err = Parse(cat, "SrcCommunities = 1:2:3")
	if err == nil || !strings.Contains(err.Error(), `"1:2:3" is a large community, and SrcLargeCommunities is not enabled`) {
		t.Errorf("error %v", err)
	}
}
