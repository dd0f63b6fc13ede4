//go:build chdb

package querytest

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/demo"
	"flowzero/query/catalog"
	"flowzero/schema"
	"flowzero/store"
	"flowzero/store/engine"
)

// The benchmark data set (make bench-query): a mid-sized network's day, the demo's traffic
// at BenchFlowsPerSecond over 24 h in the aggregated tables and over the last hour (or the
// last FlowsHours) in the flows table.
const (
	BenchFlowsPerSecond = 5000
	// benchVersion changes when the data set changes: an older one is built again.
	benchVersion = 1
	// benchMaxAge is the age past which the data set is built again (flows_1m keeps 7 days).
	benchMaxAge = 5 * 24 * time.Hour
)

// BenchEnv is the benchmark data set in an embedded engine.
type BenchEnv struct {
	Dir    string
	Anchor time.Time // the end of the data: the minute after its newest flows
	// FlowsHours is how many hours before Anchor the flows table holds.
	FlowsHours int
	Schema     *schema.Schema
	Sink       *store.Sink
	Engine     engine.Embedded
	Catalog    *catalog.Catalog
	// Built is how long building the data set took (0 when an existing one was opened).
	Built time.Duration
	// Rows holds each table's row count.
	Rows map[string]uint64
}

type benchMarker struct {
	Version        int       `json:"version"`
	Anchor         time.Time `json:"anchor"`
	FlowsPerSecond int       `json:"flowsPerSecond"`
	// FlowsHours is 0 in the data sets made before it, which held one hour.
	FlowsHours   int     `json:"flowsHours,omitempty"`
	BuildSeconds float64 `json:"buildSeconds"`
}

// BenchConfig is the store configuration of the data set in dir: the collector's defaults.
func BenchConfig(dir string) store.Configuration {
	cfg := store.DefaultConfiguration()
	cfg.Embedded.Path = filepath.Join(dir, "chdb")
	return cfg
}

// OpenBench opens the data set kept in dir, or builds it there when dir holds none, an older
// version, another number of flows hours or one older than benchMaxAge. flowsHours (1 to 24)
// is how many hours the flows table holds: 1 is the data set, 24 a collector's day
// (the flows table keeps 15 days by default). now anchors a new data set. The engine holds
// one data directory per process.
func OpenBench(dir string, flowsHours int, now time.Time, log *slog.Logger) (*BenchEnv, error) {
	if flowsHours < 1 || flowsHours > 24 {
		return nil, fmt.Errorf("the flows table of the benchmark data set holds 1 to 24 hours, not %d", flowsHours)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &BenchEnv{Dir: dir, FlowsHours: flowsHours}
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		return nil, err
	}
	e.Schema = s
	var m benchMarker
	markerPath := filepath.Join(dir, "dataset.json")
	data, err := os.ReadFile(markerPath)
	reuse := err == nil && json.Unmarshal(data, &m) == nil && m.Version == benchVersion &&
		m.FlowsPerSecond == BenchFlowsPerSecond && max(m.FlowsHours, 1) == flowsHours && now.Sub(m.Anchor) < benchMaxAge
	if !reuse {
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// A whole hour: the minute generated starts a bucket of every resolution.
		m = benchMarker{Version: benchVersion, Anchor: now.UTC().Truncate(time.Hour), FlowsPerSecond: BenchFlowsPerSecond, FlowsHours: flowsHours}
	}
	e.Anchor = m.Anchor
	cfg := BenchConfig(dir)
	if e.Sink, err = store.NewSink(prometheus.NewRegistry(), cfg, store.Dependencies{Schema: s, Logger: log}); err != nil {
		return nil, err
	}
	if err := e.Sink.Start(); err != nil {
		return nil, err
	}
	e.Engine = engine.Embedded{Conn: e.Sink.Conn()}
	if e.Catalog, err = catalog.FromStore(s, cfg, e.Sink.DDL()); err != nil {
		e.Close()
		return nil, err
	}
	if !reuse {
		start := time.Now()
		if err := e.build(); err != nil {
			e.Close()
			return nil, fmt.Errorf("building the benchmark data set: %w", err)
		}
		e.Built = time.Since(start)
		m.BuildSeconds = e.Built.Seconds()
		data, _ := json.Marshal(m)
		if err := os.WriteFile(markerPath, data, 0o644); err != nil {
			e.Close()
			return nil, err
		}
	}
	e.Rows = map[string]uint64{}
	for _, t := range []string{"flows", "flows_1m", "flows_5m", "flows_1h"} {
		out, err := e.Engine.Conn.Query("SELECT count() FROM flowzero."+t, "TSV")
		if err != nil {
			e.Close()
			return nil, err
		}
		var n uint64
		fmt.Sscan(string(out), &n)
		e.Rows[t] = n
	}
	return e, nil
}

// benchInterfaces are the demo metadata's interfaces (app.DemoMetadata): four uplinks,
// external, 100 Gbps, and 24 customer ports, internal, 10 Gbps.
func benchInterface(i uint32) (name string, speed, boundary uint64) {
	if i >= 1 && i <= 4 {
		return fmt.Sprintf("et-0/0/%d", i-1), 100000, 1
	}
	if i >= 100 && i < 124 {
		return fmt.Sprintf("ge-1/0/%d", i-100), 10000, 2
	}
	return fmt.Sprintf("if%d", i), 0, 0
}

// build generates the minute [anchor − 1 h, anchor − 59 min) of the demo's traffic at
// BenchFlowsPerSecond, as the collector enriches it with the demo metadata, through the
// sink (the flows table, its pre-aggregation into flows_1m, the views into flows_5m and
// flows_1h), then copies it inside the engine: in the flows table over the last FlowsHours,
// in the aggregated tables over 24 h, doubling the range at each INSERT ... SELECT.
func (e *BenchEnv) build() error {
	t0 := e.Anchor.Add(-time.Hour)
	g := demo.NewGenerator(1)
	fm := e.Schema.NewFlowMessage()
	exporters := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")}
	names := []string{"edge1.par1", "edge2.par1", "edge3.par1"}
	n := BenchFlowsPerSecond * 60
	every := time.Minute / time.Duration(n)
	for i := 0; i < n; i++ {
		now := t0.Add(time.Duration(i) * every)
		f := g.Next(now)
		fm.Reset()
		fm.TimeReceived = uint64(now.Unix())
		fm.SamplingRate = 1000
		fm.ExporterAddress = exporters[i%len(exporters)]
		fm.SrcAddr, fm.DstAddr, fm.NextHop = f.Src, f.Dst, f.NextHop
		fm.SrcAS, fm.DstAS = f.SrcAS, f.DstAS
		fm.SrcNetMask, fm.DstNetMask = f.SrcMask, f.DstMask
		fm.InIf, fm.OutIf = f.InIf, f.OutIf
		fm.DstASPath = f.ASPath
		fm.AppendUint(schema.ColumnBytes, f.Bytes)
		fm.AppendUint(schema.ColumnPackets, f.Packets)
		fm.AppendUint(schema.ColumnSrcPort, uint64(f.SrcPort))
		fm.AppendUint(schema.ColumnDstPort, uint64(f.DstPort))
		fm.AppendUint(schema.ColumnProto, uint64(f.Proto))
		etype := uint64(0x800)
		if f.Src.Is6() {
			etype = 0x86dd
		}
		fm.AppendUint(schema.ColumnEType, etype)
		fm.AppendUint(schema.ColumnFlowDirection, uint64(f.Direction)+1)
		fm.AppendUint(schema.ColumnForwardingStatus, 64)
		fm.AppendString(schema.ColumnExporterName, names[i%len(names)])
		inName, inSpeed, inBoundary := benchInterface(f.InIf)
		outName, outSpeed, outBoundary := benchInterface(f.OutIf)
		fm.AppendString(schema.ColumnInIfName, inName)
		fm.AppendString(schema.ColumnOutIfName, outName)
		fm.AppendUint(schema.ColumnInIfSpeed, inSpeed)
		fm.AppendUint(schema.ColumnOutIfSpeed, outSpeed)
		fm.AppendUint(schema.ColumnInIfBoundary, inBoundary)
		fm.AppendUint(schema.ColumnOutIfBoundary, outBoundary)
		e.Sink.Write(fm.Finalize())
	}
	if err := e.Sink.Flush(); err != nil {
		return err
	}
	// The sink inserts in the background: wait for the minute in flows and flows_1m.
	want := fmt.Sprint(n)
	for deadline := time.Now().Add(10 * time.Minute); ; {
		got, err := e.Engine.Conn.Query("SELECT toString(count()) || ' ' || toString((SELECT sum(Flows) FROM flowzero.flows_1m)) FROM flowzero.flows", "TSVRaw")
		if err != nil {
			return err
		}
		if string(got) == want+" "+want+"\n" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sink stored %q flows (flows, flows_1m), not %d", got, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The copies do not go through the views: each table is filled from its own rows of
	// the minute, summed as a bucket of its resolution would be (five minutes, an hour of
	// the same traffic), then copied across the day.
	for _, v := range []string{"flows_5m_consumer", "flows_1h_consumer"} {
		if err := e.Engine.Conn.Exec("DROP VIEW IF EXISTS flowzero." + v); err != nil {
			return err
		}
	}
	for table, times := range map[string]int{"flows_5m": 4, "flows_1h": 59} {
		if err := e.Engine.Conn.Exec(fmt.Sprintf("INSERT INTO flowzero.%s SELECT * REPLACE (Bytes * %[2]d AS Bytes, Packets * %[2]d AS Packets, Flows * %[2]d AS Flows) "+
			"FROM flowzero.%[1]s SETTINGS max_threads = 2", table, times)); err != nil {
			return err
		}
	}
	day := e.Anchor.Add(-24 * time.Hour)
	for _, c := range []struct {
		table string
		span  time.Duration
		from  time.Time
	}{{"flows", time.Minute, e.Anchor.Add(-time.Duration(e.FlowsHours) * time.Hour)}, {"flows_1m", time.Minute, day}, {"flows_5m", 5 * time.Minute, day}, {"flows_1h", time.Hour, day}} {
		if err := e.double(c.table, t0, t0.Add(c.span), e.Anchor, 1); err != nil {
			return err
		}
		if err := e.double(c.table, t0, e.Anchor, c.from, -1); err != nil {
			return err
		}
	}
	for _, o := range e.Sink.DDL().Objects() {
		if o.Name == "flows_5m_consumer" || o.Name == "flows_1h_consumer" {
			if err := e.Engine.Conn.Exec(o.Create); err != nil {
				return err
			}
		}
	}
	return nil
}

// double copies the rows of table in [lo, hi) next to themselves (after hi with dir 1,
// before lo with dir -1) until the rows reach limit.
func (e *BenchEnv) double(table string, lo, hi, limit time.Time, dir int) error {
	for (dir > 0 && hi.Before(limit)) || (dir < 0 && lo.After(limit)) {
		span := hi.Sub(lo)
		from, to := lo, hi
		shift := span
		if dir > 0 {
			if hi.Add(span).After(limit) {
				to = lo.Add(limit.Sub(hi))
			}
		} else {
			shift = -span
			if lo.Add(-span).Before(limit) {
				from = hi.Add(limit.Sub(lo))
			}
		}
		// The subquery's WHERE reads the stored times, not the shifted ones (an alias).
		sql := fmt.Sprintf("INSERT INTO flowzero.%s SELECT * REPLACE (TimeReceived + toIntervalSecond(%d) AS TimeReceived) FROM (SELECT * FROM flowzero.%s "+
			"WHERE TimeReceived >= toDateTime(%d) AND TimeReceived < toDateTime(%d)) SETTINGS max_threads = 2",
			table, int64(shift/time.Second), table, from.Unix(), to.Unix())
		if err := e.Engine.Conn.Exec(sql); err != nil {
			return err
		}
		if dir > 0 {
			hi = hi.Add(to.Sub(from))
		} else {
			lo = lo.Add(-to.Sub(from))
		}
	}
	return nil
}

// Close stops the sink (the data set stays in Dir).
func (e *BenchEnv) Close() {
	if e.Sink != nil {
		e.Sink.Stop()
	}
}
