package schema

import (
	"fmt"
	"strconv"
	"strings"
)

// clickhouseSortingKey is the flows table's ORDER BY, as Akvorado's (columns that are
// disabled are left out). The time is rounded so that rows of the same exporter and
// interfaces sort together within five minutes, which compresses well.
var clickhouseSortingKey = []ColumnKey{
	ColumnTimeReceived, ColumnExporterAddress, ColumnEType, ColumnProto, ColumnInIfName,
	ColumnSrcAS, ColumnForwardingStatus, ColumnOutIfName, ColumnDstAS, ColumnSamplingRate,
}

// ClickHouseDefinition is the column's definition in a CREATE TABLE: name, type, and the
// MATERIALIZED or ALIAS expression and codec when it has them.
func (c *Column) ClickHouseDefinition() string {
	var b strings.Builder
	b.WriteString(c.Name)
	b.WriteByte(' ')
	b.WriteString(c.ClickHouseType)
	if c.ClickHouseExpr != "" {
		if c.ClickHouseMaterialized {
			b.WriteString(" MATERIALIZED ")
		} else {
			b.WriteString(" ALIAS ")
		}
		b.WriteString(c.ClickHouseExpr)
	}
	if c.ClickHouseCodec != "" {
		fmt.Fprintf(&b, " CODEC(%s)", c.ClickHouseCodec)
	}
	return b.String()
}

// ClickHouseInputDefinition is the column's definition in a table fed by the Protobuf input
// format (for example a Kafka engine table): name and type only, for columns on the wire.
func (c *Column) ClickHouseInputDefinition() string {
	return c.Name + " " + c.ClickHouseType
}

// WireColumns returns the enabled columns that are protobuf fields (not derived), in table
// order: the columns of a Kafka engine table reading this schema's messages.
func (s *Schema) WireColumns() []*Column {
	out := make([]*Column, 0, len(s.columns))
	for _, c := range s.columns {
		if c.OnWire() {
			out = append(out, c)
		}
	}
	return out
}

// SortingKeyPart is one expression of the flows table's ORDER BY: a column, and for
// TimeReceived the seconds it is rounded down to (0: the value as it is).
type SortingKeyPart struct {
	Column *Column
	Round  uint64
}

// sortingKeyTimeRound is the rounding of TimeReceived in the sorting key: five minutes.
const sortingKeyTimeRound = 300

// SortingKey returns the flows table's ORDER BY, its enabled columns in order.
func (s *Schema) SortingKey() []SortingKeyPart {
	var out []SortingKeyPart
	for _, k := range clickhouseSortingKey {
		if !s.Enabled(k) {
			continue
		}
		p := SortingKeyPart{Column: &columns[k]}
		if k == ColumnTimeReceived {
			p.Round = sortingKeyTimeRound
		}
		out = append(out, p)
	}
	return out
}

// ClickHouseSortingKey returns the expressions of the flows table's ORDER BY.
func (s *Schema) ClickHouseSortingKey() []string {
	var out []string
	for _, p := range s.SortingKey() {
		switch p.Round {
		case 0:
			out = append(out, p.Column.Name)
		case sortingKeyTimeRound:
			out = append(out, "toStartOfFiveMinutes("+p.Column.Name+")")
		default:
			panic("schema: no ClickHouse function rounds to " + strconv.FormatUint(p.Round, 10) + " s")
		}
	}
	return out
}

// ClickHouseFlowsTable returns the CREATE TABLE statement of the flows table, a MergeTree
// with every enabled column, partitioned by day. Retention (TTL), the Kafka engine table and
// the materialized views are the storage package's business.
func (s *Schema) ClickHouseFlowsTable(table string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s\n(\n", table)
	for i, c := range s.columns {
		b.WriteString("    ")
		b.WriteString(c.ClickHouseDefinition())
		if i < len(s.columns)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(")\nENGINE = MergeTree\n")
	b.WriteString("PARTITION BY toYYYYMMDD(TimeReceived)\n")
	fmt.Fprintf(&b, "ORDER BY (%s)\n", strings.Join(s.ClickHouseSortingKey(), ", "))
	return b.String()
}
