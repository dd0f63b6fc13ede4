package schema

// ColumnKey identifies a column inside flowzero. Keys are dense (usable as array and bitset
// indexes) and may be renumbered between releases; what is stable on the wire is the protobuf
// field number of each column (Column.Field), which never changes.
type ColumnKey uint16

// The columns, one constant per column, named Column<Name>. The order only groups related
// columns; field numbers are explicit in the column table (table.go).
const (
	ColumnTimeReceived ColumnKey = iota + 1
	ColumnSamplingRate
	ColumnExporterAddress
	ColumnSrcAddr
	ColumnDstAddr
	ColumnSrcAS
	ColumnDstAS
	ColumnInIf
	ColumnOutIf
	ColumnBytes
	ColumnPackets
	ColumnEType
	ColumnProto
	ColumnSrcPort
	ColumnDstPort
	ColumnSrcNetMask
	ColumnDstNetMask
	ColumnNextHop
	ColumnSrcVlan
	ColumnDstVlan
	ColumnForwardingStatus
	ColumnFlowDirection
	ColumnTimeFlowStart
	// The metadata columns enrich.Metadata appends as fragments: each group (exporter,
	// inbound and outbound interface, and below the source and destination network
	// attributes) fills one 8-byte word of FlowMessage.state, which AppendFragment checks
	// with one load (TestFragmentGroupsInOneWord).
	ColumnExporterName
	ColumnExporterGroup
	ColumnExporterRole
	ColumnExporterSite
	ColumnExporterRegion
	ColumnExporterTenant
	ColumnIngressVRFID
	ColumnEgressVRFID
	ColumnInIfName
	ColumnInIfDescription
	ColumnInIfSpeed
	ColumnInIfConnectivity
	ColumnInIfProvider
	ColumnInIfBoundary
	ColumnSrcMAC
	ColumnDstMAC
	ColumnOutIfName
	ColumnOutIfDescription
	ColumnOutIfSpeed
	ColumnOutIfConnectivity
	ColumnOutIfProvider
	ColumnOutIfBoundary
	ColumnSrcAddrNAT
	ColumnDstAddrNAT
	// The network attributes enrich/networks appends as fragments, one word per direction.
	ColumnSrcNetName
	ColumnSrcNetRole
	ColumnSrcNetSite
	ColumnSrcNetRegion
	ColumnSrcNetTenant
	ColumnSrcCountry
	ColumnSrcGeoState
	ColumnSrcGeoCity
	ColumnDstNetName
	ColumnDstNetRole
	ColumnDstNetSite
	ColumnDstNetRegion
	ColumnDstNetTenant
	ColumnDstCountry
	ColumnDstGeoState
	ColumnDstGeoCity
	ColumnDstASPath
	ColumnSrcCommunities
	ColumnDstCommunities
	ColumnSrcLargeCommunities
	ColumnDstLargeCommunities
	ColumnSrcPortNAT
	ColumnDstPortNAT
	ColumnIPTTL
	ColumnIPTos
	ColumnIPFragmentID
	ColumnIPFragmentOffset
	ColumnIPv6FlowLabel
	ColumnTCPFlags
	ColumnICMPv4Type
	ColumnICMPv4Code
	ColumnICMPv6Type
	ColumnICMPv6Code
	ColumnMPLSLabels
	ColumnTimeFlowEnd
	ColumnTunnelSrcAddr
	ColumnTunnelDstAddr
	ColumnTunnelProto
	ColumnVXLANVNI
	ColumnGREKey
	ColumnSRv6SIDs
	// Where a flow was decoded from in a split collector (mode: outlet): the Kafka partition
	// and offset of its datagram record, and its index among the datagram's flows. Together
	// they identify a flow; a flow stored twice would show the same three values twice.
	ColumnDatagramPartition
	ColumnDatagramOffset
	ColumnDatagramIndex

	// Columns computed by ClickHouse from other columns: they have no protobuf field and
	// appending to them is a no-op.
	ColumnSrcNetPrefix
	ColumnDstNetPrefix
	ColumnDst1stAS
	ColumnDst2ndAS
	ColumnDst3rdAS
	ColumnPacketSize
	ColumnPacketSizeBucket
	ColumnICMPv4
	ColumnICMPv6
	ColumnMPLS1stLabel
	ColumnMPLS2ndLabel
	ColumnMPLS3rdLabel
	ColumnMPLS4thLabel

	// ColumnLast is one past the last column key.
	ColumnLast
)

// bitsetWords is the size of a column bitset in 64-bit words.
const bitsetWords = (int(ColumnLast) + 63) / 64

// columnBitset is a fixed-size set of column keys: no allocation, copied by value.
type columnBitset [bitsetWords]uint64

func (b *columnBitset) set(k ColumnKey)      { b[k>>6] |= 1 << (k & 63) }
func (b *columnBitset) clear(k ColumnKey)    { b[k>>6] &^= 1 << (k & 63) }
func (b *columnBitset) has(k ColumnKey) bool { return b[k>>6]&(1<<(k&63)) != 0 }

// Kind is how a column is represented in protobuf (and so which Append method fills it).
type Kind uint8

const (
	// KindDerived columns are computed by ClickHouse (ALIAS or MATERIALIZED) and are not
	// on the wire.
	KindDerived Kind = iota
	// KindUint64 is a varint "uint64" field, filled with AppendUint.
	KindUint64
	// KindUint32 is a varint "uint32" field, filled with AppendUint (truncated to 32 bits).
	KindUint32
	// KindEnum is a varint field declared as a protobuf enum (Column.Enum lists the values),
	// filled with AppendUint.
	KindEnum
	// KindString is a "string" field, filled with AppendString (or AppendBytes).
	KindString
	// KindBytes is a "bytes" field, filled with AppendBytes (or AppendString).
	KindBytes
	// KindIP is a "bytes" field holding a 16-byte IPv6 address (IPv4 as ::ffff:a.b.c.d),
	// which ClickHouse's Protobuf input reads straight into an IPv6 column. Filled with
	// AppendIP.
	KindIP
	// KindMAC is a varint "uint64" holding a 48-bit MAC address (ClickHouse UInt64), filled
	// with AppendUint or with AppendBytes on the 6 address bytes.
	KindMAC
	// KindArrayUint32 is a packed "repeated uint32" field, filled with AppendArrayUint32.
	KindArrayUint32
	// KindArrayUint64 is a packed "repeated uint64" field, filled with AppendArrayUint64.
	KindArrayUint64
	// KindArrayIP is a "repeated bytes" field of 16-byte addresses (ClickHouse Array(IPv6));
	// each AppendIP call adds one element.
	KindArrayIP
	// KindArrayLargeCommunity is a "repeated bytes" field of 12-byte BGP large communities
	// (RFC 8092: global administrator, local data 1, local data 2, big-endian), filled from
	// the FlowMessage's hot fields only.
	KindArrayLargeCommunity
)

// Repeated tells if the kind is a repeated protobuf field.
func (k Kind) Repeated() bool { return k >= KindArrayUint32 }

// ColumnGroup gathers columns that a decoder parses together: when no column of a group is
// enabled, the decoder can skip the whole parsing step (Schema.GroupEnabled).
type ColumnGroup uint8

const (
	// GroupCore are the basic flow columns (time, exporter, addresses, ports, counters).
	GroupCore ColumnGroup = iota
	// GroupExporter are the exporter classification columns set by enrichment.
	GroupExporter
	// GroupInterface are the interface columns (index, name, description, speed, ...).
	GroupInterface
	// GroupNetwork are the network attributes (name, role, site, ...) set by enrichment.
	GroupNetwork
	// GroupGeo are geolocation columns.
	GroupGeo
	// GroupRouting are BGP columns set by the RIB (AS path, communities, next hop).
	GroupRouting
	// GroupL2 are Ethernet columns (VLAN, MAC).
	GroupL2
	// GroupL3L4 are extra IP/TCP/ICMP header columns.
	GroupL3L4
	// GroupNAT are post-NAT addresses and ports.
	GroupNAT
	// GroupMPLS are MPLS label and VRF columns.
	GroupMPLS
	// GroupTunnel are outer-header columns of decapsulated traffic (VXLAN, GRE, SRv6).
	GroupTunnel
	groupLast
)

var groupNames = [...]string{
	GroupCore:      "core",
	GroupExporter:  "exporter",
	GroupInterface: "interface",
	GroupNetwork:   "network",
	GroupGeo:       "geo",
	GroupRouting:   "routing",
	GroupL2:        "L2",
	GroupL3L4:      "L3L4",
	GroupNAT:       "NAT",
	GroupMPLS:      "MPLS",
	GroupTunnel:    "tunnel",
}

// String returns the group name.
func (g ColumnGroup) String() string {
	if int(g) < len(groupNames) {
		return groupNames[g]
	}
	return "unknown"
}

// EnumValue is one value of an enum column.
type EnumValue struct {
	Name  string
	Value int
}

// Column describes one column of the flows table and its protobuf field.
type Column struct {
	Key  ColumnKey
	Name string
	// Field is the protobuf field number, stable forever; 0 for derived columns.
	Field int
	Kind  Kind
	// Enum lists the values of a KindEnum column (value 0 first).
	Enum []EnumValue
	// ClickHouseType is the column type in the flows table, ClickHouseCodec its codec
	// (without "CODEC(...)"), or empty for the default.
	ClickHouseType  string
	ClickHouseCodec string
	// ClickHouseExpr is the expression of a derived column; ClickHouseMaterialized tells
	// whether it is stored (MATERIALIZED) or computed at query time (ALIAS).
	ClickHouseExpr         string
	ClickHouseMaterialized bool
	// Default tells whether the column is enabled when the configuration does not name it;
	// NoDisable columns cannot be disabled.
	Default   bool
	NoDisable bool
	Group     ColumnGroup
	// Hot columns are kept unencoded in FlowMessage fields until Finalize because later
	// stages (enrichment, RIB, sinks keyed by exporter) read or overwrite them. The flag is
	// set for the fields of HotFields, which makes a column hot.
	Hot bool
	// Depends lists the columns whose data this one needs; enabling it without them is a
	// configuration error.
	Depends []ColumnKey
}

// OnWire tells if the column is a protobuf field (not computed by ClickHouse).
func (c *Column) OnWire() bool { return c.Kind != KindDerived }

// Enum values shared by InIfBoundary/OutIfBoundary and FlowDirection (same numbering as
// Akvorado, so its dashboards' filters keep their meaning).
const (
	BoundaryUndefined = 0
	BoundaryExternal  = 1
	BoundaryInternal  = 2

	DirectionUndefined = 0
	DirectionIngress   = 1
	DirectionEgress    = 2
)
