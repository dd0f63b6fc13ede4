//go:build chdb

package store

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/testutil"
	"flowzero/schema"
	"flowzero/store/chdb"
)

// The engine holds one data directory per process: tests using it never run in parallel and
// close what they open.

func quietLogger() *slog.Logger { return quietTestLogger() }

// testConfig is the default configuration with small batches, in dir, and no TTL: the test
// flows are dated by Go's test clock (baseTime), which FLOWZERO_TEST_CLOCK_OFFSET may move
// away from the engine's, which expires rows. The tests about retention set their TTLs.
func testConfig(t testing.TB, dir string) Configuration {
	cfg := DefaultConfiguration()
	cfg.TTL = 0
	for i := range cfg.Resolutions {
		cfg.Resolutions[i].TTL = 0
	}
	cfg.Embedded.Path = filepath.Join(dir, "chdb")
	cfg.Embedded.BatchBytes = 4096
	cfg.Embedded.FlushInterval = 100 * time.Millisecond
	cfg.Embedded.MaxThreads = 2
	return cfg
}

// openEngine opens the engine for cfg without migrating. The connection is closed at the
// end of the test if it was not before, so that a failed test leaves the engine free for
// the next one.
func openEngine(t testing.TB, cfg Configuration) *chdb.Conn {
	t.Helper()
	c, err := chdb.Open(cfg.Embedded.Path, append(EngineArgs(), "--max_threads=2")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func query(t testing.TB, c *chdb.Conn, sql string) string {
	t.Helper()
	out, err := c.Query(sql, "TSVRaw")
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.TrimRight(string(out), "\n")
}

// engineNow returns the engine's clock as a Unix time. The engine reads the time through
// its own clock_gettime, which neither Go's test clock nor faketime moves: the tests whose
// outcome depends on the engine's idea of now (TTL) take it from there.
func engineNow(t testing.TB, c *chdb.Conn) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(query(t, c, "SELECT toUnixTimestamp(now())"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// newTestSink returns a sink on the test clock.
func newTestSink(t testing.TB, r prometheus.Registerer, cfg Configuration, s *schema.Schema) *Sink {
	t.Helper()
	sink, err := NewSink(r, cfg, Dependencies{Schema: s, Logger: quietLogger(), Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

// startSink starts a sink stopped at the end of the test, even when it fails.
func startSink(t testing.TB, cfg Configuration, s *schema.Schema) *Sink {
	t.Helper()
	sink := newTestSink(t, prometheus.NewRegistry(), cfg, s)
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Stop() })
	return sink
}

func migrate(t testing.TB, c *chdb.Conn, ddl *DDL, dryRun bool) []Step {
	t.Helper()
	m := &Migrator{DDL: ddl, Exec: Embedded{Conn: c}, Logger: quietLogger()}
	steps, err := m.Migrate(context.Background(), dryRun)
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

// testFlow is one flow with the values the tests read back.
type testFlow struct {
	time             uint64
	sampling         uint64
	exporter         string
	src, dst         string
	srcPort, dstPort uint64
	proto, etype     uint64
	srcAS, dstAS     uint32
	srcMask, dstMask uint8
	inIf, outIf      uint32
	bytes, packets   uint64
	asPath           []uint32
	direction        uint64
	exporterName     string
	srcCountry       string
	srcVlan, dstVlan uint16
}

var testFlows = []testFlow{
	{baseTime + 5, 1000, "192.0.2.1", "198.51.100.7", "203.0.113.9", 443, 51000, 6, 0x800, 64500, 64501, 24, 16, 10, 20, 1500, 1, []uint32{64501, 3356}, 1, "edge1", "FR", 0, 0},
	{baseTime + 35, 1000, "192.0.2.1", "198.51.100.8", "203.0.113.9", 53, 40000, 17, 0x800, 64500, 64501, 24, 16, 10, 20, 300, 3, []uint32{64501}, 1, "edge1", "FR", 0, 0},
	{baseTime + 70, 1000, "192.0.2.1", "198.51.100.7", "203.0.113.10", 443, 51001, 6, 0x800, 64500, 64502, 24, 24, 10, 21, 64000, 50, []uint32{64502, 174, 2914}, 2, "edge1", "DE", 0, 0},
	{baseTime + 400, 512, "2001:db8::1", "2001:db8:1::5", "2001:db8:2::6", 22, 60022, 6, 0x86dd, 0, 64510, 48, 32, 3, 4, 9000, 6, nil, 1, "edge2", "US", 0, 0},
}

func (f testFlow) encode(fm *schema.FlowMessage) []byte {
	fm.Reset()
	fm.TimeReceived = f.time
	fm.SamplingRate = f.sampling
	fm.ExporterAddress = netip.MustParseAddr(f.exporter)
	fm.SrcAddr = netip.MustParseAddr(f.src)
	fm.DstAddr = netip.MustParseAddr(f.dst)
	fm.SrcAS, fm.DstAS = f.srcAS, f.dstAS
	fm.SrcNetMask, fm.DstNetMask = f.srcMask, f.dstMask
	fm.InIf, fm.OutIf = f.inIf, f.outIf
	fm.DstASPath = f.asPath
	fm.SrcVlan, fm.DstVlan = f.srcVlan, f.dstVlan
	fm.AppendUint(schema.ColumnBytes, f.bytes)
	fm.AppendUint(schema.ColumnPackets, f.packets)
	fm.AppendUint(schema.ColumnSrcPort, f.srcPort)
	fm.AppendUint(schema.ColumnDstPort, f.dstPort)
	fm.AppendUint(schema.ColumnProto, f.proto)
	fm.AppendUint(schema.ColumnEType, f.etype)
	fm.AppendUint(schema.ColumnFlowDirection, f.direction)
	fm.AppendString(schema.ColumnExporterName, f.exporterName)
	fm.AppendString(schema.ColumnSrcCountry, f.srcCountry)
	return fm.Finalize()
}
