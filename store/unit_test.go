//go:build chdb

package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/demo"
	"flowzero/schema"
	"flowzero/store/internal/storetest"
)

// demoUnit returns n demo flows from the i-th on, length-delimited, as an outlet's unit.
func demoUnit(s *schema.Schema, from, n int) []byte { return demoFlows(s, from, n, nil) }

// demoFlows is demoUnit, with number (when not nil) adding columns to the i-th flow.
func demoFlows(s *schema.Schema, from, n int, number func(fm *schema.FlowMessage, i int)) []byte {
	g := demo.NewGenerator(uint64(from) + 1)
	fm := s.NewFlowMessage()
	start := time.Unix(int64(storetest.BaseTime), 0)
	var out []byte
	for i := from; i < from+n; i++ {
		now := start.Add(time.Duration(i) * 100 * time.Millisecond)
		f := g.Next(now)
		storetest.FillDemoFlow(fm, &f, now, netip.MustParseAddr("192.0.2.1"), fmt.Sprintf("edge%d", i%7))
		if number != nil {
			number(fm, i-from)
		}
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

// identityUnit returns n demo flows from the i-th on, as demoUnit, numbered as an outlet
// numbers them: partition p, one record offset per 10 flows from first.
func identityUnit(s *schema.Schema, from, n int, p uint64, first uint64) []byte {
	return demoFlows(s, from, n, func(fm *schema.FlowMessage, i int) {
		fm.AppendUint(schema.ColumnDatagramPartition, p)
		fm.AppendUint(schema.ColumnDatagramOffset, first+uint64(i)/10)
		fm.AppendUint(schema.ColumnDatagramIndex, uint64(i)%10)
	})
}

// TestSinkUnitRowsLostPart: the engine records a block's token before the block's part is
// committed, so a process killed in between leaves the token without the rows. Made here by
// deleting a unit's rows from every table after its insert: inserted again with its token it
// stores nothing, and UnitRows, by which an outlet replaying the unit chooses a new token
// (outlet.Outlet.replayToken), counts none of it; with a new token it is stored once, in the
// flows table and the aggregated ones, and inserted again with that token, nothing more.
// UnitRows counts the flows of the offsets within the times given, bounds included.
func TestSinkUnitRowsLostPart(t *testing.T) {
	for _, preAgg := range []bool{false, true} {
		t.Run(fmt.Sprintf("pre-aggregate=%v", preAgg), func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Embedded.PreAggregate = preAgg
			cfg.Deduplicate = true
			scfg := schema.DefaultConfiguration()
			scfg.Enabled = append(scfg.Enabled, "DatagramPartition", "DatagramOffset", "DatagramIndex")
			s := storetest.MustSchema(t, scfg)
			sink := newTestSink(t, prometheus.NewRegistry(), cfg, s)
			if err := sink.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sink.Stop() })
			c := sink.Conn()
			ctx := context.Background()
			const token, n = "datagrams-3-100-199", 1000
			// The unit's datagrams are offsets 100 to 199 of partition 3, ten flows each, its
			// flows received 100 ms apart from BaseTime: offset 100 + k at BaseTime + k s.
			base := uint64(storetest.BaseTime)
			unitRows := func(p int32, first, end int64, from, to uint64) int {
				t.Helper()
				rows, ok, err := sink.UnitRows(ctx, p, first, end, from, to)
				if err != nil || !ok {
					t.Fatalf("UnitRows(%d, %d, %d, %d, %d): %v, %v", p, first, end, from, to, ok, err)
				}
				return rows
			}
			unit := identityUnit(s, 0, n, 3, 100)
			if err := sink.InsertUnit(ctx, token, unit, n); err != nil {
				t.Fatal(err)
			}
			for _, r := range []struct {
				p          int32
				first, end int64
				from, to   uint64
				want       int
			}{
				{3, 100, 200, base, base + 99, n}, {3, 150, 160, base + 50, base + 59, 100},
				{3, 150, 160, base + 55, base + 55, 10}, {3, 150, 160, base, base + 49, 0},
				{3, 150, 160, base + 60, base + 99, 0}, {3, 100, 200, base, 1 << 40, n},
				{3, 0, 100, base, base + 99, 0}, {3, 200, 300, base, base + 99, 0}, {2, 100, 200, base, base + 99, 0},
			} {
				if got := unitRows(r.p, r.first, r.end, r.from, r.to); got != r.want {
					t.Errorf("UnitRows(%d, %d, %d, base+%d, base+%d) = %d, want %d", r.p, r.first, r.end, r.from-base, r.to-base, got, r.want)
				}
			}
			sums := storetest.Query(t, c, "SELECT count(), sum(Bytes) FROM flowzero.flows")
			for _, table := range []string{"flows", "flows_1m", "flows_5m", "flows_1h"} {
				// A mutation, not TRUNCATE, which empties the deduplication log too.
				storetest.Query(t, c, "ALTER TABLE flowzero."+table+" DELETE WHERE 1 SETTINGS mutations_sync = 1")
			}
			if err := sink.InsertUnit(ctx, token, unit, n); err != nil {
				t.Fatal(err)
			}
			if got := unitRows(3, 100, 200, base, base+99); got != 0 {
				t.Fatalf("premise: the unit inserted again with its token stored %d rows, want none", got)
			}
			for range 2 {
				if err := sink.InsertUnit(ctx, token+"/again-1", unit, n); err != nil {
					t.Fatal(err)
				}
				if got := storetest.Query(t, c, "SELECT count(), sum(Bytes) FROM flowzero.flows"); got != sums {
					t.Fatalf("flows table: count and sum %q, want %q", got, sums)
				}
				bytes := strings.Split(sums, "\t")[1]
				for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
					if got := storetest.Query(t, c, "SELECT sum(Bytes) FROM flowzero."+table); got != bytes {
						t.Errorf("%s: sum(Bytes) %s, want the flows' %s", table, got, bytes)
					}
				}
			}
		})
	}
}

// TestSinkUnitRowsWithoutIdentity: without the identity columns a sink cannot count a unit's
// flows, and says so.
func TestSinkUnitRowsWithoutIdentity(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	sink := newTestSink(t, prometheus.NewRegistry(), cfg, storetest.MustSchema(t, schema.DefaultConfiguration()))
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Stop() })
	if rows, ok, err := sink.UnitRows(context.Background(), 0, 0, 10, 0, 1); ok || err != nil || rows != 0 {
		t.Errorf("UnitRows without the identity columns: %d, %v, %v; want 0, false, nil", rows, ok, err)
	}
}

// BenchmarkSinkUnitRows: what counting a replayed unit's flows costs in a flows table of
// FLOWZERO_BENCH_UNIT_ROWS rows (default 20 M: 67 minutes at 5,000 flows/s, 20 flows per
// datagram over 8 partitions, written by INSERT ... SELECT), "bounded" as UnitRows counts
// (by the unit's TimeReceived range, then its identity), "identity" by the identity alone.
// Each iteration counts a unit of 50 datagrams drawn at random, so that no cache of the engine
// (its query condition cache) answers.
func BenchmarkSinkUnitRows(b *testing.B) {
	rows := 20_000_000
	if v := os.Getenv("FLOWZERO_BENCH_UNIT_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	const rate, perDatagram, partitions, unit = 5000, 20, 8, 50
	cfg := testConfig(b, b.TempDir())
	cfg.Deduplicate = true
	scfg := schema.DefaultConfiguration()
	scfg.Enabled = append(scfg.Enabled, "DatagramPartition", "DatagramOffset", "DatagramIndex")
	s := storetest.MustSchema(b, scfg)
	sink := startSink(b, cfg, s)
	base := uint64(storetest.BaseTime)
	// Flow n is the (n/20)-th datagram's, which went to partition d%8 at offset d/8.
	storetest.Query(b, sink.Conn(), fmt.Sprintf(`INSERT INTO flowzero.flows (TimeReceived, DatagramPartition, DatagramOffset, DatagramIndex, Bytes, Packets)
		SELECT toDateTime(%d + intDiv(number, %d)), intDiv(number, %d) %% %d, intDiv(intDiv(number, %d), %d), number %% %d, 1500, 1
		FROM numbers(%d)`, base, rate, perDatagram, partitions, perDatagram, partitions, perDatagram, rows))
	storetest.Query(b, sink.Conn(), "OPTIMIZE TABLE flowzero.flows FINAL")
	datagrams := int64(rows / perDatagram / partitions) // per partition
	for _, bounded := range []bool{true, false} {
		b.Run(map[bool]string{true: "bounded", false: "identity"}[bounded], func(b *testing.B) {
			for b.Loop() {
				p := rand.Int32N(partitions)
				first := rand.Int64N(datagrams - unit)
				var got int
				if bounded {
					// The unit's flows: datagrams first*8+p to (first+unit-1)*8+p.
					from := base + uint64(first*partitions+int64(p))*perDatagram/rate
					to := base + uint64((first+unit-1)*partitions+int64(p)+1)*perDatagram/rate
					n, ok, err := sink.UnitRows(context.Background(), p, first, first+unit, from, to)
					if err != nil || !ok {
						b.Fatal(ok, err)
					}
					got = n
				} else {
					out := storetest.Query(b, sink.Conn(), fmt.Sprintf("SELECT count() FROM flowzero.flows WHERE DatagramPartition = %d AND DatagramOffset >= %d AND DatagramOffset < %d", p, first, first+unit))
					got, _ = strconv.Atoi(out)
				}
				if got != unit*perDatagram {
					b.Fatalf("unit [%d, %d) of partition %d: %d flows, want %d", first, first+unit, p, got, unit*perDatagram)
				}
			}
		})
	}
}
