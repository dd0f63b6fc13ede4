package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreOutputRefusesServer checks that the store output refuses a ClickHouse server in
// mode all, which has no units to insert with deduplication tokens, and says how flows reach
// one; with the output off, the same section is valid (flowzero store migrate reads it), and
// so it is in mode outlet.
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
	os.WriteFile(path, []byte("mode: outlet\ndatagrams: {brokers: [127.0.0.1:9092]}\noutputs:\n"+
		"  store:\n    clickhouse: {url: http://127.0.0.1:8123}\n    enabled: true\n"), 0o644)
	if _, err := Load(path); err != nil {
		t.Errorf("mode outlet inserting into a server: %v", err)
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

// loadYAML loads doc as a configuration file.
func loadYAML(t *testing.T, doc string) (Configuration, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "collector.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

// TestConfigurationErrorsNameKeys: each mistake of issue 24's hostile configurations is
// refused with the full key of the value at fault (and its line when it comes from the
// file), never in a library's words alone; prefixes with host bits are refused wherever a
// prefix is configured.
func TestConfigurationErrorsNameKeys(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"collector: {exporters: {allow: [10.0.0.0/33]}}",
			`line 1: collector.exporters.allow[0]: "10.0.0.0/33" is not a prefix (address/length): prefix length out of range`},
		{"collector:\n  exporters:\n    allow: [10.0.0.0/8, 192.0.2.1/24]\n",
			`line 3: collector.exporters.allow[1]: 192.0.2.1/24 has host bits set (192.0.2.0/24 or 192.0.2.1/32?)`},
		{"netflow:\n  packet: {decapsulation: geneve}\n",
			`line 2: netflow.packet.decapsulation: unknown decapsulation "geneve" (want none, gre, ipip, vxlan or srv6)`},
		{"sflow:\n  packet:\n    decapsulation: mpls\n",
			`line 3: sflow.packet.decapsulation: unknown decapsulation "mpls"`},
		{"routing:\n  bmp:\n    enabled: true\n    rds: [\"65000:1\", \"1:2:3:4\"]\n",
			`line 4: routing.bmp.rds[1]: route distinguisher "1:2:3:4": too many colons`},
		{"routing: {bmp: {enabled: true, allowed-routers: [10.0.0.1/24]}}",
			`routing.bmp.allowed-routers[0]: 10.0.0.1/24 has host bits set`},
		{"netflow: {sampling-rates: [{exporter: 10.0.0.1/24, default: 10}]}",
			`netflow.sampling-rates[0].exporter: 10.0.0.1/24 has host bits set`},
		{"enrich:\n  exporters:\n    10.0.0.1/24: {name: edge1}\n",
			`enrich.exporters.10.0.0.1/24: 10.0.0.1/24 has host bits set (10.0.0.0/24 or 10.0.0.1/32?)`},
		{"collector:\n  listeners:\n    - {protocol: netflow, address: ':2055', wrokers: 4}\n",
			`line 3: collector.listeners[0]: unknown key "wrokers"`},
		{"collector:\n  listeners:\n    - {protocol: netflow, address: ':2055', workers: 0}\n",
			`collector.listeners[0].workers: must be in 1..64, not 0`},
		{"outputs: {kafka: {enabled: true, partitions: many}}",
			"line 1: outputs.kafka.partitions: cannot unmarshal !!str `many` into int32"},
	} {
		_, err := loadYAML(t, c.doc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v\nwant an error containing %q", c.doc, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "netip.") {
			t.Errorf("%q: %v speaks Go, not configuration", c.doc, err)
		}
	}
}

// TestListenerItemDefaults: a listener written with only its protocol and address gets the
// documented workers (2) and receive buffer (8 MiB), as the default listeners have.
func TestListenerItemDefaults(t *testing.T) {
	cfg, err := loadYAML(t, "collector:\n  listeners:\n    - {protocol: netflow, address: ':2055'}\n"+
		"    - {protocol: sflow, address: ':6343', workers: 4}\n    - {protocol: netflow, address: ':4739', receive-buffer: 0}\n")
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Collector.Listeners
	if len(l) != 3 || l[0].Workers != 2 || l[0].ReceiveBuffer != 8<<20 || l[1].Workers != 4 || l[1].ReceiveBuffer != 8<<20 ||
		l[2].Workers != 2 || l[2].ReceiveBuffer != 0 {
		t.Errorf("listeners %+v: want the defaults for the keys not written", l)
	}
	if def := DefaultConfiguration().Collector.Listeners[0]; def.Workers != 2 || def.ReceiveBuffer != 8<<20 {
		t.Errorf("default listener %+v", def)
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
