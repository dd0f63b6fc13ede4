//go:build chdb

package store

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/demo"
	"flowzero/pbwire"
	"flowzero/schema"
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

	cfg := testConfig(t, t.TempDir())
	cfg.Resolutions = nil
	c := openEngine(t, cfg)
	defer c.Close()
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
	enc.blockRows = 1000 // several blocks per INSERT, the last one partial
	native := strings.Replace(ddl.NativeInsertStatement(enc), ddl.FlowsTable(), "flowzero.flows_native", 1)
	// Three batches of several blocks: each block has its own LowCardinality keys.
	for _, part := range [][][]byte{msgs[:len(msgs)/3], msgs[len(msgs)/3 : 2*len(msgs)/3], msgs[2*len(msgs)/3:]} {
		batch := []byte{}
		for _, m := range part {
			batch = append(batch, m...)
		}
		if _, err := c.Insert(ddl.InsertStatement(), "Protobuf", batch); err != nil {
			t.Fatal(err)
		}
		enc.Reset()
		if ok, bad, err := enc.AppendDelimited(batch); ok != len(part) || bad != 0 {
			t.Fatalf("%d of %d messages converted: %v", ok, len(part), err)
		}
		if _, err := c.Insert(native, "Native", enc.Block()); err != nil {
			t.Fatal(err)
		}
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
	if n := strings.Count(pb, "\n") + 1; n != len(msgs) {
		t.Fatalf("%d rows inserted with Protobuf, want %d", n, len(msgs))
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
	if got := query(t, c, "SELECT uniqExact(InIfName), uniqExact(OutIfName) FROM flowzero.flows_native"); got != "70001\t301" {
		t.Errorf("distinct interface names: %s", got)
	}
	// The engine squashed the blocks: one part per INSERT, as with Protobuf.
	if got := query(t, c, "SELECT count() FROM system.parts WHERE database = 'flowzero' AND table = 'flows_native' AND level = 0"); got != "3" {
		t.Errorf("%s parts for 3 inserts", got)
	}
}

// TestSinkDropsMalformedFlows checks that the sink inserts Native, and that a malformed
// message is left out and counted while the flows around it are stored.
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
	sink.Write(testFlows[1].encode(fm))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, sink.Conn(), "SELECT count(), sum(Bytes) FROM flowzero.flows"); got != "2\t1800" {
		t.Errorf("stored %q, want the two good flows", got)
	}
	if n := testutil.ToFloat64(sink.m.droppedInvalid); n != 1 {
		t.Errorf("malformed flows dropped = %v, want 1", n)
	}
	if n := testutil.ToFloat64(sink.m.flows); n != 2 {
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

// TestAggregatesSumToFlows stores 20,000 demo flows spread over 25 minutes through the sink in
// small batches (many INSERTs, so many parts and merges), and checks that every aggregated
// table holds exactly the flows table's bytes and packets, per time bucket and per
// dimensions, with and without FINAL.
func TestAggregatesSumToFlows(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 64 << 10
	cfg.Embedded.QueueLength = 100 // written at memory speed: no batch may be dropped
	s := mustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	g := demo.NewGenerator(7)
	fm := s.NewFlowMessage()
	exporters := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	start := time.Unix(int64(baseTime), 0)
	for i := range 20000 {
		now := start.Add(time.Duration(i) * 75 * time.Millisecond)
		f := g.Next(now)
		fm.Reset()
		fm.TimeReceived = uint64(now.Unix())
		fm.SamplingRate = 1000
		fm.ExporterAddress = exporters[i%2]
		fm.SrcAddr, fm.DstAddr = f.Src, f.Dst
		fm.SrcAS, fm.DstAS = f.SrcAS, f.DstAS
		fm.InIf, fm.OutIf = f.InIf, f.OutIf
		fm.DstASPath = f.ASPath
		fm.AppendUint(schema.ColumnBytes, f.Bytes)
		fm.AppendUint(schema.ColumnPackets, f.Packets)
		fm.AppendUint(schema.ColumnProto, uint64(f.Proto))
		fm.AppendString(schema.ColumnExporterName, []string{"edge1", "edge2"}[i%2])
		sink.Write(fm.Finalize())
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	c := sink.Conn()
	if n := query(t, c, "SELECT count() FROM flowzero.flows"); n != "20000" {
		t.Fatalf("%s flows stored", n)
	}
	dims := "ExporterAddress, ExporterName, SrcAS, DstAS, InIf, OutIf, Proto, Dst1stAS"
	for _, r := range cfg.Resolutions {
		sec := fmt.Sprint(int64(r.Interval / time.Second))
		want := query(t, c, "SELECT toStartOfInterval(TimeReceived, toIntervalSecond("+sec+")) AS t, "+dims+", sum(Bytes), sum(Packets) FROM flowzero.flows GROUP BY ALL ORDER BY ALL")
		for _, final := range []string{"", " FINAL"} {
			got := query(t, c, "SELECT TimeReceived AS t, "+dims+", sum(Bytes), sum(Packets) FROM flowzero."+AggregatedTableName(r)+final+" GROUP BY ALL ORDER BY ALL")
			if got != want {
				t.Errorf("%s%s does not sum to the flows table (%d rows, want %d)", AggregatedTableName(r), final,
					strings.Count(got, "\n")+1, strings.Count(want, "\n")+1)
			}
		}
	}
	if got := query(t, c, "SELECT count(DISTINCT toStartOfInterval(TimeReceived, toIntervalSecond(300))) FROM flowzero.flows"); got < "5" {
		t.Errorf("flows span %s 5-minute buckets", got)
	}
}
