package schema

import (
	"fmt"
	"strings"
)

// Protobuf field numbers 1-15 take one byte of tag: they go to the columns present in almost
// every flow. A number, once given, is never reused for another column.
//
// Defaults follow Akvorado: columns costly to store or rarely useful (L2, NAT, MPLS, extra
// L3/L4 header fields, communities, next hop) are off; flowzero adds the interface indexes
// (on: without SNMP enrichment they are the only interface information), flow start/end times
// and tunnel columns (off).
var columnTable = []Column{
	{Key: ColumnTimeReceived, Field: 1, Kind: KindUint64, ClickHouseType: "DateTime", ClickHouseCodec: "DoubleDelta, LZ4", Default: true, NoDisable: true},
	{Key: ColumnSamplingRate, Field: 2, Kind: KindUint64, ClickHouseType: "UInt64", Default: true, NoDisable: true},
	{Key: ColumnExporterAddress, Field: 3, Kind: KindIP, ClickHouseType: "IPv6", ClickHouseCodec: "ZSTD(1)", Default: true},
	{Key: ColumnSrcAddr, Field: 4, Kind: KindIP, ClickHouseType: "IPv6", ClickHouseCodec: "ZSTD(1)", Default: true},
	{Key: ColumnDstAddr, Field: 5, Kind: KindIP, ClickHouseType: "IPv6", ClickHouseCodec: "ZSTD(1)", Default: true},
	{Key: ColumnSrcAS, Field: 6, Kind: KindUint32, ClickHouseType: "UInt32", Default: true, Group: GroupRouting},
	{Key: ColumnDstAS, Field: 7, Kind: KindUint32, ClickHouseType: "UInt32", Default: true, Group: GroupRouting},
	{Key: ColumnInIf, Field: 8, Kind: KindUint32, ClickHouseType: "UInt32", Default: true, Group: GroupInterface},
	{Key: ColumnOutIf, Field: 9, Kind: KindUint32, ClickHouseType: "UInt32", Default: true, Group: GroupInterface},
	{Key: ColumnBytes, Field: 10, Kind: KindUint64, ClickHouseType: "UInt64", ClickHouseCodec: "T64, LZ4", Default: true, NoDisable: true},
	{Key: ColumnPackets, Field: 11, Kind: KindUint64, ClickHouseType: "UInt64", ClickHouseCodec: "T64, LZ4", Default: true, NoDisable: true},
	{Key: ColumnEType, Field: 12, Kind: KindUint32, ClickHouseType: "UInt32", Default: true},
	{Key: ColumnProto, Field: 13, Kind: KindUint32, ClickHouseType: "UInt32", Default: true},
	{Key: ColumnSrcPort, Field: 14, Kind: KindUint32, ClickHouseType: "UInt16", Default: true},
	{Key: ColumnDstPort, Field: 15, Kind: KindUint32, ClickHouseType: "UInt16", Default: true},
	{Key: ColumnSrcNetMask, Field: 16, Kind: KindUint32, ClickHouseType: "UInt8", Default: true, Group: GroupRouting},
	{Key: ColumnDstNetMask, Field: 17, Kind: KindUint32, ClickHouseType: "UInt8", Default: true, Group: GroupRouting},
	{Key: ColumnNextHop, Field: 18, Kind: KindIP, ClickHouseType: "IPv6", ClickHouseCodec: "ZSTD(1)", Group: GroupRouting},
	{Key: ColumnSrcVlan, Field: 19, Kind: KindUint32, ClickHouseType: "UInt16", Group: GroupL2},
	{Key: ColumnDstVlan, Field: 20, Kind: KindUint32, ClickHouseType: "UInt16", Group: GroupL2},
	{Key: ColumnForwardingStatus, Field: 21, Kind: KindUint32, ClickHouseType: "UInt32", Default: true},
	{Key: ColumnFlowDirection, Field: 22, Kind: KindEnum, Enum: directionEnum, ClickHouseType: "Enum8('undefined' = 0, 'ingress' = 1, 'egress' = 2)", Default: true},

	{Key: ColumnExporterName, Field: 23, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupExporter},
	{Key: ColumnExporterGroup, Field: 24, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupExporter},
	{Key: ColumnExporterRole, Field: 25, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupExporter},
	{Key: ColumnExporterSite, Field: 26, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupExporter},
	{Key: ColumnExporterRegion, Field: 27, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupExporter},
	{Key: ColumnExporterTenant, Field: 28, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupExporter},

	{Key: ColumnInIfName, Field: 29, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnOutIfName, Field: 30, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnInIfDescription, Field: 31, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnOutIfDescription, Field: 32, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnInIfSpeed, Field: 33, Kind: KindUint32, ClickHouseType: "UInt32", Default: true, Group: GroupInterface},
	{Key: ColumnOutIfSpeed, Field: 34, Kind: KindUint32, ClickHouseType: "UInt32", Default: true, Group: GroupInterface},
	{Key: ColumnInIfConnectivity, Field: 35, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnOutIfConnectivity, Field: 36, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnInIfProvider, Field: 37, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnOutIfProvider, Field: 38, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupInterface},
	{Key: ColumnInIfBoundary, Field: 39, Kind: KindEnum, Enum: boundaryEnum, ClickHouseType: "Enum8('undefined' = 0, 'external' = 1, 'internal' = 2)", Default: true, Group: GroupInterface},
	{Key: ColumnOutIfBoundary, Field: 40, Kind: KindEnum, Enum: boundaryEnum, ClickHouseType: "Enum8('undefined' = 0, 'external' = 1, 'internal' = 2)", Default: true, Group: GroupInterface},

	{Key: ColumnSrcNetName, Field: 41, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnDstNetName, Field: 42, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnSrcNetRole, Field: 43, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnDstNetRole, Field: 44, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnSrcNetSite, Field: 45, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnDstNetSite, Field: 46, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnSrcNetRegion, Field: 47, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnDstNetRegion, Field: 48, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnSrcNetTenant, Field: 49, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnDstNetTenant, Field: 50, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupNetwork},
	{Key: ColumnSrcCountry, Field: 51, Kind: KindString, ClickHouseType: "FixedString(2)", Default: true, Group: GroupGeo},
	{Key: ColumnDstCountry, Field: 52, Kind: KindString, ClickHouseType: "FixedString(2)", Default: true, Group: GroupGeo},
	{Key: ColumnSrcGeoState, Field: 53, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupGeo},
	{Key: ColumnDstGeoState, Field: 54, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupGeo},
	{Key: ColumnSrcGeoCity, Field: 55, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupGeo},
	{Key: ColumnDstGeoCity, Field: 56, Kind: KindString, ClickHouseType: "LowCardinality(String)", Default: true, Group: GroupGeo},

	{Key: ColumnDstASPath, Field: 57, Kind: KindArrayUint32, ClickHouseType: "Array(UInt32)", Default: true, Group: GroupRouting},
	{Key: ColumnSrcCommunities, Field: 58, Kind: KindArrayUint32, ClickHouseType: "Array(UInt32)", Group: GroupRouting},
	{Key: ColumnDstCommunities, Field: 59, Kind: KindArrayUint32, ClickHouseType: "Array(UInt32)", Group: GroupRouting},
	{Key: ColumnSrcLargeCommunities, Field: 60, Kind: KindArrayLargeCommunity, ClickHouseType: "Array(FixedString(12))", Group: GroupRouting},
	{Key: ColumnDstLargeCommunities, Field: 61, Kind: KindArrayLargeCommunity, ClickHouseType: "Array(FixedString(12))", Group: GroupRouting},

	{Key: ColumnSrcAddrNAT, Field: 62, Kind: KindIP, ClickHouseType: "IPv6", Group: GroupNAT},
	{Key: ColumnDstAddrNAT, Field: 63, Kind: KindIP, ClickHouseType: "IPv6", Group: GroupNAT},
	{Key: ColumnSrcPortNAT, Field: 64, Kind: KindUint32, ClickHouseType: "UInt16", Group: GroupNAT},
	{Key: ColumnDstPortNAT, Field: 65, Kind: KindUint32, ClickHouseType: "UInt16", Group: GroupNAT},
	{Key: ColumnSrcMAC, Field: 66, Kind: KindMAC, ClickHouseType: "UInt64", Group: GroupL2},
	{Key: ColumnDstMAC, Field: 67, Kind: KindMAC, ClickHouseType: "UInt64", Group: GroupL2},
	{Key: ColumnIPTTL, Field: 68, Kind: KindUint32, ClickHouseType: "UInt8", Group: GroupL3L4},
	{Key: ColumnIPTos, Field: 69, Kind: KindUint32, ClickHouseType: "UInt8", Group: GroupL3L4},
	{Key: ColumnIPFragmentID, Field: 70, Kind: KindUint32, ClickHouseType: "UInt32", Group: GroupL3L4},
	{Key: ColumnIPFragmentOffset, Field: 71, Kind: KindUint32, ClickHouseType: "UInt16", Group: GroupL3L4},
	{Key: ColumnIPv6FlowLabel, Field: 72, Kind: KindUint32, ClickHouseType: "UInt32", Group: GroupL3L4},
	{Key: ColumnTCPFlags, Field: 73, Kind: KindUint32, ClickHouseType: "UInt16", Group: GroupL3L4},
	{Key: ColumnICMPv4Type, Field: 74, Kind: KindUint32, ClickHouseType: "UInt8", Group: GroupL3L4},
	{Key: ColumnICMPv4Code, Field: 75, Kind: KindUint32, ClickHouseType: "UInt8", Group: GroupL3L4},
	{Key: ColumnICMPv6Type, Field: 76, Kind: KindUint32, ClickHouseType: "UInt8", Group: GroupL3L4},
	{Key: ColumnICMPv6Code, Field: 77, Kind: KindUint32, ClickHouseType: "UInt8", Group: GroupL3L4},
	{Key: ColumnMPLSLabels, Field: 78, Kind: KindArrayUint32, ClickHouseType: "Array(UInt32)", Group: GroupMPLS},
	{Key: ColumnIngressVRFID, Field: 79, Kind: KindUint32, ClickHouseType: "UInt32", Hot: true, Group: GroupMPLS},
	{Key: ColumnEgressVRFID, Field: 80, Kind: KindUint32, ClickHouseType: "UInt32", Hot: true, Group: GroupMPLS},
	{Key: ColumnTimeFlowStart, Field: 81, Kind: KindUint64, ClickHouseType: "DateTime", ClickHouseCodec: "DoubleDelta, LZ4"},
	{Key: ColumnTimeFlowEnd, Field: 82, Kind: KindUint64, ClickHouseType: "DateTime", ClickHouseCodec: "DoubleDelta, LZ4"},
	{Key: ColumnTunnelSrcAddr, Field: 83, Kind: KindIP, ClickHouseType: "IPv6", ClickHouseCodec: "ZSTD(1)", Group: GroupTunnel},
	{Key: ColumnTunnelDstAddr, Field: 84, Kind: KindIP, ClickHouseType: "IPv6", ClickHouseCodec: "ZSTD(1)", Group: GroupTunnel},
	{Key: ColumnTunnelProto, Field: 85, Kind: KindUint32, ClickHouseType: "UInt8", Group: GroupTunnel},
	{Key: ColumnVXLANVNI, Field: 86, Kind: KindUint32, ClickHouseType: "UInt32", Group: GroupTunnel},
	{Key: ColumnGREKey, Field: 87, Kind: KindUint32, ClickHouseType: "UInt32", Group: GroupTunnel},
	{Key: ColumnSRv6SIDs, Field: 88, Kind: KindArrayIP, ClickHouseType: "Array(IPv6)", Group: GroupTunnel},
	{Key: ColumnDatagramPartition, Field: 89, Kind: KindUint32, ClickHouseType: "UInt32"},
	{Key: ColumnDatagramOffset, Field: 90, Kind: KindUint64, ClickHouseType: "UInt64", ClickHouseCodec: "Delta, LZ4"},
	{Key: ColumnDatagramIndex, Field: 91, Kind: KindUint32, ClickHouseType: "UInt32"},

	// Derived columns, computed by ClickHouse.
	{Key: ColumnSrcNetPrefix, ClickHouseType: "String", ClickHouseExpr: netPrefixExpr("Src"), Default: true, Group: GroupRouting,
		Depends: []ColumnKey{ColumnSrcAddr, ColumnSrcNetMask, ColumnEType}},
	{Key: ColumnDstNetPrefix, ClickHouseType: "String", ClickHouseExpr: netPrefixExpr("Dst"), Default: true, Group: GroupRouting,
		Depends: []ColumnKey{ColumnDstAddr, ColumnDstNetMask, ColumnEType}},
	{Key: ColumnDst1stAS, ClickHouseType: "UInt32", ClickHouseExpr: "DstASPath[1]", ClickHouseMaterialized: true, Default: true, Group: GroupRouting,
		Depends: []ColumnKey{ColumnDstASPath}},
	{Key: ColumnDst2ndAS, ClickHouseType: "UInt32", ClickHouseExpr: "DstASPath[2]", ClickHouseMaterialized: true, Default: true, Group: GroupRouting,
		Depends: []ColumnKey{ColumnDstASPath}},
	{Key: ColumnDst3rdAS, ClickHouseType: "UInt32", ClickHouseExpr: "DstASPath[3]", ClickHouseMaterialized: true, Default: true, Group: GroupRouting,
		Depends: []ColumnKey{ColumnDstASPath}},
	{Key: ColumnPacketSize, ClickHouseType: "UInt64", ClickHouseExpr: "intDiv(Bytes, Packets)", Default: true,
		Depends: []ColumnKey{ColumnBytes, ColumnPackets}},
	{Key: ColumnPacketSizeBucket, ClickHouseType: "LowCardinality(String)", ClickHouseExpr: packetSizeBucketExpr(), Default: true,
		Depends: []ColumnKey{ColumnPacketSize}},
	{Key: ColumnICMPv4, ClickHouseType: "LowCardinality(String)", ClickHouseExpr: "if(Proto = 1, concat(toString(ICMPv4Type), '/', toString(ICMPv4Code)), '')", Group: GroupL3L4,
		Depends: []ColumnKey{ColumnProto, ColumnICMPv4Type, ColumnICMPv4Code}},
	{Key: ColumnICMPv6, ClickHouseType: "LowCardinality(String)", ClickHouseExpr: "if(Proto = 58, concat(toString(ICMPv6Type), '/', toString(ICMPv6Code)), '')", Group: GroupL3L4,
		Depends: []ColumnKey{ColumnProto, ColumnICMPv6Type, ColumnICMPv6Code}},
	{Key: ColumnMPLS1stLabel, ClickHouseType: "UInt32", ClickHouseExpr: "MPLSLabels[1]", Group: GroupMPLS, Depends: []ColumnKey{ColumnMPLSLabels}},
	{Key: ColumnMPLS2ndLabel, ClickHouseType: "UInt32", ClickHouseExpr: "MPLSLabels[2]", Group: GroupMPLS, Depends: []ColumnKey{ColumnMPLSLabels}},
	{Key: ColumnMPLS3rdLabel, ClickHouseType: "UInt32", ClickHouseExpr: "MPLSLabels[3]", Group: GroupMPLS, Depends: []ColumnKey{ColumnMPLSLabels}},
	{Key: ColumnMPLS4thLabel, ClickHouseType: "UInt32", ClickHouseExpr: "MPLSLabels[4]", Group: GroupMPLS, Depends: []ColumnKey{ColumnMPLSLabels}},
}

var (
	directionEnum = []EnumValue{{"undefined", DirectionUndefined}, {"ingress", DirectionIngress}, {"egress", DirectionEgress}}
	boundaryEnum  = []EnumValue{{"undefined", BoundaryUndefined}, {"external", BoundaryExternal}, {"internal", BoundaryInternal}}
)

// netPrefixExpr is the network prefix of an address as text ("192.0.2.0/24", "2001:db8::/32").
// IPv4 addresses are stored IPv4-mapped, hence the 96 added to the mask.
func netPrefixExpr(dir string) string {
	return strings.NewReplacer("$", dir).Replace(`multiIf(` +
		`EType = 0x800, concat(replaceRegexpOne(IPv6CIDRToRange($Addr, (96 + $NetMask)::UInt8).1::String, '^::ffff:', ''), '/', $NetMask::String), ` +
		`EType = 0x86dd, concat(IPv6CIDRToRange($Addr, $NetMask).1::String, '/', $NetMask::String), ` +
		`'')`)
}

// packetSizeBucketExpr buckets the average packet size, with the same boundaries as Akvorado.
func packetSizeBucketExpr() string {
	boundaries := []int{64, 128, 256, 512, 768, 1024, 1280, 1501, 2048, 3072, 4096, 8192, 10240, 16384, 32768, 65536}
	var b strings.Builder
	b.WriteString("multiIf(")
	last := 0
	for _, bound := range boundaries {
		fmt.Fprintf(&b, "PacketSize < %d, '%d-%d', ", bound, last, bound-1)
		last = bound
	}
	fmt.Fprintf(&b, "'%d-Inf')", last)
	return b.String()
}

// columns is columnTable indexed by key, with names and hot flags (HotFields) filled in;
// columnsByName maps a name to its key. Both are built (and the table checked) during package
// variable initialization, before any init function.
var columns, columnsByName = buildColumns()

func buildColumns() (columns [ColumnLast]Column, columnsByName map[string]ColumnKey) {
	columnsByName = map[string]ColumnKey{}
	hot := map[ColumnKey]bool{}
	for _, k := range hotColumns {
		hot[k] = true
	}
	fields := map[int]ColumnKey{}
	for _, c := range columnTable {
		if c.Key == 0 || c.Key >= ColumnLast || columns[c.Key].Key != 0 {
			panic(fmt.Sprintf("schema: bad or duplicate column key %d", c.Key))
		}
		c.Name = columnNames[c.Key]
		if c.Name == "" {
			panic(fmt.Sprintf("schema: no name for column key %d", c.Key))
		}
		c.Hot = hot[c.Key]
		if c.OnWire() {
			if c.Field <= 0 || (c.Field >= 19000 && c.Field <= 19999) {
				panic(fmt.Sprintf("schema: bad field number %d for %s", c.Field, c.Name))
			}
			if other, dup := fields[c.Field]; dup {
				panic(fmt.Sprintf("schema: field number %d used by %s and %s", c.Field, columnNames[other], c.Name))
			}
			fields[c.Field] = c.Key
		} else if c.Field != 0 || c.ClickHouseExpr == "" || c.Hot {
			panic(fmt.Sprintf("schema: derived column %s needs an expression and no field", c.Name))
		}
		for i, v := range c.Enum {
			if v.Value != i {
				panic(fmt.Sprintf("schema: enum values of %s must be 0, 1, 2...", c.Name))
			}
		}
		if (c.Kind == KindEnum) != (len(c.Enum) > 0) {
			panic(fmt.Sprintf("schema: %s: enum values without enum kind or the reverse", c.Name))
		}
		columns[c.Key] = c
		columnsByName[c.Name] = c.Key
	}
	for k := ColumnKey(1); k < ColumnLast; k++ {
		if columns[k].Key == 0 {
			panic(fmt.Sprintf("schema: column %s missing from the table", columnNames[k]))
		}
	}
	return columns, columnsByName
}

// ColumnByName returns the column key for a name (as in configuration and ClickHouse).
func ColumnByName(name string) (ColumnKey, bool) {
	k, ok := columnsByName[name]
	return k, ok
}

// String returns the column name.
func (k ColumnKey) String() string {
	if k > 0 && k < ColumnLast {
		return columns[k].Name
	}
	return fmt.Sprintf("ColumnKey(%d)", uint16(k))
}

// Keys returns every column key in table order, the order of the flows table and of
// `flowzero schema columns` (key order is an internal layout, see columns.go).
func Keys() []ColumnKey { return tableKeys }

var tableKeys = func() []ColumnKey {
	ks := make([]ColumnKey, len(columnTable))
	for i := range columnTable {
		ks[i] = columnTable[i].Key
	}
	return ks
}()

// Lookup returns the static description of a column (whether enabled or not).
func Lookup(k ColumnKey) *Column {
	if k == 0 || k >= ColumnLast {
		return nil
	}
	return &columns[k]
}
