//go:build chdb

package store

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"flowzero/demo"
	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// demoUnit returns n demo flows from the i-th on, length-delimited, as an outlet's unit.
func demoUnit(s *schema.Schema, from, n int) []byte {
	g := demo.NewGenerator(uint64(from) + 1)
	fm := s.NewFlowMessage()
	start := time.Unix(int64(storetest.BaseTime), 0)
	var out []byte
	for i := from; i < from+n; i++ {
		now := start.Add(time.Duration(i) * 100 * time.Millisecond)
		f := g.Next(now)
		storetest.FillDemoFlow(fm, &f, now, netip.MustParseAddr("192.0.2.1"), fmt.Sprintf("edge%d", i%7))
		out = append(out, fm.Finalize()...)
	}
	return out
}

// TestSinkInsertUnitDeduplicates: a unit inserted again with its token (an outlet replaying
// after a crash) adds nothing to the flows table nor to the aggregated tables, whether the
// views or the sink's pre-aggregation fill them; another token inserts. A data directory
// created without deduplication is migrated (ALTER TABLE ... MODIFY SETTING).
func TestSinkInsertUnitDeduplicates(t *testing.T) {
	for _, preAgg := range []bool{false, true} {
		t.Run(fmt.Sprintf("pre-aggregate=%v", preAgg), func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.PreAggregate = preAgg
			s := storetest.MustSchema(t, schema.DefaultConfiguration())
			// First without deduplication (mode all), then migrated.
			if err := startSink(t, cfg, s).Stop(); err != nil {
				t.Fatal(err)
			}
			cfg.Deduplicate = true
			sink := startSink(t, cfg, s)
			c := sink.Conn()
			for _, table := range []string{"flows", "flows_1m", "flows_5m", "flows_1h"} {
				if got := storetest.Query(t, c, "SELECT engine_full FROM system.tables WHERE database = 'flowzero' AND name = '"+table+"'"); !strings.Contains(got, "non_replicated_deduplication_window = 10000") {
					t.Errorf("%s not migrated: %s", table, got)
				}
			}
			ctx := context.Background()
			a, b := demoUnit(s, 0, 3000), demoUnit(s, 3000, 2000)
			if err := sink.InsertUnit(ctx, "datagrams-0-0-99", a, 3000); err != nil {
				t.Fatal(err)
			}
			bytesA := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows")
			for range 2 {
				if err := sink.InsertUnit(ctx, "datagrams-0-0-99", a, 3000); err != nil {
					t.Fatal(err)
				}
			}
			if err := sink.InsertUnit(ctx, "datagrams-1-0-99", b, 2000); err != nil {
				t.Fatal(err)
			}
			if got := storetest.Query(t, c, "SELECT count() FROM flowzero.flows"); got != "5000" {
				t.Errorf("%s flows stored, want 5000", got)
			}
			bytesAB := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero.flows")
			if bytesA == bytesAB || bytesA == "0" {
				t.Fatalf("sum(Bytes): %s after the first unit, %s after both", bytesA, bytesAB)
			}
			for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
				if got := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero."+table); got != bytesAB {
					t.Errorf("%s: sum(Bytes) %s, want the flows' %s", table, got, bytesAB)
				}
			}
			checkAggregates(t, c, sink.DDL())
			if _, ok := sink.DDL().PreAggregated(); ok != preAgg {
				t.Errorf("pre-aggregated: %v", ok)
			}
		})
	}
}
