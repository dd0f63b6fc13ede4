//go:build chdb

package schema_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flowzero/schema"
	"flowzero/store/chdb"
)

// TestClickHouseReadsFlowMessages checks the generated artefacts against the real ClickHouse
// engine (chDB): the flows table DDL is accepted, and ClickHouse's Protobuf input format,
// given the generated .proto, reads FlowMessage output into every column type (IPv6 from 16
// bytes, Enum8 from the wrapped enums, FixedString(12) large communities, arrays), with the
// derived columns computed from them.
func TestClickHouseReadsFlowMessages(t *testing.T) {
	var cfg schema.Configuration
	for k := schema.ColumnKey(1); k < schema.ColumnLast; k++ {
		if !schema.Lookup(k).Default {
			cfg.Enabled = append(cfg.Enabled, k.String())
		}
	}
	s, err := schema.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	protoFile := filepath.Join(dir, "flows.proto")
	if err := os.WriteFile(protoFile, []byte(s.ProtoDefinition()), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := chdb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec(s.ClickHouseFlowsTable("flows")); err != nil {
		t.Fatalf("DDL: %v", err)
	}

	m := s.NewFlowMessage()
	m.TimeReceived = 1680626679
	m.SamplingRate = 1000
	m.ExporterAddress = netip.MustParseAddr("10.19.144.41")
	m.SrcAddr = netip.MustParseAddr("161.202.212.212")
	m.DstAddr = netip.MustParseAddr("202.152.70.24")
	m.NextHop = netip.MustParseAddr("61.6.255.150")
	m.InIf, m.OutIf = 117, 86
	m.SrcAS, m.DstAS = 36351, 10101
	m.SrcNetMask, m.DstNetMask = 19, 24
	m.SrcVlan, m.DstVlan = 100, 200
	m.DstASPath = []uint32{174, 3356, 10101}
	m.DstCommunities = []uint32{65000<<16 | 100}
	m.DstLargeCommunities = []schema.LargeCommunity{{ASN: 4200000000, LocalData1: 1, LocalData2: 2}}
	m.AppendUint(schema.ColumnBytes, 133000)
	m.AppendUint(schema.ColumnPackets, 100)
	m.AppendUint(schema.ColumnEType, 0x800)
	m.AppendUint(schema.ColumnProto, 6)
	m.AppendUint(schema.ColumnSrcPort, 30104)
	m.AppendUint(schema.ColumnDstPort, 443)
	m.AppendUint(schema.ColumnFlowDirection, schema.DirectionEgress)
	m.AppendUint(schema.ColumnInIfBoundary, schema.BoundaryExternal)
	m.AppendString(schema.ColumnInIfName, "et-0/0/1")
	m.AppendString(schema.ColumnSrcCountry, "FR")
	m.AppendBytes(schema.ColumnSrcMAC, []byte{0x00, 0x1b, 0x21, 0x3c, 0x9d, 0xf8})
	m.AppendIP(schema.ColumnSrcAddrNAT, netip.MustParseAddr("192.0.2.1"))
	m.AppendArrayUint32(schema.ColumnMPLSLabels, []uint32{16001, 24002})
	m.AppendUint(schema.ColumnTimeFlowStart, 1680626600)
	m.AppendUint(schema.ColumnVXLANVNI, 5001)
	m.AppendIP(schema.ColumnSRv6SIDs, netip.MustParseAddr("fc00::1"))
	m.AppendIP(schema.ColumnSRv6SIDs, netip.MustParseAddr("fc00::2"))
	msg := string(m.Finalize())

	// A second, IPv6, flow.
	m.Reset()
	m.TimeReceived = 1680626679
	m.SamplingRate = 1000
	m.SrcAddr = netip.MustParseAddr("2001:db8:1:2::5")
	m.DstAddr = netip.MustParseAddr("2001:db8:ffff::7")
	m.SrcNetMask, m.DstNetMask = 48, 64
	m.AppendUint(schema.ColumnEType, 0x86dd)
	m.AppendUint(schema.ColumnBytes, 1500)
	m.AppendUint(schema.ColumnPackets, 1)
	msg6 := string(m.Finalize())

	var cols []string
	for _, col := range s.WireColumns() {
		cols = append(cols, col.Name)
	}
	insert := fmt.Sprintf("INSERT INTO flows (%s) SETTINGS format_schema = '%s:FlowMessage' FORMAT Protobuf\n",
		strings.Join(cols, ", "), protoFile)
	if err := c.Exec(insert + msg + msg6); err != nil {
		t.Fatalf("Protobuf insert: %v", err)
	}

	out, err := c.Query(`SELECT TimeReceived, SamplingRate, ExporterAddress, SrcAddr, DstAddr, NextHop,
		InIf, OutIf, SrcAS, DstAS, SrcNetMask, DstNetMask, SrcVlan, DstVlan, DstASPath, Dst1stAS, Dst3rdAS,
		DstCommunities, hex(DstLargeCommunities[1]) AS LC, Bytes, Packets, PacketSize, PacketSizeBucket,
		EType, Proto, SrcPort, DstPort, FlowDirection, InIfBoundary, OutIfBoundary, InIfName, SrcCountry,
		SrcMAC, SrcAddrNAT, MPLSLabels, MPLS2ndLabel, TimeFlowStart, VXLANVNI, SRv6SIDs, SrcNetPrefix, DstNetPrefix
		FROM flows ORDER BY EType SETTINGS session_timezone = 'UTC'`, "JSONEachRow")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d rows, want 2:\n%s", len(lines), out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"TimeReceived": "2023-04-04 16:44:39", "SamplingRate": "1000",
		"ExporterAddress": "::ffff:10.19.144.41", "SrcAddr": "::ffff:161.202.212.212",
		"DstAddr": "::ffff:202.152.70.24", "NextHop": "::ffff:61.6.255.150",
		"InIf": 117.0, "OutIf": 86.0, "SrcAS": 36351.0, "DstAS": 10101.0,
		"SrcNetMask": 19.0, "DstNetMask": 24.0, "SrcVlan": 100.0, "DstVlan": 200.0,
		"DstASPath": []any{174.0, 3356.0, 10101.0}, "Dst1stAS": 174.0, "Dst3rdAS": 10101.0,
		"DstCommunities": []any{float64(65000<<16 | 100)}, "LC": "FA56EA00" + "00000001" + "00000002",
		"Bytes": "133000", "Packets": "100", "PacketSize": "1330", "PacketSizeBucket": "1280-1500",
		"EType": 2048.0, "Proto": 6.0, "SrcPort": 30104.0, "DstPort": 443.0,
		"FlowDirection": "egress", "InIfBoundary": "external", "OutIfBoundary": "undefined",
		"InIfName": "et-0/0/1", "SrcCountry": "FR", "SrcMAC": float64(0x001b213c9df8), "SrcAddrNAT": "::ffff:192.0.2.1",
		"MPLSLabels": []any{16001.0, 24002.0}, "MPLS2ndLabel": 24002.0, "TimeFlowStart": "2023-04-04 16:43:20",
		"VXLANVNI": 5001.0, "SRv6SIDs": []any{"fc00::1", "fc00::2"},
		"SrcNetPrefix": "161.202.192.0/19", "DstNetPrefix": "202.152.70.0/24",
	}
	for k, w := range want {
		if g := got[k]; fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: ClickHouse read %#v, want %#v", k, g, w)
		}
	}

	got = nil
	if err := json.Unmarshal([]byte(lines[1]), &got); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{
		"SrcAddr": "2001:db8:1:2::5", "DstAddr": "2001:db8:ffff::7", "EType": 34525.0,
		"SrcNetPrefix": "2001:db8:1::/48", "DstNetPrefix": "2001:db8:ffff::/64",
		"PacketSizeBucket": "1280-1500", "ExporterAddress": "::", "DstASPath": []any{}, "Dst1stAS": 0.0,
	}
	for k, w := range want {
		if g := got[k]; fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("IPv6 flow %s: ClickHouse read %#v, want %#v", k, g, w)
		}
	}
}
