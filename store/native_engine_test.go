//go:build chdb

package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/demo"
	"flowzero/internal/testutil"
	"flowzero/pbwire"
	"flowzero/schema"
	"flowzero/store/chdb"
)

// TestNativeMatchesProtobuf inserts the same messages (every flow of the real captures, a
// flow with every kind of column set, and 70,000 distinct interface names so that the
// LowCardinality indexes take 8, 16 and 32 bits) once through ClickHouse's Protobuf input and
// once converted by NativeEncoder, with every column enabled: both tables hold exactly the
// same rows, materialized columns included.
func TestNativeMatchesProtobuf(t *testing.T) {
	s := allColumnsSchema(t)
	msgs := captureMessages(t, s)
	msgs = append(msgs, nativeTestMessage(s, baseTime))
	fm := s.NewFlowMessage()
	for i := range 70000 {
		fm.Reset()
		fm.TimeReceived = baseTime + uint64(i%3600)
		fm.InIf = uint32(i)
		fm.AppendString(schema.ColumnInIfName, fmt.Sprintf("if-%d", i))
		if i%7 == 0 {
			fm.AppendString(schema.ColumnOutIfName, fmt.Sprintf("if-%d", i%300))
		}
		msgs = append(msgs, append([]byte(nil), fm.Finalize()...))
	}

	c, _, _ := compareNativeProtobuf(t, s, 1000, // several blocks per INSERT, the last one partial
		[][][]byte{msgs[:len(msgs)/3], msgs[len(msgs)/3 : 2*len(msgs)/3], msgs[2*len(msgs)/3:]})
	defer c.Close()
	if got := query(t, c, "SELECT uniqExact(InIfName), uniqExact(OutIfName) FROM flowzero.flows_native"); got != "70001\t301" {
		t.Errorf("distinct interface names: %s", got)
	}
	// The engine squashed the blocks: one part per INSERT, as with Protobuf. The flows are
	// in one daily partition (baseTime) and the table's merges are stopped, so that the parts
	// are exactly those the INSERTs wrote.
	if got := query(t, c, "SELECT count() FROM system.parts WHERE database = 'flowzero' AND table = 'flows_native' AND level = 0"); got != "3" {
		t.Errorf("%s parts for 3 inserts", got)
	}
}

// compareNativeProtobuf inserts each batch of messages once through ClickHouse's Protobuf
// input into flowzero.flows and once converted by NativeEncoder (blocks of blockRows rows)
// into flowzero.flows_native, then checks that both tables hold the same rows, wire and
// materialized columns. It returns the engine connection for more checks, and how many
// times the Native inserts' parts were written, and found already sorted by the engine.
func compareNativeProtobuf(t *testing.T, s *schema.Schema, blockRows int, batches [][][]byte) (c *chdb.Conn, parts, sorted int) {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.Resolutions = nil
	c = openEngine(t, cfg)
	dir, err := cfg.ProtoDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteProto(dir, s); err != nil {
		t.Fatal(err)
	}
	ddl := NewDDL(cfg, s, dir)
	migrate(t, c, ddl, false)
	for _, q := range []string{"CREATE TABLE flowzero.flows_native AS flowzero.flows", "SYSTEM STOP MERGES flowzero.flows_native"} {
		if err := c.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := NewNativeEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	enc.blockRows = blockRows
	native := strings.Replace(ddl.NativeInsertStatement(enc), ddl.FlowsTable(), "flowzero.flows_native", 1)
	total := 0
	for _, part := range batches {
		batch := []byte{}
		for _, m := range part {
			batch = append(batch, m...)
		}
		total += len(part)
		if _, err := c.Insert(ddl.InsertStatement(), "Protobuf", batch); err != nil {
			t.Fatal(err)
		}
		enc.Reset()
		if ok, err := enc.AppendDelimited(batch); ok != len(part) || err != nil {
			t.Fatalf("%d of %d messages converted: %v", ok, len(part), err)
		}
		parts0, sorted0 := engineEvent(t, c, "MergeTreeDataWriterBlocks"), engineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted")
		if _, err := c.Insert(native, "Native", enc.Block()); err != nil {
			t.Fatal(err)
		}
		parts += engineEvent(t, c, "MergeTreeDataWriterBlocks") - parts0
		sorted += engineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted") - sorted0
	}
	var cols []string
	for _, col := range s.Columns() {
		if col.OnWire() || col.ClickHouseMaterialized {
			cols = append(cols, col.Name)
		}
	}
	sel := func(table string) string {
		return query(t, c, "SELECT "+strings.Join(cols, ", ")+" FROM flowzero."+table+" ORDER BY "+strings.Join(cols, ", "))
	}
	pb, nat := sel("flows"), sel("flows_native")
	if n := strings.Count(pb, "\n") + 1; n != total {
		t.Fatalf("%d rows inserted with Protobuf, want %d", n, total)
	}
	if pb != nat {
		p, n := strings.Split(pb, "\n"), strings.Split(nat, "\n")
		for i := range min(len(p), len(n)) {
			if p[i] != n[i] {
				t.Fatalf("row %d differs:\nprotobuf %s\nnative   %s", i, p[i], n[i])
			}
		}
		t.Fatalf("%d rows with Protobuf, %d with Native", len(p), len(n))
	}
	return c, parts, sorted
}

// engineEvent returns the engine's counter of event (system.events), 0 before it happens.
func engineEvent(t *testing.T, c *chdb.Conn, event string) int {
	t.Helper()
	n, err := strconv.Atoi(query(t, c, "SELECT sum(value) FROM system.events WHERE event = '"+event+"'"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNativeBlocksSortedForEngine checks that the engine finds the encoder's blocks in the
// flows table's order, so that it skips its own sort (batchSorter), for the flows of the
// captures and flows whose every key part varies, with the default columns and with every
// column; the rows are those the Protobuf input stores. A batch whose key cannot be packed
// (IPv4 and IPv6 exporters together) goes in arrival order, and the engine sorts it.
func TestNativeBlocksSortedForEngine(t *testing.T) {
	def, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	all := allColumnsSchema(t)
	mixed := append(sortTestFlows(def, baseTime, 300, true), sortTestFlows(def, baseTime, 300, false)...)
	for _, tc := range []struct {
		name    string
		s       *schema.Schema
		batches [][][]byte
		sorted  int
	}{
		{"default columns", def, [][][]byte{captureMessages(t, def), sortTestFlows(def, baseTime, 20000, false), sortTestFlows(def, baseTime, 20000, true)}, 3},
		{"all columns", all, [][][]byte{captureMessages(t, all), sortTestFlows(all, baseTime, 20000, false)}, 2},
		{"ipv4 and ipv6 exporters", def, [][][]byte{mixed}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, parts, sorted := compareNativeProtobuf(t, tc.s, math.MaxInt, tc.batches)
			c.Close()
			if parts != len(tc.batches) || sorted != tc.sorted {
				t.Errorf("the engine wrote %d parts for %d inserts, %d of them sorted already; want %d", parts, len(tc.batches), sorted, tc.sorted)
			}
		})
	}
}

// TestNativeOmitsDefaultColumns checks the blocks that leave out the columns whose every row
// holds the default: in one INSERT, a block of empty flows (one column kept for the row
// count), then blocks where columns empty in the previous one are set (strings, addresses,
// arrays that MATERIALIZED columns read, enums) and the other way round. The engine fills the
// left-out columns and computes the materialized ones exactly as from the Protobuf input.
func TestNativeOmitsDefaultColumns(t *testing.T) {
	s := allColumnsSchema(t)
	fm := s.NewFlowMessage()
	fm.TimeReceived = baseTime
	empty := bytes.Clone(fm.Finalize())
	full := nativeTestMessage(s, baseTime)
	fm.Reset()
	fm.TimeReceived = baseTime + 60
	fm.DstASPath = []uint32{174}
	fm.AppendUint(schema.ColumnBytes, 40)
	fm.AppendString(schema.ColumnInIfName, "et-0/0/1")
	path := bytes.Clone(fm.Finalize())
	fm.Reset()
	fm.TimeReceived = baseTime + 120
	fm.AppendUint(schema.ColumnInIfBoundary, 2)
	fm.AppendUint(schema.ColumnFlowDirection, 0) // explicit default
	boundary := bytes.Clone(fm.Finalize())
	// Blocks of two rows: the first one has only TimeReceived, the last one of the second
	// batch only the full flow.
	batches := [][][]byte{
		{empty, empty, full, empty, path, boundary, empty, path, empty},
		{boundary, empty, empty, empty, full},
		captureMessages(t, s)[:50],
	}
	c, _, _ := compareNativeProtobuf(t, s, 2, batches)
	defer c.Close()
	// The materialized column from the array's first element, on rows with and without it.
	if got := query(t, c, "SELECT groupArray(Dst1stAS) FROM (SELECT Dst1stAS FROM flowzero.flows_native WHERE TimeReceived < "+
		strconv.FormatUint(captureTime, 10)+" ORDER BY TimeReceived, Dst1stAS)"); got != "[0,0,0,0,0,0,0,0,3356,3356,174,174,0,0]" {
		t.Errorf("Dst1stAS: %s", got)
	}
}

// TestSinkDropsMalformedFlows checks that the sink inserts Native, and that a malformed
// message is left out and counted while the flows around it are stored, in the flows table
// and in the pre-aggregated ones: a message refused after some of its fields were converted
// adds nothing to any group.
func TestSinkDropsMalformedFlows(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	if sink.format != "Native" {
		t.Fatalf("sink inserts %s", sink.format)
	}
	fm := s.NewFlowMessage()
	sink.Write(testFlows[0].encode(fm))
	bad := pbwire.AppendVarint(nil, 2)
	bad = append(bad, byte(s.Column(schema.ColumnSrcNetMask).Field<<3), 0x80) // truncated varint
	sink.Write(bad)
	// A whole flow, then a TimeReceived past DateTime's range: refused after its Bytes.
	over := append([]byte(nil), unframe(t, testFlows[2].encode(fm))...)
	over = append(over, byte(s.Column(schema.ColumnTimeReceived).Field<<3), 0x80, 0x80, 0x80, 0x80, 0x10)
	sink.Write(append(pbwire.AppendVarint(nil, uint64(len(over))), over...))
	sink.Write(testFlows[1].encode(fm))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, sink.Conn(), "SELECT count(), sum(Bytes) FROM flowzero.flows"); got != "2\t1800" {
		t.Errorf("stored %q, want the two good flows", got)
	}
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		if got := query(t, sink.Conn(), "SELECT sum(Bytes), sum(Packets) FROM flowzero."+table); got != "1800\t4" {
			t.Errorf("%s holds %q, want the two good flows", table, got)
		}
	}
	if n := promtest.ToFloat64(sink.m.droppedInvalid); n != 2 {
		t.Errorf("malformed flows dropped = %v, want 2", n)
	}
	if n := promtest.ToFloat64(sink.m.flows); n != 2 {
		t.Errorf("flows inserted = %v, want 2", n)
	}
}

// TestMigrateTableSettings creates the data tables as an earlier flowzero did (without
// min_bytes_for_wide_part) and checks that a migration adds the setting to each, keeping
// the data, and that the next migration finds nothing to do.
func TestMigrateTableSettings(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	c := openEngine(t, cfg)
	defer c.Close()
	s := mustSchema(t, schema.DefaultConfiguration())
	ddl := NewDDL(cfg, s, t.TempDir())
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
	got := query(t, c, "SELECT name FROM system.tables WHERE database = 'flowzero' AND engine LIKE '%MergeTree' AND engine_full NOT LIKE '%min_bytes_for_wide_part = 268435456%'")
	if got != "" {
		t.Errorf("tables without the setting: %s", got)
	}
	if got := query(t, c, "SELECT sum(Bytes) FROM flowzero.flows"); got != "1500" {
		t.Errorf("flows after migration: %s", got)
	}
	if again := migrate(t, c, ddl, false); len(again) != 0 {
		t.Errorf("second migration not empty: %+v", again)
	}
}

// checkAggregates checks that every aggregated table holds exactly the flows table's bytes
// and packets per time bucket and per value of every dimension, with and without FINAL
// (merged), less the groups summing to zero.
func checkAggregates(t *testing.T, c *chdb.Conn, ddl *DDL) {
	t.Helper()
	cols, _, _ := ddl.aggregatedColumns()
	var dims []string
	for _, col := range cols {
		if col.Dimension && col.Name != "TimeReceived" {
			dims = append(dims, col.Name)
		}
	}
	list := strings.Join(dims, ", ")
	for _, r := range ddl.cfg.Resolutions {
		sec := fmt.Sprint(int64(r.Interval / time.Second))
		for _, final := range []string{"", " FINAL"} {
			// SummingMergeTree drops the rows whose sums are all 0 when it merges them, and
			// when it sorts an insert (optimize_on_insert, on for the Kafka engine's inserts).
			const having = " HAVING sum(Bytes) != 0 OR sum(Packets) != 0"
			want := query(t, c, "SELECT toStartOfInterval(TimeReceived, toIntervalSecond("+sec+")) AS t, "+list+", sum(Bytes), sum(Packets) FROM flowzero.flows GROUP BY ALL"+having+" ORDER BY ALL")
			if want == "" {
				t.Fatal("no flows")
			}
			got := query(t, c, "SELECT TimeReceived AS t, "+list+", sum(Bytes), sum(Packets) FROM flowzero."+AggregatedTableName(r)+final+" GROUP BY ALL"+having+" ORDER BY ALL")
			if got != want {
				g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
				i := 0
				for i < len(g) && i < len(w) && g[i] == w[i] {
					i++
				}
				t.Errorf("%s%s does not sum to the flows table (%d rows, want %d); first difference at row %d:\n%s\nwant\n%s",
					AggregatedTableName(r), final, len(g), len(w), i, g[min(i, len(g)-1)], w[min(i, len(w)-1)])
			}
		}
	}
}

// TestAggregatesSumToFlows stores 10,000 demo flows spread over 25 minutes through the sink in
// small batches (many INSERTs, so many parts and merges), with the view grouping flows_1m and
// with the sink pre-aggregating it, per batch and over all the batches, and checks that every
// aggregated table holds exactly the flows table's bytes and packets, per time bucket and per
// dimensions (checkAggregates).
func TestAggregatesSumToFlows(t *testing.T) {
	for _, tc := range []struct {
		name     string
		preAgg   bool
		interval time.Duration
	}{{"view", false, 0}, {"per-batch", true, 0}, {"summed", true, time.Hour}} {
		preAgg := tc.preAgg
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.BatchBytes = 64 << 10
			cfg.Embedded.QueueLength = 100 // written at memory speed: no batch may be dropped
			cfg.Embedded.PreAggregate = preAgg
			cfg.Embedded.PreAggregateInterval = tc.interval
			s := mustSchema(t, schema.DefaultConfiguration())
			sink := startSink(t, cfg, s)
			if _, ok := sink.DDL().PreAggregated(); ok != preAgg || (sink.agg != nil) != preAgg {
				t.Fatalf("pre-aggregated: %v, sink aggregating: %v", ok, sink.agg != nil)
			}
			c := sink.Conn()
			if tc.interval > 0 {
				// Rows merged away could hide rows inserted twice.
				if err := c.Exec("SYSTEM STOP MERGES flowzero.flows_1m"); err != nil {
					t.Fatal(err)
				}
			}
			writeDemoFlows(sink, s, 10000, 150*time.Millisecond)
			if err := sink.Flush(); err != nil {
				t.Fatal(err)
			}
			if n := query(t, c, "SELECT count() FROM flowzero.flows"); n != "10000" {
				t.Fatalf("%s flows stored", n)
			}
			checkAggregates(t, c, sink.DDL())
			if preAgg {
				// The sink grouped the batches: flows_1m got fewer rows than flows.
				if n := query(t, c, "SELECT count() FROM flowzero.flows_1m"); query(t, c, "SELECT "+n+" < 10000") != "1" {
					t.Errorf("flows_1m holds %s rows for 10000 flows", n)
				}
			}
			if tc.interval > 0 {
				// One INSERT of all the batches' groups: one row per group, merges stopped.
				if got, want := query(t, c, "SELECT count() FROM flowzero.flows_1m"), distinctGroups(t, c, sink.DDL(), time.Minute); got != want {
					t.Errorf("flows_1m holds %s rows, want one per group: %s", got, want)
				}
			}
			// 25 minutes from baseTime, a whole hour: five 5-minute buckets.
			if got := query(t, c, "SELECT count(DISTINCT toStartOfInterval(TimeReceived, toIntervalSecond(300))) FROM flowzero.flows"); got != "5" {
				t.Errorf("flows span %s 5-minute buckets", got)
			}
		})
	}
}

// TestSinkGroupsSortedForEngine checks that the engine finds the pre-aggregated groups in its
// tables' order and skips its sort (aggsort.go): the flows_1m block, and the flows_5m and
// flows_1h views' blocks, the groups sharing a minute. With IPv4 exporters the groups' sort
// integers fit in 128 bits (the flows' blocks are sorted too); with IPv4 and IPv6 exporters
// they are wider (the engine sorts the flows' block). The tables hold the flows' sums.
func TestSinkGroupsSortedForEngine(t *testing.T) {
	s := mustSchema(t, schema.DefaultConfiguration())
	for _, tc := range []struct {
		name        string
		exporters   []string
		flowsSorted int
		// olderKey: the aggregated tables exist already, made by an earlier version with
		// the key's free part (after the primary key) in another order.
		olderKey bool
	}{
		{"ipv4", []string{"192.0.2.1", "192.0.2.2", "198.51.100.7"}, 1, false},
		{"ipv4 and ipv6", []string{"192.0.2.1", "2001:db8::1", "2001:db8:42::7"}, 0, false},
		{"older key order", []string{"192.0.2.1", "192.0.2.2", "198.51.100.7"}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.BatchBytes = 64 << 20 // all the flows in one INSERT, at the Flush
			cfg.Embedded.FlushInterval = time.Hour
			cfg.Embedded.PreAggregateInterval = time.Hour
			var olderKey string
			if tc.olderKey {
				olderKey = createOlderAggregatedTables(t, cfg, s)
			}
			sink := startSink(t, cfg, s)
			if tc.olderKey {
				if got := query(t, sink.Conn(), "SELECT sorting_key FROM system.tables WHERE database = 'flowzero' AND name = 'flows_1m'"); got != olderKey {
					t.Fatalf("flows_1m's key is %q after the migration, want it kept: %q", got, olderKey)
				}
			}
			g := demo.NewGenerator(3)
			fm := s.NewFlowMessage()
			start := time.Unix(int64(baseTime), 0)
			for i := range 6000 {
				now := start.Add(time.Duration(i) * 9 * time.Millisecond) // 54 s: one minute
				f := g.Next(now)
				e := i % len(tc.exporters)
				fillDemoFlow(fm, &f, now, netip.MustParseAddr(tc.exporters[e]), fmt.Sprintf("edge%d", i%40))
				sink.Write(fm.Finalize())
			}
			c := sink.Conn()
			blocks0, sorted0 := engineEvent(t, c, "MergeTreeDataWriterBlocks"), engineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted")
			if err := sink.Flush(); err != nil {
				t.Fatal(err)
			}
			blocks := engineEvent(t, c, "MergeTreeDataWriterBlocks") - blocks0
			sorted := engineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted") - sorted0
			// One block of flows, then flows_1m, flows_5m and flows_1h.
			if blocks != 4 || sorted != 3+tc.flowsSorted {
				t.Errorf("the engine wrote %d blocks, %d of them sorted already; want 4 and %d", blocks, sorted, 3+tc.flowsSorted)
			}
			if n := query(t, c, "SELECT count() FROM flowzero.flows_1m"); query(t, c, "SELECT "+n+" BETWEEN 1000 AND 6000") != "1" {
				t.Errorf("flows_1m holds %s groups of 6000 flows", n)
			}
			checkAggregates(t, c, sink.DDL())
		})
	}
}

// createOlderAggregatedTables creates the aggregated tables as the DDL does, but with the
// free part of their key (after the primary key) reversed, as a version with another order
// would have left them, and returns that key as system.tables shows it.
func createOlderAggregatedTables(t *testing.T, cfg Configuration, s *schema.Schema) string {
	t.Helper()
	ddl := NewDDL(cfg, s, t.TempDir())
	_, key, primaryLen := ddl.aggregatedColumns()
	older := slices.Clone(key)
	slices.Reverse(older[primaryLen:])
	c := openEngine(t, cfg)
	defer c.Close()
	if err := c.Exec("CREATE DATABASE IF NOT EXISTS flowzero"); err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg.Resolutions {
		create := ddl.AggregatedObjects(r)[0].Create
		from, to := "ORDER BY ("+strings.Join(key, ", ")+")", "ORDER BY ("+strings.Join(older, ", ")+")"
		if !strings.Contains(create, from) {
			t.Fatalf("no %q in %s", from, create)
		}
		if err := c.Exec(strings.Replace(create, from, to, 1)); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(older, ", ")
}

// distinctGroups counts the groups of the flows table at resolution iv.
func distinctGroups(t *testing.T, c *chdb.Conn, ddl *DDL, iv time.Duration) string {
	t.Helper()
	cols, _, _ := ddl.aggregatedColumns()
	dims := []string{fmt.Sprintf("toStartOfInterval(TimeReceived, toIntervalSecond(%d))", int64(iv/time.Second))}
	for _, col := range cols {
		if col.Dimension && col.Name != "TimeReceived" {
			dims = append(dims, col.Name)
		}
	}
	return query(t, c, "SELECT count() FROM (SELECT DISTINCT "+strings.Join(dims, ", ")+" FROM flowzero.flows)")
}

// writeDemoFlows writes n demo flows every apart from baseTime, from two exporter addresses
// and 300 exporter names.
func writeDemoFlows(sink *Sink, s *schema.Schema, n int, every time.Duration) {
	g := demo.NewGenerator(7)
	fm := s.NewFlowMessage()
	exporters := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	start := time.Unix(int64(baseTime), 0)
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("edge%d", i)
	}
	for i := range n {
		now := start.Add(time.Duration(i) * every)
		f := g.Next(now)
		// 300 names: the aggregated block's dictionary needs 16-bit indexes.
		fillDemoFlow(fm, &f, now, exporters[i%2], names[i%len(names)])
		sink.Write(fm.Finalize())
	}
}

// TestMigratePreAggregation switches pre-aggregation on over an installation whose flows_1m
// is fed by its view, then off again: the migration drops the view (dry run first: the step
// is shown and nothing changes), the data stays, and no flow is counted twice in flows_1m
// (nor in the 5m/1h tables fed from it); off, the view is created again.
func TestMigratePreAggregation(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 256 << 10
	cfg.Embedded.QueueLength = 100
	s := mustSchema(t, schema.DefaultConfiguration())
	const n = 1000
	hasView := func(c *chdb.Conn) bool {
		return query(t, c, "SELECT count() FROM system.tables WHERE database = 'flowzero' AND name = 'flows_1m_consumer'") == "1"
	}
	var wantBytes string // sum(Bytes) of one round of flows
	for round, preAgg := range []bool{false, true, true, false} {
		cfg.Embedded.PreAggregate = preAgg
		if round > 0 {
			// What the migration will do, without doing it.
			c := openEngine(t, cfg)
			dry := migrate(t, c, NewDDL(cfg, s, t.TempDir()), true)
			var actions []string
			for _, st := range dry {
				actions = append(actions, st.Object+": "+st.Action)
			}
			want := map[int]string{1: "flows_1m_consumer: drop (the sink pre-aggregates flows_1m)", 3: "flows_1m_consumer: create"}[round]
			if got := strings.Join(actions, "\n"); got != want {
				t.Errorf("round %d: dry run %q, want %q", round, got, want)
			}
			if hasView(c) != (round == 1) {
				t.Errorf("round %d: the dry run changed the view", round)
			}
			c.Close()
		}
		sink := startSink(t, cfg, s)
		c := sink.Conn()
		if hasView(c) == preAgg {
			t.Errorf("round %d, pre-aggregate=%v: flows_1m view present: %v", round, preAgg, hasView(c))
		}
		writeDemoFlows(sink, s, n, 150*time.Millisecond)
		if err := sink.Flush(); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			wantBytes = query(t, c, "SELECT sum(Bytes) FROM flowzero.flows")
		}
		if got := query(t, c, "SELECT count() FROM flowzero.flows"); got != fmt.Sprint((round+1)*n) {
			t.Errorf("round %d: %s flows", round, got)
		}
		for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
			if got, want := query(t, c, "SELECT sum(Bytes) = "+fmt.Sprint(round+1)+" * "+wantBytes+" FROM flowzero."+table), "1"; got != want {
				t.Errorf("round %d: %s holds %s bytes, want %d × %s", round, table,
					query(t, c, "SELECT sum(Bytes) FROM flowzero."+table), round+1, wantBytes)
			}
		}
		checkAggregates(t, c, sink.DDL())
		if err := sink.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPreAggregationTimeRounding checks that the sink rounds TimeReceived as the views do,
// toStartOfInterval with an interval in seconds, in time zones with offsets of half and
// quarter hours too.
func TestPreAggregationTimeRounding(t *testing.T) {
	c := openEngine(t, testConfig(t, t.TempDir()))
	defer c.Close()
	for _, tz := range []string{"UTC", "Europe/Paris", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns", "Australia/Eucla"} {
		for _, iv := range []uint32{1, 30, 60, 300, 3600, 86400} {
			for _, ts := range []uint32{0, 1790000000, 1790012345, 1790054321, 1<<32 - 1} {
				got := query(t, c, fmt.Sprintf("SELECT toUnixTimestamp(toStartOfInterval(toDateTime(%d), toIntervalSecond(%d))) SETTINGS session_timezone = '%s'", ts, iv, tz))
				if want := fmt.Sprint(aggRoundTime(ts, iv)); got != want {
					t.Errorf("%s, %ds, %d: ClickHouse %s, the sink %s", tz, iv, ts, got, want)
				}
			}
		}
	}
}

// TestSinkPreAggregateInsertFails makes the pre-aggregated INSERT fail (flows_1m renamed
// away): the flows table keeps the batch, the error is returned by Flush and counted as a
// failed insert, and the batch's flows are counted as not aggregated, not as dropped.
func TestSinkPreAggregateInsertFails(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	c := sink.Conn()
	if err := c.Exec("RENAME TABLE flowzero.flows_1m TO flowzero.flows_1m_away"); err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	for _, f := range testFlows {
		sink.Write(f.encode(fm))
	}
	err := sink.Flush()
	var aggErr *aggregateInsertError
	if !errors.As(err, &aggErr) {
		t.Fatalf("Flush: %v, want the pre-aggregated insert's error", err)
	}
	if got := query(t, c, "SELECT count() FROM flowzero.flows"); got != fmt.Sprint(len(testFlows)) {
		t.Errorf("%s flows stored, want %d", got, len(testFlows))
	}
	if got := query(t, c, "SELECT count() FROM flowzero.flows_1m_away"); got != "0" {
		t.Errorf("flows_1m holds %s rows", got)
	}
	for name, want := range map[string]float64{"insert errors": 1, "not aggregated": float64(len(testFlows)),
		"dropped (insert error)": 0, "inserted": float64(len(testFlows))} {
		m := map[string]prometheus.Counter{"insert errors": sink.m.insertErrors, "not aggregated": sink.m.notAggregated,
			"dropped (insert error)": sink.m.droppedError, "inserted": sink.m.flows}[name]
		if got := promtest.ToFloat64(m); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Back in place, the next batches are aggregated again.
	if err := c.Exec("RENAME TABLE flowzero.flows_1m_away TO flowzero.flows_1m"); err != nil {
		t.Fatal(err)
	}
	sink.Write(testFlows[0].encode(fm))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m"); got != fmt.Sprint(testFlows[0].bytes) {
		t.Errorf("flows_1m after the failure: %s bytes, want %d", got, testFlows[0].bytes)
	}
}

// TestSinkPreAggregateWithoutFlush checks that the summed groups are inserted with no Flush:
// once pre-aggregate-interval has passed on the wall clock (no new batch comes to trigger
// it: one flow, whose span is 0, so only the timer can insert it), and at once when their
// flows span more than the interval (a replay, or a batch holding more than the interval's
// traffic: testFlows span 395 s).
func TestSinkPreAggregateWithoutFlush(t *testing.T) {
	for name, interval := range map[string]time.Duration{"timer": 300 * time.Millisecond, "span": time.Minute} {
		t.Run(name, func(t *testing.T) {
			flows := testFlows
			if name == "timer" {
				flows = testFlows[:1]
			}
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.PreAggregateInterval = interval
			s := mustSchema(t, schema.DefaultConfiguration())
			sink := startSink(t, cfg, s)
			c := sink.Conn()
			fm := s.NewFlowMessage()
			var want uint64
			for _, f := range flows {
				sink.Write(f.encode(fm))
				want += f.bytes
			}
			testutil.WaitUntil(t, "the groups in flows_1m without a Flush", func() bool {
				return query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m") == fmt.Sprint(want)
			})
			checkAggregates(t, c, sink.DDL())
		})
	}
}

// TestSinkPreAggregateBounded checks that pending groups taking aggMaxBytes of memory are
// inserted however far the interval: with the bound just above the empty table's slots, every
// batch's groups go in with it (only their own bytes reach the bound); with no bound, none
// before the Flush.
func TestSinkPreAggregateBounded(t *testing.T) {
	for name, bound := range map[string]int{"bounded": aggMinSlots*8 + 1, "unbounded": math.MaxInt} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.PreAggregateInterval = time.Hour
			s := mustSchema(t, schema.DefaultConfiguration())
			sink := newTestSink(t, prometheus.NewRegistry(), cfg, s)
			sink.aggMaxBytes = bound
			if err := sink.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sink.Stop() })
			c := sink.Conn()
			fm := s.NewFlowMessage()
			var total uint64
			for i, f := range testFlows {
				if i == 2 {
					// Two batches: the flush interval cuts the first.
					testutil.WaitUntil(t, "the first batch inserted", func() bool { return promtest.ToFloat64(sink.m.flows) == 2 })
				}
				sink.Write(f.encode(fm))
				total += f.bytes
			}
			if bound != math.MaxInt {
				testutil.WaitUntil(t, "the groups in flows_1m without a Flush", func() bool {
					return query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m") == fmt.Sprint(total)
				})
			} else {
				// The inserter counts a batch's flows once it is done with the batch, its
				// groups' INSERT included when they are due.
				testutil.WaitUntil(t, "both batches inserted", func() bool {
					return promtest.ToFloat64(sink.m.flows) == float64(len(testFlows))
				})
				if got := query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m"); got != "0" {
					t.Errorf("flows_1m before the Flush: %s bytes, want none", got)
				}
				if got := promtest.ToFloat64(sink.m.pendingFlows); got != float64(len(testFlows)) {
					t.Errorf("pending flows = %v, want %d", got, len(testFlows))
				}
				if got := promtest.ToFloat64(sink.m.pendingGroups); got < 1 {
					t.Errorf("pending groups = %v", got)
				}
			}
			if err := sink.Flush(); err != nil {
				t.Fatal(err)
			}
			checkAggregates(t, c, sink.DDL())
			if p, g := promtest.ToFloat64(sink.m.pendingFlows), promtest.ToFloat64(sink.m.pendingGroups); p != 0 || g != 0 {
				t.Errorf("after the Flush: %v flows and %v groups pending", p, g)
			}
			// The two batches' flows are of different minutes: either way, one row per group.
			if inserted, distinct := promtest.ToFloat64(sink.m.groups), distinctGroups(t, c, sink.DDL(), time.Minute); fmt.Sprint(inserted) != distinct {
				t.Errorf("%v groups inserted, %s distinct", inserted, distinct)
			}
		})
	}
}

// TestSinkPreAggregateFlowsInsertFails makes a flows INSERT fail (flows renamed away) while
// earlier batches' groups are pending: the groups are dropped with the failed batch, so that
// the aggregated tables never count flows the flows table lacks; the earlier flows are
// counted as not aggregated, the failed batch's as dropped. Back in place, later batches
// are aggregated again.
func TestSinkPreAggregateFlowsInsertFails(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.PreAggregateInterval = time.Hour
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	c := sink.Conn()
	fm := s.NewFlowMessage()
	first, second := testFlows[:2], testFlows[2:]
	for _, f := range first {
		sink.Write(f.encode(fm))
	}
	// The batch is cut by the flush interval: its flows are stored, its groups pending.
	testutil.WaitUntil(t, "the first batch inserted", func() bool {
		return promtest.ToFloat64(sink.m.flows) == float64(len(first))
	})
	if err := c.Exec("RENAME TABLE flowzero.flows TO flowzero.flows_away"); err != nil {
		t.Fatal(err)
	}
	for _, f := range second {
		sink.Write(f.encode(fm))
	}
	if err := sink.Flush(); err == nil {
		t.Fatal("Flush: no error with the flows table away")
	}
	if err := c.Exec("RENAME TABLE flowzero.flows_away TO flowzero.flows"); err != nil {
		t.Fatal(err)
	}
	if got := query(t, c, "SELECT count() FROM flowzero.flows_1m"); got != "0" {
		t.Errorf("flows_1m holds %s rows", got)
	}
	for name, want := range map[string]float64{"not aggregated": float64(len(first)),
		"dropped (insert error)": float64(len(second)), "inserted": float64(len(first))} {
		m := map[string]prometheus.Counter{"not aggregated": sink.m.notAggregated,
			"dropped (insert error)": sink.m.droppedError, "inserted": sink.m.flows}[name]
		if got := promtest.ToFloat64(m); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	sink.Write(testFlows[0].encode(fm))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m"); got != fmt.Sprint(testFlows[0].bytes) {
		t.Errorf("flows_1m after the failure: %s bytes, want %d", got, testFlows[0].bytes)
	}
}

// TestSinkCountsFramingError writes flows around a length prefix longer than what follows
// it: the flows before it are stored, and every flow of the batch is accounted for, inserted
// or dropped as malformed, although the rest of the batch cannot be cut into messages.
func TestSinkCountsFramingError(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.FlushInterval = time.Hour // one batch, cut by the Flush
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	for i := range 3 {
		sink.Write(testFlows[i].encode(fm))
	}
	sink.Write(append(pbwire.AppendVarint(nil, 1<<20), unframe(t, testFlows[0].encode(fm))...))
	for i := range 8 {
		sink.Write(testFlows[i%len(testFlows)].encode(fm))
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, sink.Conn(), "SELECT count(), sum(Bytes) FROM flowzero.flows"); got != "3\t65800" {
		t.Errorf("stored %q, want the three flows before the bad prefix", got)
	}
	inserted, invalid := promtest.ToFloat64(sink.m.flows), promtest.ToFloat64(sink.m.droppedInvalid)
	if inserted != 3 || invalid != 9 {
		t.Errorf("%v flows inserted and %v dropped as malformed, want 3 and 9 (the 12 written)", inserted, invalid)
	}
}
