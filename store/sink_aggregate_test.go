//go:build chdb

package store

import (
	"context"
	"errors"
	"flowzero/demo"
	"flowzero/internal/testutil"
	"flowzero/pbwire"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
	"flowzero/store/native"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSinkDropsMalformedFlows checks that the sink inserts Native, and that a malformed
// message is left out and counted while the flows around it are stored, in the flows table
// and in the pre-aggregated ones: a message refused after some of its fields were converted
// adds nothing to any group.
func TestSinkDropsMalformedFlows(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	if sink.format != "Native" {
		t.Fatalf("sink inserts %s", sink.format)
	}
	fm := s.NewFlowMessage()
	sink.Write(storetest.Flows[0].Encode(fm))
	bad := pbwire.AppendVarint(nil, 2)
	bad = append(bad, byte(s.Column(schema.ColumnSrcNetMask).Field<<3), 0x80) // truncated varint
	sink.Write(bad)
	// A whole flow, then a TimeReceived past DateTime's range: refused after its Bytes.
	over := append([]byte(nil), storetest.Unframe(t, storetest.Flows[2].Encode(fm))...)
	over = append(over, byte(s.Column(schema.ColumnTimeReceived).Field<<3), 0x80, 0x80, 0x80, 0x80, 0x10)
	sink.Write(append(pbwire.AppendVarint(nil, uint64(len(over))), over...))
	sink.Write(storetest.Flows[1].Encode(fm))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Query(t, sink.Conn(), "SELECT count(), sum(Bytes) FROM flowzero.flows"); got != "2\t1800" {
		t.Errorf("stored %q, want the two good flows", got)
	}
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		if got := storetest.Query(t, sink.Conn(), "SELECT sum(Bytes), sum(Packets) FROM flowzero."+table); got != "1800\t4" {
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
			s := storetest.MustSchema(t, schema.DefaultConfiguration())
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
			if n := storetest.Query(t, c, "SELECT count() FROM flowzero.flows"); n != "10000" {
				t.Fatalf("%s flows stored", n)
			}
			checkAggregates(t, c, sink.DDL())
			if preAgg {
				// The sink grouped the batches: flows_1m got fewer rows than flows.
				if n := storetest.Query(t, c, "SELECT count() FROM flowzero.flows_1m"); storetest.Query(t, c, "SELECT "+n+" < 10000") != "1" {
					t.Errorf("flows_1m holds %s rows for 10000 flows", n)
				}
			}
			if tc.interval > 0 {
				// One INSERT of all the batches' groups: one row per group, merges stopped.
				if got, want := storetest.Query(t, c, "SELECT count() FROM flowzero.flows_1m"), distinctGroups(t, c, sink.DDL(), time.Minute); got != want {
					t.Errorf("flows_1m holds %s rows, want one per group: %s", got, want)
				}
			}
			// 25 minutes from storetest.BaseTime, a whole hour: five 5-minute buckets.
			if got := storetest.Query(t, c, "SELECT count(DISTINCT toStartOfInterval(TimeReceived, toIntervalSecond(300))) FROM flowzero.flows"); got != "5" {
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
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
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
				if got := storetest.Query(t, sink.Conn(), "SELECT sorting_key FROM system.tables WHERE database = 'flowzero' AND name = 'flows_1m'"); got != olderKey {
					t.Fatalf("flows_1m's key is %q after the migration, want it kept: %q", got, olderKey)
				}
			}
			g := demo.NewGenerator(3)
			fm := s.NewFlowMessage()
			start := time.Unix(int64(storetest.BaseTime), 0)
			for i := range 6000 {
				now := start.Add(time.Duration(i) * 9 * time.Millisecond) // 54 s: one minute
				f := g.Next(now)
				e := i % len(tc.exporters)
				storetest.FillDemoFlow(fm, &f, now, netip.MustParseAddr(tc.exporters[e]), fmt.Sprintf("edge%d", i%40))
				sink.Write(fm.Finalize())
			}
			c := sink.Conn()
			blocks0, sorted0 := storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocks"), storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted")
			if err := sink.Flush(); err != nil {
				t.Fatal(err)
			}
			blocks := storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocks") - blocks0
			sorted := storetest.EngineEvent(t, c, "MergeTreeDataWriterBlocksAlreadySorted") - sorted0
			// One block of flows, then flows_1m, flows_5m and flows_1h.
			if blocks != 4 || sorted != 3+tc.flowsSorted {
				t.Errorf("the engine wrote %d blocks, %d of them sorted already; want 4 and %d", blocks, sorted, 3+tc.flowsSorted)
			}
			if n := storetest.Query(t, c, "SELECT count() FROM flowzero.flows_1m"); storetest.Query(t, c, "SELECT "+n+" BETWEEN 1000 AND 6000") != "1" {
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
	d := NewDDL(cfg, s, t.TempDir())
	_, key, primaryLen := d.AggregatedColumns()
	older := slices.Clone(key)
	slices.Reverse(older[primaryLen:])
	c := storetest.OpenEngine(t, cfg.Embedded.Path)
	defer c.Close()
	if err := c.Exec("CREATE DATABASE IF NOT EXISTS flowzero"); err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg.Resolutions {
		create := d.AggregatedObjects(r)[0].Create
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
func distinctGroups(t *testing.T, c *chdb.Conn, d *ddl.DDL, iv time.Duration) string {
	t.Helper()
	cols, _, _ := d.AggregatedColumns()
	dims := []string{fmt.Sprintf("toStartOfInterval(TimeReceived, toIntervalSecond(%d))", int64(iv/time.Second))}
	for _, col := range cols {
		if col.Dimension && col.Name != "TimeReceived" {
			dims = append(dims, col.Name)
		}
	}
	return storetest.Query(t, c, "SELECT count() FROM (SELECT DISTINCT "+strings.Join(dims, ", ")+" FROM flowzero.flows)")
}

// writeDemoFlows writes n demo flows every apart from storetest.BaseTime, from two exporter addresses
// and 300 exporter names.
func writeDemoFlows(sink *Sink, s *schema.Schema, n int, every time.Duration) {
	g := demo.NewGenerator(7)
	fm := s.NewFlowMessage()
	exporters := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	start := time.Unix(int64(storetest.BaseTime), 0)
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("edge%d", i)
	}
	for i := range n {
		now := start.Add(time.Duration(i) * every)
		f := g.Next(now)
		// 300 names: the aggregated block's dictionary needs 16-bit indexes.
		storetest.FillDemoFlow(fm, &f, now, exporters[i%2], names[i%len(names)])
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
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	const n = 1000
	hasView := func(c *chdb.Conn) bool {
		return storetest.Query(t, c, "SELECT count() FROM system.tables WHERE database = 'flowzero' AND name = 'flows_1m_consumer'") == "1"
	}
	var wantBytes string // sum(Bytes) of one round of flows
	for round, preAgg := range []bool{false, true, true, false} {
		cfg.Embedded.PreAggregate = preAgg
		if round > 0 {
			// What the migration will do, without doing it.
			c := storetest.OpenEngine(t, cfg.Embedded.Path)
			m := &ddl.Migrator{DDL: NewDDL(cfg, s, t.TempDir()), Exec: engine.Embedded{Conn: c}, Logger: storetest.QuietLogger()}
			dry, err := m.Migrate(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
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
			wantBytes = storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows")
		}
		if got := storetest.Query(t, c, "SELECT count() FROM flowzero.flows"); got != fmt.Sprint((round+1)*n) {
			t.Errorf("round %d: %s flows", round, got)
		}
		for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
			if got, want := storetest.Query(t, c, "SELECT sum(Bytes) = "+fmt.Sprint(round+1)+" * "+wantBytes+" FROM flowzero."+table), "1"; got != want {
				t.Errorf("round %d: %s holds %s bytes, want %d × %s", round, table,
					storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero."+table), round+1, wantBytes)
			}
		}
		checkAggregates(t, c, sink.DDL())
		if err := sink.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSinkPreAggregateInsertFails makes the pre-aggregated INSERT fail (flows_1m renamed
// away): the flows table keeps the batch, the error is returned by Flush and counted as a
// failed insert, and the batch's flows are counted as not aggregated, not as dropped.
func TestSinkPreAggregateInsertFails(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	c := sink.Conn()
	if err := c.Exec("RENAME TABLE flowzero.flows_1m TO flowzero.flows_1m_away"); err != nil {
		t.Fatal(err)
	}
	fm := s.NewFlowMessage()
	for _, f := range storetest.Flows {
		sink.Write(f.Encode(fm))
	}
	err := sink.Flush()
	var aggErr *aggregateInsertError
	if !errors.As(err, &aggErr) {
		t.Fatalf("Flush: %v, want the pre-aggregated insert's error", err)
	}
	if got := storetest.Query(t, c, "SELECT count() FROM flowzero.flows"); got != fmt.Sprint(len(storetest.Flows)) {
		t.Errorf("%s flows stored, want %d", got, len(storetest.Flows))
	}
	if got := storetest.Query(t, c, "SELECT count() FROM flowzero.flows_1m_away"); got != "0" {
		t.Errorf("flows_1m holds %s rows", got)
	}
	for name, want := range map[string]float64{"insert errors": 1, "not aggregated": float64(len(storetest.Flows)),
		"dropped (insert error)": 0, "inserted": float64(len(storetest.Flows))} {
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
	sink.Write(storetest.Flows[0].Encode(fm))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m"); got != fmt.Sprint(storetest.Flows[0].Bytes) {
		t.Errorf("flows_1m after the failure: %s bytes, want %d", got, storetest.Flows[0].Bytes)
	}
}

// TestSinkPreAggregateWithoutFlush checks that the summed groups are inserted with no Flush:
// once pre-aggregate-interval has passed on the wall clock (no new batch comes to trigger
// it: one flow, whose span is 0, so only the timer can insert it), and at once when their
// flows span more than the interval (a replay, or a batch holding more than the interval's
// traffic: storetest.Flows span 395 s).
func TestSinkPreAggregateWithoutFlush(t *testing.T) {
	for name, interval := range map[string]time.Duration{"timer": 300 * time.Millisecond, "span": time.Minute} {
		t.Run(name, func(t *testing.T) {
			flows := storetest.Flows
			if name == "timer" {
				flows = storetest.Flows[:1]
			}
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.PreAggregateInterval = interval
			s := storetest.MustSchema(t, schema.DefaultConfiguration())
			sink := startSink(t, cfg, s)
			c := sink.Conn()
			fm := s.NewFlowMessage()
			var want uint64
			for _, f := range flows {
				sink.Write(f.Encode(fm))
				want += f.Bytes
			}
			testutil.WaitUntil(t, "the groups in flows_1m without a Flush", func() bool {
				return storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m") == fmt.Sprint(want)
			})
			checkAggregates(t, c, sink.DDL())
		})
	}
}

// TestSinkPreAggregateBounded checks that pending groups taking aggMaxBytes of memory are
// inserted however far the interval: with the bound just above an empty aggregator's
// memory (its table), every batch's groups go in with it (only their own bytes reach the
// bound); with no bound, none before the Flush.
func TestSinkPreAggregateBounded(t *testing.T) {
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	enc, err := native.NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := native.NewAggregator(enc, NewDDL(DefaultConfiguration(), s, "").AggregatedKeyDims(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for name, bound := range map[string]int{"bounded": empty.Bytes() + 1, "unbounded": math.MaxInt} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.PreAggregateInterval = time.Hour
			s := storetest.MustSchema(t, schema.DefaultConfiguration())
			sink := newTestSink(t, prometheus.NewRegistry(), cfg, s)
			sink.aggMaxBytes = bound
			if err := sink.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sink.Stop() })
			c := sink.Conn()
			fm := s.NewFlowMessage()
			var total uint64
			for i, f := range storetest.Flows {
				if i == 2 {
					// Two batches: the flush interval cuts the first.
					testutil.WaitUntil(t, "the first batch inserted", func() bool { return promtest.ToFloat64(sink.m.flows) == 2 })
				}
				sink.Write(f.Encode(fm))
				total += f.Bytes
			}
			if bound != math.MaxInt {
				testutil.WaitUntil(t, "the groups in flows_1m without a Flush", func() bool {
					return storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m") == fmt.Sprint(total)
				})
			} else {
				// The inserter counts a batch's flows once it is done with the batch, its
				// groups' INSERT included when they are due.
				testutil.WaitUntil(t, "both batches inserted", func() bool {
					return promtest.ToFloat64(sink.m.flows) == float64(len(storetest.Flows))
				})
				if got := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m"); got != "0" {
					t.Errorf("flows_1m before the Flush: %s bytes, want none", got)
				}
				if got := promtest.ToFloat64(sink.m.pendingFlows); got != float64(len(storetest.Flows)) {
					t.Errorf("pending flows = %v, want %d", got, len(storetest.Flows))
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
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	c := sink.Conn()
	fm := s.NewFlowMessage()
	first, second := storetest.Flows[:2], storetest.Flows[2:]
	for _, f := range first {
		sink.Write(f.Encode(fm))
	}
	// The batch is cut by the flush interval: its flows are stored, its groups pending.
	testutil.WaitUntil(t, "the first batch inserted", func() bool {
		return promtest.ToFloat64(sink.m.flows) == float64(len(first))
	})
	if err := c.Exec("RENAME TABLE flowzero.flows TO flowzero.flows_away"); err != nil {
		t.Fatal(err)
	}
	for _, f := range second {
		sink.Write(f.Encode(fm))
	}
	if err := sink.Flush(); err == nil {
		t.Fatal("Flush: no error with the flows table away")
	}
	if err := c.Exec("RENAME TABLE flowzero.flows_away TO flowzero.flows"); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Query(t, c, "SELECT count() FROM flowzero.flows_1m"); got != "0" {
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
	sink.Write(storetest.Flows[0].Encode(fm))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows_1m"); got != fmt.Sprint(storetest.Flows[0].Bytes) {
		t.Errorf("flows_1m after the failure: %s bytes, want %d", got, storetest.Flows[0].Bytes)
	}
}

// TestSinkCountsFramingError writes flows around a length prefix longer than what follows
// it: the flows before it are stored, and every flow of the batch is accounted for, inserted
// or dropped as malformed, although the rest of the batch cannot be cut into messages.
func TestSinkCountsFramingError(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.FlushInterval = time.Hour // one batch, cut by the Flush
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	for i := range 3 {
		sink.Write(storetest.Flows[i].Encode(fm))
	}
	sink.Write(append(pbwire.AppendVarint(nil, 1<<20), storetest.Unframe(t, storetest.Flows[0].Encode(fm))...))
	for i := range 8 {
		sink.Write(storetest.Flows[i%len(storetest.Flows)].Encode(fm))
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Query(t, sink.Conn(), "SELECT count(), sum(Bytes) FROM flowzero.flows"); got != "3\t65800" {
		t.Errorf("stored %q, want the three flows before the bad prefix", got)
	}
	inserted, invalid := promtest.ToFloat64(sink.m.flows), promtest.ToFloat64(sink.m.droppedInvalid)
	if inserted != 3 || invalid != 9 {
		t.Errorf("%v flows inserted and %v dropped as malformed, want 3 and 9 (the 12 written)", inserted, invalid)
	}
}
