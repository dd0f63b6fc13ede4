//go:build chdb

package store

import (
	"flowzero/internal/testutil"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/internal/storetest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// testConfig is the default configuration with small batches, in dir, and no TTL: the test
// flows are dated by Go's test clock (storetest.BaseTime), which FLOWZERO_TEST_CLOCK_OFFSET may
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

// newTestSink returns a sink on the test clock.
func newTestSink(t testing.TB, r prometheus.Registerer, cfg Configuration, s *schema.Schema) *Sink {
	t.Helper()
	sink, err := NewSink(r, cfg, Dependencies{Schema: s, Logger: storetest.QuietLogger(), Clock: testutil.Clock()})
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

// checkAggregates checks that every aggregated table of d holds exactly the flows table's
// bytes and packets per time bucket and dimensions (storetest.CheckAggregates).
func checkAggregates(t *testing.T, c *chdb.Conn, d *ddl.DDL) {
	t.Helper()
	cols, _, _ := d.AggregatedColumns()
	var dims []string
	for _, col := range cols {
		if col.Dimension {
			dims = append(dims, col.Name)
		}
	}
	var tables []storetest.Aggregated
	for _, r := range d.Resolutions() {
		tables = append(tables, storetest.Aggregated{Table: ddl.AggregatedTableName(r), Interval: r.Interval})
	}
	storetest.CheckAggregates(t, c, dims, tables)
}
