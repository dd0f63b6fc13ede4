package app

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestQueryAPIWithoutEngine: a collector that stores no flows and knows no ClickHouse
// server answers the query routes with 503 and what to configure.
func TestQueryAPIWithoutEngine(t *testing.T) {
	cfg := testConfig(t)
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	for _, path := range []string{"config", "widgets/flow-rate", "line"} {
		res, err := http.Get("http://" + a.Collector().HTTPAddr() + "/api/v0/query/" + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var msg struct{ Message string }
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(msg.Message, "outputs.store.clickhouse.url") {
			t.Errorf("%s: %d %q, want 503 naming outputs.store.enabled and outputs.store.clickhouse.url", path, res.StatusCode, msg.Message)
		}
	}
}

// TestQueryConfiguration: the query section is checked with the rest, naming the key.
func TestQueryConfiguration(t *testing.T) {
	cfg := testConfig(t)
	cfg.Query.Points = 1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "query.points") {
		t.Errorf("got %v, want an error naming query.points", err)
	}
	cfg = testConfig(t)
	cfg.Outputs.Store.ClickHouse.URL = "ftp://127.0.0.1:8123"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "outputs.store.clickhouse.url") {
		t.Errorf("got %v, want an error naming outputs.store.clickhouse.url", err)
	}
}
