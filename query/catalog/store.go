package catalog

import (
	"fmt"
	"strings"

	"flowzero/schema"
	"flowzero/store"
	"flowzero/store/ddl"
)

// kinds are the columns whose kind is not told by their ClickHouse type alone.
var kinds = map[schema.ColumnKey]Kind{
	schema.ColumnSrcAS: KindAS, schema.ColumnDstAS: KindAS,
	schema.ColumnDst1stAS: KindAS, schema.ColumnDst2ndAS: KindAS, schema.ColumnDst3rdAS: KindAS,
	schema.ColumnDstASPath:      KindASPath,
	schema.ColumnSrcCommunities: KindCommunities, schema.ColumnDstCommunities: KindCommunities,
	schema.ColumnSrcLargeCommunities: KindLargeCommunities, schema.ColumnDstLargeCommunities: KindLargeCommunities,
	schema.ColumnSrcMAC: KindMAC, schema.ColumnDstMAC: KindMAC,
	schema.ColumnSrcPort: KindPort, schema.ColumnDstPort: KindPort,
	schema.ColumnSrcPortNAT: KindPort, schema.ColumnDstPortNAT: KindPort,
	schema.ColumnProto: KindProtocol, schema.ColumnTunnelProto: KindProtocol,
	schema.ColumnEType:        KindEType,
	schema.ColumnSrcNetPrefix: KindPrefix, schema.ColumnDstNetPrefix: KindPrefix,
}

// notDimension are columns a query does not group by: the time and the counters.
var notDimension = map[schema.ColumnKey]bool{
	schema.ColumnTimeReceived: true, schema.ColumnBytes: true, schema.ColumnPackets: true,
	schema.ColumnTimeFlowStart: true, schema.ColumnTimeFlowEnd: true,
}

// truncatable are the address columns whose dimensions can be cut to a prefix.
var truncatable = map[schema.ColumnKey]bool{
	schema.ColumnSrcAddr: true, schema.ColumnDstAddr: true,
	schema.ColumnSrcAddrNAT: true, schema.ColumnDstAddrNAT: true,
	schema.ColumnTunnelSrcAddr: true, schema.ColumnTunnelDstAddr: true,
}

// FromStore returns the catalog of the flows stored with schema s and the store
// configuration cfg, whose DDL is ddl: the enabled columns, the flows table and one
// aggregated table per resolution, with the dimensions the DDL gives them. Protocol names
// are not known here: they live in the engine's protocols dictionary (see WithProtocols).
func FromStore(s *schema.Schema, cfg store.Configuration, d *ddl.DDL) (*Catalog, error) {
	aggregated := map[string]bool{}
	var tables []Table
	for _, r := range cfg.Resolutions {
		t := Table{Name: ddl.AggregatedTableName(r), Resolution: r.Interval, TTL: r.TTL}
		for _, o := range d.AggregatedObjects(r) {
			if o.Kind != ddl.KindTable {
				continue
			}
			for _, c := range o.Columns {
				if c.Dimension {
					aggregated[c.Name] = true
				}
				if c.Name == "Flows" {
					t.FlowCount = true
				}
			}
		}
		tables = append(tables, t)
	}
	var cols []*Column
	for _, sc := range s.Columns() {
		c, err := column(sc)
		if err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		c.Aggregated = aggregated[sc.Name]
		cols = append(cols, c)
	}
	flows := Table{Name: "flows", TTL: cfg.TTL, FlowCount: true}
	c := New(cfg.Database, cols, flows, tables, cfg.ASNames.URL != "")
	for _, k := range schema.Keys() {
		if !s.Enabled(k) {
			c.Disabled = append(c.Disabled, k.String())
		}
	}
	return c, nil
}

// column describes one schema column.
func column(sc *schema.Column) (*Column, error) {
	c := &Column{Name: sc.Name, Type: sc.ClickHouseType, Filter: true, Dimension: !notDimension[sc.Key],
		Truncatable: truncatable[sc.Key]}
	for _, v := range sc.Enum {
		c.Enum = append(c.Enum, v.Name)
	}
	typ := strings.TrimSuffix(strings.TrimPrefix(sc.ClickHouseType, "LowCardinality("), ")")
	if !strings.HasPrefix(sc.ClickHouseType, "LowCardinality(") {
		typ = sc.ClickHouseType
	}
	c.Max = uintMax(typ)
	if k, ok := kinds[sc.Key]; ok {
		c.Kind = k
		return c, nil
	}
	switch {
	case typ == "IPv6":
		c.Kind = KindAddress
	case strings.HasPrefix(typ, "Enum8("):
		c.Kind = KindEnum
	case typ == "String":
		c.Kind = KindString
	case strings.HasPrefix(typ, "FixedString("):
		c.Kind = KindString
		fmt.Sscanf(typ, "FixedString(%d)", &c.FixedSize)
	case c.Max > 0:
		c.Kind = KindNumber
	case typ == "DateTime":
		c.Kind = KindTime
	case typ == "Array(UInt32)":
		c.Kind, c.Elem, c.Max = KindArray, KindNumber, 1<<32-1
	case typ == "Array(IPv6)":
		c.Kind, c.Elem = KindArray, KindAddress
	default:
		return nil, fmt.Errorf("column %s: no query kind for type %s", sc.Name, sc.ClickHouseType)
	}
	return c, nil
}

// uintMax is the largest value of an unsigned integer type, 0 for other types.
func uintMax(typ string) uint64 {
	switch typ {
	case "UInt8":
		return 1<<8 - 1
	case "UInt16":
		return 1<<16 - 1
	case "UInt32":
		return 1<<32 - 1
	case "UInt64":
		return 1<<64 - 1
	}
	return 0
}
