//go:build chdb

package ddl

import (
	"context"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEveryStatementRuns creates every object of several configurations (the default columns,
// every column with an AS names dictionary served over HTTP, the Kafka path) in the real
// engine, checks the result, and that a second migration finds nothing to do.
func TestEveryStatementRuns(t *testing.T) {
	var all []string
	for k := schema.ColumnKey(1); k < schema.ColumnLast; k++ {
		all = append(all, k.String())
	}
	asns := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "asn,name\n64500,Example Transit\n3356,Level 3\n")
	}))
	defer asns.Close()

	for _, tc := range []struct {
		name   string
		schema schema.Configuration
		asns   string
		preAgg bool
		kafka  bool
	}{
		{"default", schema.DefaultConfiguration(), "", true, false},
		{"default without pre-aggregation", schema.DefaultConfiguration(), "", false, false},
		{"all columns", schema.Configuration{Enabled: all}, asns.URL + "/asns.csv", false, false},
		// No broker listens: the Kafka table is created all the same, its consumer retries.
		{"kafka", schema.DefaultConfiguration(), "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfiguration() // with the default TTLs, checked below
			cfg.ASNames.URL = tc.asns
			cfg.Kafka.Enabled = tc.kafka
			cfg.Kafka.Brokers = []string{"127.0.0.1:1"}
			s := storetest.MustSchema(t, tc.schema)
			c := storetest.OpenEngine(t, t.TempDir())
			protoDir := t.TempDir()
			if _, err := WriteProto(protoDir, s); err != nil {
				t.Fatal(err)
			}
			var agg Aggregable
			if tc.preAgg {
				agg = sinkGroups(s)
			}
			ddl := New(cfg, s, protoDir, agg)
			if tc.kafka {
				// chDB cannot reopen a data directory holding a Kafka table.
				defer func() {
					m := &Migrator{DDL: ddl, Exec: engine.Embedded{Conn: c}, Logger: storetest.QuietLogger()}
					if err := m.DropKafka(context.Background()); err != nil {
						t.Error(err)
					}
				}()
			}
			steps := migrate(t, c, ddl, false)
			if len(steps) != len(ddl.Objects()) {
				t.Errorf("fresh database: %d steps for %d objects", len(steps), len(ddl.Objects()))
			}
			if again := migrate(t, c, ddl, false); len(again) != 0 {
				t.Errorf("second migration not empty: %+v", again)
			}
			// Every enabled column is in the flows table, with its type.
			got := storetest.Query(t, c, "SELECT name, type FROM system.columns WHERE database = 'flowzero' AND table = 'flows' ORDER BY position")
			var want []string
			for _, col := range s.Columns() {
				want = append(want, col.Name+"\t"+col.ClickHouseType)
			}
			if got != strings.Join(want, "\n") {
				t.Errorf("flows columns:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
			tables := storetest.Query(t, c, "SELECT name, engine FROM system.tables WHERE database = 'flowzero' ORDER BY name")
			wantTables := []string{"flows\tMergeTree", "flows_1h\tSummingMergeTree", "flows_1h_consumer\tMaterializedView",
				"flows_1m\tSummingMergeTree", "flows_5m\tSummingMergeTree", "flows_5m_consumer\tMaterializedView", "protocols\tDictionary"}
			if !tc.preAgg || tc.kafka { // else the sink fills flows_1m
				wantTables = append(wantTables, "flows_1m_consumer\tMaterializedView")
			}
			if tc.kafka {
				raw := ddl.KafkaTableName()
				wantTables = append(wantTables, raw+"\tKafka", raw+"_consumer\tMaterializedView",
					raw+"_errors_consumer\tMaterializedView", "flows_kafka_errors\tMergeTree")
			}
			if tc.asns != "" {
				wantTables = append(wantTables, "asns\tDictionary")
			}
			slices.Sort(wantTables)
			if tables != strings.Join(wantTables, "\n") {
				t.Errorf("tables:\n%s\nwant:\n%s", tables, strings.Join(wantTables, "\n"))
			}
			if got := storetest.Query(t, c, "SELECT dictGet('flowzero.protocols', 'name', toUInt64(58)), dictGet('flowzero.protocols', 'name', toUInt64(6))"); got != "IPv6-ICMP\tTCP" {
				t.Errorf("protocols dictionary: %q", got)
			}
			if tc.asns != "" {
				if got := storetest.Query(t, c, "SELECT dictGet('flowzero.asns', 'name', toUInt64(3356))"); got != "Level 3" {
					t.Errorf("asns dictionary: %q", got)
				}
			}
			ttl := storetest.Query(t, c, "SELECT engine_full FROM system.tables WHERE database = 'flowzero' AND name = 'flows'")
			if !strings.Contains(ttl, "TTL TimeReceived + toIntervalSecond(1296000)") {
				t.Errorf("flows table has no 15-day TTL: %s", ttl)
			}
			if tc.kafka {
				// DropKafka leaves no object reading the Kafka table; the rejected messages stay.
				m := &Migrator{DDL: ddl, Exec: engine.Embedded{Conn: c}, Logger: storetest.QuietLogger()}
				if err := m.DropKafka(context.Background()); err != nil {
					t.Fatal(err)
				}
				left := storetest.Query(t, c, "SELECT groupArray(name) FROM system.tables WHERE database = 'flowzero' AND (name LIKE '%raw%' OR name LIKE '%kafka%')")
				if left != "['flows_kafka_errors']" {
					t.Errorf("after DropKafka: %s", left)
				}
			}
		})
	}
}

// TestMigrateColumns adds and removes columns on a database holding flows: data stays, new
// columns appear in the flows and aggregated tables (and the latter's sorting key), removed
// columns stay unless asked, every migration is idempotent, and a dry run changes nothing.
func TestMigrateColumns(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	c := storetest.OpenEngine(t, filepath.Join(dir, "chdb"))
	protoDir := filepath.Join(dir, "proto")
	s1 := storetest.MustSchema(t, schema.DefaultConfiguration())
	// Flows go straight into the flows table here, not through the sink: the view groups
	// them (no Aggregable).
	ddl1 := New(cfg, s1, protoDir, nil)
	if _, err := WriteProto(protoDir, s1); err != nil {
		t.Fatal(err)
	}
	migrate(t, c, ddl1, false)
	fm := s1.NewFlowMessage()
	var batch []byte
	for _, f := range storetest.Flows {
		batch = append(batch, f.Encode(fm)...)
	}
	if _, err := c.Insert(ddl1.InsertStatement(), "Protobuf", batch); err != nil {
		t.Fatal(err)
	}

	// Schema 2: VLANs and MACs on, cities off.
	s2 := storetest.MustSchema(t, schema.Configuration{Enabled: []string{"SrcVlan", "DstVlan", "SrcMAC"}, Disabled: []string{"SrcGeoCity", "DstGeoCity"}})
	ddl2 := New(cfg, s2, protoDir, nil)
	if _, err := WriteProto(protoDir, s2); err != nil {
		t.Fatal(err)
	}
	dry := migrate(t, c, ddl2, true)
	if len(dry) == 0 {
		t.Fatal("dry run found nothing to do")
	}
	if again := migrate(t, c, ddl2, true); len(again) != len(dry) {
		t.Fatalf("the dry run changed something: %d steps, then %d", len(dry), len(again))
	}
	steps := migrate(t, c, ddl2, false)
	var actions []string
	for _, st := range steps {
		actions = append(actions, st.Object+": "+st.Action)
	}
	for _, want := range []string{"flows: add column SrcVlan", "flows: add column DstVlan", "flows: add column SrcMAC",
		"flows_1m: add column SrcVlan", "flows_1m_consumer: create", "flows: mark migrated"} {
		if !strings.Contains(strings.Join(actions, "\n"), want) {
			t.Errorf("missing step %q in:\n%s", want, strings.Join(actions, "\n"))
		}
	}
	for _, a := range actions {
		if strings.Contains(a, "drop column") {
			t.Errorf("column dropped without drop-removed-columns: %s", a)
		}
	}
	if again := migrate(t, c, ddl2, false); len(again) != 0 {
		t.Errorf("second migration not empty: %+v", again)
	}
	cols := storetest.Query(t, c, "SELECT groupArray(name) FROM system.columns WHERE database = 'flowzero' AND table = 'flows' AND name IN ('SrcVlan', 'DstVlan', 'SrcMAC', 'SrcGeoCity', 'DstGeoCity')")
	if cols != "['SrcVlan','DstVlan','SrcGeoCity','DstGeoCity','SrcMAC']" {
		t.Errorf("columns after migration: %s", cols)
	}
	key := storetest.Query(t, c, "SELECT sorting_key FROM system.tables WHERE database = 'flowzero' AND name = 'flows_1m'")
	if !strings.HasSuffix(key, ", SrcVlan, DstVlan") {
		t.Errorf("flows_1m sorting key does not end with the new dimensions: %s", key)
	}
	if strings.Contains(storetest.Query(t, c, "SELECT groupArray(name) FROM system.columns WHERE database = 'flowzero' AND table = 'flows_1m'"), "SrcMAC") {
		t.Error("SrcMAC is not an aggregated dimension")
	}
	// Old rows kept, new columns default; new flows carry VLANs into both tables.
	fm2 := s2.NewFlowMessage()
	f := storetest.Flows[0]
	f.SrcVlan, f.DstVlan = 100, 200
	if _, err := c.Insert(ddl2.InsertStatement(), "Protobuf", f.Encode(fm2)); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Query(t, c, "SELECT count(), sum(SrcVlan), sum(DstVlan), countIf(SrcGeoCity = '') FROM flowzero.flows"); got != "5\t100\t200\t5" {
		t.Errorf("after migration: %q", got)
	}
	if got := storetest.Query(t, c, "SELECT SrcVlan, DstVlan, sum(Bytes) FROM flowzero.flows_1m GROUP BY ALL ORDER BY 1"); got != "0\t0\t74800\n100\t200\t1500" {
		t.Errorf("flows_1m by VLAN: %q", got)
	}

	// Asking for removed columns to go drops them.
	cfg.DropRemovedColumns = true
	ddl3 := New(cfg, s2, protoDir, nil)
	steps = migrate(t, c, ddl3, false)
	var drops []string
	for _, st := range steps {
		if strings.HasPrefix(st.Action, "drop column") {
			drops = append(drops, st.Object+": "+st.Action)
		}
	}
	if got := strings.Join(drops, ", "); got != "flows: drop column SrcGeoCity, flows: drop column DstGeoCity" {
		t.Errorf("drops = %s", got)
	}
	if got := storetest.Query(t, c, "SELECT count() FROM system.columns WHERE database = 'flowzero' AND table = 'flows' AND name LIKE '%GeoCity'"); got != "0" {
		t.Errorf("GeoCity columns left: %s", got)
	}
	if again := migrate(t, c, ddl3, false); len(again) != 0 {
		t.Errorf("migration after drop not empty: %+v", again)
	}

	// A TTL change is applied in place.
	cfg.TTL = 48 * time.Hour
	steps = migrate(t, c, New(cfg, s2, protoDir, nil), false)
	if len(steps) != 2 || steps[0].Action != "modify ttl" {
		t.Errorf("TTL change steps: %+v", steps)
	}
	if e := storetest.Query(t, c, "SELECT engine_full FROM system.tables WHERE database = 'flowzero' AND name = 'flows'"); !strings.Contains(e, "toIntervalSecond(172800)") {
		t.Errorf("TTL not changed: %s", e)
	}
}

// TestMigrateTableSettings creates the data tables as an earlier flowzero did (without
// min_bytes_for_wide_part) and checks that a migration adds the setting to each, keeping
// the data, and that the next migration finds nothing to do.
func TestMigrateTableSettings(t *testing.T) {
	c := storetest.OpenEngine(t, t.TempDir())
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	ddl := New(testConfig(), s, t.TempDir(), sinkGroups(s))
	for _, o := range ddl.Objects() {
		old := strings.Replace(o.Create, ", min_bytes_for_wide_part = 268435456", "", 1)
		if err := c.Exec(old); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec("INSERT INTO flowzero.flows (TimeReceived, Bytes) VALUES (now(), 1500)"); err != nil {
		t.Fatal(err)
	}
	var settings []string
	for _, st := range migrate(t, c, ddl, false) {
		if st.Action == "modify settings" {
			settings = append(settings, st.Object)
		}
	}
	if got := strings.Join(settings, " "); got != "flows flows_1m flows_5m flows_1h" {
		t.Errorf("settings modified on %q", got)
	}
	got := storetest.Query(t, c, "SELECT name FROM system.tables WHERE database = 'flowzero' AND engine LIKE '%MergeTree' AND engine_full NOT LIKE '%min_bytes_for_wide_part = 268435456%'")
	if got != "" {
		t.Errorf("tables without the setting: %s", got)
	}
	if got := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows"); got != "1500" {
		t.Errorf("flows after migration: %s", got)
	}
	if again := migrate(t, c, ddl, false); len(again) != 0 {
		t.Errorf("second migration not empty: %+v", again)
	}
}

// testConfig is the default configuration without TTLs: the test flows are dated by Go's
// test clock (storetest.BaseTime), which may be moved away from the engine's.
func testConfig() Configuration {
	cfg := DefaultConfiguration()
	cfg.TTL = 0
	for i := range cfg.Resolutions {
		cfg.Resolutions[i].TTL = 0
	}
	return cfg
}

func migrate(t testing.TB, c *chdb.Conn, d *DDL, dryRun bool) []Step {
	t.Helper()
	m := &Migrator{DDL: d, Exec: engine.Embedded{Conn: c}, Logger: storetest.QuietLogger()}
	steps, err := m.Migrate(context.Background(), dryRun)
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

// checkAggregates checks that every aggregated table of d holds exactly the flows table's
// bytes and packets per time bucket and dimensions (storetest.CheckAggregates).
func checkAggregates(t *testing.T, c *chdb.Conn, d *DDL) {
	t.Helper()
	cols, _, _ := d.AggregatedColumns()
	var dims []string
	for _, col := range cols {
		if col.Dimension {
			dims = append(dims, col.Name)
		}
	}
	var tables []storetest.Aggregated
	for _, r := range d.Resolutions() {
		tables = append(tables, storetest.Aggregated{Table: AggregatedTableName(r), Interval: r.Interval})
	}
	storetest.CheckAggregates(t, c, dims, tables)
}

// TestMigrateFlowsColumn creates the aggregated tables as flowzero did before they counted
// flows (SummingMergeTree((Bytes, Packets)), no Flows column), fills them through the views,
// and checks that a migration rebuilds them keeping every row (Flows 0), that new flows are
// counted and summed when parts merge, and that the next migration finds nothing to do.
func TestMigrateFlowsColumn(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	c := storetest.OpenEngine(t, filepath.Join(dir, "chdb"))
	protoDir := filepath.Join(dir, "proto")
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	if _, err := WriteProto(protoDir, s); err != nil {
		t.Fatal(err)
	}
	d := New(cfg, s, protoDir, nil)
	// The statements of the version before: no Flows column, nothing counted.
	for _, o := range d.Objects() {
		create := o.Create
		for _, r := range [][2]string{
			{",\n    Flows UInt64 CODEC(T64, LZ4)", ""},
			{SummedColumns, "(Bytes, Packets)"},
			{",\n    count() AS Flows", ""},
			{",\n    Flows\nFROM", "\nFROM"},
			{o.Fingerprint, "flowzero:before"},
		} {
			if r[0] != "" {
				create = strings.ReplaceAll(create, r[0], r[1])
			}
		}
		if strings.Contains(create, "Flows") {
			t.Fatalf("%s still counts flows:\n%s", o.Name, create)
		}
		if err := c.Exec(create); err != nil {
			t.Fatalf("%s: %v", o.Name, err)
		}
	}
	fm := s.NewFlowMessage()
	var batch []byte
	for _, f := range storetest.Flows {
		batch = append(batch, f.Encode(fm)...)
	}
	if _, err := c.Insert(d.InsertStatement(), "Protobuf", batch); err != nil {
		t.Fatal(err)
	}
	before := storetest.Query(t, c, "SELECT sum(Bytes), sum(Packets), count() FROM flowzero.flows_1h")

	steps := migrate(t, c, d, false)
	var actions []string
	for _, st := range steps {
		actions = append(actions, st.Object+": "+st.Action)
	}
	for _, want := range []string{"flows_1m_rebuild: create", "flows_1m: exchange with flows_1m_rebuild",
		"flows_1h_rebuild: drop", "flows_5m_consumer: create"} {
		if !strings.Contains(strings.Join(actions, "\n"), want) {
			t.Errorf("missing step %q in:\n%s", want, strings.Join(actions, "\n"))
		}
	}
	if again := migrate(t, c, d, false); len(again) != 0 {
		t.Errorf("second migration not empty: %+v", again)
	}
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		e := storetest.Query(t, c, "SELECT engine_full FROM system.tables WHERE database = 'flowzero' AND name = '"+table+"'")
		if !strings.Contains(e, SummedColumns) {
			t.Errorf("%s: %s", table, e)
		}
	}
	if got := storetest.Query(t, c, "SELECT count() FROM system.tables WHERE database = 'flowzero' AND name LIKE '%_rebuild'"); got != "0" {
		t.Errorf("%s rebuild tables left", got)
	}
	if got := storetest.Query(t, c, "SELECT sum(Bytes), sum(Packets), count() FROM flowzero.flows_1h"); got != before {
		t.Errorf("flows_1h after the rebuild: %s, want %s", got, before)
	}
	if got := storetest.Query(t, c, "SELECT sum(Flows) FROM flowzero.flows_1m"); got != "0" {
		t.Errorf("rows written before count %s flows, want 0", got)
	}
	// New flows are counted in every table, and summed when the parts merge.
	for range 2 {
		if _, err := c.Insert(d.InsertStatement(), "Protobuf", batch); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprint(2 * len(storetest.Flows))
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		if err := c.Exec("OPTIMIZE TABLE flowzero." + table + " FINAL"); err != nil {
			t.Fatal(err)
		}
		if got := storetest.Query(t, c, "SELECT sum(Flows) FROM flowzero."+table); got != want {
			t.Errorf("%s counts %s flows, want %s", table, got, want)
		}
	}
}
