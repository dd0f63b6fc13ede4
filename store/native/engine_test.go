//go:build chdb

package native

import (
	"bytes"
	"context"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestNativeMatchesProtobuf inserts the same messages (every flow of the real captures, a
// flow with every kind of column set, and 70,000 distinct interface names so that the
// LowCardinality indexes take 8, 16 and 32 bits) once through ClickHouse's Protobuf input and
// once converted by Encoder, with every column enabled: both tables hold exactly the
// same rows, materialized columns included.
func TestNativeMatchesProtobuf(t *testing.T) {
	s := storetest.AllColumnsSchema(t)
	msgs := storetest.CaptureMessages(t, s)
	msgs = append(msgs, nativeTestMessage(s, storetest.BaseTime))
	fm := s.NewFlowMessage()
	for i := range 70000 {
		fm.Reset()
		fm.TimeReceived = storetest.BaseTime + uint64(i%3600)
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
	if got := storetest.Query(t, c, "SELECT uniqExact(InIfName), uniqExact(OutIfName) FROM flowzero.flows_native"); got != "70001\t301" {
		t.Errorf("distinct interface names: %s", got)
	}
	// The engine squashed the blocks: one part per INSERT, as with Protobuf. The flows are
	// in one daily partition (storetest.BaseTime) and the table's merges are stopped, so
	// that the parts are exactly those the INSERTs wrote.
	if got := storetest.Query(t, c, "SELECT count() FROM system.parts WHERE database = 'flowzero' AND table = 'flows_native' AND level = 0"); got != "3" {
		t.Errorf("%s parts for 3 inserts", got)
	}
}

// compareNativeProtobuf inserts each batch of messages once through ClickHouse's Protobuf
// input into flowzero.flows and once converted by Encoder (blocks of blockRows rows)
// into flowzero.flows_native, then checks that both tables hold the same rows, wire and
// materialized columns. It returns the engine connection for more checks, and how many
// times the Native inserts' parts were written, and found already sorted by the engine.
func compareNativeProtobuf(t *testing.T, s *schema.Schema, blockRows int, batches [][][]byte) (c *chdb.Conn, parts, sorted int) {
	t.Helper()
	cfg := ddl.DefaultConfiguration()
	cfg.TTL, cfg.Resolutions = 0, nil // see storetest.BaseTime
	c = storetest.OpenEngine(t, t.TempDir())
	dir := t.TempDir()
	if _, err := ddl.WriteProto(dir, s); err != nil {
		t.Fatal(err)
	}
	d := ddl.New(cfg, s, dir, nil)
	m := &ddl.Migrator{DDL: d, Exec: engine.Embedded{Conn: c}, Logger: storetest.QuietLogger()}
	if _, err := m.Migrate(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE flowzero.flows_native AS flowzero.flows", "SYSTEM STOP MERGES flowzero.flows_native"} {
		if err := c.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	enc.blockRows = blockRows
	native := strings.Replace(d.NativeInsertStatement(enc.Columns()), d.FlowsTable(), "flowzero.flows_native", 1)
	total := 0
	for _, part := range batches {
		batch := []byte{}
		for _, m := range part {
			batch = append(batch, m...)
		}
		total += len(part)
		if _, err := c.Insert(d.InsertStatement(), "Protobuf", batch); err != nil {
			t.Fatal(err)
		}
		enc.Reset()
		if ok, err := enc.AppendDelimited(batch); ok != len(part) || err != nil {
			t.Fatalf("%d of %d messages converted: %v", ok, len(part), err)
		}
		parts0, sorted0 := storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocks"), storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted")
		if _, err := c.Insert(native, "Native", enc.Block()); err != nil {
			t.Fatal(err)
		}
		parts += storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocks") - parts0
		sorted += storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted") - sorted0
	}
	var cols []string
	for _, col := range s.Columns() {
		if col.OnWire() || col.ClickHouseMaterialized {
			cols = append(cols, col.Name)
		}
	}
	sel := func(table string) string {
		return storetest.Query(t, c, "SELECT "+strings.Join(cols, ", ")+" FROM flowzero."+table+" ORDER BY "+strings.Join(cols, ", "))
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
	all := storetest.AllColumnsSchema(t)
	mixed := append(sortTestFlows(def, storetest.BaseTime, 300, true), sortTestFlows(def, storetest.BaseTime, 300, false)...)
	for _, tc := range []struct {
		name    string
		s       *schema.Schema
		batches [][][]byte
		sorted  int
	}{
		{"default columns", def, [][][]byte{storetest.CaptureMessages(t, def), sortTestFlows(def, storetest.BaseTime, 20000, false), sortTestFlows(def, storetest.BaseTime, 20000, true)}, 3},
		{"all columns", all, [][][]byte{storetest.CaptureMessages(t, all), sortTestFlows(all, storetest.BaseTime, 20000, false)}, 2},
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
	s := storetest.AllColumnsSchema(t)
	fm := s.NewFlowMessage()
	fm.TimeReceived = storetest.BaseTime
	empty := bytes.Clone(fm.Finalize())
	full := nativeTestMessage(s, storetest.BaseTime)
	fm.Reset()
	fm.TimeReceived = storetest.BaseTime + 60
	fm.DstASPath = []uint32{174}
	fm.AppendUint(schema.ColumnBytes, 40)
	fm.AppendString(schema.ColumnInIfName, "et-0/0/1")
	path := bytes.Clone(fm.Finalize())
	fm.Reset()
	fm.TimeReceived = storetest.BaseTime + 120
	fm.AppendUint(schema.ColumnInIfBoundary, 2)
	fm.AppendUint(schema.ColumnFlowDirection, 0) // explicit default
	boundary := bytes.Clone(fm.Finalize())
	// Blocks of two rows: the first one has only TimeReceived, the last one of the second
	// batch only the full flow.
	batches := [][][]byte{
		{empty, empty, full, empty, path, boundary, empty, path, empty},
		{boundary, empty, empty, empty, full},
		storetest.CaptureMessages(t, s)[:50],
	}
	c, _, _ := compareNativeProtobuf(t, s, 2, batches)
	defer c.Close()
	// The materialized column from the array's first element, on rows with and without it.
	if got := storetest.Query(t, c, "SELECT groupArray(Dst1stAS) FROM (SELECT Dst1stAS FROM flowzero.flows_native WHERE TimeReceived < "+
		strconv.FormatUint(storetest.CaptureTime, 10)+" ORDER BY TimeReceived, Dst1stAS)"); got != "[0,0,0,0,0,0,0,0,3356,3356,174,174,0,0]" {
		t.Errorf("Dst1stAS: %s", got)
	}
}

// TestPreAggregationTimeRounding checks that the Aggregator rounds TimeReceived as the views do,
// toStartOfInterval with an interval in seconds, in time zones with offsets of half and
// quarter hours too.
func TestPreAggregationTimeRounding(t *testing.T) {
	c := storetest.OpenEngine(t, t.TempDir())
	for _, tz := range []string{"UTC", "Europe/Paris", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns", "Australia/Eucla"} {
		for _, iv := range []uint32{1, 30, 60, 300, 3600, 86400} {
			for _, ts := range []uint32{0, 1790000000, 1790012345, 1790054321, 1<<32 - 1} {
				got := storetest.Query(t, c, fmt.Sprintf("SELECT toUnixTimestamp(toStartOfInterval(toDateTime(%d), toIntervalSecond(%d))) SETTINGS session_timezone = '%s'", ts, iv, tz))
				if want := fmt.Sprint(aggRoundTime(ts, iv)); got != want {
					t.Errorf("%s, %ds, %d: ClickHouse %s, the sink %s", tz, iv, ts, got, want)
				}
			}
		}
	}
}
