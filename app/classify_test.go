package app

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"flowzero/enrich"
	"flowzero/internal/testdata"
	"flowzero/schema"
)

// TestEnrichmentClassifiers replays the NetFlow v5 capture with classifier rules beside
// static metadata: static values win, rules fill the rest, and the flows through the
// interface a rule rejects are dropped.
func TestEnrichmentClassifiers(t *testing.T) {
	cfg := testConfig(t)
	cfg.Enrich.Exporters = map[string]enrich.ExporterMetadata{
		"127.0.0.0/8": {Name: "replay1.lab2", Interfaces: map[uint32]enrich.InterfaceMetadata{
			124: {Name: "et-0/0/124", Description: "Transit: Cogent 1-234", Boundary: "internal"},
		}},
	}
	cfg.Enrich.Dynamic.ExporterClassifiers = []string{`ClassifySiteRegex(Exporter.Name, "^[^.]+\\.([a-z]+)", "$1")`}
	cfg.Enrich.Dynamic.InterfaceClassifiers = []string{
		`Interface.Index == 118 && Reject()`,
		`ClassifyConnectivityRegex(Interface.Description, "^(?i)(transit|pni|ix):? ", "$1") && ClassifyProviderRegex(Interface.Description, "^[^ ]+? ([^ ]+)", "$1") && ClassifyExternal()`,
		`SetName(Format("if%d", Interface.Index)) && ClassifyInternal()`,
	}
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	replayGroups(t, a, [][]string{{testdata.Path(t, "netflow", "nfv5.pcap")}}, 29-5)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	flows := 0
	for _, msg := range archivedMessages(t, cfg) {
		got := map[string]any{}
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v })
		if got["ExporterName"] != "replay1.lab2" || got["ExporterSite"] != "lab" {
			t.Errorf("exporter columns: %v", got)
		}
		if got["InIf"] == uint64(118) {
			t.Errorf("flow through a rejected interface: %v", got)
		}
		for _, dir := range []string{"In", "Out"} {
			index := got[dir+"If"].(uint64)
			want := map[string]any{"Name": fmt.Sprintf("if%d", index), "Boundary": uint64(schema.BoundaryInternal), "Provider": nil, "Connectivity": nil}
			if index == 124 {
				// The static name and boundary win; rules classify the static description.
				want = map[string]any{"Name": "et-0/0/124", "Boundary": uint64(schema.BoundaryInternal), "Provider": "cogent", "Connectivity": "transit"}
			}
			for k, v := range want {
				if got[dir+"If"+k] != v {
					t.Errorf("%sIf %d: %s %v, want %v", dir, index, k, got[dir+"If"+k], v)
				}
			}
		}
		flows++
	}
	if flows != 24 {
		t.Fatalf("%d flows, want the 24 not through interface 118", flows)
	}
	families, err := a.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0.0
	for _, f := range families {
		if f.GetName() == "flowzero_enrich_rejected_flows_total" {
			for _, m := range f.GetMetric() {
				rejected += m.GetCounter().GetValue()
			}
		}
	}
	if rejected != 5 {
		t.Errorf("%v flows counted as rejected, want 5", rejected)
	}
}

// TestReloadClassifiers replays the NetFlow v5 capture, changes the classifier rules in the
// configuration file and reloads, and replays it again: the second replay's flows are
// classified by the new rules (the interfaces were cached by the first). A file with a rule
// that does not compile is refused with an error naming the rule and where, and the rules in
// use stay.
func TestReloadClassifiers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flowzero.yaml")
	write := func(rule string) {
		t.Helper()
		y := fmt.Sprintf(`
collector:
  listeners:
    - {protocol: netflow, address: "127.0.0.1:0", workers: 2}
  http: {listen: "127.0.0.1:0"}
  batch-interval: 20ms
outputs:
  file: {directory: %q}
enrich:
  interface-classifiers:
    - %s
`, filepath.Join(dir, "out"), rule)
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`ClassifyProvider("before")`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, testDeps())
	if err != nil {
		t.Fatal(err)
	}
	a.ConfigPath = path
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	capture := [][]string{{testdata.Path(t, "netflow", "nfv5.pcap")}}
	replayGroups(t, a, capture, 29)

	write(`ClassifyProvider("after")`)
	msg, err := a.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "enrich.interface-classifiers") {
		t.Errorf("reload message %q does not list the rules", msg)
	}
	write(`ClassifyProvider("broken"`)
	if _, err := a.Reload(); err == nil || !strings.Contains(err.Error(), "enrich.interface-classifiers[0]") ||
		!strings.Contains(err.Error(), "line 1, column") {
		t.Errorf("reload of a bad rule: %v", err)
	}
	replayGroups(t, a, capture, 2*29)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	providers := map[any]int{}
	for _, msg := range archivedMessages(t, cfg) {
		got := map[string]any{}
		a.Schema().DecodeMessage(msg, func(c *schema.Column, v any) { got[c.Name] = v })
		providers[got["InIfProvider"]]++
		if got["InIfProvider"] != got["OutIfProvider"] {
			t.Errorf("input and output interfaces classified by different rules: %v", got)
		}
	}
	if want := map[any]int{"before": 29, "after": 29}; !reflect.DeepEqual(providers, want) {
		t.Errorf("flows by provider: %v, want %v", providers, want)
	}
}
