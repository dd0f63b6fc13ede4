package schema

import (
	"errors"
	"strings"
	"testing"

	"flowzero/internal/config"
)

// akvoradoColumns are the columns of Akvorado's schema that issue 3 lists.
var akvoradoColumns = []string{
	"TimeReceived", "SamplingRate", "ExporterAddress", "ExporterName", "ExporterGroup",
	"ExporterRole", "ExporterSite", "ExporterRegion", "ExporterTenant", "SrcAddr", "DstAddr",
	"SrcNetMask", "DstNetMask", "SrcNetPrefix", "DstNetPrefix", "SrcAS", "DstAS",
	"SrcNetName", "DstNetName", "SrcNetRole", "DstNetRole", "SrcNetSite", "DstNetSite",
	"SrcNetRegion", "DstNetRegion", "SrcNetTenant", "DstNetTenant", "SrcVlan", "DstVlan",
	"SrcCountry", "DstCountry", "SrcGeoCity", "DstGeoCity", "SrcGeoState", "DstGeoState",
	"DstASPath", "Dst1stAS", "Dst2ndAS", "Dst3rdAS", "SrcCommunities", "DstCommunities",
	"SrcLargeCommunities", "DstLargeCommunities", "InIfName", "OutIfName", "InIfDescription",
	"OutIfDescription", "InIfSpeed", "OutIfSpeed", "InIfConnectivity", "OutIfConnectivity",
	"InIfProvider", "OutIfProvider", "InIfBoundary", "OutIfBoundary", "EType", "Proto",
	"SrcPort", "DstPort", "Bytes", "Packets", "PacketSize", "PacketSizeBucket",
	"ForwardingStatus", "FlowDirection", "SrcAddrNAT", "DstAddrNAT", "SrcPortNAT", "DstPortNAT",
	"SrcMAC", "DstMAC", "IPTTL", "IPTos", "IPFragmentID", "IPFragmentOffset", "IPv6FlowLabel",
	"TCPFlags", "ICMPv4Type", "ICMPv4Code", "ICMPv6Type", "ICMPv6Code", "NextHop", "MPLSLabels",
	"MPLS1stLabel", "MPLS2ndLabel", "MPLS3rdLabel", "MPLS4thLabel", "IngressVRFID", "EgressVRFID",
	"TimeFlowStart", "TimeFlowEnd", "VXLANVNI",
}

func TestColumnTable(t *testing.T) {
	for _, name := range akvoradoColumns {
		if _, ok := ColumnByName(name); !ok {
			t.Errorf("column %s missing", name)
		}
	}
	// Field numbers are part of the wire format: pin a few so that a reordering of the
	// table cannot renumber them silently.
	pinned := map[ColumnKey]int{
		ColumnTimeReceived: 1, ColumnSamplingRate: 2, ColumnExporterAddress: 3, ColumnSrcAddr: 4,
		ColumnDstAddr: 5, ColumnBytes: 10, ColumnPackets: 11, ColumnSrcPort: 14, ColumnDstPort: 15,
		ColumnFlowDirection: 22, ColumnDstASPath: 57, ColumnSrcMAC: 66, ColumnMPLSLabels: 78,
		ColumnVXLANVNI: 86, ColumnSRv6SIDs: 88,
	}
	for k, f := range pinned {
		if got := Lookup(k).Field; got != f {
			t.Errorf("%s: field %d, want %d", k, got, f)
		}
	}
	for k := ColumnKey(1); k < ColumnLast; k++ {
		c := Lookup(k)
		if c.ClickHouseType == "" {
			t.Errorf("%s: no ClickHouse type", c.Name)
		}
		if k2, ok := ColumnByName(c.Name); !ok || k2 != k || k.String() != c.Name {
			t.Errorf("%s: name lookup gives %v", c.Name, k2)
		}
		if c.OnWire() {
			if k2, ok := ColumnByField(c.Field); !ok || k2 != k {
				t.Errorf("%s: field lookup gives %v", c.Name, k2)
			}
		}
	}
	if Lookup(0) != nil || Lookup(ColumnLast) != nil {
		t.Error("Lookup out of range returned a column")
	}
}

func TestDefaults(t *testing.T) {
	s, err := New(DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	on := []ColumnKey{ColumnTimeReceived, ColumnSrcAddr, ColumnDstASPath, ColumnDst1stAS, ColumnInIfName, ColumnFlowDirection, ColumnPacketSizeBucket}
	off := []ColumnKey{ColumnSrcVlan, ColumnSrcMAC, ColumnSrcAddrNAT, ColumnMPLSLabels, ColumnDstCommunities,
		ColumnDstLargeCommunities, ColumnNextHop, ColumnIPTTL, ColumnVXLANVNI, ColumnTimeFlowStart}
	for _, k := range on {
		if !s.Enabled(k) {
			t.Errorf("%s disabled by default", k)
		}
	}
	for _, k := range off {
		if s.Enabled(k) {
			t.Errorf("%s enabled by default", k)
		}
	}
	if s.GroupEnabled(GroupL2) || s.GroupEnabled(GroupNAT) || !s.GroupEnabled(GroupRouting) {
		t.Error("GroupEnabled wrong for the defaults")
	}
	if s.Enabled(0) || s.Enabled(ColumnLast) || s.Enabled(60000) {
		t.Error("Enabled out of range")
	}
}

func TestConfigurationErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  Configuration
		key  string
		msg  string
	}{
		{"unknown-enabled", Configuration{Enabled: []string{"SrcMAC", "SrcMac"}}, "enabled[1]", `unknown column "SrcMac"`},
		{"unknown-disabled", Configuration{Disabled: []string{"Nope"}}, "disabled[0]", `unknown column "Nope"`},
		{"both", Configuration{Enabled: []string{"SrcVlan"}, Disabled: []string{"SrcVlan"}}, "disabled[0]", `also in enabled[0]`},
		{"no-disable", Configuration{Disabled: []string{"Bytes"}}, "disabled[0]", `"Bytes" cannot be disabled`},
		{"dependency-disabled", Configuration{Disabled: []string{"DstASPath"}}, "disabled[0]", `"DstASPath" is needed by enabled column "Dst1stAS"`},
		{"dependency-missing", Configuration{Enabled: []string{"MPLS1stLabel"}}, "enabled[0]", `"MPLS1stLabel" needs column "MPLSLabels"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			var ke *config.KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("New: %v, want a KeyError", err)
			}
			if ke.Key != tc.key || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("New: %q (key %q), want key %q and %q", err, ke.Key, tc.key, tc.msg)
			}
			if err := tc.cfg.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
		})
	}
	// Disabling dependent columns together is fine.
	if _, err := New(Configuration{Disabled: []string{"DstASPath", "Dst1stAS", "Dst2ndAS", "Dst3rdAS"}}); err != nil {
		t.Fatal(err)
	}
}

func TestHash(t *testing.T) {
	def, _ := New(DefaultConfiguration())
	def2, _ := New(Configuration{})
	mac, _ := New(Configuration{Enabled: []string{"SrcMAC"}})
	icmp, _ := New(Configuration{Enabled: []string{"ICMPv4Type", "ICMPv4Code"}})
	icmpAlias, _ := New(Configuration{Enabled: []string{"ICMPv4Type", "ICMPv4Code", "ICMPv4"}})
	if def.Hash() != def2.Hash() {
		t.Error("same configuration, different hashes")
	}
	seen := map[string]bool{}
	for _, s := range []*Schema{def, mac, icmp, icmpAlias} {
		h := s.Hash()
		if len(h) != 16 || strings.Trim(h, "abcdefghijklmnopqrstuvwxyz234567") != "" {
			t.Errorf("hash %q is not 16 base32 characters", h)
		}
		if seen[h] {
			t.Errorf("hash %q for two different sets of columns", h)
		}
		seen[h] = true
	}
}

func TestClickHouseFlowsTable(t *testing.T) {
	s, _ := New(DefaultConfiguration())
	ddl := s.ClickHouseFlowsTable("flows")
	for _, want := range []string{
		"CREATE TABLE IF NOT EXISTS flows\n(\n    TimeReceived DateTime CODEC(DoubleDelta, LZ4),\n",
		"    SrcAddr IPv6 CODEC(ZSTD(1)),\n",
		"    ExporterName LowCardinality(String),\n",
		"    FlowDirection Enum8('undefined' = 0, 'ingress' = 1, 'egress' = 2),\n",
		"    Dst1stAS UInt32 MATERIALIZED DstASPath[1],\n",
		"    PacketSize UInt64 ALIAS intDiv(Bytes, Packets),\n",
		"ORDER BY (toStartOfFiveMinutes(TimeReceived), ExporterAddress, EType, Proto, InIfName, SrcAS, ForwardingStatus, OutIfName, DstAS, SamplingRate)\n",
	} {
		if !strings.Contains(ddl, want) {
			t.Errorf("DDL lacks %q:\n%s", want, ddl)
		}
	}
	if strings.Contains(ddl, "SrcMAC") {
		t.Error("DDL has a disabled column")
	}
	for _, c := range s.WireColumns() {
		if !c.OnWire() || strings.Contains(c.ClickHouseInputDefinition(), "ALIAS") {
			t.Errorf("WireColumns: %s", c.Name)
		}
	}
}
