package ddl

import (
	"slices"
	"strings"
	"testing"
	"time"

	"flowzero/schema"
	"flowzero/store/internal/storetest"
	"flowzero/store/native"
)

// sinkGroups is the check of the embedded sink's pre-aggregation, which store gives New
// with embedded.pre-aggregate on (the default) and no server.
func sinkGroups(s *schema.Schema) Aggregable {
	return func(dims []*schema.Column, interval time.Duration) error {
		return native.Aggregable(s, dims, interval)
	}
}

// newTestDDL is the DDL of the default schema and configuration changed by mod (if not
// nil), for the embedded sink's pre-aggregation (as by default) or, without preAggregate,
// for a server or with pre-aggregation off.
func newTestDDL(t *testing.T, mod func(*Configuration), preAggregate bool) *DDL {
	t.Helper()
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	cfg := DefaultConfiguration()
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var agg Aggregable
	if preAggregate {
		agg = sinkGroups(s)
	}
	return New(cfg, s, "/var/lib/flowzero/format_schemas", agg)
}

func objectByName(t *testing.T, d *DDL, name string) Object {
	t.Helper()
	for _, o := range d.Objects() {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("no object %s", name)
	return Object{}
}

func mustContain(t *testing.T, what, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("%s lacks %q:\n%s", what, p, text)
		}
	}
}

func TestDDLSingleNode(t *testing.T) {
	d := newTestDDL(t, func(c *Configuration) { c.Kafka.Enabled = true }, true)
	var names []string
	for _, o := range d.Objects() {
		names = append(names, o.Name)
		if o.Kind != KindDatabase && !strings.HasSuffix(o.Create, "COMMENT '"+o.Fingerprint+"'") {
			t.Errorf("%s does not end with its fingerprint", o.Name)
		}
		if strings.Contains(o.Create, "ON CLUSTER") || strings.Contains(o.Create, "Replicated") {
			t.Errorf("%s: cluster DDL without a cluster", o.Name)
		}
	}
	raw := "flows_" + d.s.Hash() + "_raw"
	want := "flowzero flows flows_1m flows_1m_consumer flows_5m flows_5m_consumer flows_1h flows_1h_consumer protocols flows_kafka_errors " + raw + " " + raw + "_consumer " + raw + "_errors_consumer"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("objects = %s\nwant %s", got, want)
	}
	flows := objectByName(t, d, "flows")
	mustContain(t, "flows", flows.Create,
		"CREATE TABLE IF NOT EXISTS `flowzero`.`flows`\n(\n    TimeReceived DateTime CODEC(DoubleDelta, LZ4),\n",
		"\nENGINE = MergeTree\nPARTITION BY toYYYYMMDD(TimeReceived)\n",
		"ORDER BY (toStartOfFiveMinutes(TimeReceived), ExporterAddress, EType, Proto, InIfName, SrcAS, ForwardingStatus, OutIfName, DstAS, SamplingRate)\n",
		"TTL TimeReceived + toIntervalSecond(1296000)\nSETTINGS ttl_only_drop_parts = 1, min_bytes_for_wide_part = 268435456",
		"SrcNetPrefix String ALIAS multiIf(", "Dst1stAS UInt32 MATERIALIZED DstASPath[1]")

	agg := objectByName(t, d, "flows_5m")
	mustContain(t, "flows_5m", agg.Create,
		"ENGINE = SummingMergeTree((Bytes, Packets, Flows))\nPARTITION BY toYYYYMMDD(TimeReceived)\n",
		"PRIMARY KEY (TimeReceived, ExporterAddress, EType, Proto, InIfName, SrcAS, ForwardingStatus, OutIfName, DstAS, SamplingRate)\n",
		"ORDER BY (TimeReceived, ExporterAddress, EType, Proto, InIfName, SrcAS, ForwardingStatus, OutIfName, DstAS, SamplingRate, InIf, OutIf,",
		"TTL TimeReceived + toIntervalSecond(7776000)\n", "    Dst1stAS UInt32,\n", "    Bytes UInt64 CODEC(T64, LZ4),\n", "    Flows UInt64 CODEC(T64, LZ4)\n")
	for _, c := range []string{"SrcAddr", "DstAddr", "SrcPort", "DstPort", "DstASPath", "SrcNetPrefix", "PacketSizeBucket", "SrcNetMask"} {
		if strings.Contains(agg.Create, "    "+c+" ") {
			t.Errorf("flows_5m keeps per-flow column %s", c)
		}
	}
	mustContain(t, "flows_1h", objectByName(t, d, "flows_1h").Create, "PARTITION BY toYYYYMM(TimeReceived)", "toIntervalSecond(31536000)")
	// The coarser views cascade from the finest table their interval is a multiple of.
	mustContain(t, "flows_5m_consumer", objectByName(t, d, "flows_5m_consumer").Create, "FROM `flowzero`.`flows_1m`\n")
	mustContain(t, "flows_1h_consumer", objectByName(t, d, "flows_1h_consumer").Create, "toIntervalSecond(3600)", "FROM `flowzero`.`flows_5m`\n")
	// Only the view reading flows groups: the others round the time, their table sums.
	for _, v := range []string{"flows_5m_consumer", "flows_1h_consumer"} {
		create := objectByName(t, d, v).Create
		mustContain(t, v, create, "    Bytes,\n    Packets,\n    Flows\nFROM")
		if strings.Contains(create, "GROUP BY") || strings.Contains(create, "sum(") {
			t.Errorf("%s groups:\n%s", v, create)
		}
	}
	odd := newTestDDL(t, func(c *Configuration) {
		c.Resolutions = []Resolution{{Interval: 10 * time.Minute}, {Interval: 3 * time.Minute}, {Interval: time.Hour}, {Interval: 5 * time.Minute}}
	}, false)
	for view, from := range map[string]string{"flows_10m_consumer": "flows_5m", "flows_3m_consumer": "flows", "flows_1h_consumer": "flows_10m", "flows_5m_consumer": "flows"} {
		mustContain(t, view, objectByName(t, odd, view).Create, "FROM `flowzero`.`"+from+"`\n")
	}
	var order []string
	for _, o := range odd.Objects() {
		if o.Kind == KindTable {
			order = append(order, o.Name)
		}
	}
	if got := strings.Join(order, " "); got != "flows flows_3m flows_5m flows_10m flows_1h" {
		t.Errorf("tables not created finest first: %s", got)
	}
	view := objectByName(t, d, "flows_1m_consumer")
	mustContain(t, "flows_1m_consumer", view.Create,
		"CREATE MATERIALIZED VIEW IF NOT EXISTS `flowzero`.`flows_1m_consumer` TO `flowzero`.`flows_1m`\nAS SELECT\n    toStartOfInterval(TimeReceived, toIntervalSecond(60)) AS TimeReceived,\n",
		"    sum(Bytes) AS Bytes,\n    sum(Packets) AS Packets,\n    count() AS Flows\nFROM `flowzero`.`flows`\nGROUP BY TimeReceived, SamplingRate, ")

	kafka := objectByName(t, d, raw)
	mustContain(t, "kafka table", kafka.Create,
		"kafka_broker_list = '127.0.0.1:9092'", "kafka_topic_list = 'flows-"+d.s.Hash()+"'",
		"kafka_format = 'Protobuf'", "kafka_schema = '/var/lib/flowzero/format_schemas/flows-"+d.s.Hash()+".proto:FlowMessage'",
		"kafka_handle_error_mode = 'stream'", "    SrcAddr IPv6,\n")
	if strings.Contains(kafka.Create, "SrcNetPrefix") || strings.Contains(kafka.Create, "CODEC") {
		t.Error("the Kafka table must hold only the wire columns, without codecs")
	}
	mustContain(t, "kafka view", objectByName(t, d, raw+"_consumer").Create,
		"TO `flowzero`.`flows`\nAS SELECT TimeReceived, SamplingRate, ", "\nFROM `flowzero`.`"+raw+"`\nWHERE length(_error) = 0")
	// Messages the Kafka table cannot parse go to a table of their own, kept a day.
	mustContain(t, "kafka errors view", objectByName(t, d, raw+"_errors_consumer").Create,
		"TO `flowzero`.`flows_kafka_errors`\nAS SELECT now() AS TimeReceived, _topic AS Topic, _partition AS Partition, _offset AS Offset, _error AS Error,",
		"substring(_raw_message, 1, 4096) AS RawMessage\nFROM `flowzero`.`"+raw+"`\nWHERE length(_error) > 0")
	mustContain(t, "kafka errors table", objectByName(t, d, "flows_kafka_errors").Create,
		"    Error String,\n", "    RawMessage String\n)\nENGINE = MergeTree\n", "TTL TimeReceived + toIntervalSecond(86400)\n")
	if got, want := d.InsertStatement(), "INSERT INTO `flowzero`.`flows` SETTINGS format_schema = '/var/lib/flowzero/format_schemas/flows-"+d.s.Hash()+".proto:FlowMessage', input_format_skip_unknown_fields = 1, optimize_on_insert = 0"; got != want {
		t.Errorf("insert statement:\n%s\nwant\n%s", got, want)
	}
}

func TestDDLCluster(t *testing.T) {
	d := newTestDDL(t, func(c *Configuration) { c.Cluster = "prod"; c.Kafka.Enabled = true }, true)
	for _, o := range d.Objects() {
		if !strings.Contains(strings.SplitN(o.Create, "\n", 2)[0], " ON CLUSTER `prod`") {
			t.Errorf("%s not created ON CLUSTER: %s", o.Name, strings.SplitN(o.Create, "\n", 2)[0])
		}
	}
	mustContain(t, "flows_local", objectByName(t, d, "flows_local").Create,
		"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')\n")
	mustContain(t, "flows", objectByName(t, d, "flows").Create,
		"CREATE TABLE IF NOT EXISTS `flowzero`.`flows` ON CLUSTER `prod` AS `flowzero`.`flows_local`\nENGINE = Distributed('prod', 'flowzero', 'flows_local', rand())")
	mustContain(t, "flows_1m_local", objectByName(t, d, "flows_1m_local").Create,
		"ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', (Bytes, Packets, Flows))")
	mustContain(t, "flows_1m", objectByName(t, d, "flows_1m").Create, "Distributed('prod', 'flowzero', 'flows_1m_local', rand())")
	// Views read and write the local tables: each node aggregates its own shard.
	mustContain(t, "flows_1m_consumer", objectByName(t, d, "flows_1m_consumer").Create,
		"TO `flowzero`.`flows_1m_local`", "FROM `flowzero`.`flows_local`")
	mustContain(t, "flows_1h_consumer", objectByName(t, d, "flows_1h_consumer").Create,
		"TO `flowzero`.`flows_1h_local`", "FROM `flowzero`.`flows_5m_local`")
	mustContain(t, "kafka view", objectByName(t, d, d.KafkaTableName()+"_consumer").Create, "TO `flowzero`.`flows_local`")
	mustContain(t, "kafka errors view", objectByName(t, d, d.KafkaTableName()+"_errors_consumer").Create, "TO `flowzero`.`flows_kafka_errors_local`")
	mustContain(t, "flows_kafka_errors_local", objectByName(t, d, "flows_kafka_errors_local").Create,
		"ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')\n")
	mustContain(t, "flows_kafka_errors", objectByName(t, d, "flows_kafka_errors").Create,
		"Distributed('prod', 'flowzero', 'flows_kafka_errors_local', rand())")
	// The sink and the console use the Distributed table.
	if d.FlowsTable() != "`flowzero`.`flows`" {
		t.Errorf("FlowsTable = %s", d.FlowsTable())
	}
	// Changing the local table changes the Distributed table's fingerprint.
	d2 := newTestDDL(t, func(c *Configuration) { c.Cluster = "prod"; c.TTL = time.Hour }, true)
	if objectByName(t, d, "flows").Fingerprint == objectByName(t, d2, "flows").Fingerprint {
		t.Error("Distributed fingerprint ignores its local table")
	}
}

// TestDDLPreAggregated checks which configurations let the embedded sink fill the finest
// resolution itself, and that only that resolution's view goes.
func TestDDLPreAggregated(t *testing.T) {
	views := func(d *DDL) string {
		var out []string
		for _, o := range d.Objects() {
			if o.Kind == KindView {
				out = append(out, o.Name)
			}
		}
		return strings.Join(out, " ")
	}
	d := newTestDDL(t, nil, true)
	if r, ok := d.PreAggregated(); !ok || r.Interval != time.Minute {
		t.Fatalf("default embedded configuration: pre-aggregated %v %v", r, ok)
	}
	if got := views(d); got != "flows_5m_consumer flows_1h_consumer" {
		t.Errorf("views = %s", got)
	}
	mustContain(t, "flows_5m_consumer", objectByName(t, d, "flows_5m_consumer").Create, "FROM `flowzero`.`flows_1m`\n")
	enc, err := native.NewEncoder(d.s)
	if err != nil {
		t.Fatal(err)
	}
	agg, err := native.NewAggregator(enc, d.AggregatedKeyDims(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Every dimension, in the order of the table's sorting key (the groups' order, see
	// aggsort.go), then the sums.
	cols, key, primaryLen := d.AggregatedColumns()
	if len(key) != len(cols)-3 {
		t.Fatalf("sorting key of %d columns for %d dimensions", len(key), len(cols)-3)
	}
	// After the primary key, the LowCardinality columns come last (the engine's check that
	// a block is sorted compares them only between groups equal on everything before).
	lowCard := map[string]bool{}
	for _, c := range cols {
		lowCard[c.Name] = strings.Contains(c.Definition, " LowCardinality(")
	}
	if got := strings.Join(key[:primaryLen], ", "); got != "TimeReceived, ExporterAddress, EType, Proto, InIfName, SrcAS, ForwardingStatus, OutIfName, DstAS, SamplingRate" {
		t.Errorf("primary key (%s), want the flows table's", got)
	}
	for i := primaryLen + 1; i < len(key); i++ {
		if lowCard[key[i-1]] && !lowCard[key[i]] {
			t.Errorf("sorting key: %s after the LowCardinality %s", key[i], key[i-1])
		}
	}
	if !lowCard[key[len(key)-1]] || lowCard[key[primaryLen]] {
		t.Errorf("sorting key's free part %v: want numbers, then LowCardinality strings", key[primaryLen:])
	}
	// The groups follow the key of the table as it is in the database (one made by an
	// earlier version may have another order, and a removed column).
	older := append([]string{"NoLongerAColumn"}, key...)
	slices.Reverse(older[primaryLen+1:])
	var names []string
	for _, c := range d.dimsInKey(older) {
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, ", "), strings.Join(older[1:], ", "); got != want {
		t.Errorf("dimsInKey:\n%s\nwant\n%s", got, want)
	}
	if want := "(" + strings.Join(key, ", ") + ", Bytes, Packets, Flows)"; agg.Columns() != want {
		t.Errorf("aggregated block columns %s, want %s", agg.Columns(), want)
	}
	if got, want := d.AggregatedInsertStatement(Resolution{Interval: time.Minute}, agg.Columns()),
		"INSERT INTO `flowzero`.`flows_1m` "+agg.Columns()+" SETTINGS optimize_on_insert = 0"; got != want {
		t.Errorf("insert statement:\n%s\nwant\n%s", got, want)
	}

	// The finest resolution wherever it is in the list; the others keep their views.
	odd := newTestDDL(t, func(c *Configuration) {
		c.Resolutions = []Resolution{{Interval: 10 * time.Minute}, {Interval: 3 * time.Minute}, {Interval: 5 * time.Minute}}
	}, true)
	if got := views(odd); got != "flows_5m_consumer flows_10m_consumer" {
		t.Errorf("views = %s", got)
	}
	mustContain(t, "flows_5m_consumer", objectByName(t, odd, "flows_5m_consumer").Create, "FROM `flowzero`.`flows`\n", "GROUP BY")

	for name, mod := range map[string]func(*Configuration){
		"pre-aggregate off or a server": nil,
		"kafka":                         func(c *Configuration) { c.Kafka.Enabled = true },
		"cluster":                       func(c *Configuration) { c.Cluster = "prod" },
		"no resolution":                 func(c *Configuration) { c.Resolutions = nil },
	} {
		d := newTestDDL(t, mod, mod != nil)
		if _, ok := d.PreAggregated(); ok {
			t.Errorf("%s: pre-aggregated", name)
		}
		if name != "no resolution" && !strings.Contains(views(d), "flows_1m_consumer") {
			t.Errorf("%s: no flows_1m view: %s", name, views(d))
		}
	}
}

func TestDDLFingerprints(t *testing.T) {
	a := newTestDDL(t, nil, true)
	b := newTestDDL(t, nil, true)
	c := newTestDDL(t, func(c *Configuration) { c.TTL = 24 * time.Hour }, true)
	if objectByName(t, a, "flows").Fingerprint != objectByName(t, b, "flows").Fingerprint {
		t.Error("fingerprint not stable")
	}
	if objectByName(t, a, "flows").Fingerprint == objectByName(t, c, "flows").Fingerprint {
		t.Error("fingerprint ignores the TTL")
	}
	if objectByName(t, a, "flows_1m").Fingerprint != objectByName(t, c, "flows_1m").Fingerprint {
		t.Error("flows TTL changed an aggregated table")
	}
}

func TestConfigurationValidate(t *testing.T) {
	for _, tc := range []struct {
		mod func(*Configuration)
		key string
	}{
		{func(c *Configuration) { c.Database = "flow-zero" }, "database"},
		{func(c *Configuration) { c.Cluster = "a b" }, "cluster"},
		{func(c *Configuration) { c.TTL = 1500 * time.Millisecond }, "ttl"},
		{func(c *Configuration) { c.Resolutions[1].Interval = 0 }, "resolutions[1].interval"},
		{func(c *Configuration) { c.Resolutions[2].Interval = 5 * time.Minute }, "resolutions[2].interval"},
		{func(c *Configuration) { c.Resolutions[0].TTL = -time.Hour }, "resolutions[0].ttl"},
		{func(c *Configuration) { c.Kafka.Enabled = true; c.Kafka.Brokers = nil }, "kafka.brokers"},
		{func(c *Configuration) { c.Kafka.Enabled = true; c.Kafka.TopicPrefix = "a/b" }, "kafka.topic-prefix"},
		{func(c *Configuration) { c.ASNames.URL = "file:///x" }, "as-names.url"},
	} {
		cfg := DefaultConfiguration()
		tc.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
			t.Errorf("want an error on %s, got %v", tc.key, err)
		}
	}
	if err := DefaultConfiguration().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if got := AggregatedTableName(Resolution{Interval: 30 * time.Second}); got != "flows_30s" {
		t.Errorf("30s table: %s", got)
	}
	if got := AggregatedTableName(Resolution{Interval: 24 * time.Hour}); got != "flows_1d" {
		t.Errorf("1d table: %s", got)
	}
}

func TestSplitKey(t *testing.T) {
	got := splitKey("toStartOfFiveMinutes(TimeReceived), ExporterAddress, tuple(a, b),c")
	if strings.Join(got, "|") != "toStartOfFiveMinutes(TimeReceived)|ExporterAddress|tuple(a, b)|c" {
		t.Errorf("splitKey = %q", got)
	}
}
