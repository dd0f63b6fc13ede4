// Package catalog is what the query layer knows of the stored flows: the enabled columns
// (name, ClickHouse type, what kind of value they hold, whether the aggregated tables keep
// them) and the tables (the flows table and the aggregated ones, their resolution and
// retention). The filter language validates values against it, the queries choose their
// table from it, and the console builds its forms from it (GET /api/v0/query/config).
//
// A Catalog is immutable. FromStore fills one from the schema and the store's DDL; tests
// build one with New.
package catalog

import (
	"slices"
	"strings"
	"time"
)

// Kind says what a column holds, which decides the filter operators and values it takes
// and how it is shown.
type Kind string

// The kinds of columns (the "kind" field of the configuration the console reads).
const (
	KindAddress          Kind = "address"          // IPv6 (IPv4-mapped for IPv4)
	KindPrefix           Kind = "prefix"           // a network prefix as text (SrcNetPrefix)
	KindAS               Kind = "as"               // an AS number
	KindASPath           Kind = "aspath"           // an array of AS numbers
	KindCommunities      Kind = "communities"      // BGP communities, ASN<<16 | value
	KindLargeCommunities Kind = "largecommunities" // BGP large communities, 12 bytes each
	KindMAC              Kind = "mac"              // a MAC address as a 48-bit number
	KindPort             Kind = "port"             // a TCP/UDP port
	KindProtocol         Kind = "protocol"         // an IP protocol number
	KindEType            Kind = "etype"            // an Ethernet type
	KindEnum             Kind = "enum"             // an Enum8
	KindString           Kind = "string"           // text
	KindNumber           Kind = "number"           // an unsigned integer
	KindTime             Kind = "time"             // a DateTime
	KindArray            Kind = "array"            // an array of numbers or addresses (Elem)
)

// Column is one enabled column of the flows table.
type Column struct {
	// Name is the column's name, as in the schema and in ClickHouse.
	Name string
	// Type is its ClickHouse type in the flows table.
	Type string
	Kind Kind
	// Elem is the kind of an array's elements (KindNumber or KindAddress).
	Elem Kind
	// Enum lists the values of an enum, in the order of their numbers.
	Enum []string
	// Max is the largest value of a number (UInt8: 255...), 0 for other kinds.
	Max uint64
	// FixedSize is N for a FixedString(N) column.
	FixedSize int
	// Aggregated tells that the aggregated tables keep the column as a dimension, so a query
	// using it can read them.
	Aggregated bool
	// Dimension tells that a query may group by it; Filter that the filter language takes it.
	Dimension bool
	Filter    bool
	// Truncatable tells that a dimension on it can be cut to a prefix (truncate4/6).
	Truncatable bool
	// Reverse is the column holding the same information for the other direction (DstAS for
	// SrcAS, OutIfName for InIfName), "" when there is none.
	Reverse string
}

// Table is a table flows are read from.
type Table struct {
	Name string
	// Resolution is the time bucket of an aggregated table, 0 for the flows table.
	Resolution time.Duration
	// TTL is the table's retention, 0 for none.
	TTL time.Duration
	// FlowCount tells that the table counts flows: the flows table (one row per flow), or an
	// aggregated table with a Flows column summing them.
	FlowCount bool
}

// Protocol is an IP protocol number and its name (the protocols dictionary).
type Protocol struct {
	Number uint8
	Name   string
}

// Catalog describes the stored flows.
type Catalog struct {
	// Database holds the tables and dictionaries.
	Database string
	// Flows is the table of raw flows.
	Flows Table
	// Aggregated are the aggregated tables, finest first.
	Aggregated []Table
	// ASNames tells that the asns dictionary (AS names) exists.
	ASNames bool
	// Protocols are the names of IP protocols; a filter may name a protocol instead of its
	// number (Proto = TCP).
	Protocols []Protocol
	// Disabled names the schema's columns that are not enabled, for errors that say so.
	Disabled []string

	columns []*Column
	byName  map[string]*Column
}

// New returns a catalog of the given columns (in the order the console lists them) and
// tables. It fills each column's Reverse from the names: Src and Dst, In and Out, Ingress
// and Egress swap when both columns exist.
func New(database string, columns []*Column, flows Table, aggregated []Table, asNames bool) *Catalog {
	c := &Catalog{Database: database, Flows: flows, ASNames: asNames, byName: map[string]*Column{}}
	c.Aggregated = slices.Clone(aggregated)
	slices.SortStableFunc(c.Aggregated, func(a, b Table) int { return int(a.Resolution - b.Resolution) })
	for _, col := range columns {
		col := *col
		c.columns = append(c.columns, &col)
		c.byName[strings.ToLower(col.Name)] = &col
	}
	for _, col := range c.columns {
		col.Reverse = ""
		if other := c.byName[strings.ToLower(reverseName(col.Name))]; other != nil && other != col {
			col.Reverse = other.Name
		}
	}
	return c
}

// reverseName swaps the direction in a column name.
func reverseName(name string) string {
	for _, p := range [][2]string{{"Src", "Dst"}, {"Dst", "Src"}, {"InIf", "OutIf"}, {"OutIf", "InIf"}, {"Ingress", "Egress"}, {"Egress", "Ingress"}} {
		if rest, ok := strings.CutPrefix(name, p[0]); ok {
			return p[1] + rest
		}
	}
	return ""
}

// Columns returns the enabled columns. They must not be modified.
func (c *Catalog) Columns() []*Column { return c.columns }

// Column returns the column of that name, whatever its case, or nil.
func (c *Catalog) Column(name string) *Column { return c.byName[strings.ToLower(name)] }

// ReverseOf returns the column of the other direction, or col itself when there is none.
func (c *Catalog) ReverseOf(col *Column) *Column {
	if col.Reverse == "" {
		return col
	}
	return c.byName[strings.ToLower(col.Reverse)]
}

// Table returns the table of that name (the flows table or an aggregated one), or false.
func (c *Catalog) Table(name string) (Table, bool) {
	if name == c.Flows.Name {
		return c.Flows, true
	}
	for _, t := range c.Aggregated {
		if t.Name == name {
			return t, true
		}
	}
	return Table{}, false
}

// WithProtocols returns a copy of the catalog naming these protocols.
func (c *Catalog) WithProtocols(ps []Protocol) *Catalog {
	out := *c
	out.Protocols = slices.Clone(ps)
	return &out
}

// Protocol returns the number of a protocol name, whatever its case.
func (c *Catalog) Protocol(name string) (uint8, bool) {
	for _, p := range c.Protocols {
		if strings.EqualFold(p.Name, name) {
			return p.Number, true
		}
	}
	return 0, false
}

// ProtocolName returns the name of a protocol number, or "".
func (c *Catalog) ProtocolName(n uint64) string {
	for _, p := range c.Protocols {
		if uint64(p.Number) == n {
			return p.Name
		}
	}
	return ""
}
