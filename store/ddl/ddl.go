package ddl

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"flowzero/schema"
	"flowzero/store/engine"
)

// Object kinds, as migrations treat them differently: data tables are altered in place, the
// rest (views, dictionaries, Kafka tables) hold no data and are replaced when they change.
const (
	KindDatabase    = "database"
	KindTable       = "table"       // holds data: flows, aggregated tables
	KindDistributed = "distributed" // Distributed table in front of a cluster's local tables
	KindView        = "view"        // materialized view
	KindDictionary  = "dictionary"
	KindKafka       = "kafka" // Kafka engine table
)

// Object is one thing the DDL creates. Create is the complete CREATE statement; it ends
// with a COMMENT holding Fingerprint, a hash of the statement itself, which is how a migration
// recognizes an object already up to date.
type Object struct {
	Kind        string
	Name        string // without the database
	Create      string
	Fingerprint string
	// Columns of a data table, for ALTER TABLE ADD COLUMN.
	Columns []ColumnDef
	// SortingKey is an aggregated table's ORDER BY: a new dimension column goes at its end.
	SortingKey []string
	// TTL is the table's TTL expression ("" for none).
	TTL string
	// Settings are the MergeTree settings of a data table ("name = value"), applied to an
	// existing table by migrations when missing.
	Settings []string
	// Local names the local table a Distributed table stands for (cluster mode).
	Local string
}

// ColumnDef is a column of a data table.
type ColumnDef struct {
	Name       string
	Definition string // as in CREATE TABLE: name, type, expression, codec
	Dimension  bool   // part of an aggregated table's sorting key
}

// DDL generates the statements for a schema and a configuration. It is pure: nothing here
// talks to ClickHouse, except Migrator and PreAggregatedKeyDims, which read what exists.
type DDL struct {
	cfg Configuration
	s   *schema.Schema
	// protoRef is the format schema ("file.proto:FlowMessage") for Protobuf input.
	protoRef string
	// preAgg is the resolution the embedded sink pre-aggregates (preAggOK), see PreAggregated.
	preAgg   Resolution
	preAggOK bool
}

// Aggregable reports whether the embedded sink can group the flows by the dimensions dims
// at interval itself (nil), filling that resolution's table without the materialized view
// that groups them in the engine. store gives New its pre-aggregation's check
// (native.Aggregable) when embedded.pre-aggregate is on.
type Aggregable func(dims []*schema.Column, interval time.Duration) error

// New returns the DDL generator. protoDir is the directory ClickHouse reads the .proto
// from, "" to reference the file by name only (relative to the server's format_schema_path).
// aggregable is nil unless the embedded sink pre-aggregates (see PreAggregated).
func New(cfg Configuration, s *schema.Schema, protoDir string, aggregable Aggregable) *DDL {
	d := &DDL{cfg: cfg, s: s}
	file := ProtoFileName(s)
	if protoDir != "" {
		file = filepath.Join(protoDir, file)
	}
	d.protoRef = file + ":FlowMessage"
	d.preAgg, d.preAggOK = d.preAggregation(aggregable)
	return d
}

// PreAggregated returns the resolution whose table the embedded sink fills itself, grouping
// each batch in Go: that resolution has no materialized view from the flows table. ok is
// false when the view groups the flows: no aggregable given to New (a ClickHouse server, or
// pre-aggregation off), a cluster, flows arriving through the Kafka table, no resolution, or
// a schema the sink cannot group (aggregable's error).
func (d *DDL) PreAggregated() (r Resolution, ok bool) { return d.preAgg, d.preAggOK }

func (d *DDL) preAggregation(aggregable Aggregable) (Resolution, bool) {
	c := d.cfg
	if aggregable == nil || c.Cluster != "" || c.Kafka.Enabled || len(c.Resolutions) == 0 || d.s == nil {
		return Resolution{}, false
	}
	finest := c.Resolutions[0]
	for _, r := range c.Resolutions[1:] {
		if r.Interval < finest.Interval {
			finest = r
		}
	}
	if aggregable(d.AggregatedKeyDims(), finest.Interval) != nil {
		return Resolution{}, false
	}
	return finest, true
}

// Resolutions returns the configured resolutions, one aggregated table each.
func (d *DDL) Resolutions() []Resolution { return slices.Clone(d.cfg.Resolutions) }

// FormatSchema returns the format_schema setting value for the schema's messages.
func (d *DDL) FormatSchema() string { return d.protoRef }

// Database returns the database name.
func (d *DDL) Database() string { return d.cfg.Database }

// Topic returns the Kafka topic the collector writes this schema's flows to.
func (d *DDL) Topic() string { return d.cfg.Kafka.TopicPrefix + "-" + d.s.Hash() }

// KafkaTableName returns the name of the Kafka engine table: flows_<hash>_raw.
func (d *DDL) KafkaTableName() string { return "flows_" + d.s.Hash() + "_raw" }

// FlowsTable is the table flows are inserted into and queried from (Distributed in cluster
// mode).
func (d *DDL) FlowsTable() string { return d.q("flows") }

// q qualifies and quotes a table name.
func (d *DDL) q(name string) string { return quoteIdent(d.cfg.Database) + "." + quoteIdent(name) }

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// QuoteString quotes s as a ClickHouse string literal.
func QuoteString(s string) string { return quoteString(s) }

func quoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func (d *DDL) onCluster() string {
	if d.cfg.Cluster == "" {
		return ""
	}
	return " ON CLUSTER " + quoteIdent(d.cfg.Cluster)
}

// dataName is the name of the table that stores rows: the table itself, or its _local
// twin in cluster mode.
func (d *DDL) dataName(name string) string {
	if d.cfg.Cluster != "" {
		return name + "_local"
	}
	return name
}

// engine returns a MergeTree family engine, replicated in cluster mode.
func (d *DDL) engine(family, args string) string {
	if d.cfg.Cluster == "" {
		if args == "" {
			return family
		}
		return family + "(" + args + ")"
	}
	rargs := "'/clickhouse/tables/{shard}/{database}/{table}', '{replica}'"
	if args != "" {
		rargs += ", " + args
	}
	return "Replicated" + family + "(" + rargs + ")"
}

// finish stamps a CREATE statement with its fingerprint.
func finish(o Object) Object {
	sum := sha256.Sum256([]byte(o.Create))
	o.Fingerprint = "flowzero:" + hex.EncodeToString(sum[:6])
	o.Create += "\nCOMMENT " + quoteString(o.Fingerprint)
	return o
}

func ttlExpr(ttl time.Duration) string {
	if ttl <= 0 {
		return ""
	}
	return fmt.Sprintf("TimeReceived + toIntervalSecond(%d)", int64(ttl/time.Second))
}

// Objects returns every object of the configuration in creation order: database, flows
// table, aggregated tables and their views, dictionaries, the Kafka path (KafkaObjects).
func (d *DDL) Objects() []Object {
	out := []Object{d.DatabaseObject()}
	out = append(out, d.FlowsObjects()...)
	// Finest first: a cascading view's source table must exist before it.
	rs := slices.Clone(d.cfg.Resolutions)
	slices.SortStableFunc(rs, func(a, b Resolution) int { return cmp.Compare(a.Interval, b.Interval) })
	for _, r := range rs {
		out = append(out, d.AggregatedObjects(r)...)
	}
	out = append(out, d.DictionaryObjects()...)
	if d.cfg.Kafka.Enabled {
		out = append(out, d.KafkaObjects()...)
	}
	return out
}

// Statements returns the CREATE statements of a fresh installation, in order.
func (d *DDL) Statements() []string {
	var out []string
	for _, o := range d.Objects() {
		out = append(out, o.Create)
	}
	return out
}

// DatabaseObject creates the database.
func (d *DDL) DatabaseObject() Object {
	return Object{Kind: KindDatabase, Name: d.cfg.Database,
		Create: "CREATE DATABASE IF NOT EXISTS " + quoteIdent(d.cfg.Database) + d.onCluster()}
}

// createTable writes a CREATE TABLE with the given columns and trailer (ENGINE ...).
func (d *DDL) createTable(name string, cols []ColumnDef, trailer string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s%s\n(\n", d.q(name), d.onCluster())
	for i, c := range cols {
		b.WriteString("    ")
		b.WriteString(c.Definition)
		if i < len(cols)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(")\n")
	b.WriteString(trailer)
	return b.String()
}

// distributed returns the Distributed table standing for a local table in cluster mode,
// with the local table's structure. cols is the structure to reach when migrating.
func (d *DDL) distributed(name string, cols []ColumnDef, localCreate string) Object {
	local := d.dataName(name)
	sum := sha256.Sum256([]byte(localCreate))
	return finish(Object{
		Kind: KindDistributed, Name: name, Local: local, Columns: cols,
		// The local table's fingerprint is part of the statement, so the Distributed table is
		// migrated whenever its local table is.
		Create: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s AS %s\nENGINE = Distributed(%s, %s, %s, rand())\n-- local table %x",
			d.q(name), d.onCluster(), d.q(local), quoteString(d.cfg.Cluster), quoteString(d.cfg.Database), quoteString(local),
			sum[:6]),
	})
}

// tableSettings are the MergeTree settings of the flows and aggregated tables:
//   - ttl_only_drop_parts: expired data goes by whole parts, never by rewriting one;
//   - min_bytes_for_wide_part: parts under 256 MiB (uncompressed) are compact, one file for
//     every column instead of two per column: an insert writes a new part into each table,
//     and the files of a wide part (and their buffers) cost more than sorting and compressing
//     its rows (docs/design/store.md). Merges turn the big parts wide, where reading few
//     columns of many rows needs it.
var tableSettings = []string{"ttl_only_drop_parts = 1", "min_bytes_for_wide_part = 268435456"}

// DeduplicationWindow is the number of recent inserts whose deduplication token a
// non-replicated flows or aggregated table remembers when Configuration.Deduplicate is on
// (non_replicated_deduplication_window). A split collector's outlet inserts a unit per
// partition and commit interval: 10,000 covers minutes of replays with hundreds of
// partitions, for a few hundred kilobytes of hashes per table. Replicated tables keep
// replicated_deduplication_window (1,000 by default) and tokens for a time.
const DeduplicationWindow = 10000

// dataSettings are the settings of the flows and aggregated tables.
func (d *DDL) dataSettings() []string {
	if !d.cfg.Deduplicate || d.cfg.Cluster != "" {
		return tableSettings
	}
	return append(slices.Clip(tableSettings), fmt.Sprintf("non_replicated_deduplication_window = %d", DeduplicationWindow))
}

// flowsColumns are the flows table's columns: every enabled column of the schema.
func (d *DDL) flowsColumns() []ColumnDef {
	cs := d.s.Columns()
	out := make([]ColumnDef, len(cs))
	for i, c := range cs {
		out[i] = ColumnDef{Name: c.Name, Definition: c.ClickHouseDefinition()}
	}
	return out
}

// FlowsObjects returns the flows table: a MergeTree partitioned by day, ordered like
// Akvorado's for the usual filters (exporter, interfaces, AS), expiring whole parts at the TTL.
func (d *DDL) FlowsObjects() []Object {
	cols := d.flowsColumns()
	ttl := ttlExpr(d.cfg.TTL)
	var t strings.Builder
	fmt.Fprintf(&t, "ENGINE = %s\n", d.engine("MergeTree", ""))
	t.WriteString("PARTITION BY toYYYYMMDD(TimeReceived)\n")
	fmt.Fprintf(&t, "ORDER BY (%s)\n", strings.Join(d.s.ClickHouseSortingKey(), ", "))
	if ttl != "" {
		fmt.Fprintf(&t, "TTL %s\n", ttl)
	}
	settings := d.dataSettings()
	t.WriteString("SETTINGS " + strings.Join(settings, ", "))
	name := d.dataName("flows")
	out := []Object{finish(Object{Kind: KindTable, Name: name, Columns: cols, TTL: ttl, Settings: settings,
		Create: d.createTable(name, cols, t.String())})}
	if d.cfg.Cluster != "" {
		out = append(out, d.distributed("flows", cols, out[0].Create))
	}
	return out
}

// notAggregated lists the columns left out of aggregated tables: per-flow values whose
// cardinality defeats summing (addresses, ports, header fields, paths) or that only mean
// something next to the address they describe.
var notAggregated = map[schema.ColumnKey]bool{
	schema.ColumnSrcAddr: true, schema.ColumnDstAddr: true, schema.ColumnNextHop: true,
	schema.ColumnSrcPort: true, schema.ColumnDstPort: true,
	schema.ColumnSrcNetMask: true, schema.ColumnDstNetMask: true,
	schema.ColumnSrcNetPrefix: true, schema.ColumnDstNetPrefix: true,
	schema.ColumnSrcAddrNAT: true, schema.ColumnDstAddrNAT: true,
	schema.ColumnSrcPortNAT: true, schema.ColumnDstPortNAT: true,
	schema.ColumnSrcMAC: true, schema.ColumnDstMAC: true,
	schema.ColumnIPTTL: true, schema.ColumnIPTos: true, schema.ColumnIPFragmentID: true,
	schema.ColumnIPFragmentOffset: true, schema.ColumnIPv6FlowLabel: true, schema.ColumnTCPFlags: true,
	schema.ColumnICMPv4Type: true, schema.ColumnICMPv4Code: true, schema.ColumnICMPv6Type: true,
	schema.ColumnICMPv6Code: true, schema.ColumnICMPv4: true, schema.ColumnICMPv6: true,
	schema.ColumnTimeFlowStart: true, schema.ColumnTimeFlowEnd: true,
	schema.ColumnTunnelSrcAddr: true, schema.ColumnTunnelDstAddr: true, schema.ColumnSRv6SIDs: true,
	schema.ColumnVXLANVNI: true, schema.ColumnGREKey: true,
	schema.ColumnDatagramPartition: true, schema.ColumnDatagramOffset: true, schema.ColumnDatagramIndex: true,
	schema.ColumnMPLSLabels: true, schema.ColumnMPLS1stLabel: true, schema.ColumnMPLS2ndLabel: true,
	schema.ColumnMPLS3rdLabel: true, schema.ColumnMPLS4thLabel: true,
	schema.ColumnPacketSize: true, schema.ColumnPacketSizeBucket: true,
}

// AggregatedColumns returns the dimensions of the aggregated tables (stored columns that
// are not arrays and not in notAggregated; MATERIALIZED derived columns become plain
// columns) followed by Bytes, Packets and Flows (the number of flows summed), and the sorting key: the flows table's key, then
// every other dimension, so that SummingMergeTree folds exactly the rows that agree on all of
// them. The first primaryLen expressions of the key are the primary key.
func (d *DDL) AggregatedColumns() (cols []ColumnDef, key []string, primaryLen int) {
	for _, c := range d.aggregatedDims() {
		def := c.Name + " " + c.ClickHouseType
		if c.ClickHouseCodec != "" && c.OnWire() {
			def += " CODEC(" + c.ClickHouseCodec + ")"
		}
		cols = append(cols, ColumnDef{Name: c.Name, Definition: def, Dimension: true})
	}
	inKey := map[string]bool{}
	for _, e := range d.s.ClickHouseSortingKey() {
		if strings.HasPrefix(e, "toStartOf") {
			e = "TimeReceived" // already rounded in an aggregated table
		}
		for _, c := range cols {
			if c.Name == e && !inKey[e] {
				key = append(key, e)
				inKey[e] = true
			}
		}
	}
	primaryLen = len(key)
	// The rest of the key only keeps rows that differ apart for SummingMergeTree: its order
	// is free. The engine checks that each inserted block is sorted, comparing neighbouring
	// rows column by column up to the first that differs: with the LowCardinality columns
	// last, groups that differ in a number (interfaces, AS path) are told apart before the
	// string columns, often empty in every group, are compared.
	for _, lowCard := range []bool{false, true} {
		for _, c := range cols {
			if !inKey[c.Name] && strings.Contains(c.Definition, " LowCardinality(") == lowCard {
				key = append(key, c.Name)
			}
		}
	}
	cols = append(cols,
		ColumnDef{Name: "Bytes", Definition: "Bytes UInt64 CODEC(T64, LZ4)"},
		ColumnDef{Name: "Packets", Definition: "Packets UInt64 CODEC(T64, LZ4)"},
		ColumnDef{Name: "Flows", Definition: "Flows UInt64 CODEC(T64, LZ4)"})
	return cols, key, primaryLen
}

// aggregatedDims returns the schema columns that are the aggregated tables' dimensions, in
// table order (see AggregatedColumns).
func (d *DDL) aggregatedDims() []*schema.Column {
	var out []*schema.Column
	for _, c := range d.s.Columns() {
		if c.Key == schema.ColumnBytes || c.Key == schema.ColumnPackets {
			continue
		}
		if notAggregated[c.Key] || strings.HasPrefix(c.ClickHouseType, "Array(") ||
			(!c.OnWire() && !c.ClickHouseMaterialized) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// AggregatedKeyDims returns the dimensions of the aggregated tables in the order of their
// sorting key, the order the sink's pre-aggregation sorts its groups by.
func (d *DDL) AggregatedKeyDims() []*schema.Column {
	_, key, _ := d.AggregatedColumns()
	return d.dimsInKey(key)
}

// dimsInKey returns the dimensions of aggregatedDims in the order of key, an aggregated
// table's sorting key as the engine has it. A table created by an earlier version keeps its
// key's order (migrations only add new dimensions at its end) and may still hold removed
// columns, which the groups leave at their default. Dimensions missing from key come last.
func (d *DDL) dimsInKey(key []string) []*schema.Column {
	dims := d.aggregatedDims()
	byName := make(map[string]*schema.Column, len(dims))
	for _, c := range dims {
		byName[c.Name] = c
	}
	out := make([]*schema.Column, 0, len(dims))
	for _, k := range key {
		if c, ok := byName[k]; ok {
			out = append(out, c)
			delete(byName, k)
		}
	}
	for _, c := range dims {
		if _, ok := byName[c.Name]; ok {
			out = append(out, c)
		}
	}
	return out
}

// PreAggregatedKeyDims returns the dimensions in the order of the sorting key that the
// pre-aggregated resolution's table has in the database (see dimsInKey), or in the order
// the DDL creates it (with the error) when the table cannot be read.
func (d *DDL) PreAggregatedKeyDims(ctx context.Context, e engine.Executor, r Resolution) ([]*schema.Column, error) {
	rows, err := engine.QueryRows(ctx, e, "SELECT sorting_key FROM system.tables WHERE database = "+
		quoteString(d.Database())+" AND name = "+quoteString(d.dataName(AggregatedTableName(r))))
	if err == nil && (len(rows) != 1 || len(rows[0]) != 1) {
		err = fmt.Errorf("no table %s", AggregatedTableName(r))
	}
	if err != nil {
		return d.AggregatedKeyDims(), err
	}
	return d.dimsInKey(splitKey(rows[0][0])), nil
}

// SummedColumns are the columns the aggregated tables' SummingMergeTree sums when it merges
// rows of the same dimensions.
const SummedColumns = "(Bytes, Packets, Flows)"

// AggregatedTableName returns the name of a resolution's table, for example flows_5m.
func AggregatedTableName(r Resolution) string { return "flows_" + r.suffix() }

// AggregatedObjects returns a resolution's table (SummingMergeTree on Bytes, Packets and Flows,
// its own TTL) and the materialized view that feeds it (see viewSource and aggregatedView),
// except for the resolution the sink pre-aggregates (PreAggregated).
func (d *DDL) AggregatedObjects(r Resolution) []Object {
	name := AggregatedTableName(r)
	cols, key, primaryLen := d.AggregatedColumns()
	partition := "toYYYYMMDD(TimeReceived)"
	if r.Interval >= time.Hour {
		partition = "toYYYYMM(TimeReceived)"
	}
	ttl := ttlExpr(r.TTL)
	var t strings.Builder
	fmt.Fprintf(&t, "ENGINE = %s\n", d.engine("SummingMergeTree", SummedColumns))
	fmt.Fprintf(&t, "PARTITION BY %s\n", partition)
	fmt.Fprintf(&t, "PRIMARY KEY (%s)\n", strings.Join(key[:primaryLen], ", "))
	fmt.Fprintf(&t, "ORDER BY (%s)\n", strings.Join(key, ", "))
	if ttl != "" {
		fmt.Fprintf(&t, "TTL %s\n", ttl)
	}
	settings := d.dataSettings()
	t.WriteString("SETTINGS " + strings.Join(settings, ", "))
	data := d.dataName(name)
	out := []Object{finish(Object{Kind: KindTable, Name: data, Columns: cols, SortingKey: key, TTL: ttl, Settings: settings,
		Create: d.createTable(data, cols, t.String())})}
	if d.cfg.Cluster != "" {
		out = append(out, d.distributed(name, cols, out[0].Create))
	}
	if p, ok := d.PreAggregated(); !ok || p.Interval != r.Interval {
		out = append(out, d.aggregatedView(r, cols))
	}
	return out
}

// AggregatedInsertStatement is the INSERT, without its FORMAT clause, of the pre-aggregated
// resolution's rows: columns is the column list of the blocks, "(a, b, ...)".
func (d *DDL) AggregatedInsertStatement(r Resolution, columns string) string {
	return fmt.Sprintf("INSERT INTO %s %s SETTINGS %s", d.q(d.dataName(AggregatedTableName(r))), columns, insertSettings)
}

// viewSource returns the table a resolution's view reads: the coarsest other resolution
// whose interval divides this one (flows_5m reads flows_1m, flows_1h reads flows_5m), or the
// flows table. The views cascade, so only the finest one groups every flow; the others see
// already summed rows (see aggregatedView).
func (d *DDL) viewSource(r Resolution) string {
	var best time.Duration
	name := "flows"
	for _, o := range d.cfg.Resolutions {
		if o.Interval < r.Interval && r.Interval%o.Interval == 0 && o.Interval > best {
			best, name = o.Interval, AggregatedTableName(o)
		}
	}
	return d.dataName(name)
}

// aggregatedView is the materialized view feeding a resolution's table. The view reading
// the flows table groups each inserted block (a block of flows holds many rows per
// dimensions and minute); the embedded sink does that grouping itself when it can
// (PreAggregated), and that view is then not created. The views reading an aggregated table
// (flows_5m from flows_1m...) only round the time: a block reaching them holds rows already
// grouped at the finer interval, over at most the sink's flush interval (or the Kafka
// engine's), so grouping it again would fold next to no rows for a cost per flow; the table
// sums the rows when it merges them.
func (d *DDL) aggregatedView(r Resolution, cols []ColumnDef) Object {
	name := AggregatedTableName(r)
	source := d.viewSource(r)
	groups := source == d.dataName("flows")
	var sel, group []string
	for _, c := range cols {
		switch c.Name {
		case "TimeReceived":
			sel = append(sel, fmt.Sprintf("toStartOfInterval(TimeReceived, toIntervalSecond(%d)) AS TimeReceived", int64(r.Interval/time.Second)))
			group = append(group, "TimeReceived")
		case "Flows":
			// One per flow, whatever its sampling rate.
			if groups {
				sel = append(sel, "count() AS Flows")
			} else {
				sel = append(sel, c.Name)
			}
		case "Bytes", "Packets":
			if groups {
				sel = append(sel, fmt.Sprintf("sum(%s) AS %s", c.Name, c.Name))
			} else {
				sel = append(sel, c.Name)
			}
		default:
			sel = append(sel, c.Name)
			group = append(group, c.Name)
		}
	}
	create := fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s\nAS SELECT\n    %s\nFROM %s",
		d.q(name+"_consumer"), d.onCluster(), d.q(d.dataName(name)),
		strings.Join(sel, ",\n    "), d.q(source))
	if groups {
		create += "\nGROUP BY " + strings.Join(group, ", ")
	}
	return finish(Object{Kind: KindView, Name: name + "_consumer", Create: create})
}

// DictionaryObjects returns the dictionaries: protocols (IANA protocol numbers, built in)
// and asns when an AS names source is configured.
func (d *DDL) DictionaryObjects() []Object {
	var rows []string
	for _, p := range protocols {
		rows = append(rows, fmt.Sprintf("(%d, %s, %s)", p.num, quoteString(p.name), quoteString(p.desc)))
	}
	query := "SELECT proto, name, description FROM values('proto UInt8, name String, description String', " +
		strings.Join(rows, ", ") + ")"
	out := []Object{finish(Object{Kind: KindDictionary, Name: "protocols", Create: fmt.Sprintf(
		"CREATE DICTIONARY IF NOT EXISTS %s%s\n(\n    proto UInt8,\n    name String,\n    description String\n)\n"+
			"PRIMARY KEY proto\nSOURCE(CLICKHOUSE(QUERY %s))\nLIFETIME(0)\nLAYOUT(HASHED())",
		d.q("protocols"), d.onCluster(), quoteString(query))})}
	if d.cfg.ASNames.URL != "" {
		refresh := int64(d.cfg.ASNames.Refresh / time.Second)
		out = append(out, finish(Object{Kind: KindDictionary, Name: "asns", Create: fmt.Sprintf(
			"CREATE DICTIONARY IF NOT EXISTS %s%s\n(\n    asn UInt32 INJECTIVE,\n    name String\n)\n"+
				"PRIMARY KEY asn\nSOURCE(HTTP(URL %s FORMAT 'CSVWithNames'))\nLIFETIME(MIN %d MAX %d)\nLAYOUT(HASHED())",
			d.q("asns"), d.onCluster(), quoteString(d.cfg.ASNames.URL), refresh, refresh+refresh/10)}))
	}
	return out
}

// KafkaErrorsTable is the table of the messages the Kafka table could not parse (see
// KafkaObjects): with a cluster, the Distributed table in front of the nodes' _local tables.
const KafkaErrorsTable = "flows_kafka_errors"

// kafkaErrorsTTL is how long rejected messages are kept: long enough to notice a producer
// sending broken records or another schema, and to look at them. It bounds the table in time
// only: a producer that never stops sending bad records keeps its rate × (up to
// kafkaErrorRawBytes of the record + the error's text) × the TTL on disk, before compression
// (1,000 bad records/s, ~350 GiB), and somewhat more until the TTL applies, since a part is
// dropped once all its rows have expired (ttl_only_drop_parts). Fixed: the table is a
// diagnostic, not data.
const kafkaErrorsTTL = 24 * time.Hour

// kafkaErrorRawBytes bounds the raw message kept for each error. A record holds up to a
// collector batch (64 KiB by default) of messages; its first 4 KiB show what sent it.
const kafkaErrorRawBytes = 4096

// KafkaObjects returns the objects of the Kafka path: the table of rejected messages
// (KafkaErrorsTable; Replicated and Distributed with a cluster), the Kafka engine table reading
// flows-<hash> (Protobuf, the schema's .proto), and the views reading the Kafka table, which
// follow it: one moving its rows into the flows table, one moving the messages it could not
// parse (kafka_handle_error_mode = 'stream': the record's _error is set instead of the
// consumer stalling) into the errors table with their topic, partition, offset, error and
// the start of the raw record.
func (d *DDL) KafkaObjects() []Object {
	var cols []ColumnDef
	var names []string
	for _, c := range d.s.WireColumns() {
		cols = append(cols, ColumnDef{Name: c.Name, Definition: c.ClickHouseInputDefinition()})
		names = append(names, c.Name)
	}
	k := d.cfg.Kafka
	raw := d.KafkaTableName()
	settings := []string{
		"kafka_broker_list = " + quoteString(strings.Join(k.Brokers, ",")),
		"kafka_topic_list = " + quoteString(d.Topic()),
		"kafka_group_name = " + quoteString(k.GroupName),
		"kafka_format = 'Protobuf'",
		"kafka_schema = " + quoteString(d.protoRef),
		fmt.Sprintf("kafka_num_consumers = %d", k.Consumers),
		"kafka_thread_per_consumer = 1",
		fmt.Sprintf("kafka_max_block_size = %d", k.MaxBlockSize),
		"kafka_handle_error_mode = 'stream'",
	}
	out := d.kafkaErrorsObjects()
	out = append(out,
		finish(Object{Kind: KindKafka, Name: raw, Columns: cols,
			Create: d.createTable(raw, cols, "ENGINE = Kafka\nSETTINGS\n    "+strings.Join(settings, ",\n    "))}),
		finish(Object{Kind: KindView, Name: raw + "_consumer", Create: fmt.Sprintf(
			"CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s\nAS SELECT %s\nFROM %s\nWHERE length(_error) = 0",
			d.q(raw+"_consumer"), d.onCluster(), d.q(d.dataName("flows")),
			strings.Join(names, ", "), d.q(raw))}),
		// Named after the Kafka table, like its other view, so that a schema change drops
		// both views of the old table (Migrator.Plan) before the table itself.
		finish(Object{Kind: KindView, Name: raw + "_errors_consumer", Create: fmt.Sprintf(
			"CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s\n"+
				"AS SELECT now() AS TimeReceived, _topic AS Topic, _partition AS Partition, _offset AS Offset, _error AS Error,\n"+
				"    length(_raw_message) AS RawLength, substring(_raw_message, 1, %d) AS RawMessage\nFROM %s\nWHERE length(_error) > 0",
			d.q(raw+"_errors_consumer"), d.onCluster(), d.q(d.dataName(KafkaErrorsTable)), kafkaErrorRawBytes, d.q(raw))}))
	return out
}

// kafkaErrorsObjects returns the table of rejected Kafka messages: one row per record the
// Kafka table could not parse, when ClickHouse received it, expiring after kafkaErrorsTTL.
func (d *DDL) kafkaErrorsObjects() []Object {
	cols := []ColumnDef{
		{Name: "TimeReceived", Definition: "TimeReceived DateTime"},
		{Name: "Topic", Definition: "Topic LowCardinality(String)"},
		{Name: "Partition", Definition: "Partition UInt64"},
		{Name: "Offset", Definition: "Offset UInt64"},
		{Name: "Error", Definition: "Error String"},
		{Name: "RawLength", Definition: "RawLength UInt64"}, // the record's size; RawMessage may be cut
		{Name: "RawMessage", Definition: "RawMessage String"},
	}
	ttl := ttlExpr(kafkaErrorsTTL)
	trailer := fmt.Sprintf("ENGINE = %s\nPARTITION BY toYYYYMMDD(TimeReceived)\nORDER BY (TimeReceived, Topic, Partition, Offset)\nTTL %s\nSETTINGS %s",
		d.engine("MergeTree", ""), ttl, strings.Join(tableSettings, ", "))
	name := d.dataName(KafkaErrorsTable)
	out := []Object{finish(Object{Kind: KindTable, Name: name, Columns: cols, TTL: ttl, Settings: tableSettings,
		Create: d.createTable(name, cols, trailer)})}
	if d.cfg.Cluster != "" {
		out = append(out, d.distributed(KafkaErrorsTable, cols, out[0].Create))
	}
	return out
}

// insertSettings apply to every INSERT into the flows table and so to the views it feeds.
// optimize_on_insert = 0: the SummingMergeTree tables do not sort and sum each inserted block
// once more (their views already grouped it; merges sum the rest), which was the largest
// single cost of an insert with the default resolutions. Queries read aggregated tables
// with sum() ... GROUP BY, which is exact before and after merges.
const insertSettings = "optimize_on_insert = 0"

// NativeInsertStatement is the INSERT, without its FORMAT clause, of Native blocks of flows:
// columns is their column list, "(a, b, ...)" (the wire columns); the others take their
// default or expression.
func (d *DDL) NativeInsertStatement(columns string) string {
	return fmt.Sprintf("INSERT INTO %s %s SETTINGS %s", d.FlowsTable(), columns, insertSettings)
}

// WithDeduplicationToken adds insert_deduplication_token to an INSERT statement of this
// package (they end with their SETTINGS): an INSERT repeated with the same token into a table
// that remembers it (Configuration.Deduplicate, or a Replicated table) stores nothing, and
// neither do the views it feeds. deduplicate_blocks_in_dependent_materialized_views makes
// each view's table check the token on its own: without it, a block the source table has
// already is not pushed to the views at all, so the rows of views an interrupted INSERT did
// not reach (a process killed between two tables' parts) would never come.
func WithDeduplicationToken(insert, token string) string {
	return insert + ", insert_deduplication_token = " + quoteString(token) +
		", deduplicate_blocks_in_dependent_materialized_views = 1"
}

// InsertStatement is the INSERT, without its FORMAT clause, that a batch of length-delimited
// messages (format Protobuf) is streamed to. Fields the .proto does not know are skipped, so
// messages of a schema with more columns still insert.
func (d *DDL) InsertStatement() string {
	return fmt.Sprintf("INSERT INTO %s SETTINGS format_schema = %s, input_format_skip_unknown_fields = 1, %s",
		d.FlowsTable(), quoteString(d.protoRef), insertSettings)
}
