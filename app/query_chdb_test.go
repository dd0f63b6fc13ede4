//go:build chdb

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"flowzero/demo"
	"flowzero/internal/testutil"
)

// TestQueryWhileInserting runs the collector with the embedded store fed by the demo
// exporters and queries its API while the sink inserts: the flows route sees the rows of
// one insert, then of later ones, without stopping the collector.
func TestQueryWhileInserting(t *testing.T) {
	cfg := testConfig(t)
	cfg.Outputs.File.Enabled = false
	cfg.Outputs.Store.Enabled = true
	cfg.Outputs.Store.Embedded.Path = filepath.Join(t.TempDir(), "chdb")
	cfg.Outputs.Store.Embedded.FlushInterval = 100 * time.Millisecond
	cfg.Outputs.Store.Embedded.MaxThreads = 2
	// The aggregated tables (the exporters widget reads flows_1m) with every insert.
	cfg.Outputs.Store.Embedded.PreAggregateInterval = 0
	cfg.Query.CacheDuration = 0
	cfg.Query.ClickHouseHTTP.Listen = "127.0.0.1:0"
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	d := demo.DefaultConfiguration()
	d.FlowsPerSecond = 200
	a.Demo = &d
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	base := "http://" + a.Collector().HTTPAddr() + "/api/v0/query/"
	post := func(route string, body any) (map[string]any, int) {
		t.Helper()
		data, _ := json.Marshal(body)
		res, err := http.Post(base+route, "application/json", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: %d %s", route, res.StatusCode, out)
		}
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", route, res.StatusCode, out)
		}
		return v, res.StatusCode
	}
	// How many flows the table holds, through the API: a table query without dimensions
	// on the flows table counts them.
	count := func() float64 {
		now := testutil.Now()
		v, _ := post("table", map[string]any{"start": now.Add(-time.Hour).Format(time.RFC3339),
			"end": now.Add(time.Minute).Format(time.RFC3339), "table": "flows", "units": "fps", "points": 1})
		rows := v["rows"].([]any)
		if len(rows) == 0 {
			return 0
		}
		f, _ := rows[0].(map[string]any)["flows"].(float64)
		return f
	}
	var first float64
	testutil.WaitUntil(t, "the query API to count stored flows", func() bool {
		first = count()
		return first > 0
	})
	testutil.WaitUntil(t, fmt.Sprintf("more than the %.0f flows of the first query, inserted since", first), func() bool {
		return count() > first
	})
	// The last flow stored, and the demo's traffic by source AS.
	now := testutil.Now()
	v, _ := post("flows", map[string]any{"start": now.Add(-time.Hour).Format(time.RFC3339),
		"end": now.Add(time.Minute).Format(time.RFC3339), "limit": 5})
	if rows := v["rows"].([]any); len(rows) != 5 {
		t.Errorf("flows route: %d rows, want 5", len(rows))
	}
	res, err := http.Get(base + "widgets/exporters")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var ex struct{ Count int }
	if err := json.Unmarshal(out, &ex); err != nil || res.StatusCode != 200 || ex.Count == 0 {
		t.Errorf("widgets/exporters: %d %s", res.StatusCode, out)
	}
	// The same store through ClickHouse's HTTP protocol (query.clickhouse-http), as
	// clickhouse-go and Grafana's data source read it, while the sink inserts.
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{a.chHTTP.Addr().String()}, Protocol: clickhouse.HTTP})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var stored uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM flowzero.flows").Scan(&stored); err != nil || float64(stored) < first {
		t.Errorf("ClickHouse protocol: %d flows (%v), want at least %.0f", stored, err, first)
	}
}
