//go:build chdb

package query

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"flowzero/query/internal/querytest"
)

// cpuTime is the CPU time the process has used (the engine runs in it): less sensitive
// than wall time to other work on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkQuery measures the console's queries on the benchmark data set (make
// bench-query; docs/design/query.md): the demo's traffic at 5,000 flows/s, 24 h in the
// aggregated tables and the last hour in the flows table, kept in
// FLOWZERO_BENCH_QUERY_DIR (built there the first time, several minutes). Each query runs
// on the table the service chooses (table=auto), and the range queries also on the flows
// table (table=flows); a Sankey over 24 h ending on no bucket reads its range split across
// the tables. FLOWZERO_BENCH_QUERY_FLOWS_HOURS (1 to 24, default 1) sets how many hours the
// flows table holds: 24 is a collector's day, where a query forced onto the flows table reads
// the whole range (make bench-query-day). Without FLOWZERO_BENCH_QUERY_DIR, it is skipped.
func BenchmarkQuery(b *testing.B) {
	dir := os.Getenv("FLOWZERO_BENCH_QUERY_DIR")
	if dir == "" {
		b.Skip("FLOWZERO_BENCH_QUERY_DIR names no directory for the data set (make bench-query)")
	}
	flowsHours := 1
	if v := os.Getenv("FLOWZERO_BENCH_QUERY_FLOWS_HOURS"); v != "" {
		var err error
		if flowsHours, err = strconv.Atoi(v); err != nil {
			b.Fatalf("FLOWZERO_BENCH_QUERY_FLOWS_HOURS: %v", err)
		}
	}
	e, err := querytest.OpenBench(dir, flowsHours, time.Now(), slog.Default())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if e.Built > 0 {
		b.Logf("data set built in %s", e.Built.Round(time.Second))
	}
	b.Logf("data set in %s, anchored at %s, %d h in the flows table: %v rows", dir, e.Anchor.Format(time.RFC3339), e.FlowsHours, e.Rows)
	cfg := DefaultConfiguration()
	cfg.Timeout = 5 * time.Minute
	cfg.MaxMemory = 8 << 30
	s, err := New(cfg, e.Catalog, e.Engine, fixedClock{e.Anchor}, slog.Default())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	end := e.Anchor
	filter := cfg.DefaultFilter
	run := func(name string, f func() (string, error)) {
		b.Run(name, func(b *testing.B) {
			var table string
			cpu := cpuTime()
			for b.Loop() {
				t, err := f()
				if err != nil {
					b.Fatal(err)
				}
				table = t
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
			b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op")
			if table != "" {
				b.Logf("table %s", table)
			}
		})
	}
	// The home page's widgets.
	run("query=home/widget=flow-rate", func() (string, error) { _, err := s.FlowRate(ctx); return "", err })
	run("query=home/widget=exporters", func() (string, error) { _, err := s.Exporters(ctx); return "", err })
	run("query=home/widget=last-flow", func() (string, error) { _, err := s.LastFlow(ctx); return "", err })
	run("query=home/widget=top-SrcAS", func() (string, error) { _, err := s.Top(ctx, "SrcAS", filter); return "", err })
	run("query=home/widget=graph-24h", func() (string, error) {
		r, err := s.Graph(ctx, 0, filter)
		if err != nil {
			return "", err
		}
		return r.Table, nil
	})
	for _, table := range []string{"auto", "flows"} {
		for _, c := range []struct {
			name  string
			since time.Duration
		}{{"top10-SrcAS-1h", time.Hour}, {"top10-SrcAS-24h", 24 * time.Hour}, {"top10-SrcAS-7d", 7 * 24 * time.Hour}} {
			req := LineRequest{Common: Common{Start: end.Add(-c.since), End: end, Dimensions: []string{"SrcAS"}, Limit: 10,
				Filter: filter, Table: table}, Points: cfg.Points}
			run("query="+c.name+"/table="+table, func() (string, error) {
				r, err := s.Line(ctx, req)
				if err != nil {
					return "", err
				}
				return r.Table, nil
			})
		}
		line := LineRequest{Common: Common{Start: end.Add(-24 * time.Hour), End: end, Dimensions: []string{"SrcAS", "DstAS", "Proto"},
			Limit: 10, Filter: filter, Table: table}, Points: cfg.Points}
		run("query=series-3dims-24h/table="+table, func() (string, error) {
			r, err := s.Line(ctx, line)
			if err != nil {
				return "", err
			}
			return r.Table, nil
		})
		sankey := SankeyRequest{Common: Common{Start: end.Add(-6 * time.Hour), End: end, Dimensions: []string{"SrcAS", "InIfName", "DstAS"},
			Limit: 10, Filter: filter, Table: table}}
		run("query=sankey-3dims-6h/table="+table, func() (string, error) {
			r, err := s.Sankey(ctx, sankey)
			if err != nil {
				return "", err
			}
			return r.Table, nil
		})
		// A range ending at a time on no bucket, as the console's "last 24 hours" does.
		edge := end.Add(-17*time.Minute - 23*time.Second)
		sankey24 := SankeyRequest{Common: Common{Start: edge.Add(-24 * time.Hour), End: edge, Dimensions: []string{"SrcAS", "InIfName", "DstAS"},
			Limit: 10, Filter: filter, Table: table}}
		run("query=sankey-3dims-24h-unaligned/table="+table, func() (string, error) {
			r, err := s.Sankey(ctx, sankey24)
			if err != nil {
				return "", err
			}
			return r.Table, nil
		})
	}
}
