package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreOutputRefusesServer checks that the store output, which only writes to the
// embedded engine, refuses a ClickHouse server and says how flows reach one; with the output
// off, the same section is valid (flowzero store migrate reads it).
func TestStoreOutputRefusesServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "collector.yaml")
	server := "  store:\n    clickhouse: {url: http://127.0.0.1:8123}\n    kafka: {enabled: true}\n"
	os.WriteFile(path, []byte("outputs:\n"+server+"    enabled: true\n"), 0o644)
	_, err := Load(path)
	if err == nil {
		t.Fatal("outputs.store enabled with a server URL accepted")
	}
	for _, want := range []string{"outputs.store.clickhouse.url: ", "outputs.kafka", "flowzero store migrate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	os.WriteFile(path, []byte("outputs:\n"+server+"    enabled: false\n"), 0o644)
	if _, err := Load(path); err != nil {
		t.Errorf("the store output off: %v", err)
	}
}

// TestCaptureFlowsNeedServer checks that capture.flows.enable alone, which would do nothing
// without the capture server, is refused with the key named.
func TestCaptureFlowsNeedServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "collector.yaml")
	os.WriteFile(path, []byte("capture:\n  flows: {enable: true}\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "capture.flows.enable: needs capture.enabled: true") {
		t.Errorf("capture.flows.enable without capture.enabled: %v", err)
	}
	os.WriteFile(path, []byte("capture:\n  enabled: true\n  flows: {enable: true}\n"), 0o644)
	if _, err := Load(path); err != nil {
		t.Errorf("capture with flows: %v", err)
	}
}

// TestConfigurationSplit: mode and the sections of a split collector are checked, naming the
// key.
func TestConfigurationSplit(t *testing.T) {
	for _, tc := range []struct {
		change func(*Configuration)
		key    string
	}{
		{func(c *Configuration) { c.Mode = "both" }, "mode"},
		{func(c *Configuration) { c.Mode = ModeInlet; c.Datagrams.Brokers = nil }, "datagrams.brokers"},
		{func(c *Configuration) { c.Mode = ModeInlet; c.Inlet.Key = "flow" }, "inlet.key"},
		{func(c *Configuration) { c.Mode = ModeInlet; c.Collector.Listeners = nil }, "collector.listeners"},
		{func(c *Configuration) { c.Mode = ModeOutlet; c.Outlet.Group = "" }, "outlet.group"},
		{func(c *Configuration) { c.Mode = ModeOutlet; c.Datagrams.Partitions = 0 }, "datagrams.partitions"},
	} {
		c := DefaultConfiguration()
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: got %v, want an error naming the key", tc.key, err)
		}
	}
	for _, mode := range []string{ModeAll, ModeInlet, ModeOutlet} {
		c := DefaultConfiguration()
		c.Mode = mode
		if err := c.Validate(); err != nil {
			t.Errorf("mode %s with the defaults: %v", mode, err)
		}
	}
}
