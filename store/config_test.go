package store

import (
	"strings"
	"testing"

	"flowzero/schema"
)

// TestSinkRefusesServer checks that a sink is not made for a ClickHouse server, which it
// would not write to.
func TestSinkRefusesServer(t *testing.T) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfiguration()
	cfg.ClickHouse.URL = "http://127.0.0.1:8123"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := NewSink(nil, cfg, s, nil); err == nil || !strings.Contains(err.Error(), "clickhouse.url: ") {
		t.Errorf("NewSink with a server: %v", err)
	}
}
