//go:build chdb

package store

import (
	"flowzero/internal/testutil"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/internal/storetest"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSinkRoundTrip writes flows through the sink and reads back exact values from the flows
// table, its derived columns, the aggregated tables and the protocols dictionary.
func TestSinkRoundTrip(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	for _, f := range storetest.Flows {
		sink.Write(f.Encode(fm))
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	c := sink.Conn()
	got := storetest.Query(t, c, `SELECT toUnixTimestamp(TimeReceived), SamplingRate, ExporterAddress, SrcAddr, DstAddr,
		SrcPort, DstPort, Proto, EType, SrcAS, DstAS, SrcNetMask, DstNetMask, InIf, OutIf, Bytes, Packets,
		DstASPath, FlowDirection, ExporterName, SrcCountry, SrcNetPrefix, DstNetPrefix, Dst1stAS, Dst2ndAS,
		PacketSize, PacketSizeBucket, dictGet('flowzero.protocols', 'name', toUInt64(Proto))
		FROM flowzero.flows ORDER BY TimeReceived`)
	want := []string{
		fmt.Sprintf("%d\t1000\t::ffff:192.0.2.1\t::ffff:198.51.100.7\t::ffff:203.0.113.9\t443\t51000\t6\t2048\t64500\t64501\t24\t16\t10\t20\t1500\t1\t[64501,3356]\tingress\tedge1\tFR\t198.51.100.0/24\t203.0.0.0/16\t64501\t3356\t1500\t1280-1500\tTCP", storetest.BaseTime+5),
		fmt.Sprintf("%d\t1000\t::ffff:192.0.2.1\t::ffff:198.51.100.8\t::ffff:203.0.113.9\t53\t40000\t17\t2048\t64500\t64501\t24\t16\t10\t20\t300\t3\t[64501]\tingress\tedge1\tFR\t198.51.100.0/24\t203.0.0.0/16\t64501\t0\t100\t64-127\tUDP", storetest.BaseTime+35),
		fmt.Sprintf("%d\t1000\t::ffff:192.0.2.1\t::ffff:198.51.100.7\t::ffff:203.0.113.10\t443\t51001\t6\t2048\t64500\t64502\t24\t24\t10\t21\t64000\t50\t[64502,174,2914]\tegress\tedge1\tDE\t198.51.100.0/24\t203.0.113.0/24\t64502\t174\t1280\t1280-1500\tTCP", storetest.BaseTime+70),
		fmt.Sprintf("%d\t512\t2001:db8::1\t2001:db8:1::5\t2001:db8:2::6\t22\t60022\t6\t34525\t0\t64510\t48\t32\t3\t4\t9000\t6\t[]\tingress\tedge2\tUS\t2001:db8:1::/48\t2001:db8::/32\t0\t0\t1500\t1280-1500\tTCP", storetest.BaseTime+400),
	}
	if got != strings.Join(want, "\n") {
		t.Errorf("flows read back:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// flows_1m: the first two flows share the minute and every dimension but Proto.
	agg := storetest.Query(t, c, `SELECT toUnixTimestamp(TimeReceived), Proto, DstAS, sum(Bytes), sum(Packets)
		FROM flowzero.flows_1m GROUP BY ALL ORDER BY 1, 2, 3`)
	wantAgg := fmt.Sprintf("%d\t6\t64501\t1500\t1\n%d\t17\t64501\t300\t3\n%d\t6\t64502\t64000\t50\n%d\t6\t64510\t9000\t6",
		storetest.BaseTime, storetest.BaseTime, storetest.BaseTime+60, storetest.BaseTime+360)
	if agg != wantAgg {
		t.Errorf("flows_1m:\n%s\nwant:\n%s", agg, wantAgg)
	}
	agg = storetest.Query(t, c, `SELECT toUnixTimestamp(TimeReceived), count(), sum(Bytes), sum(Packets) FROM flowzero.flows_1h GROUP BY 1`)
	if want := fmt.Sprintf("%d\t4\t74800\t60", storetest.BaseTime); agg != want {
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
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	const n = 50 // about six batches: each INSERT writes a part, keep them few
	for i := 0; i < n; i++ {
		f := storetest.Flows[i%len(storetest.Flows)]
		f.SrcPort = uint64(i)
		sink.Write(f.Encode(fm))
	}
	// Size: about 1 KiB per batch, so several batches before any timer.
	testutil.WaitUntil(t, "three batches inserted", func() bool { return promtest.ToFloat64(sink.m.batches) >= 3 })
	sink.Write(storetest.Flows[0].Encode(fm))
	// Age: the last, small batch goes in without Flush.
	testutil.WaitUntil(t, "every flow inserted without a Flush", func() bool { return promtest.ToFloat64(sink.m.flows) == n+1 })
	if got := storetest.Query(t, sink.Conn(), "SELECT count(), uniqExact(SrcPort) FROM flowzero.flows"); got != fmt.Sprintf("%d\t%d", n+1, n+1) {
		t.Errorf("count, distinct ports = %q", got)
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	sink.Write(storetest.Flows[0].Encode(fm)) // after Stop: counted, not stored
	if d := promtest.ToFloat64(sink.m.droppedStopped); d != 1 {
		t.Errorf("dropped after stop = %v", d)
	}
}

// TestSinkStopKeepsConcurrentFlows stops the sink while writers keep writing: every flow is
// stored or counted as dropped, none is left in a batch that Stop neither inserts nor counts.
func TestSinkStopKeepsConcurrentFlows(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Embedded.BatchBytes = 16 << 10
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
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
				sink.Write(storetest.Flows[i%len(storetest.Flows)].Encode(fm))
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
	c := storetest.OpenEngine(t, cfg.Embedded.Path)
	defer c.Close()
	if got := storetest.Query(t, c, "SELECT count() FROM flowzero.flows"); got != fmt.Sprint(stored) {
		t.Errorf("flows table holds %s flows, the counter %v", got, stored)
	}
	checkAggregates(t, c, sink.DDL())
}

// TestTTLEmbedded checks that retention applies in the embedded engine: expired flows go at
// the next merge, in the flows table and in an aggregated table, even when their part holds
// live flows (the background TTL merges only drop whole expired parts, see
// TestTTLEmbeddedBackground).
func TestTTLEmbedded(t *testing.T) {
	c := writeAgedFlows(t, 1, false, nil).Conn()
	for _, table := range []string{"flows", "flows_1m"} {
		storetest.Query(t, c, "OPTIMIZE TABLE flowzero."+table+" FINAL")
		if got := storetest.Query(t, c, "SELECT count() FROM flowzero."+table); got != "1" {
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
	cfg.Resolutions = []ddl.Resolution{{Interval: time.Minute, TTL: time.Hour}}
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	for round := 1; round <= rounds; round++ {
		now := storetest.EngineNow(t, sink.Conn())
		for _, age := range []uint64{3 * 3600, 2 * 3600, 60} {
			f := storetest.Flows[0]
			f.Time = now - age
			sink.Write(f.Encode(fm))
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
			return storetest.Query(t, c, "SELECT (SELECT count() FROM flowzero.flows), (SELECT sum(Bytes) FROM flowzero.flows_1m)") == want
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
	// The child that writes says what it wrote: its storetest.BaseTime is its own clock's.
	_, wrote, _ := strings.Cut(run("write"), "WROTE ")
	wrote, _, _ = strings.Cut(wrote, "\n")
	if !strings.HasPrefix(wrote, fmt.Sprintf("%d\t%d\t", len(storetest.Flows), 74800)) {
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
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	switch phase {
	case "write":
		fm := s.NewFlowMessage()
		for _, f := range storetest.Flows {
			sink.Write(f.Encode(fm))
		}
		fmt.Printf("WROTE %d\t%d\t%d\n", len(storetest.Flows), 74800, storetest.BaseTime+400)
	case "read":
		fmt.Printf("RESULT %s\n", storetest.Query(t, sink.Conn(), "SELECT count(), sum(Bytes), max(toUnixTimestamp(TimeReceived)) FROM flowzero.flows"))
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
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	fm := s.NewFlowMessage()
	const n = 1000
	for i := 0; i < n; i++ {
		sink.Write(storetest.Flows[i%len(storetest.Flows)].Encode(fm))
	}
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	stored := promtest.ToFloat64(sink.m.flows)
	dropped := promtest.ToFloat64(sink.m.droppedFull)
	if dropped == 0 || stored+dropped != n {
		t.Errorf("stored %v + dropped %v != %d written (and some must be dropped)", stored, dropped, n)
	}
	if got := storetest.Query(t, sink.Conn(), "SELECT count() FROM flowzero.flows"); got != fmt.Sprint(stored) {
		t.Errorf("table holds %s flows, metrics say %v", got, stored)
	}
}

// TestSinkStartsOnce checks that a second Start, while the sink runs or after Stop, is an
// error that leaves the running sink as it was.
func TestSinkStartsOnce(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := storetest.MustSchema(t, schema.DefaultConfiguration())
	sink := startSink(t, cfg, s)
	if err := sink.Start(); err == nil || !strings.Contains(err.Error(), "started twice") {
		t.Fatalf("second Start: %v", err)
	}
	sink.Write(storetest.Flows[0].Encode(s.NewFlowMessage()))
	if err := sink.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Query(t, sink.Conn(), "SELECT count() FROM flowzero.flows"); got != "1" {
		t.Errorf("%s flows stored after a second Start, want 1", got)
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Start(); err == nil {
		t.Error("Start after Stop succeeded")
	}
}
