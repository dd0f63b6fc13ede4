//go:build chdb

package store

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/testutil"
	"flowzero/schema"
	"flowzero/store/chdb"
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
			cfg := testConfig(t, t.TempDir())
			def := DefaultConfiguration()
			cfg.TTL, cfg.Resolutions = def.TTL, def.Resolutions // the default TTLs, checked below
			cfg.ASNames.URL = tc.asns
			cfg.Embedded.PreAggregate = tc.preAgg
			cfg.Kafka.Enabled = tc.kafka
			cfg.Kafka.Brokers = []string{"127.0.0.1:1"}
			s := mustSchema(t, tc.schema)
			c := openEngine(t, cfg)
			defer c.Close()
			protoDir := t.TempDir()
			if _, err := WriteProto(protoDir, s); err != nil {
				t.Fatal(err)
			}
			ddl := NewDDL(cfg, s, protoDir)
			if tc.kafka {
				// chDB cannot reopen a data directory holding a Kafka table.
				defer func() {
					m := &Migrator{DDL: ddl, Exec: Embedded{Conn: c}, Logger: quietLogger()}
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
			got := query(t, c, "SELECT name, type FROM system.columns WHERE database = 'flowzero' AND table = 'flows' ORDER BY position")
			var want []string
			for _, col := range s.Columns() {
				want = append(want, col.Name+"\t"+col.ClickHouseType)
			}
			if got != strings.Join(want, "\n") {
				t.Errorf("flows columns:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
			tables := query(t, c, "SELECT name, engine FROM system.tables WHERE database = 'flowzero' ORDER BY name")
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
			if got := query(t, c, "SELECT dictGet('flowzero.protocols', 'name', toUInt64(58)), dictGet('flowzero.protocols', 'name', toUInt64(6))"); got != "IPv6-ICMP\tTCP" {
				t.Errorf("protocols dictionary: %q", got)
			}
			if tc.asns != "" {
				if got := query(t, c, "SELECT dictGet('flowzero.asns', 'name', toUInt64(3356))"); got != "Level 3" {
					t.Errorf("asns dictionary: %q", got)
				}
			}
			ttl := query(t, c, "SELECT engine_full FROM system.tables WHERE database = 'flowzero' AND name = 'flows'")
			if !strings.Contains(ttl, "TTL TimeReceived + toIntervalSecond(1296000)") {
				t.Errorf("flows table has no 15-day TTL: %s", ttl)
			}
			if tc.kafka {
				// DropKafka leaves no object reading the Kafka table; the rejected messages stay.
				m := &Migrator{DDL: ddl, Exec: Embedded{Conn: c}, Logger: quietLogger()}
				if err := m.DropKafka(context.Background()); err != nil {
					t.Fatal(err)
				}
				left := query(t, c, "SELECT groupArray(name) FROM system.tables WHERE database = 'flowzero' AND (name LIKE '%raw%' OR name LIKE '%kafka%')")
				if left != "['flows_kafka_errors']" {
					t.Errorf("after DropKafka: %s", left)
				}
			}
		})
	}
}

// TestSinkRoundTrip writes flows through the sink and reads back exact values from the flows
// table, its derived columns, the aggregated tables and the protocols dictionary.
func TestSinkRoundTrip(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	for _, f := range testFlows {
		sink.Write(f.encode(fm))
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	c := sink.Conn()
	got := query(t, c, `SELECT toUnixTimestamp(TimeReceived), SamplingRate, ExporterAddress, SrcAddr, DstAddr,
		SrcPort, DstPort, Proto, EType, SrcAS, DstAS, SrcNetMask, DstNetMask, InIf, OutIf, Bytes, Packets,
		DstASPath, FlowDirection, ExporterName, SrcCountry, SrcNetPrefix, DstNetPrefix, Dst1stAS, Dst2ndAS,
		PacketSize, PacketSizeBucket, dictGet('flowzero.protocols', 'name', toUInt64(Proto))
		FROM flowzero.flows ORDER BY TimeReceived`)
	want := []string{
		fmt.Sprintf("%d\t1000\t::ffff:192.0.2.1\t::ffff:198.51.100.7\t::ffff:203.0.113.9\t443\t51000\t6\t2048\t64500\t64501\t24\t16\t10\t20\t1500\t1\t[64501,3356]\tingress\tedge1\tFR\t198.51.100.0/24\t203.0.0.0/16\t64501\t3356\t1500\t1280-1500\tTCP", baseTime+5),
		fmt.Sprintf("%d\t1000\t::ffff:192.0.2.1\t::ffff:198.51.100.8\t::ffff:203.0.113.9\t53\t40000\t17\t2048\t64500\t64501\t24\t16\t10\t20\t300\t3\t[64501]\tingress\tedge1\tFR\t198.51.100.0/24\t203.0.0.0/16\t64501\t0\t100\t64-127\tUDP", baseTime+35),
		fmt.Sprintf("%d\t1000\t::ffff:192.0.2.1\t::ffff:198.51.100.7\t::ffff:203.0.113.10\t443\t51001\t6\t2048\t64500\t64502\t24\t24\t10\t21\t64000\t50\t[64502,174,2914]\tegress\tedge1\tDE\t198.51.100.0/24\t203.0.113.0/24\t64502\t174\t1280\t1280-1500\tTCP", baseTime+70),
		fmt.Sprintf("%d\t512\t2001:db8::1\t2001:db8:1::5\t2001:db8:2::6\t22\t60022\t6\t34525\t0\t64510\t48\t32\t3\t4\t9000\t6\t[]\tingress\tedge2\tUS\t2001:db8:1::/48\t2001:db8::/32\t0\t0\t1500\t1280-1500\tTCP", baseTime+400),
	}
	if got != strings.Join(want, "\n") {
		t.Errorf("flows read back:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// flows_1m: the first two flows share the minute and every dimension but Proto.
	agg := query(t, c, `SELECT toUnixTimestamp(TimeReceived), Proto, DstAS, sum(Bytes), sum(Packets)
		FROM flowzero.flows_1m GROUP BY ALL ORDER BY 1, 2, 3`)
	wantAgg := fmt.Sprintf("%d\t6\t64501\t1500\t1\n%d\t17\t64501\t300\t3\n%d\t6\t64502\t64000\t50\n%d\t6\t64510\t9000\t6",
		baseTime, baseTime, baseTime+60, baseTime+360)
	if agg != wantAgg {
		t.Errorf("flows_1m:\n%s\nwant:\n%s", agg, wantAgg)
	}
	agg = query(t, c, `SELECT toUnixTimestamp(TimeReceived), count(), sum(Bytes), sum(Packets) FROM flowzero.flows_1h GROUP BY 1`)
	if want := fmt.Sprintf("%d\t4\t74800\t60", baseTime); agg != want {
		t.Errorf("flows_1h: %q, want %q (rows differing in a dimension stay apart)", agg, want)
	}
	if n := promtest.ToFloat64(sink.m.flows); n != 4 {
		t.Errorf("flows_inserted_total = %v, want 4", n)
	}
}

// TestSinkBatchesBySizeAndTime checks that batches are cut by size and by age, and that
// Stop inserts what is left.
func TestSinkBatchesBySizeAndTime(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 1024
	cfg.Embedded.FlushInterval = 200 * time.Millisecond
	cfg.Embedded.QueueLength = 1000
	cfg.Resolutions = nil // one part per INSERT instead of four: the test is about batching
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	const n = 50 // about six batches: each INSERT writes a part, keep them few
	for i := 0; i < n; i++ {
		f := testFlows[i%len(testFlows)]
		f.srcPort = uint64(i)
		sink.Write(f.encode(fm))
	}
	// Size: about 1 KiB per batch, so several batches before any timer.
	testutil.WaitUntil(t, "three batches inserted", func() bool { return promtest.ToFloat64(sink.m.batches) >= 3 })
	sink.Write(testFlows[0].encode(fm))
	// Age: the last, small batch goes in without Flush.
	testutil.WaitUntil(t, "every flow inserted without a Flush", func() bool { return promtest.ToFloat64(sink.m.flows) == n+1 })
	if got := query(t, sink.Conn(), "SELECT count(), uniqExact(SrcPort) FROM flowzero.flows"); got != fmt.Sprintf("%d\t%d", n+1, n+1) {
		t.Errorf("count, distinct ports = %q", got)
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	sink.Write(testFlows[0].encode(fm)) // after Stop: counted, not stored
	if d := promtest.ToFloat64(sink.m.droppedStopped); d != 1 {
		t.Errorf("dropped after stop = %v", d)
	}
}

// TestSinkStopKeepsConcurrentFlows stops the sink while writers keep writing: every flow is
// stored or counted as dropped, none is left in a batch that Stop neither inserts nor counts.
func TestSinkStopKeepsConcurrentFlows(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 16 << 10
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	var written atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fm := s.NewFlowMessage()
			for i := w; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				sink.Write(testFlows[i%len(testFlows)].encode(fm))
				written.Add(1)
			}
		}()
	}
	testutil.WaitUntil(t, "three batches inserted", func() bool { return promtest.ToFloat64(sink.m.batches) >= 3 })
	err := sink.Stop()
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	m := sink.m
	stored := promtest.ToFloat64(m.flows)
	dropped := promtest.ToFloat64(m.droppedFull) + promtest.ToFloat64(m.droppedError) +
		promtest.ToFloat64(m.droppedStopped) + promtest.ToFloat64(m.droppedInvalid)
	if n := float64(written.Load()); stored+dropped != n || promtest.ToFloat64(m.droppedStopped) == 0 {
		t.Errorf("stored %v + dropped %v (stopped %v) != %v written", stored, dropped, promtest.ToFloat64(m.droppedStopped), n)
	}
	// The tables hold what the counters say, pre-aggregated rows included.
	c := openEngine(t, cfg)
	defer c.Close()
	if got := query(t, c, "SELECT count() FROM flowzero.flows"); got != fmt.Sprint(stored) {
		t.Errorf("flows table holds %s flows, the counter %v", got, stored)
	}
	checkAggregates(t, c, sink.DDL())
}

// TestMigrateColumns adds and removes columns on a database holding flows: data stays, new
// columns appear in the flows and aggregated tables (and the latter's sorting key), removed
// columns stay unless asked, every migration is idempotent, and a dry run changes nothing.
func TestMigrateColumns(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	// Flows go straight into the flows table here, not through the sink: the view groups them.
	cfg.Embedded.PreAggregate = false
	c := openEngine(t, cfg)
	defer c.Close()
	protoDir := filepath.Join(dir, "proto")
	s1 := mustSchema(t, schema.DefaultConfiguration())
	ddl1 := NewDDL(cfg, s1, protoDir)
	if _, err := WriteProto(protoDir, s1); err != nil {
		t.Fatal(err)
	}
	migrate(t, c, ddl1, false)
	fm := s1.NewFlowMessage()
	var batch []byte
	for _, f := range testFlows {
		batch = append(batch, f.encode(fm)...)
	}
	if _, err := c.Insert(ddl1.InsertStatement(), "Protobuf", batch); err != nil {
		t.Fatal(err)
	}

	// Schema 2: VLANs and MACs on, cities off.
	s2 := mustSchema(t, schema.Configuration{Enabled: []string{"SrcVlan", "DstVlan", "SrcMAC"}, Disabled: []string{"SrcGeoCity", "DstGeoCity"}})
	ddl2 := NewDDL(cfg, s2, protoDir)
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
	cols := query(t, c, "SELECT groupArray(name) FROM system.columns WHERE database = 'flowzero' AND table = 'flows' AND name IN ('SrcVlan', 'DstVlan', 'SrcMAC', 'SrcGeoCity', 'DstGeoCity')")
	if cols != "['SrcVlan','DstVlan','SrcGeoCity','DstGeoCity','SrcMAC']" {
		t.Errorf("columns after migration: %s", cols)
	}
	key := query(t, c, "SELECT sorting_key FROM system.tables WHERE database = 'flowzero' AND name = 'flows_1m'")
	if !strings.HasSuffix(key, ", SrcVlan, DstVlan") {
		t.Errorf("flows_1m sorting key does not end with the new dimensions: %s", key)
	}
	if strings.Contains(query(t, c, "SELECT groupArray(name) FROM system.columns WHERE database = 'flowzero' AND table = 'flows_1m'"), "SrcMAC") {
		t.Error("SrcMAC is not an aggregated dimension")
	}
	// Old rows kept, new columns default; new flows carry VLANs into both tables.
	fm2 := s2.NewFlowMessage()
	f := testFlows[0]
	f.srcVlan, f.dstVlan = 100, 200
	if _, err := c.Insert(ddl2.InsertStatement(), "Protobuf", f.encode(fm2)); err != nil {
		t.Fatal(err)
	}
	if got := query(t, c, "SELECT count(), sum(SrcVlan), sum(DstVlan), countIf(SrcGeoCity = '') FROM flowzero.flows"); got != "5\t100\t200\t5" {
		t.Errorf("after migration: %q", got)
	}
	if got := query(t, c, "SELECT SrcVlan, DstVlan, sum(Bytes) FROM flowzero.flows_1m GROUP BY ALL ORDER BY 1"); got != "0\t0\t74800\n100\t200\t1500" {
		t.Errorf("flows_1m by VLAN: %q", got)
	}

	// Asking for removed columns to go drops them.
	cfg.DropRemovedColumns = true
	ddl3 := NewDDL(cfg, s2, protoDir)
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
	if got := query(t, c, "SELECT count() FROM system.columns WHERE database = 'flowzero' AND table = 'flows' AND name LIKE '%GeoCity'"); got != "0" {
		t.Errorf("GeoCity columns left: %s", got)
	}
	if again := migrate(t, c, ddl3, false); len(again) != 0 {
		t.Errorf("migration after drop not empty: %+v", again)
	}

	// A TTL change is applied in place.
	cfg.TTL = 48 * time.Hour
	steps = migrate(t, c, NewDDL(cfg, s2, protoDir), false)
	if len(steps) != 2 || steps[0].Action != "modify ttl" {
		t.Errorf("TTL change steps: %+v", steps)
	}
	if e := query(t, c, "SELECT engine_full FROM system.tables WHERE database = 'flowzero' AND name = 'flows'"); !strings.Contains(e, "toIntervalSecond(172800)") {
		t.Errorf("TTL not changed: %s", e)
	}
}

// TestTTLEmbedded checks that retention applies in the embedded engine: expired flows go at
// the next merge, in the flows table and in an aggregated table, even when their part holds
// live flows (the background TTL merges only drop whole expired parts, see
// TestTTLEmbeddedBackground).
func TestTTLEmbedded(t *testing.T) {
	c := writeAgedFlows(t, 1, false, nil).Conn()
	for _, table := range []string{"flows", "flows_1m"} {
		query(t, c, "OPTIMIZE TABLE flowzero."+table+" FINAL")
		if got := query(t, c, "SELECT count() FROM flowzero."+table); got != "1" {
			t.Errorf("%s after TTL merge: %s rows, want 1", table, got)
		}
	}
}

// writeAgedFlows starts a sink keeping flows and flows_1m for an hour, and writes rounds of
// three flows to it, 3 h, 2 h and 1 min old, with a Flush after each flow (a part each) or
// after all of them. check, if not nil, runs after each round. The ages are taken from the
// engine's clock, which decides what expires: Go's test clock may be moved
// (FLOWZERO_TEST_CLOCK_OFFSET), the engine's cannot be (engineNow).
func writeAgedFlows(t *testing.T, rounds int, flushEach bool, check func(c *chdb.Conn, round int)) *Sink {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.TTL = time.Hour
	cfg.Resolutions = []Resolution{{Interval: time.Minute, TTL: time.Hour}}
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	for round := 1; round <= rounds; round++ {
		now := engineNow(t, sink.Conn())
		for _, age := range []uint64{3 * 3600, 2 * 3600, 60} {
			f := testFlows[0]
			f.time = now - age
			sink.Write(f.encode(fm))
			if flushEach {
				if err := sink.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := sink.Flush(); err != nil {
			t.Fatal(err)
		}
		if check != nil {
			check(sink.Conn(), round)
		}
	}
	return sink
}

// TestTTLEmbeddedBackground checks that the embedded engine applies retention by itself, as
// it must for a collector that runs for weeks: flows arriving in batches (one part each) that
// are past the TTL go without any OPTIMIZE, from the flows table and from the aggregated table
// the sink fills. The background TTL merges drop whole expired parts, and
// merge_with_ttl_timeout (the least delay between a partition's TTL merges, 4 h) did not hold
// back the second round: in chDB the parts went within a second, with or without
// ttl_only_drop_parts.
func TestTTLEmbeddedBackground(t *testing.T) {
	// Twice, as the engine spaces out a partition's TTL merges: the second round must go too.
	writeAgedFlows(t, 2, true, func(c *chdb.Conn, round int) {
		want := fmt.Sprintf("%d\t%d", round, round*1500)
		testutil.WaitUntil(t, fmt.Sprintf("round %d: the expired flows gone from flows and flows_1m (%q)", round, want), func() bool {
			return query(t, c, "SELECT (SELECT count() FROM flowzero.flows), (SELECT sum(Bytes) FROM flowzero.flows_1m)") == want
		})
	})
}

// TestPersistenceAcrossProcesses writes flows in one process and reads them in another.
func TestPersistenceAcrossProcesses(t *testing.T) {
	if os.Getenv("FLOWZERO_STORE_CHILD") != "" {
		t.Skip("child process")
	}
	dir := t.TempDir()
	run := func(phase string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPersistenceChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "FLOWZERO_STORE_CHILD="+phase, "FLOWZERO_STORE_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s process: %v\n%s", phase, err, out)
		}
		return string(out)
	}
	// The child that writes says what it wrote: its baseTime is its own clock's.
	_, wrote, _ := strings.Cut(run("write"), "WROTE ")
	wrote, _, _ = strings.Cut(wrote, "\n")
	if !strings.HasPrefix(wrote, fmt.Sprintf("%d\t%d\t", len(testFlows), 74800)) {
		t.Fatalf("write process wrote %q", wrote)
	}
	if out := run("read"); !strings.Contains(out, "RESULT "+wrote+"\n") {
		t.Fatalf("read process output lacks %q:\n%s", "RESULT "+wrote, out)
	}
}

func TestPersistenceChild(t *testing.T) {
	phase := os.Getenv("FLOWZERO_STORE_CHILD")
	if phase == "" {
		t.Skip("run by TestPersistenceAcrossProcesses")
	}
	cfg := testConfig(t, os.Getenv("FLOWZERO_STORE_DIR"))
	cfg.Resolutions = nil
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	switch phase {
	case "write":
		fm := s.NewFlowMessage()
		for _, f := range testFlows {
			sink.Write(f.encode(fm))
		}
		fmt.Printf("WROTE %d\t%d\t%d\n", len(testFlows), 74800, baseTime+400)
	case "read":
		fmt.Printf("RESULT %s\n", query(t, sink.Conn(), "SELECT count(), sum(Bytes), max(toUnixTimestamp(TimeReceived)) FROM flowzero.flows"))
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSinkDropsWhenQueueFull fills a one-batch queue faster than the engine inserts: every
// flow is either stored or counted as dropped.
func TestSinkDropsWhenQueueFull(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 1024
	cfg.Embedded.QueueLength = 1
	cfg.Resolutions = nil
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	const n = 1000
	for i := 0; i < n; i++ {
		sink.Write(testFlows[i%len(testFlows)].encode(fm))
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	stored := promtest.ToFloat64(sink.m.flows)
	dropped := promtest.ToFloat64(sink.m.droppedFull)
	if dropped == 0 || stored+dropped != n {
		t.Errorf("stored %v + dropped %v != %d written (and some must be dropped)", stored, dropped, n)
	}
	if got := query(t, sink.Conn(), "SELECT count() FROM flowzero.flows"); got != fmt.Sprint(stored) {
		t.Errorf("table holds %s flows, metrics say %v", got, stored)
	}
}

// TestSinkStartsOnce checks that a second Start, while the sink runs or after Stop, is an
// error that leaves the running sink as it was.
func TestSinkStartsOnce(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	if err := sink.Start(); err == nil || !strings.Contains(err.Error(), "started twice") {
		t.Fatalf("second Start: %v", err)
	}
	sink.Write(testFlows[0].encode(s.NewFlowMessage()))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, sink.Conn(), "SELECT count() FROM flowzero.flows"); got != "1" {
		t.Errorf("%s flows stored after a second Start, want 1", got)
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Start(); err == nil {
		t.Error("Start after Stop succeeded")
	}
}
